//! Process and host CPU time, memory and load, read from `/proc` and `getrusage`.
//!
//! Sources (all `proc(5)` unless noted):
//!
//! - **Process CPU** of this process: user + system time from
//!   `getrusage(RUSAGE_SELF)` (`getrusage(2)`), 100 % = one core busy
//!   (`specs/benchmarks.md` §A). Of the calling thread: `RUSAGE_THREAD`. Of
//!   ended, waited-for child processes: `RUSAGE_CHILDREN`.
//! - **Per-thread CPU of any process**: Σ first field of
//!   `/proc/<pid>/task/*/schedstat` (ns on CPU), optionally only threads whose
//!   `comm` starts with a prefix, as the reference benchmark measures it
//!   (draarl-v1 §7.3).
//! - **Whole-process CPU of any process**: `utime` + `stime` (fields 14 and
//!   15) of `/proc/<pid>/stat`, in clock ticks; unlike the per-thread sum it
//!   keeps the time of threads that have ended.
//! - **RSS**: `VmRSS` of `/proc/<pid>/status`; **peak RSS** of this process:
//!   `VmHWM`, resettable through `/proc/self/clear_refs` (Linux ≥ 4.0), else
//!   `ru_maxrss`; of any process: its `VmHWM`.
//! - **Host CPU**: the aggregate `cpu` line of `/proc/stat`. Loopback delivery runs
//!   in softirq context and, without `CONFIG_IRQ_TIME_ACCOUNTING`, is charged to
//!   whichever thread happens to be on the CPU, so per-thread numbers alone can
//!   hide it; the host line does not.
//! - **Open file descriptors** of any process: the entries of `/proc/<pid>/fd`.
//! - **UDP receive-buffer drops, whole host**: `RcvbufErrors` of the `Udp:`
//!   lines of `/proc/net/snmp` (datagrams the kernel discarded because a
//!   socket's receive buffer was full).
//! - **Load**: `/proc/loadavg`. **Host description**: `/proc/cpuinfo` (CPU model,
//!   logical cores), `/proc/sys/kernel/osrelease`.
//!
//! Readers return `None` where the source is missing (not Linux, `/proc` not
//! mounted, the process gone) instead of failing.

use std::fs;
use std::time::Duration;

/// A process id as `/proc` names it; [`std::process::id`] is this process.
pub type Pid = u32;

/// User + system CPU time of this whole process so far; `None` if `getrusage` fails.
pub fn process_cpu_time() -> Option<Duration> {
    rusage(libc::RUSAGE_SELF).map(|ru| timeval(ru.ru_utime) + timeval(ru.ru_stime))
}

/// User + system CPU time of this process's child processes that have ended and
/// been waited for (and of their waited-for descendants), so far
/// (`getrusage(RUSAGE_CHILDREN)`); `None` if `getrusage` fails.
pub fn children_cpu_time() -> Option<Duration> {
    rusage(libc::RUSAGE_CHILDREN).map(|ru| timeval(ru.ru_utime) + timeval(ru.ru_stime))
}

/// User + system CPU time of the calling thread so far; `None` if `getrusage` fails
/// or the platform has no per-thread usage.
pub fn thread_cpu_time() -> Option<Duration> {
    #[cfg(any(target_os = "linux", target_os = "android"))]
    {
        rusage(libc::RUSAGE_THREAD).map(|ru| timeval(ru.ru_utime) + timeval(ru.ru_stime))
    }
    #[cfg(not(any(target_os = "linux", target_os = "android")))]
    {
        None
    }
}

fn rusage(who: libc::c_int) -> Option<libc::rusage> {
    let mut usage = std::mem::MaybeUninit::<libc::rusage>::zeroed();
    // SAFETY: `usage` is a valid, writable rusage; getrusage only writes it.
    let rc = unsafe { libc::getrusage(who, usage.as_mut_ptr()) };
    if rc != 0 {
        return None;
    }
    // SAFETY: getrusage returned 0, so it filled the struct (and it was zeroed).
    Some(unsafe { usage.assume_init() })
}

fn timeval(tv: libc::timeval) -> Duration {
    let secs = u64::try_from(tv.tv_sec).unwrap_or(0);
    let micros = u32::try_from(tv.tv_usec).unwrap_or(0);
    Duration::from_secs(secs) + Duration::from_micros(u64::from(micros))
}

/// ns on CPU of the threads of `pid` whose name starts with `prefix` (all threads
/// for an empty prefix); `None` if `/proc/<pid>/task` cannot be read.
pub fn threads_cpu_ns(pid: Pid, prefix: &str) -> Option<u64> {
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

/// Resident set size of `pid` now, bytes (`VmRSS`).
pub fn rss_bytes(pid: Pid) -> Option<u64> {
    status_kib(&format!("/proc/{pid}/status"), "VmRSS:").map(|kib| kib * 1024)
}

/// Peak resident set size of `pid` since it started, bytes (`VmHWM`).
pub fn peak_rss_bytes_of(pid: Pid) -> Option<u64> {
    status_kib(&format!("/proc/{pid}/status"), "VmHWM:").map(|kib| kib * 1024)
}

/// `utime` + `stime` of a `/proc/<pid>/stat` line, clock ticks
/// ([`clock_ticks_per_s`]); `None` if the line has too few fields. The
/// command name (field 2) may hold spaces and parentheses, so fields are
/// counted from its last `)`.
pub fn parse_stat_cpu_ticks(stat: &str) -> Option<u64> {
    let rest = &stat[stat.rfind(')')? + 1..];
    // After the name: state (3), ppid (4), … utime (14), stime (15).
    let mut f = rest.split_whitespace().skip(11);
    let utime: u64 = f.next()?.parse().ok()?;
    let stime: u64 = f.next()?.parse().ok()?;
    Some(utime + stime)
}

/// User + system CPU time of the whole process `pid` so far (all its
/// threads, ended ones included), clock ticks; `None` if it is gone.
pub fn process_cpu_ticks(pid: Pid) -> Option<u64> {
    parse_stat_cpu_ticks(&fs::read_to_string(format!("/proc/{pid}/stat")).ok()?)
}

/// Peak resident set size of this process (bytes) since it started or since the
/// last successful [`reset_peak_rss`]: `VmHWM`, else `ru_maxrss` (which no reset
/// affects); `None` if both fail.
pub fn peak_rss_bytes() -> Option<u64> {
    status_kib("/proc/self/status", "VmHWM:")
        .or_else(|| {
            // Linux reports `ru_maxrss` in KiB.
            u64::try_from(rusage(libc::RUSAGE_SELF)?.ru_maxrss).ok()
        })
        .map(|kib| kib * 1024)
}

/// Resets the kernel's peak-RSS mark (`VmHWM`) to the current RSS, so that
/// [`peak_rss_bytes`] covers only what runs next. Writes `5` to
/// `/proc/self/clear_refs`; returns whether the kernel accepted it.
pub fn reset_peak_rss() -> bool {
    fs::write("/proc/self/clear_refs", "5").is_ok()
}

fn status_kib(path: &str, key: &str) -> Option<u64> {
    let status = fs::read_to_string(path).ok()?;
    let line = status.lines().find(|l| l.starts_with(key))?;
    line[key.len()..]
        .trim()
        .trim_end_matches("kB")
        .trim()
        .parse()
        .ok()
}

/// Open file descriptors of `pid` now: the entries of `/proc/<pid>/fd`
/// (reading it needs the same user as `pid`, or root).
pub fn open_fds(pid: Pid) -> Option<usize> {
    Some(fs::read_dir(format!("/proc/{pid}/fd")).ok()?.count())
}

/// `RcvbufErrors` from `/proc/net/snmp` text: the `Udp:` header line names the
/// fields and the next `Udp:` line holds their values; `None` if either line
/// or the field is missing or not a number.
pub fn parse_udp_rcvbuf_errors(snmp: &str) -> Option<u64> {
    let mut udp = snmp.lines().filter(|l| l.starts_with("Udp:"));
    let names = udp.next()?;
    let values = udp.next()?;
    let at = names.split_whitespace().position(|n| n == "RcvbufErrors")?;
    values.split_whitespace().nth(at)?.parse().ok()
}

/// Datagrams this host's kernel dropped so far because a UDP socket's receive
/// buffer was full (all sockets, IPv4 `Udp:` counters of `/proc/net/snmp`).
pub fn udp_rcvbuf_errors() -> Option<u64> {
    parse_udp_rcvbuf_errors(&fs::read_to_string("/proc/net/snmp").ok()?)
}

/// Whole-host CPU time summed over all CPUs, in clock ticks (`USER_HZ`, see
/// [`clock_ticks_per_s`]). Two readings give busy cores over an interval:
/// `Δbusy / ticks_per_s / seconds`.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct HostCpu {
    /// user + nice + system + irq + softirq.
    pub busy: u64,
    /// softirq alone (tick-sampled; included in `busy`).
    pub softirq: u64,
    /// Time the hypervisor ran something else while this guest wanted a CPU.
    pub steal: u64,
    /// Online CPUs (the `cpuN` lines).
    pub cpus: usize,
}

/// Parses `/proc/stat` text; `None` if the aggregate `cpu` line is missing or has
/// fewer than the 8 fields every kernel since 2.6.11 writes.
pub fn parse_proc_stat(text: &str) -> Option<HostCpu> {
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
pub fn host_cpu() -> Option<HostCpu> {
    parse_proc_stat(&fs::read_to_string("/proc/stat").ok()?)
}

/// Clock ticks per second of `/proc/stat` (`USER_HZ`, 100 on Linux).
pub fn clock_ticks_per_s() -> u64 {
    // SAFETY: sysconf only reads a constant; no pointers are involved.
    let hz = unsafe { libc::sysconf(libc::_SC_CLK_TCK) };
    u64::try_from(hz).ok().filter(|&h| h > 0).unwrap_or(100)
}

/// `/proc/loadavg` as the kernel writes it, trimmed: the 1, 5 and 15-minute load
/// averages, running/total tasks and the last pid, e.g. `0.52 0.58 0.59 1/123 4567`.
pub fn loadavg_line() -> Option<String> {
    fs::read_to_string("/proc/loadavg")
        .ok()
        .map(|l| l.trim().to_owned())
}

/// The 1-minute load average (`/proc/loadavg`, first field).
pub fn load_avg_1m() -> Option<f64> {
    loadavg_line()?.split_whitespace().next()?.parse().ok()
}

/// The `model name` of the first processor in `/proc/cpuinfo` text.
pub fn cpu_model_from_cpuinfo(cpuinfo: &str) -> Option<String> {
    cpuinfo
        .lines()
        .filter_map(|line| line.split_once(':'))
        .find(|(key, _)| key.trim() == "model name")
        .map(|(_, value)| value.trim().to_owned())
}

/// This host's CPU model (`/proc/cpuinfo`).
pub fn cpu_model() -> Option<String> {
    cpu_model_from_cpuinfo(&fs::read_to_string("/proc/cpuinfo").ok()?)
}

/// Processors listed in `/proc/cpuinfo` text: its lines starting with `processor`.
pub fn logical_cores_from_cpuinfo(cpuinfo: &str) -> usize {
    cpuinfo
        .lines()
        .filter(|line| line.starts_with("processor"))
        .count()
}

/// This host's logical cores as `/proc/cpuinfo` lists them (all of them, not
/// only those this process may run on); `None` if it cannot be read.
pub fn logical_cores() -> Option<usize> {
    Some(logical_cores_from_cpuinfo(
        &fs::read_to_string("/proc/cpuinfo").ok()?,
    ))
}

/// The running kernel's release, e.g. `6.8.0-45-generic`
/// (`/proc/sys/kernel/osrelease`).
pub fn kernel_release() -> Option<String> {
    fs::read_to_string("/proc/sys/kernel/osrelease")
        .ok()
        .map(|s| s.trim().to_owned())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn spin() {
        let mut x = 0u64;
        for i in 0..5_000_000u64 {
            x = x.wrapping_mul(31).wrapping_add(i);
        }
        std::hint::black_box(x);
    }

    #[test]
    fn reads_own_process() {
        let pid = std::process::id();
        spin();
        assert!(rss_bytes(pid).unwrap() > 0);
        assert!(threads_cpu_ns(pid, "").unwrap() > 0);
        assert_eq!(threads_cpu_ns(pid, "no-thread-has-this-name"), Some(0));
        assert!(process_cpu_time().unwrap() > Duration::ZERO);
        assert!(thread_cpu_time().unwrap() > Duration::ZERO);
        assert!(process_cpu_time().unwrap() >= thread_cpu_time().unwrap());
        assert!(peak_rss_bytes().unwrap() >= rss_bytes(pid).unwrap() / 2);
        assert!(peak_rss_bytes_of(pid).unwrap() >= rss_bytes(pid).unwrap() / 2);
        assert_eq!(rss_bytes(u32::MAX), None);
        assert_eq!(peak_rss_bytes_of(u32::MAX), None);
        assert_eq!(process_cpu_ticks(u32::MAX), None);
    }

    #[test]
    fn stat_cpu_ticks_count_fields_after_the_last_parenthesis() {
        // pid (comm) state ppid pgrp session tty tpgid flags minflt cminflt
        // majflt cmajflt utime stime …; the name holds ") 9 9 (".
        let line = "42 (a) 9 9 (b) S 1 42 42 0 -1 4194560 10 0 0 0 250 70 0 0 20 0 3 0";
        assert_eq!(parse_stat_cpu_ticks(line), Some(320));
        assert_eq!(parse_stat_cpu_ticks("42 (x) S 1 2 3"), None);
        assert_eq!(parse_stat_cpu_ticks("no parenthesis"), None);
    }

    #[test]
    fn process_cpu_ticks_grow_with_work() {
        let pid = std::process::id();
        let before = process_cpu_ticks(pid).unwrap();
        let hz = clock_ticks_per_s();
        let started = std::time::Instant::now();
        // At least three ticks of work, so the tick-sampled count must move.
        while started.elapsed() < Duration::from_millis(3 * 1000 / hz + 50) {
            spin();
        }
        assert!(process_cpu_ticks(pid).unwrap() > before);
    }

    #[test]
    fn open_fds_follow_what_this_process_opens() {
        let pid = std::process::id();
        let before = open_fds(pid).unwrap();
        let held: Vec<fs::File> = (0..5)
            .map(|_| fs::File::open("/proc/self/status").unwrap())
            .collect();
        // Other test threads may open or close descriptors meanwhile, so
        // only the lower bound is certain.
        assert!(open_fds(pid).unwrap() >= before + 5 - 2);
        drop(held);
        assert_eq!(open_fds(u32::MAX), None);
    }

    #[test]
    fn parses_udp_rcvbuf_errors_by_field_name() {
        let text = "Ip: Forwarding DefaultTTL\nIp: 1 64\n\
                    Udp: InDatagrams NoPorts InErrors OutDatagrams RcvbufErrors SndbufErrors\n\
                    Udp: 100 2 7 90 5 0\n\
                    UdpLite: InDatagrams NoPorts InErrors OutDatagrams RcvbufErrors SndbufErrors\n\
                    UdpLite: 0 0 0 0 9 0\n";
        assert_eq!(parse_udp_rcvbuf_errors(text), Some(5));
        assert_eq!(parse_udp_rcvbuf_errors("Udp: InDatagrams\nUdp: 1\n"), None);
        assert_eq!(parse_udp_rcvbuf_errors("Udp: RcvbufErrors\nUdp: x\n"), None);
        assert_eq!(parse_udp_rcvbuf_errors(""), None);
        #[cfg(target_os = "linux")]
        assert!(udp_rcvbuf_errors().is_some());
    }

    #[test]
    fn peak_rss_reset_forgets_a_freed_allocation() {
        const BIG: usize = 64 << 20;
        let before = peak_rss_bytes().unwrap();
        // Touch every page so it is resident; large allocations are mmap'd and go
        // back to the kernel when dropped.
        let big = vec![1u8; BIG];
        assert!(big.iter().step_by(4096).all(|&b| b == 1));
        let peak = peak_rss_bytes().unwrap();
        assert!(peak >= before + BIG as u64 / 2, "{peak} vs {before}");
        drop(big);
        assert!(reset_peak_rss(), "/proc/self/clear_refs not writable");
        let after = peak_rss_bytes().unwrap();
        assert!(after + BIG as u64 / 2 <= peak, "{after} vs {peak}");
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
        assert_eq!(loadavg_line().unwrap().split_whitespace().count(), 5);
        assert!(kernel_release().is_some());
    }

    #[test]
    fn cpu_model_is_the_first_model_name() {
        let text = "processor\t: 0\nmodel name\t: Example CPU @ 2.0GHz\n\nprocessor\t: 1\nmodel name\t: Other\n";
        assert_eq!(
            cpu_model_from_cpuinfo(text).as_deref(),
            Some("Example CPU @ 2.0GHz")
        );
        assert_eq!(cpu_model_from_cpuinfo("flags: x\n"), None);
    }

    #[test]
    fn logical_cores_count_the_processor_lines() {
        let text = "processor\t: 0\nmodel name\t: A\n\nprocessor\t: 1\nmodel name\t: A\n";
        assert_eq!(logical_cores_from_cpuinfo(text), 2);
        assert_eq!(logical_cores_from_cpuinfo("flags: x\n"), 0);
        #[cfg(target_os = "linux")]
        assert!(logical_cores().is_some_and(|n| n >= 1));
    }
}
