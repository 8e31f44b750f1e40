//! Envelopes sent over a control connection (draarl-interconnect §3.4,
//! §3.5): the fields a sender chooses, the sealing shared by centre and
//! edge (the session's id, key and key epoch, the process-wide MessageID,
//! the wall clock as SentAtMillis, hop 0), and why a send fails.

use thiserror::Error;

use super::super::wall_clock::unix_ms;
use crate::codec::interconnect::{
    seal, Channel, ControlMessage, EnvelopeHeader, Flags, NodeId, NodeKey, SealError, Subtype,
};
use crate::core::interconnect::ControlSend;

/// Frames queued toward one peer; beyond it they are dropped and counted.
pub const SEND_QUEUE: usize = 1024;
/// The `node_protocol_error` text for an unknown CRITICAL subtype (§3.4).
pub const UNSUPPORTED_CRITICAL: &str = "unsupported critical Type 0 subtype";

/// The envelope fields a sender chooses (§3.5); the rest are the
/// session's.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ControlEnvelope {
    /// The subtype.
    pub subtype: Subtype,
    /// The flags (CONTROL, ACK, CRITICAL …).
    pub flags: Flags,
    /// ClusterEpoch.
    pub cluster_epoch: u64,
    /// ProjectionVersion.
    pub projection_version: u64,
}

impl ControlEnvelope {
    /// The envelope fields of a message the control logic built.
    pub fn of(send: &ControlSend) -> Self {
        Self {
            subtype: send.subtype,
            flags: send.flags,
            cluster_epoch: send.cluster_epoch,
            projection_version: send.projection_version,
        }
    }
}

/// Why an envelope was not queued.
#[derive(Debug, Error)]
pub enum ControlSendError {
    /// No live session with that peer.
    #[error("no live node session")]
    NoSession,
    /// The peer's send queue is full (counted in `send_queue_drops`).
    #[error("the send queue is full")]
    QueueFull,
    /// The envelope could not be sealed (payload too long for the control
    /// channel).
    #[error(transparent)]
    Seal(#[from] SealError),
}

/// One session's sending side as the sealing needs it.
pub(super) struct SessionKeys<'a> {
    /// This side's node id (`center` at the centre).
    pub(super) source: NodeId,
    /// The node session id.
    pub(super) session_id: u64,
    /// The session key.
    pub(super) key: &'a NodeKey,
    /// The key epoch (1).
    pub(super) key_epoch: u32,
}

/// Seals `payload` as message `message_id` of the session and wraps it in
/// a `type0` frame.
pub(super) fn seal_frame(
    keys: &SessionKeys<'_>,
    message_id: u64,
    envelope: &ControlEnvelope,
    payload: &[u8],
) -> Result<ControlMessage, SealError> {
    let header = EnvelopeHeader {
        source: keys.source,
        subtype: envelope.subtype,
        flags: envelope.flags,
        cluster_epoch: envelope.cluster_epoch,
        projection_version: envelope.projection_version,
        node_session_id: keys.session_id,
        message_id,
        sent_at_ms: unix_ms(),
        hop_count: 0,
        key_epoch: keys.key_epoch,
    };
    let sealed = seal(&header, payload, keys.key, Channel::Control)?;
    Ok(ControlMessage::type0(&sealed, message_id))
}
