//! ProbeBW: the v2/v3 DOWN → CRUISE → REFILL → UP cycle with its long-term
//! (`inflight_longterm`) model and loss response (draft-ietf-ccwg-bbr-06 "ProbeBW"),
//! and BBRv1's eight-phase gain cycle.

use std::time::{Duration, Instant};

use rand::Rng;

use super::params::{BETA, HEADROOM, LOSS_THRESH, MAX_RENO_ROUNDS, V1_GAIN_CYCLE};
use super::{Bbr, BbrMode, Sample};
use crate::cc::LossEvent;

/// Where the acks stand relative to a bandwidth probe (`BBR.ack_phase`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum AckPhase {
    Init,
    ProbeStarting,
    ProbeFeedback,
    ProbeStopping,
    Refilling,
}

impl Bbr {
    pub(super) fn enter_probe_bw(&mut self, now: Instant) {
        self.cwnd_gain = self.p.cwnd_gain;
        if self.p.bounded_model {
            self.start_probe_bw_down(now);
        } else {
            // Start at a random phase other than the draining one.
            let r = self.rng.gen_range(0..V1_GAIN_CYCLE.len() - 1);
            self.v1_cycle_index = if r >= 1 { r + 1 } else { r };
            self.cycle_stamp = Some(now);
            self.apply_v1_gain();
        }
    }

    pub(super) fn set_mode(&mut self, mode: BbrMode) {
        self.mode = mode;
        (self.pacing_gain, self.cwnd_gain) = match mode {
            BbrMode::ProbeBwDown => (0.9, self.p.cwnd_gain),
            BbrMode::ProbeBwUp => (1.25, self.p.up_cwnd_gain),
            _ => (1.0, self.p.cwnd_gain),
        };
    }

    fn reset_congestion_signals(&mut self) {
        self.loss_in_round = false;
        self.bw_latest = 0;
        self.inflight_latest = 0;
    }

    pub(super) fn start_probe_bw_down(&mut self, now: Instant) {
        self.reset_congestion_signals();
        self.probe_up_cnt = None;
        self.rounds_since_bw_probe = self.rng.gen_range(0..=1);
        self.bw_probe_wait =
            Duration::from_secs(2) + Duration::from_micros(self.rng.gen_range(0..1_000_000));
        self.cycle_stamp = Some(now);
        self.ack_phase = AckPhase::ProbeStopping;
        self.start_round();
        self.set_mode(BbrMode::ProbeBwDown);
    }

    pub(super) fn start_probe_bw_cruise(&mut self) {
        self.set_mode(BbrMode::ProbeBwCruise);
    }

    fn start_probe_bw_refill(&mut self) {
        self.reset_short_term_model();
        self.bw_probe_up_rounds = 0;
        self.bw_probe_up_acks = 0;
        self.ack_phase = AckPhase::Refilling;
        self.start_round();
        self.set_mode(BbrMode::ProbeBwRefill);
    }

    fn start_probe_bw_up(&mut self, rs: &Sample) {
        self.ack_phase = AckPhase::ProbeStarting;
        self.start_round();
        self.reset_full_bw();
        self.full_bw = rs.delivery_rate.unwrap_or(0);
        self.set_mode(BbrMode::ProbeBwUp);
        self.raise_inflight_longterm_slope();
    }

    /// `BBRUpdateProbeBWCyclePhase`.
    pub(super) fn update_probe_bw_cycle_phase(&mut self, now: Instant, rs: &Sample) {
        if !self.full_bw_reached {
            return;
        }
        if self.p.bounded_model {
            self.adapt_long_term_model(now, rs);
        }
        if !self.mode.is_probe_bw() {
            return;
        }
        if !self.p.bounded_model {
            if self.is_next_v1_phase(now, rs) {
                self.v1_cycle_index = (self.v1_cycle_index + 1) % V1_GAIN_CYCLE.len();
                self.cycle_stamp = Some(now);
                self.apply_v1_gain();
            }
            return;
        }
        let mode = self.mode;
        match mode {
            BbrMode::ProbeBwDown if !self.is_time_to_probe_bw(now) && self.is_time_to_cruise() => {
                self.start_probe_bw_cruise();
            }
            BbrMode::ProbeBwCruise => {
                self.is_time_to_probe_bw(now);
            }
            // After one round of refilling, start probing.
            BbrMode::ProbeBwRefill if self.round_start => {
                self.bw_probe_samples = true;
                self.start_probe_bw_up(rs);
            }
            BbrMode::ProbeBwUp if self.is_time_to_go_down(rs) => {
                self.start_probe_bw_down(now);
            }
            _ => {}
        }
    }

    fn is_time_to_cruise(&self) -> bool {
        if self
            .inflight_with_headroom()
            .is_some_and(|h| self.in_flight > h)
        {
            return false;
        }
        self.in_flight <= self.inflight(self.max_bw, 1.0)
    }

    fn is_time_to_go_down(&mut self, rs: &Sample) -> bool {
        if self.cwnd_limited() && self.inflight_longterm.is_some_and(|lt| self.cwnd >= lt) {
            // Held back by our own bound, not the path: keep probing.
            self.reset_full_bw();
            self.full_bw = rs.delivery_rate.unwrap_or(0);
            return false;
        }
        self.full_bw_now
    }

    /// Time to probe: the randomised 2–3 s wall-clock wait, or as many rounds as Reno
    /// would need to regrow the window (at most 63), whichever comes first.
    fn is_time_to_probe_bw(&mut self, now: Instant) -> bool {
        let elapsed = self
            .cycle_stamp
            .is_some_and(|stamp| now > stamp + self.bw_probe_wait);
        if elapsed || self.is_reno_coexistence_probe_time() {
            self.start_probe_bw_refill();
            return true;
        }
        false
    }

    fn is_reno_coexistence_probe_time(&self) -> bool {
        let reno_rounds = self.target_inflight() / self.mds;
        self.rounds_since_bw_probe >= reno_rounds.min(MAX_RENO_ROUNDS)
    }

    fn target_inflight(&self) -> u64 {
        self.bdp_multiple(self.bw, 1.0).min(self.cwnd)
    }

    /// `BBRInflightWithHeadroom`: `None` while `inflight_longterm` is unbounded.
    pub(super) fn inflight_with_headroom(&self) -> Option<u64> {
        let lt = self.inflight_longterm?;
        let headroom = ((HEADROOM * lt as f64) as u64).max(self.mds);
        Some(lt.saturating_sub(headroom).max(self.min_pipe_cwnd()))
    }

    /// Each round of UP doubles how fast `inflight_longterm` grows: 1, 2, 4, …
    /// segments per round, spread over the round's acks.
    fn raise_inflight_longterm_slope(&mut self) {
        let growth_this_round = self.mds << self.bw_probe_up_rounds.min(30);
        self.bw_probe_up_rounds = (self.bw_probe_up_rounds + 1).min(30);
        self.probe_up_cnt = Some((self.cwnd / growth_this_round.max(1)).max(1) * self.mds);
    }

    /// Grows `inflight_longterm` while UP is held back by it.
    fn probe_inflight_longterm_upward(&mut self, rs: &Sample) {
        let Some(lt) = self.inflight_longterm else {
            return;
        };
        if !self.cwnd_limited() || self.cwnd < lt {
            return;
        }
        self.bw_probe_up_acks = self.bw_probe_up_acks.saturating_add(rs.newly_acked);
        if let Some(cnt) = self.probe_up_cnt {
            if self.bw_probe_up_acks >= cnt {
                let delta = self.bw_probe_up_acks / cnt;
                self.bw_probe_up_acks -= delta * cnt;
                self.inflight_longterm = Some(lt.saturating_add(delta.saturating_mul(self.mds)));
            }
        }
        if self.round_start {
            self.raise_inflight_longterm_slope();
        }
    }

    /// `BBRAdaptLongTermModel`: learn `inflight_longterm` from loss while probing,
    /// raise it when probing succeeds.
    fn adapt_long_term_model(&mut self, now: Instant, rs: &Sample) {
        if self.ack_phase == AckPhase::ProbeStarting && self.round_start {
            self.ack_phase = AckPhase::ProbeFeedback;
        }
        if self.ack_phase == AckPhase::ProbeStopping && self.round_start {
            // The probe's samples have all come back: a new ProbeBW cycle, so the
            // max-bandwidth window moves on (once per cycle).
            self.bw_probe_samples = false;
            self.ack_phase = AckPhase::Init;
            if self.mode.is_probe_bw() && !rs.app_limited {
                self.cycle_count += 1;
            }
        }
        if Self::is_inflight_too_high(rs.lost, rs.tx_in_flight) {
            if self.bw_probe_samples {
                self.handle_inflight_too_high(now, rs.app_limited, rs.tx_in_flight);
            }
            return;
        }
        let Some(lt) = self.inflight_longterm else {
            return;
        };
        if rs.tx_in_flight > lt {
            self.inflight_longterm = Some(rs.tx_in_flight);
        }
        if self.mode == BbrMode::ProbeBwUp {
            self.probe_inflight_longterm_upward(rs);
        }
    }

    fn handle_inflight_too_high(&mut self, now: Instant, app_limited: bool, tx_in_flight: u64) {
        self.bw_probe_samples = false;
        if !app_limited {
            let target = (self.target_inflight() as f64 * BETA) as u64;
            self.inflight_longterm = Some(tx_in_flight.max(target));
        }
        if self.mode == BbrMode::ProbeBwUp {
            self.start_probe_bw_down(now);
        }
    }

    /// `BBRHandleLostPacket`: while probing, a loss rate above `LossThresh` sets
    /// `inflight_longterm` to the in-flight level where it was crossed.
    pub(super) fn handle_lost_packet(&mut self, ev: &LossEvent) {
        if !self.bw_probe_samples {
            return;
        }
        let lost = ev.lost.saturating_sub(ev.prior_lost);
        if !Self::is_inflight_too_high(lost, ev.tx_in_flight) {
            return;
        }
        // BBRInflightAtLoss: the in-flight at which lost/in-flight reached LossThresh.
        let size = ev.lost_bytes as f64;
        let inflight_prev = (ev.tx_in_flight as f64 - size).max(0.0);
        let lost_prev = (lost as f64 - size).max(0.0);
        let lost_prefix =
            ((LOSS_THRESH * inflight_prev - lost_prev) / (1.0 - LOSS_THRESH)).max(0.0);
        let at_loss = (inflight_prev + lost_prefix) as u64;
        self.handle_inflight_too_high(ev.now, ev.app_limited, at_loss);
    }

    fn apply_v1_gain(&mut self) {
        let gain = V1_GAIN_CYCLE[self.v1_cycle_index];
        self.pacing_gain = gain;
        self.cwnd_gain = self.p.cwnd_gain;
        self.mode = if gain > 1.0 {
            BbrMode::ProbeBwUp
        } else if gain < 1.0 {
            BbrMode::ProbeBwDown
        } else {
            BbrMode::ProbeBwCruise
        };
    }

    /// BBRv1 `BBRIsNextCyclePhase`: each phase lasts one `min_rtt`; probing also waits
    /// for in-flight to reach its target (or a loss), draining ends early once the
    /// queue is gone.
    fn is_next_v1_phase(&self, now: Instant, rs: &Sample) -> bool {
        let full_length = match (self.cycle_stamp, self.min_rtt) {
            (Some(stamp), Some(min_rtt)) => now.saturating_duration_since(stamp) > min_rtt,
            _ => true,
        };
        let prior_inflight = self.in_flight.saturating_add(rs.newly_acked);
        let gain = self.pacing_gain;
        if gain > 1.0 {
            full_length
                && (self.lost_since_ack || prior_inflight >= self.inflight(self.max_bw, gain))
        } else if gain < 1.0 {
            full_length || prior_inflight <= self.inflight(self.max_bw, 1.0)
        } else {
            full_length
        }
    }
}
