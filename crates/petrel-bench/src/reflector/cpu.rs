//! CPU samples around the measured interval and the CPU fields of a
//! [`LoadResult`] computed from two of them.

use std::time::Instant;

use petrel_sys::proc::{clock_ticks_per_s, host_cpu, threads_cpu_ns, HostCpu};

use super::receive::RECV_THREAD;
use super::LoadResult;

/// Name prefix of the in-process reflector's threads.
const SERVER_THREAD: &str = "refl-";

/// CPU counters at one instant.
#[derive(Debug, Clone, Copy)]
pub(super) struct CpuSample {
    at: Instant,
    server_ns: u64,
    loadgen_ns: u64,
    recv_ns: u64,
    host: HostCpu,
}

impl CpuSample {
    /// `pid` is this process; `server` the reflector child, if it is one.
    pub(super) fn take(pid: u32, server: Option<u32>) -> Self {
        let process_ns = threads_cpu_ns(pid, "").unwrap_or(0);
        let (server_ns, loadgen_ns) = match server {
            Some(child) => (threads_cpu_ns(child, "").unwrap_or(0), process_ns),
            None => {
                let refl = threads_cpu_ns(pid, SERVER_THREAD).unwrap_or(0);
                (refl, process_ns.saturating_sub(refl))
            }
        };
        Self {
            at: Instant::now(),
            server_ns,
            loadgen_ns,
            recv_ns: threads_cpu_ns(pid, RECV_THREAD).unwrap_or(0),
            host: host_cpu().unwrap_or_default(),
        }
    }
}

impl CpuSample {
    /// Seconds from `earlier` to this sample.
    pub(super) fn seconds_since(&self, earlier: &Self) -> f64 {
        self.at.duration_since(earlier.at).as_secs_f64()
    }

    /// The load generator's CPU from the processes `loadgen` (every thread
    /// of each; its receive threads also separately), the reflector's from
    /// `server`, if given.
    pub(super) fn take_of(loadgen: &[u32], server: Option<u32>) -> Self {
        let sum = |prefix: &str| {
            loadgen
                .iter()
                .map(|&p| threads_cpu_ns(p, prefix).unwrap_or(0))
                .sum()
        };
        Self {
            at: Instant::now(),
            server_ns: server.and_then(|s| threads_cpu_ns(s, "")).unwrap_or(0),
            loadgen_ns: sum(""),
            recv_ns: sum(RECV_THREAD),
            host: host_cpu().unwrap_or_default(),
        }
    }
}

/// Fills the CPU fields of `r` from two samples.
pub(super) fn cpu_between(r: &mut LoadResult, a: &CpuSample, b: &CpuSample) {
    let wall = b.at.duration_since(a.at).as_secs_f64().max(1e-9);
    let cores = |ns: u64| ns as f64 / 1e9 / wall;
    r.server_cpu_cores = cores(b.server_ns.saturating_sub(a.server_ns));
    r.loadgen_cpu_cores = cores(b.loadgen_ns.saturating_sub(a.loadgen_ns));
    r.loadgen_recv_cpu_cores = cores(b.recv_ns.saturating_sub(a.recv_ns));
    let hz = clock_ticks_per_s() as f64;
    let ticks = |x: u64, y: u64| y.saturating_sub(x) as f64 / hz / wall;
    r.host_busy_cores = ticks(a.host.busy, b.host.busy);
    r.host_softirq_cores = ticks(a.host.softirq, b.host.softirq);
    r.host_steal_cores = ticks(a.host.steal, b.host.steal);
    r.host_cpus = b.host.cpus;
}
