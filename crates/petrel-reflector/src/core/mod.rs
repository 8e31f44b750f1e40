//! The sans-IO session core: feed it `(now, source, datagram)`, then poll it
//! for replies, fan-out frames, store events, password checks (which the
//! runtime runs elsewhere and answers) and finished recordings. It owns
//! device sessions, authentication, bans, floors and forwarding decisions
//! (draarl-v1 §2.2, §3), and never reads a clock, touches a socket, awaits
//! the database, runs Argon2 or blocks: time comes in as an argument, and
//! state shared with other shards through a port (below).
//!
//! Ingress is sharded (§4.1): an [`Ingress`] front rate-limits each datagram
//! and picks the shard owning its device (username + SSID); each shard is
//! one [`Reflector`] with the sessions of its devices. What spans shards
//! (domain receivers and snapshots, floors, the ban ladder, the Argon2
//! budget, the verified-password cache, the session count) is reached
//! through the [`CrossShard`] port each shard is given; see
//! [`cross_shard`](CrossShard) for the tables and why they are split the
//! way they are. With one shard, [`Reflector::new`] owns them itself.
//!
//! Files: `reflector.rs` (the shard's sessions and the dispatch),
//! `login.rs` (Type 2), `auth.rs` (password checks off the ingress path),
//! `forward.rs` (Types 3/4/5 and fan-out planning), `replies.rs`
//! (heartbeat replies), `ingress.rs` (the front), `cross_shard.rs`,
//! `recorder.rs` (voice recording), `stats.rs`.

mod auth;
mod cross_shard;
mod forward;
mod ingress;
mod login;
mod recorder;
mod reflector;
mod replies;
mod stats;

#[cfg(test)]
pub(crate) mod tests;

pub use cross_shard::{
    Credential, CrossShard, DomainCache, LocalTables, LoginGuard, Member, Membership,
    SnapshotSource,
};
pub use ingress::{shard_of, Ingress, IngressStats};
pub use recorder::{Recorder, RecorderStats};
pub use reflector::Reflector;
pub use replies::RejectReason;
pub use stats::SessionStats;
