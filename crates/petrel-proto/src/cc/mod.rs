//! The congestion-control seam: the [`CongestionController`] trait the ARQ calls, its
//! event structs, and the controllers that exist so far ([`NoCongestionControl`],
//! [`NewReno`]).
//!
//! The ARQ (`crate::kcp`) reports every first transmission, every newly acknowledged
//! segment and every loss it decides, and never sends new data while the bytes in
//! flight reach [`CongestionController::cwnd`]. It does not know which controller
//! runs. Retransmissions are not limited by the window (as the reference KCP).
//!
//! Pacing is a controller output only: no pacer enforces [`CongestionController::pacing_rate`]
//! yet, and neither controller here asks for one.
//!
//! Event structs are `#[non_exhaustive]` so later controllers (cubic, BBR, quinn
//! adapters) can get more fields without breaking implementations; build them with
//! their `new` constructors and set the optional fields.

mod new_reno;
mod none;

use std::fmt::Debug;
use std::time::{Duration, Instant};

pub use new_reno::NewReno;
pub use none::NoCongestionControl;

/// A segment (or packet) was transmitted.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub struct SentEvent {
    /// When it was sent.
    pub now: Instant,
    /// Its size on the wire, bytes.
    pub bytes: u64,
    /// Bytes in flight after this transmission.
    pub in_flight: u64,
    /// Whether it is a retransmission (its bytes are already in flight).
    pub retransmission: bool,
}

impl SentEvent {
    /// An event for `bytes` sent at `now` with `in_flight` bytes outstanding.
    pub fn new(now: Instant, bytes: u64, in_flight: u64, retransmission: bool) -> Self {
        Self {
            now,
            bytes,
            in_flight,
            retransmission,
        }
    }
}

/// A segment was acknowledged for the first time.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub struct AckEvent {
    /// When the ack arrived.
    pub now: Instant,
    /// Bytes newly acknowledged.
    pub acked_bytes: u64,
    /// RTT sample this ack gave, if any (cumulative acks give none).
    pub rtt: Option<Duration>,
    /// Bytes still in flight after this ack.
    pub in_flight: u64,
    /// Total bytes acknowledged on this connection so far, this ack included.
    pub delivered: u64,
    /// When the acknowledged segment was last transmitted.
    pub sent_time: Instant,
}

impl AckEvent {
    /// An ack of `acked_bytes` at `now` for a segment last sent at `sent_time`;
    /// `rtt` none, `in_flight` and `delivered` zero until set.
    pub fn new(now: Instant, acked_bytes: u64, sent_time: Instant) -> Self {
        Self {
            now,
            acked_bytes,
            rtt: None,
            in_flight: 0,
            delivered: 0,
            sent_time,
        }
    }
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
}

impl LossEvent {
    /// A loss of `lost_bytes` sent at `sent_time`, detected at `now`.
    pub fn new(now: Instant, kind: LossKind, lost_bytes: u64, sent_time: Instant) -> Self {
        Self {
            now,
            kind,
            lost_bytes,
            sent_time,
            in_flight: 0,
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
    /// Congestion window, bytes; `u64::MAX` for unlimited.
    fn cwnd(&self) -> u64;
    /// Pacing rate, bytes/s; `None` when the controller does not pace.
    fn pacing_rate(&self) -> Option<u64>;
    /// Short name for stats and logs ("none", "newreno").
    fn name(&self) -> &'static str;
}

/// Which controller a connection runs.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash)]
pub enum CongestionKind {
    /// No congestion window (the reference KCP's `nc = 1`, what deployments use).
    #[default]
    None,
    /// [`NewReno`] (RFC 9002 §7, RFC 6582).
    NewReno,
}

impl CongestionKind {
    /// Builds the controller for datagrams of at most `max_datagram_size` bytes.
    pub fn build(self, max_datagram_size: u64) -> Box<dyn CongestionController> {
        match self {
            Self::None => Box::new(NoCongestionControl),
            Self::NewReno => Box::new(NewReno::new(max_datagram_size)),
        }
    }
}
