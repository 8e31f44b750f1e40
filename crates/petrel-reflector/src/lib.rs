//! Petrel's DraARLv1 voice reflector (`specs/draarl-v1.md`).
//!
//! What lives here:
//! - [`codec`]: the wire formats (90-byte header, heartbeat/config/voice DATA,
//!   `.raw` recordings).
//! - [`session`]: the sans-IO session core — the ingress front (rate limits,
//!   shard by username + SSID), password login, bans, conflicts, liveness,
//!   talkgroup routing, and the state shards share (receiver snapshots,
//!   floors).
//! - [`verifier`]: the fixed Argon2id thread pool that runs its password
//!   checks in reused memory.
//! - [`policy`]: the token-bucket, ban-ladder and half-duplex tables it uses.
//! - [`recording`]: voice recordings per talker, written as `.raw` files.
//! - [`directory`]: the in-memory users/groups/devices view it routes by.
//! - [`fanout`]: the whole-frame queue and parallel batched send paths.
//! - [`store`]: SQLite or PostgreSQL persistence (sqlx) with versioned migrations.
//! - [`server`]: the threads and tasks that run all of the above on a UDP socket.
//! - [`http`]: `/healthz`, Prometheus `/metrics` and the token-auth admin API.
//!
//! What does not: generic UDP transport (`petrel`), link emulation
//! (`petrel-netem`), the `petrel bench reflector` load generator and its reports (`petrel-bench`), the CLI
//! (`petrel-cli`), HTML/JSON benchmark reports (`petrel-bench`).
//!
//! Not implemented (yet): ghost app sessions (Type 1 JWT, `source_group_id`
//! downlink), WebSocket clients, the edge interconnect (Type 0), PROXY
//! protocol v2, private groups with membership, pushing a stored Type 3
//! configuration to a device (the reflector only queries it).
//!
//! Departures from the reference server, each from draarl-v1 §9: Types 3/4/5
//! are bound to the authenticated endpoint; heartbeat replies never echo the
//! password; rate limits are token buckets; device passwords are Argon2id
//! hashes; receiver snapshots are invalidated per domain and in-flight frames
//! are never dropped for a membership change; sends are batched with
//! `sendmmsg`.
#![cfg_attr(test, allow(clippy::unwrap_used))]

pub mod codec;
pub mod directory;
pub mod fanout;
pub mod http;
pub mod policy;
pub mod recording;
pub mod server;
pub mod session;
pub mod store;
pub mod verifier;
