//! Congestion control: the [`CongestionController`] trait the ARQ calls, its event
//! structs, the [`ControllerFactory`] that builds one per connection and the registry
//! of built-ins ([`CongestionKind`]), the delivery-rate bookkeeping the ARQ keeps for
//! the controllers ([`DeliveryState`]), the [`Pacer`] that enforces a controller's
//! pacing rate, and the controllers: [`NoCongestionControl`], [`NewReno`]
//! (RFC 9002 §7), [`Cubic`] (RFC 9438 with HyStart++, RFC 9406) and [`Bbr`] in three
//! versions (BBRv1, BBRv2, BBRv3 per draft-ietf-ccwg-bbr).
//!
//! The ARQ (`crate::kcp`) reports every transmission, every newly acknowledged
//! segment, every loss it decides and every retransmission timeout it finds
//! spurious afterwards ([`CongestionController::on_spurious_timeout`]), and never sends new data while the bytes in
//! flight reach [`CongestionController::cwnd`]. Retransmissions are not limited by the
//! window (as the reference KCP). When [`CongestionController::pacing_rate`] is `Some`,
//! the ARQ releases datagrams through a [`Pacer`] at that rate, in bursts of at most
//! [`CongestionController::send_quantum`] bytes. It does not know which controller runs.
//!
//! What does not live here: RTT estimation for the RTO (`crate::kcp`), loss detection
//! (the ARQ decides losses), sockets and timers (`petrel`).
//!
//! Event structs are `#[non_exhaustive]` so later controllers can get more fields
//! without breaking implementations; build them with their `new` constructors and set
//! the optional fields.
//!
//! # Choosing a controller
//!
//! A connection gets its controller from a [`ControllerFactory`] (quinn's pattern):
//! [`KcpConfig::congestion`](crate::kcp::KcpConfig::congestion) names a built-in
//! [`CongestionKind`], and [`KcpConfig::controller`](crate::kcp::KcpConfig::controller)
//! takes any user-supplied `&'static dyn ControllerFactory` instead, without touching
//! this crate. The built-ins are the rows of the registry table in `cc/registry.rs`,
//! which defines [`CongestionKind`], its names and how each controller is built; the
//! quinn adapter (`petrel-quic`) and `petrel bench goodput --cc` read the same table.
//!
//! # How to add a congestion controller
//!
//! As a user, outside this crate: implement [`CongestionController`] and a
//! [`ControllerFactory`] that builds it, and set
//! `KcpConfig::controller = Some(&MY_FACTORY)` (the test
//! `tests/cc_factory.rs` plugs in a fixed-window controller this way).
//!
//! As a built-in, selectable by name everywhere (`--cc vegas`):
//! 1. write the controller in one new file, `cc/vegas.rs`: a `Vegas` type
//!    implementing [`CongestionController`] (and `Clone`, as every built-in is, so the
//!    quinn adapter can wrap it), with its spec reference and unit tests in the file;
//!    declare it next to the others at the top of this file (`mod vegas;` and
//!    `pub use vegas::Vegas;`);
//! 2. register it with one row in the table of `cc/registry.rs`:
//!    `Vegas = "vegas", "TCP Vegas (RFC ...)" => |p| Vegas::new(p.max_datagram_size);`
//!    — this adds `CongestionKind::Vegas`, its name, and makes it available to KCP,
//!    QUIC (`petrel-quic`) and `petrel bench goodput --cc vegas`;
//! 3. tests: `cargo test -p petrel-proto` runs the property test `tests/cc_props.rs`
//!    (every kind in [`CongestionKind::ALL`], window bounds under random events) and
//!    the registry's name tests on it automatically; add a line for it to the
//!    bottleneck simulations `tests/cc_utilization.rs` and `tests/cc_fairness.rs`,
//!    and to `tests/loopback.rs` in `petrel-quic`.

mod bbr;
mod cubic;
mod factory;
mod hystart;
mod new_reno;
mod none;
mod pacer;
mod rate;
mod registry;

use std::fmt::Debug;
use std::time::{Duration, Instant};

pub use bbr::{Bbr, BbrMode, BbrVersion};
pub use cubic::Cubic;
pub use factory::{ControllerFactory, ControllerParams, ControllerVisitor};
pub use new_reno::NewReno;
pub use none::NoCongestionControl;
pub use pacer::Pacer;
pub use rate::{DeliveryState, SendStamp};
pub use registry::{CongestionKind, UnknownCongestionKind};

/// A segment (or packet) was transmitted.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub struct SentEvent {
    /// When it was sent.
    pub now: Instant,
    /// Its size on the wire, bytes.
    pub bytes: u64,
    /// Bytes in flight after this transmission (this one included).
    pub in_flight: u64,
    /// Whether it is a retransmission.
    pub retransmission: bool,
    /// Whether the connection was application-limited when it was sent (nothing more
    /// to send while below the window), per [`DeliveryState`].
    pub app_limited: bool,
}

impl SentEvent {
    /// An event for `bytes` sent at `now` with `in_flight` bytes outstanding;
    /// `app_limited` false until set.
    pub fn new(now: Instant, bytes: u64, in_flight: u64, retransmission: bool) -> Self {
        Self {
            now,
            bytes,
            in_flight,
            retransmission,
            app_limited: false,
        }
    }
}

/// A segment was acknowledged for the first time.
///
/// The `prior_*`, `first_sent_time`, `app_limited`, `tx_in_flight` and `lost` fields
/// form a delivery-rate sample as draft-ietf-ccwg-bbr ("Delivery Rate Samples") and
/// draft-cheng-iccrg-delivery-rate-estimation define it; [`AckEvent::rate_sample`]
/// turns them into a rate.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub struct AckEvent {
    /// When the ack arrived.
    pub now: Instant,
    /// Bytes newly acknowledged.
    pub acked_bytes: u64,
    /// RTT sample of this segment's latest transmission, if any (cumulative acks and
    /// acks of an earlier transmission give none).
    pub rtt: Option<Duration>,
    /// The ARQ's smoothed RTT (RFC 6298), if it has a sample yet.
    pub srtt: Option<Duration>,
    /// Bytes still in flight after this ack.
    pub in_flight: u64,
    /// Total bytes delivered (acknowledged) on this connection so far, this ack
    /// included (`C.delivered`).
    pub delivered: u64,
    /// When the acknowledged segment was last transmitted.
    pub sent_time: Instant,
    /// `C.delivered` when the segment was sent (`P.delivered`).
    pub prior_delivered: u64,
    /// `C.delivered_time` when the segment was sent (`P.delivered_time`).
    pub prior_delivered_time: Instant,
    /// Send time of the first segment of the flight this one was sent in
    /// (`P.first_send_time`).
    pub first_sent_time: Instant,
    /// Whether the connection was application-limited when the segment was sent.
    pub app_limited: bool,
    /// Bytes in flight just after the segment was sent (`P.tx_in_flight`).
    pub tx_in_flight: u64,
    /// Total bytes declared lost when the segment was sent (`P.lost`).
    pub prior_lost: u64,
    /// Total bytes declared lost on this connection so far (`C.lost`).
    pub lost: u64,
}

impl AckEvent {
    /// An ack of `acked_bytes` at `now` for a segment last sent at `sent_time`; no
    /// RTT, zero counters and the delivery-rate times equal to `sent_time` until set.
    pub fn new(now: Instant, acked_bytes: u64, sent_time: Instant) -> Self {
        Self {
            now,
            acked_bytes,
            rtt: None,
            srtt: None,
            in_flight: 0,
            delivered: 0,
            sent_time,
            prior_delivered: 0,
            prior_delivered_time: sent_time,
            first_sent_time: sent_time,
            app_limited: false,
            tx_in_flight: 0,
            prior_lost: 0,
            lost: 0,
        }
    }

    /// The delivery-rate sample this ack gives: bytes delivered between the
    /// segment's send and this ack, over the longer of the send and ack intervals
    /// (draft-ietf-ccwg-bbr, "Delivery Rate Samples"). `None` when the interval is
    /// zero.
    pub fn rate_sample(&self) -> Option<RateSample> {
        let delivered = self.delivered.saturating_sub(self.prior_delivered);
        let send_elapsed = self
            .sent_time
            .saturating_duration_since(self.first_sent_time);
        let ack_elapsed = self
            .now
            .saturating_duration_since(self.prior_delivered_time);
        let interval = send_elapsed.max(ack_elapsed);
        let micros = interval.as_micros();
        if micros == 0 {
            return None;
        }
        let rate = (u128::from(delivered) * 1_000_000 / micros).min(u128::from(u64::MAX));
        Some(RateSample {
            delivered,
            interval,
            delivery_rate: rate as u64,
        })
    }
}

/// A delivery-rate sample (see [`AckEvent::rate_sample`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RateSample {
    /// Bytes delivered over the interval.
    pub delivered: u64,
    /// The sampling interval.
    pub interval: Duration,
    /// `delivered / interval`, bytes/s.
    pub delivery_rate: u64,
}

/// How a loss was detected.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum LossKind {
    /// Its retransmission timer expired.
    Timeout,
    /// Later segments were acknowledged `fast_resend` times (fast retransmit).
    FastRetransmit,
}

/// A segment was declared lost (and will be retransmitted).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub struct LossEvent {
    /// When the loss was detected.
    pub now: Instant,
    /// How it was detected.
    pub kind: LossKind,
    /// Size of the lost segment on the wire, bytes.
    pub lost_bytes: u64,
    /// When the lost transmission was sent.
    pub sent_time: Instant,
    /// Bytes in flight (the lost segment still counted).
    pub in_flight: u64,
    /// Bytes in flight just after the lost segment was sent (`P.tx_in_flight`).
    pub tx_in_flight: u64,
    /// Total bytes declared lost when the segment was sent (`P.lost`).
    pub prior_lost: u64,
    /// Total bytes declared lost on this connection, this loss included (`C.lost`).
    pub lost: u64,
    /// Whether the connection was application-limited when the segment was sent.
    pub app_limited: bool,
}

impl LossEvent {
    /// A loss of `lost_bytes` sent at `sent_time`, detected at `now`; counters zero
    /// until set.
    pub fn new(now: Instant, kind: LossKind, lost_bytes: u64, sent_time: Instant) -> Self {
        Self {
            now,
            kind,
            lost_bytes,
            sent_time,
            in_flight: 0,
            tx_in_flight: 0,
            prior_lost: 0,
            lost: 0,
            app_limited: false,
        }
    }
}

/// A congestion controller, driven by the ARQ's events. Time comes only from events.
pub trait CongestionController: Send + Debug {
    /// A segment was transmitted.
    fn on_sent(&mut self, event: &SentEvent);
    /// A segment was acknowledged for the first time.
    fn on_ack(&mut self, event: &AckEvent);
    /// A segment was declared lost.
    fn on_loss(&mut self, event: &LossEvent);
    /// The latest retransmission timeout was spurious: the ARQ saw the original
    /// transmission of the timed-out segment acknowledged (Eifel detection, RFC
    /// 3522 §2), so nothing was lost and the path only delayed it. A controller
    /// that reduced its window for that timeout restores the window and
    /// `ssthresh` it had just before, unless a congestion event since then made
    /// the reduction a real one (the full undo of Linux's
    /// `tcp_undo_cwnd_reduction`, stronger than RFC 4015's response, which
    /// restores `ssthresh` and re-grows `cwnd` in slow start). Default: nothing to
    /// undo.
    fn on_spurious_timeout(&mut self, now: Instant) {
        let _ = now;
    }
    /// Congestion window, bytes; `u64::MAX` for unlimited.
    fn cwnd(&self) -> u64;
    /// Pacing rate, bytes/s; `None` when the controller does not pace (then the ARQ
    /// sends whatever the windows allow at once).
    fn pacing_rate(&self) -> Option<u64>;
    /// Largest burst the pacer may release at once, bytes (the pacer never uses less
    /// than one datagram).
    fn send_quantum(&self) -> u64;
    /// The largest datagram is now `max_datagram_size` bytes (a path MTU change;
    /// KCP's MTU is fixed, QUIC's grows with MTU discovery). Windows kept in bytes stay
    /// as they are; minimums and quanta follow the new size.
    fn set_max_datagram_size(&mut self, max_datagram_size: u64);
    /// Short name for stats and logs ("none", "reno", "cubic", "bbrv1", ...).
    fn name(&self) -> &'static str;
}

/// The send quantum draft-ietf-ccwg-bbr ("Send Quantum") gives a pacing rate:
/// 1 ms of data at `pacing_rate` bytes/s, within [2·`max_datagram_size`, 64 KiB].
pub fn send_quantum_for(pacing_rate: u64, max_datagram_size: u64) -> u64 {
    let floor = max_datagram_size.saturating_mul(2);
    (pacing_rate / 1000).clamp(floor.min(65_536), 65_536.max(floor))
}

/// Largest datagram size a controller takes into account, bytes; larger values are
/// clamped so window arithmetic in datagrams cannot overflow.
pub(crate) const MAX_DATAGRAM_SIZE: u64 = 1 << 20;

/// The pacing rate of a window-based controller, bytes/s: `cwnd / srtt` times 2 in
/// slow start and 1.25 otherwise (RFC 9002 §7.7 suggests N = 1.25; the slow-start
/// factor is Linux's `tcp_pacing_ss_ratio`, so pacing never holds back slow-start
/// growth). `None` before the first RTT sample: the initial window goes out at once.
pub(crate) fn window_pacing_rate(
    cwnd: u64,
    srtt: Option<Duration>,
    slow_start: bool,
) -> Option<u64> {
    let micros = srtt?.as_micros().max(1);
    let factor: u128 = if slow_start { 200 } else { 125 };
    let rate = u128::from(cwnd) * factor * 10_000 / micros;
    Some(u64::try_from(rate).unwrap_or(u64::MAX).max(1))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn kinds_round_trip_through_their_names() {
        for kind in CongestionKind::ALL {
            assert_eq!(kind.as_str().parse::<CongestionKind>(), Ok(kind));
            assert_eq!(kind.build(1200).name(), kind.as_str());
        }
        assert_eq!("BBRv3".parse::<CongestionKind>(), Ok(CongestionKind::BbrV3));
        let err = "vegas".parse::<CongestionKind>().unwrap_err();
        assert!(err.to_string().contains("vegas"));
    }

    #[test]
    fn send_quantum_is_one_ms_within_bounds() {
        assert_eq!(send_quantum_for(0, 1200), 2400);
        assert_eq!(send_quantum_for(25_000_000, 1200), 25_000);
        assert_eq!(send_quantum_for(u64::MAX, 1200), 65_536);
        assert_eq!(send_quantum_for(u64::MAX, 40_000), 80_000);
    }

    #[test]
    fn rate_sample_uses_the_longer_interval() {
        let t0 = Instant::now();
        let mut ev = AckEvent::new(t0 + Duration::from_millis(10), 1000, t0);
        ev.prior_delivered_time = t0;
        ev.first_sent_time = t0 - Duration::from_millis(20);
        ev.delivered = 11_000;
        ev.prior_delivered = 1000;
        let s = ev.rate_sample().unwrap();
        assert_eq!(s.interval, Duration::from_millis(20));
        assert_eq!(s.delivery_rate, 500_000);
        let same = AckEvent::new(t0, 1, t0);
        assert_eq!(same.rate_sample(), None);
    }
}
