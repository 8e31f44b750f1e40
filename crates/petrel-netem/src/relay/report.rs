//! The relay's counters as plain, serialisable snapshots.

use std::net::SocketAddr;
use std::time::Duration;

use hdrhistogram::Histogram;
use serde::Serialize;

use crate::config::LinkConfig;
use crate::stats::LinkStats;

/// One direction of one route: counters plus configured and observed rates.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct DirectionReport {
    /// The counters.
    #[serde(flatten)]
    pub stats: LinkStats,
    /// Loss ratio the loss conditions should give ([`LinkConfig::configured_loss`]).
    pub configured_loss: f64,
    /// Loss ratio observed ([`LinkStats::observed_loss`]).
    pub observed_loss: f64,
    /// Configured serialization rate in bit/s (`None`: unlimited).
    pub configured_rate_bps: Option<u64>,
    /// Bytes in × 8 / route age, in bit/s.
    pub observed_in_bps: f64,
    /// Bytes forwarded × 8 / route age, in bit/s.
    pub observed_forwarded_bps: f64,
}

impl DirectionReport {
    pub(crate) fn new(stats: LinkStats, config: &LinkConfig, age: Duration) -> Self {
        let secs = age.as_secs_f64().max(1e-9);
        Self {
            stats,
            configured_loss: config.configured_loss(),
            observed_loss: stats.observed_loss(),
            configured_rate_bps: config.rate_bps,
            observed_in_bps: stats.in_bytes as f64 * 8.0 / secs,
            observed_forwarded_bps: stats.forwarded_bytes as f64 * 8.0 / secs,
        }
    }
}

/// One route (one client address).
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct RouteReport {
    /// Creation order, which also selects the route's random streams.
    pub index: u64,
    /// The client's address.
    pub client: SocketAddr,
    /// The local address of the route's upstream socket.
    pub upstream_local: Option<SocketAddr>,
    /// Time since the route's first packet, in ms.
    pub age_ms: f64,
    /// Most payload bytes the route (both directions) held at once, queued or
    /// delayed ([`crate::Route::peak_held_bytes`]).
    pub peak_held_bytes: u64,
    /// Most packets the route held at once.
    pub peak_held_packets: u64,
    /// Client → server.
    pub upstream: DirectionReport,
    /// Server → client.
    pub downstream: DirectionReport,
}

/// Scheduled-vs-actual send time of released packets ("lateness"), in µs.
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize)]
pub struct Lateness {
    /// Packets measured.
    pub samples: u64,
    /// Median, µs.
    pub p50_us: f64,
    /// 99th percentile, µs.
    pub p99_us: f64,
    /// 99.9th percentile, µs.
    pub p999_us: f64,
    /// Maximum, µs.
    pub max_us: f64,
    /// Mean, µs.
    pub mean_us: f64,
}

impl Lateness {
    /// Summarises a histogram of lateness in ns.
    pub(crate) fn from_ns(h: &Histogram<u64>) -> Self {
        let us = |ns: u64| ns as f64 / 1e3;
        Self {
            samples: h.len(),
            p50_us: us(h.value_at_quantile(0.5)),
            p99_us: us(h.value_at_quantile(0.99)),
            p999_us: us(h.value_at_quantile(0.999)),
            max_us: us(h.max()),
            mean_us: h.mean() / 1e3,
        }
    }
}

/// Everything the relay counts.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct RelayStats {
    /// Time since the relay started, in ms.
    pub uptime_ms: f64,
    /// CPU time (user + system) of the relay thread, in ms of one core.
    pub thread_cpu_ms: f64,
    /// The configured route limit.
    pub max_routes: usize,
    /// Datagrams dropped because they came from a new client while `max_routes`
    /// routes existed.
    pub routes_rejected: u64,
    /// Datagrams dropped because they did not fit the 65 535-byte receive buffer.
    pub truncated: u64,
    /// Failed receive calls (e.g. ICMP port unreachable reported on a route socket).
    pub recv_errors: u64,
    /// Datagrams the kernel refused to send (error on that datagram).
    pub send_errors: u64,
    /// Datagrams dropped because the socket send buffer was full.
    pub send_dropped: u64,
    /// Routes removed after [`crate::RelayConfig::route_idle_timeout`] without traffic.
    pub routes_expired: u64,
    /// Routes that could not get an upstream socket (their datagram is dropped).
    pub route_setup_errors: u64,
    /// Send-time error of every released packet.
    pub lateness: Lateness,
    /// Upstream counters of every route the relay has had (expired ones included).
    pub upstream_total: LinkStats,
    /// Downstream counters of every route the relay has had (expired ones included).
    pub downstream_total: LinkStats,
    /// Live routes, in creation order.
    pub routes: Vec<RouteReport>,
}

impl RelayStats {
    pub(crate) fn empty(max_routes: usize) -> Self {
        Self {
            uptime_ms: 0.0,
            thread_cpu_ms: 0.0,
            max_routes,
            routes_rejected: 0,
            truncated: 0,
            recv_errors: 0,
            send_errors: 0,
            send_dropped: 0,
            route_setup_errors: 0,
            routes_expired: 0,
            lateness: Lateness::default(),
            upstream_total: LinkStats::default(),
            downstream_total: LinkStats::default(),
            routes: Vec::new(),
        }
    }
}
