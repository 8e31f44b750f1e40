//! The dashboard's counter chart: ingress, fan-out and drop counters
//! sampled every [`SAMPLE_EVERY`] for the last ten minutes
//! ([`HISTORY_SAMPLES`] samples), kept by the server so a reload of the
//! page keeps its chart. Each sample copies counters of
//! [`ServerStats`] as `/metrics` exports them (draarl-v1 §4.5): the same
//! cumulative totals, never recomputed; the page derives rates from the
//! differences of neighbouring samples.

use std::collections::VecDeque;
use std::time::Duration;

use serde::Serialize;

use crate::runtime::stats::ServerStats;

/// Time between two samples.
pub const SAMPLE_EVERY: Duration = Duration::from_secs(5);
/// Samples kept (10 minutes); the oldest is evicted for a new one.
pub const HISTORY_SAMPLES: usize = 120;

/// The chart's counters at one moment. Each field is the cumulative total
/// of the `/metrics` counter named in its doc since the server started.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize)]
pub struct CounterSample {
    /// When the sample was taken, Unix milliseconds.
    pub unix_ms: i64,
    /// Datagrams read from the socket (`petrel_reflector_ingress_read_total`).
    pub ingress_read: u64,
    /// Datagrams over their rate limits (`…_ingress_rate_limit_drops_total`).
    pub ingress_rate_limit_drops: u64,
    /// Datagrams dropped at a full shard queue (`…_ingress_queue_full_drops_total`).
    pub ingress_queue_full_drops: u64,
    /// Datagrams fanned out to receivers (`petrel_reflector_fanout_sent_total`).
    pub fanout_sent: u64,
    /// Frames dropped at a full fan-out queue (`…_fanout_frames_dropped_total`).
    pub fanout_frames_dropped: u64,
    /// Text frames dropped at a full fan-out queue (`…_fanout_text_frames_dropped_total`).
    pub fanout_text_frames_dropped: u64,
    /// Frames dropped for waiting too long (`…_fanout_frames_expired_total`).
    pub fanout_frames_expired: u64,
}

impl CounterSample {
    /// The counters of `s`, taken at `unix_ms`.
    pub fn of(s: &ServerStats, unix_ms: i64) -> Self {
        Self {
            unix_ms,
            ingress_read: s.ingress.read,
            ingress_rate_limit_drops: s.ingress.rate_limit_drops,
            ingress_queue_full_drops: s.ingress.queue_full_drops,
            fanout_sent: s.fanout.sent,
            fanout_frames_dropped: s.fanout.frames_dropped,
            fanout_text_frames_dropped: s.fanout.text_frames_dropped,
            fanout_frames_expired: s.fanout.frames_expired,
        }
    }
}

/// The last [`HISTORY_SAMPLES`] samples, oldest first.
#[derive(Debug, Default)]
pub struct CounterHistory {
    samples: VecDeque<CounterSample>,
    evicted: u64,
}

impl CounterHistory {
    /// Appends `s`, evicting the oldest sample when full.
    pub fn push(&mut self, s: CounterSample) {
        if self.samples.len() >= HISTORY_SAMPLES {
            self.samples.pop_front();
            self.evicted += 1;
        }
        self.samples.push_back(s);
    }

    /// The samples, oldest first.
    pub fn samples(&self) -> Vec<CounterSample> {
        self.samples.iter().copied().collect()
    }

    /// Samples evicted since the start.
    pub fn evicted(&self) -> u64 {
        self.evicted
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_history_keeps_the_last_ten_minutes() {
        let mut h = CounterHistory::default();
        for i in 0..HISTORY_SAMPLES as i64 + 2 {
            h.push(CounterSample {
                unix_ms: i,
                ..CounterSample::default()
            });
        }
        let s = h.samples();
        assert_eq!(s.len(), HISTORY_SAMPLES);
        assert_eq!(
            (s[0].unix_ms, s[HISTORY_SAMPLES - 1].unix_ms),
            (2, HISTORY_SAMPLES as i64 + 1)
        );
        assert_eq!(h.evicted(), 2);
        assert_eq!(
            SAMPLE_EVERY * HISTORY_SAMPLES as u32,
            Duration::from_secs(600)
        );
    }
}
