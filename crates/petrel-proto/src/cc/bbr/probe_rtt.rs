//! `min_rtt` and ProbeRTT (draft-ietf-ccwg-bbr-06 "ProbeRTT"), and the restart from
//! idle.
//!
//! Two filters: `probe_rtt_min_delay`, the lowest latest-RTT sample, refreshed by a
//! lower sample or after `ProbeRTTInterval` without one; and `min_rtt`, which adopts it
//! when lower or after `MinRTTFilterLen` (10 s). When the first expires, ProbeRTT
//! drains in-flight to `max(ProbeRTTCwndGain × bdp, MinPipeCwnd)` (BBRv1: 4 segments),
//! starts its 200 ms timer once in-flight is there, also waits one round, then
//! restores the saved cwnd.

use std::time::Instant;

use super::params::{MIN_RTT_FILTER_LEN, PROBE_RTT_DURATION};
use super::probe_bw::AckPhase;
use super::{Bbr, BbrMode, Sample};

impl Bbr {
    /// `BBRUpdateMinRTT`.
    pub(super) fn update_min_rtt(&mut self, now: Instant, rs: &Sample) {
        let interval = self.p.probe_rtt_interval;
        self.probe_rtt_expired = self
            .probe_rtt_min_stamp
            .is_some_and(|stamp| now > stamp + interval);
        if let Some(rtt) = rs.rtt {
            let lower = self
                .probe_rtt_min_delay
                .is_none_or(|min| rtt < min || (self.p.refresh_min_rtt_on_equal && rtt == min));
            if lower || self.probe_rtt_expired {
                self.probe_rtt_min_delay = Some(rtt);
                self.probe_rtt_min_stamp = Some(now);
            }
        }
        let min_rtt_expired = self
            .min_rtt_stamp
            .is_some_and(|stamp| now > stamp + MIN_RTT_FILTER_LEN);
        if let Some(delay) = self.probe_rtt_min_delay {
            if self.min_rtt.is_none_or(|min| delay < min) || min_rtt_expired {
                self.min_rtt = Some(delay);
                self.min_rtt_stamp = self.probe_rtt_min_stamp;
            }
        }
    }

    /// The cwnd ProbeRTT holds, bytes.
    pub(super) fn probe_rtt_cwnd(&self) -> u64 {
        match self.p.probe_rtt_cwnd_gain {
            Some(gain) => self.bdp_multiple(self.bw, gain).max(self.min_pipe_cwnd()),
            None => self.min_pipe_cwnd(),
        }
    }

    /// `BBRCheckProbeRTT`.
    pub(super) fn check_probe_rtt(&mut self, now: Instant, rs: &Sample) {
        if self.mode != BbrMode::ProbeRtt && self.probe_rtt_expired && !self.idle_restart {
            self.mode = BbrMode::ProbeRtt;
            self.pacing_gain = 1.0;
            self.cwnd_gain = self.p.probe_rtt_cwnd_gain.unwrap_or(self.p.cwnd_gain);
            self.prior_cwnd = self.save_cwnd();
            self.probe_rtt_done_stamp = None;
            self.ack_phase = AckPhase::ProbeStopping;
            self.start_round();
            self.probe_rtt_count += 1;
        }
        if self.mode == BbrMode::ProbeRtt {
            self.handle_probe_rtt(now);
        }
        if rs.delivered > 0 {
            self.idle_restart = false;
        }
    }

    fn handle_probe_rtt(&mut self, now: Instant) {
        // Samples taken with a deliberately small window say nothing about bandwidth.
        self.app_limited_until = self.delivered.saturating_add(self.in_flight).max(1);
        match self.probe_rtt_done_stamp {
            None if self.in_flight <= self.probe_rtt_cwnd() => {
                self.probe_rtt_done_stamp = Some(now + PROBE_RTT_DURATION);
                self.probe_rtt_round_done = false;
                self.start_round();
            }
            None => {}
            Some(_) => {
                if self.round_start {
                    self.probe_rtt_round_done = true;
                }
                if self.probe_rtt_round_done {
                    self.check_probe_rtt_done(now);
                }
            }
        }
    }

    fn check_probe_rtt_done(&mut self, now: Instant) {
        if self.probe_rtt_done_stamp.is_some_and(|done| now > done) {
            self.probe_rtt_min_stamp = Some(now);
            self.restore_cwnd();
            self.exit_probe_rtt(now);
        }
    }

    fn exit_probe_rtt(&mut self, now: Instant) {
        self.reset_short_term_model();
        if !self.full_bw_reached {
            self.enter_startup();
        } else if self.p.bounded_model {
            self.start_probe_bw_down(now);
            self.start_probe_bw_cruise();
        } else {
            self.enter_probe_bw(now);
        }
    }

    /// The first send after an idle period: do not count the idle time as a reason to
    /// probe RTT, and pace at the estimate rather than a probing gain.
    pub(super) fn handle_restart_from_idle(&mut self, now: Instant) {
        self.idle_restart = true;
        self.extra_acked_interval_start = Some(now);
        if self.mode.is_probe_bw() && self.bw > 0 {
            self.pacing_rate = (self.bw as f64 * (1.0 - super::params::PACING_MARGIN)) as u64;
        } else if self.mode == BbrMode::ProbeRtt {
            self.check_probe_rtt_done(now);
        }
    }
}
