//! The bounded whole-frame queue: when full, the oldest whole frame is
//! evicted; frames older than the max age are dropped when popped. A frame is
//! never partly queued (draarl-v1 §4.3).
//!
//! Voice and text are queued separately, each with its own bound, and
//! popped together in arrival order: a text flood evicts only older text,
//! never a voice frame (the reference shares one queue, so a burst of
//! texts could push voice out). Nothing else is fanned out: Type 3 replies
//! go straight to their one device.

use std::collections::VecDeque;
use std::time::{Duration, Instant};

use crate::model::{Frame, FrameKind};

/// Result of [`FrameQueue::push`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Push {
    /// Queued with room to spare.
    Queued,
    /// Queued after evicting the oldest frame of the same kind.
    EvictedOldest,
}

/// One kind's frames with their arrival numbers.
#[derive(Debug)]
struct Lane {
    capacity: usize,
    frames: VecDeque<(u64, Frame)>,
}

impl Lane {
    fn new(capacity: usize) -> Self {
        Self {
            capacity: capacity.max(1),
            frames: VecDeque::new(),
        }
    }

    fn push(&mut self, seq: u64, frame: Frame) -> Push {
        let evicted = if self.frames.len() >= self.capacity {
            self.frames.pop_front();
            Push::EvictedOldest
        } else {
            Push::Queued
        };
        self.frames.push_back((seq, frame));
        evicted
    }

    fn head_seq(&self) -> Option<u64> {
        self.frames.front().map(|(seq, _)| *seq)
    }
}

/// Sans-IO frame queue; the engine wraps it in a mutex.
#[derive(Debug)]
pub struct FrameQueue {
    max_age: Duration,
    voice: Lane,
    text: Lane,
    next_seq: u64,
    high_water: usize,
}

impl FrameQueue {
    /// A queue of at most `capacity` voice frames and as many text frames,
    /// dropping frames older than `max_age`.
    pub fn new(capacity: usize, max_age: Duration) -> Self {
        Self {
            max_age,
            voice: Lane::new(capacity),
            text: Lane::new(capacity),
            next_seq: 0,
            high_water: 0,
        }
    }

    /// Bounds the text frames separately to `capacity` (at least 1).
    pub fn with_text_capacity(mut self, capacity: usize) -> Self {
        self.text = Lane::new(capacity);
        self
    }

    /// Appends a frame, evicting the oldest of its kind if that kind is full.
    pub fn push(&mut self, frame: Frame) -> Push {
        let seq = self.next_seq;
        self.next_seq += 1;
        let evicted = match frame.kind {
            FrameKind::Voice => self.voice.push(seq, frame),
            FrameKind::Text => self.text.push(seq, frame),
        };
        self.high_water = self.high_water.max(self.len());
        evicted
    }

    /// Pops the oldest frame (of either kind) that is still young enough at
    /// `now`; returns it with the number of expired frames skipped on the way.
    pub fn pop(&mut self, now: Instant) -> (Option<Frame>, u64) {
        let mut expired = 0;
        loop {
            let lane = match (self.voice.head_seq(), self.text.head_seq()) {
                (None, None) => return (None, expired),
                (Some(v), Some(t)) if t < v => &mut self.text,
                (Some(_), _) => &mut self.voice,
                (None, Some(_)) => &mut self.text,
            };
            let Some((_, f)) = lane.frames.pop_front() else {
                return (None, expired);
            };
            if now.saturating_duration_since(f.created) > self.max_age {
                expired += 1;
                continue;
            }
            return (Some(f), expired);
        }
    }

    /// Frames queued (both kinds).
    pub fn len(&self) -> usize {
        self.voice.frames.len() + self.text.frames.len()
    }

    /// Whether the queue is empty.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Most frames ever queued at once.
    pub fn high_water(&self) -> usize {
        self.high_water
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use super::*;
    use crate::model::Snapshot;

    fn frame(created: Instant, tag: u8) -> Frame {
        kind_frame(FrameKind::Voice, created, tag)
    }

    fn kind_frame(kind: FrameKind, created: Instant, tag: u8) -> Frame {
        Frame {
            kind,
            created,
            packet: Arc::from(vec![tag]),
            session_packet: None,
            snapshot: Arc::new(Snapshot::build(1, [], 1)),
            exclude: "127.0.0.1:1".parse().unwrap(),
            exclude_connection: None,
        }
    }

    #[test]
    fn full_queue_evicts_oldest_whole_frame() {
        let t0 = Instant::now();
        let mut q = FrameQueue::new(3, Duration::from_millis(500));
        for tag in 0..3 {
            assert_eq!(q.push(frame(t0, tag)), Push::Queued);
        }
        assert_eq!(q.push(frame(t0, 3)), Push::EvictedOldest);
        assert_eq!(q.len(), 3);
        let tags: Vec<u8> = std::iter::from_fn(|| q.pop(t0).0)
            .map(|f| f.packet[0])
            .collect();
        assert_eq!(tags, vec![1, 2, 3]);
        assert_eq!(q.high_water(), 3);
    }

    #[test]
    fn stale_frames_are_skipped_and_counted() {
        let t0 = Instant::now();
        let mut q = FrameQueue::new(8, Duration::from_millis(500));
        q.push(frame(t0, 0));
        q.push(frame(t0 + Duration::from_millis(400), 1));
        let (f, expired) = q.pop(t0 + Duration::from_millis(600));
        assert_eq!((f.unwrap().packet[0], expired), (1, 1));
        assert!(q.is_empty());
    }

    #[test]
    fn a_text_flood_never_evicts_voice() {
        let t0 = Instant::now();
        let mut q = FrameQueue::new(4, Duration::from_millis(500)).with_text_capacity(2);
        assert_eq!(q.push(kind_frame(FrameKind::Voice, t0, 0)), Push::Queued);
        assert_eq!(q.push(kind_frame(FrameKind::Text, t0, 100)), Push::Queued);
        assert_eq!(q.push(kind_frame(FrameKind::Voice, t0, 1)), Push::Queued);
        // 1000 texts: each beyond the text bound evicts the oldest text.
        let evicted = (0..1000)
            .map(|i| q.push(kind_frame(FrameKind::Text, t0, 101 + (i % 100) as u8)))
            .filter(|p| *p == Push::EvictedOldest)
            .count();
        assert_eq!(evicted, 999);
        assert_eq!(q.push(kind_frame(FrameKind::Voice, t0, 2)), Push::Queued);
        assert_eq!(q.len(), 5);
        // Popped in arrival order; every voice frame is still there.
        let got: Vec<(FrameKind, u8)> = std::iter::from_fn(|| q.pop(t0).0)
            .map(|f| (f.kind, f.packet[0]))
            .collect();
        assert_eq!(
            got,
            vec![
                (FrameKind::Voice, 0),
                (FrameKind::Voice, 1),
                (FrameKind::Text, 101 + (998 % 100) as u8),
                (FrameKind::Text, 101 + (999 % 100) as u8),
                (FrameKind::Voice, 2),
            ]
        );
    }

    #[test]
    fn voice_still_evicts_its_own_oldest_and_text_survives() {
        let t0 = Instant::now();
        let mut q = FrameQueue::new(2, Duration::from_millis(500)).with_text_capacity(2);
        q.push(kind_frame(FrameKind::Text, t0, 100));
        for tag in 0..3 {
            q.push(kind_frame(FrameKind::Voice, t0, tag));
        }
        let got: Vec<u8> = std::iter::from_fn(|| q.pop(t0).0)
            .map(|f| f.packet[0])
            .collect();
        assert_eq!(got, vec![100, 1, 2]);
    }
}
