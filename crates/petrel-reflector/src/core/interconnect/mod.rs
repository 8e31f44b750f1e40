//! The interconnect between a centre and its edges, sans-IO
//! (draarl-interconnect §3–§7; draarl-v1 §6): the data plane, the
//! control-plane handshake that opens a node session (§3.2), and the
//! control logic the minimum subset of §10 needs — route projection sync
//! (§3.7), speaker leases (§3.10), device sessions (§3.8) and the edge's
//! disconnected grace (§6.1). The runtime feeds datagrams and decoded
//! control payloads with the monotonic and the wall clock, sends what the
//! state machines return or queue, and drives their timers.
//!
//! ```text
//!              ┌──────────────────────── DataPlane (centre | edge) ───────────────────────┐
//!  UDP in ────▶│ handle_datagram: shape → session → HMAC → identity → ±2 s → replay →      │
//!              │   budget → bind proof → bound address → subtype → queue (512 / 4096)      │──▶ poll_accepted
//!  TLS in ────▶│ handle_bind_request (DataBind request → challenge)                        │
//!  relays ────▶│ relay_upstream (edge) / relay_downstream (centre: one per target edge)   │──▶ poll_transmit
//!              └───────────────────────────────────────────────────────────────────────────┘
//!  edge: accepted 0x31 ──▶ ProjectionWait (§4.7: park ≤ 1024 / 200 ms) ──▶ poll_release ──▶ local fan-out
//!  centre: EdgeRoutes (which edges receive a domain, §5.2) ──▶ relay_downstream targets
//!
//!  control (type0 over TLS, handle_control_envelope → payload) ─▶ ControlSend back
//!    centre, per edge: CentreRouteSync (§3.7)     edge: EdgeRouteSync + SnapshotAssembly
//!    centre: LeaseTable (§3.10)                   edge: EdgeSpeaker (claim, buffer, block)
//!    centre: DeviceOwners (§3.8)                  edge: EdgeSessions (auth proxy, grants)
//!                                                 edge: EdgeLink (ready / grace / fail closed, §6.1)
//!    centre: SessionEntries (§3.9, §6.2)         edge: EdgeReconfirm (§3.9, before node_ready)
//!
//!  edge device side, EdgeDevices (§3.8, §5.1, §5.3): device datagram ─▶ EdgeSessions │ EdgeSpeaker
//!    ─▶ EdgeAction: reply │ control │ claim │ local fan-out (EdgeReceivers) │ RelayUpstream;
//!    0x20/0x21/0x23/0x28 answers, 0x31 ─▶ ProjectionWait ─▶ local fan-out
//! ```
//!
//! Files: `data_plane.rs` (state, sessions, verdicts), `acceptance.rs`
//! (§4.3), `outbound.rs` (§4.6, §5), `replay_window.rs` (§4.4),
//! `address_binding.rs` (§4.5), `data_budget.rs` (§7 rates),
//! `projection_wait.rs` (§4.7), `edge_routes.rs` (§5.2 targets),
//! `node_session.rs`, `accepted.rs`, `transmit.rs`, `counters.rs`,
//! `handshake.rs` (§3.2), `control_envelope.rs` (§3.4: envelopes over TLS,
//! sharing the session's replay window), `control_send.rs` (a control
//! envelope to send), `route_projection.rs` (projection JSON, chunking,
//! checksums), `route_refresh.rs` (§3.8: a directory reload's route
//! upserts and revokes of the edges' sessions), `route_sync_centre.rs`, `route_sync_edge.rs`,
//! `snapshot_assembly.rs` (§3.7), `speaker_lease_centre.rs`,
//! `speaker_lease_edge.rs` (§3.10), `device_owners.rs`,
//! `device_auth_centre.rs` (§3.8 at the centre: proxied Type 2 logins and
//! their grants), `relay_centre.rs` (§5.2: the centre's checks of an
//! upstream relay, centre-direct relays), `device_sessions_edge.rs`
//! (§3.8), `edge_link.rs` (§6.1), `edge_devices.rs` (the edge's device
//! side: state, route and link changes, timers), `edge_device_ingest.rs`
//! (device datagrams, §5.1), `edge_device_control.rs` (the centre's
//! answers and downstream, §5.3), `edge_receivers.rs` (local receivers
//! per domain), `session_reconfirm_centre.rs` (§3.9, §6.2 at the centre:
//! the device-session entries kept across a restart and the per-item
//! checks), `session_reconfirm_edge.rs` (§3.9 at the edge: the batches
//! before `node_ready`).

mod acceptance;
mod accepted;
mod address_binding;
mod control_envelope;
mod control_send;
mod counters;
mod data_budget;
mod data_plane;
mod device_auth_centre;
mod device_owners;
mod device_sessions_edge;
mod edge_device_control;
mod edge_device_ingest;
mod edge_devices;
mod edge_link;
mod edge_receivers;
mod edge_routes;
mod handshake;
mod node_session;
mod outbound;
mod projection_wait;
mod relay_centre;
mod replay_window;
mod route_projection;
mod route_refresh;
mod route_sync_centre;
mod route_sync_edge;
mod session_reconfirm_centre;
mod session_reconfirm_edge;
mod snapshot_assembly;
mod speaker_lease_centre;
mod speaker_lease_edge;
mod transmit;

#[cfg(test)]
mod tests;

pub use accepted::Accepted;
pub use address_binding::{same_address, AddressBinding, BindReject, CHALLENGE_TTL};
pub use control_envelope::{ControlVerdict, CONTROL_FRESHNESS_MS};
pub use control_send::ControlSend;
pub use counters::{BridgeCounters, ProtectionCounters, TrafficCounters};
pub use data_budget::{Charge, DataBudget, DataLimits};
pub use data_plane::{BindRequestError, DataPlane, DataPlaneConfig, Rejection, Role, Verdict};
pub use device_auth_centre::{
    abandon_check, device_auth_error, device_grant, device_id, device_route, finish_check, granted,
    poll_queued, refused, response_message, start_auth, success_reply, wire_domain, AuthFailure,
    AuthStart, DeviceAuthCounters, PendingLogin, ProxiedLogin, QueuedStep, PROXIED_CHECK_TIMEOUT,
    QUEUED_CHECK_POLL,
};
pub use device_owners::{
    session_error, ActivateError, Activation, ControlRef, DeviceIdentity, DeviceOwners,
    OwnedSession, OwnerCounters, ReportOutcome, GRANT_LIFETIME_MS,
};
pub use device_sessions_edge::{
    identity_key, removal_reason, AuthBudgetConfig, AuthOutcome, EdgeSessionCounters, EdgeSessions,
    EdgeSessionsConfig, LocalDeviceSession, Removal, SwapError, Touch, DEVICE_AUTH_BURST,
    DEVICE_AUTH_PER_S, DEVICE_SESSION_TIMEOUT, GRANT_RENEW_BEFORE, PENDING_AUTH_TIMEOUT,
};
pub use edge_device_ingest::GHOST_UNSUPPORTED;
pub use edge_devices::{
    EdgeAction, EdgeDeviceCounters, EdgeDevices, EdgeDevicesConfig, Upstream, MAX_LEASE_DOMAINS,
    SESSION_SWEEP,
};
pub use edge_link::{
    EdgeLink, EdgeLinkCounters, LinkState, PacketPolicy, DISCONNECTED_LOCAL_GRACE, LOCAL_FLOOR_IDLE,
};
pub use edge_receivers::{
    receive_domains, EdgeReceivers, ReceiverCounters, MAX_RX_DOMAINS_PER_SESSION,
};
pub use edge_routes::{EdgeRoutes, RouteLimitError};
pub use handshake::{
    AuthRejection, CentreHandshake, EdgeHandshake, EdgeSession, HandshakeError, HelloOutcome,
    IssuedCredential, PendingAuth, AUTH_FAILED, CAPACITY_REACHED, HANDSHAKE_TIMEOUT,
    MIN_SESSION_KEY_LEN, NEGOTIATION_FAILED,
};
pub use node_session::NodeSessionParams;
pub use outbound::{BuildError, DownstreamTarget, FanoutReport, MessageIds};
pub use projection_wait::{
    ProjectionWait, ProjectionWaitConfig, WaitCounters, WaitDrop, WaitVerdict,
};
pub use relay_centre::{
    centre_lease_owner, centre_relay_header, centre_talker_lease, check_upstream, tag_reserved,
    talker_of, RelayCounters, RelayReject, UpstreamRelay, CENTRE_SESSION_BIT,
};
pub use replay_window::{Replay, ReplayWindow, REPLAY_WINDOW_BITS};
pub use route_projection::{
    chunk_count, delta_checksum, go_json, sha256_hex, Projection, ProjectionError,
    MAX_DEVICE_SESSIONS_PER_NODE, MAX_SNAPSHOT_BYTES, SNAPSHOT_CHUNK_BYTES,
};
pub use route_refresh::{refresh_routes, RouteRefresh};
pub use route_sync_centre::{
    AckOutcome, AckRefusal, CentreRouteSync, CentreSyncCounters, RetryOutcome,
    MAX_PENDING_ROUTE_MESSAGES, ROUTE_ACK_TIMEOUT, ROUTE_MAX_ATTEMPTS, ROUTE_RESEND_INTERVAL,
};
pub use route_sync_edge::{resync_reason, EdgeRouteSync, EdgeSyncCounters, EdgeSyncEvent};
pub use session_reconfirm_centre::{
    ReconfirmCounters, ReconfirmReject, SessionEntries, SessionEntry, MAX_PENDING_WRITES,
    MAX_SESSION_ENTRIES, SESSION_RECOVERY_WINDOW,
};
pub use session_reconfirm_edge::{
    drop_unconfirmable, ConfirmStep, EdgeConfirmCounters, EdgeReconfirm, CONFIRM_BATCH_TIMEOUT,
};
pub use snapshot_assembly::{ChunkAdded, SnapshotAssembly, SnapshotError};
pub use speaker_lease_centre::{
    lease_action, LeaseCounters, LeaseDecision, LeaseOwner, LeaseReject, LeaseTable, TalkLimit,
    LEASE_IDLE_TIMEOUT, LEASE_MISMATCH_RETRY, LEASE_RENEW_BEFORE, LEASE_TTL, SILENT_LEASE_HOLDOFF,
    SILENT_LEASE_LIMIT,
};
pub use speaker_lease_edge::{
    EdgeLeaseCounters, EdgeSpeaker, LeaseDrop, Released, VoiceDecision, LEASE_BUFFER_FRAMES,
    LEASE_BUFFER_MAX_AGE, LEASE_CLAIM_TIMEOUT, LEASE_MAX_BLOCK, LEASE_MAX_TTL, LEASE_MIN_BLOCK,
};
pub use transmit::{Outbound, Path};
