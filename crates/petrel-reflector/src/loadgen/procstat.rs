//! CPU time and RSS from `/proc` (Linux), as the reference benchmark measures
//! them (draarl-v1 §7.3): CPU = Σ first field of `/proc/<pid>/task/*/schedstat`
//! (ns on CPU), RSS = `VmRSS` of `/proc/<pid>/status`.

use std::fs;

/// ns on CPU of the threads of `pid` whose name starts with `prefix` (all
/// threads for an empty prefix); `None` if `/proc` is unavailable.
pub fn thread_cpu_ns(pid: u32, prefix: &str) -> Option<u64> {
    let mut total = 0u64;
    for entry in fs::read_dir(format!("/proc/{pid}/task")).ok()? {
        let path = entry.ok()?.path();
        let comm = fs::read_to_string(path.join("comm")).unwrap_or_default();
        if !comm.starts_with(prefix) {
            continue;
        }
        let sched = fs::read_to_string(path.join("schedstat")).unwrap_or_default();
        total += sched
            .split_whitespace()
            .next()
            .and_then(|v| v.parse::<u64>().ok())
            .unwrap_or(0);
    }
    Some(total)
}

/// Resident set size of `pid` in bytes.
pub fn rss_bytes(pid: u32) -> Option<u64> {
    let status = fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
    let line = status.lines().find(|l| l.starts_with("VmRSS:"))?;
    let kib: u64 = line.split_whitespace().nth(1)?.parse().ok()?;
    Some(kib * 1024)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_own_process() {
        let pid = std::process::id();
        assert!(rss_bytes(pid).unwrap() > 0);
        assert!(thread_cpu_ns(pid, "").unwrap() > 0);
    }
}
