//! Where a receiver or an app session is reached (`specs/draarl-apps.md`
//! §2.4, §4): a UDP transport address, or a WebSocket connection of the
//! HTTP port. Physical devices are always UDP.

use std::net::SocketAddr;

/// A WebSocket connection, numbered by the runtime from 1 (0 is never used).
pub type ConnectionId = u64;

/// How an app session reaches its client.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Endpoint {
    /// A UDP client at its transport address (after PROXY stripping).
    Udp(SocketAddr),
    /// A WebSocket client on a connection of the HTTP port.
    WebSocket(ConnectionId),
}

impl Endpoint {
    /// `udp` or `websocket`, as `GET /api/radio/sessions` names the
    /// transport (§3.3).
    pub fn transport_name(self) -> &'static str {
        match self {
            Self::Udp(_) => "udp",
            Self::WebSocket(_) => "websocket",
        }
    }
}
