//! Counters of the session core (draarl-v1 §4.5 `ingress`, `receiver_cache`
//! and `ghost_packets`, plus the policies added here).

/// Plain counters; each shard keeps its own, the runtime copies them out
/// and sums them with [`SessionStats::add`].
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct SessionStats {
    /// Datagrams handed to the core (after the ingress rate limits).
    pub received: u64,
    /// Failed the envelope checks (spec §2.2).
    pub decode_errors: u64,
    /// Type 1 app logins handled (`specs/draarl-apps.md` §2).
    pub app_logins: u64,
    /// Type 1 logins answered with a session.
    pub app_logins_accepted: u64,
    /// Type 1 logins refused (every reject of §2.2).
    pub app_login_rejects: u64,
    /// Type 1 rejects and `reserved_ssid` replies not sent because they
    /// would be larger than the request (the amplification bound of
    /// `core/app_login.rs`); still counted in their reject counter.
    pub app_replies_withheld: u64,
    /// Type 1 logins abandoned to make room in a full `app_logins_in_flight`.
    pub app_login_checks_evicted: u64,
    /// Type 1 logins abandoned after 10 s without an answer from the account store.
    pub app_login_checks_abandoned: u64,
    /// Account-store answers for a login abandoned or never issued.
    pub app_login_results_unknown: u64,
    /// Tagged app packets whose tag names no live session (§2.5 step 1).
    pub ghost_invalid_tags: u64,
    /// Tagged app packets whose username, SSID or DevModel differ from the session's (§2.5 step 2).
    pub ghost_identity_rejects: u64,
    /// Tagged app packets from another transport address than the login's (§2.5 step 3).
    pub ghost_endpoint_rejects: u64,
    /// Tagged app packets naming a session that is not a UDP session (§2.5 step 4).
    pub ghost_registry_rejects: u64,
    /// Type 2 heartbeats of app sessions answered (§2.6).
    pub ghost_heartbeats: u64,
    /// App sessions ended after the liveness timeout (§2.4).
    pub ghost_sessions_expired: u64,
    /// App sessions replaced by a login of the same (owner, DevModel, instance) (§2.4).
    pub ghost_replacements: u64,
    /// App logins refused at the per-owner session limit.
    pub ghost_session_limit_rejects: u64,
    /// App logins refused with `ghost_session_registration_failed` (endpoint held, no free tag).
    pub ghost_registration_failures: u64,
    /// App sessions evicted from a full registry (`ghost_sessions_max`).
    pub ghost_sessions_evicted: u64,
    /// App sessions that had not proved their address, displaced by a
    /// login from the same IP:port (`core/ghost_registry.rs`).
    pub ghost_sessions_displaced: u64,
    /// Type 2 packets handled.
    pub heartbeats: u64,
    /// Successful full authentications.
    pub logins: u64,
    /// Reject code 1 `device_conflict_online`.
    pub rejects_conflict: u64,
    /// Reject code 2 `reserved_ssid`.
    pub rejects_reserved_ssid: u64,
    /// Reject code 3 (auth failed, banned, server full).
    pub rejects_auth: u64,
    /// Logins refused with `server_busy` because the global Argon2 budget was
    /// spent and their prefix had no room in line (or their place in a full
    /// line was evicted).
    pub password_check_budget_drops: u64,
    /// Logins refused with `server_busy` because their source prefix (or that
    /// prefix for that user) had spent its Argon2 budget.
    pub password_check_prefix_drops: u64,
    /// Per-prefix Argon2 budget entries evicted to track a new prefix.
    pub password_budget_evictions: u64,
    /// Failed-auth records evicted to track a new (IP, username).
    pub ban_table_evictions: u64,
    /// Logins refused without counting a failure (malformed password,
    /// unapproved account).
    pub auth_refusals_uncounted: u64,
    /// Logins refused with `server_busy` because `password_checks_in_flight`
    /// checks were already running.
    pub password_checks_in_flight_drops: u64,
    /// First logins that waited in line for the global Argon2 budget (see `policy/password_queue.rs`).
    pub password_checks_queued: u64,
    /// Heartbeats dropped because their device already had a check in flight.
    pub password_check_pending_drops: u64,
    /// Logins refused with `server_busy` because another device of the same
    /// user was being checked with the same password (the retry finds it
    /// verified).
    pub password_checks_coalesced: u64,
    /// Checks abandoned after 10 s without a result.
    pub password_checks_abandoned: u64,
    /// Results for a check that was abandoned or never issued.
    pub password_check_results_unknown: u64,
    /// Results discarded because the user or its password changed meanwhile.
    pub password_checks_stale: u64,
    /// Reserved-SSID packets with a non-zero tag, dropped silently.
    pub reserved_tag_drops: u64,
    /// Types 3/4/5 from a device that is not online.
    pub unknown_device_drops: u64,
    /// Types 3/4/5 from an address other than the authenticated endpoint.
    pub endpoint_mismatch_drops: u64,
    /// Types 4/5 from an ungrouped device or a disabled group.
    pub non_forwarding_drops: u64,
    /// Types 4/5 from a send-banned device.
    pub send_ban_drops: u64,
    /// Voice frames that lost half-duplex arbitration.
    pub floor_busy_drops: u64,
    /// Overs ended at `floor_max_talk_s` (the talker lost the floor; see `policy/floor.rs`).
    pub floor_talk_limit_cuts: u64,
    /// Voice frames of a talker held off after its over was cut at `floor_max_talk_s`.
    pub floor_holdoff_drops: u64,
    /// Type 3 packets accepted from the bound endpoint.
    pub config_packets: u64,
    /// Type 3 packets whose DATA did not parse.
    pub config_errors: u64,
    /// Type 3 packets sent (query, time sync).
    pub config_sent: u64,
    /// Text frames planned for fan-out.
    pub text_frames: u64,
    /// Voice frames planned for fan-out.
    pub voice_frames: u64,
    /// Devices marked offline after the liveness timeout.
    pub sessions_expired: u64,
    /// Receiver snapshots served from cache.
    pub snapshot_hits: u64,
    /// Receiver snapshots rebuilt.
    pub snapshot_rebuilds: u64,
    /// Per-domain snapshot invalidations.
    pub snapshot_invalidations: u64,
    /// Store events dropped because the outbound event queue was full.
    pub store_events_dropped: u64,
    /// Type 4 texts over their device's `text_per_minute` budget, dropped
    /// (neither forwarded nor stored).
    pub text_rate_drops: u64,
    /// Logins refused because the account had `max_per_account` endpoints online.
    pub account_endpoint_limit_rejects: u64,
    /// Logins refused because the source's /24 or /64 had `max_per_prefix` endpoints online.
    pub prefix_endpoint_limit_rejects: u64,
    /// Endpoints evicted from a full source prefix to admit a newcomer (see `endpoint_caps.rs`).
    pub prefix_endpoint_evictions: u64,
    /// Sessions ended at their next heartbeat because their endpoint was evicted from a full prefix.
    pub evicted_sessions_ended: u64,
    /// New endpoints that started receiving fan-out after being heard again `receive_after_ms` after their login.
    pub endpoints_heard_twice: u64,
    /// Sessions ended because their endpoint was reported unreachable (ICMP).
    pub unreachable_sessions_ended: u64,
    /// Logins from an endpoint whose session an ICMP report had ended
    /// shortly before (the report was wrong, or forged).
    pub unreachable_contradicted: u64,
    /// ICMP reports ignored for endpoints that had contradicted one and are
    /// still talking.
    pub unreachable_reports_ignored: u64,
    /// Talk spurts started (see `talk_spurts.rs`).
    pub talk_spurts: u64,
    /// Talk spurts not followed because the shard followed its maximum.
    pub talk_spurts_untracked: u64,
    /// Talk-spurt events dropped because the runtime fell behind.
    pub talk_spurt_events_dropped: u64,
    /// Sessions ended because the device logged in through an edge of
    /// this centre (draarl-interconnect §3.8, `session_migrated`).
    pub sessions_migrated: u64,
    /// New-session reports dropped because the runtime fell behind.
    pub new_session_reports_dropped: u64,
}

impl SessionStats {
    /// Adds `other`'s counters to these (summing shards).
    pub fn add(&mut self, other: &Self) {
        let Self {
            received,
            decode_errors,
            app_logins,
            app_logins_accepted,
            app_login_rejects,
            app_replies_withheld,
            app_login_checks_evicted,
            app_login_checks_abandoned,
            app_login_results_unknown,
            ghost_invalid_tags,
            ghost_identity_rejects,
            ghost_endpoint_rejects,
            ghost_registry_rejects,
            ghost_heartbeats,
            ghost_sessions_expired,
            ghost_replacements,
            ghost_session_limit_rejects,
            ghost_registration_failures,
            ghost_sessions_evicted,
            ghost_sessions_displaced,
            heartbeats,
            logins,
            rejects_conflict,
            rejects_reserved_ssid,
            rejects_auth,
            password_check_budget_drops,
            password_check_prefix_drops,
            password_budget_evictions,
            ban_table_evictions,
            auth_refusals_uncounted,
            password_checks_in_flight_drops,
            password_checks_queued,
            password_check_pending_drops,
            password_checks_coalesced,
            password_checks_abandoned,
            password_check_results_unknown,
            password_checks_stale,
            reserved_tag_drops,
            unknown_device_drops,
            endpoint_mismatch_drops,
            non_forwarding_drops,
            send_ban_drops,
            floor_busy_drops,
            floor_talk_limit_cuts,
            floor_holdoff_drops,
            config_packets,
            config_errors,
            config_sent,
            text_frames,
            voice_frames,
            sessions_expired,
            snapshot_hits,
            snapshot_rebuilds,
            snapshot_invalidations,
            store_events_dropped,
            text_rate_drops,
            account_endpoint_limit_rejects,
            prefix_endpoint_limit_rejects,
            prefix_endpoint_evictions,
            evicted_sessions_ended,
            endpoints_heard_twice,
            unreachable_sessions_ended,
            unreachable_contradicted,
            unreachable_reports_ignored,
            talk_spurts,
            talk_spurts_untracked,
            talk_spurt_events_dropped,
            sessions_migrated,
            new_session_reports_dropped,
        } = other;
        self.received += received;
        self.decode_errors += decode_errors;
        self.app_logins += app_logins;
        self.app_logins_accepted += app_logins_accepted;
        self.app_login_rejects += app_login_rejects;
        self.app_replies_withheld += app_replies_withheld;
        self.app_login_checks_evicted += app_login_checks_evicted;
        self.app_login_checks_abandoned += app_login_checks_abandoned;
        self.app_login_results_unknown += app_login_results_unknown;
        self.ghost_invalid_tags += ghost_invalid_tags;
        self.ghost_identity_rejects += ghost_identity_rejects;
        self.ghost_endpoint_rejects += ghost_endpoint_rejects;
        self.ghost_registry_rejects += ghost_registry_rejects;
        self.ghost_heartbeats += ghost_heartbeats;
        self.ghost_sessions_expired += ghost_sessions_expired;
        self.ghost_replacements += ghost_replacements;
        self.ghost_session_limit_rejects += ghost_session_limit_rejects;
        self.ghost_registration_failures += ghost_registration_failures;
        self.ghost_sessions_evicted += ghost_sessions_evicted;
        self.ghost_sessions_displaced += ghost_sessions_displaced;
        self.heartbeats += heartbeats;
        self.logins += logins;
        self.rejects_conflict += rejects_conflict;
        self.rejects_reserved_ssid += rejects_reserved_ssid;
        self.rejects_auth += rejects_auth;
        self.password_check_budget_drops += password_check_budget_drops;
        self.password_check_prefix_drops += password_check_prefix_drops;
        self.password_budget_evictions += password_budget_evictions;
        self.ban_table_evictions += ban_table_evictions;
        self.auth_refusals_uncounted += auth_refusals_uncounted;
        self.password_checks_in_flight_drops += password_checks_in_flight_drops;
        self.password_checks_queued += password_checks_queued;
        self.password_check_pending_drops += password_check_pending_drops;
        self.password_checks_coalesced += password_checks_coalesced;
        self.password_checks_abandoned += password_checks_abandoned;
        self.password_check_results_unknown += password_check_results_unknown;
        self.password_checks_stale += password_checks_stale;
        self.reserved_tag_drops += reserved_tag_drops;
        self.unknown_device_drops += unknown_device_drops;
        self.endpoint_mismatch_drops += endpoint_mismatch_drops;
        self.non_forwarding_drops += non_forwarding_drops;
        self.send_ban_drops += send_ban_drops;
        self.floor_busy_drops += floor_busy_drops;
        self.floor_talk_limit_cuts += floor_talk_limit_cuts;
        self.floor_holdoff_drops += floor_holdoff_drops;
        self.config_packets += config_packets;
        self.config_errors += config_errors;
        self.config_sent += config_sent;
        self.text_frames += text_frames;
        self.voice_frames += voice_frames;
        self.sessions_expired += sessions_expired;
        self.snapshot_hits += snapshot_hits;
        self.snapshot_rebuilds += snapshot_rebuilds;
        self.snapshot_invalidations += snapshot_invalidations;
        self.store_events_dropped += store_events_dropped;
        self.text_rate_drops += text_rate_drops;
        self.account_endpoint_limit_rejects += account_endpoint_limit_rejects;
        self.prefix_endpoint_limit_rejects += prefix_endpoint_limit_rejects;
        self.prefix_endpoint_evictions += prefix_endpoint_evictions;
        self.evicted_sessions_ended += evicted_sessions_ended;
        self.endpoints_heard_twice += endpoints_heard_twice;
        self.unreachable_sessions_ended += unreachable_sessions_ended;
        self.unreachable_contradicted += unreachable_contradicted;
        self.unreachable_reports_ignored += unreachable_reports_ignored;
        self.talk_spurts += talk_spurts;
        self.talk_spurts_untracked += talk_spurts_untracked;
        self.talk_spurt_events_dropped += talk_spurt_events_dropped;
        self.sessions_migrated += sessions_migrated;
        self.new_session_reports_dropped += new_session_reports_dropped;
    }

    /// Every counter with its name, for metrics export.
    pub fn counters(&self) -> Vec<(&'static str, u64)> {
        vec![
            ("received", self.received),
            ("decode_errors", self.decode_errors),
            ("app_logins", self.app_logins),
            ("app_logins_accepted", self.app_logins_accepted),
            ("app_login_rejects", self.app_login_rejects),
            ("app_replies_withheld", self.app_replies_withheld),
            ("app_login_checks_evicted", self.app_login_checks_evicted),
            (
                "app_login_checks_abandoned",
                self.app_login_checks_abandoned,
            ),
            ("app_login_results_unknown", self.app_login_results_unknown),
            ("ghost_invalid_tags", self.ghost_invalid_tags),
            ("ghost_identity_rejects", self.ghost_identity_rejects),
            ("ghost_endpoint_rejects", self.ghost_endpoint_rejects),
            ("ghost_registry_rejects", self.ghost_registry_rejects),
            ("ghost_heartbeats", self.ghost_heartbeats),
            ("ghost_sessions_expired", self.ghost_sessions_expired),
            ("ghost_replacements", self.ghost_replacements),
            (
                "ghost_session_limit_rejects",
                self.ghost_session_limit_rejects,
            ),
            (
                "ghost_registration_failures",
                self.ghost_registration_failures,
            ),
            ("ghost_sessions_evicted", self.ghost_sessions_evicted),
            ("ghost_sessions_displaced", self.ghost_sessions_displaced),
            ("heartbeats", self.heartbeats),
            ("logins", self.logins),
            ("rejects_conflict", self.rejects_conflict),
            ("rejects_reserved_ssid", self.rejects_reserved_ssid),
            ("rejects_auth", self.rejects_auth),
            (
                "password_check_budget_drops",
                self.password_check_budget_drops,
            ),
            (
                "password_check_prefix_drops",
                self.password_check_prefix_drops,
            ),
            ("password_budget_evictions", self.password_budget_evictions),
            ("ban_table_evictions", self.ban_table_evictions),
            ("auth_refusals_uncounted", self.auth_refusals_uncounted),
            (
                "password_checks_in_flight_drops",
                self.password_checks_in_flight_drops,
            ),
            ("password_checks_queued", self.password_checks_queued),
            (
                "password_check_pending_drops",
                self.password_check_pending_drops,
            ),
            ("password_checks_coalesced", self.password_checks_coalesced),
            ("password_checks_abandoned", self.password_checks_abandoned),
            (
                "password_check_results_unknown",
                self.password_check_results_unknown,
            ),
            ("password_checks_stale", self.password_checks_stale),
            ("reserved_tag_drops", self.reserved_tag_drops),
            ("unknown_device_drops", self.unknown_device_drops),
            ("endpoint_mismatch_drops", self.endpoint_mismatch_drops),
            ("non_forwarding_drops", self.non_forwarding_drops),
            ("send_ban_drops", self.send_ban_drops),
            ("floor_busy_drops", self.floor_busy_drops),
            ("floor_talk_limit_cuts", self.floor_talk_limit_cuts),
            ("floor_holdoff_drops", self.floor_holdoff_drops),
            ("config_packets", self.config_packets),
            ("config_errors", self.config_errors),
            ("config_sent", self.config_sent),
            ("text_frames", self.text_frames),
            ("voice_frames", self.voice_frames),
            ("sessions_expired", self.sessions_expired),
            ("snapshot_hits", self.snapshot_hits),
            ("snapshot_rebuilds", self.snapshot_rebuilds),
            ("snapshot_invalidations", self.snapshot_invalidations),
            ("store_events_dropped", self.store_events_dropped),
            ("text_rate_drops", self.text_rate_drops),
            (
                "account_endpoint_limit_rejects",
                self.account_endpoint_limit_rejects,
            ),
            (
                "prefix_endpoint_limit_rejects",
                self.prefix_endpoint_limit_rejects,
            ),
            ("prefix_endpoint_evictions", self.prefix_endpoint_evictions),
            ("evicted_sessions_ended", self.evicted_sessions_ended),
            ("endpoints_heard_twice", self.endpoints_heard_twice),
            (
                "unreachable_sessions_ended",
                self.unreachable_sessions_ended,
            ),
            ("unreachable_contradicted", self.unreachable_contradicted),
            (
                "unreachable_reports_ignored",
                self.unreachable_reports_ignored,
            ),
            ("talk_spurts", self.talk_spurts),
            ("talk_spurts_untracked", self.talk_spurts_untracked),
            ("talk_spurt_events_dropped", self.talk_spurt_events_dropped),
            ("sessions_migrated", self.sessions_migrated),
            (
                "new_session_reports_dropped",
                self.new_session_reports_dropped,
            ),
        ]
    }
}
