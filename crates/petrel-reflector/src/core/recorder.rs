//! Voice recording (draarl-v1 §5.3), sans-IO: voice frames are grouped per
//! talker into recordings that end after a 600 ms gap, a group change or the
//! maximum duration; recordings shorter than the minimum are discarded.
//! Finished recordings are handed to the runtime, which writes `.raw` files
//! ([`crate::codec::encode_raw`]) and a store row.
//!
//! Memory is bounded: at most `max_active` talkers are recorded at once and
//! each recording holds at most `max_duration_s` of 60 ms frames; frames
//! refused by either bound are counted.

use std::collections::{HashMap, VecDeque};
use std::time::{Duration, Instant};

use crate::codec::split_frames;
use crate::model::{DeviceKey, Recording, RecordingConfig, FRAME_MS};

/// Finished recordings waiting for the runtime at most.
const MAX_DONE: usize = 256;

#[derive(Debug)]
struct Active {
    rec: Recording,
    last: Instant,
}

/// Counters of the recorder.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct RecorderStats {
    /// Recordings finished and handed out.
    pub finished: u64,
    /// Recordings discarded as shorter than the minimum.
    pub too_short: u64,
    /// Frames not recorded because `max_active` talkers were being recorded.
    pub frames_refused: u64,
    /// Finished recordings dropped because the runtime fell behind.
    pub finished_dropped: u64,
}

impl RecorderStats {
    /// Every counter with its name, for metrics export.
    pub fn counters(&self) -> Vec<(&'static str, u64)> {
        vec![
            ("finished", self.finished),
            ("too_short", self.too_short),
            ("frames_refused", self.frames_refused),
            ("finished_dropped", self.finished_dropped),
        ]
    }

    /// Adds `other`'s counters to these (summing shards).
    pub fn add(&mut self, other: &Self) {
        let Self {
            finished,
            too_short,
            frames_refused,
            finished_dropped,
        } = other;
        self.finished += finished;
        self.too_short += too_short;
        self.frames_refused += frames_refused;
        self.finished_dropped += finished_dropped;
    }
}

/// The recorder state machine.
#[derive(Debug)]
pub struct Recorder {
    cfg: RecordingConfig,
    active: HashMap<DeviceKey, Active>,
    done: VecDeque<Recording>,
    stats: RecorderStats,
}

impl Recorder {
    /// A recorder with validated settings.
    pub fn new(cfg: RecordingConfig) -> Self {
        Self {
            cfg,
            active: HashMap::new(),
            done: VecDeque::new(),
            stats: RecorderStats::default(),
        }
    }

    fn gap(&self) -> Duration {
        Duration::from_millis(self.cfg.gap_ms)
    }

    fn max_frames(&self) -> usize {
        (self.cfg.max_duration_s * 1000 / FRAME_MS) as usize
    }

    /// Adds one voice packet's DATA from `device` in `group_id`.
    pub fn push(
        &mut self,
        now: Instant,
        unix_ms: i64,
        device: DeviceKey,
        group_id: i64,
        data: &[u8],
    ) {
        let gap = self.gap();
        let ends = self.active.get(&device).is_some_and(|a| {
            a.rec.group_id != group_id || now.saturating_duration_since(a.last) > gap
        });
        if ends {
            self.finish(device);
        }
        if !self.active.contains_key(&device) && self.active.len() >= self.cfg.max_active {
            self.stats.frames_refused += 1;
            return;
        }
        let max = self.max_frames();
        let a = self.active.entry(device).or_insert_with(|| Active {
            rec: Recording {
                device,
                group_id,
                started_unix_ms: unix_ms,
                frames: Vec::new(),
            },
            last: now,
        });
        a.last = now;
        a.rec
            .frames
            .extend(split_frames(data).into_iter().map(<[u8]>::to_vec));
        if a.rec.frames.len() >= max {
            self.finish(device);
        }
    }

    /// Ends recordings silent for longer than the gap.
    pub fn tick(&mut self, now: Instant) {
        let gap = self.gap();
        let idle: Vec<DeviceKey> = self
            .active
            .iter()
            .filter(|(_, a)| now.saturating_duration_since(a.last) > gap)
            .map(|(k, _)| *k)
            .collect();
        for k in idle {
            self.finish(k);
        }
    }

    /// When [`Recorder::tick`] next has something to end.
    pub fn next_deadline(&self) -> Option<Instant> {
        let gap = self.gap() + Duration::from_millis(1);
        self.active.values().map(|a| a.last + gap).min()
    }

    fn finish(&mut self, device: DeviceKey) {
        let Some(a) = self.active.remove(&device) else {
            return;
        };
        if a.rec.duration_ms() < self.cfg.min_duration_ms {
            self.stats.too_short += 1;
        } else if self.done.len() >= MAX_DONE {
            self.stats.finished_dropped += 1;
        } else {
            self.stats.finished += 1;
            self.done.push_back(a.rec);
        }
    }

    /// Next finished recording.
    pub fn poll(&mut self) -> Option<Recording> {
        self.done.pop_front()
    }

    /// Counters so far.
    pub fn stats(&self) -> &RecorderStats {
        &self.stats
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::codec::merge_frames;

    fn ms(n: u64) -> Duration {
        Duration::from_millis(n)
    }

    fn packet() -> Vec<u8> {
        merge_frames([&[1u8; 30][..], &[2u8; 30][..]]).unwrap()
    }

    #[test]
    fn gap_group_change_and_min_duration() {
        let t0 = crate::test_clock::origin();
        let mut r = Recorder::new(RecordingConfig::default());
        for k in 0..5 {
            r.push(t0 + ms(120 * k), 1_000, (1, 1), 999, &packet());
        }
        assert_eq!(r.next_deadline(), Some(t0 + ms(480 + 601)));
        r.tick(t0 + ms(480 + 601));
        let rec = r.poll().unwrap();
        assert_eq!(
            (rec.frames.len(), rec.duration_ms(), rec.group_id),
            (10, 600, 999)
        );
        assert_eq!(rec.frames[1], vec![2u8; 30]);
        // Two packets (240 ms) are too short; a group change ends them.
        r.push(t0, 0, (1, 1), 999, &packet());
        r.push(t0 + ms(120), 0, (1, 1), 999, &packet());
        r.push(t0 + ms(240), 0, (1, 1), 7, &packet());
        assert_eq!(r.stats().too_short, 1);
        assert!(r.poll().is_none());
    }

    #[test]
    fn max_duration_splits_and_max_active_bounds() {
        let t0 = crate::test_clock::origin();
        let cfg = RecordingConfig {
            max_duration_s: 1,
            max_active: 1,
            ..RecordingConfig::default()
        };
        let mut r = Recorder::new(cfg);
        for k in 0..9 {
            r.push(t0 + ms(120 * k), 0, (1, 1), 999, &packet());
        }
        // 1 s = 16 frames (16 × 60 ms ≥ 1000 ms at the 8th packet).
        assert_eq!(r.poll().unwrap().frames.len(), 16);
        r.push(t0 + ms(1100), 0, (2, 1), 999, &packet());
        assert_eq!(r.stats().frames_refused, 1);
    }
}
