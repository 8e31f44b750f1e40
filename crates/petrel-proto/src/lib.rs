//! Sans-IO protocol state machines for Petrel's reliable UDP.
//!
//! Everything here is fed `(now, datagram)` and polled for datagrams to send and
//! the next deadline. Nothing in this crate opens a socket, spawns a task or reads
//! a clock: time is always an argument, which makes every protocol test a
//! deterministic simulation.
//!
//! What lives here:
//! - [`kcp`]: the KCP-compatible ARQ (segment codec, windows, acks, RTO and the
//!   undo of spurious timeouts, fragmentation, window probing, dead-link detection);
//! - [`cc`]: congestion control: the trait the ARQ calls, delivery-rate sampling, the
//!   pacer, the controllers (none, NewReno, CUBIC with HyStart++, BBRv1/v2/v3), their
//!   registry, and the factory trait a user-supplied controller plugs in through;
//! - [`fec`]: Reed–Solomon forward error correction below the ARQ (native and kcp-go
//!   framing, fixed and adaptive parity, early-closed groups for sparse traffic,
//!   memory budget);
//! - [`handshake`]: native (cookie), legacy (SYN/SYN-ACK/FIN) and raw connection
//!   establishment, plus the per-connection keepalive / idle / close control plane;
//! - [`session`]: one connection after its handshake — KCP over optional FEC plus
//!   the control plane — composed into a single machine for the runtime.
//!
//! What does not live here: sockets, timers and tasks (`petrel`), the impairment
//! emulator (`petrel-netem`), benchmarks (`petrel-bench`).
#![cfg_attr(test, allow(clippy::unwrap_used))]

pub mod cc;
pub mod fec;
pub mod handshake;
pub mod kcp;
pub mod session;
