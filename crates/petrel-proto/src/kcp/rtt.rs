//! RTT estimation and the retransmission timeout (RFC 6298 §2, as `ikcp_update_ack`).

use std::time::Duration;

use super::config::MAX_RTO;

/// Initial RTO before any sample (`IKCP_RTO_DEF`; RFC 6298 says 1 s, the reference
/// and its deployments use 200 ms).
pub(crate) const INITIAL_RTO: Duration = Duration::from_millis(200);

/// SRTT/RTTVAR estimator. `rto = srtt + max(G, 4·rttvar)` bounded to
/// `[min_rto, 60 s]`, where the clock granularity `G` is the flush interval (as the
/// reference does). Durations keep µs precision, not the reference's ms.
#[derive(Debug, Clone, Copy)]
pub(crate) struct RttEstimator {
    srtt: Option<Duration>,
    rttvar: Duration,
    rto: Duration,
    min_rto: Duration,
    granularity: Duration,
}

impl RttEstimator {
    pub(crate) fn new(min_rto: Duration, granularity: Duration) -> Self {
        Self {
            srtt: None,
            rttvar: Duration::ZERO,
            rto: INITIAL_RTO.clamp(min_rto, MAX_RTO),
            min_rto,
            granularity,
        }
    }

    /// Folds in one RTT sample (RFC 6298 §2.2–2.3, α = 1/8, β = 1/4).
    pub(crate) fn on_sample(&mut self, rtt: Duration) {
        let rtt = rtt.min(MAX_RTO);
        match self.srtt {
            None => {
                self.srtt = Some(rtt);
                self.rttvar = rtt / 2;
            }
            Some(srtt) => {
                let delta = srtt.abs_diff(rtt);
                self.rttvar = (self.rttvar * 3 + delta) / 4;
                self.srtt = Some((srtt * 7 + rtt) / 8);
            }
        }
        let srtt = self.srtt.unwrap_or_default();
        self.rto = (srtt + self.granularity.max(self.rttvar * 4)).clamp(self.min_rto, MAX_RTO);
    }

    pub(crate) fn rto(&self) -> Duration {
        self.rto
    }

    pub(crate) fn has_sample(&self) -> bool {
        self.srtt.is_some()
    }

    pub(crate) fn srtt(&self) -> Duration {
        self.srtt.unwrap_or_default()
    }

    pub(crate) fn rttvar(&self) -> Duration {
        self.rttvar
    }
}

/// The next RTO of a segment that timed out: ×1.5 in nodelay mode (`rto += rto/2`),
/// otherwise `rto += max(rto, current_rto)` (≥ ×2), as `ikcp_flush`; capped at 60 s.
pub(crate) fn backoff(segment_rto: Duration, current_rto: Duration, nodelay: bool) -> Duration {
    let step = if nodelay {
        segment_rto / 2
    } else {
        segment_rto.max(current_rto)
    };
    (segment_rto + step).min(MAX_RTO)
}

#[cfg(test)]
mod tests {
    use super::*;

    const MS: Duration = Duration::from_millis(1);

    #[test]
    fn first_sample_sets_srtt_and_half_rttvar() {
        let mut e = RttEstimator::new(30 * MS, 10 * MS);
        assert_eq!(e.rto(), 200 * MS);
        e.on_sample(100 * MS);
        assert_eq!((e.srtt(), e.rttvar()), (100 * MS, 50 * MS));
        assert_eq!(e.rto(), 300 * MS);
    }

    #[test]
    fn rto_respects_floor_and_granularity() {
        let mut e = RttEstimator::new(30 * MS, 10 * MS);
        for _ in 0..50 {
            e.on_sample(Duration::from_micros(100));
        }
        assert_eq!(e.rto(), 30 * MS);
        let mut e = RttEstimator::new(MS, 10 * MS);
        for _ in 0..50 {
            e.on_sample(5 * MS);
        }
        assert_eq!(e.rto(), 15 * MS);
    }

    #[test]
    fn backoff_factors() {
        assert_eq!(backoff(100 * MS, 100 * MS, true), 150 * MS);
        assert_eq!(backoff(100 * MS, 100 * MS, false), 200 * MS);
        assert_eq!(backoff(50 * MS, 100 * MS, false), 150 * MS);
        assert_eq!(backoff(50 * 1000 * MS, MS, false), MAX_RTO);
    }
}
