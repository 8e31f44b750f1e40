//! Serde types of the JSON payloads of the §3.5 message catalogue
//! (draarl-interconnect) that the minimum subset of §10 needs: heartbeat,
//! route sync (with the §3.7 route), device authentication, renew, report
//! and revoke (§3.8), and the speaker lease (§3.10). Integers are full
//! 64-bit; byte arrays are padded standard base64; optional keys are
//! omitted when empty, as Go's `omitempty` does. Not here: credential
//! rotation (0x07), device configuration (0x24) and session confirmation
//! (0x25).

mod base64_bytes;
mod device_session;
mod heartbeat;
mod route_sync;
mod speaker_lease;

#[cfg(test)]
mod tests;

pub use device_session::{
    DeviceAuthRequest, DeviceAuthResponse, DeviceGrant, DeviceSessionRenew, DeviceSessionReport,
    DeviceSessionRevoke,
};
pub use heartbeat::{Heartbeat, TrafficReport};
pub use route_sync::{
    DeviceRoute, RouteAck, RouteDelta, RouteOperation, RouteResyncRequest, RouteSnapshotBegin,
    RouteSnapshotChunk, RouteSnapshotCommit,
};
pub use speaker_lease::SpeakerLease;
