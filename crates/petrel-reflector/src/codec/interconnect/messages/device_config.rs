//! The 0x24 DeviceConfig payload (draarl-interconnect §3.11): `sync` and
//! `report` (edge → centre), `down` (centre → edge, a complete Type 3
//! packet) and `result` (both), with their size rules.

use serde::{Deserialize, Serialize};
use thiserror::Error;

fn is_zero_u64(v: &u64) -> bool {
    *v == 0
}
fn is_false(v: &bool) -> bool {
    !*v
}

/// Largest `report` data, in bytes.
pub const MAX_REPORT_DATA: usize = 710;
/// Smallest `down` packet (a bare header), in bytes.
pub const MIN_DOWN_PACKET: usize = 90;
/// Largest `down` packet, in bytes.
pub const MAX_DOWN_PACKET: usize = 800;

/// One 0x24 message.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct DeviceConfigMessage {
    /// `sync`, `report`, `down` or `result`.
    pub kind: String,
    /// Device session.
    pub session_id: u64,
    /// Its epoch.
    pub session_epoch: u64,
    /// Device id.
    pub device_id: i64,
    /// Report: the device's SET report data (1..=710 bytes).
    #[serde(
        with = "super::base64_bytes",
        default,
        skip_serializing_if = "Vec::is_empty"
    )]
    pub data: Vec<u8>,
    /// Down: the complete Type 3 packet (90..=800 bytes).
    #[serde(
        with = "super::base64_bytes",
        default,
        skip_serializing_if = "Vec::is_empty"
    )]
    pub packet: Vec<u8>,
    /// Result: MessageID of the request.
    #[serde(default, skip_serializing_if = "is_zero_u64")]
    pub ack_for_message_id: u64,
    /// Result: processed or delivered.
    #[serde(default, skip_serializing_if = "is_false")]
    pub success: bool,
    /// Result: why not.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub error: String,
}

/// Why a 0x24 message is invalid.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Error)]
pub enum DeviceConfigError {
    /// Not one of the four kinds.
    #[error("unknown device config kind")]
    UnknownKind,
    /// A report whose data is empty or over 710 bytes.
    #[error("report data of {0} bytes is outside 1..=710")]
    ReportSize(usize),
    /// A down packet outside 90..=800 bytes.
    #[error("down packet of {0} bytes is outside 90..=800")]
    DownSize(usize),
    /// A result without the request's MessageID.
    #[error("result without ack_for_message_id")]
    NoAckId,
}

impl DeviceConfigMessage {
    /// Checks the size and acknowledgement rules of §3.11.
    ///
    /// # Errors
    /// [`DeviceConfigError`].
    pub fn validate(&self) -> Result<(), DeviceConfigError> {
        match self.kind.as_str() {
            "sync" => Ok(()),
            "report" if (1..=MAX_REPORT_DATA).contains(&self.data.len()) => Ok(()),
            "report" => Err(DeviceConfigError::ReportSize(self.data.len())),
            "down" if (MIN_DOWN_PACKET..=MAX_DOWN_PACKET).contains(&self.packet.len()) => Ok(()),
            "down" => Err(DeviceConfigError::DownSize(self.packet.len())),
            "result" if self.ack_for_message_id != 0 => Ok(()),
            "result" => Err(DeviceConfigError::NoAckId),
            _ => Err(DeviceConfigError::UnknownKind),
        }
    }
}
