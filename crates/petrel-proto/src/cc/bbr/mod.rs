//! BBR congestion control, versions 1, 2 and 3 (draft-ietf-ccwg-bbr-06 for v3; see
//! [`params`] for what v1 and v2 change), as one state machine driven by the ARQ's
//! per-segment events.
//!
//! The model: `max_bw`, a windowed max of per-ack delivery-rate samples (2 ProbeBW
//! cycles; v1: 10 rounds), and `min_rtt`, the minimum of the *latest* RTT samples of
//! the ARQ (µs precision, never the smoothed RTT). `bdp = max_bw × min_rtt`. The
//! controls: `pacing_rate = pacing_gain × bw × 99 %`, `cwnd ≈ cwnd_gain × bdp +
//! extra_acked` (the ACK-aggregation allowance), bounded by the state's volume caps.
//!
//! Where this follows the draft more carefully than published ports:
//! - rounds are counted by delivered data (`P.delivered ≥ next_round_delivered`);
//! - `inflight_longterm`, `inflight_shortterm` and `bw_shortterm` are `Option`
//!   (`None` = unbounded), so "infinity + 2 MSS" cannot wrap;
//! - ProbeRTT (v2/v3) runs when no lower RTT was seen for 5 s, holds
//!   `cwnd = max(0.5 × bdp, 4 × mss)`, starts its 200 ms timer only once in-flight has
//!   drained to that, also waits one round, then restores the saved cwnd;
//! - samples taken in ProbeRTT are app-limited, so they cannot lower `max_bw`.
//!
//! Not implemented: ECN, the QUIC offload-budget enlargement by the peer's ACK
//! frequency (KCP acks every segment), undo of spurious recovery.

mod control;
mod filter;
mod model;
mod params;
mod probe_bw;
mod probe_rtt;
#[cfg(test)]
mod tests;

use std::time::{Duration, Instant};

use rand::SeedableRng;
use rand_chacha::ChaCha8Rng;

use filter::WindowedMax;
pub use params::BbrVersion;
use params::Params;
use probe_bw::AckPhase;

use super::{
    send_quantum_for, AckEvent, CongestionController, LossEvent, LossKind, SentEvent,
    MAX_DATAGRAM_SIZE,
};

/// BBR's state. BBRv1's ProbeBW phases map onto the v3 names by gain: 1.25 is
/// `ProbeBwUp`, 0.75 is `ProbeBwDown`, 1.0 is `ProbeBwCruise`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum BbrMode {
    /// Exponential search for the bottleneck bandwidth.
    Startup,
    /// Drains the queue Startup built.
    Drain,
    /// Paces below the estimate to drain a queue and leave headroom.
    ProbeBwDown,
    /// Paces at the estimate.
    ProbeBwCruise,
    /// Refills the pipe for one round before probing.
    ProbeBwRefill,
    /// Probes for more bandwidth.
    ProbeBwUp,
    /// Drains in-flight to re-measure `min_rtt`.
    ProbeRtt,
}

impl BbrMode {
    fn is_probe_bw(self) -> bool {
        matches!(
            self,
            Self::ProbeBwDown | Self::ProbeBwCruise | Self::ProbeBwRefill | Self::ProbeBwUp
        )
    }
}

/// One ack as BBR sees it (the draft's `rs`).
#[derive(Debug, Clone, Copy)]
struct Sample {
    /// Delivery rate, bytes/s; `None` when the sample is invalid (interval shorter
    /// than `min_rtt`, or zero).
    delivery_rate: Option<u64>,
    /// Bytes delivered over the sample's interval.
    delivered: u64,
    prior_delivered: u64,
    newly_acked: u64,
    app_limited: bool,
    tx_in_flight: u64,
    /// Bytes lost between the segment's send and this ack.
    lost: u64,
    rtt: Option<Duration>,
}

/// BBR state. Bytes, bytes/s and µs-precision durations throughout.
#[derive(Debug, Clone)]
pub struct Bbr {
    p: Params,
    mds: u64,
    rng: ChaCha8Rng,
    mode: BbrMode,
    pacing_gain: f64,
    cwnd_gain: f64,
    pacing_rate: u64,
    send_quantum: u64,
    cwnd: u64,
    initial_cwnd: u64,
    /// Mirrors of the connection: `C.delivered`, `C.inflight`.
    delivered: u64,
    in_flight: u64,
    // Rounds.
    next_round_delivered: u64,
    round_start: bool,
    round_count: u64,
    cwnd_limited_in_round: bool,
    is_cwnd_limited: bool,
    // Bandwidth model.
    max_bw_filter: WindowedMax,
    max_bw: u64,
    bw: u64,
    cycle_count: u64,
    bw_shortterm: Option<u64>,
    inflight_shortterm: Option<u64>,
    inflight_longterm: Option<u64>,
    bw_latest: u64,
    inflight_latest: u64,
    // min_rtt.
    min_rtt: Option<Duration>,
    min_rtt_stamp: Option<Instant>,
    probe_rtt_min_delay: Option<Duration>,
    probe_rtt_min_stamp: Option<Instant>,
    probe_rtt_expired: bool,
    // ACK aggregation.
    extra_acked_filter: WindowedMax,
    extra_acked: u64,
    extra_acked_interval_start: Option<Instant>,
    extra_acked_delivered: u64,
    // Startup.
    full_bw_reached: bool,
    full_bw_now: bool,
    full_bw: u64,
    full_bw_count: u32,
    drain_start_round: u64,
    // Loss rounds.
    loss_round_delivered: u64,
    loss_round_start: bool,
    loss_in_round: bool,
    loss_events_in_round: u32,
    lost_in_round: u64,
    delivered_at_loss_round: u64,
    lost_since_ack: bool,
    // ProbeBW.
    cycle_stamp: Option<Instant>,
    ack_phase: AckPhase,
    bw_probe_wait: Duration,
    rounds_since_bw_probe: u64,
    probe_up_cnt: Option<u64>,
    bw_probe_up_acks: u64,
    bw_probe_up_rounds: u32,
    bw_probe_samples: bool,
    v1_cycle_index: usize,
    // ProbeRTT, idle, recovery.
    prior_cwnd: u64,
    probe_rtt_done_stamp: Option<Instant>,
    probe_rtt_round_done: bool,
    probe_rtt_count: u64,
    app_limited_until: u64,
    idle_restart: bool,
    recovery_start: Option<Instant>,
    /// Whether the current recovery began with a retransmission timeout (so
    /// [`CongestionController::on_spurious_timeout`] may end it).
    timeout_recovery: bool,
    packet_conservation: bool,
    conservation_round_end: u64,
}

impl Bbr {
    /// A BBR `version` for datagrams of at most `max_datagram_size` bytes; `seed`
    /// drives the randomised probe timing.
    pub fn new(version: BbrVersion, max_datagram_size: u64, seed: u64) -> Self {
        let p = version.params();
        let mds = max_datagram_size.clamp(1, MAX_DATAGRAM_SIZE);
        let initial_cwnd = mds.saturating_mul(10);
        let mut bbr = Self {
            p,
            mds,
            rng: ChaCha8Rng::seed_from_u64(seed),
            mode: BbrMode::Startup,
            pacing_gain: p.startup_pacing_gain,
            cwnd_gain: p.startup_cwnd_gain,
            pacing_rate: 0,
            send_quantum: 2 * mds,
            cwnd: initial_cwnd,
            initial_cwnd,
            delivered: 0,
            in_flight: 0,
            next_round_delivered: 0,
            round_start: false,
            round_count: 0,
            cwnd_limited_in_round: false,
            is_cwnd_limited: false,
            max_bw_filter: WindowedMax::default(),
            max_bw: 0,
            bw: 0,
            cycle_count: 0,
            bw_shortterm: None,
            inflight_shortterm: None,
            inflight_longterm: None,
            bw_latest: 0,
            inflight_latest: 0,
            min_rtt: None,
            min_rtt_stamp: None,
            probe_rtt_min_delay: None,
            probe_rtt_min_stamp: None,
            probe_rtt_expired: false,
            extra_acked_filter: WindowedMax::default(),
            extra_acked: 0,
            extra_acked_interval_start: None,
            extra_acked_delivered: 0,
            full_bw_reached: false,
            full_bw_now: false,
            full_bw: 0,
            full_bw_count: 0,
            drain_start_round: 0,
            loss_round_delivered: 0,
            loss_round_start: false,
            loss_in_round: false,
            loss_events_in_round: 0,
            lost_in_round: 0,
            delivered_at_loss_round: 0,
            lost_since_ack: false,
            cycle_stamp: None,
            ack_phase: AckPhase::Init,
            bw_probe_wait: Duration::ZERO,
            rounds_since_bw_probe: 0,
            probe_up_cnt: None,
            bw_probe_up_acks: 0,
            bw_probe_up_rounds: 0,
            bw_probe_samples: false,
            v1_cycle_index: 0,
            prior_cwnd: 0,
            probe_rtt_done_stamp: None,
            probe_rtt_round_done: false,
            probe_rtt_count: 0,
            app_limited_until: 0,
            idle_restart: false,
            recovery_start: None,
            timeout_recovery: false,
            packet_conservation: false,
            conservation_round_end: 0,
        };
        bbr.init_pacing_rate(None);
        bbr
    }

    /// Current state.
    pub fn mode(&self) -> BbrMode {
        self.mode
    }

    /// `min_rtt`, once measured.
    pub fn min_rtt(&self) -> Option<Duration> {
        self.min_rtt
    }

    /// `max_bw`, bytes/s.
    pub fn max_bw(&self) -> u64 {
        self.max_bw
    }

    /// `inflight_longterm`, bytes (`None` = unbounded; always `None` in BBRv1).
    pub fn inflight_longterm(&self) -> Option<u64> {
        self.inflight_longterm
    }

    /// Times ProbeRTT was entered.
    pub fn probe_rtt_count(&self) -> u64 {
        self.probe_rtt_count
    }

    /// Whether Startup found the pipe full.
    pub fn full_bw_reached(&self) -> bool {
        self.full_bw_reached
    }

    fn sample(&self, ev: &AckEvent) -> Sample {
        let rs = ev.rate_sample();
        let delivery_rate = rs
            .filter(|s| self.min_rtt.is_none_or(|m| s.interval >= m))
            .map(|s| s.delivery_rate);
        Sample {
            delivery_rate,
            delivered: rs.map_or(0, |s| s.delivered),
            prior_delivered: ev.prior_delivered,
            newly_acked: ev.acked_bytes,
            app_limited: ev.app_limited || ev.prior_delivered < self.app_limited_until,
            tx_in_flight: ev.tx_in_flight,
            lost: ev.lost.saturating_sub(ev.prior_lost),
            rtt: ev.rtt,
        }
    }
}

impl CongestionController for Bbr {
    fn on_sent(&mut self, event: &SentEvent) {
        self.in_flight = event.in_flight;
        if event.in_flight.saturating_add(self.mds) > self.cwnd {
            self.cwnd_limited_in_round = true;
        }
        let prior = event.in_flight.saturating_sub(event.bytes);
        if prior == 0 && event.app_limited {
            self.handle_restart_from_idle(event.now);
        }
    }

    fn on_ack(&mut self, event: &AckEvent) {
        let now = event.now;
        self.delivered = event.delivered;
        self.in_flight = event.in_flight;
        if self.min_rtt.is_none() && self.max_bw == 0 && event.rtt.is_some() {
            self.init_pacing_rate(event.rtt);
        }
        if self
            .recovery_start
            .is_some_and(|start| event.sent_time > start)
        {
            self.recovery_start = None;
            self.packet_conservation = false;
            self.restore_cwnd();
        }
        if self.packet_conservation && event.prior_delivered >= self.conservation_round_end {
            self.packet_conservation = false;
        }
        let rs = self.sample(event);
        self.update_model_and_state(now, &rs);
        self.lost_since_ack = false;
        self.set_pacing_rate();
        self.send_quantum = send_quantum_for(self.pacing_rate, self.mds);
        self.set_cwnd(&rs);
    }

    fn on_loss(&mut self, event: &LossEvent) {
        self.in_flight = event.in_flight.saturating_sub(event.lost_bytes);
        self.lost_since_ack = true;
        if !self.loss_in_round {
            self.loss_round_delivered = self.delivered;
            self.loss_in_round = true;
        }
        self.loss_events_in_round = self.loss_events_in_round.saturating_add(1);
        self.lost_in_round = self.lost_in_round.saturating_add(event.lost_bytes);
        if self.p.bounded_model {
            self.handle_lost_packet(event);
        }
        let in_recovery = self
            .recovery_start
            .is_some_and(|start| event.sent_time <= start);
        // The draft allows one packet here; two (RFC 9002 §7.2 kMinimumWindow) keep a
        // transport that also window-limits retransmissions (QUIC) able to send.
        let floor = self.mds.saturating_mul(2);
        if event.kind == LossKind::Timeout || !in_recovery {
            // RTO, or entering fast recovery: keep what is in flight, plus one.
            self.prior_cwnd = self.save_cwnd();
            self.cwnd = self.in_flight.saturating_add(self.mds).max(floor);
            self.recovery_start = Some(event.now);
            self.timeout_recovery = event.kind == LossKind::Timeout;
            self.packet_conservation = event.kind == LossKind::FastRetransmit;
            self.conservation_round_end = self.delivered;
        } else {
            self.cwnd = self.cwnd.saturating_sub(event.lost_bytes).max(floor);
        }
    }

    /// Ends the recovery the timeout began and restores the window saved when
    /// it began (as the end of a recovery does). The model's bounds the loss
    /// fed (BBRv2/v3 `inflight_hi`) stay: they follow the loss rate of whole
    /// rounds, not one event.
    fn on_spurious_timeout(&mut self, _now: Instant) {
        if !self.timeout_recovery || self.recovery_start.is_none() {
            return;
        }
        self.timeout_recovery = false;
        self.recovery_start = None;
        self.packet_conservation = false;
        self.restore_cwnd();
    }

    fn cwnd(&self) -> u64 {
        self.cwnd
    }

    fn pacing_rate(&self) -> Option<u64> {
        Some(self.pacing_rate.max(1))
    }

    fn send_quantum(&self) -> u64 {
        self.send_quantum
    }

    fn set_max_datagram_size(&mut self, max_datagram_size: u64) {
        self.mds = max_datagram_size.clamp(1, MAX_DATAGRAM_SIZE);
        self.cwnd = self.cwnd.max(self.min_pipe_cwnd());
        self.send_quantum = send_quantum_for(self.pacing_rate, self.mds);
    }

    fn name(&self) -> &'static str {
        self.p.name
    }
}
