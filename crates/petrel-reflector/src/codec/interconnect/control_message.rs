//! The control-plane frame object, "ControlMessage" (draarl-interconnect
//! §3.1): every key optional and omitted when zero or empty except `kind`;
//! integers are full u64 (never floats); `type0` frames carry a Type 0
//! envelope as unpadded standard base64 in `packet`.

use std::fmt;

use base64::engine::general_purpose::STANDARD_NO_PAD;
use base64::Engine as _;
use serde::{Deserialize, Serialize};
use thiserror::Error;

use super::envelope::Channel;

fn is_zero_u8(v: &u8) -> bool {
    *v == 0
}
fn is_zero_u32(v: &u32) -> bool {
    *v == 0
}
fn is_zero_u64(v: &u64) -> bool {
    *v == 0
}

/// The `kind` values of §3.1.
pub mod kind {
    /// The edge's hello.
    pub const NODE_ENROLL: &str = "node_enroll";
    /// The centre accepts the hello.
    pub const NODE_AUTH_OK: &str = "node_auth_ok";
    /// The centre refuses the credential (or is full, or rate-limited).
    pub const NODE_AUTH_ERROR: &str = "node_auth_error";
    /// Negotiation failed, or an unsupported critical subtype arrived.
    pub const NODE_PROTOCOL_ERROR: &str = "node_protocol_error";
    /// The edge confirmed its sessions; the centre sends a snapshot.
    pub const NODE_READY: &str = "node_ready";
    /// A wrapped Type 0 envelope.
    pub const TYPE0: &str = "type0";
    /// Legacy raw heartbeat: accepted, never sent.
    pub const NODE_HEARTBEAT: &str = "node_heartbeat";
}

/// One control frame's JSON object. `Debug` hides `token`, `credential`
/// and `key`.
#[derive(Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct ControlMessage {
    /// The message kind (see [`kind`]).
    pub kind: String,
    /// Node id.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub node_id: String,
    /// Registration credential, long-term credential or static token (hello).
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub token: String,
    /// A newly issued long-term credential (`node_auth_ok`).
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub credential: String,
    /// Its epoch.
    #[serde(default, skip_serializing_if = "is_zero_u32")]
    pub credential_epoch: u32,
    /// Lowest protocol version offered.
    #[serde(default, skip_serializing_if = "is_zero_u8")]
    pub min_protocol: u8,
    /// Highest protocol version offered.
    #[serde(default, skip_serializing_if = "is_zero_u8")]
    pub max_protocol: u8,
    /// The chosen protocol version.
    #[serde(default, skip_serializing_if = "is_zero_u8")]
    pub protocol: u8,
    /// Feature bits offered or negotiated.
    #[serde(default, skip_serializing_if = "is_zero_u64")]
    pub features: u64,
    /// Feature bits required.
    #[serde(default, skip_serializing_if = "is_zero_u64")]
    pub required_features: u64,
    /// The node session id.
    #[serde(default, skip_serializing_if = "is_zero_u64")]
    pub session_id: u64,
    /// The key epoch (1).
    #[serde(default, skip_serializing_if = "is_zero_u32")]
    pub key_epoch: u32,
    /// The session key, unpadded standard base64.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub key: String,
    /// The wrapped envelope's MessageID (informational).
    #[serde(default, skip_serializing_if = "is_zero_u64")]
    pub message_id: u64,
    /// Raw JSON payload.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub payload: Option<serde_json::Value>,
    /// A Type 0 envelope, unpadded standard base64 (`type0`).
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub packet: String,
    /// Error text.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub error: String,
}

impl fmt::Debug for ControlMessage {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let hidden = |s: &String| if s.is_empty() { "" } else { "<hidden>" };
        f.debug_struct("ControlMessage")
            .field("kind", &self.kind)
            .field("node_id", &self.node_id)
            .field("token", &hidden(&self.token))
            .field("credential", &hidden(&self.credential))
            .field("credential_epoch", &self.credential_epoch)
            .field(
                "protocol",
                &(self.min_protocol, self.max_protocol, self.protocol),
            )
            .field("features", &(self.features, self.required_features))
            .field("session_id", &self.session_id)
            .field("key_epoch", &self.key_epoch)
            .field("key", &hidden(&self.key))
            .field("message_id", &self.message_id)
            .field("payload", &self.payload)
            .field("packet_len", &self.packet.len())
            .field("error", &self.error)
            .finish()
    }
}

/// Why a `type0` frame's packet was refused.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
pub enum Type0Error {
    /// The frame is not of kind `type0`.
    #[error("not a type0 frame")]
    NotType0,
    /// The packet is longer than a 65 535-byte envelope in base64.
    #[error("type0 packet of {0} base64 characters is too long")]
    TooLong(usize),
    /// Not unpadded standard base64.
    #[error("type0 packet is not unpadded standard base64")]
    BadBase64,
}

impl ControlMessage {
    /// A message of `kind` with every other field empty.
    pub fn new(kind: &str) -> Self {
        Self {
            kind: kind.to_owned(),
            ..Self::default()
        }
    }

    /// A `type0` frame wrapping `envelope` (§3.1).
    pub fn type0(envelope: &[u8], message_id: u64) -> Self {
        Self {
            kind: kind::TYPE0.to_owned(),
            message_id,
            packet: STANDARD_NO_PAD.encode(envelope),
            ..Self::default()
        }
    }

    /// The envelope of a `type0` frame (length checked before decoding).
    ///
    /// # Errors
    /// [`Type0Error`].
    pub fn type0_envelope(&self) -> Result<Vec<u8>, Type0Error> {
        if self.kind != kind::TYPE0 {
            return Err(Type0Error::NotType0);
        }
        let max = Channel::Control.max_len().div_ceil(3) * 4;
        if self.packet.len() > max {
            return Err(Type0Error::TooLong(self.packet.len()));
        }
        STANDARD_NO_PAD
            .decode(&self.packet)
            .map_err(|_| Type0Error::BadBase64)
    }
}
