//! The 0x05 Heartbeat payload (edge → centre every 5 s;
//! draarl-interconnect §3.5, §7).

use serde::{Deserialize, Serialize};

/// 0x05 Heartbeat counters of one side (`device`, `interconnect`).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct TrafficReport {
    /// Packets in.
    pub in_packets: u64,
    /// Bytes in.
    pub in_bytes: u64,
    /// Packets out.
    pub out_packets: u64,
    /// Bytes out.
    pub out_bytes: u64,
    /// Drops.
    pub drops: u64,
    /// Errors.
    pub errors: u64,
}

/// 0x05 Heartbeat (edge → centre, every 5 s). The `protection` and
/// `receiver_cache` objects are kept as raw JSON (§7 names their keys).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Heartbeat {
    /// `<node>-<random u64>`, new per process.
    pub instance_id: String,
    /// Unix ms.
    pub sent_at_ms: i64,
    /// Goroutines (a Go edge's; others may send threads or 0).
    #[serde(default)]
    pub goroutines: u64,
    /// Device sessions.
    #[serde(default)]
    pub connection_count: u64,
    /// Device-side traffic.
    #[serde(default)]
    pub device: TrafficReport,
    /// Interconnect-side traffic.
    #[serde(default)]
    pub interconnect: TrafficReport,
    /// The edge's projection version.
    #[serde(default)]
    pub projection_version: u64,
    /// §7 protection counters.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub protection: Option<serde_json::Value>,
    /// Receiver cache statistics.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub receiver_cache: Option<serde_json::Value>,
}
