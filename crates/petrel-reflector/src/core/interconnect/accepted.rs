//! A Type 0 frame that passed the acceptance pipeline
//! (draarl-interconnect §4.3), as the data plane hands it on.

use std::time::Instant;

use crate::codec::interconnect::{EnvelopeHeader, NodeId, RelayFrame};

/// An authenticated, fresh, first-seen frame from a node's data address.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Accepted {
    /// The node it came from (at the edge: `center`).
    pub node_id: NodeId,
    /// The envelope fields.
    pub header: EnvelopeHeader,
    /// The envelope payload (a copy, so the receive buffer can be reused).
    pub payload: Vec<u8>,
    /// When it was read off the socket (monotonic; the queue age and the
    /// §4.7 200 ms budget count from here).
    pub received_at: Instant,
}

impl Accepted {
    /// The relay payload for subtypes 0x30/0x31 (checked on acceptance, so
    /// `Some` for every accepted relay); `None` for other subtypes.
    pub fn relay(&self) -> Option<RelayFrame<'_>> {
        if self.header.subtype.is_relay() {
            RelayFrame::parse(&self.payload).ok()
        } else {
            None
        }
    }
}
