//! What the core hands the runtime to send: replies to one address, and
//! whole frames to fan out to a domain's receivers (draarl-v1 §4.2).

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Instant;

use super::endpoint::ConnectionId;
use super::snapshot::Snapshot;

/// A datagram to send to one address.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Transmit {
    /// Destination.
    pub dst: SocketAddr,
    /// Encoded datagram.
    pub payload: Vec<u8>,
}

/// What a [`Frame`] carries; the fan-out queue keeps each kind in its own
/// bounded queue, so text can never evict voice.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FrameKind {
    /// Type 5 voice.
    Voice,
    /// Type 4 text.
    Text,
}

/// One forwarded packet with its receivers, the unit of the fan-out queue.
#[derive(Debug, Clone)]
pub struct Frame {
    /// Voice or text.
    pub kind: FrameKind,
    /// When the core planned it; the fan-out engine drops frames older than its max age.
    pub created: Instant,
    /// The rewritten datagram (Reserved 0), shared by every physical target.
    pub packet: Arc<[u8]>,
    /// The same datagram with Reserved = the sender's group id, shared by
    /// every session-aware target (`specs/draarl-apps.md` §2.7); `None`
    /// when the snapshot has none.
    pub session_packet: Option<Arc<[u8]>>,
    /// Receivers of the sender's domain.
    pub snapshot: Arc<Snapshot>,
    /// The sender's UDP endpoint, skipped at send time (unspecified for a
    /// WebSocket sender).
    pub exclude: SocketAddr,
    /// The sender's WebSocket connection, skipped at send time.
    pub exclude_connection: Option<ConnectionId>,
}
