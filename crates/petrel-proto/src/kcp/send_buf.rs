//! The send side's storage: the send queue (messages split into segments, no sn yet)
//! and the send buffer (segments with an sn, sent or about to be, not yet acked),
//! as the reference's `snd_queue` / `snd_buf`.

use std::collections::VecDeque;
use std::time::{Duration, Instant};

use bytes::{Bytes, BytesMut};

use crate::cc::SendStamp;

use super::segment::HEADER_LEN;

/// Message bytes are copied into chunks of this size (see `recv_buf`).
const ARENA_CHUNK: usize = 64 * 1024;

/// A fragment waiting for room in the send window.
#[derive(Debug)]
pub(crate) struct Queued {
    pub(crate) frg: u8,
    pub(crate) payload: Bytes,
}

/// A segment in the send window.
#[derive(Debug)]
pub(crate) struct InFlight {
    pub(crate) frg: u8,
    /// Emptied once acked, to release the memory early.
    pub(crate) payload: Bytes,
    /// Wire length (header included), bytes; kept after the payload is released.
    pub(crate) wire_len: u64,
    /// `ts` of the last transmission, ms (what the peer's ACK echoes).
    pub(crate) ts: u32,
    pub(crate) last_sent: Option<Instant>,
    /// Delivery-rate stamp of the last transmission.
    pub(crate) stamp: Option<SendStamp>,
    /// Retransmission deadline; `None` while unsent or queued for (re)transmission.
    pub(crate) resend_at: Option<Instant>,
    pub(crate) rto: Duration,
    /// Acks of later segments seen since the last transmission.
    pub(crate) fastack: u32,
    /// Transmissions so far.
    pub(crate) xmit: u32,
    pub(crate) acked: bool,
    /// Waiting in the due list for (re)transmission.
    pub(crate) due: bool,
    /// Declared lost by its retransmission timer and not resent since.
    pub(crate) timed_out: bool,
    /// Whether `wire_len` is part of `in_flight_bytes` (not while declared lost).
    pub(crate) counted: bool,
}

/// Send queue, send buffer and the list of segments due for transmission.
#[derive(Debug)]
pub(crate) struct SendBuffer {
    pub(crate) queue: VecDeque<Queued>,
    /// Payload bytes of the segments in `queue`.
    pub(crate) queued_bytes: usize,
    /// `buf[i]` is segment `snd_una + i`.
    pub(crate) buf: VecDeque<InFlight>,
    pub(crate) snd_una: u32,
    pub(crate) snd_nxt: u32,
    /// sns waiting for (re)transmission, oldest decision first. Entries whose segment
    /// was acked meanwhile are skipped when popped.
    pub(crate) due: VecDeque<u32>,
    /// Wire bytes of segments in `buf` sent and neither acked nor declared lost (a lost
    /// segment counts again once retransmitted).
    pub(crate) in_flight_bytes: u64,
    /// No segment's `resend_at` is earlier: lowered whenever a timer is set, made
    /// exact again by each timeout scan (`Kcp::handle_timeout`). A floor that is too
    /// early costs one timer wake-up that finds nothing due; it saves a scan of the
    /// whole window on every `poll_timeout`.
    resend_floor: Option<Instant>,
    arena: BytesMut,
}

impl SendBuffer {
    pub(crate) fn new() -> Self {
        Self {
            queue: VecDeque::new(),
            queued_bytes: 0,
            buf: VecDeque::new(),
            snd_una: 0,
            snd_nxt: 0,
            due: VecDeque::new(),
            in_flight_bytes: 0,
            resend_floor: None,
            arena: BytesMut::new(),
        }
    }

    /// Splits `msg` into `count` fragments of at most `mss` bytes and queues them:
    /// `frg` counts down to 0 (message mode), or is 0 for each (`stream`). The caller
    /// has checked `count` against the limits.
    pub(crate) fn push_message(&mut self, msg: &[u8], mss: usize, count: usize, stream: bool) {
        if self.arena.capacity() < msg.len() {
            self.arena.reserve(msg.len().max(ARENA_CHUNK));
        }
        self.arena.extend_from_slice(msg);
        let data = self.arena.split().freeze();
        self.push_shared(data, mss, count, stream);
    }

    /// [`SendBuffer::push_message`] without the copy: the fragments are slices of
    /// `data` (which stays allocated until its last fragment is acked).
    pub(crate) fn push_shared(&mut self, mut data: Bytes, mss: usize, count: usize, stream: bool) {
        for i in (0..count).rev() {
            let take = data.len().min(mss);
            let payload = data.split_to(take);
            let frg = if stream {
                0
            } else {
                u8::try_from(i).unwrap_or(u8::MAX)
            };
            self.queued_bytes += payload.len();
            self.queue.push_back(Queued { frg, payload });
        }
    }

    /// Bytes the last queued segment can still take before it holds `mss` (stream
    /// mode fills it before queuing another); 0 with an empty queue.
    pub(crate) fn tail_room(&self, mss: usize) -> usize {
        self.queue
            .back()
            .map_or(0, |q| mss.saturating_sub(q.payload.len()))
    }

    /// Stream mode: appends the front of `data` to the last queued segment, up to
    /// `mss` bytes in it; returns how many bytes it took. The segment is not in the
    /// window yet, so nothing sent changes. Its bytes are copied once into a buffer
    /// of its own (unless it already has one), then appended in place.
    pub(crate) fn fill_tail(&mut self, data: &[u8], mss: usize) -> usize {
        let Some(last) = self.queue.back_mut() else {
            return 0;
        };
        let take = mss.saturating_sub(last.payload.len()).min(data.len());
        if take == 0 {
            return 0;
        }
        let mut tail = match std::mem::take(&mut last.payload).try_into_mut() {
            Ok(own) => own,
            Err(shared) => {
                // A slice of an arena or of the application's buffer: copy it out
                // rather than write next to bytes other segments hold.
                let mut own = BytesMut::with_capacity(mss);
                own.extend_from_slice(&shared);
                own
            }
        };
        tail.extend_from_slice(&data[..take]);
        last.payload = tail.freeze();
        self.queued_bytes += take;
        take
    }

    /// Wire length of the next queued segment, if one may enter the window now:
    /// fewer than `max_segments` in it and fewer than `cwnd` bytes in flight.
    pub(crate) fn next_new_len(&self, max_segments: usize, cwnd: u64) -> Option<u64> {
        if self.buf.len() >= max_segments || self.in_flight_bytes >= cwnd {
            return None;
        }
        let q = self.queue.front()?;
        Some((HEADER_LEN + q.payload.len()) as u64)
    }

    /// Moves the next queued segment into the window with the next sn, unsent and
    /// not yet in flight; returns its index in `buf`. The caller checked
    /// [`SendBuffer::next_new_len`].
    pub(crate) fn promote_one(&mut self) -> Option<usize> {
        let q = self.queue.pop_front()?;
        self.queued_bytes -= q.payload.len();
        let wire_len = (HEADER_LEN + q.payload.len()) as u64;
        self.buf.push_back(InFlight {
            frg: q.frg,
            payload: q.payload,
            wire_len,
            ts: 0,
            last_sent: None,
            stamp: None,
            resend_at: None,
            rto: Duration::ZERO,
            fastack: 0,
            xmit: 0,
            acked: false,
            due: true,
            timed_out: false,
            counted: false,
        });
        self.snd_nxt = self.snd_nxt.wrapping_add(1);
        Some(self.buf.len() - 1)
    }

    /// Index in `buf` of `sn`, if it is in the window.
    pub(crate) fn index(&self, sn: u32) -> Option<usize> {
        let offset = sn.wrapping_sub(self.snd_una) as i32;
        (offset >= 0 && (offset as usize) < self.buf.len()).then_some(offset as usize)
    }

    /// Marks `buf[index]` acked; returns its wire length, and its last send time and
    /// stamp if it was sent, if it was not acked before.
    pub(crate) fn mark_acked(
        &mut self,
        index: usize,
    ) -> Option<(u64, Option<(Instant, SendStamp)>)> {
        let seg = self.buf.get_mut(index)?;
        if seg.acked {
            return None;
        }
        seg.acked = true;
        seg.payload = Bytes::new();
        seg.resend_at = None;
        if seg.counted {
            seg.counted = false;
            self.in_flight_bytes = self.in_flight_bytes.saturating_sub(seg.wire_len);
        }
        Some((seg.wire_len, seg.last_sent.zip(seg.stamp)))
    }

    /// Drops acked segments from the front of the window, advancing `snd_una`.
    pub(crate) fn shrink(&mut self) {
        while self.buf.front().is_some_and(|s| s.acked) {
            self.buf.pop_front();
            self.snd_una = self.snd_una.wrapping_add(1);
        }
        if self.buf.is_empty() {
            // Stale due entries can only refer to acked segments now.
            self.due.clear();
        }
    }

    /// Declares `buf[index]` lost: out of the bytes in flight, due for retransmission.
    pub(crate) fn mark_lost(&mut self, index: usize) {
        if let Some(seg) = self.buf.get_mut(index) {
            if !seg.acked && !seg.due {
                if seg.counted {
                    seg.counted = false;
                    self.in_flight_bytes = self.in_flight_bytes.saturating_sub(seg.wire_len);
                }
                seg.due = true;
                seg.resend_at = None;
                self.due.push_back(self.snd_una.wrapping_add(index as u32));
            }
        }
    }

    /// Takes `buf[index]` back into flight: declared lost by a timeout that
    /// proved spurious and not resent since, it is no longer due; its timer
    /// restarts at `resend_at`.
    pub(crate) fn unmark_timed_out(&mut self, index: usize, resend_at: Instant) {
        if let Some(seg) = self.buf.get_mut(index) {
            if seg.acked || !seg.due || !seg.timed_out {
                return;
            }
            seg.due = false;
            seg.timed_out = false;
            seg.resend_at = Some(resend_at);
            if !seg.counted {
                seg.counted = true;
                self.in_flight_bytes += seg.wire_len;
            }
            self.lower_resend_floor(resend_at);
        }
    }

    /// Unacked segments in the window.
    pub(crate) fn unacked(&self) -> usize {
        self.buf.iter().filter(|s| !s.acked).count()
    }

    /// A segment's retransmission timer was set to `at`.
    pub(crate) fn lower_resend_floor(&mut self, at: Instant) {
        self.resend_floor = Some(self.resend_floor.map_or(at, |floor| floor.min(at)));
    }

    /// The exact earliest retransmission deadline, from a scan of the window.
    pub(crate) fn set_resend_floor(&mut self, floor: Option<Instant>) {
        self.resend_floor = floor;
    }

    /// Earliest retransmission deadline in the window, or earlier (see
    /// `resend_floor`); `None` when no segment is in the window.
    pub(crate) fn earliest_resend(&self) -> Option<Instant> {
        if self.buf.is_empty() {
            return None;
        }
        self.resend_floor
    }
}
