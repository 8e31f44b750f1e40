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
//! - a retransmission timeout is undone when the timed-out segment's ACK echoes
//!   the `ts` of its original transmission (Eifel detection, RFC 3522 §2): the
//!   controller restores its window and timed-out segments not yet resent go
//!   back into flight (after RFC 4015),
//!   counted in [`KcpStats::spurious_rto_undone`];
//! - congestion control is pluggable ([`crate::cc`]), limiting bytes in flight; each
//!   transmission is stamped for delivery-rate sampling, and when the controller
//!   paces, data leaves through a token-bucket [`Pacer`](crate::cc::Pacer) at its
//!   pacing rate (retransmissions first), with the next release in `poll_timeout`;
//! - the zero-window probe is a persist timer starting at one RTO (RFC 9293) instead of
//!   the reference's fixed 7 s;
//! - every queue is bounded (`send_queue_limit`, windows, ack list), every drop counted
//!   in [`KcpStats`];
//! - the dead-link limit counts retransmissions and ends the connection with
//!   [`KcpError::DeadLink`].
//!
//! Stream mode (the reference's `kcp->stream`) is [`KcpConfig::stream`]; message mode is
//! the default.
//!
//! Buffers start empty and grow to the windows on use, then keep their capacity, so an
//! idle connection costs a few hundred bytes and no timer, and a busy one allocates
//! nothing per packet after warm-up except for out-of-order segments.
//!
//! # Driving a connection
//!
//! After every `send`, `input`, `recv` or `handle_timeout`, call `poll_transmit` until
//! it returns false; then sleep until `poll_timeout` (forever if `None`) or the next
//! datagram, whichever comes first.
//!
//! ```
//! use std::time::{Duration, Instant};
//! use petrel_proto::kcp::{Kcp, KcpConfig};
//!
//! let t0 = Instant::now();
//! let mut a = Kcp::new(7, KcpConfig::default(), t0)?;
//! let mut b = Kcp::new(7, KcpConfig::default(), t0)?;
//! a.send(b"hello")?;
//! let mut datagram = Vec::new();
//! let now = t0 + Duration::from_millis(1);
//! while a.poll_transmit(now, &mut datagram) {
//!     b.input(now, &datagram)?; // a real runtime sends it over UDP
//! }
//! assert_eq!(b.recv().as_deref(), Some(&b"hello"[..]));
//! while b.poll_transmit(now, &mut datagram) {
//!     a.input(now, &datagram)?; // the ack
//! }
//! assert_eq!(a.pending_segments(), 0);
//! assert_eq!(a.poll_timeout(), None); // idle: nothing to wake up for
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```

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
    ConfigError, KcpConfig, KcpPreset, UnknownPreset, MAX_MTU, MAX_RTO, MIN_MTU, NODELAY_MIN_RTO,
    NORMAL_MIN_RTO,
};
pub use connection::{Kcp, WRITE_WAKE_ROOM};
pub use error::{InputError, KcpError, SendError};
pub use segment::{peek_conv, DecodeError, HEADER_LEN};
pub use stats::KcpStats;
