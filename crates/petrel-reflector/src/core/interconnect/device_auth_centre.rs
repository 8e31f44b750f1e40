//! The centre's side of device authentication proxied by an edge
//! (draarl-interconnect §3.8, §10 item 4; draarl-v1 §3.1, §3.2): the
//! normal Type 2 heartbeat login run on the raw datagram the edge
//! forwarded, keyed by the device's real IP, and the grant that follows.
//!
//! ```text
//!  DeviceAuthRequest ─ProxiedLogin::parse─▶ source IP, Type 2 only (Type 1 ghosts: unsupported_packet_type)
//!  start_auth: reserved SSID ─▶ reserved_ssid │ username ─▶ user (unknown: ladder on one shared key)
//!     ban ladder (IP, username) ─▶ too_many_failures │ disabled │ no password │ unapproved / malformed
//!     verified cache ─▶ Verified │ same check in flight ─▶ server_busy │ checks in flight full ─▶ server_busy
//!     Argon2 budget (prefix, prefix+user, global) ─▶ Check(PasswordCheck) │ Queued(ticket) │ server_busy
//!  poll_queued (every 10 ms) ─▶ Check │ server_busy (evicted from the line) │ Wait
//!  finish_check(ok) ─▶ wrong: ladder + invalid_password │ right: ladder cleared, cache, enabled?
//!  device_record_after_login (same as a direct login) ─▶ device_route ─▶ device_grant + heartbeat reply
//! ```
//!
//! Every refusal carries exactly the reply a single-node reflector sends
//! the device for the same datagram (`replies.rs`); the few outcomes a
//! direct login answers with silence carry an error and no reply. The
//! ladder, the Argon2 budget, the verified cache and the checks in flight
//! are the server's shared [`LoginGuard`], so failures proxied by edges and
//! failures of direct logins ban the same (IP, username) pairs.
//!
//! Departures from a direct login, each because the device session lives
//! on the edge: the online-conflict rule, the session limit and the
//! endpoint caps (which count the centre's own UDP endpoints) are replaced
//! by the device-session owner table (a re-authentication elsewhere
//! migrates the session, §3.8; `MaxDeviceSessionsPerNode` answers
//! `server_full`); link boxes get no Type 3 query on login (the edge asks
//! for their configuration, §3.11). The directory keeps no device row ids
//! or nicknames: a route's `device_id` is [`device_id`] of (owner, SSID)
//! and its nickname is empty.

use std::net::IpAddr;
use std::time::{Duration, Instant};

use crate::codec::interconnect::messages::{
    DeviceAuthRequest, DeviceAuthResponse, DeviceGrant, DeviceRoute,
};
use crate::codec::interconnect::Subtype;
use crate::codec::{decode, Header, HeartbeatData, Mac, PacketType};
use crate::core::cross_shard::{Credential, LoginGuard};
use crate::core::replies::{self, RejectReason};
use crate::model::{
    is_reserved_ssid, is_valid_device_password, DeviceKey, DeviceRecord, Directory, PasswordCheck,
    UserRecord,
};
use crate::policy::{BanCheck, BudgetDecision, TicketState};

use super::control_send::{reliable, ControlSend};
use super::device_owners::OwnedSession;
use super::outbound::MessageIds;

/// How long a proxied login may wait for its password check, in line or
/// running: the edge forgets a pending request after 5 s (§3.8), so a later
/// answer would be dropped there.
pub const PROXIED_CHECK_TIMEOUT: Duration = Duration::from_secs(5);
/// How often a login waiting in line for the global Argon2 budget looks
/// whether its turn came (as a shard does).
pub const QUEUED_CHECK_POLL: Duration = Duration::from_millis(10);

/// Ladder key of every username the directory does not know (the same
/// key a direct login uses, see `login.rs`).
const UNKNOWN_USER: &str = "\0unknown-user";

/// The `error` texts of a failed DeviceAuth. A refusal a direct login
/// answers carries the reply's reason text instead
/// ([`RejectReason::text`]).
pub mod device_auth_error {
    /// The datagram is not a DraARLv1 packet.
    pub const INVALID_PACKET: &str = "invalid_packet";
    /// Not a Type 2 heartbeat: Type 1 app ("ghost") logins are not
    /// proxied (§3.12, features 8 and 9 are not offered).
    pub const UNSUPPORTED_PACKET_TYPE: &str = "unsupported_packet_type";
    /// `source_ip` is not an IP address.
    pub const INVALID_SOURCE_IP: &str = "invalid_source_ip";
    /// A heartbeat of an app SSID tagged with a session: an app session,
    /// not proxied (a direct login drops it silently).
    pub const GHOST_SESSION_UNSUPPORTED: &str = "ghost_session_unsupported";
    /// The account's password changed while it was being checked (a
    /// direct login drops the heartbeat silently; the device retries).
    pub const PASSWORD_CHANGED: &str = "password_changed";
    /// The check did not finish within [`super::PROXIED_CHECK_TIMEOUT`].
    pub const CHECK_TIMEOUT: &str = "password_check_timeout";
}

/// Counters of proxied logins at the centre (the cross-shard tables count
/// nothing themselves).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct DeviceAuthCounters {
    /// Logins that got a grant.
    pub granted: u64,
    /// Logins refused with a reply for the device.
    pub rejected: u64,
    /// Logins failed without a reply (see [`device_auth_error`]).
    pub failed: u64,
    /// Password checks handed to the Argon2 pool.
    pub checks_started: u64,
    /// Logins whose password was already verified (no Argon2).
    pub verified_cached: u64,
    /// Logins put in line for the global Argon2 budget.
    pub checks_queued: u64,
    /// Malformed passwords and unapproved accounts refused without
    /// counting on the ladder.
    pub refusals_uncounted: u64,
    /// Ladder records evicted to track a failure.
    pub ban_table_evictions: u64,
    /// Per-prefix budget entries and tickets in line evicted.
    pub password_budget_evictions: u64,
}

impl DeviceAuthCounters {
    /// Every counter with its name, for metrics export.
    pub fn counters(&self) -> Vec<(&'static str, u64)> {
        vec![
            ("granted", self.granted),
            ("rejected", self.rejected),
            ("failed", self.failed),
            ("checks_started", self.checks_started),
            ("verified_cached", self.verified_cached),
            ("checks_queued", self.checks_queued),
            ("refusals_uncounted", self.refusals_uncounted),
            ("ban_table_evictions", self.ban_table_evictions),
            ("password_budget_evictions", self.password_budget_evictions),
        ]
    }
}

/// A failed authentication: why, and the device reply to forward (empty
/// where a direct login sends nothing).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AuthFailure {
    /// The `error` text of the response.
    pub error: &'static str,
    /// The refusal a direct login would send, if any.
    pub reason: Option<RejectReason>,
    /// Its reply datagram (`response_packet`), empty without one.
    pub reply: Vec<u8>,
}

impl AuthFailure {
    fn reject(h: &Header, reason: RejectReason) -> Self {
        Self {
            error: reason.text(),
            reason: Some(reason),
            reply: replies::heartbeat_reject(h, reason),
        }
    }

    fn silent(error: &'static str) -> Self {
        Self {
            error,
            reason: None,
            reply: Vec::new(),
        }
    }

    /// The refusal `reason` for `login` (for the runtime's own refusals:
    /// a full node is `server_full`, a check that ran out of time
    /// `server_busy`).
    pub fn refuse(login: &ProxiedLogin, reason: RejectReason) -> Self {
        Self::reject(&login.header, reason)
    }

    /// A failure without a device reply.
    pub fn without_reply(error: &'static str) -> Self {
        Self::silent(error)
    }
}

/// A DeviceAuth request decoded: the device's real IP and its Type 2
/// heartbeat. `Debug` hides the password.
#[derive(Clone, PartialEq, Eq)]
pub struct ProxiedLogin {
    /// The device's real address (§3.8 `source_ip`).
    pub source_ip: IpAddr,
    /// The heartbeat's header (password included).
    pub header: Header,
    /// Its DATA.
    pub data: Vec<u8>,
}

impl std::fmt::Debug for ProxiedLogin {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ProxiedLogin")
            .field("source_ip", &self.source_ip)
            .field("username", &self.header.username_str())
            .field("ssid", &self.header.ssid)
            .finish_non_exhaustive()
    }
}

impl ProxiedLogin {
    /// Decodes `req`: `source_ip` must be an IP address and `packet` a
    /// Type 2 heartbeat (draarl-v1 §2.2 checks).
    ///
    /// # Errors
    /// [`AuthFailure`] without a reply ([`device_auth_error`]).
    pub fn parse(req: &DeviceAuthRequest) -> Result<Self, AuthFailure> {
        let source_ip: IpAddr = req
            .source_ip
            .trim()
            .parse()
            .map_err(|_| AuthFailure::silent(device_auth_error::INVALID_SOURCE_IP))?;
        let packet = decode(&req.packet)
            .map_err(|_| AuthFailure::silent(device_auth_error::INVALID_PACKET))?;
        if packet.header.packet_type != PacketType::Heartbeat {
            return Err(AuthFailure::silent(
                device_auth_error::UNSUPPORTED_PACKET_TYPE,
            ));
        }
        Ok(Self {
            source_ip,
            header: packet.header,
            data: packet.data.to_vec(),
        })
    }

    /// The heartbeat's MAC, if its DATA carries a valid one.
    pub fn mac(&self) -> Option<Mac> {
        HeartbeatData::parse(&self.data).unwrap_or_default().mac
    }
}

/// A login whose password is being checked (or waits in line for it).
/// `Debug` hides the password.
#[derive(Clone, PartialEq, Eq)]
pub struct PendingLogin {
    /// The login.
    pub login: ProxiedLogin,
    /// The account.
    pub user_id: i64,
    /// The PHC string the check runs against.
    phc: String,
}

impl std::fmt::Debug for PendingLogin {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PendingLogin")
            .field("login", &self.login)
            .field("user_id", &self.user_id)
            .finish_non_exhaustive()
    }
}

impl PendingLogin {
    fn credential(&self) -> Credential<'_> {
        Credential {
            user_id: self.user_id,
            phc: &self.phc,
            password: &self.login.header.device_password,
        }
    }

    fn check(&self, id: u64) -> PasswordCheck {
        PasswordCheck::new(
            id,
            self.phc.clone(),
            self.login.header.password_bytes().to_vec(),
        )
    }
}

/// What [`start_auth`] decided.
#[derive(Debug)]
pub enum AuthStart {
    /// Refused (or failed) at once.
    Failed(AuthFailure),
    /// The password was verified before: continue with this account.
    Verified(ProxiedLogin, UserRecord),
    /// Run `check` on the Argon2 pool, then [`finish_check`] (the check is
    /// recorded in flight; end it with [`finish_check`] or
    /// [`abandon_check`]).
    Check(PendingLogin, PasswordCheck),
    /// Waits in line for the global budget: [`poll_queued`] with the
    /// ticket every [`QUEUED_CHECK_POLL`].
    Queued(PendingLogin, u64),
}

/// What [`poll_queued`] decided.
#[derive(Debug)]
pub enum QueuedStep {
    /// Still in line.
    Wait,
    /// Its turn came: run the check, then [`finish_check`].
    Check(PasswordCheck),
    /// Evicted from a full line: `server_busy`.
    Failed(AuthFailure),
}

/// Runs the login of `login` at `now` up to its password check (draarl-v1
/// §3.1 steps 1–2, §3.2), exactly as a direct heartbeat login does:
/// reserved SSID, username, ban ladder keyed by (`login.source_ip`,
/// username), enabled, password set, approved and well-formed password,
/// verified cache, a check of the same credential in flight, at most
/// `max_in_flight` checks in flight, the Argon2 budget. `check_id` numbers
/// the check if one is started.
pub fn start_auth(
    dir: &Directory,
    logins: &mut LoginGuard,
    counters: &mut DeviceAuthCounters,
    max_in_flight: usize,
    now: Instant,
    login: ProxiedLogin,
    check_id: u64,
) -> AuthStart {
    let h = &login.header;
    let ip = login.source_ip;
    if is_reserved_ssid(h.ssid) {
        return AuthStart::Failed(if h.reserved != 0 {
            AuthFailure::silent(device_auth_error::GHOST_SESSION_UNSUPPORTED)
        } else {
            AuthFailure::reject(h, RejectReason::ReservedSsid)
        });
    }
    let Some(name) = h.username_str() else {
        return AuthStart::Failed(AuthFailure::reject(h, RejectReason::UserNotFound));
    };
    let Some(user) = dir.user_by_name(name).cloned() else {
        if let BanCheck::Blocked(_) = logins.ban_check(ip, UNKNOWN_USER, now) {
            return AuthStart::Failed(AuthFailure::reject(h, RejectReason::TooManyFailures));
        }
        counters.ban_table_evictions += u64::from(logins.record_failure(ip, UNKNOWN_USER, now));
        return AuthStart::Failed(AuthFailure::reject(h, RejectReason::UserNotFound));
    };
    if let BanCheck::Blocked(_) = logins.ban_check(ip, &user.name, now) {
        return AuthStart::Failed(AuthFailure::reject(h, RejectReason::TooManyFailures));
    }
    if !user.enabled {
        return AuthStart::Failed(AuthFailure::reject(h, RejectReason::UserDisabled));
    }
    let Some(phc) = user.device_password_hash.clone() else {
        return AuthStart::Failed(AuthFailure::reject(h, RejectReason::PasswordNotSet));
    };
    if !user.approved || !is_valid_device_password(h.password_bytes()) {
        counters.refusals_uncounted += 1;
        return AuthStart::Failed(AuthFailure::reject(h, RejectReason::InvalidPassword));
    }
    let pending = PendingLogin {
        user_id: user.id,
        phc,
        login,
    };
    if logins.is_verified(&pending.credential()) {
        logins.record_success(ip, &user.name);
        counters.verified_cached += 1;
        return AuthStart::Verified(pending.login, user);
    }
    let busy = || {
        AuthStart::Failed(AuthFailure::reject(
            &pending.login.header,
            RejectReason::ServerBusy,
        ))
    };
    if logins.is_checking(&pending.credential()) || logins.checks_in_flight() >= max_in_flight {
        return busy();
    }
    let (budget, evicted) = logins.take_password_check(ip, user.id, now);
    counters.password_budget_evictions += evicted;
    match budget {
        BudgetDecision::Allow => {
            logins.begin_check(&pending.credential());
            counters.checks_started += 1;
            let check = pending.check(check_id);
            AuthStart::Check(pending, check)
        }
        BudgetDecision::Queued(ticket) => {
            counters.checks_queued += 1;
            AuthStart::Queued(pending, ticket)
        }
        BudgetDecision::GlobalSpent
        | BudgetDecision::PrefixSpent
        | BudgetDecision::PrefixUserSpent => busy(),
    }
}

/// Where the queued login `pending` (ticket `ticket`, in line since
/// `since`) stands at `now`: its check may start (recorded in flight,
/// numbered `check_id`), it was evicted from a full line, it waited longer
/// than [`PROXIED_CHECK_TIMEOUT`] (its ticket is cancelled), or it waits.
pub fn poll_queued(
    logins: &mut LoginGuard,
    counters: &mut DeviceAuthCounters,
    now: Instant,
    pending: &PendingLogin,
    ticket: u64,
    since: Instant,
    check_id: u64,
) -> QueuedStep {
    match logins.poll_queued_check(ticket, now) {
        TicketState::Granted => {
            logins.begin_check(&pending.credential());
            counters.checks_started += 1;
            QueuedStep::Check(pending.check(check_id))
        }
        TicketState::Gone => QueuedStep::Failed(AuthFailure::reject(
            &pending.login.header,
            RejectReason::ServerBusy,
        )),
        TicketState::Waiting if now.saturating_duration_since(since) > PROXIED_CHECK_TIMEOUT => {
            logins.cancel_queued_check(ticket);
            QueuedStep::Failed(AuthFailure::silent(device_auth_error::CHECK_TIMEOUT))
        }
        TicketState::Waiting => QueuedStep::Wait,
    }
}

/// Ends the check of `pending` without a result (it ran out of time or
/// the pool refused it).
pub fn abandon_check(logins: &mut LoginGuard, pending: &PendingLogin) {
    logins.end_check(&pending.credential());
}

/// Completes the check of `pending` with its result `ok` at `now`
/// (draarl-v1 §3.1 step 2, §3.2): a wrong password counts on the ladder
/// and is refused `invalid_password`; a right one clears the ladder, is
/// cached, and continues if the account (as `dir` holds it now, with the
/// same password hash) is enabled.
///
/// # Errors
/// [`AuthFailure`].
pub fn finish_check(
    dir: &Directory,
    logins: &mut LoginGuard,
    counters: &mut DeviceAuthCounters,
    now: Instant,
    pending: PendingLogin,
    ok: bool,
) -> Result<(ProxiedLogin, UserRecord), AuthFailure> {
    logins.end_check(&pending.credential());
    let user = dir
        .user(pending.user_id)
        .filter(|u| u.device_password_hash.as_deref() == Some(pending.phc.as_str()))
        .cloned()
        .ok_or(AuthFailure::silent(device_auth_error::PASSWORD_CHANGED))?;
    let ip = pending.login.source_ip;
    if !ok {
        counters.ban_table_evictions += u64::from(logins.record_failure(ip, &user.name, now));
        return Err(AuthFailure::reject(
            &pending.login.header,
            RejectReason::InvalidPassword,
        ));
    }
    logins.record_success(ip, &user.name);
    logins.set_verified(&pending.credential());
    if !user.enabled {
        return Err(AuthFailure::reject(
            &pending.login.header,
            RejectReason::UserDisabled,
        ));
    }
    Ok((pending.login, user))
}

/// The stable device id of a route (the directory keeps no row ids):
/// owner id × 256 + SSID, so one (owner, SSID) always has one id.
pub fn device_id(key: DeviceKey) -> i64 {
    key.0.saturating_mul(256).saturating_add(i64::from(key.1))
}

/// The wire DomainID of `group_id` (§3.7, §4.6): the id of its domain in
/// `dir` (the smallest group id of the domain, never 0), or 0 for a device
/// in no group, an unknown or a disabled group — such a device is online
/// but forwards and receives nothing, as on a single node (draarl-v1
/// §3.7): its route names no domain, so no relay can carry it and no
/// domain lists its edge as a receiver.
pub fn wire_domain(dir: &Directory, group_id: i64) -> u64 {
    dir.domain_of(group_id)
        .and_then(|d| u64::try_from(d.id).ok())
        .unwrap_or(0)
}

/// The route of the device session `session` (§3.7): identity from the
/// account and the device record, the record's group and bans, and
/// `domain_id`, the group's [`wire_domain`].
pub fn device_route(
    user: &UserRecord,
    rec: &DeviceRecord,
    domain_id: u64,
    session: &OwnedSession,
) -> DeviceRoute {
    DeviceRoute {
        session_id: session.session_id,
        device_id: device_id((rec.owner_id, rec.ssid)),
        username: user.name.clone(),
        callsign: user.callsign.clone(),
        nickname: String::new(),
        ssid: rec.ssid,
        dev_model: rec.dev_model,
        group_id: rec.group_id,
        domain_id,
        session_epoch: session.session_epoch,
        disable_send: rec.disable_send,
        disable_recv: rec.disable_recv,
        ..DeviceRoute::default()
    }
}

/// The grant of `route` (§3.8): owner, the record's DMR id, the session's
/// expiry.
pub fn device_grant(route: DeviceRoute, rec: &DeviceRecord, session: &OwnedSession) -> DeviceGrant {
    DeviceGrant {
        route,
        owner_id: rec.owner_id,
        dmrid: rec.dmrid,
        recovery_ticket: String::new(),
        expires_at_ms: session.expires_at_ms,
    }
}

/// The heartbeat success reply a direct login sends for `login` of `user`
/// (callsign filled in, password zeroed, DATA echoed).
pub fn success_reply(login: &ProxiedLogin, user: &UserRecord) -> Vec<u8> {
    replies::heartbeat_success(&login.header, &user.callsign, &login.data)
}

/// The 0x20 response of a successful login.
pub fn granted(request_id: u64, grant: DeviceGrant, reply: Vec<u8>) -> DeviceAuthResponse {
    DeviceAuthResponse {
        request_id,
        success: true,
        error: String::new(),
        grant: Some(grant),
        response_packet: reply,
    }
}

/// The 0x20 response of a failed login.
pub fn refused(request_id: u64, failure: &AuthFailure) -> DeviceAuthResponse {
    DeviceAuthResponse {
        request_id,
        success: false,
        error: failure.error.to_owned(),
        grant: None,
        response_packet: failure.reply.clone(),
    }
}

/// The response as a control message (CONTROL | ACK, §3.5).
pub fn response_message(ids: &mut MessageIds, resp: &DeviceAuthResponse) -> ControlSend {
    ControlSend::json(Subtype::DEVICE_AUTH, reliable(), ids.next_id(), 0, 0, resp)
}
