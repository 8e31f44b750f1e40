//! How a session reached the reflector (draarl-v1 §3.1 physical devices,
//! §3.3 UDP ghosts, §4.4 WebSocket): the operator dashboard's "device
//! kind" and its per-group session counts.

use serde::Serialize;

/// The transport and login of one session.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum DeviceKind {
    /// A device logged in with a Type 2 heartbeat and its password (§3.1).
    Udp,
    /// An app logged in over UDP with a Type 1 JWT handshake (§3.3).
    Ghost,
    /// A web client on the WebSocket endpoint (§4.4).
    WebSocket,
}

impl DeviceKind {
    /// Every kind, in the order the dashboard lists them.
    pub const ALL: [Self; 3] = [Self::Udp, Self::Ghost, Self::WebSocket];

    /// The name used in JSON: `udp`, `ghost` or `websocket`.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Udp => "udp",
            Self::Ghost => "ghost",
            Self::WebSocket => "websocket",
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn json_names_match_as_str() {
        for k in DeviceKind::ALL {
            assert_eq!(
                serde_json::to_value(k).unwrap(),
                serde_json::Value::String(k.as_str().into())
            );
        }
    }
}
