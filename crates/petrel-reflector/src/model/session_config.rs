//! Session-core configuration with the reference's defaults (draarl-v1 §3).

use std::time::Duration;

use petrel_sys::range::{check_range, RangeError};
use serde::Deserialize;

use super::endpoint_policy::EndpointPolicy;

/// Policy knobs of the session core. Durations are in ms, rates in packets/s.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct SessionConfig {
    /// Silence after which a device goes offline, ms (reference: 20 000).
    pub offline_timeout_ms: u64,
    /// Period of the offline sweep, ms (reference: 5 000).
    pub sweep_interval_ms: u64,
    /// Silence after which a domain's floor frees, ms (reference: 900).
    pub floor_hold_ms: u64,
    /// Sustained packets/s per source IP (reference: 600).
    pub per_ip_pps: u32,
    /// Sustained packets/s per source IP:port (reference: 150).
    pub per_endpoint_pps: u32,
    /// Entries in each rate-limit table; new sources beyond it are dropped.
    pub rate_table_max: usize,
    /// Entries in the failed-auth ban table.
    pub ban_table_max: usize,
    /// Online devices at most; logins beyond it get reject code 3 `server_full`.
    pub max_sessions: usize,
    /// Argon2 password verifications per second across all sources; beyond
    /// it logins get reject code 3 `server_busy` (Argon2 is deliberately slow,
    /// so unbounded verification would let a flood of wrong passwords stall
    /// ingress). Already-verified passwords do not count.
    pub password_checks_per_s: u32,
    /// Argon2 verifications running at once (1–256); a login needing one
    /// beyond it gets reject code 3 `server_busy`. One pool of this many
    /// threads serves every ingress shard; checks never run on ingress
    /// threads.
    pub password_checks_in_flight: usize,
    /// Which endpoints may receive fan-out (TOML `[session.endpoints]`).
    pub endpoints: EndpointPolicy,
    /// Send paths the receiver snapshots are partitioned for (1–32). Not read
    /// from TOML: a runtime derives it from its own send paths (the server
    /// from `[fanout] writers`, see [`super::ServerConfig::session_policy`]).
    #[serde(skip)]
    pub partitions: usize,
}

impl Default for SessionConfig {
    fn default() -> Self {
        Self {
            offline_timeout_ms: 20_000,
            sweep_interval_ms: 5_000,
            floor_hold_ms: 900,
            per_ip_pps: 600,
            per_endpoint_pps: 150,
            rate_table_max: 65_536,
            ban_table_max: 65_536,
            max_sessions: 100_000,
            password_checks_per_s: 10,
            password_checks_in_flight: 4,
            endpoints: EndpointPolicy::default(),
            partitions: 2,
        }
    }
}

impl SessionConfig {
    /// Checks every field against its range.
    pub fn validate(&self) -> Result<(), RangeError> {
        check_range(
            "offline_timeout_ms",
            self.offline_timeout_ms,
            &(1_000..=600_000),
        )?;
        check_range("sweep_interval_ms", self.sweep_interval_ms, &(100..=60_000))?;
        check_range("floor_hold_ms", self.floor_hold_ms, &(100..=10_000))?;
        check_range("per_ip_pps", self.per_ip_pps, &(1..=1_000_000))?;
        check_range("per_endpoint_pps", self.per_endpoint_pps, &(1..=1_000_000))?;
        check_range("rate_table_max", self.rate_table_max, &(16..=10_000_000))?;
        check_range("ban_table_max", self.ban_table_max, &(16..=10_000_000))?;
        check_range("max_sessions", self.max_sessions, &(1..=10_000_000))?;
        check_range(
            "password_checks_per_s",
            self.password_checks_per_s,
            &(1..=10_000),
        )?;
        check_range(
            "password_checks_in_flight",
            self.password_checks_in_flight,
            &(1..=256),
        )?;
        self.endpoints.validate()?;
        // A new endpoint must be able to prove itself before it goes offline.
        check_range(
            "receive_after_ms",
            self.endpoints.receive_after_ms,
            &(0..=self.offline_timeout_ms - 1),
        )?;
        check_range("partitions", self.partitions, &(1..=32))
    }

    pub(crate) fn offline_timeout(&self) -> Duration {
        Duration::from_millis(self.offline_timeout_ms)
    }

    pub(crate) fn sweep_interval(&self) -> Duration {
        Duration::from_millis(self.sweep_interval_ms)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn defaults_validate_and_errors_name_the_field() {
        assert!(SessionConfig::default().validate().is_ok());
        let c = SessionConfig {
            partitions: 0,
            ..SessionConfig::default()
        };
        let e = c.validate().unwrap_err();
        assert_eq!(e.field, "partitions");
        assert_eq!(e.to_string(), "partitions = 0 is outside 1..=32");
    }
}
