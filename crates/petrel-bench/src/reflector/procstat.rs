//! CPU time and RSS from `/proc` (Linux). Per-thread CPU and RSS follow the
//! reference benchmark (draarl-v1 §7.3): CPU = Σ first field of
//! `/proc/<pid>/task/*/schedstat` (ns on CPU), RSS = `VmRSS` of
//! `/proc/<pid>/status`. Whole-host CPU comes from the `cpu` line of
//! `/proc/stat` (proc(5)), because loopback delivery runs in softirq context
//! and, without `CONFIG_IRQ_TIME_ACCOUNTING`, is charged to whichever thread
//! happens to be on the CPU — so per-thread numbers alone can hide it.

use std::fs;

/// ns on CPU of the threads of `pid` whose name starts with `prefix` (all
/// threads for an empty prefix); `None` if `/proc` is unavailable.
pub(super) fn thread_cpu_ns(pid: u32, prefix: &str) -> Option<u64> {
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
pub(super) fn rss_bytes(pid: u32) -> Option<u64> {
    let status = fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
    let line = status.lines().find(|l| l.starts_with("VmRSS:"))?;
    let kib: u64 = line.split_whitespace().nth(1)?.parse().ok()?;
    Some(kib * 1024)
}

/// Whole-host CPU time summed over all CPUs, in clock ticks (`USER_HZ`).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub(super) struct HostCpu {
    /// user + nice + system + irq + softirq.
    pub busy: u64,
    /// softirq alone (tick-sampled; included in `busy`).
    pub softirq: u64,
    /// Time the hypervisor ran something else while this guest wanted a CPU.
    pub steal: u64,
    /// Online CPUs (the `cpuN` lines).
    pub cpus: usize,
}

/// Parses `/proc/stat` text; `None` if the aggregate `cpu` line is missing
/// or has fewer than the 8 fields every kernel since 2.6.11 writes.
pub(super) fn parse_proc_stat(text: &str) -> Option<HostCpu> {
    let line = text.lines().find(|l| l.starts_with("cpu "))?;
    let f: Vec<u64> = line
        .split_whitespace()
        .skip(1)
        .map(str::parse)
        .collect::<Result<_, _>>()
        .ok()?;
    // user nice system idle iowait irq softirq steal [guest guest_nice];
    // guest time is already inside user.
    let &[user, nice, system, _idle, _iowait, irq, softirq, steal, ..] = f.as_slice() else {
        return None;
    };
    let cpus = text
        .lines()
        .filter(|l| l.starts_with("cpu") && l.as_bytes().get(3).is_some_and(u8::is_ascii_digit))
        .count();
    Some(HostCpu {
        busy: user + nice + system + irq + softirq,
        softirq,
        steal,
        cpus,
    })
}

/// The host's CPU counters now.
pub(super) fn host_cpu() -> Option<HostCpu> {
    parse_proc_stat(&fs::read_to_string("/proc/stat").ok()?)
}

/// Clock ticks per second of `/proc/stat` (`USER_HZ`, 100 on Linux).
pub(super) fn clock_ticks_per_s() -> u64 {
    // SAFETY: sysconf only reads a constant; no pointers are involved.
    let hz = unsafe { libc::sysconf(libc::_SC_CLK_TCK) };
    u64::try_from(hz).ok().filter(|&h| h > 0).unwrap_or(100)
}

/// The 1-minute load average (`/proc/loadavg`, first field).
pub(super) fn load_avg_1m() -> Option<f64> {
    fs::read_to_string("/proc/loadavg")
        .ok()?
        .split_whitespace()
        .next()?
        .parse()
        .ok()
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

    #[test]
    fn parses_the_aggregate_cpu_line() {
        let text = "cpu  3071256 236252 416746 496317 10530 7 29275 29137 11 0\n\
                    cpu0 1535628 118126 208373 248158 5265 3 14637 14568 5 0\n\
                    cpu1 1535628 118126 208373 248159 5265 4 14638 14569 6 0\n\
                    intr 12345 0 0\n\
                    ctxt 999\n";
        let c = parse_proc_stat(text).unwrap();
        assert_eq!(c.busy, 3_071_256 + 236_252 + 416_746 + 7 + 29_275);
        assert_eq!((c.softirq, c.steal, c.cpus), (29_275, 29_137, 2));
    }

    #[test]
    fn rejects_short_or_missing_cpu_line() {
        assert_eq!(parse_proc_stat("cpu  1 2 3 4\n"), None);
        assert_eq!(parse_proc_stat("cpu0 1 2 3 4 5 6 7 8\n"), None);
        assert_eq!(parse_proc_stat("cpu  1 2 x 4 5 6 7 8\n"), None);
        assert_eq!(parse_proc_stat(""), None);
    }

    #[test]
    fn reads_this_host() {
        let c = host_cpu().unwrap();
        assert!(c.cpus >= 1 && c.busy > 0);
        assert!(clock_ticks_per_s() > 0);
        assert!(load_avg_1m().unwrap() >= 0.0);
    }
}
