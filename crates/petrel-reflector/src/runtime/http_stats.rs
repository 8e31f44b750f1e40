//! Counters of the HTTP endpoint (`http.rs`, `http_server.rs`), shared
//! between its tasks.

use std::sync::atomic::{AtomicU64, Ordering::Relaxed};

/// Counters of the HTTP endpoint.
#[derive(Debug, Default)]
pub struct HttpStats {
    pub(crate) connections_accepted: AtomicU64,
    pub(crate) connections_refused: AtomicU64,
    pub(crate) connections_refused_per_ip: AtomicU64,
    pub(crate) connections_refused_per_prefix: AtomicU64,
    pub(crate) idle_evictions: AtomicU64,
    pub(crate) header_timeouts: AtomicU64,
    pub(crate) connection_timeouts: AtomicU64,
    pub(crate) rate_limited: AtomicU64,
    pub(crate) unauthorized: AtomicU64,
    pub(crate) request_timeouts: AtomicU64,
    pub(crate) body_too_large: AtomicU64,
    pub(crate) ip_table_evictions: AtomicU64,
}

/// A copy of [`HttpStats`] at one moment.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct HttpStatsSnapshot {
    /// Connections accepted and served.
    pub connections_accepted: u64,
    /// Connections refused (503, closed) because `max_connections` were
    /// open and every one had sent its request headers.
    pub connections_refused: u64,
    /// Connections refused (503, closed) because their source address had
    /// `max_connections_per_ip` open.
    pub connections_refused_per_ip: u64,
    /// Connections refused (503, closed) because their source's /24 (IPv4)
    /// or /64 (IPv6) had `max_connections_per_prefix` open.
    pub connections_refused_per_prefix: u64,
    /// Connections still awaiting their request headers closed to make
    /// room for a new one when `max_connections` were open (oldest first).
    pub idle_evictions: u64,
    /// Connections closed because the request headers took longer than
    /// `header_timeout_ms` (slow or idle clients).
    pub header_timeouts: u64,
    /// Connections closed after `header_timeout_ms + request_timeout_ms`
    /// (e.g. a client not reading its response).
    pub connection_timeouts: u64,
    /// Requests without a valid admin token over their source's budget
    /// (its /24 or /64; 429).
    pub rate_limited: u64,
    /// Requests to the admin API (`/api/...`) with a missing or wrong token
    /// (401).
    pub unauthorized: u64,
    /// Requests not answered within `request_timeout_ms` (408).
    pub request_timeouts: u64,
    /// Requests with a body over `max_body_bytes` (413).
    pub body_too_large: u64,
    /// Per-source budget entries evicted to make room for new sources.
    pub ip_table_evictions: u64,
}

impl HttpStats {
    /// Reads every counter.
    pub fn snapshot(&self) -> HttpStatsSnapshot {
        HttpStatsSnapshot {
            connections_accepted: self.connections_accepted.load(Relaxed),
            connections_refused: self.connections_refused.load(Relaxed),
            connections_refused_per_ip: self.connections_refused_per_ip.load(Relaxed),
            connections_refused_per_prefix: self.connections_refused_per_prefix.load(Relaxed),
            idle_evictions: self.idle_evictions.load(Relaxed),
            header_timeouts: self.header_timeouts.load(Relaxed),
            connection_timeouts: self.connection_timeouts.load(Relaxed),
            rate_limited: self.rate_limited.load(Relaxed),
            unauthorized: self.unauthorized.load(Relaxed),
            request_timeouts: self.request_timeouts.load(Relaxed),
            body_too_large: self.body_too_large.load(Relaxed),
            ip_table_evictions: self.ip_table_evictions.load(Relaxed),
        }
    }
}

impl HttpStatsSnapshot {
    /// Every counter with its name, for metrics export.
    pub fn counters(&self) -> Vec<(&'static str, u64)> {
        vec![
            ("connections_accepted", self.connections_accepted),
            ("connections_refused", self.connections_refused),
            (
                "connections_refused_per_ip",
                self.connections_refused_per_ip,
            ),
            (
                "connections_refused_per_prefix",
                self.connections_refused_per_prefix,
            ),
            ("idle_evictions", self.idle_evictions),
            ("header_timeouts", self.header_timeouts),
            ("connection_timeouts", self.connection_timeouts),
            ("rate_limited", self.rate_limited),
            ("unauthorized", self.unauthorized),
            ("request_timeouts", self.request_timeouts),
            ("body_too_large", self.body_too_large),
            ("ip_table_evictions", self.ip_table_evictions),
        ]
    }
}
