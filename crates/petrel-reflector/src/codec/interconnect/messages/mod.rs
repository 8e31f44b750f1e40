//! Serde types of the JSON payloads of the §3.5 message catalogue
//! (draarl-interconnect): heartbeat (0x05), credential rotation (0x07, §3.3),
//! route sync with the §3.7 route (0x10–0x15), device authentication,
//! renew, report and revoke (0x20–0x23, §3.8), device configuration (0x24,
//! §3.11), session confirmation (0x25, §3.9) and the speaker lease (0x28,
//! §3.10); DataBind (0x06) is [`super::DataBind`]. Integers are full
//! 64-bit; byte arrays are padded standard base64; optional keys are
//! omitted when empty, as Go's `omitempty` does. The `validate` methods
//! apply the rules the spec gives per message.

mod base64_bytes;
mod credential;
mod device_config;
mod device_session;
mod heartbeat;
mod route_sync;
mod session_confirm;
mod speaker_lease;

#[cfg(test)]
mod tests;

pub use credential::{CredentialError, CredentialMessage};
pub use device_config::{
    DeviceConfigError, DeviceConfigMessage, MAX_DOWN_PACKET, MAX_REPORT_DATA, MIN_DOWN_PACKET,
};
pub use device_session::{
    DeviceAuthRequest, DeviceAuthResponse, DeviceGrant, DeviceSessionRenew, DeviceSessionReport,
    DeviceSessionRevoke,
};
pub use heartbeat::{Heartbeat, TrafficReport};
pub use route_sync::{
    DeviceRoute, RouteAck, RouteDelta, RouteOperation, RouteResyncRequest, RouteSnapshotBegin,
    RouteSnapshotChunk, RouteSnapshotCommit,
};
pub use session_confirm::{
    ConfirmError, ConfirmItem, ConfirmRequest, ConfirmResponse, ConfirmResult, MAX_CONFIRM_BATCH,
    MAX_RECOVERY_TICKET,
};
pub use speaker_lease::SpeakerLease;
