//! The 0x25 DeviceSessionConfirm payload (draarl-interconnect §3.9): the
//! edge's batches of live sessions after a centre restart, the batch rules,
//! and the centre's results.

use std::collections::HashSet;

use serde::{Deserialize, Serialize};
use thiserror::Error;

use super::device_session::DeviceGrant;

/// Most items in one batch.
pub const MAX_CONFIRM_BATCH: usize = 128;
/// Longest ghost recovery ticket, in bytes.
pub const MAX_RECOVERY_TICKET: usize = 1024;

fn is_zero_u8(v: &u8) -> bool {
    *v == 0
}

/// One session to reconfirm.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct ConfirmItem {
    /// The old device session id.
    pub session_id: u64,
    /// Its epoch.
    pub session_epoch: u64,
    /// The OLD control session id.
    pub control_session_id: u64,
    /// Device id (0 for ghosts).
    pub device_id: i64,
    /// Owner account.
    pub owner_id: i64,
    /// SSID.
    pub ssid: u8,
    /// Device model (ghosts).
    #[serde(default, skip_serializing_if = "is_zero_u8")]
    pub dev_model: u8,
    /// Ghost session id.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub ghost_session_id: String,
    /// Ghost client instance.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub client_instance_id: String,
    /// Ghost recovery ticket (≤ 1024 bytes).
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub recovery_ticket: String,
}

/// The edge's request.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct ConfirmRequest {
    /// Request id.
    pub request_id: u64,
    /// Up to 128 sessions.
    pub sessions: Vec<ConfirmItem>,
}

/// One result.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct ConfirmResult {
    /// Echo of the old session id.
    pub session_id: u64,
    /// Echo of the old epoch.
    pub session_epoch: u64,
    /// Confirmed (then a grant is required).
    pub success: bool,
    /// Why not.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub error: String,
    /// The fresh activation.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub grant: Option<DeviceGrant>,
}

/// The centre's response.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct ConfirmResponse {
    /// The request's id.
    pub request_id: u64,
    /// One per item.
    pub results: Vec<ConfirmResult>,
}

/// Why a batch is refused (as a whole).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Error)]
pub enum ConfirmError {
    /// Empty, or more than 128 items.
    #[error("batch of {0} items is outside 1..=128")]
    BatchSize(usize),
    /// A zero session id, epoch or control session id.
    #[error("item with a zero id")]
    ZeroId,
    /// The same session id, device id or owner+SSID(+instance) twice.
    #[error("duplicate session, device or identity in the batch")]
    Duplicate,
    /// A physical item with ghost fields.
    #[error("physical item carries ghost fields")]
    PhysicalWithGhostFields,
    /// A ghost item without a device model or ticket, or a ticket over
    /// 1024 bytes.
    #[error("ghost item without a usable ticket or device model")]
    GhostTicket,
    /// A success without a grant.
    #[error("successful result without a grant")]
    SuccessWithoutGrant,
}

impl ConfirmRequest {
    /// Checks the batch rules of §3.9.
    ///
    /// # Errors
    /// [`ConfirmError`].
    pub fn validate(&self) -> Result<(), ConfirmError> {
        let n = self.sessions.len();
        if n == 0 || n > MAX_CONFIRM_BATCH {
            return Err(ConfirmError::BatchSize(n));
        }
        let mut sessions = HashSet::new();
        let mut devices = HashSet::new();
        let mut identities = HashSet::new();
        for item in &self.sessions {
            if item.session_id == 0 || item.session_epoch == 0 || item.control_session_id == 0 {
                return Err(ConfirmError::ZeroId);
            }
            let ghost = item.device_id == 0;
            if ghost {
                if item.dev_model == 0
                    || item.recovery_ticket.is_empty()
                    || item.recovery_ticket.len() > MAX_RECOVERY_TICKET
                {
                    return Err(ConfirmError::GhostTicket);
                }
            } else if !item.ghost_session_id.is_empty()
                || !item.client_instance_id.is_empty()
                || !item.recovery_ticket.is_empty()
            {
                return Err(ConfirmError::PhysicalWithGhostFields);
            }
            let identity = (item.owner_id, item.ssid, item.client_instance_id.as_str());
            if !sessions.insert(item.session_id)
                || (!ghost && !devices.insert(item.device_id))
                || !identities.insert(identity)
            {
                return Err(ConfirmError::Duplicate);
            }
        }
        Ok(())
    }
}

impl ConfirmResponse {
    /// Checks that every success carries a grant.
    ///
    /// # Errors
    /// [`ConfirmError::SuccessWithoutGrant`].
    pub fn validate(&self) -> Result<(), ConfirmError> {
        if self.results.iter().any(|r| r.success && r.grant.is_none()) {
            return Err(ConfirmError::SuccessWithoutGrant);
        }
        Ok(())
    }
}
