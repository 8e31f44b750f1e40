//! A KCP-compatible ARQ as a sans-IO state machine (`specs/kcp.md` §1; reference
//! implementation `ikcp.c` by skywind3000).
//!
//! [`Kcp`] is fed received datagrams with [`Kcp::input`] and the time with
//! [`Kcp::handle_timeout`]; it is polled for datagrams with [`Kcp::poll_transmit`]
//! and for its next deadline with [`Kcp::poll_timeout`]. It never reads a clock.
//!
//! On the wire it is the reference protocol: the 24-byte segment of [`segment`],
//! PUSH/ACK/WASK/WINS, selective acks with `(sn, ts)` plus cumulative `una`, message
//! mode with `frg` counting down, window flow control. What differs is local policy:
//! - timers are exact deadlines, not a fixed 10 ms tick; data goes out on the next
//!   `poll_transmit` and acks right after `input` (`ack_nodelay`);
//! - RTT is measured with µs precision from our own send times (the `ts` echo picks
//!   the transmission), the RTO follows RFC 6298 with the reference's floor and cap;
//! - congestion control is pluggable ([`crate::cc`]), limiting bytes in flight;
//! - the zero-window probe is a persist timer starting at one RTO (RFC 9293) instead of
//!   the reference's fixed 7 s;
//! - every queue is bounded (`send_queue_limit`, windows, ack list), every drop counted
//!   in [`KcpStats`];
//! - the dead-link limit counts retransmissions and ends the connection with
//!   [`KcpError::DeadLink`].
//!
//! Stream mode is not implemented (message mode only).

mod config;
mod connection;
mod error;
mod output;
mod recv_buf;
mod rtt;
pub mod segment;
mod send_buf;
mod stats;

pub use config::{
    ConfigError, KcpConfig, MAX_MTU, MAX_RTO, MIN_MTU, NODELAY_MIN_RTO, NORMAL_MIN_RTO,
};
pub use connection::Kcp;
pub use error::{InputError, KcpError, SendError};
pub use segment::{peek_conv, DecodeError, HEADER_LEN};
pub use stats::KcpStats;
