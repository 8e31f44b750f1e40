//! The centre's side of session reconfirmation (draarl-interconnect §3.9,
//! §6.2, §6.3): the table of device-session entries (per physical device
//! the entry node, its control session id, and since when that session is
//! gone), the per-item checks of a 0x25 DeviceSessionConfirm, and the
//! recovery window after which unclaimed entries are cleared.
//!
//! ```text
//!  activation (0x20 grant, reconfirm) ─▶ record: entry = (node, control session), online
//!  report / revoke ─▶ clear (only if it still names that control session)
//!  control session ended ─▶ node_offline: its entries offline since now (§6.2)
//!  centre start ─▶ load: every stored entry offline since the start (§6.3)
//!  sweep: offline ≥ SessionRecoveryWindowSeconds ─▶ cleared
//!  0x25 item ─▶ check_item: physical? device row = owner + SSID? entry node = this node?
//!               entry control session = the item's old one? account enabled ∧ approved?
//! ```
//!
//! Every change is also queued as a [`SessionEntryWrite`] for the store
//! (at most [`MAX_PENDING_WRITES`]; beyond it the oldest is dropped and
//! counted), which the runtime drains off the datagram path. Ghost items
//! (§3.12) are refused: ghost sessions do not go through edges here.

use std::collections::VecDeque;
use std::time::Duration;

use hashlink::LinkedHashMap;

use crate::codec::interconnect::messages::ConfirmItem;
use crate::codec::interconnect::NodeId;
use crate::model::{DeviceRecord, SessionEntryRecord, SessionEntryWrite, UserRecord};

use super::device_auth_centre::device_id;
use super::device_owners::{ControlRef, DeviceIdentity};

/// Default `SessionRecoveryWindowSeconds` (§3.9, §6.2): 120 s, one grant
/// lifetime — an edge cannot keep a session longer than its grant without
/// the centre anyway.
pub const SESSION_RECOVERY_WINDOW: Duration = Duration::from_secs(120);
/// Entries kept at most (least recently recorded evicted first).
pub const MAX_SESSION_ENTRIES: usize = 262_144;
/// Store writes queued at most between two drains.
pub const MAX_PENDING_WRITES: usize = 65_536;

/// Why a reconfirmation item was refused; [`ReconfirmReject::error`] is the
/// wire error string.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ReconfirmReject {
    /// The whole batch broke a §3.9 batch rule.
    InvalidBatch,
    /// A ghost item (device id 0): not supported through edges.
    Ghost,
    /// No entry for the device (never activated, cleared, or expired).
    NoEntry,
    /// The device row or the account does not match owner + SSID + device
    /// id.
    IdentityMismatch,
    /// The entry names another node.
    OtherNode,
    /// The entry names another control session.
    OtherControlSession,
    /// The owner account is disabled or not approved.
    AccountDisabled,
    /// The node owns its maximum of sessions, or the route could not be
    /// published.
    NodeFull,
}

impl ReconfirmReject {
    /// Every cause, in metric order.
    pub const ALL: [ReconfirmReject; 8] = [
        Self::InvalidBatch,
        Self::Ghost,
        Self::NoEntry,
        Self::IdentityMismatch,
        Self::OtherNode,
        Self::OtherControlSession,
        Self::AccountDisabled,
        Self::NodeFull,
    ];

    /// The error string sent to the edge (also the metric's cause).
    pub fn error(self) -> &'static str {
        match self {
            Self::InvalidBatch => "invalid_batch",
            Self::Ghost => "ghost_reconfirm_unsupported",
            Self::NoEntry => "session_entry_missing",
            Self::IdentityMismatch => "identity_mismatch",
            Self::OtherNode => "entry_node_mismatch",
            Self::OtherControlSession => "control_session_mismatch",
            Self::AccountDisabled => "account_disabled",
            Self::NodeFull => "node_full",
        }
    }

    fn index(self) -> usize {
        Self::ALL.iter().position(|c| *c == self).unwrap_or(0)
    }
}

/// Counters of the entry table and of reconfirmation.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct ReconfirmCounters {
    /// Batches received.
    pub batches: u64,
    /// Items confirmed (a fresh activation each).
    pub accepted: u64,
    /// Items refused, by [`ReconfirmReject::ALL`] index.
    pub rejected: [u64; 8],
    /// Entries cleared because the recovery window ran out.
    pub entries_expired: u64,
    /// Entries evicted to stay within [`MAX_SESSION_ENTRIES`].
    pub entries_evicted: u64,
    /// Store writes dropped because the queue was full.
    pub writes_dropped: u64,
}

impl ReconfirmCounters {
    /// Every counter with its metric name (`accepted`,
    /// `rejected_<cause>`, …).
    pub fn list(&self) -> Vec<(&'static str, u64)> {
        const NAMES: [&str; 8] = [
            "rejected_invalid_batch",
            "rejected_ghost",
            "rejected_no_entry",
            "rejected_identity_mismatch",
            "rejected_other_node",
            "rejected_other_control_session",
            "rejected_account_disabled",
            "rejected_node_full",
        ];
        let mut out = vec![("batches", self.batches), ("accepted", self.accepted)];
        out.extend(NAMES.iter().copied().zip(self.rejected));
        out.extend([
            ("entries_expired", self.entries_expired),
            ("entries_evicted", self.entries_evicted),
            ("writes_dropped", self.writes_dropped),
        ]);
        out
    }
}

/// One device's entry in memory.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SessionEntry {
    /// The device id of the activation.
    pub device_id: i64,
    /// The entry node and its control session at activation.
    pub control: ControlRef,
    /// Since when that control session is gone, Unix ms.
    pub offline_since_ms: Option<i64>,
}

/// The centre's entry table; see the module docs.
#[derive(Debug)]
pub struct SessionEntries {
    entries: LinkedHashMap<DeviceIdentity, SessionEntry>,
    window_ms: i64,
    max_entries: usize,
    writes: VecDeque<SessionEntryWrite>,
    counters: ReconfirmCounters,
}

impl SessionEntries {
    /// An empty table clearing offline entries after `window`, holding at
    /// most `max_entries`.
    pub fn new(window: Duration, max_entries: usize) -> Self {
        Self {
            entries: LinkedHashMap::new(),
            window_ms: i64::try_from(window.as_millis()).unwrap_or(i64::MAX),
            max_entries: max_entries.max(1),
            writes: VecDeque::new(),
            counters: ReconfirmCounters::default(),
        }
    }

    /// Loads the stored entries at centre start `wall_ms`: each is offline
    /// since then (every node session died with the old process, §6.3)
    /// unless it was offline already. Rows naming an invalid node id are
    /// skipped. Nothing is queued for the store: the window counts from
    /// the start.
    pub fn load(&mut self, wall_ms: i64, rows: &[SessionEntryRecord]) {
        for r in rows {
            let Ok(node) = NodeId::new(&r.node_id) else {
                continue;
            };
            let since = if r.offline_since_ms > 0 {
                r.offline_since_ms.max(wall_ms)
            } else {
                wall_ms
            };
            self.insert(
                DeviceIdentity {
                    owner_id: r.owner_id,
                    ssid: r.ssid,
                },
                SessionEntry {
                    device_id: r.device_id,
                    control: ControlRef {
                        node,
                        control_session: r.control_session,
                    },
                    offline_since_ms: Some(since),
                },
            );
        }
    }

    fn insert(&mut self, identity: DeviceIdentity, entry: SessionEntry) {
        self.entries.remove(&identity);
        self.entries.insert(identity, entry);
        while self.entries.len() > self.max_entries {
            self.entries.pop_front();
            self.counters.entries_evicted += 1;
        }
    }

    fn queue(&mut self, w: SessionEntryWrite) {
        if self.writes.len() >= MAX_PENDING_WRITES {
            self.writes.pop_front();
            self.counters.writes_dropped += 1;
        }
        self.writes.push_back(w);
    }

    /// The counters.
    pub fn counters(&self) -> &ReconfirmCounters {
        &self.counters
    }

    /// Entries held.
    pub fn len(&self) -> usize {
        self.entries.len()
    }

    /// Whether none is held.
    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }

    /// The entry of `identity`.
    pub fn get(&self, identity: DeviceIdentity) -> Option<&SessionEntry> {
        self.entries.get(&identity)
    }

    /// Records an activation of `identity` (device `device_id`) through
    /// `control` (a 0x20 grant or a reconfirmation, §3.8).
    pub fn record(&mut self, identity: DeviceIdentity, device_id: i64, control: ControlRef) {
        self.insert(
            identity,
            SessionEntry {
                device_id,
                control,
                offline_since_ms: None,
            },
        );
        self.queue(SessionEntryWrite::Put(SessionEntryRecord {
            owner_id: identity.owner_id,
            ssid: identity.ssid,
            device_id,
            node_id: control.node.to_string(),
            control_session: control.control_session,
            offline_since_ms: 0,
        }));
    }

    /// The session of `identity` through `control` ended (a report or a
    /// revoke): its entry goes if it still names `control`.
    pub fn clear(&mut self, identity: DeviceIdentity, control: ControlRef) {
        if self
            .entries
            .get(&identity)
            .is_some_and(|e| e.control == control)
        {
            self.entries.remove(&identity);
            self.queue(clear_write(identity, control));
        }
    }

    /// `control` ended at `wall_ms` (§6.2): its entries are offline from
    /// now.
    pub fn node_offline(&mut self, control: ControlRef, wall_ms: i64) {
        for e in self.entries.values_mut() {
            if e.control == control && e.offline_since_ms.is_none() {
                e.offline_since_ms = Some(wall_ms);
            }
        }
        self.queue(SessionEntryWrite::Offline {
            node_id: control.node.to_string(),
            control_session: control.control_session,
            at_ms: wall_ms,
        });
    }

    /// Clears the entries offline for the recovery window at `wall_ms`;
    /// how many.
    pub fn sweep(&mut self, wall_ms: i64) -> usize {
        let due: Vec<(DeviceIdentity, ControlRef)> = self
            .entries
            .iter()
            .filter(|(_, e)| {
                e.offline_since_ms
                    .is_some_and(|t| wall_ms.saturating_sub(t) >= self.window_ms)
            })
            .map(|(i, e)| (*i, e.control))
            .collect();
        for (identity, control) in &due {
            self.entries.remove(identity);
            self.queue(clear_write(*identity, *control));
        }
        self.counters.entries_expired += due.len() as u64;
        due.len()
    }

    /// Moves the queued store writes to the end of `out`.
    pub fn take_writes(&mut self, out: &mut Vec<SessionEntryWrite>) {
        out.extend(self.writes.drain(..));
    }

    /// Counts a received batch.
    pub fn count_batch(&mut self) {
        self.counters.batches += 1;
    }

    /// Counts one item's outcome.
    pub fn count(&mut self, outcome: Result<(), ReconfirmReject>) {
        match outcome {
            Ok(()) => self.counters.accepted += 1,
            Err(c) => self.counters.rejected[c.index()] += 1,
        }
    }

    /// The §3.9 checks of one item from `node`: the device row `device`
    /// of the item's owner + SSID (from the directory) with the same device
    /// id, its account `user` enabled and approved, and an entry naming
    /// this node and the item's old control session. Counts nothing (see
    /// [`SessionEntries::count`]).
    ///
    /// # Errors
    /// The first failed check.
    pub fn check_item(
        &self,
        node: NodeId,
        item: &ConfirmItem,
        device: Option<&DeviceRecord>,
        user: Option<&UserRecord>,
    ) -> Result<DeviceIdentity, ReconfirmReject> {
        if item.device_id == 0 {
            return Err(ReconfirmReject::Ghost);
        }
        let identity = DeviceIdentity {
            owner_id: item.owner_id,
            ssid: item.ssid,
        };
        let entry = self.get(identity).ok_or(ReconfirmReject::NoEntry)?;
        let row_matches = device.is_some_and(|d| {
            d.owner_id == item.owner_id
                && d.ssid == item.ssid
                && device_id((d.owner_id, d.ssid)) == item.device_id
        }) && entry.device_id == item.device_id;
        let user = user.filter(|u| u.id == item.owner_id);
        if !row_matches || user.is_none() {
            return Err(ReconfirmReject::IdentityMismatch);
        }
        if entry.control.node != node {
            return Err(ReconfirmReject::OtherNode);
        }
        if entry.control.control_session != item.control_session_id {
            return Err(ReconfirmReject::OtherControlSession);
        }
        if !user.is_some_and(|u| u.enabled && u.approved) {
            return Err(ReconfirmReject::AccountDisabled);
        }
        Ok(identity)
    }
}

fn clear_write(identity: DeviceIdentity, control: ControlRef) -> SessionEntryWrite {
    SessionEntryWrite::Clear {
        owner_id: identity.owner_id,
        ssid: identity.ssid,
        node_id: control.node.to_string(),
        control_session: control.control_session,
    }
}
