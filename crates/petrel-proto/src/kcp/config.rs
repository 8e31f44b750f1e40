//! [`KcpConfig`]: the tunables of one KCP connection and their validation.

use std::time::{Duration, Instant};

use petrel_sys::range::{check_range, check_range_in, RangeError};

use crate::cc::{CongestionController, CongestionKind, ControllerFactory, ControllerParams};

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
///
/// Two configs are equal when every field is and both use the same factory object (by
/// address) or neither sets one.
#[derive(Debug, Clone, Copy)]
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
    /// [`CongestionKind::None`] (the reference's `nc = 1`). Not used when
    /// [`KcpConfig::controller`] is set.
    pub congestion: CongestionKind,
    /// A user-supplied controller: when set, it builds every connection's controller
    /// instead of `congestion` (see [`crate::cc`], "How to add a congestion
    /// controller"). Default `None`.
    ///
    /// A `&'static` reference rather than an `Arc`, as `log::set_logger` takes its
    /// logger, so that the config stays `Copy` (it is copied into every connection):
    /// a factory lives as long as the program's configuration. Use a `static`, or
    /// `Box::leak` one built at run time — once per configuration, not per
    /// connection.
    pub controller: Option<&'static dyn ControllerFactory>,
    /// Most segments waiting in the send queue (not yet in the send window); `send`
    /// returns `QueueFull` above it. Default 256: twice the default `snd_wnd`, and
    /// no less than the 255 fragments of the largest message. It bounds what many
    /// small messages cost; full segments meet [`KcpConfig::notsent_lowat`] first
    /// (111 of them at the default MTU). A deep queue of unsent data costs the copy
    /// into a datagram a read from memory per byte; Linux caps the same backlog for
    /// the same reason (`TCP_NOTSENT_LOWAT`, tcp(7)). A sender with a much larger
    /// `snd_wnd` on a long path may want it larger, so that a window's worth of
    /// acks does not empty the queue before the writer refills it.
    pub send_queue_limit: usize,
    /// Most bytes waiting in the send queue before `send` stops taking more: a
    /// message is accepted only while the queue holds fewer bytes than this
    /// (any message up to `max_message_size` then, so the queue may hold up to
    /// this plus one message), and `send` returns `QueueFull` otherwise. This is
    /// Linux's `TCP_NOTSENT_LOWAT` (tcp(7)) for the same reason as
    /// `send_queue_limit`: what waits unsent must still be in cache when
    /// `poll_transmit` copies it into a datagram. Counting segments alone does not
    /// bound that: 256 segments are 300 kB at the default MTU and 2.3 MB at a
    /// 9000-byte one. Default 131,072 (128 KiB, about 110 segments of the
    /// default MTU). As with `send_queue_limit`, a writer feeding a much larger
    /// window on a long path may want more. Range 1..=2^30.
    pub notsent_lowat: usize,
    /// Stream mode (the reference's `kcp->stream`, kcp-go's `SetStreamMode`, which
    /// kcptun turns on): the connection carries a byte stream, not messages. `send`
    /// first fills the last queued segment up to `mss`, so every segment but the
    /// newest is full and the datagrams of a bulk transfer are all the same size (one
    /// GSO train each); every segment has `frg` 0, which any receiver delivers as it
    /// comes. `recv` returns the in-order bytes that are ready, as one piece per
    /// receive chunk, so the pieces are not the sender's writes. A receiver in stream
    /// mode talks to a message-mode sender too (it just loses the boundaries); a
    /// message-mode receiver of a stream-mode sender gets one message per segment.
    /// A piece is at most one 64 KiB receive chunk, or one whole message when a
    /// message-mode peer sent a longer one. A single write is still limited to
    /// `max_message_size` (split larger buffers). Default false (message mode).
    pub stream: bool,
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
            controller: None,
            send_queue_limit: 256,
            notsent_lowat: 128 * 1024,
            stream: false,
        }
    }
}

impl PartialEq for KcpConfig {
    fn eq(&self, other: &Self) -> bool {
        // Destructured so that a new field cannot be forgotten here.
        let Self {
            mtu,
            snd_wnd,
            rcv_wnd,
            interval,
            nodelay,
            min_rto,
            fast_resend,
            dead_link,
            ack_nodelay,
            congestion,
            controller,
            send_queue_limit,
            notsent_lowat,
            stream,
        } = self;
        let same_controller = match (controller, other.controller) {
            (None, None) => true,
            (Some(a), Some(b)) => std::ptr::addr_eq(*a, b),
            _ => false,
        };
        *mtu == other.mtu
            && *snd_wnd == other.snd_wnd
            && *rcv_wnd == other.rcv_wnd
            && *interval == other.interval
            && *nodelay == other.nodelay
            && *min_rto == other.min_rto
            && *fast_resend == other.fast_resend
            && *dead_link == other.dead_link
            && *ack_nodelay == other.ack_nodelay
            && *congestion == other.congestion
            && same_controller
            && *send_queue_limit == other.send_queue_limit
            && *notsent_lowat == other.notsent_lowat
            && *stream == other.stream
    }
}

impl Eq for KcpConfig {}

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

    /// This config with `factory` building the congestion controller (sets
    /// [`KcpConfig::controller`]).
    pub fn with_controller(self, factory: &'static dyn ControllerFactory) -> Self {
        Self {
            controller: Some(factory),
            ..self
        }
    }

    /// Name of the congestion controller a connection of this config runs: the
    /// factory's when [`KcpConfig::controller`] is set, else `congestion`'s.
    pub fn controller_name(&self) -> &str {
        match self.controller {
            Some(factory) => factory.name(),
            None => self.congestion.as_str(),
        }
    }

    /// The controller of a connection created at `now`, seeded with `seed`, for
    /// datagrams of `mtu` bytes.
    pub(super) fn build_controller(
        &self,
        now: Instant,
        seed: u64,
    ) -> Box<dyn CongestionController> {
        let params = ControllerParams::new(self.mtu as u64, seed);
        match self.controller {
            Some(factory) => factory.build(now, &params),
            None => self.congestion.build_seeded(params.max_datagram_size, seed),
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
        )?;
        check_range_in("notsent_lowat", self.notsent_lowat, &(1..=1 << 30), "bytes")
    }
}

/// kcptun's `--mode` profiles, the tuning kcp-go peers are usually run with:
/// kcptun (`client/main.go`, `server/main.go`) maps each to kcp-go's
/// `SetNoDelay(nodelay, interval, resend, nc)`:
///
/// | preset | nodelay | interval | resend | nc |
/// |---|---:|---:|---:|---:|
/// | `normal` | 0 | 40 ms | 2 | 1 |
/// | `fast` (kcptun's default) | 0 | 30 ms | 2 | 1 |
/// | `fast2` | 1 | 20 ms | 2 | 1 |
/// | `fast3` | 1 | 10 ms | 2 | 1 |
///
/// Parsed from and printed as those names.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum KcpPreset {
    /// nodelay 0, interval 40 ms, resend 2, no congestion window.
    Normal,
    /// nodelay 0, interval 30 ms, resend 2, no congestion window.
    Fast,
    /// nodelay 1, interval 20 ms, resend 2, no congestion window.
    Fast2,
    /// nodelay 1, interval 10 ms, resend 2, no congestion window.
    Fast3,
}

impl KcpPreset {
    /// Every preset, slowest first.
    pub const ALL: [KcpPreset; 4] = [Self::Normal, Self::Fast, Self::Fast2, Self::Fast3];

    /// kcptun's name of the preset.
    pub fn as_str(&self) -> &'static str {
        match self {
            Self::Normal => "normal",
            Self::Fast => "fast",
            Self::Fast2 => "fast2",
            Self::Fast3 => "fast3",
        }
    }

    /// `(nodelay, interval, resend)` as kcp-go's `SetNoDelay` takes them (`nc` is
    /// 1 in every preset).
    fn nodelay_interval_resend(&self) -> (bool, u64, u32) {
        match self {
            Self::Normal => (false, 40, 2),
            Self::Fast => (false, 30, 2),
            Self::Fast2 => (true, 20, 2),
            Self::Fast3 => (true, 10, 2),
        }
    }
}

impl std::fmt::Display for KcpPreset {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// A name that is not a [`KcpPreset`].
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("unknown kcp preset {0:?}: expected normal, fast, fast2 or fast3")]
pub struct UnknownPreset(pub String);

impl std::str::FromStr for KcpPreset {
    type Err = UnknownPreset;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        Self::ALL
            .into_iter()
            .find(|p| p.as_str() == s)
            .ok_or_else(|| UnknownPreset(s.to_owned()))
    }
}

impl KcpConfig {
    /// This config with `preset`'s timing, as kcp-go's `SetNoDelay` applies it:
    /// `nodelay` and the RTO floor it implies (30 ms with nodelay, else 100 ms,
    /// kcp-go `IKCP_RTO_NDL` / `IKCP_RTO_MIN`), `interval`, `fast_resend`, and no
    /// congestion window (`nc = 1`: [`CongestionKind::None`], no custom
    /// controller). MTU, windows and `ack_nodelay` stay as they are.
    pub fn with_preset(self, preset: KcpPreset) -> Self {
        let (nodelay, interval, resend) = preset.nodelay_interval_resend();
        Self {
            nodelay,
            min_rto: if nodelay {
                NODELAY_MIN_RTO
            } else {
                NORMAL_MIN_RTO
            },
            interval: Duration::from_millis(interval),
            fast_resend: resend,
            congestion: CongestionKind::None,
            controller: None,
            ..self
        }
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
    fn presets_follow_kcptun() {
        let c = KcpConfig::normal().with_preset(KcpPreset::Fast3);
        assert_eq!(c, KcpConfig::default());
        let c = KcpConfig::default().with_preset("fast".parse().unwrap());
        assert_eq!(
            (c.nodelay, c.min_rto, c.interval, c.fast_resend),
            (false, NORMAL_MIN_RTO, Duration::from_millis(30), 2)
        );
        assert_eq!(KcpPreset::Fast2.to_string(), "fast2");
        assert!("fast4".parse::<KcpPreset>().is_err());
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
