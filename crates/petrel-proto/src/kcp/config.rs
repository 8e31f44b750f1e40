//! [`KcpConfig`]: the tunables of one KCP connection and their validation.

use std::time::Duration;

use petrel_sys::range::{check_range, check_range_in, RangeError};

use crate::cc::CongestionKind;

use super::segment::HEADER_LEN;

/// Smallest MTU the reference accepts (`ikcp_setmtu`), bytes.
pub const MIN_MTU: usize = 50;
/// Largest UDP payload over IPv4, bytes.
pub const MAX_MTU: usize = 65_507;
/// Upper bound of any RTO, also of the backed-off per-segment RTO (`IKCP_RTO_MAX`).
pub const MAX_RTO: Duration = Duration::from_secs(60);
/// Minimum RTO the reference uses in nodelay mode (`IKCP_RTO_NDL`).
pub const NODELAY_MIN_RTO: Duration = Duration::from_millis(30);
/// Minimum RTO the reference uses outside nodelay mode (`IKCP_RTO_MIN`).
pub const NORMAL_MIN_RTO: Duration = Duration::from_millis(100);

/// Configuration of one KCP connection.
///
/// [`Default`] is the "nodelay" profile real deployments use (`ikcp_nodelay(kcp, 1, 10,
/// 2, 1)`, windows 128/512, MTU 1200); [`KcpConfig::normal`] is the reference's
/// conservative profile. Both peers need not agree on any of this except that a peer's
/// `rcv_wnd` should be at least the fragment count of the largest message sent to it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct KcpConfig {
    /// Largest datagram written, bytes (header included). `mss = mtu − 24`. Default 1200.
    pub mtu: usize,
    /// Send window, segments: at most this many unacknowledged segments. Default 128.
    pub snd_wnd: u16,
    /// Receive window, segments: out-of-order buffer and undelivered-queue size,
    /// advertised to the peer. Default 512.
    pub rcv_wnd: u16,
    /// Flush interval: delayed acks (when `ack_nodelay` is false) go out on this tick,
    /// and it is the clock granularity `G` in the RTO formula. Default 10 ms.
    pub interval: Duration,
    /// Nodelay mode: RTO backoff ×1.5 instead of ×2, and no extra `rto/8` on the first
    /// retransmission timer (reference `nodelay = 1`). Default true.
    pub nodelay: bool,
    /// Floor of the RTO. Default 30 ms (the reference's nodelay value; it uses 100 ms
    /// otherwise, see [`KcpConfig::normal`]).
    pub min_rto: Duration,
    /// Fast retransmit after this many acks of later segments (0 = off). Default 2.
    pub fast_resend: u32,
    /// The link is declared dead when a segment that has already been retransmitted
    /// this many times times out again. Default 20 (reference `dead_link`).
    pub dead_link: u32,
    /// Acks go out on the next `poll_transmit` after `input` (true) or on the next
    /// interval tick (false). Default true.
    pub ack_nodelay: bool,
    /// Which congestion controller limits the bytes in flight. Default
    /// [`CongestionKind::None`] (the reference's `nc = 1`).
    pub congestion: CongestionKind,
    /// Most segments waiting in the send queue (not yet in the send window); `send`
    /// returns `QueueFull` above it. Default 4096.
    pub send_queue_limit: usize,
}

impl Default for KcpConfig {
    fn default() -> Self {
        Self {
            mtu: 1200,
            snd_wnd: 128,
            rcv_wnd: 512,
            interval: Duration::from_millis(10),
            nodelay: true,
            min_rto: NODELAY_MIN_RTO,
            fast_resend: 2,
            dead_link: 20,
            ack_nodelay: true,
            congestion: CongestionKind::None,
            send_queue_limit: 4096,
        }
    }
}

/// A configuration field outside its allowed range: the workspace's one
/// range-checked configuration error, its message built from the checked range
/// (`mtu = 20 bytes is outside 50..=65507 bytes`).
pub type ConfigError = RangeError;

impl KcpConfig {
    /// The reference's conservative profile: nodelay off (backoff ×2), 100 ms RTO floor,
    /// fast retransmit off; everything else as [`Default`].
    pub fn normal() -> Self {
        Self {
            nodelay: false,
            min_rto: NORMAL_MIN_RTO,
            fast_resend: 0,
            ..Self::default()
        }
    }

    /// Payload bytes per segment: `mtu − 24`.
    pub fn mss(&self) -> usize {
        self.mtu.saturating_sub(HEADER_LEN)
    }

    /// Checks every field.
    ///
    /// # Errors
    /// A [`ConfigError`] naming the first field out of range.
    pub fn validate(&self) -> Result<(), ConfigError> {
        let ms = Duration::from_millis;
        check_range_in("mtu", self.mtu, &(MIN_MTU..=MAX_MTU), "bytes")?;
        check_range_in("snd_wnd", self.snd_wnd, &(1..=u16::MAX), "segments")?;
        check_range_in("rcv_wnd", self.rcv_wnd, &(1..=u16::MAX), "segments")?;
        check_range("interval", self.interval, &(ms(1)..=Duration::from_secs(5)))?;
        check_range("min_rto", self.min_rto, &(ms(1)..=MAX_RTO))?;
        check_range_in("dead_link", self.dead_link, &(1..=1000), "retransmissions")?;
        check_range_in(
            "send_queue_limit",
            self.send_queue_limit,
            &(1..=1 << 20),
            "segments",
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn defaults_are_the_documented_nodelay_profile() {
        let c = KcpConfig::default();
        assert_eq!(
            (c.mtu, c.mss(), c.snd_wnd, c.rcv_wnd),
            (1200, 1176, 128, 512)
        );
        assert_eq!(c.min_rto, Duration::from_millis(30));
        assert!(c.validate().is_ok());
        assert!(KcpConfig::normal().validate().is_ok());
    }

    #[test]
    fn errors_name_the_field() {
        let bad = KcpConfig {
            mtu: 49,
            ..KcpConfig::default()
        };
        assert_eq!(bad.validate().unwrap_err().field, "mtu");
        let bad = KcpConfig {
            rcv_wnd: 0,
            ..KcpConfig::default()
        };
        assert_eq!(bad.validate().unwrap_err().field, "rcv_wnd");
        let bad = KcpConfig {
            interval: Duration::ZERO,
            ..KcpConfig::default()
        };
        assert_eq!(bad.validate().unwrap_err().field, "interval");
        let bad = KcpConfig {
            send_queue_limit: 0,
            ..KcpConfig::default()
        };
        assert!(bad
            .validate()
            .unwrap_err()
            .to_string()
            .contains("send_queue_limit"));
    }
}
