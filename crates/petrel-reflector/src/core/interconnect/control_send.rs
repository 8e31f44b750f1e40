//! A control message the interconnect's control logic wants sent
//! (draarl-interconnect §3.4, §3.5): the envelope fields the logic decides
//! (subtype, flags, MessageID, cluster epoch, projection version) and the
//! JSON payload. The runtime adds the session fields (source, node session
//! id, key epoch, `SentAtMillis`), seals it with the session key for the
//! control channel and writes it as a `type0` frame.
//!
//! ```text
//!  control logic ─▶ ControlSend{subtype, flags, id, epoch, PV, JSON} ─runtime─▶ seal(Control) ─▶ type0 frame
//! ```

use serde::Serialize;

use crate::codec::interconnect::{Flags, Subtype};

/// One Type 0 control envelope to send over TLS.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ControlSend {
    /// The subtype (§3.5).
    pub subtype: Subtype,
    /// The flags (§3.5; informational except CRITICAL).
    pub flags: Flags,
    /// The MessageID (never 0; a resend keeps it, §3.7).
    pub message_id: u64,
    /// Envelope ClusterEpoch (0 where §3.5 lists none).
    pub cluster_epoch: u64,
    /// Envelope ProjectionVersion (0 where §3.5 lists none).
    pub projection_version: u64,
    /// The JSON payload.
    pub payload: Vec<u8>,
}

impl ControlSend {
    /// A message with `payload` encoded as compact JSON.
    pub(crate) fn json<T: Serialize>(
        subtype: Subtype,
        flags: Flags,
        message_id: u64,
        cluster_epoch: u64,
        projection_version: u64,
        payload: &T,
    ) -> Self {
        Self {
            subtype,
            flags,
            message_id,
            cluster_epoch,
            projection_version,
            // Serialising these plain structs cannot fail (no maps with
            // non-string keys, no custom serialisers that error).
            payload: serde_json::to_vec(payload).unwrap_or_default(),
        }
    }

    /// The payload decoded as `T` (for the runtime's logging and for tests).
    ///
    /// # Errors
    /// The JSON error when the payload is not a `T`.
    pub fn decode<'a, T: serde::Deserialize<'a>>(&'a self) -> Result<T, serde_json::Error> {
        serde_json::from_slice(&self.payload)
    }
}

/// Control flags of a reliable control message (CONTROL | ACK).
pub(crate) fn reliable() -> Flags {
    Flags::CONTROL.with(Flags::ACK)
}
