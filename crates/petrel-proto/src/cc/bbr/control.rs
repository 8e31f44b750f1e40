//! The control half (draft-ietf-ccwg-bbr-06 `BBRUpdateControlParameters`): BDP and
//! in-flight targets, pacing rate, cwnd and its caps, and cwnd save/restore.

use std::time::Duration;

use super::params::{LOSS_THRESH, PACING_MARGIN};
use super::{Bbr, BbrMode, Sample};
use crate::cc::send_quantum_for;

impl Bbr {
    pub(super) fn min_pipe_cwnd(&self) -> u64 {
        self.mds.saturating_mul(4)
    }

    /// `nominal_bandwidth = InitialCwnd / (SRTT or 1 ms)` at the Startup gain.
    pub(super) fn init_pacing_rate(&mut self, srtt: Option<Duration>) {
        let micros = srtt.map_or(1000, |d| d.as_micros().max(1));
        let nominal = u128::from(self.initial_cwnd) * 1_000_000 / micros;
        self.pacing_rate = (self.p.startup_pacing_gain * nominal as f64) as u64;
        self.send_quantum = send_quantum_for(self.pacing_rate, self.mds);
    }

    /// `gain × bw × min_rtt`, bytes; the initial window before `min_rtt` is known.
    pub(super) fn bdp_multiple(&self, bw: u64, gain: f64) -> u64 {
        let Some(min_rtt) = self.min_rtt else {
            return self.initial_cwnd;
        };
        let bdp = u128::from(bw).saturating_mul(min_rtt.as_micros()) / 1_000_000;
        (gain * bdp as f64) as u64
    }

    /// `BBRQuantizationBudget`: room for one send quantum (the offload budget), never
    /// below `MinPipeCwnd`, plus 2 segments while probing up.
    pub(super) fn quantization_budget(&self, inflight: u64) -> u64 {
        let mut inflight = inflight.max(self.send_quantum).max(self.min_pipe_cwnd());
        if self.mode == BbrMode::ProbeBwUp {
            inflight = inflight.saturating_add(2 * self.mds);
        }
        inflight
    }

    /// `BBRInflight(bw, gain)`.
    pub(super) fn inflight(&self, bw: u64, gain: f64) -> u64 {
        self.quantization_budget(self.bdp_multiple(bw, gain))
    }

    pub(super) fn set_pacing_rate(&mut self) {
        if self.bw == 0 {
            return;
        }
        let rate = (self.pacing_gain * self.bw as f64 * (1.0 - PACING_MARGIN)) as u64;
        if self.full_bw_reached || rate > self.pacing_rate {
            self.pacing_rate = rate.max(1);
        }
    }

    pub(super) fn set_cwnd(&mut self, rs: &Sample) {
        let max_inflight = self.quantization_budget(
            self.bdp_multiple(self.bw, self.cwnd_gain)
                .saturating_add(self.extra_acked),
        );
        if self.packet_conservation {
            self.cwnd = self.cwnd.max(self.in_flight.saturating_add(rs.newly_acked));
        } else if self.full_bw_reached {
            self.cwnd = self.cwnd.saturating_add(rs.newly_acked).min(max_inflight);
        } else if self.cwnd < max_inflight || self.delivered < self.initial_cwnd {
            self.cwnd = self.cwnd.saturating_add(rs.newly_acked);
        }
        self.cwnd = self.cwnd.max(self.min_pipe_cwnd());
        if self.mode == BbrMode::ProbeRtt {
            self.cwnd = self.cwnd.min(self.probe_rtt_cwnd());
        }
        if self.p.bounded_model {
            self.bound_cwnd_for_model();
        }
    }

    /// `BBRBoundCwndForModel`: the state's volume cap.
    pub(super) fn bound_cwnd_for_model(&mut self) {
        let mut cap = if self.mode.is_probe_bw() && self.mode != BbrMode::ProbeBwCruise {
            self.inflight_longterm
        } else if matches!(self.mode, BbrMode::ProbeRtt | BbrMode::ProbeBwCruise) {
            self.inflight_with_headroom()
        } else {
            None
        };
        if let Some(st) = self.inflight_shortterm {
            cap = Some(cap.map_or(st, |c| c.min(st)));
        }
        if let Some(cap) = cap {
            self.cwnd = self.cwnd.min(cap.max(self.min_pipe_cwnd()));
        }
    }

    /// `BBRSaveCwnd`.
    pub(super) fn save_cwnd(&self) -> u64 {
        if self.recovery_start.is_none() && self.mode != BbrMode::ProbeRtt {
            self.cwnd
        } else {
            self.prior_cwnd.max(self.cwnd)
        }
    }

    pub(super) fn restore_cwnd(&mut self) {
        self.cwnd = self.cwnd.max(self.prior_cwnd);
    }

    /// `IsInflightTooHigh`: more than `LossThresh` of what was in flight got lost.
    pub(super) fn is_inflight_too_high(lost: u64, tx_in_flight: u64) -> bool {
        lost as f64 > tx_in_flight as f64 * LOSS_THRESH
    }
}
