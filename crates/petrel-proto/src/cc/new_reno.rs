//! NewReno congestion control as RFC 9002 §7 specifies it for QUIC (slow start,
//! congestion avoidance, one window reduction per recovery period as RFC 6582 intends),
//! with a retransmission timeout that starts a recovery period also collapsing the
//! window to the minimum (RFC 9002 §7.6.2 persistent congestion; RFC 5681 §3.1 loss
//! window). KCP has no probe timeout, so an RTO is the persistent-congestion signal;
//! further timeouts of segments sent before that recovery began change nothing.
//!
//! A timeout the ARQ later finds spurious (RFC 3522 Eifel detection) is undone:
//! `cwnd`, `ssthresh` and the recovery period return to their values before it,
//! unless another congestion event came in between.
//!
//! The window does not grow on acks of segments sent while the connection was
//! application-limited (RFC 9002 §7.8). Once an RTT sample exists it paces at
//! 2·cwnd/srtt in slow start and 1.25·cwnd/srtt after (RFC 9002 §7.7).

use std::time::{Duration, Instant};

use super::{
    send_quantum_for, window_pacing_rate, AckEvent, CongestionController, LossEvent, LossKind,
    SentEvent, MAX_DATAGRAM_SIZE,
};

/// NewReno state. All windows are in bytes.
#[derive(Debug, Clone)]
pub struct NewReno {
    max_datagram_size: u64,
    cwnd: u64,
    ssthresh: u64,
    /// Bytes acked in congestion avoidance not yet turned into window growth.
    acked_in_avoidance: u64,
    recovery_start: Option<Instant>,
    srtt: Option<Duration>,
    /// State before the latest run of timeouts reduced the window, for
    /// [`CongestionController::on_spurious_timeout`]; dropped by a congestion
    /// event that is not a timeout.
    before_timeout: Option<RenoState>,
    /// Whether a segment sent after the latest timeout's recovery began was
    /// acknowledged: a further timeout then starts a new run.
    delivered_since_timeout: bool,
}

/// The part of [`NewReno`] a timeout changes.
#[derive(Debug, Clone, Copy)]
struct RenoState {
    cwnd: u64,
    ssthresh: u64,
    acked_in_avoidance: u64,
    recovery_start: Option<Instant>,
}

impl NewReno {
    /// A controller for datagrams of at most `max_datagram_size` bytes, starting at the
    /// RFC 9002 §7.2 initial window `min(10·mds, max(14720, 2·mds))`.
    pub fn new(max_datagram_size: u64) -> Self {
        let mds = max_datagram_size.clamp(1, MAX_DATAGRAM_SIZE);
        Self {
            max_datagram_size: mds,
            cwnd: (10 * mds).min(14_720.max(2 * mds)),
            ssthresh: u64::MAX,
            acked_in_avoidance: 0,
            recovery_start: None,
            srtt: None,
            before_timeout: None,
            delivered_since_timeout: false,
        }
    }

    /// Minimum window, `2·mds` (RFC 9002 §7.2).
    pub fn min_window(&self) -> u64 {
        2 * self.max_datagram_size
    }

    /// Slow-start threshold, bytes (`u64::MAX` before the first loss).
    pub fn ssthresh(&self) -> u64 {
        self.ssthresh
    }

    fn in_recovery(&self, sent_time: Instant) -> bool {
        self.recovery_start.is_some_and(|start| sent_time <= start)
    }

    /// RFC 9002 §7.3.2 `OnCongestionEvent`: halve once per recovery period.
    fn congestion_event(&mut self, now: Instant) {
        self.recovery_start = Some(now);
        self.ssthresh = (self.cwnd / 2).max(self.min_window());
        self.cwnd = self.ssthresh;
        self.acked_in_avoidance = 0;
    }
}

impl CongestionController for NewReno {
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
            self.cwnd = self.cwnd.saturating_add(event.acked_bytes);
            return;
        }
        // Congestion avoidance: one max_datagram_size per cwnd of acked bytes.
        self.acked_in_avoidance = self.acked_in_avoidance.saturating_add(event.acked_bytes);
        if self.acked_in_avoidance >= self.cwnd {
            self.acked_in_avoidance -= self.cwnd;
            self.cwnd = self.cwnd.saturating_add(self.max_datagram_size);
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
            self.before_timeout = Some(RenoState {
                cwnd: self.cwnd,
                ssthresh: self.ssthresh,
                acked_in_avoidance: self.acked_in_avoidance,
                recovery_start: self.recovery_start,
            });
        }
        self.delivered_since_timeout = false;
        self.congestion_event(event.now);
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
        self.acked_in_avoidance = prior.acked_in_avoidance;
        self.recovery_start = prior.recovery_start;
    }

    fn cwnd(&self) -> u64 {
        self.cwnd
    }

    fn pacing_rate(&self) -> Option<u64> {
        window_pacing_rate(self.cwnd, self.srtt, self.cwnd < self.ssthresh)
    }

    fn send_quantum(&self) -> u64 {
        send_quantum_for(self.pacing_rate().unwrap_or(0), self.max_datagram_size)
    }

    fn set_max_datagram_size(&mut self, max_datagram_size: u64) {
        self.max_datagram_size = max_datagram_size.clamp(1, MAX_DATAGRAM_SIZE);
        self.cwnd = self.cwnd.max(self.min_window());
    }

    fn name(&self) -> &'static str {
        "reno"
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;

    const MDS: u64 = 1200;

    fn ack(now: Instant, bytes: u64, sent: Instant) -> AckEvent {
        AckEvent::new(now, bytes, sent)
    }

    #[test]
    fn initial_window_follows_rfc9002() {
        assert_eq!(NewReno::new(1200).cwnd(), 12_000);
        assert_eq!(NewReno::new(1472).cwnd(), 14_720);
        assert_eq!(NewReno::new(9000).cwnd(), 18_000);
    }

    #[test]
    fn slow_start_grows_by_acked_bytes() {
        let t0 = Instant::now();
        let mut cc = NewReno::new(MDS);
        let start = cc.cwnd();
        for i in 0..10 {
            cc.on_ack(&ack(t0 + Duration::from_millis(i), MDS, t0));
        }
        assert_eq!(cc.cwnd(), start + 10 * MDS);
    }

    #[test]
    fn loss_halves_once_per_recovery_period() {
        let t0 = Instant::now();
        let t1 = t0 + Duration::from_millis(100);
        let mut cc = NewReno::new(MDS);
        let before = cc.cwnd();
        cc.on_loss(&LossEvent::new(t1, LossKind::FastRetransmit, MDS, t0));
        assert_eq!(cc.cwnd(), before / 2);
        assert_eq!(cc.ssthresh(), before / 2);
        // More losses of segments sent before recovery began: no further reduction.
        cc.on_loss(&LossEvent::new(
            t1 + Duration::from_millis(1),
            LossKind::FastRetransmit,
            MDS,
            t0,
        ));
        assert_eq!(cc.cwnd(), before / 2);
        // Acks of segments sent before recovery do not grow the window.
        cc.on_ack(&ack(t1 + Duration::from_millis(2), MDS, t0));
        assert_eq!(cc.cwnd(), before / 2);
        // A loss of a segment sent after recovery began is a new congestion event.
        let t2 = t1 + Duration::from_millis(50);
        cc.on_loss(&LossEvent::new(
            t2 + Duration::from_millis(50),
            LossKind::FastRetransmit,
            MDS,
            t2,
        ));
        assert_eq!(cc.cwnd(), (before / 4).max(2 * MDS));
    }

    #[test]
    fn congestion_avoidance_adds_one_datagram_per_window() {
        let t0 = Instant::now();
        let t1 = t0 + Duration::from_millis(10);
        let mut cc = NewReno::new(MDS);
        cc.on_loss(&LossEvent::new(t1, LossKind::FastRetransmit, MDS, t0));
        let cwnd = cc.cwnd();
        let sent = t1 + Duration::from_millis(1);
        let mut acked = 0;
        while acked + MDS < cwnd {
            cc.on_ack(&ack(sent, MDS, sent));
            acked += MDS;
        }
        assert_eq!(cc.cwnd(), cwnd);
        cc.on_ack(&ack(sent, MDS, sent));
        assert_eq!(cc.cwnd(), cwnd + MDS);
    }

    #[test]
    fn spurious_timeout_is_undone_but_not_after_a_real_loss() {
        let t0 = Instant::now();
        let mut cc = NewReno::new(MDS);
        for _ in 0..100 {
            cc.on_ack(&ack(t0, MDS, t0));
        }
        let (cwnd, ssthresh) = (cc.cwnd(), cc.ssthresh());
        let t1 = t0 + Duration::from_secs(1);
        cc.on_loss(&LossEvent::new(t1, LossKind::Timeout, MDS, t0));
        assert_eq!(cc.cwnd(), 2 * MDS);
        cc.on_spurious_timeout(t1 + Duration::from_millis(300));
        assert_eq!((cc.cwnd(), cc.ssthresh()), (cwnd, ssthresh));
        // Nothing left to undo.
        cc.on_spurious_timeout(t1 + Duration::from_millis(301));
        assert_eq!(cc.cwnd(), cwnd);
        // A timeout followed by a real congestion event stays reduced.
        let t2 = t1 + Duration::from_secs(1);
        cc.on_loss(&LossEvent::new(t2, LossKind::Timeout, MDS, t1));
        let t3 = t2 + Duration::from_millis(100);
        cc.on_loss(&LossEvent::new(
            t3,
            LossKind::FastRetransmit,
            MDS,
            t3 - Duration::from_millis(10),
        ));
        let reduced = cc.cwnd();
        cc.on_spurious_timeout(t3);
        assert_eq!(cc.cwnd(), reduced);
        assert!(reduced < cwnd);
    }

    #[test]
    fn timeout_collapses_to_min_window() {
        let t0 = Instant::now();
        let mut cc = NewReno::new(MDS);
        for _ in 0..100 {
            cc.on_ack(&ack(t0, MDS, t0));
        }
        let big = cc.cwnd();
        cc.on_loss(&LossEvent::new(
            t0 + Duration::from_secs(1),
            LossKind::Timeout,
            MDS,
            t0,
        ));
        assert_eq!(cc.cwnd(), 2 * MDS);
        assert_eq!(cc.ssthresh(), big / 2);
        // Slow start again from the minimum window after recovery.
        let later = t0 + Duration::from_secs(2);
        cc.on_ack(&ack(later, MDS, later));
        assert_eq!(cc.cwnd(), 3 * MDS);
    }
}
