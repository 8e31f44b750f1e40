//! Petrel's DraARLv1 voice reflector (`specs/draarl-v1.md`).
//!
//! The reflector is written in three layers, and every dependency points
//! down. Reading it bottom-up is reading it in the order a datagram is
//! understood: first what the bytes and records mean, then what the
//! protocol decides, and only then how threads and sockets carry it out.
//!
//! # The layers
//!
//! **[`model`]** (with [`codec`] and [`policy`]) is the vocabulary. The codec
//! parses and writes the wire formats (the 90-byte header, heartbeat,
//! configuration and voice DATA, `.raw` recordings); the policy tables are
//! token buckets (rate limits, the per-prefix Argon2 budget and the HTTP
//! per-prefix budget), the ban ladder and the floor, each taking `now` as an
//! argument, and each keyed by source bounded with least-recently-used
//! eviction; the model holds device keys, the directory view, frames and
//! receiver snapshots, store events, password checks and their verdicts,
//! recordings, source prefixes (/24, /64), and every configuration section
//! with its validation. None of it touches a socket, a file or a clock, or
//! knows a thread exists (hashing a new device password draws its salt from
//! the OS).
//!
//! **[`core`]** is the protocol as sans-IO state machines, in the style of
//! `petrel-proto`: a [`core::Reflector`] per ingress shard is fed
//! `(now, source, datagram)` with `handle_*` methods and polled with
//! `poll_transmit`, `poll_frame`, `poll_event`, `poll_password_check`,
//! `poll_recording` and `poll_timeout`. It owns login, sessions, bans, floors
//! and forwarding decisions, and which endpoints may receive fan-out
//! (per-account and per-network caps, the heard-twice rule, ICMP unreachable
//! reports handed in with `handle_unreachable`). State that spans shards
//! (receivers and floors per domain, the ban ladder, the Argon2 budget) is
//! reached through the [`core::CrossShard`] port it is given, so the core
//! contains no mutex, thread, channel or clock read; a single shard owns the
//! tables outright ([`core::LocalTables`]).
//!
//! **[`runtime`]** carries the core: one UDP socket (with its ICMP error
//! queue, read by the ingress reader), the ingress reader and shard threads,
//! the shared tables with one lock per stripe of domains, the Argon2 verifier
//! pool (each check answered on its shard's own queue), the fan-out writers
//! with batched sends, the store writer and directory reloads (`sqlx`),
//! recording files and the bounds of what is kept on disk, the HTTP endpoint
//! with its limits, and the counters.
//!
//! # What lives here
//!
//! - [`codec`]: the DraARLv1 wire formats.
//! - [`policy`]: token buckets (packet rate limits, the Argon2 budget per
//!   source prefix, the HTTP endpoint's per-prefix budget), the round-robin
//!   line of first logins waiting for the global Argon2 budget, the
//!   failed-auth ban ladder, half-duplex floors with a maximum talk time.
//! - [`model`]: the data types and configuration shared by the layers above.
//! - [`core`]: the sans-IO session core and the ingress front (rate limits,
//!   shard choice).
//! - [`runtime`]: threads, sockets, the verifier pool, fan-out, the store
//!   (text history under an age limit and a byte cap, recordings under a
//!   disk quota), HTTP (`/healthz`, Prometheus `/metrics`, the token-auth
//!   admin API, authenticated before anything else is read; timeouts,
//!   connection caps with idle eviction, body and per-prefix limits), the
//!   operator dashboard (`/dashboard`: last heard, sessions per group,
//!   counters with their last ten minutes; self-contained HTML), and,
//!   with `[apps]`, the app clients' API (`specs/draarl-apps.md` §1:
//!   captcha, login, JWT access and rotated refresh tokens, the start-up
//!   routes) over the account store, which also answers app logins as the
//!   `runtime::app_authority::AppAuthority` of ghost sessions.
//!   With `[interconnect]`, the centre's TLS 1.3 control server for edge
//!   nodes (`runtime::interconnect`, draarl-interconnect §3), whose node
//!   credentials the store keeps hashed; the same module holds the edge's
//!   control client.
//!
//! # What does not
//!
//! Generic UDP transport (`petrel`), link emulation (`petrel-netem`), the
//! `petrel bench reflector` load generator and benchmark reports
//! (`petrel-bench`), the command line
//! (`petrel-cli`).
//!
//! # App ("ghost") sessions
//!
//! The Android app and other app clients log in with Type 1
//! (`specs/draarl-apps.md` §2): [`codec::parse_login_request`] checks the
//! strict JSON, `core/app_login.rs` emits a [`model::AppLoginCheck`] polled
//! like a password check, the runtime answers it through its
//! [`runtime::app_authority::AppAuthority`] (the account store; without one,
//! every token is invalid), and the session lands in the shared
//! [`core::GhostRegistry`], reached by every shard through
//! [`core::CrossShard::ghosts`]. Tagged packets resolve in
//! `core/ghost_uplink.rs`; receiver snapshots list app sessions apart
//! ([`model::Snapshot::aware`]) so that they get the frame copy whose Reserved
//! holds the source group ([`model::Frame::session_packet`]).
//! [`model::Endpoint`] names where a session is (`Udp`, `WebSocket`).
//!
//! The web client's sessions come through [`runtime::websocket`] (`GET
//! /ws` on the HTTP port): registered in the same registry as
//! [`model::Endpoint::WebSocket`], their Types 4/5 handed to a shard
//! ([`core::Reflector::handle_connection_packet`]), and the frames listed
//! in [`model::Snapshot::websockets`] queued by the fan-out engine on each
//! connection's bounded queue ([`runtime::WebSocketHub`]). The radio
//! session routes (`/api/radio/*`, `runtime/radio_routes`) read and change
//! the registry for the caller the account side authenticated
//! ([`runtime::authenticated_user::AuthenticatedUser`]).
//!
//! # Where the next features plug in
//!
//! - **Edge links (Type 0 interconnect)**: a peer reflector is one more
//!   member (`Endpoint::Edge`) of the domains it carries. Its wire formats
//!   are [`codec::interconnect`] (envelope, relay, DataBind, control frames,
//!   the §3.5 payloads) and its sans-IO data plane and handshake
//!   [`core::interconnect`] (acceptance pipeline, replay window, address
//!   binding, budgets, upstream and per-edge downstream relays, the
//!   projection wait). The control plane runs over TLS 1.3 in
//!   [`runtime::interconnect`]: the centre's control server (with
//!   `[interconnect] enabled`; credentials in the store, `petrel reflector
//!   edge add`) and the edge's control client (handshake, heartbeats,
//!   reconnect). A centre also answers its edges' proxied device logins,
//!   renewals, reports and speaker leases (§3.8, §3.10), takes Type 0 on
//!   its device UDP port and relays voice between its edges and its own
//!   devices (§4.3, §5.2; `runtime::interconnect::CentreRelay`). An edge
//!   reflector (`runtime::interconnect::EdgeServer`, `serve --role edge`)
//!   keeps no store: its device socket also carries Type 0 to and from the
//!   centre, logins are proxied to the centre, and the sans-IO
//!   `core::interconnect::EdgeDevices` answers heartbeats, fans out
//!   locally, relays each frame upstream once under the speaker lease, and
//!   delivers the centre's downstream (§3.8, §5).
//!
//! # Departures from the reference server
//!
//! Each from draarl-v1 §9: Types 3/4/5 are bound to the authenticated
//! endpoint; heartbeat replies never echo the password; rate limits are
//! token buckets, and every table keyed by source evicts its least recent
//! entry instead of refusing new sources; device passwords are Argon2id
//! hashes, checked within a budget per source prefix, and only a password
//! Argon2 found wrong counts toward the ban ladder (§3.1 step 2 also
//! counts malformed passwords and unapproved accounts); receiver snapshots
//! are invalidated per domain and in-flight frames are never dropped for a
//! membership change; sends are batched with `sendmmsg`; text is rate-limited
//! per device and queued apart from voice, so it never evicts voice frames;
//! stored text and recordings are bounded in bytes; an app session
//! receives fan-out only after a packet with its tag came from its
//! address. Not implemented yet: the endpoints above, PROXY protocol v2,
//! the private-group membership rule for physical devices (only the app
//! side applies the group rule), pushing a stored Type 3 configuration to a device (the
//! reflector only queries it).
#![cfg_attr(test, allow(clippy::unwrap_used))]

pub mod codec;
pub mod core;
pub mod model;
pub mod policy;
pub mod runtime;
#[cfg(test)]
mod test_clock;
