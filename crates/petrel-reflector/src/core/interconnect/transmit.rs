//! An envelope the data plane wants sent, and by which path
//! (draarl-interconnect §4.5: downstream goes over TLS until the target's
//! data address is bound; §3.1 `type0` frames).

use std::net::SocketAddr;

use crate::codec::interconnect::NodeId;

/// Where an outbound envelope goes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Path {
    /// A UDP datagram to the node's data address.
    Udp(SocketAddr),
    /// The node's control connection: the runtime wraps it in a `type0`
    /// frame (§3.1; sealed with the control size limit).
    Control,
}

/// An envelope to send.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Outbound {
    /// The node it is for.
    pub node_id: NodeId,
    /// That node's session id (the runtime drops the envelope if the
    /// session was replaced before sending).
    pub session_id: u64,
    /// UDP or control connection.
    pub path: Path,
    /// The sealed envelope.
    pub datagram: Vec<u8>,
}
