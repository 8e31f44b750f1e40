//! Errors of the runtime API.

use std::io;

use petrel_proto::fec::ShapeMismatch;
use petrel_proto::kcp::SendError;

/// Why a connection ended or an operation on it failed.
#[derive(Debug, Clone, thiserror::Error, PartialEq, Eq)]
pub enum ConnectionError {
    /// The message exceeds the largest message the connection carries.
    #[error("message of {len} bytes exceeds the maximum of {max} bytes")]
    MessageTooLarge {
        /// Message length in bytes.
        len: usize,
        /// Largest message in bytes (`Connection::max_message_size`).
        max: usize,
    },
    /// A segment was retransmitted `dead_link` times without an ack (KCP `dead_link`).
    #[error("dead link: the peer stopped acknowledging")]
    DeadLink,
    /// Nothing arrived from the peer within the idle timeout.
    #[error("idle timeout: nothing received from the peer")]
    IdleTimeout,
    /// kcp-go FEC framing: the peer's data/parity shard counts are not ours
    /// (both named); its parity cannot be used, so the connection ended.
    #[error(transparent)]
    FecShapeMismatch(ShapeMismatch),
    /// The connection was closed, locally or by the peer.
    #[error("connection closed")]
    Closed,
    /// The endpoint that owns the connection was dropped.
    #[error("endpoint shut down")]
    EndpointGone,
}

impl ConnectionError {
    pub(crate) fn from_send(err: SendError) -> Self {
        match err {
            SendError::MessageTooLarge { len, max } => Self::MessageTooLarge { len, max },
            _ => Self::DeadLink,
        }
    }
}

/// Why `Endpoint::connect` failed.
#[derive(Debug, thiserror::Error)]
pub enum ConnectError {
    /// The handshake got no valid answer within the connect timeout.
    #[error("connect timed out: no handshake reply from the server")]
    TimedOut,
    /// The server refused the handshake or answered with something invalid.
    #[error("handshake failed: {0}")]
    Handshake(String),
    /// The endpoint reached its `max_connections` bound.
    #[error("the endpoint already holds its maximum of {0} connections")]
    TooManyConnections(usize),
    /// The endpoint's `recv_buffer_budget` (bytes) has no room for one more
    /// connection's receive buffers.
    #[error("the endpoint's receive-buffer budget of {0} bytes is used up")]
    ReceiveBudget(usize),
    /// The endpoint was dropped while connecting.
    #[error("endpoint shut down")]
    EndpointGone,
    /// Sending on the socket failed.
    #[error("socket error: {0}")]
    Io(#[from] io::Error),
}
