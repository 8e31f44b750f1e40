//! The dashboard's "last heard": the latest talk spurts (draarl-v1 §3.7
//! floors, §4.2), newest first, in a ring of [`LAST_HEARD_CAPACITY`]
//! entries. Fed by the shard threads from the core's
//! [`TalkSpurt`](crate::core::TalkSpurt) events, read by the dashboard's
//! data endpoint.

use std::collections::VecDeque;

use serde::Serialize;

use crate::core::{SpurtPhase, TalkSpurt};
use crate::model::{DeviceKey, DeviceKind, Directory};

/// Spurts kept; older ones are evicted (counted in [`LastHeard::evicted`]).
pub const LAST_HEARD_CAPACITY: usize = 50;
/// Characters of a group name kept (names come from the store).
const MAX_GROUP_NAME_CHARS: usize = 64;

/// One talk spurt, as the dashboard shows it (JSON field names as here).
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct HeardEntry {
    /// The talker's callsign from the directory (any text the account
    /// holder chose: render it as text, never as markup).
    pub callsign: String,
    /// The account name (the wire username).
    pub user: String,
    /// The device's SSID.
    pub ssid: u8,
    /// `udp`, `ghost` or `websocket`.
    pub kind: DeviceKind,
    /// The group talked in.
    pub group_id: i64,
    /// Its name, if the directory has the group.
    pub group_name: Option<String>,
    /// First voice packet, Unix milliseconds.
    pub started_unix_ms: i64,
    /// Milliseconds from the first voice packet to the last one, or to now
    /// while `talking`.
    pub duration_ms: u64,
    /// Whether the spurt is still going on.
    pub talking: bool,
    #[serde(skip)]
    device: DeviceKey,
}

/// The ring of the latest spurts.
#[derive(Debug)]
pub struct LastHeard {
    entries: VecDeque<HeardEntry>,
    evicted: u64,
}

impl Default for LastHeard {
    fn default() -> Self {
        Self {
            entries: VecDeque::with_capacity(LAST_HEARD_CAPACITY),
            evicted: 0,
        }
    }
}

impl LastHeard {
    /// Records a spurt's start (a new entry, evicting the oldest when
    /// full) or end (its entry's final duration; nothing if it was
    /// evicted meanwhile). Names are looked up in `dir` at the start.
    pub fn record(&mut self, spurt: &TalkSpurt, dir: &Directory) {
        match spurt.phase {
            SpurtPhase::Started => {
                let (user, callsign) = dir
                    .user(spurt.device.0)
                    .map(|u| (u.name.clone(), u.callsign.clone()))
                    .unwrap_or_default();
                let group_name = dir
                    .group(spurt.group_id)
                    .map(|g| g.name.chars().take(MAX_GROUP_NAME_CHARS).collect());
                if self.entries.len() >= LAST_HEARD_CAPACITY {
                    self.entries.pop_back();
                    self.evicted += 1;
                }
                self.entries.push_front(HeardEntry {
                    callsign,
                    user,
                    ssid: spurt.device.1,
                    kind: spurt.kind,
                    group_id: spurt.group_id,
                    group_name,
                    started_unix_ms: spurt.started_unix_ms,
                    duration_ms: 0,
                    talking: true,
                    device: spurt.device,
                });
            }
            SpurtPhase::Ended => {
                let entry = self.entries.iter_mut().find(|e| {
                    e.talking
                        && e.device == spurt.device
                        && e.started_unix_ms == spurt.started_unix_ms
                });
                if let Some(e) = entry {
                    e.talking = false;
                    e.duration_ms = spurt.duration_ms;
                }
            }
        }
    }

    /// The entries, newest first; a spurt still going on lasts until
    /// `now_unix_ms`.
    pub fn entries(&self, now_unix_ms: i64) -> Vec<HeardEntry> {
        self.entries
            .iter()
            .map(|e| {
                let mut e = e.clone();
                if e.talking {
                    let ms = now_unix_ms.saturating_sub(e.started_unix_ms).max(0);
                    e.duration_ms = u64::try_from(ms).unwrap_or_default();
                }
                e
            })
            .collect()
    }

    /// Entries evicted to make room since the start.
    pub fn evicted(&self) -> u64 {
        self.evicted
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::{GroupRecord, UserRecord};

    fn dir() -> Directory {
        let user = UserRecord {
            id: 1,
            name: "alice".into(),
            callsign: "<b>BT1</b>".into(),
            dmrid: 1,
            enabled: true,
            approved: true,
            device_password_hash: None,
            default_group_id: 5,
        };
        let group = GroupRecord {
            id: 5,
            name: "Five".into(),
            enabled: true,
            is_virtual: false,
        };
        Directory::new(vec![user], vec![group], vec![], vec![])
    }

    fn spurt(phase: SpurtPhase, user: i64, started: i64, duration_ms: u64) -> TalkSpurt {
        TalkSpurt {
            phase,
            device: (user, 7),
            kind: DeviceKind::Udp,
            group_id: 5,
            started_unix_ms: started,
            duration_ms,
        }
    }

    #[test]
    fn starts_end_and_run_on_until_now() {
        let d = dir();
        let mut lh = LastHeard::default();
        lh.record(&spurt(SpurtPhase::Started, 1, 1_000, 0), &d);
        let e = &lh.entries(1_700)[0];
        assert_eq!(
            (
                e.callsign.as_str(),
                e.user.as_str(),
                e.ssid,
                e.talking,
                e.duration_ms
            ),
            ("<b>BT1</b>", "alice", 7, true, 700)
        );
        assert_eq!(e.group_name.as_deref(), Some("Five"));
        lh.record(&spurt(SpurtPhase::Ended, 1, 1_000, 480), &d);
        let e = &lh.entries(9_000)[0];
        assert_eq!((e.talking, e.duration_ms), (false, 480));
        // An unknown user and group leave the names empty.
        lh.record(&spurt(SpurtPhase::Started, 2, 2_000, 0), &d);
        let e = &lh.entries(2_000)[0];
        assert_eq!(
            (e.callsign.as_str(), e.group_name.as_deref()),
            ("", Some("Five"))
        );
    }

    #[test]
    fn the_ring_keeps_the_newest_and_counts_evictions() {
        let d = dir();
        let mut lh = LastHeard::default();
        for i in 0..LAST_HEARD_CAPACITY as i64 + 3 {
            lh.record(&spurt(SpurtPhase::Started, 1, i, 0), &d);
        }
        let es = lh.entries(0);
        assert_eq!(es.len(), LAST_HEARD_CAPACITY);
        assert_eq!(lh.evicted(), 3);
        assert_eq!(es[0].started_unix_ms, LAST_HEARD_CAPACITY as i64 + 2);
        assert_eq!(es[LAST_HEARD_CAPACITY - 1].started_unix_ms, 3);
        // The end of an evicted spurt changes nothing.
        lh.record(&spurt(SpurtPhase::Ended, 1, 0, 100), &d);
        assert!(lh.entries(0).iter().all(|e| e.talking));
    }
}
