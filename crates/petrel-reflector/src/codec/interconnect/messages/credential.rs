//! The 0x07 Credential payload (draarl-interconnect §3.3): the centre's
//! `rotate` and the edge's `result`, with their validity rules. `Debug`
//! hides the credential.

use std::fmt;

use serde::{Deserialize, Serialize};
use thiserror::Error;

fn is_zero_u32(v: &u32) -> bool {
    *v == 0
}
fn is_zero_u64(v: &u64) -> bool {
    *v == 0
}
fn is_zero_i64(v: &i64) -> bool {
    *v == 0
}
fn is_false(v: &bool) -> bool {
    !*v
}

/// One 0x07 message: `kind` is `rotate` (centre → edge) or `result`.
#[derive(Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct CredentialMessage {
    /// `rotate` or `result`.
    pub kind: String,
    /// Rotate: the new long-term credential.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub credential: String,
    /// Its epoch.
    #[serde(default, skip_serializing_if = "is_zero_u32")]
    pub credential_epoch: u32,
    /// Rotate: until when the old credential stays valid, Unix ms.
    #[serde(default, skip_serializing_if = "is_zero_i64")]
    pub previous_valid_until_ms: i64,
    /// Result: MessageID of the rotate.
    #[serde(default, skip_serializing_if = "is_zero_u64")]
    pub ack_for_message_id: u64,
    /// Result: persisted.
    #[serde(default, skip_serializing_if = "is_false")]
    pub success: bool,
    /// Result: why not.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub error: String,
}

impl fmt::Debug for CredentialMessage {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("CredentialMessage")
            .field("kind", &self.kind)
            .field(
                "credential",
                &if self.credential.is_empty() {
                    ""
                } else {
                    "<hidden>"
                },
            )
            .field("credential_epoch", &self.credential_epoch)
            .field("previous_valid_until_ms", &self.previous_valid_until_ms)
            .field("ack_for_message_id", &self.ack_for_message_id)
            .field("success", &self.success)
            .field("error", &self.error)
            .finish()
    }
}

/// Why a 0x07 message is invalid.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Error)]
pub enum CredentialError {
    /// Neither `rotate` nor `result`.
    #[error("unknown credential message kind")]
    UnknownKind,
    /// A rotate without a credential embedding this node's id.
    #[error("rotate carries no credential for this node")]
    NotForThisNode,
    /// A rotate without a positive `previous_valid_until_ms`.
    #[error("rotate without a grace deadline")]
    NoGraceDeadline,
    /// A result that carries a credential.
    #[error("result carries a credential")]
    ResultWithCredential,
    /// A result without the rotate's MessageID.
    #[error("result without ack_for_message_id")]
    NoAckId,
}

impl CredentialMessage {
    /// Checks the rules of §3.3 for a message to or from `node_id`: a
    /// rotate carries a `draarl-node.<node_id>.…` credential and a positive
    /// grace deadline; a result carries no credential and a non-zero ack id.
    ///
    /// # Errors
    /// [`CredentialError`].
    pub fn validate(&self, node_id: &str) -> Result<(), CredentialError> {
        match self.kind.as_str() {
            "rotate" => {
                let mut parts = self.credential.split('.');
                let ok = parts.next() == Some("draarl-node")
                    && parts.next() == Some(node_id)
                    && parts.next().is_some_and(|s| !s.is_empty())
                    && parts.next().is_none();
                if !ok {
                    return Err(CredentialError::NotForThisNode);
                }
                if self.previous_valid_until_ms <= 0 {
                    return Err(CredentialError::NoGraceDeadline);
                }
                Ok(())
            }
            "result" => {
                if !self.credential.is_empty() {
                    return Err(CredentialError::ResultWithCredential);
                }
                if self.ack_for_message_id == 0 {
                    return Err(CredentialError::NoAckId);
                }
                Ok(())
            }
            _ => Err(CredentialError::UnknownKind),
        }
    }
}
