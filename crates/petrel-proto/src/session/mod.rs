//! [`Session`]: one connection after its handshake — KCP ARQ over an optional
//! FEC layer, with the keepalive / idle / close control plane — as a single
//! sans-IO state machine.
//!
//! The runtime feeds it the connection's data datagrams ([`Session::input`]) and
//! control datagrams ([`Session::handle_control`], routed separately because the
//! handshake layer tells them apart, see `HandshakeMode::classify`), drains
//! [`Session::poll_transmit`], and sleeps until [`Session::poll_timeout`].
//!
//! # Layers
//!
//! ```text
//!  send / recv                      messages
//!  Kcp        mtu = path mtu − overhead   ARQ datagrams
//!  FecLink    conv u32 LE ‖ native FEC shard, or conv ‖ loss report
//!  socket     data datagrams; control datagrams (Control) bypass FEC
//! ```
//!
//! - **No FEC** ([`crate::fec::FecScheme::None`]): datagrams are bare KCP,
//!   overhead 0, wire-compatible with plain KCP peers.
//! - **FEC**: every ARQ datagram (data, acks, probes) becomes a native-framed
//!   data shard behind a 4-byte `conv` prefix ([`CONV_PREFIX`]) so the runtime
//!   can route shards, which carry no conv of their own, by `(peer, conv)`.
//!   Overhead per datagram: 4 + [`crate::fec::wire::NATIVE_OVERHEAD`] = 14 bytes
//!   (the reference report plans 26).
//! - **kcp-go framing** ([`SessionFraming::KcpGo`]): kcp-go's FEC header and
//!   fixed-shape groups without a conv prefix (kcp-go peers route by address),
//!   behind kcptun's 20-byte crypt-none header whose CRC-32 is checked on every
//!   datagram (a mismatch is a counted `malformed` drop): 28 bytes per datagram.
//! - **Pass-through** (parity 0, e.g. adaptive at zero loss): a datagram with no
//!   group to join is framed straight into the outgoing buffer (10 bytes: conv
//!   prefix + 6-byte data header) in the same `poll_transmit` as KCP produced it,
//!   and the peer's decoder hands it to KCP borrowed, uncopied — no queue, no
//!   group, no `group_wait`, no timer (pinned by `tests/fec_passthrough.rs`).
//! - **Loss reports** (adaptive schemes only): the receiver sends a
//!   [`crate::fec::LossReport`] (`conv ‖ 0x18 …`, 13 bytes) at most every
//!   `loss_report_interval` (default 100 ms), and only when shards arrived since
//!   the last one; the peer's decoder hands it to its encoder's
//!   [`crate::fec::ParityPolicy`]. Reports are periodic, not piggybacked: they
//!   need no change to the KCP wire format and cost ≤ 10 datagrams/s.
//! - **Sparse traffic** (native framing): when KCP has nothing more to send and
//!   the encoder measures fewer than one datagram per `group_wait`, the open group
//!   closes at once with its parity ([`crate::fec::FecEncoder::flush`]): a
//!   window-1 exchange gets each datagram protected within the same
//!   `poll_transmit` round instead of after `group_wait` or an RTO.
//! - **Idle sender** (native framing, adaptive schemes): when KCP has nothing
//!   more to send and nothing queued (all written messages are on the wire),
//!   the open group closes at once too when the parity credit pays its parity
//!   in full ([`crate::fec::FecEncoder::flush_idle`]): a burst's repair then
//!   reaches the peer with the burst, not `group_wait` later behind the acks of
//!   its later segments, which would make fast retransmit resend what FEC
//!   repaired.
//!
//! # Timers and idleness
//!
//! [`Session::poll_timeout`] is the earliest of KCP's (only while data is in
//! flight or acks are held), the control plane's (keepalive / idle deadline),
//! the FEC encoder's `group_wait` (only while a group is open), the decoder's
//! group expiry (only while it tracks groups) and the next loss report (only
//! after shards arrived). An idle session therefore wakes for nothing but its
//! keepalive. After the session ended it is `None`.
//!
//! # Close
//!
//! [`Session::close`] (or the peer's CLOSE) waits until KCP has nothing in flight,
//! then starts the control plane's close (`specs/kcp.md` §4 native CLOSE /
//! CLOSE-ACK, §3 legacy FIN, raw: silent). A close timeout after everything was
//! acknowledged still counts as a clean close.

mod config;
mod fec;

use std::time::{Duration, Instant};

use bytes::Bytes;
use thiserror::Error;

use crate::fec::{FecBudget, ShapeMismatch};
use crate::handshake::{
    Control, ControlError, ControlEvent, ControlState, ControlStats, Established,
};
use crate::kcp::{InputError, Kcp, KcpError, KcpStats, SendError};

pub use config::{
    fec_descriptor, fec_for_connection, SessionConfig, SessionConfigError, SessionFraming,
};
pub use fec::{FecInputError, FecStats, CONV_PREFIX};

use fec::FecLink;

/// Reads the `conv` every data datagram of a session starts with (KCP's header,
/// or the FEC conv prefix, which also fronts 13-byte loss reports shorter than a
/// KCP header), for routing by `(peer, conv)`. `None` below 4 bytes.
pub fn peek_conv(datagram: &[u8]) -> Option<u32> {
    let (conv, _) = datagram.split_first_chunk::<CONV_PREFIX>()?;
    Some(u32::from_le_bytes(*conv))
}

/// Why a session ended other than by a clean close.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Error)]
pub enum SessionError {
    /// The ARQ gave up on a segment (`dead_link` retransmissions).
    #[error(transparent)]
    DeadLink(#[from] KcpError),
    /// Nothing arrived from the peer within the idle timeout.
    #[error("idle timeout: nothing received for {0:?}")]
    IdleTimeout(Duration),
    /// kcp-go FEC framing: the peer's group shape is not ours, so its parity
    /// cannot be used (nothing was rebuilt from it); names both shapes.
    #[error(transparent)]
    FecShapeMismatch(#[from] ShapeMismatch),
}

/// Why [`Session::input`] rejected (part of) a datagram; it is also counted.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Error)]
pub enum SessionInputError {
    /// The FEC layer rejected the datagram.
    #[error(transparent)]
    Fec(#[from] FecInputError),
    /// KCP rejected the datagram (or a datagram the FEC layer rebuilt).
    #[error(transparent)]
    Kcp(#[from] InputError),
}

/// Counters of one session.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct SessionStats {
    /// The ARQ's counters and gauges.
    pub kcp: KcpStats,
    /// FEC counters; `None` when the session runs without FEC.
    pub fec: Option<FecStats>,
    /// Keepalive / close counters.
    pub control: ControlStats,
}

/// One connection's protocol state: KCP + optional FEC + control plane.
#[derive(Debug)]
pub struct Session {
    kcp: Kcp,
    fec: Option<FecLink>,
    control: Control,
    /// One ARQ datagram between KCP and the FEC layer, either way.
    scratch: Vec<u8>,
    close_requested: bool,
    peer_closing: bool,
    closed: bool,
    error: Option<SessionError>,
}

impl Session {
    /// The session of `established`, created at `now`.
    ///
    /// The connection's MTU is the smaller of `config.kcp.mtu` and the negotiated
    /// one; KCP gets that minus the FEC overhead. The FEC scheme follows
    /// [`fec_for_connection`].
    ///
    /// # Errors
    /// [`SessionConfigError`] naming the bad field.
    pub fn new(
        established: &Established,
        config: &SessionConfig,
        now: Instant,
    ) -> Result<Self, SessionConfigError> {
        Self::with_fec_budget(established, config, now, FecBudget::new(config.fec.budget))
    }

    /// Like [`Session::new`], but the FEC encoder and decoder reserve the shards
    /// they retain in `budget`, shared with the endpoint's other sessions (see
    /// [`FecBudget`]); dropping the session returns what it holds.
    ///
    /// # Errors
    /// [`SessionConfigError`] naming the bad field.
    pub fn with_fec_budget(
        established: &Established,
        config: &SessionConfig,
        now: Instant,
        budget: FecBudget,
    ) -> Result<Self, SessionConfigError> {
        config.validate()?;
        let fec_config = fec_for_connection(established, &config.fec);
        let fec = FecLink::new(
            established.conv,
            &fec_config,
            config.framing.fec_framing(),
            config.loss_report_interval,
            budget,
        )?;
        let overhead = fec.as_ref().map_or(0, FecLink::overhead);
        let mtu = config.kcp.mtu.min(usize::from(established.params.mtu));
        let mut kcp_config = config.kcp;
        kcp_config.mtu = mtu
            .checked_sub(overhead)
            .ok_or(SessionConfigError::MtuTooSmall { mtu, overhead })?;
        let kcp = Kcp::new(established.conv, kcp_config, now)?;
        let control = Control::new(established, config.control.clone(), now)?;
        Ok(Self {
            kcp,
            fec,
            control,
            scratch: Vec::with_capacity(mtu),
            close_requested: false,
            peer_closing: false,
            closed: false,
            error: None,
        })
    }

    /// Bytes each datagram spends on FEC framing: 14 with Petrel's FEC, 28 with
    /// kcp-go's behind the crypt header (8 without it), 0 without FEC.
    pub fn overhead(&self) -> usize {
        self.fec.as_ref().map_or(0, FecLink::overhead)
    }

    /// Conversation id.
    pub fn conv(&self) -> u32 {
        self.kcp.conv()
    }

    /// Largest message [`Session::send`] accepts, bytes.
    pub fn max_message_size(&self) -> usize {
        self.kcp.max_message_size()
    }

    /// Whether a message of `len` bytes would be accepted by `send` now.
    pub fn can_send(&self, len: usize) -> bool {
        self.kcp.can_send(len)
    }

    /// Queues one message for reliable, in-order delivery.
    ///
    /// # Errors
    /// [`SendError`] from KCP (too large, queue full, dead).
    pub fn send(&mut self, msg: &[u8]) -> Result<(), SendError> {
        self.kcp.send(msg)
    }

    /// [`Session::send`] without copying `msg` (see `Kcp::send_bytes`).
    ///
    /// # Errors
    /// As [`Session::send`].
    pub fn send_bytes(&mut self, msg: Bytes) -> Result<(), SendError> {
        self.kcp.send_bytes(msg)
    }

    /// Whether the send queue has room for `WRITE_WAKE_ROOM` segments (or half its
    /// limit, if that is less) and holds at most half of `notsent_lowat` bytes: the
    /// level at which blocked writers are woken (see `Kcp::send_queue_low`).
    pub fn send_queue_low(&self) -> bool {
        self.kcp.send_queue_low()
    }

    /// Whether [`Session::recv`] would return a message now.
    pub fn has_message(&self) -> bool {
        self.kcp.has_message()
    }

    /// Next complete in-order message, if any.
    pub fn recv(&mut self) -> Option<Bytes> {
        self.kcp.recv()
    }

    /// Segments queued or unacknowledged; 0 means everything sent was acked.
    pub fn pending_segments(&self) -> usize {
        self.kcp.pending_segments()
    }

    /// Feeds one data datagram from the peer: FEC decode (if any), then KCP
    /// input of every datagram received or rebuilt. Only a datagram that decodes
    /// (every layer accepted it) proves the peer alive and refreshes the idle
    /// timer: anyone who can guess `(peer, conv)` could send malformed ones.
    /// Drain [`Session::poll_transmit`] afterwards for the acks.
    ///
    /// # Errors
    /// The first rejection ([`SessionInputError`]); the other datagrams of the
    /// same input are still processed, and every rejection is counted.
    pub fn input(&mut self, now: Instant, datagram: &[u8]) -> Result<(), SessionInputError> {
        let result = match &mut self.fec {
            None => self.kcp.input(now, datagram).map_err(Into::into),
            Some(fec) => {
                let mut result = match fec.input(now, datagram) {
                    Ok(Some(passed)) => self.kcp.input(now, passed).map_err(Into::into),
                    Ok(None) => Ok(()),
                    Err(e) => Err(e.into()),
                };
                while fec.poll_datagram(&mut self.scratch) {
                    if let Err(e) = self.kcp.input(now, &self.scratch) {
                        result = result.and(Err(e.into()));
                    }
                }
                result
            }
        };
        if result.is_ok() {
            self.control.on_datagram_received(now);
        }
        self.advance(now);
        result
    }

    /// Feeds a control datagram (keepalive, close, FIN) for this connection.
    pub fn handle_control(&mut self, now: Instant, datagram: &[u8]) -> ControlEvent {
        let event = self.control.handle_control(now, datagram);
        if event == ControlEvent::PeerClosing {
            self.peer_closing = true;
        }
        self.advance(now);
        event
    }

    /// Writes the next queued control datagram (CLOSE-ACK, CLOSE, legacy FIN,
    /// keepalive) into `out`, and nothing of the ARQ or FEC. At most four are ever
    /// queued. A runtime that is about to drop the session sends these last, so
    /// that a peer's CLOSE is still answered (`specs/kcp.md` §4) and the peer's
    /// close does not wait for its resends to time out. Returns `false` when
    /// none is queued.
    pub fn poll_control_transmit(&mut self, now: Instant, out: &mut Vec<u8>) -> bool {
        self.control.poll_transmit(now, out)
    }

    /// Writes the next datagram to send into `out`: control datagrams first,
    /// then loss reports, then ARQ datagrams (FEC-framed, parity after its group).
    /// Returns `false` when nothing is left to send now.
    pub fn poll_transmit(&mut self, now: Instant, out: &mut Vec<u8>) -> bool {
        if self.poll_control_transmit(now, out) {
            return true;
        }
        let Some(fec) = &mut self.fec else {
            return self.kcp.poll_transmit(now, out);
        };
        loop {
            if fec.poll_transmit(now, out) {
                return true;
            }
            if !self.kcp.poll_transmit(now, &mut self.scratch) {
                // Nothing more from the ARQ now: a sparse group gets its parity at
                // once, and so does an adaptive group when nothing is queued either.
                let idle = self.kcp.send_queue_is_empty();
                return fec.flush(now, idle) && fec.poll_transmit(now, out);
            }
            if fec.push(now, &self.scratch, out) {
                return true;
            }
        }
    }

    /// The next instant [`Session::handle_timeout`] has work (see the module docs);
    /// `None` once the session ended.
    pub fn poll_timeout(&self) -> Option<Instant> {
        if self.is_finished() {
            return None;
        }
        [
            self.kcp.poll_timeout(),
            self.control.poll_timeout(),
            self.fec.as_ref().and_then(FecLink::poll_timeout),
        ]
        .into_iter()
        .flatten()
        .min()
    }

    /// Runs every due timer: retransmissions and held acks, keepalive, idle and
    /// close timeouts, FEC group closing and expiry, loss reports.
    pub fn handle_timeout(&mut self, now: Instant) {
        if self.is_finished() {
            return;
        }
        self.kcp.handle_timeout(now);
        if let Some(fec) = &mut self.fec {
            fec.handle_timeout(now);
        }
        match self.control.handle_timeout(now) {
            Some(ControlError::IdleTimeout(d)) => self.error = Some(SessionError::IdleTimeout(d)),
            // The peer went away during close; everything we sent was acked.
            Some(ControlError::CloseTimeout(_)) => self.closed = true,
            None => {}
        }
        self.advance(now);
    }

    /// Asks for a graceful close: queued messages are still delivered, then the
    /// control plane closes. Progress shows in [`Session::is_closed`].
    pub fn close(&mut self, now: Instant) {
        self.close_requested = true;
        self.advance(now);
    }

    /// Whether [`Session::close`] was called.
    pub fn close_requested(&self) -> bool {
        self.close_requested
    }

    /// Whether the peer started a graceful close (it sends nothing more).
    pub fn peer_closing(&self) -> bool {
        self.peer_closing
    }

    /// Whether the session closed cleanly (both sides flushed, or the peer
    /// vanished after acknowledging everything).
    pub fn is_closed(&self) -> bool {
        self.closed
    }

    /// Why the session failed, once it has.
    pub fn error(&self) -> Option<SessionError> {
        self.error
    }

    /// Closed or failed: no more timers, nothing more to do.
    pub fn is_finished(&self) -> bool {
        self.closed || self.error.is_some()
    }

    /// Counters of every layer.
    pub fn stats(&self) -> SessionStats {
        SessionStats {
            kcp: self.kcp.stats(),
            fec: self.fec.as_ref().map(FecLink::stats),
            control: self.control.stats(),
        }
    }

    /// Moves a requested close forward once KCP has nothing in flight, and
    /// records how the session ended.
    fn advance(&mut self, now: Instant) {
        if self.is_finished() {
            return;
        }
        if let Some(e) = self.kcp.error() {
            self.error = Some(SessionError::DeadLink(*e));
            return;
        }
        if let Some(m) = self.fec.as_ref().and_then(FecLink::shape_mismatch) {
            self.error = Some(SessionError::FecShapeMismatch(m));
            return;
        }
        let wants_close = match self.control.state() {
            ControlState::Open => self.close_requested,
            ControlState::PeerClosing => true,
            ControlState::Closing | ControlState::Closed => false,
        };
        if wants_close && self.kcp.pending_segments() == 0 {
            self.control.start_close(now);
        }
        if self.control.state() == ControlState::Closed {
            self.closed = true;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::fec::{FecConfig, FecScheme};
    use crate::handshake::{Binding, RAW_PARAMS};

    fn session(scheme: FecScheme, now: Instant) -> Session {
        let established = Established {
            conv: 99,
            params: RAW_PARAMS,
            binding: Binding::Raw,
        };
        let config = SessionConfig {
            fec: FecConfig {
                scheme,
                ..FecConfig::default()
            },
            ..SessionConfig::default()
        };
        Session::new(&established, &config, now).unwrap()
    }

    #[test]
    fn every_datagram_fits_the_mtu_and_starts_with_conv() {
        let now = Instant::now();
        let mut s = session(FecScheme::default(), now);
        assert_eq!(s.overhead(), 14);
        s.send(&[1; 20_000]).unwrap();
        let mut out = Vec::new();
        let (mut count, mut longest) = (0, 0);
        let later = now + Duration::from_millis(5);
        while s.poll_transmit(now, &mut out) || s.poll_transmit(later, &mut out) {
            assert_eq!(peek_conv(&out), Some(99));
            longest = longest.max(out.len());
            count += 1;
        }
        // 18 data shards (mss 1162) and their groups' parity, the longest at the MTU.
        assert!(count > 18, "{count}");
        assert_eq!(longest, 1200);
        let fec = s.stats().fec.unwrap();
        assert_eq!(fec.encoder.data_shards_sent, 18);
        assert_eq!(fec.encoder.parity_shards_sent, 6);
    }

    #[test]
    fn no_fec_means_bare_kcp() {
        let now = Instant::now();
        let mut s = session(FecScheme::None, now);
        assert_eq!(s.overhead(), 0);
        s.send(b"x").unwrap();
        let mut out = Vec::new();
        assert!(s.poll_transmit(now, &mut out));
        assert_eq!(out.len(), crate::kcp::HEADER_LEN + 1);
        assert!(s.stats().fec.is_none());
    }

    #[test]
    fn foreign_and_short_datagrams_are_counted_errors() {
        let now = Instant::now();
        let mut s = session(FecScheme::default(), now);
        assert!(matches!(
            s.input(now, &[1, 2]),
            Err(SessionInputError::Fec(FecInputError::WrongConv))
        ));
        let mut other = 100u32.to_le_bytes().to_vec();
        other.extend_from_slice(&[0x10; 40]);
        assert!(s.input(now, &other).is_err());
        let mut ours = 99u32.to_le_bytes().to_vec();
        ours.extend_from_slice(&[0x77; 40]);
        assert!(matches!(
            s.input(now, &ours),
            Err(SessionInputError::Fec(FecInputError::Decode(_)))
        ));
        let fec = s.stats().fec.unwrap();
        assert_eq!((fec.wrong_conv, fec.decoder.malformed), (2, 1));
        assert!(s.error().is_none());
    }

    /// Malformed datagrams routed to the connection do not keep it alive.
    #[test]
    fn only_datagrams_that_decode_refresh_the_idle_timer() {
        for scheme in [FecScheme::None, FecScheme::default()] {
            let t0 = Instant::now();
            let mut s = session(scheme, t0);
            let mut junk = 99u32.to_le_bytes().to_vec();
            junk.extend_from_slice(&[0x77; 40]);
            let mut now = t0;
            while s.error().is_none() {
                now += Duration::from_secs(1);
                assert!(s.input(now, &junk).is_err());
                s.handle_timeout(now);
                assert!(now - t0 <= Duration::from_secs(31), "{scheme:?}");
            }
            assert!(matches!(s.error(), Some(SessionError::IdleTimeout(_))));
        }
    }
}
