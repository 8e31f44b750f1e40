//! Connection establishment and the post-handshake control plane, sans-IO.
//!
//! Three modes ([`HandshakeMode`]):
//! - **Native** — Petrel's own handshake, safe on the open Internet
//!   (`specs/kcp.md` §4): versioned, stateless cookie before any server state,
//!   no amplification, random `conv`, parameters and FEC announced, keepalive
//!   and authenticated graceful close.
//! - **Legacy** — the arknet/ARK SYN / SYN-ACK / FIN exchange (`specs/kcp.md` §3).
//! - **Raw** — plain KCP with a fixed `conv`: no handshake, no control datagrams.
//! - **KcpGo** — kcp-go / kcptun sessions: no handshake either; the client's
//!   random `conv` opens the session with its first datagram (see [`KcpGoConfig`]).
//!
//! What lives here: wire codecs ([`NativeMessage`], [`LegacyMessage`]), the
//! [`ServerHandshake`] and [`ClientHandshake`] state machines, the per-connection
//! [`Control`] plane and [`HandshakeMode::classify`]. What does not: KCP, FEC,
//! the session map and sockets (the runtime owns those).
//!
//! # Native wire format (version 1)
//!
//! All integers little-endian. Every native control datagram starts with a
//! 10-byte header. A KCP datagram starts with its `conv`, which is never 0 in
//! native mode, so a leading zero u32 marks control:
//!
//! | offset | size | field | value |
//! |---:|---:|---|---|
//! | 0 | 4 | `conv` | 0 |
//! | 4 | 4 | `magic` | `b"PTRL"` |
//! | 8 | 1 | `version` | 1; 0 = VERSION-NEGOTIATION |
//! | 9 | 1 | `type` | 1 INITIAL, 2 RETRY, 3 ACCEPT, 4 KEEPALIVE, 5 KEEPALIVE-ACK, 6 CLOSE, 7 CLOSE-ACK |
//!
//! Invariant across all versions (so an old server can answer a new client):
//! the header, `type = 1` for INITIAL and the client `nonce u64` at offset 10.
//!
//! `params` block (9 bytes), what the sender uses or grants:
//!
//! | offset | size | field | meaning |
//! |---:|---:|---|---|
//! | 0 | 2 | `mtu` | bytes, 256..=9000 |
//! | 2 | 2 | `snd_wnd` | segments, 1..=32768 |
//! | 4 | 2 | `rcv_wnd` | segments, 1..=32768 |
//! | 6 | 1 | `fec_kind` | 0 none, 1 fixed, 2 adaptive |
//! | 7 | 1 | `fec_a` | data shards (fixed) / max data shards (adaptive), 1..=128; 0 if none |
//! | 8 | 1 | `fec_b` | parity shards / max parity shards, 1..=127; 0 if none |
//!
//! Messages after the header:
//!
//! | message | body | total |
//! |---|---|---:|
//! | INITIAL (c→s) | `nonce u64`, `params`, `cookie_len u8` (0 or 20), `cookie`, zero padding | ≥ 96 |
//! | RETRY (s→c) | `nonce u64`, `cookie [20]` | 38 |
//! | ACCEPT (s→c) | `nonce u64`, `conv u32` (≠ 0), `token u64`, `params` | 39 |
//! | VERSION-NEGOTIATION (s→c; `version` 0, `type` 0) | `nonce u64`, `count u8` (1..=16), `versions [count]` | 19 + count |
//! | KEEPALIVE, KEEPALIVE-ACK, CLOSE, CLOSE-ACK | `conv u32`, `token u64` | 22 |
//!
//! Cookie (20 bytes): `timestamp_s u32` (seconds since the server's epoch)
//! then the first 16 bytes of HMAC-SHA256(secret, version ‖ client IPv6(-mapped)
//! address ‖ port ‖ nonce ‖ timestamp_s).
//!
//! # Native exchange
//!
//! 1. Client → INITIAL (no cookie), padded to [`MIN_INITIAL_LEN`] = 96 bytes and
//!    resent every `resend_interval` (500 ms) until answered or
//!    `connect_timeout` (10 s).
//! 2. Server → RETRY (38 bytes ≤ 96): a cookie; the server keeps nothing.
//!    An INITIAL of an unknown version that is at least 20 bytes long gets a
//!    VERSION-NEGOTIATION (20 bytes); anything smaller or not an INITIAL is
//!    dropped and counted. The server never answers with more bytes than it
//!    received before a cookie validates.
//! 3. Client → INITIAL echoing the cookie (same nonce, same padding).
//! 4. Server verifies the cookie under its current or previous secret, and its
//!    age (≤ `cookie_lifetime`, 10 s). A rejected cookie is counted and answered
//!    with a fresh RETRY (never more bytes than the INITIAL). A valid one: the
//!    server chooses a random non-zero `conv`
//!    and a random 64-bit `token` and answers ACCEPT with its own `params`:
//!    `mtu` = min of both, its windows, and the client's FEC request clamped to
//!    `fec_max_data` / `fec_max_parity`. The runtime creates the connection.
//!    A repeated INITIAL with the same nonce from that address (ACCEPT lost) is
//!    answered by [`ServerHandshake::repeat_reply`] with the same conv.
//! 5. KEEPALIVE / CLOSE carry `conv` and `token`; datagrams with a wrong token
//!    are ignored, so an off-path attacker cannot close or keep alive a
//!    connection without guessing 64 random bits.
//!
//! Graceful close: the side that is done flushes KCP and sends CLOSE (resent
//! every 1 s, up to 3 times); the peer flushes its own data and answers
//! CLOSE-ACK. The nonce and token are not secret from on-path observers:
//! native mode authenticates against off-path attackers only.

mod client;
mod control;
mod cookie;
mod legacy;
mod params;
mod server;
mod wire;

pub use client::{ClientHandshake, HandshakeError};
pub use control::{
    Control, ControlConfig, ControlError, ControlEvent, ControlState, ControlStats, IgnoreReason,
};
pub use cookie::CookieRejection;
pub use legacy::{LegacyMessage, LEGACY_SYN_ACK_LEN, LEGACY_SYN_LEN};
pub use params::{
    ConfigError, FecDescriptor, KcpGoConfig, LegacyConfig, NativeConfig, NegotiatedParams,
    DATA_SHARDS_RANGE, MTU_RANGE, PARITY_SHARDS_RANGE, RAW_PARAMS, WND_RANGE,
};
pub use server::{ConvLane, DropReason, HandshakeStats, ReplyKind, ServerEvent, ServerHandshake};
pub use wire::{
    ConnRef, Cookie, NativeMessage, WireError, WireParams, ACCEPT_LEN, CONN_CONTROL_LEN,
    COOKIE_LEN, MAGIC, MAX_OFFERED_VERSIONS, MIN_INITIAL_LEN, RETRY_LEN, SUPPORTED_VERSIONS,
    VERSION,
};

/// How a connection is established.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum HandshakeMode {
    /// Petrel's own handshake.
    Native(NativeConfig),
    /// arknet/ARK SYN / SYN-ACK / FIN.
    Legacy(LegacyConfig),
    /// No handshake: both sides use this `conv`.
    Raw {
        /// The fixed conversation id.
        conv: u32,
    },
    /// kcp-go: no handshake, the client's random `conv`, one session per peer address.
    KcpGo(KcpGoConfig),
}

impl HandshakeMode {
    /// Validates the mode's config.
    ///
    /// # Errors
    /// [`ConfigError`] naming the field and its allowed range.
    pub fn validate(&self) -> Result<(), ConfigError> {
        match self {
            Self::Native(c) => c.validate(),
            Self::Legacy(c) => c.validate(),
            Self::KcpGo(c) => c.validate(),
            Self::Raw { .. } => Ok(()),
        }
    }

    /// Tells control datagrams from KCP data on a socket of this mode.
    ///
    /// Native: a leading u32 `conv` of 0 means control (then decoded with
    /// [`NativeMessage::decode`], which checks the magic). Legacy: exactly 5 or
    /// 9 bytes means control (KCP data is ≥ 24 bytes). Raw and kcp-go: always data.
    pub fn classify(&self, datagram: &[u8]) -> DatagramKind {
        match self {
            Self::Native(_) if datagram.len() >= 4 && datagram[..4] == [0; 4] => {
                DatagramKind::NativeControl
            }
            Self::Legacy(_) if matches!(datagram.len(), LEGACY_SYN_LEN | LEGACY_SYN_ACK_LEN) => {
                DatagramKind::LegacyControl
            }
            _ => DatagramKind::Data,
        }
    }
}

/// What a received datagram is, per [`HandshakeMode::classify`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum DatagramKind {
    /// Native control: handshake, keepalive or close.
    NativeControl,
    /// Legacy control: SYN, SYN-ACK or FIN.
    LegacyControl,
    /// KCP (possibly FEC-framed) data.
    Data,
}

/// What ties control datagrams to a connection, per mode.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Binding {
    /// Native: the client's nonce and the server-chosen 64-bit token.
    Native {
        /// Client nonce of the INITIAL.
        nonce: u64,
        /// Per-connection token carried by KEEPALIVE / CLOSE.
        token: u64,
    },
    /// Legacy: the client's sync_id (low 32 bits of its wall-clock ms).
    Legacy {
        /// SYN's sync_id, echoed in SYN-ACK and FIN.
        sync_id: u32,
    },
    /// Raw: nothing.
    Raw,
}

/// An established connection, on either side.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Established {
    /// KCP conversation id (never 0 in native and legacy modes).
    pub conv: u32,
    /// What the handshake settled on.
    pub params: NegotiatedParams,
    /// Mode-specific identity for control datagrams.
    pub binding: Binding,
}
