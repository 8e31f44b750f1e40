//! Sans-IO protocol state machines for Petrel's reliable UDP.
//!
//! Everything here is fed `(now, datagram)` and polled for datagrams to send and
//! the next deadline. Nothing in this crate opens a socket, spawns a task or reads
//! a clock: time is always an argument, which makes every protocol test a
//! deterministic simulation.
//!
//! What does not live here: sockets, timers and tasks (`petrel`), the impairment
//! emulator (`petrel-netem`), benchmarks (`petrel-bench`).

#![cfg_attr(test, allow(clippy::unwrap_used))]

pub mod fec;
