//! The idle-cost benchmark (`benchmark` = `"idle"`): its parameters and
//! what the idle interval cost (the one element of `rounds`).

use serde::{Deserialize, Serialize};

/// Every parameter of an idle-cost run, as recorded in `parameters`.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct IdleParameters {
    /// Connections opened.
    pub connections: usize,
    /// Measured idle interval, s.
    pub measured: f64,
    /// Handshake mode of the connections.
    pub mode: IdleMode,
}

/// Handshake mode of the idle connections.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum IdleMode {
    /// Native handshake: keepalive every 5 s.
    Native,
    /// Raw KCP: no keepalive.
    Raw,
}

/// What the idle interval cost.
#[derive(Debug, Clone, Copy, Serialize, Deserialize)]
pub struct IdleReport {
    /// Connections established and verified.
    pub connections: usize,
    /// Seconds to open and verify all connections.
    pub setup_seconds: f64,
    /// Process CPU over the idle interval, % of one core.
    pub cpu_percent: f64,
    /// Timer wake-ups per second, both endpoints.
    pub wakeups_per_second: f64,
    /// Datagrams sent per second, both endpoints (keepalives and their acks).
    pub datagrams_per_second: f64,
    /// Resident set size after setup, bytes.
    pub rss_bytes: u64,
    /// Resident set growth from before setup, per connection (both ends), bytes.
    pub rss_bytes_per_connection: f64,
}
