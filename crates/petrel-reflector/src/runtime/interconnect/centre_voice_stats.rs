//! Counters of the centre's edge device sessions and voice relay
//! (draarl-interconnect §3.8, §3.10, §5.2, §7): proxied logins, renewals,
//! reports, speaker leases, the relay of edge and centre-direct voice, and
//! per node the §7 protection counters. Exported in `/metrics` as
//! `petrel_reflector_interconnect_<group>_<name>_total` and, per node,
//! `petrel_reflector_interconnect_node_<name>_total{node="…"}`.

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering::Relaxed};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};

use crate::codec::interconnect::NodeId;
use crate::core::interconnect::{DataPlane, DeviceAuthCounters, RelayCounters};
use crate::core::RecorderStats;

use super::centre_devices::CentreDevices;

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(PoisonError::into_inner)
}

macro_rules! voice_counters {
    ($($(#[$doc:meta])* $name:ident,)*) => {
        /// The runtime's own counters of the centre's device and relay
        /// dispatch (the sans-IO tables keep theirs).
        #[derive(Debug, Default)]
        pub struct DispatchCounters {
            $($(#[$doc])* pub(crate) $name: AtomicU64,)*
        }

        impl DispatchCounters {
            /// Every counter with its name.
            pub fn counters(&self) -> Vec<(&'static str, u64)> {
                vec![$((stringify!($name), self.$name.load(Relaxed)),)*]
            }
        }
    };
}

voice_counters! {
    /// DeviceAuth requests received (0x20).
    device_auth_requests,
    /// DeviceAuth requests over `DeviceAuthPPSPerNode` (§7), dropped.
    device_auth_limit_drops,
    /// DeviceAuth requests dropped because the node had
    /// `MAX_AUTHS_IN_FLIGHT_PER_NODE` logins in progress.
    device_auth_in_flight_drops,
    /// Logins of a node session that closed or was replaced (dropped on
    /// arrival, or finished after it: no answer sent, nothing activated).
    device_auth_node_gone,
    /// Password checks the Argon2 pool's full queue refused (answered
    /// `server_busy`).
    device_auth_pool_full,
    /// Device session payloads (0x20, 0x21, 0x22, 0x28) that did not decode.
    device_payload_errors,
    /// Answers and revokes that could not be queued to their node.
    device_send_failures,
    /// Device records created or changed by proxied logins whose store
    /// event was dropped (the writer's queue was full).
    device_store_events_dropped,
    /// Centre-direct frames relayed to edges (source `center`, §5.2).
    relay_centre_frames,
    /// Centre-direct voice frames not relayed: another talker holds the
    /// domain's speaker lease (§3.10).
    relay_centre_lease_denied,
    /// Centre-direct frames not relayed: the packet or its talker could
    /// not be read back.
    relay_centre_invalid_drops,
    /// Edge frames handed to the fan-out engine for centre-direct
    /// receivers (§5.2 step 3).
    relay_local_deliveries,
    /// Edge voice not delivered locally: the domain's local floor was
    /// held by a centre-direct talker.
    relay_local_floor_drops,
    /// Downstream envelopes sent by UDP (target bound, §4.5).
    relay_downstream_udp,
    /// Downstream envelopes sent as `type0` control frames (target not
    /// bound).
    relay_downstream_control,
    /// Downstream envelopes that failed to build or send (socket error,
    /// full control queue, session replaced).
    relay_downstream_send_failures,
    /// Recordings and texts of edge traffic dropped because the store
    /// writer's queue was full.
    relay_store_events_dropped,
    /// Route upserts of edge sessions after a directory reload (group,
    /// domain, bans, callsign changed; §3.8).
    reload_route_upserts,
    /// Edge sessions revoked after a directory reload (owner account
    /// deleted, disabled or not approved).
    reload_revokes,
    /// Reload route changes that could not be published (the edge's route
    /// limit, no live node session).
    reload_route_failures,
    /// Edge sessions revoked (`session_migrated`) because the device logged
    /// in directly at the centre.
    direct_login_migrations,
    /// Requests to end a centre-direct session because the device logged in
    /// through an edge, sent to the shards.
    direct_session_evictions,
    /// Those requests dropped: a shard's queue was full.
    direct_eviction_drops,
}

/// Counters of one node session (§7 `protection`, the parts kept outside
/// the data plane); reset when the node connects again.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct NodeVoiceCounters {
    /// DeviceAuth requests over the per-node rate (§7).
    pub device_auth_limit_drops: u64,
    /// DeviceAuth requests over the per-node bound of logins in progress.
    pub device_auth_in_flight_drops: u64,
    /// Activations refused: the node owns `MaxDeviceSessionsPerNode` (§7).
    pub session_limit_rejects: u64,
    /// Not named by §7: logins refused because the account holds
    /// `max_per_account` endpoints over the centre and every edge
    /// (draarl-v1 §3.1 endpoint caps).
    pub account_endpoint_limit_rejects: u64,
    /// Upstream relays dropped by the §5.2 checks.
    pub relay_rejects: u64,
}

/// Shared counters; see the module docs.
#[derive(Debug, Default)]
pub struct CentreVoiceStats {
    pub(crate) dispatch: DispatchCounters,
    pub(crate) auth: Mutex<DeviceAuthCounters>,
    pub(crate) relay: Mutex<RelayCounters>,
    pub(crate) recording: Mutex<RecorderStats>,
    nodes: Mutex<HashMap<NodeId, NodeVoiceCounters>>,
}

impl CentreVoiceStats {
    /// Resets `node`'s counters (a new session, §7: metrics reset on
    /// connect).
    pub(crate) fn node_up(&self, node: NodeId) {
        lock(&self.nodes).insert(node, NodeVoiceCounters::default());
    }

    /// Forgets `node`'s counters (its session closed), so the table holds
    /// live nodes only.
    pub(crate) fn node_down(&self, node: NodeId) {
        lock(&self.nodes).remove(&node);
    }

    /// Adds to `node`'s counters (only while it has a session).
    pub(crate) fn node(&self, node: NodeId, f: impl FnOnce(&mut NodeVoiceCounters)) {
        if let Some(c) = lock(&self.nodes).get_mut(&node) {
            f(c);
        }
    }

    fn nodes(&self) -> HashMap<NodeId, NodeVoiceCounters> {
        lock(&self.nodes).clone()
    }
}

/// What the metrics read: the counters and the tables they sit beside.
#[derive(Debug, Clone)]
pub struct CentreVoiceSource {
    pub(crate) stats: Arc<CentreVoiceStats>,
    pub(crate) devices: Arc<Mutex<CentreDevices>>,
    pub(crate) data: Arc<Mutex<DataPlane>>,
}

/// A copy of every counter at one moment.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct CentreVoiceSnapshot {
    /// Counters over all nodes, by full name (without the
    /// `petrel_reflector_interconnect_` prefix and `_total` suffix).
    pub counters: Vec<(String, u64)>,
    /// Gauges, named the same way.
    pub gauges: Vec<(String, u64)>,
    /// Per live node: its counters (`queued_data` is a gauge).
    pub nodes: Vec<(NodeId, Vec<(&'static str, u64)>)>,
}

fn prefixed(
    prefix: &'static str,
    list: Vec<(&'static str, u64)>,
) -> impl Iterator<Item = (String, u64)> {
    list.into_iter()
        .map(move |(n, v)| (format!("{prefix}{n}"), v))
}

impl CentreVoiceSource {
    /// Reads every counter.
    pub fn snapshot(&self) -> CentreVoiceSnapshot {
        let s = &self.stats;
        let mut counters: Vec<(String, u64)> = s
            .dispatch
            .counters()
            .into_iter()
            .map(|(n, v)| (n.to_owned(), v))
            .collect();
        counters.extend(prefixed("device_auth_", lock(&s.auth).counters()));
        counters.extend(prefixed("relay_", lock(&s.relay).counters()));
        counters.extend(prefixed("relay_recording_", lock(&s.recording).counters()));
        let mut gauges = Vec::new();
        {
            let d = lock(&self.devices);
            let o = d.owners.counters();
            counters.extend(prefixed(
                "device_owner_",
                vec![
                    ("activations", o.activations),
                    ("reactivations", o.reactivations),
                    ("migrations", o.migrations),
                    ("session_limit_rejects", o.session_limit_rejects),
                    ("renewals", o.renewals),
                    ("renew_rejects", o.renew_rejects),
                    ("reports_removed", o.reports_removed),
                    ("reports_ignored", o.reports_ignored),
                    ("epoch_evictions", o.epoch_evictions),
                    ("route_limit_rejects", d.edge_routes.session_limit_rejects()),
                ],
            ));
            let l = d.leases.counters();
            counters.extend(prefixed(
                "lease_",
                vec![
                    ("grants", l.grants),
                    ("denies", l.denies),
                    ("voice_accepted", l.voice_accepted),
                    ("voice_refused", l.voice_refused),
                    ("expired", l.expired),
                    ("released", l.released),
                    ("evictions", l.evictions),
                    ("invalid_claims", l.invalid_claims),
                    ("talk_limit_cuts", l.talk_limit_cuts),
                    ("holdoff_denies", l.holdoff_denies),
                    ("silent_leases", l.silent_leases),
                ],
            ));
            counters.extend(prefixed("reconfirm_", d.entries.counters().list()));
            gauges.push(("device_sessions".to_owned(), d.owners.len() as u64));
            gauges.push(("session_entries".to_owned(), d.entries.len() as u64));
            gauges.push(("lease_domains".to_owned(), d.leases.len() as u64));
        }
        let extra = s.nodes();
        let data = lock(&self.data);
        let b = data.bridge();
        counters.extend(prefixed(
            "bridge_",
            vec![
                ("unauthenticated_type0", b.unauthenticated_type0),
                ("truncated_type0", b.truncated_type0),
                ("invalid_type0", b.invalid_type0),
                ("global_queue_drops", b.global_queue_drops),
                ("session_evictions", b.session_evictions),
                ("orphaned_drops", b.orphaned_drops),
                ("outbound_evictions", b.outbound_evictions),
            ],
        ));
        gauges.push(("bridge_queued_data".to_owned(), data.queued() as u64));
        let mut nodes: Vec<(NodeId, Vec<(&'static str, u64)>)> = data
            .node_ids()
            .into_iter()
            .map(|node| {
                let mut list = Vec::new();
                if let Some(p) = data.protection(node) {
                    list.extend([
                        ("data_soft_limit_events", p.data_soft_limit_events),
                        ("data_hard_limit_drops", p.data_hard_limit_drops),
                        ("data_queue_drops", p.data_queue_drops),
                        ("data_stale_drops", p.data_stale_drops),
                        ("invalid_auth_tags", p.invalid_auth_tags),
                        ("hop_count_drops", p.hop_count_drops),
                        ("oversize_drops", p.oversize_drops),
                        ("malformed_envelopes", p.malformed_envelopes),
                        ("identity_rejects", p.identity_rejects),
                        ("expired_drops", p.expired_drops),
                        ("replay_drops", p.replay_drops),
                        ("unbound_address_drops", p.unbound_address_drops),
                        ("data_bind_rejects", p.data_bind_rejects),
                        ("invalid_relay_drops", p.invalid_relay_drops),
                        ("unexpected_subtype_drops", p.unexpected_subtype_drops),
                        ("queued_data", p.queued_data),
                    ]);
                }
                if let Some(t) = data.traffic(node) {
                    list.extend([
                        ("in_packets", t.in_packets),
                        ("in_bytes", t.in_bytes),
                        ("out_packets", t.out_packets),
                        ("out_bytes", t.out_bytes),
                        ("drops", t.drops),
                    ]);
                }
                let c = extra.get(&node).copied().unwrap_or_default();
                list.extend([
                    ("device_auth_limit_drops", c.device_auth_limit_drops),
                    ("device_auth_in_flight_drops", c.device_auth_in_flight_drops),
                    ("session_limit_rejects", c.session_limit_rejects),
                    (
                        "account_endpoint_limit_rejects",
                        c.account_endpoint_limit_rejects,
                    ),
                    ("relay_rejects", c.relay_rejects),
                ]);
                (node, list)
            })
            .collect();
        nodes.sort_by_key(|(n, _)| *n);
        CentreVoiceSnapshot {
            counters,
            gauges,
            nodes,
        }
    }
}
