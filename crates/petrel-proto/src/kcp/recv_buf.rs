//! The receive side: out-of-order buffer, in-order queue and message reassembly
//! (reference `rcv_buf` / `rcv_queue`, `ikcp_parse_data`, `ikcp_recv`).

use std::collections::VecDeque;

use bytes::{Bytes, BytesMut};

/// Queued payload bytes live in chunks of this size, so an in-order segment costs
/// no allocation of its own. Out-of-order segments get their own allocation until they are in
/// order: held in the buffer for long, each would pin a whole chunk (a peer choosing
/// the order could make 64 KiB of memory out of every 1 KiB segment).
const ARENA_CHUNK: usize = 64 * 1024;

/// A segment received ahead of `rcv_nxt`, waiting for the gap before it.
#[derive(Debug)]
struct RecvSeg {
    frg: u8,
    payload: Bytes,
}

/// An in-order segment the application has not read yet; its bytes are in
/// [`RecvBuffer::chunks`], after those of the segments queued before it.
#[derive(Debug, Clone, Copy)]
struct Queued {
    frg: u8,
    len: usize,
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
///
/// A segment's payload is copied once, from the datagram into the last of
/// `chunks`, when it comes in order; the queued segments' bytes lie there back to
/// back, so a message within one chunk is split off its front without being copied
/// again. A message that spans chunks is copied once more, into a buffer of its own
/// size (so its bytes move O(1) times, however long it is); a segment that arrived
/// early is also copied twice: into its own buffer, then into a chunk once the gap
/// before it closes.
///
/// Memory: the chunks hold the queued bytes plus less than one chunk (the unused
/// tail of the last, and under one segment's payload at the end of each other), so
/// the queue side stays near `rcv_wnd × max_segment_payload` and an idle connection
/// keeps at most one chunk.
#[derive(Debug)]
pub(crate) struct RecvBuffer {
    rcv_wnd: usize,
    rcv_nxt: u32,
    /// Slot `i` holds segment `rcv_nxt + i`, if received.
    buf: VecDeque<Option<RecvSeg>>,
    /// In-order segments the application has not read yet.
    queue: VecDeque<Queued>,
    /// The payload bytes of `queue`, in order; new bytes go to the last chunk.
    chunks: VecDeque<BytesMut>,
}

impl RecvBuffer {
    pub(crate) fn new(rcv_wnd: u16) -> Self {
        let rcv_wnd = usize::from(rcv_wnd);
        Self {
            rcv_wnd,
            rcv_nxt: 0,
            buf: VecDeque::new(),
            queue: VecDeque::new(),
            chunks: VecDeque::new(),
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

    /// Appends segment `rcv_nxt` to the queue and its bytes to the last chunk.
    fn enqueue(&mut self, frg: u8, payload: &[u8]) {
        match self.chunks.back_mut() {
            Some(last) if last.capacity() - last.len() >= payload.len() => {
                last.extend_from_slice(payload);
            }
            _ => {
                if self.chunks.back().is_some_and(BytesMut::is_empty) {
                    // Read to its end (an empty last chunk is the only one): replace
                    // it, so that the next run starts at the front chunk.
                    self.chunks.pop_back();
                }
                let mut chunk = BytesMut::with_capacity(ARENA_CHUNK.max(payload.len()));
                chunk.extend_from_slice(payload);
                self.chunks.push_back(chunk);
            }
        }
        self.queue.push_back(Queued {
            frg,
            len: payload.len(),
        });
        self.rcv_nxt = self.rcv_nxt.wrapping_add(1);
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
        if offset == 0 && self.queue.len() < self.rcv_wnd {
            // In order with room in the queue: straight into the last chunk.
            self.buf.pop_front();
            self.enqueue(frg, payload);
        } else {
            if self.buf.len() <= offset {
                self.buf.resize_with(offset + 1, || None);
            }
            let payload = Bytes::copy_from_slice(payload);
            self.buf[offset] = Some(RecvSeg { frg, payload });
        }
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
                self.enqueue(seg.frg, &seg.payload);
            }
        }
    }

    /// The queue index just past the message whose first fragment is at `start`, if
    /// all its fragments are queued. The first fragment's `frg + 1` is the fragment
    /// count (a peer sending inconsistent `frg` values gets garbled boundaries,
    /// nothing worse).
    fn message_end(&self, start: usize) -> Option<usize> {
        let end = start + usize::from(self.queue.get(start)?.frg) + 1;
        (end <= self.queue.len()).then_some(end)
    }

    /// Whether a complete message is waiting.
    pub(crate) fn has_message(&self) -> bool {
        self.message_end(0).is_some()
    }

    /// Pops the next complete message. Returns the message and whether the queue had
    /// been full before, in which case the peer is waiting for a window update (WINS).
    pub(crate) fn pop_message(&mut self) -> Option<(Bytes, bool)> {
        let end = self.message_end(0)?;
        let was_full = self.queue.len() >= self.rcv_wnd;
        let total: usize = self.queue.drain(..end).map(|s| s.len).sum();
        let message = self.take_bytes(total);
        self.advance();
        Some((message, was_full))
    }

    /// Stream mode: pops the next complete message and, behind it, every complete
    /// message whose bytes are in the same (first) chunk, as one piece. The piece is
    /// a slice of that chunk (no copy) unless the first message alone spans chunks.
    /// Empty messages (a message-mode peer's empty sends) carry no stream bytes and
    /// are skipped, so a piece is never empty. Returns the piece, if any, and whether
    /// the queue had been full and this call freed room in it (the peer is then
    /// waiting for a window update, as with [`Self::pop_message`]).
    pub(crate) fn pop_run(&mut self) -> (Option<Bytes>, bool) {
        let was_full = self.queue.len() >= self.rcv_wnd;
        let mut freed = false;
        while let Some(end) = self.message_end(0) {
            if self.queue.range(..end).any(|s| s.len > 0) {
                break;
            }
            self.queue.drain(..end);
            self.advance();
            freed = true;
        }
        if !self.has_message() {
            return (None, was_full && freed);
        }
        let in_first = self.chunks.front().map_or(0, BytesMut::len);
        let (mut segments, mut total) = (0, 0);
        while let Some(end) = self.message_end(segments) {
            let len: usize = self.queue.range(segments..end).map(|s| s.len).sum();
            if segments > 0 && total + len > in_first {
                break;
            }
            segments = end;
            total += len;
        }
        self.queue.drain(..segments);
        let piece = self.take_bytes(total);
        self.advance();
        (Some(piece), was_full)
    }

    /// Removes the first `total` queued bytes: a slice of the first chunk if it holds
    /// them all, else a copy gathered from the chunks they span. Drained chunks are
    /// dropped, but for the last, whose unused tail takes the next segments.
    fn take_bytes(&mut self, total: usize) -> Bytes {
        let within_first = self.chunks.front().is_some_and(|c| c.len() >= total);
        let message = if within_first {
            self.chunks
                .front_mut()
                .map_or_else(Bytes::new, |c| c.split_to(total).freeze())
        } else {
            let mut gathered = BytesMut::with_capacity(total);
            while gathered.len() < total {
                let Some(chunk) = self.chunks.front_mut() else {
                    break;
                };
                let take = chunk.len().min(total - gathered.len());
                gathered.extend_from_slice(&chunk.split_to(take));
                if chunk.is_empty() && self.chunks.len() > 1 {
                    self.chunks.pop_front();
                }
            }
            gathered.freeze()
        };
        while self.chunks.len() > 1 && self.chunks.front().is_some_and(BytesMut::is_empty) {
            self.chunks.pop_front();
        }
        message
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    /// Splits `lens.len()` segments into messages of at most `max_frags` fragments:
    /// `frg` counts down to 0 within each message, as a sender numbers them.
    fn frg_values(count: usize, max_frags: usize, cuts: &[usize]) -> Vec<u8> {
        let mut out = Vec::with_capacity(count);
        let mut cut = cuts.iter().cycle();
        while out.len() < count {
            let n = (1 + cut.next().copied().unwrap_or(0) % max_frags).min(count - out.len());
            out.extend((0..n).rev().map(|f| f as u8));
        }
        out
    }

    proptest! {
        /// Any arrival order, with duplicates, delivers every message intact and in
        /// order; the chunks hold exactly the queued bytes, as few chunks as those
        /// bytes need, and after the queue drains no more than one chunk.
        #[test]
        fn any_arrival_order_reassembles_and_the_chunks_stay_bounded(
            rcv_wnd in 1u16..64,
            lens in prop::collection::vec(0usize..3000, 1..200),
            cuts in prop::collection::vec(0usize..64, 1..16),
            order in prop::collection::vec(any::<u16>(), 1..400),
        ) {
            let frgs = frg_values(lens.len(), usize::from(rcv_wnd), &cuts);
            let payload = |sn: usize| vec![(sn % 251) as u8; lens[sn]];
            let mut r = RecvBuffer::new(rcv_wnd);
            let mut delivered: Vec<u8> = Vec::new();
            let mut steps = order.iter().cycle();
            // Each step offers a segment near rcv_nxt (inside or just past the
            // window, or an old duplicate) and sometimes reads a message.
            for _ in 0..20_000 {
                if r.rcv_nxt() as usize == lens.len() && !r.has_message() {
                    break;
                }
                let step = *steps.next().unwrap();
                let span = usize::from(rcv_wnd) + 2;
                let sn = (r.rcv_nxt() as usize + usize::from(step) % span).saturating_sub(1);
                if sn < lens.len() {
                    r.insert(sn as u32, frgs[sn], &payload(sn));
                }
                let queued: usize = r.queue.iter().map(|q| q.len).sum();
                prop_assert_eq!(r.chunks.iter().map(BytesMut::len).sum::<usize>(), queued);
                // Every chunk but the first and the last is more than full but for
                // one payload (< 3000 bytes).
                prop_assert!(
                    r.chunks.len() <= 2 + queued / (ARENA_CHUNK - 3000),
                    "{} chunks for {queued} bytes", r.chunks.len()
                );
                if step % 3 == 0 {
                    if let Some((m, _)) = r.pop_message() {
                        delivered.extend_from_slice(&m);
                    }
                }
            }
            // Then the rest in order (a full queue always holds a whole message).
            while (r.rcv_nxt() as usize) < lens.len() {
                if r.free_window() == 0 {
                    // Reading may move buffered segments in: look at rcv_nxt again.
                    delivered.extend_from_slice(&r.pop_message().unwrap().0);
                    continue;
                }
                let sn = r.rcv_nxt() as usize;
                prop_assert_eq!(r.insert(sn as u32, frgs[sn], &payload(sn)), Insert::Accepted);
            }
            while let Some((m, _)) = r.pop_message() {
                delivered.extend_from_slice(&m);
            }
            prop_assert!(r.queue.is_empty());
            let expected: Vec<u8> = (0..lens.len()).flat_map(payload).collect();
            prop_assert_eq!(delivered, expected);
            prop_assert!(r.chunks.len() <= 1, "{} chunks kept when drained", r.chunks.len());
        }
    }

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

    /// Stream mode: empty messages are skipped (a piece is never empty), and room
    /// freed from a full queue that way is reported.
    #[test]
    fn a_run_skips_empty_messages() {
        let mut r = RecvBuffer::new(3);
        for sn in 0..3 {
            assert_eq!(r.insert(sn, 0, &[]), Insert::Accepted);
        }
        assert_eq!(r.pop_run(), (None, true));
        assert_eq!(r.insert(3, 0, &[]), Insert::Accepted);
        assert_eq!(r.insert(4, 0, b"ab"), Insert::Accepted);
        assert_eq!(r.insert(5, 0, &[]), Insert::Accepted);
        // The queue was full again (3 of 3).
        assert_eq!(r.pop_run(), (Some(Bytes::from_static(b"ab")), true));
        assert_eq!(r.pop_run(), (None, false));
    }

    /// Stream mode: once the reader has drained a chunk whose spare room is too small
    /// for the next segment, the next run still comes out whole, without a copy
    /// (attack finding: the drained chunk stayed in front, so runs came out one
    /// segment at a time, gathered).
    #[test]
    fn a_run_after_a_drained_chunk_is_whole() {
        let mut r = RecvBuffer::new(128);
        let mut sn = 0;
        for _ in 0..65 {
            assert_eq!(r.insert(sn, 0, &[1; 1000]), Insert::Accepted);
            sn += 1;
            assert_eq!(r.pop_run().0.map(|p| p.len()), Some(1000));
        }
        for _ in 0..10 {
            assert_eq!(r.insert(sn, 0, &[2; 1000]), Insert::Accepted);
            sn += 1;
        }
        assert_eq!(r.chunks.len(), 1);
        let first = r.pop_run().0.map(|p| p.len());
        assert_eq!((first, r.pop_run().0), (Some(10_000), None));
    }

    #[test]
    fn in_order_messages_are_slices_of_one_chunk() {
        let mut r = RecvBuffer::new(64);
        for (sn, frg) in [(0, 2), (1, 1), (2, 0), (3, 1), (4, 0)] {
            assert_eq!(r.insert(sn, frg, &[sn as u8; 1000]), Insert::Accepted);
        }
        let (a, _) = r.pop_message().unwrap();
        let (b, _) = r.pop_message().unwrap();
        assert_eq!((a.len(), b.len()), (3000, 2000));
        assert_eq!(a.as_ptr() as usize + a.len(), b.as_ptr() as usize);
        assert!(a[..1000].iter().all(|&x| x == 0) && a[2000..].iter().all(|&x| x == 2));
    }

    #[test]
    fn messages_across_chunks_and_gaps_reassemble() {
        // 3 messages of 90 segments × 1000 B (each over one chunk), arriving with
        // every 7th segment late.
        let mut r = RecvBuffer::new(512);
        let segs: Vec<(u32, u8)> = (0..270u32).map(|sn| (sn, 89 - (sn % 90) as u8)).collect();
        let (late, early): (Vec<_>, Vec<_>) = segs.iter().partition(|(sn, _)| sn % 7 == 3);
        for (sn, frg) in early.iter().chain(&late) {
            let byte = (sn % 251) as u8;
            assert_eq!(r.insert(*sn, *frg, &[byte; 1000]), Insert::Accepted);
        }
        for m in 0..3u32 {
            let (msg, _) = r.pop_message().unwrap();
            assert_eq!(msg.len(), 90_000);
            for (i, seg) in msg.chunks(1000).enumerate() {
                let sn = m * 90 + i as u32;
                assert!(seg.iter().all(|&x| x == (sn % 251) as u8), "sn {sn}");
            }
        }
        assert!(r.pop_message().is_none());
        assert_eq!(r.rcv_nxt(), 270);
    }
}
