//! Limits of the HTTP operations endpoint (`[http]`): timeouts, the
//! connection caps, the body size limit and the per-source-prefix request
//! budget of requests without a valid admin token.

use std::time::Duration;

use serde::Deserialize;

use petrel_sys::range::{check_range, RangeError};

/// Fewest characters an admin token may have: shorter ones are guessable
/// over the network within the per-IP limits, so the server refuses to
/// start with one.
pub const MIN_ADMIN_TOKEN_CHARS: usize = 16;

/// HTTP server limits. Every connection serves one request (no
/// keep-alive), so a connection's life is one request's.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct HttpConfig {
    /// Time from accepting a connection until its request headers are
    /// complete, ms (100–60000); then the connection is closed. Default 5000.
    pub header_timeout_ms: u64,
    /// Time for reading the body and answering, ms (100–300000); a handler
    /// that takes longer answers 408, and a connection still open after
    /// `header_timeout_ms + request_timeout_ms` (a client not reading the
    /// response) is closed. Default 10000.
    pub request_timeout_ms: u64,
    /// Connections open at once (1–65536). When all are open, a new
    /// connection closes the oldest one that has not yet sent its request
    /// headers (counted in `http_idle_evictions`); only if every open one
    /// has, it gets `503` and is closed, counted in
    /// `http_connections_refused`. Default 64.
    pub max_connections: usize,
    /// Connections open at once from one source address (1–65536); beyond
    /// it a new one gets `503` and is closed, counted in
    /// `http_connections_refused_per_ip`, so one host cannot take every
    /// slot. Default 8.
    pub max_connections_per_ip: usize,
    /// Connections open at once from one source prefix, the /24 of an IPv4
    /// address or the /64 of an IPv6 one (1–65536); beyond it a new one
    /// gets `503` and is closed, counted in
    /// `http_connections_refused_per_prefix`, so rotating addresses within
    /// one network gains nothing. Default 16.
    pub max_connections_per_prefix: usize,
    /// Largest request body, bytes (64–16777216); larger ones get 413.
    /// Default 16384 (admin bodies are a few dozen bytes).
    pub max_body_bytes: usize,
    /// Sustained requests per second without a valid admin token per
    /// source prefix, the /24 of an IPv4 address or the /64 of an IPv6 one
    /// (1–100000); beyond it 429. Default 10. Behind a reverse proxy every
    /// request has the proxy's address, so the budget is shared.
    pub per_ip_rps: u32,
    /// Requests per source prefix that may come at once before
    /// `per_ip_rps` applies (1–100000). Default 20.
    pub per_ip_burst: u32,
    /// Source prefixes tracked for `per_ip_rps` (16–1000000); when full,
    /// idle entries and then the least recently seen are evicted (counted).
    /// Default 4096.
    pub ip_table_max: usize,
}

impl Default for HttpConfig {
    fn default() -> Self {
        Self {
            header_timeout_ms: 5_000,
            request_timeout_ms: 10_000,
            max_connections: 64,
            max_connections_per_ip: 8,
            max_connections_per_prefix: 16,
            max_body_bytes: 16 << 10,
            per_ip_rps: 10,
            per_ip_burst: 20,
            ip_table_max: 4096,
        }
    }
}

impl HttpConfig {
    /// Checks every field against its range.
    pub fn validate(&self) -> Result<(), RangeError> {
        check_range(
            "http.header_timeout_ms",
            self.header_timeout_ms,
            &(100..=60_000),
        )?;
        check_range(
            "http.request_timeout_ms",
            self.request_timeout_ms,
            &(100..=300_000),
        )?;
        check_range("http.max_connections", self.max_connections, &(1..=65_536))?;
        check_range(
            "http.max_connections_per_ip",
            self.max_connections_per_ip,
            &(1..=65_536),
        )?;
        check_range(
            "http.max_connections_per_prefix",
            self.max_connections_per_prefix,
            &(1..=65_536),
        )?;
        check_range("http.max_body_bytes", self.max_body_bytes, &(64..=16 << 20))?;
        check_range("http.per_ip_rps", self.per_ip_rps, &(1..=100_000))?;
        check_range("http.per_ip_burst", self.per_ip_burst, &(1..=100_000))?;
        check_range("http.ip_table_max", self.ip_table_max, &(16..=1_000_000))
    }

    /// [`HttpConfig::header_timeout_ms`] as a duration.
    pub fn header_timeout(&self) -> Duration {
        Duration::from_millis(self.header_timeout_ms)
    }

    /// [`HttpConfig::request_timeout_ms`] as a duration.
    pub fn request_timeout(&self) -> Duration {
        Duration::from_millis(self.request_timeout_ms)
    }
}
