//! The model half of an ack (draft-ietf-ccwg-bbr-06 `BBRUpdateModelAndState`):
//! rounds, the bandwidth filter, the loss-round signals and short-term bounds, the
//! ACK-aggregation estimate, and the Startup and Drain exits.

use std::time::Instant;

use super::params::{
    BETA, EXTRA_ACKED_FILTER_ROUNDS, FULL_BW_COUNT, LOSS_THRESH, MAX_BW_FILTER_WINDOW,
    V1_BW_FILTER_ROUNDS,
};
use super::{Bbr, BbrMode, Sample};

impl Bbr {
    pub(super) fn start_round(&mut self) {
        self.next_round_delivered = self.delivered;
    }

    pub(super) fn update_round(&mut self, rs: &Sample) {
        if rs.prior_delivered >= self.next_round_delivered {
            self.start_round();
            self.round_count += 1;
            self.rounds_since_bw_probe += 1;
            self.round_start = true;
            self.is_cwnd_limited = self.cwnd_limited_in_round;
            self.cwnd_limited_in_round = false;
        } else {
            self.round_start = false;
        }
    }

    pub(super) fn cwnd_limited(&self) -> bool {
        self.is_cwnd_limited || self.cwnd_limited_in_round
    }

    pub(super) fn update_max_bw(&mut self, rs: &Sample) {
        let Some(rate) = rs.delivery_rate else {
            return;
        };
        if rate >= self.max_bw || !rs.app_limited {
            self.max_bw = if self.p.bounded_model {
                self.max_bw_filter
                    .update(MAX_BW_FILTER_WINDOW, self.cycle_count, rate)
            } else {
                self.max_bw_filter
                    .update(V1_BW_FILTER_ROUNDS, self.round_count, rate)
            };
        }
    }

    pub(super) fn update_latest_delivery_signals(&mut self, rs: &Sample) {
        self.loss_round_start = false;
        self.bw_latest = self.bw_latest.max(rs.delivery_rate.unwrap_or(0));
        self.inflight_latest = self.inflight_latest.max(rs.delivered);
        if rs.prior_delivered >= self.loss_round_delivered {
            self.loss_round_delivered = self.delivered;
            self.loss_round_start = true;
        }
    }

    pub(super) fn advance_latest_delivery_signals(&mut self, rs: &Sample) {
        if self.loss_round_start {
            self.bw_latest = rs.delivery_rate.unwrap_or(0);
            self.inflight_latest = rs.delivered;
        }
    }

    pub(super) fn update_congestion_signals(&mut self, rs: &Sample) {
        self.update_round(rs);
        self.update_max_bw(rs);
        if !self.loss_round_start {
            return;
        }
        if self.p.bounded_model {
            self.check_startup_high_loss();
            self.adapt_lower_bounds_from_congestion();
        }
        self.loss_in_round = false;
        self.loss_events_in_round = 0;
        self.lost_in_round = 0;
        self.delivered_at_loss_round = self.delivered;
    }

    /// Startup ends on a round with more than `LossThresh` of its data lost in at least
    /// `BBRStartupFullLossCnt` loss events (each lost segment is one event here).
    pub(super) fn check_startup_high_loss(&mut self) {
        if self.full_bw_reached || self.mode != BbrMode::Startup || !self.loss_in_round {
            return;
        }
        let delivered = self.delivered.saturating_sub(self.delivered_at_loss_round);
        let total = delivered.saturating_add(self.lost_in_round) as f64;
        if self.loss_events_in_round >= self.p.startup_full_loss_count
            && self.lost_in_round as f64 > LOSS_THRESH * total
        {
            self.full_bw_reached = true;
            let bdp = self.bdp_multiple(self.max_bw, 1.0);
            self.inflight_longterm = Some(bdp.max(self.inflight_latest));
        }
    }

    /// `BBRAdaptLowerBoundsFromCongestion`: once per round with loss, outside probing.
    pub(super) fn adapt_lower_bounds_from_congestion(&mut self) {
        if matches!(
            self.mode,
            BbrMode::Startup | BbrMode::ProbeBwRefill | BbrMode::ProbeBwUp
        ) || !self.loss_in_round
        {
            return;
        }
        let bw_st = *self.bw_shortterm.get_or_insert(self.max_bw);
        let inflight_st = *self.inflight_shortterm.get_or_insert(self.cwnd);
        self.bw_shortterm = Some(self.bw_latest.max((BETA * bw_st as f64) as u64));
        self.inflight_shortterm =
            Some(self.inflight_latest.max((BETA * inflight_st as f64) as u64));
    }

    pub(super) fn reset_short_term_model(&mut self) {
        self.bw_shortterm = None;
        self.inflight_shortterm = None;
    }

    pub(super) fn bound_bw_for_model(&mut self) {
        self.bw = self
            .bw_shortterm
            .map_or(self.max_bw, |s| s.min(self.max_bw));
    }

    /// `BBRUpdateACKAggregation`: how much more was acked than `bw` explains.
    pub(super) fn update_ack_aggregation(&mut self, now: Instant, rs: &Sample) {
        let start = *self.extra_acked_interval_start.get_or_insert(now);
        let interval = now.saturating_duration_since(start);
        let mut expected =
            u64::try_from(u128::from(self.bw).saturating_mul(interval.as_micros()) / 1_000_000)
                .unwrap_or(u64::MAX);
        if self.extra_acked_delivered <= expected {
            self.extra_acked_delivered = 0;
            self.extra_acked_interval_start = Some(now);
            expected = 0;
        }
        self.extra_acked_delivered = self.extra_acked_delivered.saturating_add(rs.newly_acked);
        let extra = self
            .extra_acked_delivered
            .saturating_sub(expected)
            .min(self.cwnd);
        let window = if self.full_bw_reached {
            EXTRA_ACKED_FILTER_ROUNDS
        } else {
            1
        };
        self.extra_acked = self
            .extra_acked_filter
            .update(window, self.round_count, extra);
    }

    pub(super) fn reset_full_bw(&mut self) {
        self.full_bw = 0;
        self.full_bw_count = 0;
        self.full_bw_now = false;
    }

    /// Full pipe: `FULL_BW_COUNT` rounds without 25 % growth of `max_bw`.
    pub(super) fn check_full_bw_reached(&mut self, rs: &Sample) {
        if self.full_bw_now || !self.round_start || rs.app_limited {
            return;
        }
        if self.max_bw as f64 >= self.full_bw as f64 * 1.25 {
            self.full_bw = self.max_bw;
            self.full_bw_count = 0;
            return;
        }
        self.full_bw_count += 1;
        self.full_bw_now = self.full_bw_count >= FULL_BW_COUNT;
        if self.full_bw_now {
            self.full_bw_reached = true;
        }
    }

    pub(super) fn enter_startup(&mut self) {
        self.mode = BbrMode::Startup;
        self.pacing_gain = self.p.startup_pacing_gain;
        self.cwnd_gain = self.p.startup_cwnd_gain;
    }

    pub(super) fn check_startup_done(&mut self) {
        if self.mode == BbrMode::Startup && self.full_bw_reached {
            self.mode = BbrMode::Drain;
            self.pacing_gain = self.p.drain_pacing_gain;
            self.cwnd_gain = self.p.startup_cwnd_gain;
            self.drain_start_round = self.round_count;
        }
    }

    /// Drain ends when in-flight fits one BDP (v2/v3 also after 3 rounds).
    pub(super) fn check_drain_done(&mut self, now: Instant) {
        if self.mode != BbrMode::Drain {
            return;
        }
        let rounds = self.round_count.saturating_sub(self.drain_start_round);
        if self.in_flight <= self.inflight(self.max_bw, 1.0)
            || (self.p.bounded_model && rounds >= 3)
        {
            self.enter_probe_bw(now);
        }
    }

    pub(super) fn update_model_and_state(&mut self, now: Instant, rs: &Sample) {
        self.update_latest_delivery_signals(rs);
        self.update_congestion_signals(rs);
        self.update_ack_aggregation(now, rs);
        self.check_full_bw_reached(rs);
        self.check_startup_done();
        self.check_drain_done(now);
        self.update_probe_bw_cycle_phase(now, rs);
        self.update_min_rtt(now, rs);
        self.check_probe_rtt(now, rs);
        self.advance_latest_delivery_signals(rs);
        self.bound_bw_for_model();
    }
}
