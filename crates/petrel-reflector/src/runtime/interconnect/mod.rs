//! The interconnect's control plane over the network
//! (draarl-interconnect §3.1–§3.4, §3.6, §6.1, §7, §10 items 1 and 8): the
//! centre's TLS control server and the edge's control client around the
//! sans-IO handshake and envelope checks of [`crate::core::interconnect`].
//!
//! ```text
//!  edge: EdgeControl ──TLS 1.3 (pin | CA)──▶ centre: ControlServer ── NodeAuthority (store / static)
//!         heartbeat 5 s, backoff                 pending cap (¼ per /24|/64), per-IP limit, MaxNodes, 10 s hello
//!         EdgeEvent ◀── type0 (§3.4) ──────────▶ CentreEvent, DataBind challenge, heartbeats
//! ```
//!
//! Files: `tls.rs` (identities, the pinning verifier), `node_authority.rs`
//! (§3.3 credential check), `control_io.rs` (§3.1 frames on a stream),
//! `control_send.rs` (sealing envelopes for a control connection),
//! `centre.rs`, `centre_stats.rs` and `pending_slots.rs` (the server), `centre_devices.rs` (the edge device sessions, routes, targets and
//! leases the dispatcher and the UDP reader share), `centre_dispatch.rs`
//! (the task handing control events to the centre's logic),
//! `centre_device_auth.rs` (0x20 proxied device logins, §3.8),
//! `centre_device_sessions.rs` (0x21 renew, 0x22 report, 0x28 speaker
//! lease), `centre_directory.rs` (the directory the centre's edge logic
//! reads), `centre_relay.rs` (Type 0 on the device port, the voice relay
//! between edges and centre-direct devices, §4.3, §5.2),
//! `centre_reload.rs` (a directory reload's route upserts and revokes of
//! edge sessions, §3.8), `centre_revoke.rs` (revoking an edge's device
//! session), `centre_direct_sessions.rs` (one session per device across
//! the centre's own port and its edges),
//! `centre_tables.rs` (the tables they share),
//! `centre_voice_stats.rs` (their counters),
//! `centre_routes.rs` (§3.7 route sync per edge), `edge.rs` (the client),
//! `edge_node.rs` (the edge's connection sequence, route sync, link
//! policy and the centre's device messages, §3.6, §6.1), `edge_server.rs`
//! (a running edge reflector: its device socket, fan-out engine and
//! `/metrics`), `edge_reader.rs` (the socket's reader thread),
//! `edge_output.rs` (carrying out the device side's actions),
//! `edge_metrics.rs` (the edge's counters, Prometheus text),
//! `identity.rs` (where the centre's certificate comes from), `enrol.rs`
//! (adding a node and making its token, §3.3 admin side).

mod centre;
mod centre_device_auth;
mod centre_device_sessions;
mod centre_devices;
mod centre_direct_sessions;
mod centre_directory;
mod centre_dispatch;
mod centre_relay;
mod centre_reload;
mod centre_revoke;
mod centre_routes;
mod centre_session_reconfirm;
mod centre_stats;
mod centre_tables;
mod centre_voice_stats;
mod control_io;
mod control_send;
mod edge;
mod edge_metrics;
mod edge_node;
mod edge_output;
mod edge_reader;
mod edge_server;
mod enrol;
mod identity;
mod node_authority;
mod pending_slots;
mod tls;

pub use centre::{
    CentreEvent, CentreSender, ControlServer, NodeStatus, CREDENTIAL_RECHECK, SESSION_IDLE_TIMEOUT,
};
pub(crate) use centre_device_auth::CentreServices;
pub use centre_device_auth::{CentreStore, DEVICE_AUTH_PPS_PER_NODE, MAX_AUTHS_IN_FLIGHT_PER_NODE};
pub use centre_devices::{
    CentreDevices, MAX_EPOCH_IDENTITIES, MAX_LEASE_DOMAINS, MAX_RX_DOMAINS_PER_ROUTE,
};
pub use centre_direct_sessions::{DirectSessions, EVICTION_QUEUE};
pub use centre_directory::CentreDirectory;
pub use centre_dispatch::{CentreDispatch, CENTRE_EVENT_QUEUE, DISPATCH_TICK};
pub(crate) use centre_relay::RelayParts;
pub use centre_relay::{CentreRelay, RELAY_TICK};
pub use centre_reload::CentreReload;
pub use centre_routes::{CentreRouteStats, CentreRoutes};
pub use centre_stats::{ControlServerSnapshot, ControlServerStats};
pub use centre_tables::CentreTables;
pub use centre_voice_stats::{
    CentreVoiceSnapshot, CentreVoiceSource, CentreVoiceStats, DispatchCounters, NodeVoiceCounters,
};
pub use control_io::ControlIoError;
pub use control_send::{ControlEnvelope, ControlSendError, SEND_QUEUE, UNSUPPORTED_CRITICAL};
pub use edge::{
    EdgeConnectError, EdgeControl, EdgeControlConfig, EdgeControlStats, EdgeEvent, EdgeLink,
    EdgeStartError, CONNECT_TIMEOUT, EVENT_QUEUE, HEARTBEAT_INTERVAL,
};
pub use edge_metrics::{link_state_code, EdgeStats};
pub use edge_node::{
    EdgeNode, EdgeNodeConfig, EdgeState, DATA_BIND_INTERVAL, EDGE_TICK, MAX_LOCAL_FLOORS,
};
pub use edge_output::EdgeOutputStats;
pub use edge_reader::EdgeReaderStats;
pub use edge_server::{EdgeServer, EdgeServerConfig, DEFAULT_CENTRE_UDP_PORT, DEFAULT_EDGE_LISTEN};
pub use enrol::{add_edge_node, EnrolError};
pub use identity::{centre_identity, IdentityError};
pub use node_authority::NodeAuthority;
pub use tls::{
    fingerprint, server_name, CentreTrust, TlsIdentity, TlsSetupError, DEFAULT_SERVER_NAME,
};
