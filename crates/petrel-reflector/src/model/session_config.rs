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
    /// Longest over, s, 10–600: a talker that has held a domain's floor this
    /// long loses it (the spec has no limit). Default 120, the Android app's
    /// default push-to-talk transmit timeout (its range is 10–600 s).
    pub floor_max_talk_s: u64,
    /// How long a talker cut at `floor_max_talk_s` may not take that
    /// domain's floor again, counted from the cut, ms, 0–60 000. Default
    /// 5 000. See `policy/floor.rs` for why from the cut.
    pub floor_holdoff_ms: u64,
    /// Sustained packets/s per source IP (reference: 600).
    pub per_ip_pps: u32,
    /// Sustained packets/s per source IP:port (reference: 150).
    pub per_endpoint_pps: u32,
    /// Entries in each rate-limit table (per IP, per IP:port), 16–10 000 000;
    /// a new source in a full table evicts the least recently seen one.
    pub rate_table_max: usize,
    /// Entries in the failed-auth ban table, 16–10 000 000; a new key in a
    /// full table evicts the least recent record still within its free
    /// failures (a banned one only when none is left).
    pub ban_table_max: usize,
    /// Online devices at most; logins beyond it get reject code 3 `server_full`.
    pub max_sessions: usize,
    /// Argon2 password verifications per second across all sources; beyond
    /// it logins get reject code 3 `server_busy` (Argon2 is deliberately slow,
    /// so unbounded verification would let a flood of wrong passwords stall
    /// ingress). Already-verified passwords do not count. The per-prefix
    /// budgets below are taken first; a first login the global budget
    /// cannot take at once waits in a per-prefix line served round-robin.
    pub password_checks_per_s: u32,
    /// Argon2 verifications per minute from one source prefix (/24 for IPv4,
    /// /64 for IPv6), 1–600 000; beyond it that prefix's first logins get
    /// `server_busy`, so one network cannot take the global budget. Default
    /// 120 (2/s).
    pub prefix_password_checks_per_min: u32,
    /// Argon2 verifications a source prefix may spend at once, 1–10 000.
    /// Default 20.
    pub prefix_password_checks_burst: u32,
    /// Argon2 verifications per minute from one source prefix for one user,
    /// 1–600 000, so guesses for some users cannot spend what other users of
    /// the same network need. Default 6 (one per 10 s).
    pub prefix_user_password_checks_per_min: u32,
    /// Argon2 verifications a source prefix may spend on one user at once,
    /// 1–10 000. Default 5.
    pub prefix_user_password_checks_burst: u32,
    /// Entries in each per-prefix budget table (prefixes; prefix-user pairs),
    /// 16–10 000 000; a new key in a full table evicts the least recent.
    pub password_budget_table_max: usize,
    /// First logins one source prefix may have waiting for the global
    /// Argon2 budget, 1–1 000; beyond it that prefix's first logins get
    /// `server_busy`. The line is served round-robin over prefixes, so a
    /// prefix that is not flooding waits about one round (see
    /// `policy/password_queue.rs`). Default 8.
    pub password_check_queue_per_prefix: usize,
    /// First logins waiting for the global Argon2 budget over all prefixes,
    /// 1–1 000 000; a new one in a full line evicts the newest of the
    /// longest queue. Default 4 096.
    pub password_check_queue_max: usize,
    /// Argon2 verifications running at once (1–256); a login needing one
    /// beyond it gets reject code 3 `server_busy`. One pool of this many
    /// threads serves every ingress shard; checks never run on ingress
    /// threads.
    pub password_checks_in_flight: usize,
    /// Type 4 texts per minute per device, sustained (1–6000); beyond it
    /// texts are dropped and counted (`text_rate_drops`). Every text is also
    /// stored, so this bounds what one device adds to the history. Default 30.
    pub text_per_minute: u32,
    /// Texts a device may send at once before `text_per_minute` applies
    /// (1–1000). Default 5.
    pub text_burst: u32,
    /// Which endpoints may receive fan-out (TOML `[session.endpoints]`).
    pub endpoints: EndpointPolicy,
    /// Live app (ghost) sessions one account may hold over all transports
    /// (1–64; `specs/draarl-apps.md` §2.4 `MaxSessionsPerOwner`). Default 8.
    pub ghost_sessions_per_owner: usize,
    /// Receive groups one app session may subscribe to, TX included
    /// (1–256; §2.4 `MaxSubscriptionsPerSession`). Default 16.
    pub ghost_subscriptions: usize,
    /// Live app sessions over all accounts (1–10000000); when full, a new
    /// login evicts the session heard least recently (counted in
    /// `ghost_sessions_evicted`). Default 100000.
    pub ghost_sessions_max: usize,
    /// Type 1 logins one shard keeps waiting for the account store at once
    /// (1–65536); when full, the oldest is abandoned (counted in
    /// `app_login_checks_evicted`; its client retries). Default 1024.
    pub app_logins_in_flight: usize,
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
            floor_max_talk_s: 120,
            floor_holdoff_ms: 5_000,
            per_ip_pps: 600,
            per_endpoint_pps: 150,
            rate_table_max: 65_536,
            ban_table_max: 65_536,
            max_sessions: 100_000,
            password_checks_per_s: 10,
            prefix_password_checks_per_min: 120,
            prefix_password_checks_burst: 20,
            prefix_user_password_checks_per_min: 6,
            prefix_user_password_checks_burst: 5,
            password_budget_table_max: 65_536,
            password_check_queue_per_prefix: 8,
            password_check_queue_max: 4_096,
            password_checks_in_flight: 4,
            text_per_minute: 30,
            text_burst: 5,
            endpoints: EndpointPolicy::default(),
            ghost_sessions_per_owner: 8,
            ghost_subscriptions: 16,
            ghost_sessions_max: 100_000,
            app_logins_in_flight: 1024,
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
        check_range("floor_max_talk_s", self.floor_max_talk_s, &(10..=600))?;
        check_range("floor_holdoff_ms", self.floor_holdoff_ms, &(0..=60_000))?;
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
            "prefix_password_checks_per_min",
            self.prefix_password_checks_per_min,
            &(1..=600_000),
        )?;
        check_range(
            "prefix_password_checks_burst",
            self.prefix_password_checks_burst,
            &(1..=10_000),
        )?;
        check_range(
            "prefix_user_password_checks_per_min",
            self.prefix_user_password_checks_per_min,
            &(1..=600_000),
        )?;
        check_range(
            "prefix_user_password_checks_burst",
            self.prefix_user_password_checks_burst,
            &(1..=10_000),
        )?;
        check_range(
            "password_budget_table_max",
            self.password_budget_table_max,
            &(16..=10_000_000),
        )?;
        check_range(
            "password_check_queue_per_prefix",
            self.password_check_queue_per_prefix,
            &(1..=1_000),
        )?;
        check_range(
            "password_check_queue_max",
            self.password_check_queue_max,
            &(1..=1_000_000),
        )?;
        check_range(
            "password_checks_in_flight",
            self.password_checks_in_flight,
            &(1..=256),
        )?;
        check_range("text_per_minute", self.text_per_minute, &(1..=6000))?;
        check_range("text_burst", self.text_burst, &(1..=1000))?;
        check_range(
            "ghost_sessions_per_owner",
            self.ghost_sessions_per_owner,
            &(1..=64),
        )?;
        check_range("ghost_subscriptions", self.ghost_subscriptions, &(1..=256))?;
        check_range(
            "ghost_sessions_max",
            self.ghost_sessions_max,
            &(1..=10_000_000),
        )?;
        check_range(
            "app_logins_in_flight",
            self.app_logins_in_flight,
            &(1..=65_536),
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
