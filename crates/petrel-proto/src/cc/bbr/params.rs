//! The constants that tell the three BBR versions apart.
//!
//! - BBRv3: draft-ietf-ccwg-bbr-06 ("Pacing State and Parameters", "cwnd State and
//!   Parameters", "ProbeRTT and min_rtt Parameters").
//! - BBRv2: the same model with the v2alpha constants (Linux `tcp_bbr2.c`, IETF 104–
//!   106 slides): Startup and Drain gains 2/ln 2 and its inverse, no extra cwnd gain
//!   in ProbeBW_UP, 8 lost ranges to leave Startup on loss.
//! - BBRv1: draft-cardwell-iccrg-bbr-congestion-control-00: no loss or inflight
//!   bounds, an eight-phase gain cycle one min_rtt each, a 10-round max-bandwidth
//!   window, ProbeRTT every 10 s at 4 segments.

use std::time::Duration;

/// Which BBR.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum BbrVersion {
    /// BBRv1 (draft-cardwell-iccrg-bbr-congestion-control-00).
    V1,
    /// BBRv2 (v2alpha constants on the draft's model).
    V2,
    /// BBRv3 (draft-ietf-ccwg-bbr-06).
    V3,
}

/// Per-version constants.
#[derive(Debug, Clone, Copy)]
pub(super) struct Params {
    pub(super) name: &'static str,
    pub(super) startup_pacing_gain: f64,
    pub(super) startup_cwnd_gain: f64,
    pub(super) drain_pacing_gain: f64,
    /// `DefaultCwndGain`.
    pub(super) cwnd_gain: f64,
    /// cwnd gain in ProbeBW_UP.
    pub(super) up_cwnd_gain: f64,
    /// `ProbeRTTInterval`: ProbeRTT when no lower RTT was seen for this long.
    pub(super) probe_rtt_interval: Duration,
    /// `ProbeRTTCwndGain`; `None` for BBRv1's fixed `MinPipeCwnd`.
    pub(super) probe_rtt_cwnd_gain: Option<f64>,
    /// Whether an RTT sample equal to the minimum refreshes it (BBRv1: `<=`).
    pub(super) refresh_min_rtt_on_equal: bool,
    /// Loss- and inflight-bounded model (inflight_longterm/shortterm, bw_shortterm).
    pub(super) bounded_model: bool,
    /// `BBRStartupFullLossCnt`: loss events in a round that may end Startup.
    pub(super) startup_full_loss_count: u32,
}

/// 2/ln 2, the smallest gain that doubles the sending rate each round.
const HIGH_GAIN: f64 = 2.885;

impl BbrVersion {
    pub(super) fn params(self) -> Params {
        match self {
            Self::V1 => Params {
                name: "bbrv1",
                startup_pacing_gain: HIGH_GAIN,
                startup_cwnd_gain: HIGH_GAIN,
                drain_pacing_gain: 1.0 / HIGH_GAIN,
                cwnd_gain: 2.0,
                up_cwnd_gain: 2.0,
                probe_rtt_interval: Duration::from_secs(10),
                probe_rtt_cwnd_gain: None,
                refresh_min_rtt_on_equal: true,
                bounded_model: false,
                startup_full_loss_count: u32::MAX,
            },
            Self::V2 => Params {
                name: "bbrv2",
                startup_pacing_gain: HIGH_GAIN,
                startup_cwnd_gain: 2.0,
                drain_pacing_gain: 1.0 / HIGH_GAIN,
                cwnd_gain: 2.0,
                up_cwnd_gain: 2.0,
                probe_rtt_interval: PROBE_RTT_INTERVAL,
                probe_rtt_cwnd_gain: Some(0.5),
                refresh_min_rtt_on_equal: false,
                bounded_model: true,
                startup_full_loss_count: 8,
            },
            Self::V3 => Params {
                name: "bbrv3",
                startup_pacing_gain: 2.77,
                startup_cwnd_gain: 2.0,
                drain_pacing_gain: 0.5,
                cwnd_gain: 2.0,
                up_cwnd_gain: 2.25,
                probe_rtt_interval: PROBE_RTT_INTERVAL,
                probe_rtt_cwnd_gain: Some(0.5),
                refresh_min_rtt_on_equal: false,
                bounded_model: true,
                startup_full_loss_count: 6,
            },
        }
    }
}

/// `ProbeRTTInterval` of v2/v3, which the draft says MUST be 5 s.
pub(super) const PROBE_RTT_INTERVAL: Duration = Duration::from_secs(5);
/// `MinRTTFilterLen`.
pub(super) const MIN_RTT_FILTER_LEN: Duration = Duration::from_secs(10);
/// `ProbeRTTDuration`.
pub(super) const PROBE_RTT_DURATION: Duration = Duration::from_millis(200);
/// `PacingMarginPercent`: pace 1 % below the estimate so queues drain.
pub(super) const PACING_MARGIN: f64 = 0.01;
/// `LossThresh`: more than 2 % of the data in flight lost is "too high".
pub(super) const LOSS_THRESH: f64 = 0.02;
/// `Beta`: multiplicative decrease of the bounds on loss.
pub(super) const BETA: f64 = 0.7;
/// `Headroom`: ProbeBW_CRUISE leaves 15 % of inflight_longterm free.
pub(super) const HEADROOM: f64 = 0.15;
/// Startup ends after this many rounds without 25 % bandwidth growth.
pub(super) const FULL_BW_COUNT: u32 = 3;
/// `MaxBwFilterLen` (v2/v3) is 2 ProbeBW cycles: the current and the previous one,
/// a [`WindowedMax`](super::filter::WindowedMax) window of 1 cycle back.
pub(super) const MAX_BW_FILTER_WINDOW: u64 = 1;
/// BBRv1's `BtlBwFilterLen`: rounds.
pub(super) const V1_BW_FILTER_ROUNDS: u64 = 10;
/// `ExtraAckedFilterLen`: rounds.
pub(super) const EXTRA_ACKED_FILTER_ROUNDS: u64 = 10;
/// Reno-coexistence bound on the rounds between bandwidth probes.
pub(super) const MAX_RENO_ROUNDS: u64 = 63;
/// BBRv1's ProbeBW pacing-gain cycle.
pub(super) const V1_GAIN_CYCLE: [f64; 8] = [1.25, 0.75, 1.0, 1.0, 1.0, 1.0, 1.0, 1.0];
