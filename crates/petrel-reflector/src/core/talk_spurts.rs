//! Talk spurts for the operator dashboard's "last heard", sans-IO: the
//! voice packets of one device that won the floor (draarl-v1 §3.7, §4.2),
//! grouped like recordings (§5.3) into spurts that end after a 600 ms gap
//! or a group change. The core emits a [`TalkSpurt`] when a spurt starts
//! and when it ends; the runtime polls them like store events, with the
//! time passed in.
//!
//! Bounded: at most [`MAX_ACTIVE_SPURTS`] devices are followed at once per
//! shard (beyond that a spurt is counted in `talk_spurts_untracked`), and
//! at most [`MAX_PENDING_SPURTS`] events wait for the runtime (beyond that
//! they are counted in `talk_spurt_events_dropped`).

use std::collections::{HashMap, VecDeque};
use std::time::{Duration, Instant};

use super::stats::SessionStats;
use crate::model::{DeviceKey, DeviceKind};

/// Silence that ends a spurt (the recorder's default gap, §5.3).
pub const SPURT_GAP: Duration = Duration::from_millis(600);
/// Devices followed at once per shard at most.
pub const MAX_ACTIVE_SPURTS: usize = 4096;
/// Events waiting for the runtime per shard at most.
pub const MAX_PENDING_SPURTS: usize = 1024;

/// Whether a [`TalkSpurt`] event starts or ends its spurt.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SpurtPhase {
    /// The first voice packet of the spurt was forwarded.
    Started,
    /// The spurt ended (gap, group change, or the device went offline).
    Ended,
}

/// One talk spurt as it starts or ends.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TalkSpurt {
    /// Started or ended.
    pub phase: SpurtPhase,
    /// The talker.
    pub device: DeviceKey,
    /// How the talker's session reached the reflector.
    pub kind: DeviceKind,
    /// The group it talked in.
    pub group_id: i64,
    /// Wall-clock time of the first packet, Unix milliseconds (0 when the
    /// core has no wall clock yet).
    pub started_unix_ms: i64,
    /// Milliseconds from the first to the last voice packet of the spurt
    /// (0 in a [`SpurtPhase::Started`] event).
    pub duration_ms: u64,
}

#[derive(Debug)]
struct Active {
    spurt: TalkSpurt,
    first: Instant,
    last: Instant,
}

/// The spurts of one shard's talkers.
#[derive(Debug, Default)]
pub struct TalkSpurts {
    active: HashMap<DeviceKey, Active>,
    events: VecDeque<TalkSpurt>,
}

impl TalkSpurts {
    /// One forwarded voice packet of `device` (`kind`) in `group_id`, at
    /// `now` (`unix_ms` on the wall clock).
    pub fn push(
        &mut self,
        now: Instant,
        unix_ms: i64,
        device: DeviceKey,
        kind: DeviceKind,
        group_id: i64,
        stats: &mut SessionStats,
    ) {
        let ends = self.active.get(&device).is_some_and(|a| {
            a.spurt.group_id != group_id || now.saturating_duration_since(a.last) > SPURT_GAP
        });
        if ends {
            self.end(device, stats);
        }
        if let Some(a) = self.active.get_mut(&device) {
            a.last = now;
            return;
        }
        if self.active.len() >= MAX_ACTIVE_SPURTS {
            stats.talk_spurts_untracked += 1;
            return;
        }
        let spurt = TalkSpurt {
            phase: SpurtPhase::Started,
            device,
            kind,
            group_id,
            started_unix_ms: unix_ms,
            duration_ms: 0,
        };
        stats.talk_spurts += 1;
        self.emit(spurt, stats);
        self.active.insert(
            device,
            Active {
                spurt,
                first: now,
                last: now,
            },
        );
    }

    /// Ends the spurts silent for longer than [`SPURT_GAP`] at `now`.
    pub fn tick(&mut self, now: Instant, stats: &mut SessionStats) {
        let idle: Vec<DeviceKey> = self
            .active
            .iter()
            .filter(|(_, a)| now.saturating_duration_since(a.last) > SPURT_GAP)
            .map(|(k, _)| *k)
            .collect();
        for k in idle {
            self.end(k, stats);
        }
    }

    /// When [`TalkSpurts::tick`] next has a spurt to end.
    pub fn next_deadline(&self) -> Option<Instant> {
        let gap = SPURT_GAP + Duration::from_millis(1);
        self.active.values().map(|a| a.last + gap).min()
    }

    /// Ends `device`'s spurt now, if it has one (it went offline).
    pub fn end(&mut self, device: DeviceKey, stats: &mut SessionStats) {
        let Some(a) = self.active.remove(&device) else {
            return;
        };
        let ms = a.last.saturating_duration_since(a.first).as_millis();
        self.emit(
            TalkSpurt {
                phase: SpurtPhase::Ended,
                duration_ms: u64::try_from(ms).unwrap_or(u64::MAX),
                ..a.spurt
            },
            stats,
        );
    }

    fn emit(&mut self, e: TalkSpurt, stats: &mut SessionStats) {
        if self.events.len() >= MAX_PENDING_SPURTS {
            stats.talk_spurt_events_dropped += 1;
        } else {
            self.events.push_back(e);
        }
    }

    /// The next start or end, oldest first.
    pub fn poll(&mut self) -> Option<TalkSpurt> {
        self.events.pop_front()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ms(n: u64) -> Duration {
        Duration::from_millis(n)
    }

    #[test]
    fn a_spurt_starts_once_and_ends_after_the_gap_or_a_group_change() {
        let t0 = crate::test_clock::origin();
        let mut st = SessionStats::default();
        let mut s = TalkSpurts::default();
        for k in 0..5 {
            s.push(t0 + ms(120 * k), 1_000, (1, 7), DeviceKind::Udp, 5, &mut st);
        }
        let start = s.poll().unwrap();
        assert_eq!(
            (
                start.phase,
                start.device,
                start.group_id,
                start.started_unix_ms
            ),
            (SpurtPhase::Started, (1, 7), 5, 1_000)
        );
        assert!(s.poll().is_none(), "one start per spurt");
        assert_eq!(s.next_deadline(), Some(t0 + ms(480 + 601)));
        s.tick(t0 + ms(480 + 600), &mut st);
        assert!(s.poll().is_none(), "not past the gap yet");
        s.tick(t0 + ms(480 + 601), &mut st);
        let end = s.poll().unwrap();
        assert_eq!((end.phase, end.duration_ms), (SpurtPhase::Ended, 480));
        assert_eq!(end.started_unix_ms, 1_000);

        // A group change ends the spurt and starts another.
        s.push(t0 + ms(2_000), 3_000, (1, 7), DeviceKind::Udp, 5, &mut st);
        s.push(t0 + ms(2_060), 3_060, (1, 7), DeviceKind::Udp, 6, &mut st);
        let phases: Vec<_> = std::iter::from_fn(|| s.poll())
            .map(|e| (e.phase, e.group_id))
            .collect();
        assert_eq!(
            phases,
            [
                (SpurtPhase::Started, 5),
                (SpurtPhase::Ended, 5),
                (SpurtPhase::Started, 6)
            ]
        );
        assert_eq!(st.talk_spurts, 3);
    }

    #[test]
    fn active_spurts_and_pending_events_are_bounded_and_counted() {
        let t0 = crate::test_clock::origin();
        let mut st = SessionStats::default();
        let mut s = TalkSpurts::default();
        for i in 0..=MAX_ACTIVE_SPURTS as i64 {
            s.push(t0, 0, (i, 1), DeviceKind::Udp, 5, &mut st);
        }
        assert_eq!(st.talk_spurts_untracked, 1);
        assert_eq!(
            st.talk_spurt_events_dropped,
            (MAX_ACTIVE_SPURTS - MAX_PENDING_SPURTS) as u64
        );
        assert_eq!(std::iter::from_fn(|| s.poll()).count(), MAX_PENDING_SPURTS);
        s.end((0, 1), &mut st);
        assert_eq!(s.poll().map(|e| e.phase), Some(SpurtPhase::Ended));
    }
}
