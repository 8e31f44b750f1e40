//! Device session payloads (draarl-interconnect §3.5, §3.8): 0x20
//! DeviceAuth, 0x21 DeviceSessionRenew, 0x22 DeviceSessionReport, 0x23
//! DeviceSessionRevoke. Field order is the wire order.

use std::fmt;

use serde::{Deserialize, Serialize};

use super::route_sync::DeviceRoute;

fn is_zero_i64(v: &i64) -> bool {
    *v == 0
}

/// 0x20 request (edge → centre): the entire raw device datagram, password
/// included (protected only by TLS), and the real client IP. `Debug` hides
/// the packet.
#[derive(Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct DeviceAuthRequest {
    /// The edge's MessageID of this request.
    pub request_id: u64,
    /// The device's real IP (PROXY v2 aware).
    pub source_ip: String,
    /// The raw Type 1 or Type 2 datagram.
    #[serde(with = "super::base64_bytes", default)]
    pub packet: Vec<u8>,
}

impl fmt::Debug for DeviceAuthRequest {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("DeviceAuthRequest")
            .field("request_id", &self.request_id)
            .field("source_ip", &self.source_ip)
            .field("packet_len", &self.packet.len())
            .finish()
    }
}

/// A device grant (§3.8): the route plus owner, DMR id, recovery ticket
/// and expiry (now + 2 min).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct DeviceGrant {
    /// The route fields.
    #[serde(flatten)]
    pub route: DeviceRoute,
    /// Owner account id.
    pub owner_id: i64,
    /// DMR id.
    pub dmrid: u32,
    /// Ghost recovery ticket (bits 8 + 9).
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub recovery_ticket: String,
    /// Grant expiry, Unix ms.
    pub expires_at_ms: i64,
}

/// 0x20 response (centre → edge).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct DeviceAuthResponse {
    /// The request's id.
    pub request_id: u64,
    /// Whether the device is authenticated.
    pub success: bool,
    /// Why not.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub error: String,
    /// The grant on success.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub grant: Option<DeviceGrant>,
    /// The ordinary device reply to forward.
    #[serde(
        with = "super::base64_bytes",
        default,
        skip_serializing_if = "Vec::is_empty"
    )]
    pub response_packet: Vec<u8>,
}

/// 0x21 DeviceSessionRenew, request and response in one shape (the
/// response adds the outcome).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct DeviceSessionRenew {
    /// The request's id.
    pub request_id: u64,
    /// Device session.
    pub session_id: u64,
    /// Its epoch.
    pub session_epoch: u64,
    /// Response: renewed.
    #[serde(default)]
    pub success: bool,
    /// Response: why not (`session_not_owned`, `session_route_missing`).
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub error: String,
    /// Response: new expiry, Unix ms.
    #[serde(default, skip_serializing_if = "is_zero_i64")]
    pub expires_at_ms: i64,
    /// Response: rotated ghost recovery ticket.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub recovery_ticket: String,
}

/// 0x22 DeviceSessionReport (edge → centre).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct DeviceSessionReport {
    /// Device session.
    pub session_id: u64,
    /// Its epoch.
    pub session_epoch: u64,
    /// Device id.
    #[serde(default, skip_serializing_if = "is_zero_i64")]
    pub device_id: i64,
    /// Online or gone.
    pub online: bool,
    /// Why it went (`device_timeout`, `grant_expired`, …).
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub reason: String,
    /// When, Unix ms.
    pub reported_at_ms: i64,
}

/// 0x23 DeviceSessionRevoke (centre → edge).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct DeviceSessionRevoke {
    /// Device session.
    pub session_id: u64,
    /// Its epoch (the edge removes the session only if it matches).
    pub session_epoch: u64,
    /// Device id.
    #[serde(default, skip_serializing_if = "is_zero_i64")]
    pub device_id: i64,
    /// Why (`session_migrated`, …).
    pub reason: String,
}
