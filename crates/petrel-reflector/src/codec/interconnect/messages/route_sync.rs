//! Route sync payloads, subtypes 0x10–0x15, and the route they carry
//! (draarl-interconnect §3.5, §3.7). Field order is the wire order.

use serde::{Deserialize, Serialize};

fn is_false(v: &bool) -> bool {
    !*v
}
fn is_zero_u32(v: &u32) -> bool {
    *v == 0
}
fn is_zero_u8(v: &u8) -> bool {
    *v == 0
}

/// A device route (§3.7): what the centre tells an edge about one device
/// session. No credentials.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct DeviceRoute {
    /// Device session id.
    pub session_id: u64,
    /// Device id (database).
    pub device_id: i64,
    /// Account name.
    pub username: String,
    /// Callsign.
    pub callsign: String,
    /// Nickname.
    pub nickname: String,
    /// SSID.
    pub ssid: u8,
    /// Device model.
    pub dev_model: u8,
    /// Group.
    pub group_id: i64,
    /// Communication domain (the only send domain).
    pub domain_id: u64,
    /// Receive groups (ghosts).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub rx_group_ids: Vec<i64>,
    /// Receive domains; empty means `[domain_id]`.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub rx_domain_ids: Vec<u64>,
    /// Ghost session id.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub ghost_session_id: String,
    /// Ghost client instance.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub client_instance_id: String,
    /// Ghost session tag.
    #[serde(default, skip_serializing_if = "is_zero_u32")]
    pub session_tag: u32,
    /// Ghost protocol version.
    #[serde(default, skip_serializing_if = "is_zero_u8")]
    pub ghost_protocol_version: u8,
    /// Whether the ghost takes source groups (v1).
    #[serde(default, skip_serializing_if = "is_false")]
    pub source_group_v1: bool,
    /// Device session epoch.
    pub session_epoch: u64,
    /// Sending disabled.
    pub disable_send: bool,
    /// Receiving disabled.
    pub disable_recv: bool,
}

impl DeviceRoute {
    /// The receive domains: `rx_domain_ids` if non-empty, else
    /// `[domain_id]` (§3.7).
    pub fn receive_domains(&self) -> &[u64] {
        if self.rx_domain_ids.is_empty() {
            std::slice::from_ref(&self.domain_id)
        } else {
            &self.rx_domain_ids
        }
    }
}

/// 0x10 RouteSnapshotBegin.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct RouteSnapshotBegin {
    /// Snapshot id (from the centre's MessageID counter).
    pub snapshot_id: u64,
    /// Cluster epoch.
    pub cluster_epoch: u64,
    /// Projection version.
    pub projection_version: u64,
    /// Chunk count, ceil(total / 32 KiB), at least 1.
    pub chunks: u32,
    /// Projection JSON bytes, ≤ 64 MiB.
    pub total_bytes: u64,
    /// SHA-256 of the projection JSON, 64 hex characters.
    pub checksum: String,
}

/// 0x11 RouteSnapshotChunk.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct RouteSnapshotChunk {
    /// Snapshot id.
    pub snapshot_id: u64,
    /// Chunk index from 0.
    pub index: u32,
    /// The chunk's raw bytes (padded base64 on the wire).
    #[serde(with = "super::base64_bytes", default)]
    pub data: Vec<u8>,
}

/// 0x12 RouteSnapshotCommit.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct RouteSnapshotCommit {
    /// Snapshot id.
    pub snapshot_id: u64,
}

/// One operation of a route delta.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "lowercase")]
pub enum RouteOperation {
    /// Add or replace a route.
    Upsert {
        /// The route.
        route: Box<DeviceRoute>,
    },
    /// Remove the route of a session.
    Remove {
        /// The device session.
        session_id: u64,
    },
}

/// 0x13 RouteDelta.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct RouteDelta {
    /// Cluster epoch.
    pub cluster_epoch: u64,
    /// Version it applies to.
    pub base_version: u64,
    /// Version it produces (> base).
    pub new_version: u64,
    /// The operations (one per delta in practice).
    pub operations: Vec<RouteOperation>,
    /// SHA-256 hex of this delta's JSON with `checksum` = "" (§3.7).
    pub checksum: String,
}

/// 0x14 RouteAck.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct RouteAck {
    /// Cluster epoch.
    pub cluster_epoch: u64,
    /// The applied version.
    pub projection_version: u64,
    /// MessageID of the acknowledged delta or commit.
    pub ack_for_message_id: u64,
    /// A sync error, if applying failed.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub error: String,
}

/// 0x15 RouteResyncRequest.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct RouteResyncRequest {
    /// The edge's epoch.
    pub cluster_epoch: u64,
    /// The edge's version.
    pub projection_version: u64,
    /// Why.
    pub reason: String,
}
