//! The 0x28 SpeakerLease payload (both directions; draarl-interconnect
//! §3.5, §3.10).

use serde::{Deserialize, Serialize};

fn is_zero_u32(v: &u32) -> bool {
    *v == 0
}

/// 0x28 SpeakerLease (both directions; §3.10). `action` is `claim`,
/// `grant`, `deny` or `release`.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct SpeakerLease {
    /// The action.
    pub action: String,
    /// Request id (claims).
    #[serde(default, skip_serializing_if = "is_zero_u64")]
    pub request_id: u64,
    /// Device session.
    pub session_id: u64,
    /// Its epoch.
    pub session_epoch: u64,
    /// Domain.
    pub domain_id: u64,
    /// Lease id (never 0 once granted).
    #[serde(default, skip_serializing_if = "is_zero_u64")]
    pub lease_id: u64,
    /// Grant: lease time to live, ms.
    #[serde(default, skip_serializing_if = "is_zero_u32")]
    pub ttl_ms: u32,
    /// Deny: retry after, ms.
    #[serde(default, skip_serializing_if = "is_zero_u32")]
    pub retry_after_ms: u32,
}

fn is_zero_u64(v: &u64) -> bool {
    *v == 0
}
