//! HyStart++ (RFC 9406 §4): leaves slow start when the RTT of a round rises by a
//! threshold over the previous round's, via a few rounds of Conservative Slow Start
//! (CSS) that undo the exit if the rise was spurious.
//!
//! Rounds are counted by delivered data (a round ends when a segment sent after it
//! began is acked), which is RFC 9406's `windowEnd = SND.NXT` test in bytes. The
//! per-ack growth limit `L` is infinite because the ARQ paces (RFC 9406 §4.3).

use std::time::Duration;

use super::AckEvent;

/// `MIN_RTT_THRESH`.
const MIN_RTT_THRESH: Duration = Duration::from_millis(4);
/// `MAX_RTT_THRESH`.
const MAX_RTT_THRESH: Duration = Duration::from_millis(16);
/// `MIN_RTT_DIVISOR`.
const MIN_RTT_DIVISOR: u32 = 8;
/// `N_RTT_SAMPLE`: samples in a round before the delay test runs.
const N_RTT_SAMPLE: u32 = 8;
/// `CSS_GROWTH_DIVISOR`: CSS grows the window this many times slower.
pub(super) const CSS_GROWTH_DIVISOR: u64 = 4;
/// `CSS_ROUNDS`: rounds of CSS before congestion avoidance.
const CSS_ROUNDS: u32 = 5;

/// Which growth the next ack gets.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Phase {
    /// Standard slow start: cwnd += acked.
    SlowStart,
    /// Conservative slow start: cwnd += acked / [`CSS_GROWTH_DIVISOR`].
    Conservative,
    /// Slow start is over: set ssthresh = cwnd and enter congestion avoidance.
    Exit,
}

/// HyStart++ state for one slow-start period.
#[derive(Debug, Clone, Default)]
pub(super) struct HyStart {
    /// The round ends when an ack's `prior_delivered` reaches this.
    round_end: u64,
    last_round_min_rtt: Option<Duration>,
    current_round_min_rtt: Option<Duration>,
    rtt_sample_count: u32,
    /// In CSS since a round whose minimum RTT was this.
    css_baseline_min_rtt: Option<Duration>,
    css_rounds: u32,
}

impl HyStart {
    /// Feeds one ack received in slow start; returns how to grow.
    pub(super) fn on_ack(&mut self, event: &AckEvent) -> Phase {
        if event.prior_delivered >= self.round_end {
            self.round_end = event.delivered;
            self.last_round_min_rtt = self.current_round_min_rtt.take();
            self.rtt_sample_count = 0;
            if self.css_baseline_min_rtt.is_some() {
                self.css_rounds += 1;
                if self.css_rounds >= CSS_ROUNDS {
                    return Phase::Exit;
                }
            }
        }
        if let Some(rtt) = event.rtt {
            self.current_round_min_rtt =
                Some(self.current_round_min_rtt.map_or(rtt, |m| m.min(rtt)));
            self.rtt_sample_count = self.rtt_sample_count.saturating_add(1);
        }
        let enough = self.rtt_sample_count >= N_RTT_SAMPLE;
        match (self.css_baseline_min_rtt, self.current_round_min_rtt) {
            (None, Some(current)) if enough => {
                if let Some(last) = self.last_round_min_rtt {
                    let thresh = (last / MIN_RTT_DIVISOR).clamp(MIN_RTT_THRESH, MAX_RTT_THRESH);
                    if current >= last.saturating_add(thresh) {
                        self.css_baseline_min_rtt = Some(current);
                        self.css_rounds = 0;
                    }
                }
            }
            (Some(baseline), Some(current)) if enough && current < baseline => {
                // The delay rise was spurious: back to slow start.
                self.css_baseline_min_rtt = None;
                self.css_rounds = 0;
            }
            _ => {}
        }
        if self.css_baseline_min_rtt.is_some() {
            Phase::Conservative
        } else {
            Phase::SlowStart
        }
    }
}

#[cfg(test)]
mod tests {
    use std::time::Instant;

    use super::*;

    /// Acks one round of `n` segments of 1000 bytes, all with RTT `rtt`.
    fn round(h: &mut HyStart, delivered: &mut u64, n: u64, rtt: Duration) -> Phase {
        let t0 = Instant::now();
        let start = *delivered;
        let mut phase = Phase::SlowStart;
        for _ in 0..n {
            *delivered += 1000;
            let mut ev = AckEvent::new(t0, 1000, t0);
            ev.prior_delivered = start;
            ev.delivered = *delivered;
            ev.rtt = Some(rtt);
            phase = h.on_ack(&ev);
        }
        phase
    }

    #[test]
    fn delay_rise_enters_css_then_exits_after_css_rounds() {
        let ms = Duration::from_millis(1);
        let mut h = HyStart::default();
        let mut d = 0;
        assert_eq!(round(&mut h, &mut d, 10, 40 * ms), Phase::SlowStart);
        assert_eq!(round(&mut h, &mut d, 20, 40 * ms), Phase::SlowStart);
        // 40 ms / 8 = 5 ms threshold: a 4 ms rise is not enough, 6 ms is.
        assert_eq!(round(&mut h, &mut d, 20, 44 * ms), Phase::SlowStart);
        assert_eq!(round(&mut h, &mut d, 20, 50 * ms), Phase::Conservative);
        for _ in 0..4 {
            assert_eq!(round(&mut h, &mut d, 20, 50 * ms), Phase::Conservative);
        }
        assert_eq!(round(&mut h, &mut d, 1, 50 * ms), Phase::Exit);
    }

    #[test]
    fn spurious_rise_returns_to_slow_start() {
        let ms = Duration::from_millis(1);
        let mut h = HyStart::default();
        let mut d = 0;
        round(&mut h, &mut d, 10, 8 * ms);
        assert_eq!(round(&mut h, &mut d, 20, 13 * ms), Phase::Conservative);
        assert_eq!(round(&mut h, &mut d, 20, 9 * ms), Phase::SlowStart);
    }
}
