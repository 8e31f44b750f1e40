//! The receive side: out-of-order buffer, in-order queue and message reassembly
//! (reference `rcv_buf` / `rcv_queue`, `ikcp_parse_data`, `ikcp_recv`).

use std::collections::VecDeque;

use bytes::{Bytes, BytesMut};

/// In-order payload bytes are copied into chunks of this size, so a received segment
/// costs no allocation of its own once earlier chunks have been released by the
/// application. Out-of-order segments get their own allocation instead: held in the
/// buffer for long, each would pin a whole chunk (a peer choosing the order could make
/// 64 KiB of memory out of every 1 KiB segment).
const ARENA_CHUNK: usize = 64 * 1024;

#[derive(Debug)]
struct RecvSeg {
    frg: u8,
    payload: Bytes,
}

/// What happened to a received data segment.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Insert {
    /// Stored (it may also have advanced `rcv_nxt`).
    Accepted,
    /// Already received (below `rcv_nxt` or already buffered).
    Duplicate,
    /// Outside `[rcv_nxt, rcv_nxt + rcv_wnd)`: dropped, not acknowledged.
    OutsideWindow,
    /// Part of a message with more fragments than `rcv_wnd`, which could never be
    /// delivered: dropped, not acknowledged (the sender ends on its dead-link limit).
    Undeliverable,
}

/// Receive buffers bounded by `rcv_wnd` segments each.
#[derive(Debug)]
pub(crate) struct RecvBuffer {
    rcv_wnd: usize,
    rcv_nxt: u32,
    /// Slot `i` holds segment `rcv_nxt + i`, if received.
    buf: VecDeque<Option<RecvSeg>>,
    /// In-order segments the application has not read yet.
    queue: VecDeque<RecvSeg>,
    arena: BytesMut,
}

impl RecvBuffer {
    pub(crate) fn new(rcv_wnd: u16) -> Self {
        let rcv_wnd = usize::from(rcv_wnd);
        Self {
            rcv_wnd,
            rcv_nxt: 0,
            buf: VecDeque::new(),
            queue: VecDeque::new(),
            arena: BytesMut::new(),
        }
    }

    /// Next sn expected in order; every sn below it has been received (`una` we send).
    pub(crate) fn rcv_nxt(&self) -> u32 {
        self.rcv_nxt
    }

    #[cfg(test)]
    pub(crate) fn set_rcv_nxt(&mut self, sn: u32) {
        self.rcv_nxt = sn;
    }

    /// Whether `sn` lies below `rcv_nxt + rcv_wnd` (the reference acks all of those,
    /// old duplicates included).
    pub(crate) fn acceptable(&self, sn: u32) -> bool {
        (sn.wrapping_sub(self.rcv_nxt) as i32) < self.rcv_wnd as i32
    }

    /// Free receive window we advertise, segments (`ikcp_wnd_unused`).
    pub(crate) fn free_window(&self) -> u16 {
        u16::try_from(self.rcv_wnd.saturating_sub(self.queue.len())).unwrap_or(u16::MAX)
    }

    fn copy(&mut self, payload: &[u8]) -> Bytes {
        if self.arena.capacity() < payload.len() {
            self.arena.reserve(payload.len().max(ARENA_CHUNK));
        }
        self.arena.extend_from_slice(payload);
        self.arena.split().freeze()
    }

    pub(crate) fn insert(&mut self, sn: u32, frg: u8, payload: &[u8]) -> Insert {
        let offset = sn.wrapping_sub(self.rcv_nxt) as i32;
        if offset < 0 {
            return Insert::Duplicate;
        }
        let offset = offset as usize;
        if offset >= self.rcv_wnd {
            return Insert::OutsideWindow;
        }
        if usize::from(frg) >= self.rcv_wnd {
            return Insert::Undeliverable;
        }
        if self.buf.get(offset).is_some_and(Option::is_some) {
            return Insert::Duplicate;
        }
        if self.buf.len() <= offset {
            self.buf.resize_with(offset + 1, || None);
        }
        let payload = if offset == 0 {
            self.copy(payload)
        } else {
            Bytes::copy_from_slice(payload)
        };
        self.buf[offset] = Some(RecvSeg { frg, payload });
        self.advance();
        Insert::Accepted
    }

    /// Moves in-order segments from the buffer to the queue while the queue has room.
    fn advance(&mut self) {
        while self.queue.len() < self.rcv_wnd {
            match self.buf.front() {
                Some(Some(_)) => {}
                _ => break,
            }
            if let Some(Some(seg)) = self.buf.pop_front() {
                self.queue.push_back(seg);
                self.rcv_nxt = self.rcv_nxt.wrapping_add(1);
            }
        }
    }

    /// Whether a complete message is waiting.
    pub(crate) fn has_message(&self) -> bool {
        self.queue
            .front()
            .is_some_and(|head| self.queue.len() > usize::from(head.frg))
    }

    /// Pops the next complete message. The first fragment's `frg + 1` is the fragment
    /// count (a peer sending inconsistent `frg` values gets garbled boundaries, nothing
    /// worse). Returns the message and whether the queue had been full before, in which
    /// case the peer is waiting for a window update (WINS).
    pub(crate) fn pop_message(&mut self) -> Option<(Bytes, bool)> {
        if !self.has_message() {
            return None;
        }
        let was_full = self.queue.len() >= self.rcv_wnd;
        let count = usize::from(self.queue.front()?.frg) + 1;
        let message = if count == 1 {
            self.queue.pop_front()?.payload
        } else {
            let total: usize = self.queue.iter().take(count).map(|s| s.payload.len()).sum();
            if self.arena.capacity() < total {
                self.arena.reserve(total.max(ARENA_CHUNK));
            }
            for seg in self.queue.drain(..count) {
                self.arena.extend_from_slice(&seg.payload);
            }
            self.arena.split().freeze()
        };
        self.advance();
        Some((message, was_full))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reorders_and_reassembles() {
        let mut r = RecvBuffer::new(8);
        assert_eq!(r.insert(1, 1, b"b"), Insert::Accepted);
        assert_eq!(r.insert(2, 0, b"c"), Insert::Accepted);
        assert!(r.pop_message().is_none());
        assert_eq!(r.insert(0, 2, b"a"), Insert::Accepted);
        assert_eq!(r.insert(0, 2, b"a"), Insert::Duplicate);
        assert_eq!(r.rcv_nxt(), 3);
        assert_eq!(r.pop_message().unwrap().0, Bytes::from_static(b"abc"));
        assert!(r.pop_message().is_none());
    }

    #[test]
    fn window_bounds_buffers() {
        let mut r = RecvBuffer::new(2);
        assert_eq!(r.insert(2, 0, b"x"), Insert::OutsideWindow);
        assert_eq!(r.insert(0, 0, b"x"), Insert::Accepted);
        assert_eq!(r.insert(1, 0, b"y"), Insert::Accepted);
        assert_eq!(r.free_window(), 0);
        // Queue full: sn 2 is now within [rcv_nxt, rcv_nxt + 2) and waits in the buffer.
        assert_eq!(r.insert(2, 0, b"z"), Insert::Accepted);
        assert_eq!(r.insert(4, 0, b"z"), Insert::OutsideWindow);
        let (m, was_full) = r.pop_message().unwrap();
        assert_eq!((&m[..], was_full), (&b"x"[..], true));
        assert_eq!(r.free_window(), 0);
        assert_eq!(r.insert(3, 2, b"w"), Insert::Undeliverable);
    }
}
