//! Password verification off the ingress path (draarl-v1 §3.1 step 2, §3.2).
//!
//! Argon2id costs tens of milliseconds, so the core never runs it: a login
//! that needs it parks the heartbeat and emits a [`PasswordCheck`]; the
//! runtime runs it on a [`crate::runtime::verifier::PasswordVerifier`] pool and reports back
//! with [`Reflector::handle_password_check`]. Rate limits, the ban ladder,
//! the Argon2 budget (per source prefix, per prefix and user, then global;
//! see [`crate::policy::PasswordBudget`]) and a bound on checks in flight
//! all apply before a check is emitted (a check the global budget cannot
//! take at once waits in a per-prefix line served round-robin, polled by
//! [`Reflector::handle_timeout`]), and a device has at most one check in flight or in line (its
//! further heartbeats are dropped and counted meanwhile), so neither the
//! pool's work nor the parked state can grow without bound.

use std::net::SocketAddr;
use std::time::{Duration, Instant};

use super::cross_shard::Credential;
use super::reflector::{PendingLogin, Reflector};
use super::replies::RejectReason;
use crate::codec::{Header, HeartbeatData};
use crate::model::{is_valid_device_password, DeviceKey, PasswordCheck, UserRecord};
use crate::policy::{BanCheck, BudgetDecision, TicketState};

/// A check whose result has not come back after this long is abandoned
/// (its device may log in again).
pub(super) const PASSWORD_CHECK_TIMEOUT: Duration = Duration::from_secs(10);

/// How often a shard with logins in line for the global Argon2 budget
/// looks whether their turn came (a tenth of a check at the default
/// 10 checks/s).
pub(super) const QUEUE_POLL: Duration = Duration::from_millis(10);

impl PendingLogin {
    fn credential(&self) -> Credential<'_> {
        Credential {
            user_id: self.key.0,
            phc: &self.phc,
            password: &self.header.device_password,
        }
    }
}

/// How far [`Reflector::authenticate`] got.
pub(super) enum AuthStep {
    /// The password is correct (cached from an earlier check).
    Verified,
    /// A check was emitted; the login completes when its result arrives.
    Pending,
}

impl Reflector {
    /// Next password verification for the runtime to run.
    pub fn poll_password_check(&mut self) -> Option<PasswordCheck> {
        self.checks_out.pop_front()
    }

    /// Password checks emitted and not yet answered.
    pub fn password_checks_in_flight(&self) -> usize {
        self.pending_checks.len()
    }

    /// Completes the login parked behind check `id` with its result `ok`:
    /// the ban ladder records it, and a correct password continues the login
    /// exactly as if it had been verified inline.
    pub fn handle_password_check(&mut self, now: Instant, id: u64, ok: bool) {
        let Some(p) = self.pending_checks.remove(&id) else {
            self.stats.password_check_results_unknown += 1;
            return;
        };
        if !self.pending_checks.values().any(|q| q.key == p.key) {
            self.pending_devices.remove(&p.key);
        }
        self.shared.logins().end_check(&p.credential());
        let Some(user) = self.dir.user(p.key.0).cloned() else {
            self.stats.password_checks_stale += 1;
            return;
        };
        if user.device_password_hash.as_deref() != Some(p.phc.as_str()) {
            self.stats.password_checks_stale += 1;
            return;
        }
        if !ok {
            let evicted = self
                .shared
                .logins()
                .record_failure(p.src.ip(), &user.name, now);
            self.stats.ban_table_evictions += u64::from(evicted);
            self.reject(p.src, &p.header, RejectReason::InvalidPassword);
            return;
        }
        {
            let mut logins = self.shared.logins();
            logins.record_success(p.src.ip(), &user.name);
            logins.set_verified(&p.credential());
        }
        if !user.enabled {
            self.reject(p.src, &p.header, RejectReason::UserDisabled);
            return;
        }
        let mac = HeartbeatData::parse(&p.data).unwrap_or_default().mac;
        if let Err(reason) = self.admit(now, p.src, &p.header, p.key, mac) {
            self.reject(p.src, &p.header, reason);
            return;
        }
        self.accept(now, p.src, &p.header, &p.data, &user, p.key, mac);
    }

    /// Whether device `key` already has a check in flight, or a login from
    /// `src` in line. Logins of one device from different sources wait in
    /// line separately (each under its prefix's bound), so guesses for a
    /// device from elsewhere cannot keep its real login out of line.
    pub(super) fn check_pending(&self, key: DeviceKey, src: SocketAddr) -> bool {
        self.pending_devices.contains(&key) || self.queued_from.contains(&(key, src))
    }

    /// Full password check (spec §3.1 step 2), with the ban ladder of §3.2.
    /// `Err(ServerBusy)` when the Argon2 budget or the in-flight bound is
    /// spent. Only a wrong password found by Argon2 counts toward the ladder
    /// (see `login.rs` for the rule).
    pub(super) fn authenticate(
        &mut self,
        now: Instant,
        src: SocketAddr,
        h: &Header,
        data: &[u8],
        user: &UserRecord,
    ) -> Result<AuthStep, RejectReason> {
        if let BanCheck::Blocked(_) = self.shared.logins().ban_check(src.ip(), &user.name, now) {
            return Err(RejectReason::TooManyFailures);
        }
        if !user.enabled {
            return Err(RejectReason::UserDisabled);
        }
        let Some(phc) = user.device_password_hash.as_deref() else {
            return Err(RejectReason::PasswordNotSet);
        };
        // Refused without counting: only an Argon2 mismatch is a failure
        // (see `login.rs`), so malformed passwords sent from a victim's
        // (spoofable or shared) address cannot ban the victim.
        if !user.approved || !is_valid_device_password(h.password_bytes()) {
            self.stats.auth_refusals_uncounted += 1;
            return Err(RejectReason::InvalidPassword);
        }
        let credential = Credential {
            user_id: user.id,
            phc,
            password: &h.device_password,
        };
        let mut logins = self.shared.logins();
        if logins.is_verified(&credential) {
            logins.record_success(src.ip(), &user.name);
            return Ok(AuthStep::Verified);
        }
        // Another device of this user, on any shard, is being checked with the
        // same password: its result lands in the verified cache, so this one
        // retries instead of spending a slot and the budget on the same Argon2
        // work (a user's devices log in together after a restart).
        if logins.is_checking(&credential) {
            self.stats.password_checks_coalesced += 1;
            return Err(RejectReason::ServerBusy);
        }
        if logins.checks_in_flight() >= self.cfg.password_checks_in_flight {
            self.stats.password_checks_in_flight_drops += 1;
            return Err(RejectReason::ServerBusy);
        }
        let (budget, evicted) = logins.take_password_check(src.ip(), user.id, now);
        self.stats.password_budget_evictions += evicted;
        let login = PendingLogin {
            key: (user.id, h.ssid),
            src,
            header: h.clone(),
            data: data.to_vec(),
            phc: phc.to_owned(),
            started: now,
        };
        match budget {
            BudgetDecision::Allow => {}
            BudgetDecision::Queued(ticket) => {
                drop(logins);
                self.stats.password_checks_queued += 1;
                self.queued_from.insert((login.key, login.src));
                self.queued_logins.insert(ticket, login);
                self.next_queue_poll = now;
                return Ok(AuthStep::Pending);
            }
            BudgetDecision::GlobalSpent => {
                self.stats.password_check_budget_drops += 1;
                return Err(RejectReason::ServerBusy);
            }
            BudgetDecision::PrefixSpent | BudgetDecision::PrefixUserSpent => {
                self.stats.password_check_prefix_drops += 1;
                return Err(RejectReason::ServerBusy);
            }
        }
        logins.begin_check(&credential);
        drop(logins);
        self.emit_check(login);
        Ok(AuthStep::Pending)
    }

    /// Hands `login`'s check to the runtime (its check in flight is
    /// already recorded in the shared tables). A device may have several
    /// checks in flight when logins of it from several sources got their
    /// turn in line; each completes on its own.
    fn emit_check(&mut self, login: PendingLogin) {
        let id = self.next_check_id;
        self.next_check_id += 1;
        self.checks_out.push_back(PasswordCheck::new(
            id,
            login.phc.clone(),
            login.header.password_bytes().to_vec(),
        ));
        self.pending_devices.insert(login.key);
        self.pending_checks.insert(id, login);
    }

    /// Starts the checks of queued logins whose turn came (see
    /// [`crate::policy::FairQueue`]), answers `server_busy` to those
    /// evicted from a full line, and abandons those that waited longer
    /// than [`PASSWORD_CHECK_TIMEOUT`].
    pub(super) fn poll_queued_logins(&mut self, now: Instant) {
        if self.queued_logins.is_empty() {
            return;
        }
        self.next_queue_poll = now + QUEUE_POLL;
        let mut tickets: Vec<u64> = self.queued_logins.keys().copied().collect();
        tickets.sort_unstable();
        let mut done = Vec::new();
        {
            let mut logins = self.shared.logins();
            for ticket in tickets {
                let state = logins.poll_queued_check(ticket, now);
                let Some(login) = self.queued_logins.get(&ticket) else {
                    continue;
                };
                let expired = now.saturating_duration_since(login.started) > PASSWORD_CHECK_TIMEOUT;
                match state {
                    TicketState::Waiting if !expired => continue,
                    TicketState::Waiting => logins.cancel_queued_check(ticket),
                    TicketState::Granted => logins.begin_check(&login.credential()),
                    TicketState::Gone => {}
                }
                done.push((ticket, state));
            }
        }
        for (ticket, state) in done {
            let Some(mut login) = self.queued_logins.remove(&ticket) else {
                continue;
            };
            self.queued_from.remove(&(login.key, login.src));
            match state {
                TicketState::Granted => {
                    login.started = now;
                    self.emit_check(login);
                }
                TicketState::Waiting => self.stats.password_checks_abandoned += 1,
                TicketState::Gone => {
                    self.stats.password_check_budget_drops += 1;
                    self.reject(login.src, &login.header, RejectReason::ServerBusy);
                }
            }
        }
    }

    /// Abandons checks older than [`PASSWORD_CHECK_TIMEOUT`] (a runtime that
    /// lost a result must not lock a device out for good).
    pub(super) fn expire_password_checks(&mut self, now: Instant) {
        let before = self.pending_checks.len();
        let mut logins = self.shared.logins();
        self.pending_checks.retain(|_, p| {
            let keep = now.saturating_duration_since(p.started) <= PASSWORD_CHECK_TIMEOUT;
            if !keep {
                logins.end_check(&p.credential());
            }
            keep
        });
        drop(logins);
        let pending = &self.pending_checks;
        self.pending_devices
            .retain(|k| pending.values().any(|p| p.key == *k));
        self.stats.password_checks_abandoned += (before - self.pending_checks.len()) as u64;
        let pending = &self.pending_checks;
        self.checks_out.retain(|c| pending.contains_key(&c.id()));
    }
}
