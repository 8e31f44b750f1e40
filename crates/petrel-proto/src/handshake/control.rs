//! Per-connection control plane after the handshake: keepalive, idle timeout
//! and graceful close. Independent of KCP; the runtime feeds it control
//! datagrams and liveness, and tells it when KCP has flushed.

use std::time::{Duration, Instant};

use thiserror::Error;

use super::legacy::LegacyMessage;
use super::params::{check, ConfigError};
use super::wire::{ConnRef, NativeMessage};
use super::{Binding, Established};

/// Control-plane timers. Defaults: keepalive 5 s, idle timeout 30 s, CLOSE
/// resent every 1 s up to 3 times.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ControlConfig {
    /// Native only: send KEEPALIVE after this long without receiving KCP data,
    /// and again every interval while it stays quiet (each side keeps its own
    /// rhythm: control datagrams from the peer do not postpone it). Allowed
    /// 100 ms..=60 s, and less than `idle_timeout`.
    pub keepalive_interval: Duration,
    /// Declare the connection dead after this long without receiving anything.
    /// Allowed 1 s..=3600 s.
    pub idle_timeout: Duration,
    /// Native only: resend CLOSE after this long without CLOSE-ACK.
    /// Allowed 10 ms..=10 s.
    pub close_resend_interval: Duration,
    /// Native only: CLOSE resends before giving up with
    /// [`ControlError::CloseTimeout`]. Allowed 0..=10.
    pub close_resends: u8,
}

impl Default for ControlConfig {
    fn default() -> Self {
        Self {
            keepalive_interval: Duration::from_secs(5),
            idle_timeout: Duration::from_secs(30),
            close_resend_interval: Duration::from_secs(1),
            close_resends: 3,
        }
    }
}

impl ControlConfig {
    /// Checks every field against its documented range.
    pub fn validate(&self) -> Result<(), ConfigError> {
        let ms = Duration::from_millis;
        check(
            "control.keepalive_interval",
            self.keepalive_interval,
            &(ms(100)..=ms(60_000)),
        )?;
        check(
            "control.idle_timeout",
            self.idle_timeout,
            &(ms(1000)..=ms(3_600_000)),
        )?;
        if self.keepalive_interval >= self.idle_timeout {
            return Err(ConfigError {
                field: "control.keepalive_interval",
                value: format!("{:?}", self.keepalive_interval),
                allowed: "less than control.idle_timeout".into(),
            });
        }
        check(
            "control.close_resend_interval",
            self.close_resend_interval,
            &(ms(10)..=ms(10_000)),
        )?;
        check("control.close_resends", self.close_resends, &(0..=10))?;
        Ok(())
    }
}

/// Where the connection is in its life.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum ControlState {
    /// Normal operation.
    Open,
    /// The peer sent CLOSE; flush KCP, then call [`Control::start_close`] to
    /// answer CLOSE-ACK.
    PeerClosing,
    /// We sent CLOSE and wait for CLOSE-ACK.
    Closing,
    /// Done. Keep the `Control` for about `close_resend_interval ×
    /// (close_resends + 1)` so a repeated CLOSE (our CLOSE-ACK was lost) is
    /// answered again.
    Closed,
}

/// What a control datagram meant.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum ControlEvent {
    /// The peer probed liveness; a KEEPALIVE-ACK is queued.
    Keepalive,
    /// The peer answered our KEEPALIVE.
    KeepaliveAck,
    /// The peer sent CLOSE. If we had not started closing, flush KCP and call
    /// [`Control::start_close`]; otherwise the CLOSE-ACK is already queued.
    PeerClosing,
    /// The connection closed: our CLOSE was acknowledged, or a legacy FIN arrived.
    Closed,
    /// Not acted upon; counted in [`ControlStats`].
    Ignored(IgnoreReason),
}

/// Why a control datagram was ignored.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum IgnoreReason {
    /// Could not be decoded.
    Malformed,
    /// Names another conv, token or sync_id: not from our peer (or forged).
    NotOurs,
    /// Valid, but meaningless in this mode or state (e.g. CLOSE-ACK while open).
    Unexpected,
}

/// Why the control plane ended the connection.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Error)]
pub enum ControlError {
    /// Nothing received for `idle_timeout`.
    #[error("idle timeout: nothing received for {0:?}")]
    IdleTimeout(Duration),
    /// CLOSE was not acknowledged after all resends.
    #[error("close timeout: CLOSE not acknowledged after {0} sends")]
    CloseTimeout(u8),
}

/// Counters of one connection's control plane.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct ControlStats {
    /// KEEPALIVE datagrams sent.
    pub keepalives_sent: u64,
    /// KEEPALIVE-ACK datagrams sent.
    pub keepalive_acks_sent: u64,
    /// CLOSE / FIN datagrams sent (resends included).
    pub closes_sent: u64,
    /// CLOSE-ACK datagrams sent.
    pub close_acks_sent: u64,
    /// Ignored: [`IgnoreReason::Malformed`].
    pub ignored_malformed: u64,
    /// Ignored: [`IgnoreReason::NotOurs`].
    pub ignored_not_ours: u64,
    /// Ignored: [`IgnoreReason::Unexpected`].
    pub ignored_unexpected: u64,
}

#[derive(Debug, Clone, Copy)]
enum Kind {
    Native(ConnRef),
    Legacy { sync_id: u32, conv: u32 },
    Raw,
}

/// At most one of each datagram is ever queued, so the queue is bounded by
/// construction: repeated KEEPALIVEs collapse into one KEEPALIVE-ACK.
#[derive(Debug, Default)]
struct Pending {
    close_ack: bool,
    close: bool,
    keepalive_ack: bool,
    keepalive: bool,
}

/// Keepalive, idle timeout and graceful close of one connection (sans-IO).
///
/// After any `handle_*` / `start_close` call, drain
/// [`poll_transmit`](Self::poll_transmit) until it returns `false`, then
/// re-arm the timer from [`poll_timeout`](Self::poll_timeout). An idle open
/// connection has exactly one timer: the next keepalive (native) or the idle
/// deadline (legacy, raw).
#[derive(Debug)]
pub struct Control {
    kind: Kind,
    config: ControlConfig,
    state: ControlState,
    /// Last datagram from the peer, control included: the idle timeout runs from here.
    last_rx: Instant,
    /// Last data datagram (KCP, FEC shard or loss report) the session accepted:
    /// traffic that makes a keepalive unnecessary.
    /// Control datagrams do not move it, so a KEEPALIVE-ACK answering ours or the
    /// peer's own KEEPALIVE never moves the next keepalive later than the
    /// runtime's timer is armed for (a wake-up with nothing to do).
    last_data_rx: Instant,
    last_keepalive: Instant,
    close_resend_at: Instant,
    close_resends_left: u8,
    pending: Pending,
    stats: ControlStats,
}

impl Control {
    /// Control plane for `established`, starting `now`.
    ///
    /// # Errors
    /// [`ConfigError`] if `config` is out of range.
    pub fn new(
        established: &Established,
        config: ControlConfig,
        now: Instant,
    ) -> Result<Self, ConfigError> {
        config.validate()?;
        let kind = match established.binding {
            Binding::Native { token, .. } => Kind::Native(ConnRef {
                conv: established.conv,
                token,
            }),
            Binding::Legacy { sync_id } => Kind::Legacy {
                sync_id,
                conv: established.conv,
            },
            Binding::Raw => Kind::Raw,
        };
        Ok(Self {
            kind,
            config,
            state: ControlState::Open,
            last_rx: now,
            last_data_rx: now,
            last_keepalive: now,
            close_resend_at: now,
            close_resends_left: 0,
            pending: Pending::default(),
            stats: ControlStats::default(),
        })
    }

    /// Current state.
    pub fn state(&self) -> ControlState {
        self.state
    }

    /// Counters so far.
    pub fn stats(&self) -> ControlStats {
        self.stats
    }

    /// A datagram of this connection that decoded (the session calls it only
    /// when FEC and KCP accepted it) proves the peer alive and postpones the next
    /// keepalive. Verified control datagrams count by themselves for the idle
    /// timeout, but do not postpone the next keepalive.
    pub fn on_datagram_received(&mut self, now: Instant) {
        self.last_rx = self.last_rx.max(now);
        self.last_data_rx = self.last_data_rx.max(now);
    }

    /// Handles a control datagram (see `HandshakeMode::classify`) from the peer.
    pub fn handle_control(&mut self, now: Instant, datagram: &[u8]) -> ControlEvent {
        let event = match self.kind {
            Kind::Native(ours) => self.handle_native(now, ours, datagram),
            Kind::Legacy { sync_id, conv } => match LegacyMessage::decode(datagram) {
                Ok(LegacyMessage::Fin {
                    sync_id: s,
                    conv: c,
                }) if s == sync_id && c == conv => {
                    self.last_rx = self.last_rx.max(now);
                    self.state = ControlState::Closed;
                    ControlEvent::Closed
                }
                Ok(LegacyMessage::Fin { .. }) => ControlEvent::Ignored(IgnoreReason::NotOurs),
                Ok(_) => ControlEvent::Ignored(IgnoreReason::Unexpected),
                Err(_) => ControlEvent::Ignored(IgnoreReason::Malformed),
            },
            Kind::Raw => ControlEvent::Ignored(IgnoreReason::Unexpected),
        };
        if let ControlEvent::Ignored(reason) = event {
            let s = &mut self.stats;
            *match reason {
                IgnoreReason::Malformed => &mut s.ignored_malformed,
                IgnoreReason::NotOurs => &mut s.ignored_not_ours,
                IgnoreReason::Unexpected => &mut s.ignored_unexpected,
            } += 1;
        }
        event
    }

    fn handle_native(&mut self, now: Instant, ours: ConnRef, datagram: &[u8]) -> ControlEvent {
        let (msg, theirs) = match NativeMessage::decode(datagram) {
            Ok(
                msg @ (NativeMessage::Keepalive(c)
                | NativeMessage::KeepaliveAck(c)
                | NativeMessage::Close(c)
                | NativeMessage::CloseAck(c)),
            ) => (msg, c),
            Ok(_) => return ControlEvent::Ignored(IgnoreReason::Unexpected),
            Err(_) => return ControlEvent::Ignored(IgnoreReason::Malformed),
        };
        if theirs != ours {
            return ControlEvent::Ignored(IgnoreReason::NotOurs);
        }
        if self.state != ControlState::Closed {
            self.last_rx = self.last_rx.max(now);
        }
        match (msg, self.state) {
            (NativeMessage::Keepalive(_), ControlState::Closed) => {
                ControlEvent::Ignored(IgnoreReason::Unexpected)
            }
            (NativeMessage::Keepalive(_), _) => {
                self.pending.keepalive_ack = true;
                ControlEvent::Keepalive
            }
            (NativeMessage::KeepaliveAck(_), _) => ControlEvent::KeepaliveAck,
            (NativeMessage::Close(_), ControlState::Open | ControlState::PeerClosing) => {
                self.state = ControlState::PeerClosing;
                ControlEvent::PeerClosing
            }
            (NativeMessage::Close(_), ControlState::Closing | ControlState::Closed) => {
                // We flushed before our own CLOSE, so we can acknowledge at once
                // (simultaneous close, or our earlier CLOSE-ACK was lost).
                self.pending.close_ack = true;
                ControlEvent::PeerClosing
            }
            (NativeMessage::CloseAck(_), ControlState::Closing) => {
                self.state = ControlState::Closed;
                ControlEvent::Closed
            }
            _ => ControlEvent::Ignored(IgnoreReason::Unexpected),
        }
    }

    /// Starts (or, after [`ControlEvent::PeerClosing`], completes) a graceful
    /// close. Call it only once KCP has no pending segments. Native: sends
    /// CLOSE and waits for CLOSE-ACK, or answers the peer's CLOSE with
    /// CLOSE-ACK. Legacy: sends FIN. Raw: closes silently.
    pub fn start_close(&mut self, now: Instant) {
        match (self.kind, self.state) {
            (_, ControlState::Closing | ControlState::Closed) => {}
            (Kind::Native(_), ControlState::Open) => {
                self.state = ControlState::Closing;
                self.pending.close = true;
                self.close_resend_at = now + self.config.close_resend_interval;
                self.close_resends_left = self.config.close_resends;
            }
            (Kind::Native(_), ControlState::PeerClosing) => {
                self.pending.close_ack = true;
                self.state = ControlState::Closed;
            }
            (Kind::Legacy { .. }, _) => {
                self.pending.close = true;
                self.state = ControlState::Closed;
            }
            (Kind::Raw, _) => self.state = ControlState::Closed,
        }
    }

    /// Writes the next queued control datagram into `out` (cleared first);
    /// returns whether there was one.
    pub fn poll_transmit(&mut self, _now: Instant, out: &mut Vec<u8>) -> bool {
        out.clear();
        let p = &mut self.pending;
        let s = &mut self.stats;
        match self.kind {
            Kind::Native(c) => {
                let msg = if std::mem::take(&mut p.close_ack) {
                    s.close_acks_sent += 1;
                    NativeMessage::CloseAck(c)
                } else if std::mem::take(&mut p.close) {
                    s.closes_sent += 1;
                    NativeMessage::Close(c)
                } else if std::mem::take(&mut p.keepalive_ack) {
                    s.keepalive_acks_sent += 1;
                    NativeMessage::KeepaliveAck(c)
                } else if std::mem::take(&mut p.keepalive) {
                    s.keepalives_sent += 1;
                    NativeMessage::Keepalive(c)
                } else {
                    return false;
                };
                msg.encode(out);
                true
            }
            Kind::Legacy { sync_id, conv } if std::mem::take(&mut p.close) => {
                s.closes_sent += 1;
                LegacyMessage::Fin { sync_id, conv }.encode(out);
                true
            }
            Kind::Legacy { .. } | Kind::Raw => false,
        }
    }

    fn next_keepalive(&self) -> Option<Instant> {
        match self.kind {
            Kind::Native(_) => {
                Some(self.last_data_rx.max(self.last_keepalive) + self.config.keepalive_interval)
            }
            _ => None,
        }
    }

    /// The next instant [`handle_timeout`](Self::handle_timeout) has work;
    /// `None` once closed.
    pub fn poll_timeout(&self) -> Option<Instant> {
        match self.state {
            ControlState::Closed => None,
            ControlState::Closing => Some(self.close_resend_at),
            ControlState::Open | ControlState::PeerClosing => {
                let idle = self.last_rx + self.config.idle_timeout;
                Some(self.next_keepalive().map_or(idle, |k| k.min(idle)))
            }
        }
    }

    /// Fires due timers: queues KEEPALIVE or a CLOSE resend, or ends the connection.
    ///
    /// Returns [`ControlError::IdleTimeout`] or [`ControlError::CloseTimeout`]
    /// when the connection is over (state becomes `Closed`).
    pub fn handle_timeout(&mut self, now: Instant) -> Option<ControlError> {
        match self.state {
            ControlState::Closed => None,
            ControlState::Closing => {
                if now < self.close_resend_at {
                    None
                } else if self.close_resends_left > 0 {
                    self.close_resends_left -= 1;
                    self.pending.close = true;
                    self.close_resend_at = now + self.config.close_resend_interval;
                    None
                } else {
                    self.state = ControlState::Closed;
                    Some(ControlError::CloseTimeout(
                        self.config.close_resends.saturating_add(1),
                    ))
                }
            }
            ControlState::Open | ControlState::PeerClosing => {
                if now >= self.last_rx + self.config.idle_timeout {
                    self.state = ControlState::Closed;
                    return Some(ControlError::IdleTimeout(self.config.idle_timeout));
                }
                if self.next_keepalive().is_some_and(|k| now >= k) {
                    self.pending.keepalive = true;
                    self.last_keepalive = now;
                }
                None
            }
        }
    }
}
