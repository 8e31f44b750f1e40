//! A node's counters from its `/metrics` (Prometheus text format, version
//! 0.0.4; the centre's and the single node's HTTP port, an edge's `--http`
//! port; draarl-interconnect §7), read before and after a stage, and which of
//! them count voice that a node dropped — the counters
//! [`super::loss_attribution`] matches missing datagrams with.
//!
//! Drop counters, by what one increment costs the receivers:
//! - a whole frame ([`DropKind::Frame`]): on a centre or single node
//!   (`petrel_reflector_…`), fan-out frames dropped (evicted from a full
//!   queue) or expired, the ingress and floor drops of voice before fan-out,
//!   and every interconnect data-plane drop or eviction
//!   (`…interconnect…drops…`, `…interconnect…evictions…`); on an edge
//!   (`petrel_reflector_edge_…`), its fan-out's, its wait rule's (§4.7), its
//!   speaker state's (§3.10), its link's (§6.1), its device side's and
//!   output's, and its data plane's protection and bridge drops (§7) —
//!   aggregates of those (`traffic_drops`, `bridge_invalid_type0`) are left
//!   out so nothing counts twice;
//! - one datagram ([`DropKind::Datagram`]): failed sends to one receiver.
//!
//! Other counters (logins, HTTP, text, tables) are read but not matched.

use std::collections::BTreeMap;
use std::net::SocketAddr;

use super::child::http_request;
use super::loss_attribution::NodeDrops;
use super::LoadError;

/// Counter names (after the `petrel_reflector_` prefix, before `_total`)
/// whose increments are voice frames dropped whole.
const FRAME_DROPS: &[&str] = &[
    "fanout_frames_dropped",
    "fanout_frames_expired",
    "ingress_rate_limit_drops",
    "ingress_queue_full_drops",
    "session_floor_busy_drops",
    "session_floor_talk_limit_cuts",
    "session_floor_holdoff_drops",
    "session_send_ban_drops",
    "session_non_forwarding_drops",
];
/// An edge's counter names (after `petrel_reflector_edge_`, before
/// `_total`) whose increments are voice frames dropped whole.
const EDGE_FRAME_DROPS: &[&str] = &[
    "fanout_frames_dropped",
    "fanout_frames_expired",
    "wait_not_ready_drops",
    "wait_stale_drops",
    "wait_epoch_drops",
    "wait_version_mismatch_drops",
    "wait_not_relay_drops",
    "wait_overflow_drops",
    "lease_buffer_drops",
    "lease_other_talker_drops",
    "lease_buffer_full_drops",
    "lease_blocked_drops",
    "link_fail_closed_drops",
    "link_local_floor_drops",
    "device_unknown_device_drops",
    "device_send_ban_drops",
    "device_no_domain_drops",
    "device_downstream_invalid",
    "node_bad_payloads",
    "node_send_failures",
    "ingress_rate_limit_drops",
    "ingress_queue_full_drops",
    "output_upstream_build_errors",
    "output_udp_errors",
    "output_control_path_failures",
    "data_hard_limit_drops",
    "data_queue_drops",
    "data_stale_drops",
    "data_invalid_auth_tags",
    "data_identity_rejects",
    "data_expired_drops",
    "data_replay_drops",
    "data_invalid_relay_drops",
    "data_unexpected_subtype_drops",
    "bridge_unauthenticated_type0",
    "bridge_global_queue_drops",
    "bridge_orphaned_drops",
    "bridge_outbound_evictions",
];
/// Counter names (either prefix) whose increments are single datagrams
/// not sent.
const DATAGRAM_DROPS: &[&str] = &["fanout_write_errors"];
/// The interconnect's counters that name a cause but are not data-plane
/// drops of voice (control-plane refusals and table housekeeping).
const NOT_VOICE: &[&str] = &[
    "control",
    "auth",
    "handshake",
    "pending",
    "session_evictions",
    "text",
];

/// What one increment of a drop counter costs the receivers.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum DropKind {
    /// One frame, all of the node's receivers of it.
    Frame,
    /// One datagram to one receiver.
    Datagram,
}

/// Every sample of one `/metrics` answer, by series name (labels kept as
/// written, e.g. `x_total{cause="replay"}`).
#[derive(Debug, Clone, Default, PartialEq)]
pub struct MetricsReading(BTreeMap<String, f64>);

impl MetricsReading {
    /// Parses the text format: `name[{labels}] value [timestamp]` lines;
    /// comments, blank lines and lines whose value is not a number are
    /// skipped.
    pub fn parse(text: &str) -> Self {
        let samples = text
            .lines()
            .map(str::trim)
            .filter(|l| !l.is_empty() && !l.starts_with('#'))
            .filter_map(|l| {
                // Label values may hold spaces: the name ends at the closing brace.
                let split = match l.find('{') {
                    Some(open) => open + l[open..].find('}')? + 1,
                    None => l.find(char::is_whitespace)?,
                };
                let (name, rest) = l.split_at(split);
                let value = rest.split_whitespace().next()?.parse::<f64>().ok()?;
                Some((name.to_owned(), value))
            })
            .collect();
        Self(samples)
    }

    /// `GET /metrics` from `http`.
    ///
    /// # Errors
    /// [`LoadError`] when the node does not answer 2xx.
    pub fn fetch(http: SocketAddr) -> Result<Self, LoadError> {
        http_request(http, "GET", "/metrics", None, None).map(|body| Self::parse(&body))
    }

    /// One series' value.
    pub fn get(&self, name: &str) -> Option<f64> {
        self.0.get(name).copied()
    }

    /// The counters (series named `…_total`) that grew from `before` to
    /// `self`, with their increase; a counter absent before counts from 0.
    pub fn increases_since(&self, before: &Self) -> Vec<(String, u64)> {
        self.0
            .iter()
            .filter(|(name, _)| series_base(name).ends_with("_total"))
            .filter_map(|(name, &after)| {
                let was = before.get(name).unwrap_or(0.0);
                let grew = (after - was).round();
                (grew >= 1.0).then(|| (name.clone(), grew as u64))
            })
            .collect()
    }
}

/// Words in the names of the counters that say where logins stopped.
const LOGIN_WORDS: [&str; 6] = ["auth", "login", "reject", "refus", "pending", "budget"];

/// The nonzero counters of `reading` that say where logins stopped (names
/// holding `auth`, `login`, `reject`, `refus`, `pending` or `budget`) as
/// `name=value …`, or `none`.
pub fn login_counters(reading: &MetricsReading) -> String {
    let found: Vec<String> = reading
        .increases_since(&MetricsReading::default())
        .into_iter()
        .filter(|(name, _)| LOGIN_WORDS.iter().any(|w| series_base(name).contains(w)))
        .map(|(name, v)| format!("{name}={v}"))
        .collect();
    if found.is_empty() {
        "none".to_owned()
    } else {
        found.join(" ")
    }
}

/// The series name without its labels.
fn series_base(name: &str) -> &str {
    name.split('{').next().unwrap_or(name)
}

/// Whether the counter `name` counts dropped voice, and what an increment costs.
pub fn drop_kind(name: &str) -> Option<DropKind> {
    let base = series_base(name);
    let base = base.strip_suffix("_total").unwrap_or(base);
    if let Some(edge) = base.strip_prefix("petrel_reflector_edge_") {
        if DATAGRAM_DROPS.contains(&edge) {
            return Some(DropKind::Datagram);
        }
        return EDGE_FRAME_DROPS.contains(&edge).then_some(DropKind::Frame);
    }
    let short = base.strip_prefix("petrel_reflector_").unwrap_or(base);
    if DATAGRAM_DROPS.contains(&short) {
        return Some(DropKind::Datagram);
    }
    if FRAME_DROPS.contains(&short) {
        return Some(DropKind::Frame);
    }
    let interconnect_drop = short.contains("interconnect")
        && (short.contains("drops") || short.contains("evictions"))
        && !NOT_VOICE.iter().any(|n| short.contains(n));
    interconnect_drop.then_some(DropKind::Frame)
}

/// The drop counters among `increases`, with their kind.
pub fn drop_increases(increases: &[(String, u64)]) -> Vec<(String, u64, DropKind)> {
    increases
        .iter()
        .filter_map(|(n, v)| drop_kind(n).map(|k| (n.clone(), *v, k)))
        .collect()
}

/// The frames and datagrams a node's drop counters say it dropped.
pub fn node_drops(increases: &[(String, u64)]) -> NodeDrops {
    let mut d = NodeDrops::default();
    for (_, v, kind) in drop_increases(increases) {
        match kind {
            DropKind::Frame => d.frames += v,
            DropKind::Datagram => d.datagrams += v,
        }
    }
    d
}

#[cfg(test)]
mod tests {
    use super::*;

    const BEFORE: &str = "# TYPE petrel_reflector_fanout_frames_dropped_total counter
petrel_reflector_fanout_frames_dropped_total 3
# TYPE petrel_reflector_fanout_queue_high_water gauge
petrel_reflector_fanout_queue_high_water 10
petrel_reflector_fanout_write_errors_total 0
petrel_reflector_session_logins_total 7
";
    const AFTER: &str = "# TYPE petrel_reflector_fanout_frames_dropped_total counter
petrel_reflector_fanout_frames_dropped_total 8
petrel_reflector_fanout_frames_expired_total 2
petrel_reflector_fanout_queue_high_water 64
petrel_reflector_fanout_write_errors_total 4
petrel_reflector_session_logins_total 9
petrel_reflector_fanout_text_frames_dropped_total 5
petrel_reflector_interconnect_replay_drops_total{node=\"edge b\"} 6 1700000000000
petrel_reflector_interconnect_auth_failed_total 1
petrel_reflector_interconnect_control_hard_limit_drops_total 2
petrel_reflector_edge_wait_overflow_drops_total 3
petrel_reflector_edge_fanout_write_errors_total 1
petrel_reflector_edge_traffic_drops_total 3
petrel_reflector_edge_session_auth_pending_drops_total 9
not_a_number_total x
";

    #[test]
    fn parses_names_labels_and_values() {
        let m = MetricsReading::parse(AFTER);
        assert_eq!(
            m.get("petrel_reflector_fanout_frames_dropped_total"),
            Some(8.0)
        );
        assert_eq!(
            m.get("petrel_reflector_interconnect_replay_drops_total{node=\"edge b\"}"),
            Some(6.0)
        );
        assert_eq!(m.get("not_a_number_total"), None);
    }

    #[test]
    fn increases_cover_grown_counters_only() {
        let inc = MetricsReading::parse(AFTER).increases_since(&MetricsReading::parse(BEFORE));
        let get = |n: &str| inc.iter().find(|(k, _)| k == n).map(|(_, v)| *v);
        assert_eq!(get("petrel_reflector_fanout_frames_dropped_total"), Some(5));
        assert_eq!(get("petrel_reflector_fanout_frames_expired_total"), Some(2));
        assert_eq!(get("petrel_reflector_session_logins_total"), Some(2));
        // Gauges are not counters.
        assert_eq!(get("petrel_reflector_fanout_queue_high_water"), None);
    }

    #[test]
    fn login_counters_name_the_nonzero_ones() {
        let m = MetricsReading::parse(AFTER);
        let c = login_counters(&m);
        assert!(c.contains("petrel_reflector_session_logins_total="), "{c}");
        assert!(
            c.contains("petrel_reflector_edge_session_auth_pending_drops_total=9"),
            "{c}"
        );
        assert!(!c.contains("fanout"), "{c}");
        assert_eq!(login_counters(&MetricsReading::default()), "none");
    }

    #[test]
    fn a_talker_cut_at_the_talk_limit_loses_that_frame() {
        assert_eq!(
            drop_kind("petrel_reflector_session_floor_talk_limit_cuts_total"),
            Some(DropKind::Frame)
        );
    }

    #[test]
    fn drop_counters_by_kind() {
        let inc = MetricsReading::parse(AFTER).increases_since(&MetricsReading::parse(BEFORE));
        let drops = drop_increases(&inc);
        let names: Vec<&str> = drops.iter().map(|(n, _, _)| n.as_str()).collect();
        assert_eq!(
            names,
            [
                "petrel_reflector_edge_fanout_write_errors_total",
                "petrel_reflector_edge_wait_overflow_drops_total",
                "petrel_reflector_fanout_frames_dropped_total",
                "petrel_reflector_fanout_frames_expired_total",
                "petrel_reflector_fanout_write_errors_total",
                "petrel_reflector_interconnect_replay_drops_total{node=\"edge b\"}",
            ]
        );
        // 5 evicted + 2 expired + 6 replayed relays + 3 over the wait
        // rule (the edge's aggregate traffic drops and its login drops are
        // not voice drops); 4 + 1 failed sends.
        assert_eq!(
            node_drops(&inc),
            NodeDrops {
                frames: 16,
                datagrams: 5
            }
        );
    }
}
