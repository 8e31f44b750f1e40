//! The bounded whole-frame queue: when full, the oldest whole frame is
//! evicted; frames older than the max age are dropped when popped. A frame is
//! never partly queued (draarl-v1 §4.3).

use std::collections::VecDeque;
use std::time::{Duration, Instant};

use crate::model::Frame;

/// Result of [`FrameQueue::push`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Push {
    /// Queued with room to spare.
    Queued,
    /// Queued after evicting the oldest frame.
    EvictedOldest,
}

/// Sans-IO frame queue; the engine wraps it in a mutex.
#[derive(Debug)]
pub struct FrameQueue {
    capacity: usize,
    max_age: Duration,
    frames: VecDeque<Frame>,
    high_water: usize,
}

impl FrameQueue {
    /// A queue of at most `capacity` frames dropping frames older than `max_age`.
    pub fn new(capacity: usize, max_age: Duration) -> Self {
        Self {
            capacity: capacity.max(1),
            max_age,
            frames: VecDeque::with_capacity(capacity.max(1)),
            high_water: 0,
        }
    }

    /// Appends a frame, evicting the oldest if full.
    pub fn push(&mut self, frame: Frame) -> Push {
        let evicted = if self.frames.len() >= self.capacity {
            self.frames.pop_front();
            Push::EvictedOldest
        } else {
            Push::Queued
        };
        self.frames.push_back(frame);
        self.high_water = self.high_water.max(self.frames.len());
        evicted
    }

    /// Pops the oldest frame that is still young enough at `now`; returns it
    /// with the number of expired frames skipped on the way.
    pub fn pop(&mut self, now: Instant) -> (Option<Frame>, u64) {
        let mut expired = 0;
        while let Some(f) = self.frames.pop_front() {
            if now.saturating_duration_since(f.created) > self.max_age {
                expired += 1;
                continue;
            }
            return (Some(f), expired);
        }
        (None, expired)
    }

    /// Frames queued.
    pub fn len(&self) -> usize {
        self.frames.len()
    }

    /// Whether the queue is empty.
    pub fn is_empty(&self) -> bool {
        self.frames.is_empty()
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
        Frame {
            created,
            packet: Arc::from(vec![tag]),
            snapshot: Arc::new(Snapshot::build(1, [], 1)),
            exclude: "127.0.0.1:1".parse().unwrap(),
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
}
