//! Client side of the handshake: sends the opening datagram until the server
//! answers or the connect timeout expires.

use std::time::{Duration, Instant};

use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha20Rng;
use thiserror::Error;

use super::legacy::LegacyMessage;
use super::params::{ConfigError, NegotiatedParams, RAW_PARAMS};
use super::wire::{Cookie, NativeMessage, WireParams, MIN_INITIAL_LEN, VERSION};
use super::{Binding, Established, HandshakeMode};

/// Why a client handshake failed.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
pub enum HandshakeError {
    /// No ACCEPT / SYN-ACK within the connect timeout.
    #[error("handshake timed out after {0:?}")]
    Timeout(Duration),
    /// The server speaks none of our versions.
    #[error("server speaks versions {offered:?}, we speak {ours}")]
    VersionMismatch {
        /// Versions the server offered.
        offered: Vec<u8>,
        /// Our version.
        ours: u8,
    },
}

#[derive(Debug)]
enum State {
    Connecting {
        next_send: Instant,
        deadline: Instant,
    },
    Established(Established),
    Failed(HandshakeError),
}

/// Client handshake state machine (sans-IO).
///
/// Drive it with [`poll_transmit`](Self::poll_transmit),
/// [`poll_timeout`](Self::poll_timeout) / [`handle_timeout`](Self::handle_timeout)
/// and [`handle_input`](Self::handle_input) until it yields [`Established`].
#[derive(Debug)]
pub struct ClientHandshake {
    mode: HandshakeMode,
    state: State,
    resend_interval: Duration,
    connect_timeout: Duration,
    nonce: u64,
    sync_id: u32,
    cookie: Option<Cookie>,
    ignored: u64,
}

impl ClientHandshake {
    /// Starts a handshake at `now`. `wall_clock_ms` (ms since the Unix epoch)
    /// gives the legacy `sync_id` (its low 32 bits, `specs/kcp.md` §3);
    /// `rng_seed` seeds the native nonce (seed from the OS RNG in production).
    /// Raw and kcp-go modes are established immediately; kcp-go's `conv` is
    /// drawn from `rng_seed`, never 0 (kcp-go's `DialWithOptions` draws it at random).
    ///
    /// # Errors
    /// [`ConfigError`] if the mode's config is out of range.
    pub fn new(
        mode: HandshakeMode,
        now: Instant,
        wall_clock_ms: u64,
        rng_seed: u64,
    ) -> Result<Self, ConfigError> {
        mode.validate()?;
        let (resend_interval, connect_timeout) = match &mode {
            HandshakeMode::Native(c) => (c.resend_interval, c.connect_timeout),
            HandshakeMode::Legacy(c) => (c.resend_interval, c.connect_timeout),
            HandshakeMode::Raw { .. } | HandshakeMode::KcpGo(_) => (Duration::ZERO, Duration::ZERO),
        };
        let mut rng = ChaCha20Rng::seed_from_u64(rng_seed);
        let nonce: u64 = rng.gen();
        let state = match mode {
            HandshakeMode::Raw { conv } => State::Established(Established {
                conv,
                params: RAW_PARAMS,
                binding: Binding::Raw,
            }),
            HandshakeMode::KcpGo(cfg) => State::Established(Established {
                conv: rng.gen_range(1..=u32::MAX),
                params: cfg.params(),
                binding: Binding::Raw,
            }),
            _ => State::Connecting {
                next_send: now,
                deadline: now + connect_timeout,
            },
        };
        Ok(Self {
            mode,
            state,
            resend_interval,
            connect_timeout,
            nonce,
            sync_id: wall_clock_ms as u32,
            cookie: None,
            ignored: 0,
        })
    }

    /// The connection, once established.
    pub fn established(&self) -> Option<&Established> {
        match &self.state {
            State::Established(e) => Some(e),
            _ => None,
        }
    }

    /// Datagrams received during the handshake that were not a valid answer
    /// to it (wrong nonce/sync_id, malformed, unexpected type).
    pub fn ignored(&self) -> u64 {
        self.ignored
    }

    /// Writes the next datagram to send into `out` (cleared first) if one is
    /// due at `now`; returns whether it did.
    pub fn poll_transmit(&mut self, now: Instant, out: &mut Vec<u8>) -> bool {
        out.clear();
        let State::Connecting { next_send, .. } = &mut self.state else {
            return false;
        };
        if now < *next_send {
            return false;
        }
        *next_send = now + self.resend_interval;
        match &self.mode {
            HandshakeMode::Native(cfg) => NativeMessage::Initial {
                nonce: self.nonce,
                params: WireParams {
                    mtu: cfg.mtu,
                    snd_wnd: cfg.snd_wnd,
                    rcv_wnd: cfg.rcv_wnd,
                    fec: cfg.fec,
                },
                cookie: self.cookie,
                len: MIN_INITIAL_LEN,
            }
            .encode(out),
            HandshakeMode::Legacy(_) => LegacyMessage::Syn {
                sync_id: self.sync_id,
            }
            .encode(out),
            HandshakeMode::Raw { .. } | HandshakeMode::KcpGo(_) => return false,
        }
        true
    }

    /// The next instant [`handle_timeout`](Self::handle_timeout) or
    /// [`poll_transmit`](Self::poll_transmit) has work; `None` once done.
    pub fn poll_timeout(&self) -> Option<Instant> {
        match self.state {
            State::Connecting {
                next_send,
                deadline,
            } => Some(next_send.min(deadline)),
            _ => None,
        }
    }

    /// Fails the handshake once the connect timeout has passed.
    ///
    /// # Errors
    /// [`HandshakeError::Timeout`], also on every later call; or the earlier failure.
    pub fn handle_timeout(&mut self, now: Instant) -> Result<(), HandshakeError> {
        match &self.state {
            State::Connecting { deadline, .. } if now >= *deadline => {
                let err = HandshakeError::Timeout(self.connect_timeout);
                self.state = State::Failed(err.clone());
                Err(err)
            }
            State::Failed(err) => Err(err.clone()),
            _ => Ok(()),
        }
    }

    /// Feeds a datagram from the server. Returns the connection the first time
    /// it is established; unrelated datagrams are counted in
    /// [`ignored`](Self::ignored) and return `Ok(None)`.
    ///
    /// # Errors
    /// [`HandshakeError::VersionMismatch`] if the server answered with a
    /// VERSION-NEGOTIATION that does not list our version.
    pub fn handle_input(
        &mut self,
        now: Instant,
        datagram: &[u8],
    ) -> Result<Option<Established>, HandshakeError> {
        if !matches!(self.state, State::Connecting { .. }) {
            return Ok(None);
        }
        let established = match &self.mode {
            HandshakeMode::Native(cfg) => match NativeMessage::decode(datagram) {
                Ok(NativeMessage::Retry { nonce, cookie }) if nonce == self.nonce => {
                    // Only the first RETRY is answered at once; later ones (a
                    // rejected cookie) just replace the cookie for the next
                    // scheduled resend, so RETRYs cannot drive our send rate.
                    if self.cookie.replace(cookie).is_none() {
                        if let State::Connecting { next_send, .. } = &mut self.state {
                            *next_send = now;
                        }
                    }
                    return Ok(None);
                }
                Ok(NativeMessage::Accept {
                    nonce,
                    conv,
                    token,
                    params,
                }) if nonce == self.nonce && conv != 0 => Some(Established {
                    conv,
                    params: NegotiatedParams {
                        version: VERSION,
                        mtu: params.mtu.min(cfg.mtu),
                        snd_wnd: cfg.snd_wnd,
                        rcv_wnd: cfg.rcv_wnd,
                        peer_snd_wnd: params.snd_wnd,
                        peer_rcv_wnd: params.rcv_wnd,
                        fec: params.fec,
                    },
                    binding: Binding::Native { nonce, token },
                }),
                Ok(NativeMessage::VersionNegotiation { nonce, versions })
                    if nonce == self.nonce && !versions.contains(&VERSION) =>
                {
                    let err = HandshakeError::VersionMismatch {
                        offered: versions,
                        ours: VERSION,
                    };
                    self.state = State::Failed(err.clone());
                    return Err(err);
                }
                _ => None,
            },
            HandshakeMode::Legacy(cfg) => match LegacyMessage::decode(datagram) {
                Ok(LegacyMessage::SynAck { sync_id, conv })
                    if sync_id == self.sync_id && conv != 0 =>
                {
                    Some(Established {
                        conv,
                        params: NegotiatedParams::unnegotiated(cfg.mtu, cfg.snd_wnd, cfg.rcv_wnd),
                        binding: Binding::Legacy { sync_id },
                    })
                }
                _ => None,
            },
            HandshakeMode::Raw { .. } | HandshakeMode::KcpGo(_) => None,
        };
        match established {
            Some(e) => {
                self.state = State::Established(e);
                Ok(Some(e))
            }
            None => {
                self.ignored += 1;
                Ok(None)
            }
        }
    }
}
