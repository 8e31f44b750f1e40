//! Handshake configuration, the negotiated parameters and their validation.

use std::ops::RangeInclusive;
use std::time::Duration;

use petrel_sys::range::{check_range, RangeError};
use thiserror::Error;

/// Allowed `mtu` (bytes of UDP payload). The lower bound leaves room for the
/// 24-byte KCP header plus FEC framing; the upper bound is a jumbo frame.
pub const MTU_RANGE: RangeInclusive<u16> = 256..=9000;
/// Allowed send/receive windows in segments (KCP's `wnd` field is a u16).
pub const WND_RANGE: RangeInclusive<u16> = 1..=32_768;
/// Allowed data shards per FEC group (Reed–Solomon over GF(2^8): data + parity ≤ 255).
pub const DATA_SHARDS_RANGE: RangeInclusive<u8> = 1..=128;
/// Allowed parity shards per FEC group.
pub const PARITY_SHARDS_RANGE: RangeInclusive<u8> = 1..=127;

/// A configuration value outside its documented range or rule.
///
/// Range checks build it from [`petrel_sys::RangeError`], so `allowed` is rendered
/// from the range that was checked (`256..=9000`, `10ms..=10s`).
#[derive(Debug, Clone, PartialEq, Eq, Error)]
#[error("invalid handshake config: `{field}` = {value}, allowed {allowed}")]
pub struct ConfigError {
    /// The offending field, e.g. `"native.mtu"`.
    pub field: &'static str,
    /// The rejected value, rendered.
    pub value: String,
    /// The allowed range or rule, rendered.
    pub allowed: String,
}

impl From<RangeError> for ConfigError {
    fn from(e: RangeError) -> Self {
        Self {
            field: e.field,
            value: e.value,
            allowed: e.range,
        }
    }
}

/// `value` of `field` must lie in `range`.
pub(crate) fn check<T: PartialOrd + std::fmt::Debug>(
    field: &'static str,
    value: T,
    range: &RangeInclusive<T>,
) -> Result<(), ConfigError> {
    check_range(field, value, range).map_err(ConfigError::from)
}

/// The FEC configuration announced in the handshake, so the receiver never has
/// to guess how datagrams are framed. Shards are counted in datagrams.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub enum FecDescriptor {
    /// No FEC framing: datagrams are bare KCP.
    #[default]
    None,
    /// Fixed Reed–Solomon groups of `data` data shards and `parity` parity shards.
    Fixed {
        /// Data shards per group.
        data: u8,
        /// Parity shards per group.
        parity: u8,
    },
    /// Adaptive parity: groups of up to `max_data` data shards and up to
    /// `max_parity` parity shards, chosen per group by the sender's policy.
    Adaptive {
        /// Maximum data shards per group.
        max_data: u8,
        /// Maximum parity shards per group.
        max_parity: u8,
    },
}

impl FecDescriptor {
    /// Checks shard counts against [`DATA_SHARDS_RANGE`] / [`PARITY_SHARDS_RANGE`].
    pub fn validate(&self) -> Result<(), ConfigError> {
        match *self {
            Self::None => Ok(()),
            Self::Fixed { data, parity } => {
                check("fec.data", data, &DATA_SHARDS_RANGE)?;
                check("fec.parity", parity, &PARITY_SHARDS_RANGE)
            }
            Self::Adaptive {
                max_data,
                max_parity,
            } => {
                check("fec.max_data", max_data, &DATA_SHARDS_RANGE)?;
                check("fec.max_parity", max_parity, &PARITY_SHARDS_RANGE)
            }
        }
    }

    /// Clamps a peer's request to this endpoint's limits: shard counts are
    /// reduced to `max_data` / `max_parity`, then parity to at most the data
    /// shards (a request for 1 data + 4 parity is granted 1 + 1: never more
    /// parity bytes than data, so a client cannot make the server send several
    /// times its data); a limit of 0 disables FEC.
    pub fn clamp(self, max_data: u8, max_parity: u8) -> Self {
        if max_data == 0 || max_parity == 0 {
            return Self::None;
        }
        match self {
            Self::None => Self::None,
            Self::Fixed { data, parity } => {
                let data = data.min(max_data);
                Self::Fixed {
                    data,
                    parity: parity.min(max_parity).min(data),
                }
            }
            Self::Adaptive {
                max_data: d,
                max_parity: p,
            } => {
                let d = d.min(max_data);
                Self::Adaptive {
                    max_data: d,
                    max_parity: p.min(max_parity).min(d),
                }
            }
        }
    }
}

/// Native (Petrel) handshake configuration. One struct serves both roles;
/// each field says which role reads it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct NativeConfig {
    /// Largest UDP payload this endpoint sends, bytes (both roles; the
    /// connection uses the minimum of both sides). Default 1200.
    pub mtu: u16,
    /// This endpoint's KCP send window, segments. Default 128.
    pub snd_wnd: u16,
    /// This endpoint's KCP receive window, segments. Default 512.
    pub rcv_wnd: u16,
    /// Client: the FEC framing it asks for. Server: unused. Default `None`.
    pub fec: FecDescriptor,
    /// Server: most data shards it accepts (0 disables FEC). Default 8.
    pub fec_max_data: u8,
    /// Server: most parity shards it accepts (0 disables FEC). Default 4.
    pub fec_max_parity: u8,
    /// Client: INITIAL resend interval. Default 500 ms; allowed 10 ms..=10 s.
    pub resend_interval: Duration,
    /// Client: give up after this long without ACCEPT. Default 10 s; allowed 100 ms..=120 s.
    pub connect_timeout: Duration,
    /// Server: a cookie is valid for this long after it was minted (plus up to
    /// 1 s, its timestamp is in whole seconds). Default 10 s; allowed 1..=120 s.
    pub cookie_lifetime: Duration,
}

impl Default for NativeConfig {
    fn default() -> Self {
        Self {
            mtu: 1200,
            snd_wnd: 128,
            rcv_wnd: 512,
            fec: FecDescriptor::None,
            fec_max_data: 8,
            fec_max_parity: 4,
            resend_interval: Duration::from_millis(500),
            connect_timeout: Duration::from_secs(10),
            cookie_lifetime: Duration::from_secs(10),
        }
    }
}

impl NativeConfig {
    /// Checks every field against its documented range.
    pub fn validate(&self) -> Result<(), ConfigError> {
        check("native.mtu", self.mtu, &MTU_RANGE)?;
        check("native.snd_wnd", self.snd_wnd, &WND_RANGE)?;
        check("native.rcv_wnd", self.rcv_wnd, &WND_RANGE)?;
        self.fec.validate()?;
        check("native.fec_max_data", self.fec_max_data, &(0..=128))?;
        check("native.fec_max_parity", self.fec_max_parity, &(0..=127))?;
        check(
            "native.resend_interval",
            self.resend_interval,
            &(Duration::from_millis(10)..=Duration::from_secs(10)),
        )?;
        check(
            "native.connect_timeout",
            self.connect_timeout,
            &(Duration::from_millis(100)..=Duration::from_secs(120)),
        )?;
        check(
            "native.cookie_lifetime",
            self.cookie_lifetime,
            &(Duration::from_secs(1)..=Duration::from_secs(120)),
        )
    }
}

/// Legacy (arknet/ARK) handshake configuration. Defaults follow the legacy
/// servers (`specs/kcp.md` §3): MTU 1400, windows 128/512, SYN every 500 ms.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct LegacyConfig {
    /// UDP payload limit, bytes. Not negotiated: both sides must be configured alike.
    pub mtu: u16,
    /// KCP send window, segments.
    pub snd_wnd: u16,
    /// KCP receive window, segments.
    pub rcv_wnd: u16,
    /// Client: SYN resend interval. Default 500 ms; allowed 10 ms..=10 s.
    pub resend_interval: Duration,
    /// Client: give up after this long without SYN-ACK. Default 10 s; allowed 100 ms..=120 s.
    pub connect_timeout: Duration,
}

impl Default for LegacyConfig {
    fn default() -> Self {
        Self {
            mtu: 1400,
            snd_wnd: 128,
            rcv_wnd: 512,
            resend_interval: Duration::from_millis(500),
            connect_timeout: Duration::from_secs(10),
        }
    }
}

impl LegacyConfig {
    /// Checks every field against its documented range.
    pub fn validate(&self) -> Result<(), ConfigError> {
        check("legacy.mtu", self.mtu, &MTU_RANGE)?;
        check("legacy.snd_wnd", self.snd_wnd, &WND_RANGE)?;
        check("legacy.rcv_wnd", self.rcv_wnd, &WND_RANGE)?;
        check(
            "legacy.resend_interval",
            self.resend_interval,
            &(Duration::from_millis(10)..=Duration::from_secs(10)),
        )?;
        check(
            "legacy.connect_timeout",
            self.connect_timeout,
            &(Duration::from_millis(100)..=Duration::from_secs(120)),
        )
    }
}

/// The parameters a handshake settled on, from the point of view of the
/// endpoint holding them.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct NegotiatedParams {
    /// Native protocol version; 0 for legacy and raw (unversioned) connections.
    pub version: u8,
    /// UDP payload limit for this connection, bytes: min of both sides (native).
    pub mtu: u16,
    /// This endpoint's KCP send window, segments.
    pub snd_wnd: u16,
    /// This endpoint's KCP receive window, segments.
    pub rcv_wnd: u16,
    /// The peer's announced send window, segments (native; else equal to ours).
    pub peer_snd_wnd: u16,
    /// The peer's announced receive window, segments (native; else equal to ours).
    pub peer_rcv_wnd: u16,
    /// FEC framing both sides use (the server's clamp of the client's request).
    pub fec: FecDescriptor,
}

/// kcp-go mode (kcp-go `sess.go`, as kcptun uses it; `specs/kcp.md` §2): no
/// handshake. The client picks a random `conv` and its first datagram opens the
/// session on the server, which serves one session per peer address. Nothing is
/// negotiated: MTU, windows and the FEC shape are configured alike on both sides.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct KcpGoConfig {
    /// UDP payload limit, bytes (kcptun `--mtu`, default 1350), headers included.
    pub mtu: u16,
    /// KCP send window, segments.
    pub snd_wnd: u16,
    /// KCP receive window, segments.
    pub rcv_wnd: u16,
    /// Every datagram starts with the 20-byte header of kcp-go's `none` block
    /// crypt (16 nonce bytes, CRC-32 IEEE LE of the rest), as with kcptun's
    /// `--crypt none`; false for kcp-go programs that pass no `BlockCrypt`.
    pub crypt_header: bool,
}

impl Default for KcpGoConfig {
    /// kcptun's defaults: MTU 1350, windows 128/512 (`kcptun-client`), crypt header on.
    fn default() -> Self {
        Self {
            mtu: 1350,
            snd_wnd: 128,
            rcv_wnd: 512,
            crypt_header: true,
        }
    }
}

impl KcpGoConfig {
    /// Checks every field against its documented range.
    pub fn validate(&self) -> Result<(), ConfigError> {
        check("kcpgo.mtu", self.mtu, &MTU_RANGE)?;
        check("kcpgo.snd_wnd", self.snd_wnd, &WND_RANGE)?;
        check("kcpgo.rcv_wnd", self.rcv_wnd, &WND_RANGE)?;
        Ok(())
    }

    /// The parameters both sides assume.
    pub fn params(&self) -> NegotiatedParams {
        NegotiatedParams::unnegotiated(self.mtu, self.snd_wnd, self.rcv_wnd)
    }
}

impl NegotiatedParams {
    /// Parameters of an unnegotiated (legacy or raw) connection: both sides are
    /// assumed to be configured alike.
    pub fn unnegotiated(mtu: u16, snd_wnd: u16, rcv_wnd: u16) -> Self {
        Self {
            version: 0,
            mtu,
            snd_wnd,
            rcv_wnd,
            peer_snd_wnd: snd_wnd,
            peer_rcv_wnd: rcv_wnd,
            fec: FecDescriptor::None,
        }
    }
}

/// Parameters assumed in raw mode, which has no handshake: the KCP tuning of
/// `specs/kcp.md` §1 (MTU 1400, windows 128/512, no FEC). The runtime may
/// override them; the peer must be configured identically.
pub const RAW_PARAMS: NegotiatedParams = NegotiatedParams {
    version: 0,
    mtu: 1400,
    snd_wnd: 128,
    rcv_wnd: 512,
    peer_snd_wnd: 128,
    peer_rcv_wnd: 512,
    fec: FecDescriptor::None,
};
