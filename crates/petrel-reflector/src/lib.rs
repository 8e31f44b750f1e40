//! Petrel's DraARLv1 voice reflector (`specs/draarl-v1.md`).
//!
//! What lives here:
//! - [`codec`]: the wire formats (90-byte header, heartbeat/config/voice DATA,
//!   `.raw` recordings).
//! - [`session`]: the sans-IO session core — password login, bans, rate
//!   limits, conflicts, liveness, talkgroup routing and receiver snapshots.
//! - [`policy`]: the token-bucket, ban-ladder and half-duplex tables it uses.
//! - [`recording`]: voice recordings per talker, written as `.raw` files.
//! - [`directory`]: the in-memory users/groups/devices view it routes by.
//! - [`fanout`]: the whole-frame queue and parallel batched send paths.
//! - [`store`]: SQLite persistence (sqlx) with versioned migrations.
//! - [`server`]: the threads and tasks that run all of the above on a UDP socket.
//! - [`http`]: `/healthz`, Prometheus `/metrics` and the token-auth admin API.
//! - [`loadgen`]: the `petrel bench reflector` fan-out load generator.
//!
//! What does not: generic UDP transport (`petrel`), link emulation
//! (`petrel-netem`), load-generation reports (`petrel-bench`), the CLI
//! (`petrel-cli`). Ghost (Type 1 JWT) sessions, WebSocket clients and the
//! edge interconnect are not implemented.
#![cfg_attr(test, allow(clippy::unwrap_used))]

pub mod codec;
pub mod directory;
pub mod fanout;
pub mod http;
pub mod loadgen;
pub mod policy;
pub mod recording;
pub mod server;
pub mod session;
pub mod store;
