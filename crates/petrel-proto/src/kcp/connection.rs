//! [`Kcp`]: one KCP connection's state, the application side (`send`, `recv`) and the
//! input path. Output and timers are in `output.rs`.

use std::collections::VecDeque;
use std::time::{Duration, Instant};

use bytes::{Buf, Bytes};

use crate::cc::{AckEvent, CongestionController, DeliveryState, LossEvent, LossKind, Pacer};

use super::config::{ConfigError, KcpConfig};
use super::error::{InputError, KcpError, SendError};
use super::recv_buf::{Insert, RecvBuffer};
use super::rtt::RttEstimator;
use super::segment::{segments, Command};
use super::send_buf::SendBuffer;
use super::stats::KcpStats;

/// The peer's receive window assumed before it tells us (`IKCP_WND_RCV`), segments.
const INITIAL_RMT_WND: u16 = 128;
/// Most fragments per message: `frg` is one byte, and 255 keeps the count in a byte.
const MAX_FRAGMENTS: usize = 255;
/// Free send-queue segments at which blocked writers are woken (see
/// [`Kcp::send_queue_low`]): 64 × 1376 B ≈ 88 KB at the default mtu, a few of the
/// messages a bulk sender writes, small enough to stay in a core's cache until sent.
pub const WRITE_WAKE_ROOM: usize = 64;
/// The mss of a 1500-byte Ethernet path over IPv4 (1500 − 20 − 8 − 24 bytes). Segments
/// up to this size are accepted whatever our own mtu, so peers configured with another
/// mtu (the legacy servers use 1400, kcptun 1350) interoperate.
const ETHERNET_MSS: usize = 1448;
/// Fast retransmit stops after this many transmissions of a segment
/// (`IKCP_FASTACK_LIMIT`); the timer takes over, so a lossy path does not flood.
pub(super) const FAST_RESEND_LIMIT: u32 = 5;

/// One KCP connection: a sans-IO state machine (see the [module docs](super)).
#[derive(Debug)]
pub struct Kcp {
    pub(super) conv: u32,
    pub(super) config: KcpConfig,
    pub(super) mss: usize,
    pub(super) max_fragments: usize,
    /// Origin of the millisecond `ts` clock on the wire.
    pub(super) epoch: Instant,
    pub(super) snd: SendBuffer,
    pub(super) rcv: RecvBuffer,
    pub(super) rmt_wnd: u16,
    /// Acks to send: `(sn, ts)` of received data segments.
    pub(super) acks: VecDeque<(u32, u32)>,
    /// With `ack_nodelay` off: when the held acks go out.
    pub(super) ack_deadline: Option<Instant>,
    pub(super) acks_released: bool,
    /// Zero-window probing (persist timer): next WASK and the current wait.
    pub(super) probe_at: Option<Instant>,
    pub(super) probe_wait: Duration,
    pub(super) ask_pending: bool,
    pub(super) tell_pending: bool,
    pub(super) rtt: RttEstimator,
    /// Delivery-rate bookkeeping for the controller.
    pub(super) rate: DeliveryState,
    pub(super) cc: Box<dyn CongestionController>,
    /// Releases data at the controller's pacing rate, when it has one.
    pub(super) pacer: Pacer,
    /// When the pacer lets the next waiting datagram go.
    pub(super) pacing_deadline: Option<Instant>,
    pub(super) error: Option<KcpError>,
    /// The retransmission timeout whose spuriousness is still to be decided.
    pub(super) timeout_check: Option<TimeoutCheck>,
    pub(super) stats: KcpStats,
}

/// Eifel detection (RFC 3522 §2) of the latest retransmission timeout: the
/// first segment it declared lost and the `ts` of that segment's first
/// retransmission (RFC 3522 `RetransmitTS`), `None` until it is sent. The first
/// selective ACK of that segment decides: when it echoes an older `ts`, the
/// original transmission arrived and the timeout was spurious. When no such ACK
/// comes (lost; the segment acknowledged cumulatively), the check is replaced
/// by the next timeout's and the reduction stays.
#[derive(Debug, Clone, Copy)]
pub(super) struct TimeoutCheck {
    pub(super) sn: u32,
    pub(super) retransmit_ts: Option<u32>,
}

impl Kcp {
    /// A connection with conversation id `conv`, created at `now`.
    ///
    /// # Errors
    /// The config's [`ConfigError`].
    pub fn new(conv: u32, config: KcpConfig, now: Instant) -> Result<Self, ConfigError> {
        config.validate()?;
        let mss = config.mss();
        let max_fragments = MAX_FRAGMENTS
            .min(usize::from(config.rcv_wnd))
            .min(config.send_queue_limit);
        Ok(Self {
            conv,
            mss,
            max_fragments,
            epoch: now,
            snd: SendBuffer::new(),
            rcv: RecvBuffer::new(config.rcv_wnd),
            rmt_wnd: INITIAL_RMT_WND,
            acks: VecDeque::new(),
            ack_deadline: None,
            acks_released: false,
            probe_at: None,
            probe_wait: Duration::ZERO,
            ask_pending: false,
            tell_pending: false,
            rtt: RttEstimator::new(config.min_rto, config.interval),
            rate: DeliveryState::default(),
            cc: config.build_controller(now, u64::from(conv)),
            pacer: Pacer::new(),
            pacing_deadline: None,
            error: None,
            timeout_check: None,
            stats: KcpStats::default(),
            config,
        })
    }

    /// Conversation id.
    pub fn conv(&self) -> u32 {
        self.conv
    }

    /// Payload bytes per segment, `mtu − 24`.
    pub fn mss(&self) -> usize {
        self.mss
    }

    /// Largest data-segment payload `input` accepts, bytes: `max(mss, 1448)` (1448 is the
    /// mss of a 1500-byte Ethernet path). Larger segments are dropped without an ack and
    /// counted in [`KcpStats::segments_dropped_oversize`]; their sender retransmits them
    /// until its dead-link limit.
    ///
    /// Why: the receive buffer and queue hold `rcv_wnd` segments each, so this bounds
    /// the receive side at `2 × rcv_wnd × max_segment_payload` bytes (1.5 MB with the
    /// defaults). The reference accepts any `len`, which lets a peer park 64 KiB in every
    /// window slot (64 MB per connection with `rcv_wnd` 512).
    pub fn max_segment_payload(&self) -> usize {
        self.mss.max(ETHERNET_MSS)
    }

    /// Largest message `send` accepts, bytes: `mss × min(rcv_wnd, 255, send_queue_limit)`
    /// (1176 × 255 = 299 880 with the defaults).
    ///
    /// Why: a receiver delivers a message only once all its fragments sit in its
    /// receive queue of `rcv_wnd` segments, so a message of more fragments than the
    /// peer's `rcv_wnd` could never be delivered; we assume the peer's `rcv_wnd` is at
    /// least ours (same config on both ends). A reference C peer with its default
    /// window of 128 needs messages of at most 127 segments. `frg` is one byte, hence
    /// 255, and a message must fit in the send queue.
    pub fn max_message_size(&self) -> usize {
        self.mss * self.max_fragments
    }

    /// New segments a write of `len` bytes queues. Message mode: its fragments; a
    /// zero-length message is one empty segment, delivered as an empty message (as the
    /// reference does). Stream mode: what is left once the last queued segment is
    /// full, so an empty write queues nothing.
    fn new_segments(&self, len: usize) -> usize {
        if self.config.stream {
            len.saturating_sub(self.snd.tail_room(self.mss))
                .div_ceil(self.mss)
        } else {
            len.div_ceil(self.mss).max(1)
        }
    }

    /// Queues one message. It goes out on the next `poll_transmit` if the windows allow.
    ///
    /// # Errors
    /// [`SendError::MessageTooLarge`] above [`Kcp::max_message_size`];
    /// [`SendError::QueueFull`] when its segments do not fit under `send_queue_limit`
    /// or `notsent_lowat` bytes or more are queued (wait for acks and retry; in stream
    /// mode a write that fits in the last queued segment is always taken);
    /// [`SendError::Dead`] after a dead link.
    pub fn send(&mut self, msg: &[u8]) -> Result<(), SendError> {
        let count = self.admit(msg.len())?;
        let msg = if self.config.stream {
            &msg[self.snd.fill_tail(msg, self.mss)..]
        } else {
            msg
        };
        if count > 0 {
            self.snd
                .push_message(msg, self.mss, count, self.config.stream);
        }
        self.stats.messages_sent += 1;
        Ok(())
    }

    /// [`Kcp::send`] for a message the application holds as [`Bytes`]: a message of
    /// more than one segment is not copied — its segments are slices of `msg`, whose
    /// buffer then stays allocated until the last of them is acknowledged — while a
    /// one-segment message is copied as by `send`, so a small slice never pins the
    /// large buffer it may come from.
    ///
    /// # Errors
    /// As [`Kcp::send`].
    pub fn send_bytes(&mut self, mut msg: Bytes) -> Result<(), SendError> {
        let count = self.admit(msg.len())?;
        let stream = self.config.stream;
        if stream {
            let filled = self.snd.fill_tail(&msg, self.mss);
            msg.advance(filled);
        }
        if count > 1 {
            self.snd.push_shared(msg, self.mss, count, stream);
        } else if count == 1 {
            self.snd.push_message(&msg, self.mss, count, stream);
        }
        self.stats.messages_sent += 1;
        Ok(())
    }

    /// Checks a message of `len` bytes against the limits; returns its segment count.
    fn admit(&mut self, len: usize) -> Result<usize, SendError> {
        if self.error.is_some() {
            return Err(SendError::Dead);
        }
        let max = self.max_message_size();
        if len > max {
            return Err(SendError::MessageTooLarge { len, max });
        }
        let count = self.new_segments(len);
        if !self.queue_takes(count) {
            self.stats.send_queue_full += 1;
            return Err(SendError::QueueFull);
        }
        Ok(count)
    }

    /// Whether the send queue takes `count` more segments now: they fit under
    /// `send_queue_limit` and fewer than `notsent_lowat` bytes wait.
    fn queue_takes(&self, count: usize) -> bool {
        self.snd.queue.len() + count <= self.config.send_queue_limit
            && (count == 0 || self.snd.queued_bytes < self.config.notsent_lowat)
    }

    /// Whether a message of `len` bytes would be accepted by `send` now.
    pub fn can_send(&self, len: usize) -> bool {
        self.error.is_none()
            && len <= self.max_message_size()
            && self.queue_takes(self.new_segments(len))
    }

    /// Whether the send queue has room for [`WRITE_WAKE_ROOM`] segments (or half
    /// of `send_queue_limit`, if that is less) and holds at most half of
    /// `notsent_lowat` bytes: the level at which a runtime wakes
    /// writers blocked on a full queue, so that each wake finds room for a run of
    /// messages rather than one segment, while what they queue is still in cache
    /// when it goes out (after Linux's `sk_stream_write_space`, which also waits
    /// for free space in proportion rather than waking per freed packet).
    pub fn send_queue_low(&self) -> bool {
        let limit = self.config.send_queue_limit;
        let room = limit.saturating_sub(self.snd.queue.len());
        room >= WRITE_WAKE_ROOM.min(limit / 2).max(1)
            && self.snd.queued_bytes <= self.config.notsent_lowat / 2
    }

    /// Whether [`recv`](Self::recv) would return a message now.
    pub fn has_message(&self) -> bool {
        self.rcv.has_message()
    }

    /// Next complete in-order message, if any. In stream mode
    /// ([`KcpConfig::stream`]): the next run of in-order bytes, every complete
    /// message whose bytes lie in the receive chunk of the first (at least one
    /// message; a piece of at most 64 KiB unless one message is longer).
    pub fn recv(&mut self) -> Option<Bytes> {
        let (message, was_full) = if self.config.stream {
            self.rcv.pop_run()
        } else {
            self.rcv
                .pop_message()
                .map_or((None, false), |(message, was_full)| {
                    (Some(message), was_full)
                })
        };
        if was_full {
            // The peer saw a zero window; tell it the window reopened (`IKCP_ASK_TELL`).
            self.tell_pending = true;
        }
        let message = message?;
        self.stats.messages_received += 1;
        Some(message)
    }

    /// Whether the send queue (segments not yet in the send window) is empty:
    /// every message written so far has entered the window.
    pub fn send_queue_is_empty(&self) -> bool {
        self.snd.queue.is_empty()
    }

    /// Segments queued or sent and unacknowledged; 0 means everything sent was acked.
    pub fn pending_segments(&self) -> usize {
        self.snd.queue.len() + self.snd.unacked()
    }

    /// The connection's failure, once it has failed.
    pub fn error(&self) -> Option<&KcpError> {
        self.error.as_ref()
    }

    /// Counters and gauges now.
    pub fn stats(&self) -> KcpStats {
        let mut s = self.stats;
        s.srtt_us = self.rtt.srtt().as_micros() as u64;
        s.rttvar_us = self.rtt.rttvar().as_micros() as u64;
        s.rto_us = self.rtt.rto().as_micros() as u64;
        s.cwnd = self.cc.cwnd();
        s.pacing_rate = self.cc.pacing_rate().unwrap_or(0);
        s.delivered_bytes = self.rate.delivered();
        s.lost_bytes = self.rate.lost();
        s.snd_wnd = self.config.snd_wnd;
        s.rcv_wnd = self.rcv.free_window();
        s.rmt_wnd = self.rmt_wnd;
        s.in_flight = self.snd.unacked() as u64;
        s.in_flight_bytes = self.snd.in_flight_bytes;
        s.send_queue = self.snd.queue.len() as u64;
        s
    }

    /// The wire clock: ms since creation, wrapping (the peer only echoes it).
    pub(super) fn ts_ms(&self, now: Instant) -> u32 {
        now.saturating_duration_since(self.epoch).as_millis() as u32
    }

    /// Feeds one received datagram, which may hold several segments.
    ///
    /// The datagram is validated whole first, so a rejected one changes nothing but
    /// the `input_errors` counter.
    ///
    /// # Errors
    /// [`InputError::Malformed`], [`InputError::ConvMismatch`], [`InputError::Dead`].
    pub fn input(&mut self, now: Instant, datagram: &[u8]) -> Result<(), InputError> {
        if self.error.is_some() {
            return Err(InputError::Dead);
        }
        if let Err(e) = self.validate(datagram) {
            self.stats.input_errors += 1;
            return Err(e);
        }
        self.stats.datagrams_received += 1;
        self.stats.bytes_received += datagram.len() as u64;
        // Highest sn acked in this datagram and the latest send time among those acks.
        let mut max_ack: Option<(u32, Instant)> = None;
        // Every sn below this is acked already. Segments stay in the window until the
        // datagram is done (so a later ACK in it still finds its segment and gives an
        // RTT sample); this keeps each `una` from walking the prefix again: a datagram
        // of n ACKs sharing one `una` costs O(n), not O(n²).
        let mut una_applied = self.snd.snd_una;
        for seg in segments(datagram).flatten() {
            let h = seg.header;
            self.stats.segments_received += 1;
            self.rmt_wnd = h.wnd;
            if h.cmd == Command::Ack {
                // Before `una`: an ACK's own una usually covers the acked segment too,
                // and the RTT sample must not be lost to the cumulative ack.
                self.stats.acks_received += 1;
                if let Some(sent) = self.on_ack(h.sn, h.ts, now) {
                    let (sn, latest) = max_ack.unwrap_or((h.sn, sent));
                    let sn = if (h.sn.wrapping_sub(sn) as i32) > 0 {
                        h.sn
                    } else {
                        sn
                    };
                    max_ack = Some((sn, latest.max(sent)));
                }
            }
            self.on_una(h.una, &mut una_applied, now);
            match h.cmd {
                Command::Push => self.on_push(h.sn, h.ts, h.frg, seg.payload, now),
                Command::WindowAsk => self.tell_pending = true,
                Command::Ack | Command::WindowTell => {}
            }
        }
        self.snd.shrink();
        if let Some((sn, latest_sent)) = max_ack {
            self.on_fast_ack(sn, latest_sent, now);
        }
        self.update_probe(now);
        Ok(())
    }

    fn validate(&self, datagram: &[u8]) -> Result<(), InputError> {
        for seg in segments(datagram) {
            let conv = seg?.header.conv;
            if conv != self.conv {
                return Err(InputError::ConvMismatch {
                    expected: self.conv,
                    got: conv,
                });
            }
        }
        Ok(())
    }

    /// Cumulative ack: everything below `una` arrived.
    fn on_una(&mut self, una: u32, applied: &mut u32, now: Instant) {
        // Not ahead of what is acked (an old or stale `una`, or one 2^31 or more
        // ahead, which in wrapping order is behind): nothing to do.
        if (una.wrapping_sub(self.snd.snd_una) as i32) <= 0
            || (una.wrapping_sub(*applied) as i32) <= 0
        {
            return;
        }
        let from = applied.wrapping_sub(self.snd.snd_una) as usize;
        let to = (una.wrapping_sub(self.snd.snd_una) as usize).min(self.snd.buf.len());
        for index in from..to {
            self.acked(index, None, now);
        }
        *applied = una;
    }

    /// Selective ack of `sn`, echoing our transmission's `ts`. Returns when the
    /// acknowledged transmission was sent, if the segment is still in the send window.
    fn on_ack(&mut self, sn: u32, ts: u32, now: Instant) -> Option<Instant> {
        // Decided on the first ACK of the segment, even when an earlier `una`
        // already acknowledged it cumulatively.
        if let Some(check) = self.timeout_check.filter(|c| c.sn == sn) {
            self.timeout_check = None;
            // The echo is of a transmission older than the retransmission (or the
            // retransmission has not left yet): the original arrived.
            let spurious = check
                .retransmit_ts
                .is_none_or(|rts| (rts.wrapping_sub(ts) as i32) > 0);
            if spurious {
                self.undo_timeout(now);
            }
        }
        let index = self.snd.index(sn)?;
        let seg = &self.snd.buf[index];
        let last_sent = seg.last_sent?;
        // The echoed ts names the transmission. For the latest one, measure with µs
        // precision from our own send time; for an earlier one, use the ms echo.
        let rtt = if seg.ts == ts {
            Some(now.saturating_duration_since(last_sent))
        } else {
            let ms = self.ts_ms(now).wrapping_sub(ts) as i32;
            (ms >= 0).then(|| Duration::from_millis(ms as u64))
        };
        // When the acknowledged transmission left: an ACK of an original that was
        // retransmitted since must not count as an ACK of the retransmission.
        let sent = rtt
            .and_then(|r| now.checked_sub(r))
            .map_or(last_sent, |t| t.min(last_sent));
        if seg.acked {
            return Some(sent);
        }
        if let Some(sample) = rtt {
            self.rtt.on_sample(sample);
        }
        self.acked(index, rtt, now);
        Some(sent)
    }

    /// The response to a spurious timeout (after RFC 4015 §3, without its RTO
    /// reinitialisation: the RTT sample of the original transmission already
    /// went into the RFC 6298 estimator, and inflating the RTO further delays the
    /// repair of real losses on a path that reorders): the controller restores
    /// its window, segments the timeout declared lost that were not resent yet go
    /// back into flight, and every pending timer is pushed to at least one RTO
    /// after its transmission — the path is slow, not lossy, so nothing more is
    /// resent for it.
    fn undo_timeout(&mut self, now: Instant) {
        self.stats.spurious_rto_undone += 1;
        self.cc.on_spurious_timeout(now);
        let rto = self.rtt.rto();
        for index in 0..self.snd.buf.len() {
            self.snd.unmark_timed_out(index, now + rto);
            let seg = &mut self.snd.buf[index];
            if let (Some(at), Some(sent)) = (seg.resend_at, seg.last_sent) {
                seg.rto = seg.rto.max(rto);
                seg.resend_at = Some(at.max(sent + rto));
            }
        }
    }

    fn acked(&mut self, index: usize, rtt: Option<Duration>, now: Instant) {
        let Some((bytes, sent)) = self.snd.mark_acked(index) else {
            return;
        };

        // A segment acked before we sent it (a lying peer) is not a delivery.
        let Some((sent_time, stamp)) = sent else {
            return;
        };
        let mut event = AckEvent::new(now, bytes, sent_time);
        event.rtt = rtt;
        event.srtt = self.rtt.has_sample().then(|| self.rtt.srtt());
        event.in_flight = self.snd.in_flight_bytes;
        self.rate.on_acked(&mut event, &stamp);
        self.cc.on_ack(&event);
    }

    fn on_push(&mut self, sn: u32, ts: u32, frg: u8, payload: &[u8], now: Instant) {
        if payload.len() > self.max_segment_payload() {
            self.stats.segments_dropped_oversize += 1;
            return;
        }
        if !self.rcv.acceptable(sn) {
            self.stats.segments_dropped_window += 1;
            return;
        }
        match self.rcv.insert(sn, frg, payload) {
            Insert::Accepted => {}
            Insert::Duplicate => self.stats.duplicate_segments += 1,
            Insert::OutsideWindow | Insert::Undeliverable => {
                self.stats.segments_dropped_window += 1;
                return;
            }
        }
        // Acks are idempotent and the peer retransmits, so dropping one is safe;
        // the bound stops a flood of duplicates from growing the list.
        if self.acks.len() >= 2 * usize::from(self.config.rcv_wnd) {
            self.stats.acks_dropped += 1;
            return;
        }
        self.acks.push_back((sn, ts));
        if !self.config.ack_nodelay && self.ack_deadline.is_none() {
            self.ack_deadline = Some(now + self.config.interval);
        }
    }

    /// Fast retransmit: every unacked segment below the highest sn acked in this
    /// datagram was skipped once more (`ikcp_parse_fastack`). Only acks of segments
    /// sent no earlier than a segment's own last transmission count against it (the
    /// reference's `IKCP_FASTACK_CONSERVE`), so one loss is not retransmitted again
    /// for acks that were already on their way.
    fn on_fast_ack(&mut self, max_ack: u32, latest_sent: Instant, now: Instant) {
        let threshold = self.config.fast_resend;
        for index in 0..self.snd.buf.len() {
            let sn = self.snd.snd_una.wrapping_add(index as u32);
            if (max_ack.wrapping_sub(sn) as i32) <= 0 {
                break;
            }
            let seg = &mut self.snd.buf[index];
            if seg.acked || seg.due || seg.last_sent.is_none_or(|t| t > latest_sent) {
                continue;
            }
            seg.fastack += 1;
            if threshold == 0 || seg.fastack < threshold || seg.xmit > FAST_RESEND_LIMIT {
                continue;
            }
            seg.fastack = 0;
            let mut event = LossEvent::new(
                now,
                LossKind::FastRetransmit,
                seg.wire_len,
                seg.last_sent.unwrap_or(now),
            );
            event.in_flight = self.snd.in_flight_bytes;
            if let Some(stamp) = seg.stamp {
                self.rate.on_lost(&mut event, &stamp);
            }
            self.snd.mark_lost(index);
            self.stats.retransmissions_fast += 1;
            self.cc.on_loss(&event);
        }
    }

    /// Arms the persist timer while data waits behind a zero remote window, and
    /// disarms it otherwise. The first probe waits one RTO and each further one twice
    /// as long, up to 60 s (RFC 9293 §3.8.6.1; the reference waits 7 s, then ×1.5).
    pub(super) fn update_probe(&mut self, now: Instant) {
        if self.rmt_wnd == 0 && !self.snd.queue.is_empty() {
            if self.probe_at.is_none() {
                self.probe_wait = self.rtt.rto();
                self.probe_at = Some(now + self.probe_wait);
            }
        } else {
            self.probe_at = None;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Sequence numbers wrap around u32 like the reference's `_itimediff` arithmetic.
    #[test]
    fn sequence_numbers_wrap() {
        let t0 = Instant::now();
        let config = KcpConfig::default();
        let mut a = Kcp::new(5, config, t0).unwrap();
        let mut b = Kcp::new(5, config, t0).unwrap();
        let start = u32::MAX - 20;
        a.snd.snd_una = start;
        a.snd.snd_nxt = start;
        b.rcv.set_rcv_nxt(start);
        let mut out = Vec::new();
        let mut now = t0;
        let messages: Vec<Vec<u8>> = (0..30u8).map(|i| vec![i; 2000]).collect();
        for m in &messages {
            a.send(m).unwrap();
        }
        let mut received = Vec::new();
        while a.pending_segments() > 0 && now < t0 + Duration::from_secs(5) {
            now += Duration::from_millis(1);
            // Drop every 7th datagram so retransmissions cross the wrap too.
            let mut n = 0;
            while a.poll_transmit(now, &mut out) {
                n += 1;
                if n % 7 != 0 {
                    b.input(now, &out).unwrap();
                }
            }
            while let Some(m) = b.recv() {
                received.push(m.to_vec());
            }
            while b.poll_transmit(now, &mut out) {
                a.input(now, &out).unwrap();
            }
            if let Some(t) = a.poll_timeout() {
                if t <= now {
                    a.handle_timeout(now);
                }
            }
        }
        assert_eq!(
            received.len(),
            messages.len(),
            "{:?} {:?}",
            a.stats(),
            b.stats()
        );
        assert!(received == messages);
        assert_eq!(a.pending_segments(), 0);
        assert!(a.snd.snd_una < 100, "wrapped past zero");
    }

    /// `send_bytes` shares a multi-segment message's buffer (its queued segments are
    /// slices of it) and copies a one-segment message; both arrive as sent.
    #[test]
    fn send_bytes_shares_long_messages_and_copies_short_ones() {
        let t0 = Instant::now();
        let mut a = Kcp::new(9, KcpConfig::default(), t0).unwrap();
        let mut b = Kcp::new(9, KcpConfig::default(), t0).unwrap();
        let long = Bytes::from((0..5000u32).map(|i| (i % 251) as u8).collect::<Vec<u8>>());
        let short = Bytes::from(vec![7u8; 40]);
        a.send_bytes(long.clone()).unwrap();
        a.send_bytes(short.clone()).unwrap();
        let inside = |p: &Bytes, m: &Bytes| {
            let range = m.as_ptr() as usize..m.as_ptr() as usize + m.len();
            range.contains(&(p.as_ptr() as usize))
        };
        let segments: Vec<&Bytes> = a.snd.queue.iter().map(|q| &q.payload).collect();
        assert_eq!(segments.len(), long.len().div_ceil(a.mss) + 1);
        let (last, long_segments) = segments.split_last().unwrap();
        assert!(long_segments.iter().all(|p| inside(p, &long)));
        assert!(!inside(last, &short), "a one-segment message is copied");
        let mut out = Vec::new();
        while a.poll_transmit(t0, &mut out) {
            b.input(t0, &out).unwrap();
        }
        assert_eq!(b.recv(), Some(long));
        assert_eq!(b.recv(), Some(short));
    }

    /// Stream mode, any write sizes, through `send` and `send_bytes`: every queued
    /// segment but the newest is full and has `frg` 0; a stream-mode receiver gets the
    /// bytes back in pieces of whole segments, and a message-mode receiver (the
    /// reference's view of a stream-mode peer) one message per segment. The
    /// application's buffers are never written to.
    mod stream_mode {
        use super::*;
        use proptest::prelude::*;

        fn stream_config() -> KcpConfig {
            KcpConfig {
                stream: true,
                snd_wnd: 1024,
                rcv_wnd: 1024,
                send_queue_limit: 1 << 16,
                notsent_lowat: 1 << 20,
                ..KcpConfig::default()
            }
        }

        proptest! {
            #[test]
            fn writes_fill_segments_and_the_bytes_arrive_in_order(
                writes in proptest::collection::vec((0usize..4000, any::<bool>()), 1..40),
                receiver_streams in any::<bool>(),
            ) {
                let t0 = Instant::now();
                let mut a = Kcp::new(3, stream_config(), t0).unwrap();
                let mut b = Kcp::new(3, KcpConfig { stream: receiver_streams, ..stream_config() }, t0).unwrap();
                let mut sent = Vec::new();
                let mut held = Vec::new();
                for (i, &(len, shared)) in writes.iter().enumerate() {
                    let msg: Vec<u8> = (0..len).map(|j| (i * 7 + j) as u8).collect();
                    sent.extend_from_slice(&msg);
                    if shared {
                        let msg = Bytes::from(msg);
                        held.push((msg.clone(), msg.to_vec()));
                        a.send_bytes(msg).unwrap();
                    } else {
                        a.send(&msg).unwrap();
                    }
                }
                let queued: Vec<&crate::kcp::send_buf::Queued> = a.snd.queue.iter().collect();
                if let Some((_, full)) = queued.split_last() {
                    prop_assert!(full.iter().all(|q| q.payload.len() == a.mss && q.frg == 0));
                }
                prop_assert!(queued.iter().all(|q| q.frg == 0));
                prop_assert_eq!(queued.len(), sent.len().div_ceil(a.mss));
                let mut out = Vec::new();
                let mut got = Vec::new();
                let mut pieces = 0;
                let mut now = t0;
                for _ in 0..10_000 {
                    while a.poll_transmit(now, &mut out) {
                        b.input(now, &out).unwrap();
                    }
                    while b.poll_transmit(now, &mut out) {
                        a.input(now, &out).unwrap();
                    }
                    while let Some(piece) = b.recv() {
                        if !receiver_streams {
                            prop_assert!(piece.len() <= a.mss, "one message per segment");
                        }
                        pieces += 1;
                        got.extend_from_slice(&piece);
                    }
                    if a.pending_segments() == 0 && got.len() == sent.len() {
                        break;
                    }
                    now += Duration::from_millis(10);
                }
                prop_assert_eq!(&got, &sent);
                if !receiver_streams {
                    prop_assert_eq!(pieces, sent.len().div_ceil(a.mss));
                }
                for (msg, copy) in held {
                    prop_assert_eq!(&msg[..], &copy[..], "an application buffer changed");
                }
            }
        }

        /// Whole segments in order come out as one piece per receive chunk, however
        /// many writes made them.
        #[test]
        fn in_order_segments_come_out_as_one_piece() {
            let t0 = Instant::now();
            let mut a = Kcp::new(3, stream_config(), t0).unwrap();
            let mut b = Kcp::new(3, stream_config(), t0).unwrap();
            for i in 0..30u8 {
                a.send(&[i; 1000]).unwrap();
            }
            let mut out = Vec::new();
            while a.poll_transmit(t0, &mut out) {
                b.input(t0, &out).unwrap();
            }
            let piece = b.recv().unwrap();
            assert_eq!(piece.len(), 30_000);
            assert!(b.recv().is_none());
        }

        /// An empty write queues nothing in stream mode (there is no message to mark).
        #[test]
        fn an_empty_write_queues_nothing() {
            let t0 = Instant::now();
            let mut a = Kcp::new(3, stream_config(), t0).unwrap();
            a.send(&[]).unwrap();
            a.send_bytes(Bytes::new()).unwrap();
            assert_eq!(a.pending_segments(), 0);
            a.send(&[1; 10]).unwrap();
            a.send(&[]).unwrap();
            assert_eq!(a.pending_segments(), 1);
        }
    }

    /// The cached retransmission floor is never later than the earliest timer in the
    /// window (a late one would delay a retransmission), and a timeout scan makes
    /// it exact. Lossy exchange, every 5th datagram dropped each way.
    #[test]
    fn the_resend_floor_is_never_late_and_a_scan_makes_it_exact() {
        let t0 = Instant::now();
        let mut a = Kcp::new(3, KcpConfig::default(), t0).unwrap();
        let mut b = Kcp::new(3, KcpConfig::default(), t0).unwrap();
        let exact = |k: &Kcp| k.snd.buf.iter().filter_map(|s| s.resend_at).min();
        for i in 0..40u8 {
            a.send(&vec![i; 3000]).unwrap();
        }
        let (mut out, mut n, mut now) = (Vec::new(), 0u32, t0);
        let mut scans = 0;
        while a.pending_segments() > 0 && now < t0 + Duration::from_secs(20) {
            now += Duration::from_millis(5);
            while a.poll_transmit(now, &mut out) {
                n += 1;
                if n % 5 != 0 {
                    b.input(now, &out).unwrap();
                }
            }
            while b.recv().is_some() {}
            while b.poll_transmit(now, &mut out) {
                n += 1;
                if n % 5 != 0 {
                    a.input(now, &out).unwrap();
                }
            }
            if let Some(earliest) = exact(&a) {
                assert!(a.snd.earliest_resend().is_some_and(|f| f <= earliest));
            }
            if a.poll_timeout().is_some_and(|t| t <= now) {
                a.handle_timeout(now);
                scans += 1;
                assert_eq!(a.snd.earliest_resend(), exact(&a));
            }
        }
        assert_eq!(a.pending_segments(), 0, "{:?}", a.stats());
        assert!(
            scans > 0 && a.stats().retransmissions_timeout > 0,
            "{:?}",
            a.stats()
        );
        assert_eq!(a.poll_timeout(), None, "idle once everything is acked");
    }
}
