//! Server side of the handshake: answers control datagrams from peers that
//! have no connection yet, without keeping any per-peer state.

use std::net::SocketAddr;
use std::time::Instant;

use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha20Rng;

use super::cookie::{rng_key, ConvAllocator, CookieKeys, CookieRejection};
use super::legacy::LegacyMessage;
use super::params::{ConfigError, NativeConfig, NegotiatedParams, RAW_PARAMS};
use super::wire::{
    read_invariant_nonce, NativeMessage, WireError, WireParams, HEADER_LEN, INITIAL_TYPE,
    SUPPORTED_VERSIONS, TYPE_OFFSET, VERSION,
};
use super::{Binding, Established, HandshakeMode};
use crate::fec::wire::kcpgo_conv;

/// A KCP segment header, bytes (`specs/kcp.md` §1): the shortest raw-mode datagram.
const KCP_HEADER_LEN: usize = 24;

/// Why [`ServerHandshake::handle`] dropped a datagram. Every reason has a
/// counter in [`HandshakeStats`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum DropReason {
    /// Not a well-formed opening message of this mode (bad magic, truncated,
    /// INITIAL shorter than `MIN_INITIAL_LEN`, invalid params, legacy non-SYN,
    /// raw datagram shorter than a KCP header, kcp-go datagram with a bad CRC
    /// or no KCP header).
    Malformed,
    /// Well-formed, but not a message that opens a connection (e.g. KEEPALIVE
    /// or CLOSE for a connection the runtime does not know, a kcp-go parity shard).
    Unexpected,
    /// Unknown version and the request was too small to answer without
    /// amplification (or was not an INITIAL).
    UnsupportedVersion,
    /// Raw mode: the datagram's conv is not the configured one.
    ConvMismatch,
}

/// What the runtime should do with a datagram from a peer without a connection.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ServerEvent {
    /// Ignore it; the reason is counted.
    Drop(DropReason),
    /// Send `reply` to the peer; no state was created.
    Reply(ReplyKind),
    /// Create the connection. `reply` (ACCEPT / SYN-ACK) must be sent, unless
    /// it is empty (raw and kcp-go modes: feed the datagram to the session instead).
    Accept(Established),
}

/// Which stateless reply [`ServerEvent::Reply`] carries.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum ReplyKind {
    /// RETRY with a cookie for the client to echo.
    Retry,
    /// The INITIAL echoed a cookie that was rejected (counted); it gets a
    /// fresh RETRY, as a QUIC server does for an invalid token, so a client
    /// whose cookie expired or whose NAT rebound can still connect. The reply
    /// is no larger than the request, so this gives an attacker nothing.
    RetryAfterRejectedCookie(CookieRejection),
    /// VERSION-NEGOTIATION listing the versions this server speaks.
    VersionNegotiation,
}

/// Counters per outcome of [`ServerHandshake::handle`].
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct HandshakeStats {
    /// RETRY replies sent (INITIAL without a cookie or with a rejected one).
    pub retries: u64,
    /// VERSION-NEGOTIATION replies sent.
    pub version_negotiations: u64,
    /// Connections accepted.
    pub accepted: u64,
    /// Dropped: [`DropReason::Malformed`].
    pub dropped_malformed: u64,
    /// Dropped: [`DropReason::Unexpected`].
    pub dropped_unexpected: u64,
    /// Cookies rejected as [`CookieRejection::Invalid`]: forged, minted for
    /// another address or nonce, or under a secret older than the previous one.
    pub rejected_bad_cookie: u64,
    /// Cookies rejected as [`CookieRejection::Expired`] (older than `cookie_lifetime`).
    pub rejected_expired_cookie: u64,
    /// Dropped: [`DropReason::UnsupportedVersion`].
    pub dropped_unsupported_version: u64,
    /// Dropped: [`DropReason::ConvMismatch`].
    pub dropped_conv_mismatch: u64,
    /// Convs the allocator computed (4 HMAC-SHA256 rounds each): one per
    /// accept with [`ConvLane::ANY`], about `lanes` per accept in a lane.
    pub conv_draws: u64,
}

/// Which convs a server hands out: any, or only those whose first byte on the
/// wire — the low byte, as KCP's `conv` is little-endian (`specs/kcp.md` §1) —
/// is `lane` modulo `lanes`. A receiver that delivers datagrams by their first
/// byte (an `SO_REUSEPORT` group with a first-byte program, see `petrel-sys`'s
/// `reuseport`) then reads every data datagram of the connection on socket `lane`.
/// Only the native and legacy handshakes choose the conv; raw and kcp-go
/// connections keep the one the client sent.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ConvLane {
    /// How many lanes there are (1 to 256; 0 or 1: every conv qualifies).
    pub lanes: usize,
    /// The lane wanted, below `lanes`.
    pub lane: usize,
}

impl ConvLane {
    /// Every conv qualifies.
    pub const ANY: Self = Self { lanes: 1, lane: 0 };

    /// The lane of `conv` among `lanes` (0 when `lanes` is 0 or 1).
    pub fn of(conv: u32, lanes: usize) -> usize {
        usize::from(conv.to_le_bytes()[0]) % lanes.max(1)
    }

    /// Whether `conv` is in this lane.
    pub fn contains(self, conv: u32) -> bool {
        Self::of(conv, self.lanes) == self.lane
    }
}

/// Server handshake: owns the cookie secrets (native), the conv allocator and
/// a token RNG. It keeps NO per-peer state; the runtime keeps the connection
/// map and calls [`ServerHandshake::handle`] only for peers not in it.
///
/// Cookie timestamps count whole seconds from the first INITIAL this
/// instance handled (there is no clock to read), so a cookie only validates
/// at the instance that minted it, or one sharing its secret and that epoch.
#[derive(Debug)]
pub struct ServerHandshake {
    mode: HandshakeMode,
    cookies: CookieKeys,
    convs: ConvAllocator,
    rng: ChaCha20Rng,
    epoch: Option<Instant>,
    stats: HandshakeStats,
}

impl ServerHandshake {
    /// Creates a server. `secret` keys the native cookies (draw it from the
    /// OS RNG and rotate it with [`rotate_secret`](Self::rotate_secret)).
    /// Conv values and tokens come from a ChaCha20 generator keyed with
    /// HMAC-SHA256(`secret`, `rng_seed`): 256 bits from the OS RNG in
    /// production, so they cannot be predicted from a 64-bit seed; tests pass a
    /// fixed secret and seed and get a fixed sequence.
    ///
    /// # Errors
    /// [`ConfigError`] if the mode's config is out of range.
    pub fn new(mode: HandshakeMode, secret: [u8; 32], rng_seed: u64) -> Result<Self, ConfigError> {
        mode.validate()?;
        let lifetime_s = match &mode {
            HandshakeMode::Native(cfg) => cfg.cookie_lifetime.as_secs(),
            _ => 0,
        };
        let mut rng = ChaCha20Rng::from_seed(rng_key(&secret, rng_seed));
        let conv_key: [u8; 32] = rng.gen();
        let convs = ConvAllocator::new(&conv_key, rng.gen());
        Ok(Self {
            cookies: CookieKeys::new(&secret, u32::try_from(lifetime_s).unwrap_or(u32::MAX)),
            mode,
            convs,
            rng,
            epoch: None,
            stats: HandshakeStats::default(),
        })
    }

    /// Replaces the cookie secret. Cookies minted under the secret being
    /// replaced stay valid (until they expire); older ones are rejected.
    pub fn rotate_secret(&mut self, secret: [u8; 32]) {
        self.cookies.rotate(&secret);
    }

    /// Counters so far.
    pub fn stats(&self) -> HandshakeStats {
        HandshakeStats {
            conv_draws: self.convs.draws(),
            ..self.stats
        }
    }

    /// [`handle_in_lane`](Self::handle_in_lane) with no lane: any conv.
    pub fn handle(
        &mut self,
        now: Instant,
        peer: SocketAddr,
        datagram: &[u8],
        reply: &mut Vec<u8>,
    ) -> ServerEvent {
        self.handle_in_lane(now, peer, datagram, reply, ConvLane::ANY)
    }

    /// Handles a datagram from `peer`, which has no connection yet. `reply`
    /// is cleared, then holds the datagram to send back, if any. A connection
    /// accepted in native or legacy mode gets a conv in `lane` (see [`ConvLane`]).
    ///
    /// Before a valid cookie is echoed, `reply.len() <= datagram.len()`.
    pub fn handle_in_lane(
        &mut self,
        now: Instant,
        peer: SocketAddr,
        datagram: &[u8],
        reply: &mut Vec<u8>,
        lane: ConvLane,
    ) -> ServerEvent {
        reply.clear();
        // A lane no conv can be in (`lane >= lanes`) would cost the allocator all
        // its tries for nothing: any conv, at once.
        let lane = if lane.lane < lane.lanes.max(1) {
            lane
        } else {
            ConvLane::ANY
        };
        let event = match self.mode {
            HandshakeMode::Native(cfg) => {
                self.handle_native(now, &cfg, peer, datagram, reply, lane)
            }
            HandshakeMode::Legacy(cfg) => match LegacyMessage::decode(datagram) {
                Ok(LegacyMessage::Syn { sync_id }) => {
                    let conv = self.convs.next_conv_where(|conv| lane.contains(conv));
                    LegacyMessage::SynAck { sync_id, conv }.encode(reply);
                    ServerEvent::Accept(Established {
                        conv,
                        params: NegotiatedParams::unnegotiated(cfg.mtu, cfg.snd_wnd, cfg.rcv_wnd),
                        binding: Binding::Legacy { sync_id },
                    })
                }
                Ok(_) => ServerEvent::Drop(DropReason::Unexpected),
                Err(_) => ServerEvent::Drop(DropReason::Malformed),
            },
            HandshakeMode::Raw { conv } => match datagram.get(..4) {
                Some(head) if datagram.len() >= KCP_HEADER_LEN => {
                    if head == conv.to_le_bytes() {
                        ServerEvent::Accept(Established {
                            conv,
                            params: RAW_PARAMS,
                            binding: Binding::Raw,
                        })
                    } else {
                        ServerEvent::Drop(DropReason::ConvMismatch)
                    }
                }
                _ => ServerEvent::Drop(DropReason::Malformed),
            },
            HandshakeMode::KcpGo(cfg) => match kcpgo_conv(cfg.crypt_header, datagram) {
                Ok(Some(conv)) => ServerEvent::Accept(Established {
                    conv,
                    params: cfg.params(),
                    binding: Binding::Raw,
                }),
                // A parity shard names no conv: it cannot open a session.
                Ok(None) => ServerEvent::Drop(DropReason::Unexpected),
                Err(_) => ServerEvent::Drop(DropReason::Malformed),
            },
        };
        self.count(&event);
        event
    }

    fn handle_native(
        &mut self,
        now: Instant,
        cfg: &NativeConfig,
        peer: SocketAddr,
        datagram: &[u8],
        reply: &mut Vec<u8>,
        lane: ConvLane,
    ) -> ServerEvent {
        let msg = match NativeMessage::decode(datagram) {
            Ok(msg) => msg,
            Err(WireError::UnsupportedVersion(_)) => {
                return self.version_negotiation(datagram, reply);
            }
            Err(_) => return ServerEvent::Drop(DropReason::Malformed),
        };
        let NativeMessage::Initial {
            nonce,
            params,
            cookie,
            ..
        } = msg
        else {
            return ServerEvent::Drop(DropReason::Unexpected);
        };
        let epoch = *self.epoch.get_or_insert(now);
        let now_s =
            u32::try_from(now.saturating_duration_since(epoch).as_secs()).unwrap_or(u32::MAX);
        let verdict = match cookie {
            None => Err(ReplyKind::Retry),
            Some(cookie) => self
                .cookies
                .verify(&cookie, peer, nonce, now_s)
                .map_err(ReplyKind::RetryAfterRejectedCookie),
        };
        if let Err(kind) = verdict {
            let cookie = self.cookies.mint(peer, nonce, now_s);
            NativeMessage::Retry { nonce, cookie }.encode(reply);
            return ServerEvent::Reply(kind);
        }
        let conv = self.convs.next_conv_where(|conv| lane.contains(conv));
        let token = self.rng.gen();
        let fec = params.fec.clamp(cfg.fec_max_data, cfg.fec_max_parity);
        let granted = WireParams {
            mtu: cfg.mtu.min(params.mtu),
            snd_wnd: cfg.snd_wnd,
            rcv_wnd: cfg.rcv_wnd,
            fec,
        };
        let established = Established {
            conv,
            params: NegotiatedParams {
                version: VERSION,
                mtu: granted.mtu,
                snd_wnd: cfg.snd_wnd,
                rcv_wnd: cfg.rcv_wnd,
                peer_snd_wnd: params.snd_wnd,
                peer_rcv_wnd: params.rcv_wnd,
                fec,
            },
            binding: Binding::Native { nonce, token },
        };
        NativeMessage::Accept {
            nonce,
            conv,
            token,
            params: granted,
        }
        .encode(reply);
        ServerEvent::Accept(established)
    }

    /// Answers an INITIAL of an unknown version, if the answer is no larger
    /// than the request.
    fn version_negotiation(&self, datagram: &[u8], reply: &mut Vec<u8>) -> ServerEvent {
        let is_initial = datagram.get(TYPE_OFFSET) == Some(&INITIAL_TYPE);
        let nonce = read_invariant_nonce(datagram);
        let needed = HEADER_LEN + 9 + SUPPORTED_VERSIONS.len();
        match nonce {
            Some(nonce) if is_initial && datagram.len() >= needed => {
                NativeMessage::VersionNegotiation {
                    nonce,
                    versions: SUPPORTED_VERSIONS.to_vec(),
                }
                .encode(reply);
                ServerEvent::Reply(ReplyKind::VersionNegotiation)
            }
            _ => ServerEvent::Drop(DropReason::UnsupportedVersion),
        }
    }

    /// Builds the reply to a repeated opening datagram from a peer that already
    /// has connection `session` (its ACCEPT or SYN-ACK was lost): a native
    /// INITIAL with the same nonce, or a legacy SYN with the same sync_id, gets
    /// the same conv again. Returns `false` (and leaves `reply` empty) for
    /// anything else, which the runtime then treats as connection traffic.
    pub fn repeat_reply(
        &self,
        session: &Established,
        datagram: &[u8],
        reply: &mut Vec<u8>,
    ) -> bool {
        reply.clear();
        match (&self.mode, session.binding) {
            (HandshakeMode::Native(cfg), Binding::Native { nonce, token }) => {
                match NativeMessage::decode(datagram) {
                    Ok(NativeMessage::Initial { nonce: n, .. }) if n == nonce => {
                        let p = &session.params;
                        let params = WireParams {
                            mtu: p.mtu,
                            snd_wnd: cfg.snd_wnd,
                            rcv_wnd: cfg.rcv_wnd,
                            fec: p.fec,
                        };
                        NativeMessage::Accept {
                            nonce,
                            conv: session.conv,
                            token,
                            params,
                        }
                        .encode(reply);
                        true
                    }
                    _ => false,
                }
            }
            (HandshakeMode::Legacy(_), Binding::Legacy { sync_id }) => {
                match LegacyMessage::decode(datagram) {
                    Ok(LegacyMessage::Syn { sync_id: s }) if s == sync_id => {
                        LegacyMessage::SynAck {
                            sync_id,
                            conv: session.conv,
                        }
                        .encode(reply);
                        true
                    }
                    _ => false,
                }
            }
            _ => false,
        }
    }

    fn count(&mut self, event: &ServerEvent) {
        let s = &mut self.stats;
        let counter = match event {
            ServerEvent::Accept(_) => &mut s.accepted,
            ServerEvent::Reply(ReplyKind::Retry) => &mut s.retries,
            ServerEvent::Reply(ReplyKind::RetryAfterRejectedCookie(why)) => {
                s.retries += 1;
                match why {
                    CookieRejection::Invalid => &mut s.rejected_bad_cookie,
                    CookieRejection::Expired => &mut s.rejected_expired_cookie,
                }
            }
            ServerEvent::Reply(ReplyKind::VersionNegotiation) => &mut s.version_negotiations,
            ServerEvent::Drop(reason) => match reason {
                DropReason::Malformed => &mut s.dropped_malformed,
                DropReason::Unexpected => &mut s.dropped_unexpected,
                DropReason::UnsupportedVersion => &mut s.dropped_unsupported_version,
                DropReason::ConvMismatch => &mut s.dropped_conv_mismatch,
            },
        };
        *counter += 1;
    }
}
