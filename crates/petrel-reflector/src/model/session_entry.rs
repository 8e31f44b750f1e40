//! The centre's persisted device-session entry (draarl-interconnect §1,
//! §3.9, §6.2): for each physical device (owner account + SSID) that an
//! edge or the centre activated, the entry node and its control session id,
//! kept across a centre restart so the edge can reconfirm the session.

/// One device's entry as the store keeps it (`device_session_entries`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SessionEntryRecord {
    /// Owner account id.
    pub owner_id: i64,
    /// SSID.
    pub ssid: u8,
    /// The device id of the activation (`owner_id * 256 + ssid`).
    pub device_id: i64,
    /// The entry node's id (`center` for centre-direct devices).
    pub node_id: String,
    /// The node's control (node) session id at activation.
    pub control_session: u64,
    /// Since when the node's control session is gone, Unix ms; 0 while it
    /// is live.
    pub offline_since_ms: i64,
}

/// A change to the entries the runtime persists in the background.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum SessionEntryWrite {
    /// Insert or replace the entry of (`owner_id`, `ssid`) (an activation).
    Put(SessionEntryRecord),
    /// Delete the entry of (`owner_id`, `ssid`) if it still names
    /// `node_id` / `control_session` (a report, a revoke, the recovery
    /// window ran out).
    Clear {
        /// Owner account id.
        owner_id: i64,
        /// SSID.
        ssid: u8,
        /// The entry node it must still name.
        node_id: String,
        /// The control session it must still name.
        control_session: u64,
    },
    /// Every entry of `node_id` / `control_session` is offline since
    /// `at_ms` (the node's control session ended, §6.2).
    Offline {
        /// The node.
        node_id: String,
        /// Its ended control session.
        control_session: u64,
        /// When, Unix ms.
        at_ms: i64,
    },
}
