//! Error values of the KCP state machine.

use thiserror::Error;

use super::segment::DecodeError;

/// Why [`Kcp::send`](super::Kcp::send) refused a message.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Error)]
pub enum SendError {
    /// The message exceeds [`Kcp::max_message_size`](super::Kcp::max_message_size).
    #[error("message of {len} bytes exceeds the maximum of {max} bytes")]
    MessageTooLarge {
        /// The message length, bytes.
        len: usize,
        /// The largest message accepted, bytes.
        max: usize,
    },
    /// The send queue is at `send_queue_limit` segments or holds `notsent_lowat`
    /// bytes; retry after acks drain it.
    #[error("send queue full")]
    QueueFull,
    /// The connection failed (see [`Kcp::error`](super::Kcp::error)).
    #[error("connection is dead")]
    Dead,
}

/// Why [`Kcp::input`](super::Kcp::input) rejected a datagram. A rejected datagram
/// has no effect at all (it is validated whole before any segment is applied).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Error)]
pub enum InputError {
    /// The datagram could not be decoded.
    #[error("malformed datagram: {0}")]
    Malformed(#[from] DecodeError),
    /// A segment belongs to another conversation.
    #[error("segment for conv {got}, this connection is conv {expected}")]
    ConvMismatch {
        /// This connection's conv.
        expected: u32,
        /// The segment's conv.
        got: u32,
    },
    /// The connection failed; input is ignored.
    #[error("connection is dead")]
    Dead,
}

/// A connection-level failure, reported by [`Kcp::error`](super::Kcp::error).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Error)]
pub enum KcpError {
    /// Segment `sn` timed out after `retransmissions` retransmissions (`dead_link`).
    #[error("dead link: segment {sn} unacknowledged after {retransmissions} retransmissions")]
    DeadLink {
        /// The segment that was never acknowledged.
        sn: u32,
        /// How often it was retransmitted.
        retransmissions: u32,
    },
}
