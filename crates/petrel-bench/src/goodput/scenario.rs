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
//! Sizes keep one case within about 20 s at those rates: 6 MB at 5 Mbit/s is
//! 9.6 s; 15 MB at 100 Mbit/s is 1.2 s, and 17 s at the ≈ 7 Mbit/s of a
//! collapsed loss-based controller.

use std::fmt;
use std::str::FromStr;
use std::time::Duration;

use petrel_proto::cc::CongestionKind;
use serde::Serialize;

use super::config::{GoodputConfig, GoodputProfile};
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

    /// `base` with the scenario's link (always `p2p`) and transfer size.
    pub fn apply(self, base: GoodputConfig) -> GoodputConfig {
        let link = GoodputConfig {
            profile: GoodputProfile::P2p,
            scenario: Some(self),
            ..base
        };
        match self {
            Self::BbrBufferbloat => GoodputConfig {
                bandwidth_bps: 5_000_000,
                delay: Duration::from_millis(50),
                // 500 ms at 5 Mbit/s; the packet limit is the largest allowed so
                // that the byte limit governs.
                queue_packets: 4096,
                queue_bytes: Some(312_500),
                loss_percent: 0.0,
                size_bytes: 6_000_000,
                ..link
            },
            Self::BbrLoss => GoodputConfig {
                bandwidth_bps: 100_000_000,
                delay: Duration::from_millis(10),
                queue_packets: 1000,
                queue_bytes: None,
                loss_percent: 1.0,
                size_bytes: 15_000_000,
                ..link
            },
        }
    }

    /// What the scenario expects of `cc` on `cfg`'s link, and the check.
    pub fn expectation(self, cfg: &GoodputConfig) -> ScenarioExpectation {
        let base_ms = cfg.base_rtt().unwrap_or_default().as_secs_f64() * 1e3;
        let (expected, criterion) = match (self, is_bbr(cfg.cc)) {
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

    /// `"pass"` when `round` meets the check for `cfg.cc`, `"concern"` when it does
    /// not; `None` when the figure it needs is missing (a failed transfer, or a
    /// transport without RTT samples).
    pub fn verdict(self, cfg: &GoodputConfig, round: &GoodputRound) -> Option<&'static str> {
        let base_ms = cfg.base_rtt()?.as_secs_f64() * 1e3;
        let met = match (self, is_bbr(cfg.cc)) {
            (Self::BbrBufferbloat, true) => round.rtt_p50_ms? <= base_ms * BBR_RTT_FACTOR,
            (Self::BbrBufferbloat, false) => round.queue_delay_p50_ms? >= FILLED_QUEUE_MS,
            (Self::BbrLoss, true) => round.efficiency_percent? >= BBR_KEEPS_PERCENT,
            (Self::BbrLoss, false) => round.efficiency_percent? < COLLAPSED_PERCENT,
        };
        Some(if met { "pass" } else { "concern" })
    }
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
    fn links_are_the_published_ones_and_validate() {
        let bloat = Scenario::BbrBufferbloat.apply(GoodputConfig::default());
        assert_eq!(bloat.bandwidth_bps, 5_000_000);
        assert_eq!(bloat.base_rtt(), Some(Duration::from_millis(100)));
        // 500 ms of queue at the link rate.
        let queue_s = bloat.queue_bytes.unwrap() as f64 * 8.0 / bloat.bandwidth_bps as f64;
        assert!((queue_s - 0.5).abs() < 1e-9);
        bloat.validate().unwrap();
        let loss = Scenario::BbrLoss.apply(GoodputConfig::default());
        assert_eq!(loss.base_rtt(), Some(Duration::from_millis(20)));
        assert_eq!(loss.loss_percent, 1.0);
        loss.validate().unwrap();
        for cfg in [bloat, loss] {
            let secs = cfg.size_bytes as f64 * 8.0 / cfg.bandwidth_bps as f64;
            assert!(
                secs <= 20.0,
                "{}: {secs} s at the link rate",
                cfg.case_name()
            );
        }
    }
}
