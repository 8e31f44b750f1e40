//! CUBIC congestion control (RFC 9438) with HyStart++ (RFC 9406) in the initial slow
//! start.
//!
//! - Window curve `W_cubic(t) = C·(t − K)³ + W_max` in segments and seconds, evaluated
//!   one smoothed RTT ahead (§4.2); right after a loss `t < K`, so the curve is
//!   *below* `W_max` and the window approaches it concavely (a reference got this
//!   wrong by taking `|t − K|`).
//! - The Reno-friendly estimate `W_est` with `α_cubic = 3(1 − β)/(1 + β)` until it
//!   reaches the pre-loss window, then 1 (§4.3).
//! - Multiplicative decrease `β_cubic = 0.7` once per recovery period, with fast
//!   convergence (§4.6–4.7); a retransmission timeout also collapses the window to
//!   2·mds (RFC 9002 §7.6.2, as [`NewReno`](super::NewReno)).
//! - A timeout the ARQ later finds spurious (RFC 3522 Eifel detection) is undone:
//!   window, `ssthresh`, `W_max` and the recovery period return to their values
//!   before it (a new epoch starts from there), unless another congestion event
//!   came in between.
//! - No growth on acks of segments sent while application-limited (§5.8, RFC 7661).
//! - Pacing as [`NewReno`](super::NewReno): 2·cwnd/srtt in slow start, 1.25·cwnd/srtt
//!   after.
//!
//! Windows are bytes (`u64`, saturating) at the interface; the curve is computed in
//! `f64` segments and clamped before it becomes a window.

use std::time::{Duration, Instant};

use super::hystart::{HyStart, Phase, CSS_GROWTH_DIVISOR};
use super::{
    send_quantum_for, window_pacing_rate, AckEvent, CongestionController, LossEvent, LossKind,
    SentEvent, MAX_DATAGRAM_SIZE,
};

/// `C`, segments/s³.
const C: f64 = 0.4;
/// `β_cubic`.
const BETA: f64 = 0.7;
/// Largest window, bytes: far above any real path, small enough for exact `f64`.
const MAX_CWND: u64 = 1 << 40;

/// CUBIC state. Windows in bytes unless a name says segments.
#[derive(Debug, Clone)]
pub struct Cubic {
    mds: u64,
    cwnd: u64,
    ssthresh: u64,
    /// HyStart++ while in the initial slow start; `None` after it.
    hystart: Option<HyStart>,
    /// `W_max`, segments.
    w_max: f64,
    /// `cwnd_prior`: the window before the last reduction, segments.
    cwnd_prior: f64,
    /// Start of the current congestion-avoidance epoch and its `K` (s), `cwnd_epoch`
    /// (segments).
    epoch: Option<(Instant, f64, f64)>,
    /// `W_est`, segments.
    w_est: f64,
    /// Growth below one byte carried to the next ack, bytes.
    carry: f64,
    recovery_start: Option<Instant>,
    srtt: Option<Duration>,
    /// State before the latest run of timeouts reduced the window, for
    /// [`CongestionController::on_spurious_timeout`]; dropped by a congestion
    /// event that is not a timeout.
    before_timeout: Option<CubicState>,
    /// Whether a segment sent after the latest timeout's recovery began was
    /// acknowledged: a further timeout then starts a new run.
    delivered_since_timeout: bool,
}

/// The part of [`Cubic`] a congestion event changes.
#[derive(Debug, Clone)]
struct CubicState {
    cwnd: u64,
    ssthresh: u64,
    hystart: Option<HyStart>,
    w_max: f64,
    cwnd_prior: f64,
    w_est: f64,
    recovery_start: Option<Instant>,
}

impl Cubic {
    /// A controller for datagrams of at most `max_datagram_size` bytes, starting at the
    /// RFC 9002 §7.2 initial window `min(10·mds, max(14720, 2·mds))`.
    pub fn new(max_datagram_size: u64) -> Self {
        let mds = max_datagram_size.clamp(1, MAX_DATAGRAM_SIZE);
        Self {
            mds,
            cwnd: (10 * mds).min(14_720.max(2 * mds)),
            ssthresh: u64::MAX,
            hystart: Some(HyStart::default()),
            w_max: 0.0,
            cwnd_prior: 0.0,
            epoch: None,
            w_est: 0.0,
            carry: 0.0,
            recovery_start: None,
            srtt: None,
            before_timeout: None,
            delivered_since_timeout: false,
        }
    }

    /// Slow-start threshold, bytes (`u64::MAX` before slow start ends).
    pub fn ssthresh(&self) -> u64 {
        self.ssthresh
    }

    /// `W_max`, bytes: the window at the last congestion event (after fast convergence).
    pub fn w_max(&self) -> u64 {
        (self.w_max * self.mds as f64) as u64
    }

    fn min_window(&self) -> u64 {
        2 * self.mds
    }

    fn segments(&self, bytes: u64) -> f64 {
        bytes as f64 / self.mds as f64
    }

    fn set_cwnd_segments(&mut self, segments: f64) {
        self.set_cwnd_bytes(segments * self.mds as f64);
    }

    fn set_cwnd_bytes(&mut self, bytes: f64) {
        self.cwnd = bytes
            .round()
            .clamp(self.min_window() as f64, MAX_CWND as f64) as u64;
    }

    fn in_recovery(&self, sent_time: Instant) -> bool {
        self.recovery_start.is_some_and(|start| sent_time <= start)
    }

    /// `W_cubic(t)`, segments, for `t` seconds into the epoch.
    fn w_cubic(&self, k: f64, t: f64) -> f64 {
        C * (t - k).powi(3) + self.w_max
    }

    fn slow_start(&mut self, event: &AckEvent) {
        let phase = self
            .hystart
            .as_mut()
            .map_or(Phase::SlowStart, |h| h.on_ack(event));
        let growth = match phase {
            Phase::SlowStart => event.acked_bytes,
            Phase::Conservative => event.acked_bytes / CSS_GROWTH_DIVISOR,
            Phase::Exit => {
                self.hystart = None;
                self.ssthresh = self.cwnd;
                return;
            }
        };
        self.cwnd = self.cwnd.saturating_add(growth).min(MAX_CWND);
        if self.cwnd >= self.ssthresh {
            self.hystart = None;
        }
    }

    fn congestion_avoidance(&mut self, event: &AckEvent) {
        let cwnd = self.segments(self.cwnd);
        let (start, k, _) = *self.epoch.get_or_insert_with(|| {
            let k = ((self.w_max - cwnd).max(0.0) / C).cbrt();
            (event.now, k, cwnd)
        });
        if self.w_est == 0.0 {
            self.w_est = cwnd;
        }
        let t = event.now.saturating_duration_since(start).as_secs_f64();
        let rtt = self.srtt.unwrap_or_default().as_secs_f64();
        let acked = self.segments(event.acked_bytes);
        let alpha = if self.w_est >= self.cwnd_prior {
            1.0
        } else {
            3.0 * (1.0 - BETA) / (1.0 + BETA)
        };
        self.w_est += alpha * acked / cwnd;
        if self.w_cubic(k, t) < self.w_est {
            // Reno-friendly region.
            self.set_cwnd_segments(self.w_est.max(cwnd));
            return;
        }
        let target = self.w_cubic(k, t + rtt).clamp(cwnd, 1.5 * cwnd);
        // (target − cwnd)/cwnd segments per acked segment, in bytes, with the
        // fraction of a byte carried over.
        let growth = (target - cwnd) / cwnd * event.acked_bytes as f64 + self.carry;
        self.carry = growth.fract();
        self.set_cwnd_bytes(self.cwnd as f64 + growth.trunc());
    }
}

impl CongestionController for Cubic {
    fn on_sent(&mut self, _event: &SentEvent) {}

    fn on_ack(&mut self, event: &AckEvent) {
        self.srtt = event.srtt.or(self.srtt);
        if !self.in_recovery(event.sent_time) {
            self.delivered_since_timeout = true;
        }
        if self.in_recovery(event.sent_time) || event.app_limited {
            return;
        }
        if self.cwnd < self.ssthresh {
            self.slow_start(event);
        } else {
            self.congestion_avoidance(event);
        }
    }

    fn on_loss(&mut self, event: &LossEvent) {
        if self.in_recovery(event.sent_time) {
            return;
        }
        // Timeouts of retransmissions before anything sent since the first one
        // was delivered (RTO backoff) belong to the same run: keep its state.
        let same_run = self.before_timeout.is_some() && !self.delivered_since_timeout;
        if event.kind != LossKind::Timeout {
            self.before_timeout = None;
        } else if !same_run {
            self.before_timeout = Some(CubicState {
                cwnd: self.cwnd,
                ssthresh: self.ssthresh,
                hystart: self.hystart.clone(),
                w_max: self.w_max,
                cwnd_prior: self.cwnd_prior,
                w_est: self.w_est,
                recovery_start: self.recovery_start,
            });
        }
        self.delivered_since_timeout = false;
        self.recovery_start = Some(event.now);
        self.hystart = None;
        let cwnd = self.segments(self.cwnd);
        // Fast convergence (§4.7): release bandwidth to newer flows.
        self.w_max = if cwnd < self.w_max {
            cwnd * (1.0 + BETA) / 2.0
        } else {
            cwnd
        };
        self.cwnd_prior = cwnd;
        self.set_cwnd_segments(cwnd * BETA);
        self.ssthresh = self.cwnd;
        self.w_est = self.segments(self.cwnd);
        self.epoch = None;
        self.carry = 0.0;
        if event.kind == LossKind::Timeout {
            self.cwnd = self.min_window();
        }
    }

    fn on_spurious_timeout(&mut self, _now: Instant) {
        let Some(prior) = self.before_timeout.take() else {
            return;
        };
        self.cwnd = self.cwnd.max(prior.cwnd);
        self.ssthresh = prior.ssthresh;
        self.hystart = prior.hystart;
        self.w_max = prior.w_max;
        self.cwnd_prior = prior.cwnd_prior;
        self.w_est = prior.w_est;
        self.recovery_start = prior.recovery_start;
        self.epoch = None;
        self.carry = 0.0;
    }

    fn cwnd(&self) -> u64 {
        self.cwnd
    }

    fn pacing_rate(&self) -> Option<u64> {
        window_pacing_rate(self.cwnd, self.srtt, self.cwnd < self.ssthresh)
    }

    fn send_quantum(&self) -> u64 {
        send_quantum_for(self.pacing_rate().unwrap_or(0), self.mds)
    }

    fn set_max_datagram_size(&mut self, max_datagram_size: u64) {
        let old = self.mds as f64;
        self.mds = max_datagram_size.clamp(1, MAX_DATAGRAM_SIZE);
        // The curve's state is in segments: keep it the same in bytes.
        let scale = old / self.mds as f64;
        self.w_max *= scale;
        self.cwnd_prior *= scale;
        self.w_est *= scale;
        self.epoch = None;
        self.before_timeout = None;
        self.cwnd = self.cwnd.max(self.min_window());
    }

    fn name(&self) -> &'static str {
        "cubic"
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const MDS: u64 = 1000;
    const MS: Duration = Duration::from_millis(1);

    fn ack(now: Instant, sent: Instant, srtt: Duration) -> AckEvent {
        let mut ev = AckEvent::new(now, MDS, sent);
        ev.srtt = Some(srtt);
        ev
    }

    /// A CUBIC in congestion avoidance after one loss at a window of `segments`.
    fn after_loss(t0: Instant, segments: u64) -> Cubic {
        let mut cc = Cubic::new(MDS);
        cc.hystart = None;
        cc.cwnd = segments * MDS;
        cc.on_loss(&LossEvent::new(t0, LossKind::FastRetransmit, MDS, t0));
        cc
    }

    #[test]
    fn loss_reduces_by_beta_and_sets_w_max() {
        let t0 = Instant::now();
        let cc = after_loss(t0, 100);
        assert_eq!(cc.cwnd(), 70 * MDS);
        assert_eq!(cc.ssthresh(), 70 * MDS);
        assert_eq!(cc.w_max(), 100 * MDS);
    }

    #[test]
    fn fast_convergence_lowers_w_max() {
        let t0 = Instant::now();
        let mut cc = after_loss(t0, 100);
        let t1 = t0 + 100 * MS;
        cc.on_loss(&LossEvent::new(t1, LossKind::FastRetransmit, MDS, t1));
        // 70 < 100: W_max = 70·(1 + 0.7)/2 = 59.5 segments.
        assert_eq!(cc.w_max(), 59_500);
        assert_eq!(cc.cwnd(), 49_000);
    }

    #[test]
    fn one_reduction_per_recovery_period() {
        let t0 = Instant::now();
        let mut cc = after_loss(t0 + 10 * MS, 100);
        cc.on_loss(&LossEvent::new(
            t0 + 11 * MS,
            LossKind::FastRetransmit,
            MDS,
            t0,
        ));
        assert_eq!(cc.cwnd(), 70 * MDS);
    }

    #[test]
    fn window_grows_concavely_below_w_max_after_a_loss() {
        let t0 = Instant::now();
        let srtt = 100 * MS;
        let mut cc = after_loss(t0, 100);
        // K = cbrt((100 − 70)/0.4) ≈ 4.22 s: for the first seconds the window stays
        // below W_max, growing fast at first and slower as it approaches it.
        let mut now = t0 + MS;
        let mut samples = Vec::new();
        while now < t0 + Duration::from_secs(4) {
            for _ in 0..cc.cwnd() / MDS {
                cc.on_ack(&ack(now, now, srtt));
            }
            assert!(cc.cwnd() < 100 * MDS, "above W_max at {:?}", now - t0);
            samples.push(cc.cwnd());
            now += srtt;
        }
        let first_second = samples[10] - samples[0];
        let last_second = samples[samples.len() - 1] - samples[samples.len() - 11];
        assert!(
            first_second > 2 * last_second,
            "{first_second} {last_second}"
        );
        // Past K it probes above W_max.
        while now < t0 + Duration::from_secs(6) {
            for _ in 0..cc.cwnd() / MDS {
                cc.on_ack(&ack(now, now, srtt));
            }
            now += srtt;
        }
        assert!(cc.cwnd() > 100 * MDS);
    }

    #[test]
    fn timeout_collapses_and_app_limited_acks_do_not_grow() {
        let t0 = Instant::now();
        let mut cc = Cubic::new(MDS);
        let mut ev = ack(t0, t0, 10 * MS);
        ev.app_limited = true;
        cc.on_ack(&ev);
        assert_eq!(cc.cwnd(), 10 * MDS);
        cc.on_ack(&ack(t0, t0, 10 * MS));
        assert_eq!(cc.cwnd(), 11 * MDS);
        cc.on_loss(&LossEvent::new(t0 + MS, LossKind::Timeout, MDS, t0));
        assert_eq!(cc.cwnd(), 2 * MDS);
        assert_eq!(cc.ssthresh(), 7700);
    }
}
