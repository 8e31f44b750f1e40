//! The edge's counters and their `GET /metrics` (Prometheus text format)
//! on `--http` (draarl-interconnect §7 per-node counters; the names of
//! the loss causes a benchmark attributes): sessions and authentication,
//! local fan-out, upstream, downstream by drop cause, the wait rule, the
//! link, speaker leases, the data plane's protection and traffic
//! counters, and the control client's.
//!
//! Every series is `petrel_reflector_edge_<group>_<name>`, `_total` for
//! counters; gauges are listed in [`EdgeStats::gauges`].

use std::sync::{Arc, Mutex, MutexGuard, PoisonError};

use axum::extract::State;
use axum::http::header;
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use axum::Router;

use super::super::fanout::{FanoutStats, FanoutStatsSnapshot};
use super::super::icmp::{IcmpCounters, IcmpStats};
use super::edge::{EdgeControl, EdgeControlStats};
use super::edge_node::EdgeState;
use super::edge_output::{EdgeOutput, EdgeOutputStats};
use super::edge_reader::{EdgeReaderStats, ReaderCounters};
use crate::codec::interconnect::NodeId;
use crate::core::interconnect::{
    BridgeCounters, DataPlane, EdgeConfirmCounters, EdgeDeviceCounters, EdgeLeaseCounters,
    EdgeLinkCounters, EdgeSessionCounters, EdgeSyncCounters, LinkState, ProtectionCounters,
    ReceiverCounters, TrafficCounters, WaitCounters,
};
use crate::core::IngressStats;

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(PoisonError::into_inner)
}

/// Everything the edge counts, read at one moment.
#[derive(Debug, Clone, Default)]
pub struct EdgeStats {
    /// The link state (§6.1).
    pub link_state: Option<LinkState>,
    /// Device sessions installed.
    pub sessions: usize,
    /// DeviceAuth requests waiting for the centre.
    pub pending_auth: usize,
    /// Domains with a local receiver.
    pub receiver_domains: usize,
    /// Downstream frames parked by the wait rule.
    pub parked: usize,
    /// (cluster epoch, version) of the projection applied to the sessions.
    pub projection: (u64, u64),
    /// The device side's counters.
    pub device: EdgeDeviceCounters,
    /// The session table's (auth requests, grants, refusals, renewals).
    pub session: EdgeSessionCounters,
    /// The speaker state's (§3.10).
    pub lease: EdgeLeaseCounters,
    /// The wait rule's (§4.7).
    pub wait: WaitCounters,
    /// The receiver lists'.
    pub receivers: ReceiverCounters,
    /// The link policy's (§6.1).
    pub link: EdgeLinkCounters,
    /// Route sync (§3.7).
    pub sync: EdgeSyncCounters,
    /// Edge node: undecodable payloads, failed sends, unhandled
    /// envelopes, DataBind requests and proofs.
    pub node: [(&'static str, u64); 5],
    /// The device rate limits.
    pub ingress: IngressStats,
    /// The socket reader's.
    pub reader: EdgeReaderStats,
    /// ICMP errors read on the device socket.
    pub icmp: IcmpStats,
    /// What was sent on the device side's behalf.
    pub output: EdgeOutputStats,
    /// The local fan-out engine's.
    pub fanout: FanoutStatsSnapshot,
    /// The control client's.
    pub control: EdgeControlStats,
    /// The data plane's protection counters for the centre's session
    /// (reset on each new session).
    pub protection: ProtectionCounters,
    /// The data plane's traffic counters for the centre's session.
    pub traffic: TrafficCounters,
    /// The data plane's bridge counters.
    pub bridge: BridgeCounters,
    /// Session reconfirmation (§3.9).
    pub reconfirm: EdgeConfirmCounters,
}

/// Where the counters live (cheap to clone).
#[derive(Debug, Clone)]
pub(crate) struct EdgeStatsSource {
    pub(crate) state: Arc<Mutex<EdgeState>>,
    pub(crate) control: Arc<EdgeControl>,
    pub(crate) data: Arc<Mutex<DataPlane>>,
    pub(crate) output: Arc<EdgeOutput>,
    pub(crate) fanout: Arc<FanoutStats>,
    pub(crate) reader: Arc<ReaderCounters>,
    pub(crate) ingress: Arc<Mutex<IngressStats>>,
    pub(crate) icmp: Arc<IcmpCounters>,
}

impl EdgeStatsSource {
    /// Reads every counter (the edge state's lock is held once, briefly).
    pub(crate) fn read(&self) -> EdgeStats {
        let mut stats = {
            let s = lock(&self.state);
            let d = &s.devices;
            EdgeStats {
                link_state: Some(s.link.state()),
                sessions: d.sessions().len(),
                pending_auth: d.sessions().pending(),
                receiver_domains: d.receiver_domains(),
                parked: d.parked(),
                projection: d.projection(),
                device: *d.counters(),
                session: *d.session_counters(),
                lease: *d.lease_counters(),
                wait: *d.wait_counters(),
                receivers: *d.receiver_counters(),
                link: *s.link.counters(),
                sync: *s.routes.counters(),
                node: [
                    ("bad_payloads", s.bad_payloads),
                    ("send_failures", s.send_failures),
                    ("unhandled_envelopes", s.unhandled),
                    ("bind_requests", s.bind_requests),
                    ("bind_proofs", s.bind_proofs),
                ],
                reconfirm: s.confirm_counters,
                ..EdgeStats::default()
            }
        };
        {
            let data = lock(&self.data);
            stats.protection = data.protection(NodeId::CENTRE).copied().unwrap_or_default();
            stats.traffic = data.traffic(NodeId::CENTRE).copied().unwrap_or_default();
            stats.bridge = *data.bridge();
        }
        stats.ingress = lock(&self.ingress).clone();
        stats.reader = self.reader.snapshot();
        stats.icmp = self.icmp.snapshot();
        stats.output = self.output.stats();
        stats.fanout = self.fanout.snapshot();
        stats.control = self.control.stats();
        stats
    }
}

/// The numeric code of a link state in `petrel_reflector_edge_link_state`:
/// 0 starting, 1 attached (not ready), 2 ready, 3 disconnected (grace),
/// 4 grace expired.
pub fn link_state_code(s: LinkState) -> u64 {
    match s {
        LinkState::Starting => 0,
        LinkState::Attached => 1,
        LinkState::Ready => 2,
        LinkState::Disconnected(_) => 3,
        LinkState::Expired => 4,
    }
}

impl EdgeStats {
    /// The gauges: (name, value).
    pub fn gauges(&self) -> Vec<(&'static str, u64)> {
        vec![
            ("link_state", self.link_state.map_or(0, link_state_code)),
            ("sessions", self.sessions as u64),
            ("pending_auth", self.pending_auth as u64),
            ("receiver_domains", self.receiver_domains as u64),
            ("parked_downstream", self.parked as u64),
            ("projection_version", self.projection.1),
            ("fanout_queue_high_water", self.fanout.queue_high_water),
            ("fanout_max_dispatch_ns", self.fanout.max_dispatch_ns),
            ("data_queued", self.protection.queued_data),
        ]
    }

    /// Every counter as (group, name, value).
    pub fn counters(&self) -> Vec<(&'static str, &'static str, u64)> {
        let mut out = Vec::with_capacity(160);
        let mut add = |group: &'static str, pairs: Vec<(&'static str, u64)>| {
            out.extend(pairs.into_iter().map(|(n, v)| (group, n, v)));
        };
        add("device", self.device.counters());
        add("session", session_pairs(&self.session));
        add("lease", lease_pairs(&self.lease));
        add("wait", wait_pairs(&self.wait));
        add("receivers", receiver_pairs(&self.receivers));
        add("link", link_pairs(&self.link));
        add("sync", sync_pairs(&self.sync));
        add("node", self.node.to_vec());
        add("ingress", self.ingress.counters());
        add("reader", self.reader.counters());
        add("icmp", self.icmp.counters());
        add("output", self.output.counters());
        add(
            "fanout",
            self.fanout
                .counters()
                .into_iter()
                .filter(|(n, _)| !matches!(*n, "queue_high_water" | "max_dispatch_ns"))
                .collect(),
        );
        add("control", self.control.counters());
        add("reconfirm", self.reconfirm.list());
        add("data", protection_pairs(&self.protection));
        add("traffic", traffic_pairs(&self.traffic));
        add("bridge", bridge_pairs(&self.bridge));
        out
    }

    /// The Prometheus text exposition.
    pub fn render(&self) -> String {
        let mut out = String::with_capacity(16_384);
        for (n, v) in self.gauges() {
            out.push_str(&format!(
                "# TYPE petrel_reflector_edge_{n} gauge\npetrel_reflector_edge_{n} {v}\n"
            ));
        }
        for (g, n, v) in self.counters() {
            out.push_str(&format!(
                "# TYPE petrel_reflector_edge_{g}_{n}_total counter\npetrel_reflector_edge_{g}_{n}_total {v}\n"
            ));
        }
        out
    }
}

fn session_pairs(c: &EdgeSessionCounters) -> Vec<(&'static str, u64)> {
    vec![
        ("auth_requests", c.auth_requests),
        ("auth_pending_drops", c.auth_pending_drops),
        ("auth_expired", c.auth_expired),
        ("auth_unknown", c.auth_unknown),
        ("grants", c.installed),
        ("auth_refused", c.auth_failed),
        ("endpoint_refused", c.endpoint_refused),
        ("renews_sent", c.renews_sent),
        ("renews_ok", c.renews_ok),
        ("renews_failed", c.renews_failed),
        ("removed", c.removed),
        ("auth_prefix_drops", c.auth_prefix_drops),
        ("auth_identity_drops", c.auth_identity_drops),
        ("auth_rate_drops", c.auth_rate_drops),
        (
            "account_endpoint_limit_rejects",
            c.account_endpoint_limit_rejects,
        ),
        (
            "prefix_endpoint_limit_rejects",
            c.prefix_endpoint_limit_rejects,
        ),
        ("prefix_endpoint_evictions", c.prefix_endpoint_evictions),
        ("endpoints_heard_twice", c.endpoints_heard_twice),
        ("unreachable_sessions_ended", c.unreachable_sessions_ended),
    ]
}

fn lease_pairs(c: &EdgeLeaseCounters) -> Vec<(&'static str, u64)> {
    vec![
        ("claims", c.claims),
        ("grants", c.grants),
        ("denies", c.denies),
        ("claim_timeouts", c.claim_timeouts),
        ("buffered", c.buffered),
        ("released", c.released),
        ("buffer_drops", c.buffer_drops),
        ("other_talker_drops", c.other_talker_drops),
        ("buffer_full_drops", c.buffer_full_drops),
        ("blocked_drops", c.blocked_drops),
        ("stray_answers", c.stray_answers),
        ("evictions", c.evictions),
    ]
}

fn wait_pairs(c: &WaitCounters) -> Vec<(&'static str, u64)> {
    vec![
        ("delivered", c.delivered),
        ("parked", c.parked),
        ("released", c.released),
        ("not_ready_drops", c.not_ready_drops),
        ("stale_drops", c.stale_drops),
        ("epoch_drops", c.epoch_drops),
        ("version_mismatch_drops", c.version_mismatch_drops),
        ("not_relay_drops", c.not_relay_drops),
        ("overflow_drops", c.overflow_drops),
    ]
}

fn receiver_pairs(c: &ReceiverCounters) -> Vec<(&'static str, u64)> {
    vec![
        ("snapshot_hits", c.hits),
        ("snapshot_rebuilds", c.rebuilds),
        ("rx_domains_cut", c.rx_domains_cut),
    ]
}

fn link_pairs(c: &EdgeLinkCounters) -> Vec<(&'static str, u64)> {
    vec![
        ("fail_closed_drops", c.fail_closed_drops),
        ("local_voice", c.local_voice),
        ("local_floor_drops", c.local_floor_drops),
        ("grace_expiries", c.grace_expiries),
        ("floor_evictions", c.floor_evictions),
    ]
}

fn sync_pairs(c: &EdgeSyncCounters) -> Vec<(&'static str, u64)> {
    vec![
        ("deltas_applied", c.deltas_applied),
        ("snapshots_committed", c.snapshots_committed),
        ("reacks", c.reacks),
        ("resyncs", c.resyncs),
        ("ignored_chunks", c.ignored_chunks),
    ]
}

fn protection_pairs(c: &ProtectionCounters) -> Vec<(&'static str, u64)> {
    vec![
        ("soft_limit_events", c.data_soft_limit_events),
        ("hard_limit_drops", c.data_hard_limit_drops),
        ("queue_drops", c.data_queue_drops),
        ("stale_drops", c.data_stale_drops),
        ("invalid_auth_tags", c.invalid_auth_tags),
        ("hop_count_drops", c.hop_count_drops),
        ("oversize_drops", c.oversize_drops),
        ("malformed_envelopes", c.malformed_envelopes),
        ("identity_rejects", c.identity_rejects),
        ("expired_drops", c.expired_drops),
        ("replay_drops", c.replay_drops),
        ("invalid_relay_drops", c.invalid_relay_drops),
        ("unexpected_subtype_drops", c.unexpected_subtype_drops),
    ]
}

fn traffic_pairs(c: &TrafficCounters) -> Vec<(&'static str, u64)> {
    vec![
        ("in_packets", c.in_packets),
        ("in_bytes", c.in_bytes),
        ("out_packets", c.out_packets),
        ("out_bytes", c.out_bytes),
        ("drops", c.drops),
    ]
}

fn bridge_pairs(c: &BridgeCounters) -> Vec<(&'static str, u64)> {
    vec![
        ("unauthenticated_type0", c.unauthenticated_type0),
        ("truncated_type0", c.truncated_type0),
        ("invalid_type0", c.invalid_type0),
        ("global_queue_drops", c.global_queue_drops),
        ("orphaned_drops", c.orphaned_drops),
        ("outbound_evictions", c.outbound_evictions),
    ]
}

/// The edge's HTTP routes: `GET /metrics` and `GET /healthz`.
pub(crate) fn router(source: EdgeStatsSource) -> Router {
    Router::new()
        .route("/metrics", get(metrics))
        .route("/healthz", get(healthz))
        .with_state(source)
}

async fn metrics(State(source): State<EdgeStatsSource>) -> Response {
    (
        [(header::CONTENT_TYPE, "text/plain; version=0.0.4")],
        source.read().render(),
    )
        .into_response()
}

/// `200 ok` while the link is ready, `503` with the state otherwise.
async fn healthz(State(source): State<EdgeStatsSource>) -> Response {
    let state = lock(&source.state).link.state();
    if state == LinkState::Ready {
        "ok\n".into_response()
    } else {
        (
            axum::http::StatusCode::SERVICE_UNAVAILABLE,
            format!("{state:?}\n"),
        )
            .into_response()
    }
}
