//! The sans-IO session core: feed it `(now, source, datagram)`, then poll it
//! for replies, fan-out frames, store events, password checks (which the
//! runtime runs elsewhere and answers), finished recordings and talk
//! spurts. It owns
//! device sessions, authentication, bans, floors and forwarding decisions
//! (draarl-v1 §2.2, §3), and never reads a clock, touches a socket, awaits
//! the database, runs Argon2 or blocks: time comes in as an argument, and
//! state shared with other shards through a port (below).
//!
//! Ingress is sharded (§4.1): an [`Ingress`] front rate-limits each datagram
//! and picks the shard owning its device (username + SSID); each shard is
//! one [`Reflector`] with the sessions of its devices. With one shard,
//! [`Reflector::new`] owns everything itself.
//!
//! # Cross-shard state
//!
//! What spans shards (domain receivers and snapshots, floors, the ban
//! ladder, the Argon2 budget, the verified-password cache, the session
//! count) lives in three sans-IO tables split by traffic: a
//! [`DomainCache`] per domain (snapshot and floor: the only one the voice
//! path touches, once per frame, for the frame's own domain), the
//! [`Membership`] (touched when devices come, move or go; it also holds
//! the per-account and per-network endpoint caps) and the
//! [`LoginGuard`] (touched by logins). A shard reaches them through the
//! [`CrossShard`] port it is given, so their owner is the runtime's
//! choice: [`LocalTables`] for one shard, the runtime's `SharedTables` for
//! many, with a lock per stripe of domains rather than one lock per frame
//! for all of them. Password checks leave the core as
//! [`PasswordCheck`](crate::model::PasswordCheck)s numbered per shard; the
//! runtime answers each on the queue of the shard that emitted it.
//!
//! Files: `reflector.rs` (the shard's sessions and the dispatch),
//! `login.rs` (Type 2), `auth.rs` (password checks off the ingress path),
//! `endpoint_caps.rs` (online endpoints per account and per network),
//! `liveness.rs` (when an endpoint may receive, ICMP unreachable reports),
//! `forward.rs` (Types 3/4/5 and fan-out planning), `replies.rs`
//! (heartbeat replies), `ingress.rs` (the front), `cross_shard.rs`,
//! `recorder.rs` (voice recording), `talk_spurts.rs` (talk spurts for the
//! operator dashboard), `stats.rs`; for app ("ghost")
//! sessions (`specs/draarl-apps.md` §2): `app_login.rs` (Type 1, answered
//! through [`AppLoginCheck`](crate::model::AppLoginCheck)s like password
//! checks), `ghost_uplink.rs` (their later packets) and
//! `ghost_registry.rs` (the [`GhostRegistry`], one more cross-shard table);
//! [`interconnect`], the Type 0 data plane between a centre and its edges.

mod app_login;
mod auth;
mod cross_shard;
mod endpoint_caps;
mod forward;
mod ghost_registry;
mod ghost_uplink;
mod ingress;
pub mod interconnect;
mod liveness;
mod login;
mod recorder;
mod reflector;
mod replies;
mod stats;
mod talk_spurts;

#[cfg(test)]
pub(crate) mod tests;

pub use cross_shard::{
    Credential, CrossShard, DomainCache, EndpointClaim, GroupSessions, LocalTables, LoginGuard,
    Member, Membership, SnapshotSource,
};
pub use endpoint_caps::{EndpointCaps, EndpointLimit};
pub use ghost_registry::{
    GhostLimits, GhostRegistry, GhostSession, GhostUplink, NewGhost, RegisterError, Registered,
    RoutingError, UplinkReject,
};
pub use ingress::{shard_of, Ingress, IngressStats};
pub use liveness::UNREACHABLE_TRUSTED_AFTER_SILENCE;
pub(crate) use login::device_record_after_login;
pub use recorder::{Recorder, RecorderStats};
pub use reflector::Reflector;
pub use replies::RejectReason;
pub use stats::SessionStats;
pub use talk_spurts::{
    SpurtPhase, TalkSpurt, TalkSpurts, MAX_ACTIVE_SPURTS, MAX_PENDING_SPURTS, SPURT_GAP,
};
