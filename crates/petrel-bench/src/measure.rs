//! Process resource measurement (CPU %, peak RSS) and HDR-histogram
//! latency percentiles.
//!
//! CPU follows `specs/benchmarks.md` §A: user + system time of the whole
//! process from `getrusage(RUSAGE_SELF)` over an interval, where 100 % is one
//! core fully busy (so two busy cores read 200 %). The readers themselves
//! (`getrusage`, `/proc`) are `petrel_sys::proc`'s.

use std::time::{Duration, Instant};

use hdrhistogram::Histogram;

use crate::record::endpoint_io::EndpointIo;
pub use crate::record::Percentiles;
pub use petrel_sys::proc::{peak_rss_bytes, process_cpu_time, reset_peak_rss};

/// Highest latency a [`LatencyHistogram`] tracks exactly (60 s, in µs);
/// larger samples are clamped to it.
pub const MAX_TRACKED_US: u64 = 60_000_000;

/// A CPU-time sample at an instant; two samples give CPU % over the interval.
#[derive(Debug, Clone, Copy)]
pub struct CpuSample {
    at: Instant,
    cpu: Option<Duration>,
}

impl CpuSample {
    /// Samples process CPU time now.
    pub fn now() -> Self {
        Self {
            at: Instant::now(),
            cpu: process_cpu_time(),
        }
    }

    /// Process CPU % between `self` and the later sample `end` (100 % = one
    /// core); `None` if either sample failed or the interval is empty.
    pub fn percent_until(&self, end: &CpuSample) -> Option<f64> {
        let wall = end.at.checked_duration_since(self.at)?.as_secs_f64();
        let cpu = end.cpu?.checked_sub(self.cpu?)?.as_secs_f64();
        (wall > 0.0).then(|| cpu / wall * 100.0)
    }
}

/// Latency histogram in µs, 1 µs .. [`MAX_TRACKED_US`], 3 significant digits.
#[derive(Debug, Clone)]
pub struct LatencyHistogram {
    hist: Histogram<u64>,
}

impl Default for LatencyHistogram {
    fn default() -> Self {
        Self::new()
    }
}

impl LatencyHistogram {
    /// An empty histogram.
    pub fn new() -> Self {
        // The bounds are constants inside hdrhistogram's valid range
        // (low >= 1, high >= 2 * low, sigfig <= 5), so this cannot fail.
        let hist = Histogram::new_with_bounds(1, MAX_TRACKED_US, 3)
            .expect("constant histogram bounds are valid");
        Self { hist }
    }

    /// Records one latency; values beyond the tracked range are clamped.
    pub fn record(&mut self, latency: Duration) {
        let us = u64::try_from(latency.as_micros()).unwrap_or(u64::MAX);
        self.hist.saturating_record(us.clamp(1, MAX_TRACKED_US));
    }

    /// Adds every sample of `other`.
    pub fn merge(&mut self, other: &LatencyHistogram) {
        // Both histograms share the same bounds, so adding cannot fail; a
        // failure would only lose samples, never corrupt them.
        let _ = self.hist.add(&other.hist);
    }

    /// Number of samples.
    pub fn len(&self) -> u64 {
        self.hist.len()
    }

    /// Whether no samples were recorded.
    pub fn is_empty(&self) -> bool {
        self.hist.is_empty()
    }

    /// The headline percentiles; all zero when empty.
    pub fn percentiles(&self) -> Percentiles {
        if self.hist.is_empty() {
            return Percentiles::default();
        }
        Percentiles {
            count: self.hist.len(),
            mean_us: self.hist.mean(),
            p50_us: self.hist.value_at_quantile(0.50),
            p95_us: self.hist.value_at_quantile(0.95),
            p99_us: self.hist.value_at_quantile(0.99),
            max_us: self.hist.max(),
        }
    }
}

/// A Petrel endpoint's I/O counters as recorded, with the ratios derived from them;
/// `messages` is what the endpoint's connections sent and received over the run.
pub(crate) fn endpoint_io(stats: &petrel::EndpointStats, messages: u64) -> EndpointIo {
    let ratio = |num: u64, den: u64| (den > 0).then(|| num as f64 / den as f64);
    EndpointIo {
        datagrams_sent: stats.datagrams_sent,
        send_syscalls: stats.send_syscalls,
        datagrams_per_send_syscall: ratio(stats.datagrams_sent, stats.send_syscalls),
        datagrams_sent_gso: stats.datagrams_sent_gso,
        datagrams_received: stats.datagrams_received,
        recv_syscalls: stats.recv_syscalls,
        datagrams_per_recv_syscall: ratio(stats.datagrams_received, stats.recv_syscalls),
        send_waits: stats.send_waits,
        send_errors: stats.send_errors,
        bytes_copied: stats.bytes_copied,
        messages,
        syscalls_per_message: ratio(stats.send_syscalls + stats.recv_syscalls, messages),
        bytes_copied_per_message: ratio(stats.bytes_copied, messages),
        driver_wakeups: stats.driver_wakeups,
        busy_polls: stats.busy_polls,
        busy_poll_hits: stats.busy_poll_hits,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn percentiles_of_a_known_distribution() {
        let mut h = LatencyHistogram::new();
        for us in 1..=1000u64 {
            h.record(Duration::from_micros(us));
        }
        let p = h.percentiles();
        assert_eq!(p.count, 1000);
        assert_eq!(p.p50_us, 500);
        assert_eq!(p.p99_us, 990);
        assert_eq!(p.max_us, 1000);
        assert!((p.mean_us - 500.5).abs() < 1.0);
    }

    #[test]
    fn out_of_range_samples_are_clamped_and_merge_adds() {
        let mut a = LatencyHistogram::new();
        a.record(Duration::ZERO);
        a.record(Duration::from_secs(3600));
        let mut b = LatencyHistogram::new();
        b.merge(&a);
        assert_eq!(b.len(), 2);
        assert!(b.percentiles().max_us >= MAX_TRACKED_US);
        assert_eq!(
            LatencyHistogram::new().percentiles(),
            Percentiles::default()
        );
    }

    #[test]
    fn cpu_and_rss_are_readable() {
        let start = CpuSample::now();
        let mut x = 0u64;
        for i in 0..2_000_000u64 {
            x = x.wrapping_mul(31).wrapping_add(i);
        }
        std::hint::black_box(x);
        let end = CpuSample::now();
        assert!(start.percent_until(&end).is_some_and(|p| p >= 0.0));
        assert!(end.percent_until(&start).is_none());
        assert!(peak_rss_bytes().is_some_and(|b| b > 0));
    }
}
