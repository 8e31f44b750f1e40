//! Named goodput scenarios (`bench goodput --scenario NAME`): a link that tests
//! one property of the congestion controllers, the controllers swept over it, and
//! for each controller the outcome the scenario expects with a check on the
//! measured numbers.
//!
//! - `bbr-bufferbloat`: 5 Mbit/s, 100 ms base RTT (50 ms each way), a drop-tail
//!   queue of 500 ms (312,500 bytes) each way. BBR paces at the bottleneck rate and
//!   keeps the RTT near the base; a loss-based controller (CUBIC, Reno) grows until
//!   the queue overflows, so it fills the queue and the RTT with it.
//! - `bbr-loss`: 100 Mbit/s, 20 ms base RTT, 1 % random loss each way (1000-packet
//!   queue). BBR does not treat random loss as congestion (BBRv2/v3 only above
//!   their 2 % loss threshold) and keeps most of the link; a loss-based controller
//!   halves (Reno) or cuts to 0.7 (CUBIC) at every loss and collapses to a few
//!   Mbit/s (Mathis et al.: rate ≈ 1.22 · MSS / (RTT · √p)).
//!
//! Sizes keep one case within about 20 s: 6 MB at 5 Mbit/s is 9.6 s; 10 MB at
//! 100 Mbit/s is 0.8 s, and about 17 s at the ≈ 5 Mbit/s a collapsed loss-based
//! controller gets.

use std::fmt;
use std::str::FromStr;
use std::time::Duration;

use petrel_proto::cc::CongestionKind;
use serde::Serialize;

use crate::record::goodput::{GoodputRound, ScenarioExpectation};

/// A named scenario.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Scenario {
    /// 5 Mbit/s, 100 ms RTT, 500 ms queue.
    BbrBufferbloat,
    /// 100 Mbit/s, 20 ms RTT, 1 % random loss per direction.
    BbrLoss,
}

/// A name that is not a scenario.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("unknown scenario {0:?}: use bbr-bufferbloat or bbr-loss")]
pub struct UnknownScenario(pub String);

impl FromStr for Scenario {
    type Err = UnknownScenario;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        Self::ALL
            .into_iter()
            .find(|sc| sc.name() == s)
            .ok_or_else(|| UnknownScenario(s.to_owned()))
    }
}

impl fmt::Display for Scenario {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// Whether the scenario expects `cc` to behave as a model-based (BBR) controller.
fn is_bbr(cc: CongestionKind) -> bool {
    matches!(
        cc,
        CongestionKind::BbrV1 | CongestionKind::BbrV2 | CongestionKind::BbrV3
    )
}

/// Bufferbloat: BBR's median RTT may exceed the base by at most this factor.
const BBR_RTT_FACTOR: f64 = 1.5;
/// Bufferbloat: a loss-based controller's median queueing delay is at least this, ms.
const FILLED_QUEUE_MS: f64 = 200.0;
/// Loss: BBR keeps at least this share of the link, %.
const BBR_KEEPS_PERCENT: f64 = 50.0;
/// Loss: a loss-based controller that collapsed stays below this share, %.
const COLLAPSED_PERCENT: f64 = 30.0;

impl Scenario {
    /// Every scenario.
    pub const ALL: [Self; 2] = [Self::BbrBufferbloat, Self::BbrLoss];

    /// Its name on the command line and in results.
    pub fn name(self) -> &'static str {
        match self {
            Self::BbrBufferbloat => "bbr-bufferbloat",
            Self::BbrLoss => "bbr-loss",
        }
    }

    /// The controllers swept, in table order.
    pub fn controllers(self) -> [CongestionKind; 5] {
        [
            CongestionKind::Cubic,
            CongestionKind::BbrV1,
            CongestionKind::BbrV2,
            CongestionKind::BbrV3,
            CongestionKind::NewReno,
        ]
    }

    /// The scenario's link (always `p2p`) and transfer size.
    pub fn link(self) -> ScenarioLink {
        match self {
            Self::BbrBufferbloat => ScenarioLink {
                bandwidth_bps: 5_000_000,
                delay: Duration::from_millis(50),
                // 500 ms at 5 Mbit/s; the packet limit is the largest allowed so
                // that the byte limit governs.
                queue_packets: 4096,
                queue_bytes: Some(312_500),
                loss_percent: 0.0,
                size_bytes: 6_000_000,
            },
            Self::BbrLoss => ScenarioLink {
                bandwidth_bps: 100_000_000,
                delay: Duration::from_millis(10),
                queue_packets: 1000,
                queue_bytes: None,
                loss_percent: 1.0,
                size_bytes: 10_000_000,
            },
        }
    }

    /// What the scenario expects of `cc` on a link of `base_rtt`, and the check.
    pub fn expectation(self, cc: CongestionKind, base_rtt: Duration) -> ScenarioExpectation {
        let base_ms = base_rtt.as_secs_f64() * 1e3;
        let (expected, criterion) = match (self, is_bbr(cc)) {
            (Self::BbrBufferbloat, true) => (
                format!(
                    "BBR holds the RTT near the {base_ms} ms base while the queue could add 500 ms"
                ),
                format!("rtt_p50_ms <= {}", base_ms * BBR_RTT_FACTOR),
            ),
            (Self::BbrBufferbloat, false) => (
                "a loss-based controller fills the 500 ms queue: RTT far above the base".to_owned(),
                format!("queue_delay_p50_ms >= {FILLED_QUEUE_MS}"),
            ),
            (Self::BbrLoss, true) => (
                "BBR keeps most of the link despite 1 % random loss".to_owned(),
                format!("efficiency_percent >= {BBR_KEEPS_PERCENT}"),
            ),
            (Self::BbrLoss, false) => (
                "a loss-based controller collapses under 1 % random loss".to_owned(),
                format!("efficiency_percent < {COLLAPSED_PERCENT}"),
            ),
        };
        ScenarioExpectation {
            name: self.name().to_owned(),
            expected,
            criterion,
        }
    }

    /// `"pass"` when `round` meets the check for `cc` on a link of `base_rtt`,
    /// `"concern"` when it does not; `None` when the figure it needs is missing (a
    /// failed transfer, or a transport without RTT samples).
    pub fn verdict(
        self,
        cc: CongestionKind,
        base_rtt: Duration,
        round: &GoodputRound,
    ) -> Option<&'static str> {
        let base_ms = base_rtt.as_secs_f64() * 1e3;
        let met = match (self, is_bbr(cc)) {
            (Self::BbrBufferbloat, true) => round.rtt_p50_ms? <= base_ms * BBR_RTT_FACTOR,
            (Self::BbrBufferbloat, false) => round.queue_delay_p50_ms? >= FILLED_QUEUE_MS,
            (Self::BbrLoss, true) => round.efficiency_percent? >= BBR_KEEPS_PERCENT,
            (Self::BbrLoss, false) => round.efficiency_percent? < COLLAPSED_PERCENT,
        };
        Some(if met { "pass" } else { "concern" })
    }
}

/// The link and size a scenario sets (see `GoodputConfig` for each field's range).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct ScenarioLink {
    /// Link rate of each direction, bit/s.
    pub bandwidth_bps: u64,
    /// One-way delay of each direction.
    pub delay: Duration,
    /// Drop-tail queue of each direction, packets.
    pub queue_packets: usize,
    /// Drop-tail queue of each direction, bytes.
    pub queue_bytes: Option<usize>,
    /// Random loss of each direction, %.
    pub loss_percent: f64,
    /// Bytes transferred.
    pub size_bytes: u64,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_parse_back_and_unknown_names_are_refused() {
        for sc in Scenario::ALL {
            assert_eq!(sc.name().parse::<Scenario>(), Ok(sc));
        }
        let err = "bbr-fast".parse::<Scenario>().unwrap_err();
        assert_eq!(
            err.to_string(),
            "unknown scenario \"bbr-fast\": use bbr-bufferbloat or bbr-loss"
        );
    }

    #[test]
    fn verdicts_follow_the_controller_family() {
        let round = |rtt: f64, eff: f64| GoodputRound {
            rtt_p50_ms: Some(rtt),
            queue_delay_p50_ms: Some(rtt - 100.0),
            efficiency_percent: Some(eff),
            ..serde_json::from_value(serde_json::json!({
                "repetition": 0, "seed": 0, "ok": true, "error": null,
                "bytes_received": 0, "mismatched_bytes": 0, "transfer_s": null,
                "wall_s": null, "goodput_mbps": null, "wall_goodput_mbps": null,
                "efficiency_percent": null, "wall_efficiency_percent": null,
                "rtt_p50_ms": null, "rtt_p99_ms": null, "rtt_samples": 0,
                "queue_delay_p50_ms": null, "queue_delay_p99_ms": null,
                "cpu_s": null, "cpu_s_per_gb": null, "verdict": null,
                "sender": {}, "relay": null
            }))
            .unwrap()
        };
        let base = Duration::from_millis(100);
        let bloat = Scenario::BbrBufferbloat;
        assert_eq!(
            bloat.verdict(CongestionKind::BbrV3, base, &round(140.0, 90.0)),
            Some("pass")
        );
        assert_eq!(
            bloat.verdict(CongestionKind::BbrV3, base, &round(400.0, 90.0)),
            Some("concern")
        );
        assert_eq!(
            bloat.verdict(CongestionKind::Cubic, base, &round(400.0, 90.0)),
            Some("pass")
        );
        assert_eq!(
            bloat.verdict(CongestionKind::Cubic, base, &round(140.0, 90.0)),
            Some("concern")
        );
        let loss = Scenario::BbrLoss;
        assert_eq!(
            loss.verdict(CongestionKind::BbrV1, base, &round(0.0, 80.0)),
            Some("pass")
        );
        assert_eq!(
            loss.verdict(CongestionKind::NewReno, base, &round(0.0, 80.0)),
            Some("concern")
        );
        assert_eq!(
            loss.verdict(CongestionKind::NewReno, base, &round(0.0, 10.0)),
            Some("pass")
        );
        let mut missing = round(0.0, 0.0);
        missing.efficiency_percent = None;
        assert_eq!(loss.verdict(CongestionKind::BbrV1, base, &missing), None);
        assert_eq!(
            bloat.expectation(CongestionKind::BbrV2, base).criterion,
            "rtt_p50_ms <= 150"
        );
    }
}
