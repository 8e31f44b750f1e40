//! Counters of the centre's control server (draarl-interconnect §7
//! "Control server", with the per-node protection counters of the control
//! path summed over nodes), exported under
//! `petrel_reflector_interconnect_*` in `/metrics`.

use std::sync::atomic::{AtomicU64, Ordering::Relaxed};

macro_rules! control_counters {
    ($($(#[$doc:meta])* $name:ident,)*) => {
        /// Counters of the control server, shared between its tasks.
        #[derive(Debug, Default)]
        pub struct ControlServerStats {
            $(pub(crate) $name: AtomicU64,)*
        }

        /// A copy of [`ControlServerStats`] at one moment.
        #[derive(Debug, Clone, Default, PartialEq, Eq)]
        pub struct ControlServerSnapshot {
            $($(#[$doc])* pub $name: u64,)*
        }

        impl ControlServerStats {
            /// Reads every counter.
            pub fn snapshot(&self) -> ControlServerSnapshot {
                ControlServerSnapshot { $($name: self.$name.load(Relaxed),)* }
            }
        }

        impl ControlServerSnapshot {
            /// Every counter with its name, for metrics export; the two
            /// gauges (`pending_handshakes`, `active_nodes`) first.
            pub fn counters(&self) -> Vec<(&'static str, u64)> {
                vec![$((stringify!($name), self.$name),)*]
            }
        }
    };
}

control_counters! {
    /// Gauge: connections not yet authenticated.
    pending_handshakes,
    /// Gauge: node sessions live.
    active_nodes,
    /// Pending connections closed for a newcomer because their source
    /// network (/24, /64) already held `max(1, max_pending_handshakes / 4)`
    /// pending slots (its oldest goes).
    pending_prefix_limited,
    /// Pending connections closed for a newcomer because
    /// `max_pending_handshakes` were pending (the oldest of the network
    /// holding most goes).
    pending_evicted,
    /// Hellos refused by the per-IP attempt limit.
    auth_rate_rejected,
    /// Hellos refused: malformed, unknown or disabled node, wrong
    /// credential.
    auth_failed,
    /// Hellos refused because `max_nodes` sessions were live.
    max_nodes_rejected,
    /// Hellos refused by the version/feature negotiation.
    protocol_rejected,
    /// Envelopes of an unknown subtype (dropped, or closing the session
    /// when CRITICAL).
    unsupported_subtype_drops,
    /// Node sessions opened (`node_auth_ok` sent).
    auth_ok,
    /// Sessions closed because a new session of the same node replaced them.
    sessions_replaced,
    /// Connections closed at the hello deadline (10 s for TLS, hello and
    /// reply).
    handshake_timeouts,
    /// TLS handshakes that failed.
    tls_failures,
    /// Connections closed for a malformed frame (§3.1).
    frame_errors,
    /// Sessions closed after `SESSION_IDLE_TIMEOUT` without a frame.
    idle_closes,
    /// Credential checks that failed on a store error (a hello is then
    /// refused; a live session is kept until the next re-check).
    store_errors,
    /// Live sessions closed because the re-check every
    /// `CREDENTIAL_RECHECK` found the node disabled or removed.
    credentials_revoked,
    /// Addresses evicted from the per-IP attempt table.
    auth_ip_evictions,
    /// `type0` frames received on authenticated sessions.
    type0_received,
    /// `type0` frames dropped: bad base64, or refused by the §3.4 checks.
    type0_dropped,
    /// Control frames over `control_hard_pps_per_node` or the byte rate,
    /// dropped.
    control_hard_limit_drops,
    /// Seconds in which a node went over `control_soft_pps_per_node`.
    control_soft_limit_events,
    /// Heartbeats (0x05) accepted.
    heartbeats,
    /// Legacy `node_heartbeat` frames (accepted, ignored).
    legacy_heartbeats,
    /// DataBind challenges issued (§3.6 step 3).
    data_bind_challenges,
    /// DataBind messages over TLS that were not a well-formed request.
    data_bind_rejects,
    /// Payloads of a handled subtype that did not decode.
    payload_errors,
    /// Envelopes and `node_ready` frames handed to the event receiver.
    events_delivered,
    /// Events dropped because the event receiver was full.
    events_dropped,
    /// Events not handed on: the server was started without an event
    /// receiver (node up/down and `node_ready` included).
    events_unhandled,
    /// Frames of a kind not taken after the handshake.
    unknown_kinds,
    /// Frames to a node dropped because its send queue was full.
    send_queue_drops,
}
