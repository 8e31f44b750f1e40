//! The edge's device sessions built from centre grants
//! (draarl-interconnect §3.8, §3.6 step 6, §6.1): device authentication is
//! proxied to the centre, the grant installs a local session, heartbeats
//! renew it, and removals are reported.
//!
//! ```text
//!  Type 1/2 from an unknown identity, a new address or an expired grant
//!    ─▶ request_auth: one pending per "<username>-<ssid>" and address, 5 s ─▶ the centre's
//!       budget (450/s) ─▶ source /24 (/64) budget ─▶ identity-per-/24 budget
//!       ─▶ DeviceAuth (raw datagram + IP)   (over a budget: counted drop)
//!  DeviceAuth response ─▶ success + grant ─▶ another identity on the same UDP endpoint: refused, reported
//!                        │                  endpoint caps (account, /24): refused as a single node
//!                        │                  refuses (code 3), reported; a full /24 may evict instead
//!                        │                  ─▶ install (same identity replaces); fan-out once heard
//!                        │                     again `receive_after_ms` after the login
//!                        └ failure ─▶ forward response_packet, if any
//!  packet from the session's address with a live grant ─▶ touch (last seen, heard twice);
//!    heartbeat ∧ grant ends within 30 s ∧ no renew outstanding ─▶ DeviceSessionRenew
//!  handle_timeout: 20 s silent ─▶ device_timeout │ grant expired ─▶ grant_expired
//!  ICMP unreachable for the address ─▶ endpoint_unreachable
//!  revoke (same epoch) │ route removed │ control unavailable (§6.1) ─▶ removed
//!  every removal but a revoke is reported: DeviceSessionReport{online:false, reason}
//! ```
//!
//! Physical devices only (Type 2 password logins); ghost sessions (§3.12)
//! and the Type 3 configuration `sync` after a grant (§3.11) are not
//! handled here. Monotonic `now` drives the 5 s and 20 s timers; the grant
//! expiry is centre wall-clock ms and is compared with `wall_ms`.
//!
//! The fan-out admission rules of a single node
//! ([`EndpointPolicy`](crate::model::EndpointPolicy), draarl-v1 §3.1,
//! §3.6, §9) hold here for the addresses the edge holds: the per-/24 cap
//! (and the account cap over this edge's sessions; the centre applies it
//! over every node's), the heard-twice wait and the end of a session
//! whose address is reported unreachable. Logins are budgeted per source
//! prefix and per identity before they are proxied, so forged sources
//! cannot fill the centre's shared Argon2 line.

use std::collections::{HashMap, HashSet};
use std::net::SocketAddr;
use std::time::{Duration, Instant};

use crate::codec::{self, Header};
use crate::core::endpoint_caps::{EndpointCaps, EndpointLimit};
use crate::core::replies::{heartbeat_reject, RejectReason};
use crate::model::{DeviceKey, EndpointPolicy};
use crate::policy::{BucketTable, SourcePrefix};

use crate::codec::interconnect::messages::{
    ConfirmItem, DeviceAuthRequest, DeviceAuthResponse, DeviceGrant, DeviceRoute,
    DeviceSessionRenew, DeviceSessionReport, DeviceSessionRevoke,
};
use crate::codec::interconnect::{Flags, Subtype};

use super::control_send::{reliable, ControlSend};
use super::outbound::MessageIds;
use super::route_projection::{Projection, MAX_DEVICE_SESSIONS_PER_NODE};

/// DeviceAuth requests the edge sends per second at most, with
/// [`DEVICE_AUTH_BURST`] banked: any one second then holds at most 500, the
/// centre's `DeviceAuthPPSPerNode` (§7), whose windows the edge's clock
/// does not share. The centre drops requests over its budget without an
/// answer, and the edge would hold such a login pending for
/// [`PENDING_AUTH_TIMEOUT`], ignoring the device's retries meanwhile; a
/// login the edge does not send is retried at the device's next heartbeat.
pub const DEVICE_AUTH_PER_S: u32 = 450;
/// See [`DEVICE_AUTH_PER_S`].
pub const DEVICE_AUTH_BURST: u32 = 50;
/// A pending DeviceAuth request expires after this long (§3.8).
pub const PENDING_AUTH_TIMEOUT: Duration = Duration::from_secs(5);
/// Default `DeviceSessionTimeoutSeconds` (§2, §3.8: 20 s, 5–300).
pub const DEVICE_SESSION_TIMEOUT: Duration = Duration::from_secs(20);
/// Default `GrantRenewBeforeSeconds` (§2, §3.8: 30 s, 5–90).
pub const GRANT_RENEW_BEFORE: Duration = Duration::from_secs(30);

/// Removal reasons of §3.8 and §6.1 reported to the centre, and the few
/// the spec leaves unnamed (noted on each).
pub mod removal_reason {
    /// No packet for `DeviceSessionTimeout`.
    pub const DEVICE_TIMEOUT: &str = "device_timeout";
    /// The grant expired.
    pub const GRANT_EXPIRED: &str = "grant_expired";
    /// The centre stayed unreachable past the grace period (§6.1).
    pub const CONTROL_UNAVAILABLE: &str = "control_unavailable";
    /// A second identity on an authenticated UDP endpoint (§3.8).
    pub const UDP_ENDPOINT_TAKEN: &str = "udp_endpoint_already_authenticated";
    /// Not named by §3.8: the session's route was removed (a delta remove,
    /// or absent from a committed snapshot, §3.6 step 6).
    pub const ROUTE_REMOVED: &str = "route_removed";
    /// Not named by §3.8: evicted (least recently heard) to make room
    /// when the session table was full.
    pub const SESSION_EVICTED: &str = "session_evicted";
    /// Not reported: the centre revoked it.
    pub const REVOKED: &str = "revoked";
    /// Not reported: the centre refused its reconfirmation (§3.9).
    pub const SESSION_RECONFIRM_REJECTED: &str = "session_reconfirm_rejected";
    /// Reported: the centre cannot reconfirm sessions (no feature bit 7,
    /// §3.9), so the device authenticates again.
    pub const RECONFIRM_UNSUPPORTED: &str = "session_reconfirm_unsupported";
    /// Not named by §3.8: an ICMP destination unreachable was read for
    /// the session's address (as a single node ends such a session,
    /// draarl-v1 §3.6).
    pub const ENDPOINT_UNREACHABLE: &str = "endpoint_unreachable";
    /// Not named by §3.8: displaced from a full source /24 (/64) by a
    /// login of an account holding fewer endpoints there (the single
    /// node's rule, `core/endpoint_caps.rs`).
    pub const ENDPOINT_EVICTED: &str = "endpoint_evicted";
    /// Not named by §3.8: the grant would exceed an endpoint cap here.
    pub const ENDPOINT_LIMIT: &str = "endpoint_limit";
}

/// Budgets of the logins the edge proxies to the centre (each a token
/// bucket in a bounded table that evicts its least recently used entry).
/// Defaults: a single node's per-prefix Argon2 budget (120 per minute,
/// 20 at once) per source /24 or /64, and 6 per minute, 5 at once, per
/// identity from each source /24 or /64 (a link box retries every 5 s
/// heartbeat), so that logins forged for an identity from one network do
/// not lock that device out from another.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct AuthBudgetConfig {
    /// Requests per minute per source prefix.
    pub prefix_per_min: u32,
    /// Requests a source prefix may send at once.
    pub prefix_burst: u32,
    /// Requests per minute per identity `"<username>-<ssid>"` and source
    /// prefix.
    pub identity_per_min: u32,
    /// Requests one identity may send at once from one source prefix.
    pub identity_burst: u32,
    /// Requests per second toward the centre, all sources together
    /// ([`DEVICE_AUTH_PER_S`]).
    pub centre_per_s: u32,
    /// Requests toward the centre at once ([`DEVICE_AUTH_BURST`]).
    pub centre_burst: u32,
    /// Entries of each table.
    pub table_max: usize,
}

impl Default for AuthBudgetConfig {
    fn default() -> Self {
        Self {
            prefix_per_min: 120,
            prefix_burst: 20,
            identity_per_min: 6,
            identity_burst: 5,
            centre_per_s: DEVICE_AUTH_PER_S,
            centre_burst: DEVICE_AUTH_BURST,
            table_max: 65_536,
        }
    }
}

/// Limits and timers of the edge's session table.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct EdgeSessionsConfig {
    /// Sessions at most (`MaxDeviceSessionsPerNode`, 25 000).
    pub max_sessions: usize,
    /// Pending DeviceAuth requests at most (not a spec value; oldest
    /// evicted first).
    pub max_pending: usize,
    /// `DeviceSessionTimeoutSeconds` (20 s).
    pub device_timeout: Duration,
    /// `GrantRenewBeforeSeconds` (30 s).
    pub renew_before: Duration,
    /// The single node's fan-out admission rules (`[session.endpoints]`).
    pub endpoints: EndpointPolicy,
    /// Budgets of proxied logins.
    pub auth_budget: AuthBudgetConfig,
}

impl Default for EdgeSessionsConfig {
    fn default() -> Self {
        Self {
            max_sessions: MAX_DEVICE_SESSIONS_PER_NODE,
            max_pending: 4096,
            device_timeout: DEVICE_SESSION_TIMEOUT,
            renew_before: GRANT_RENEW_BEFORE,
            endpoints: EndpointPolicy::default(),
            auth_budget: AuthBudgetConfig::default(),
        }
    }
}

/// The identity key of a physical device: `"<username>-<ssid>"` (§3.8).
pub fn identity_key(username: &str, ssid: u8) -> String {
    format!("{username}-{ssid}")
}

/// One local device session.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LocalDeviceSession {
    /// `"<username>-<ssid>"`.
    pub identity: String,
    /// The device's UDP address.
    pub addr: SocketAddr,
    /// The grant (its route is kept current by route sync).
    pub grant: DeviceGrant,
    last_seen: Instant,
    renew: Option<u64>,
    control_session: u64,
    /// When the device was first heard at `addr` (its login).
    heard_since: Instant,
    /// Whether it receives fan-out (heard again `receive_after_ms` after
    /// `heard_since`, or exempt).
    receiving: bool,
}

impl LocalDeviceSession {
    /// The control (node) session id the grant was issued or last
    /// reconfirmed through (§3.9: the OLD control session id).
    pub fn control_session(&self) -> u64 {
        self.control_session
    }

    /// Device session id.
    pub fn session_id(&self) -> u64 {
        self.grant.route.session_id
    }

    /// Its epoch.
    pub fn session_epoch(&self) -> u64 {
        self.grant.route.session_epoch
    }

    /// Whether it receives fan-out yet (see [`EndpointPolicy`]).
    pub fn receiving(&self) -> bool {
        self.receiving
    }

    fn key(&self) -> DeviceKey {
        (self.grant.owner_id, self.grant.route.ssid)
    }
}

/// A session removed, with its report for the centre.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Removal {
    /// The removed session.
    pub session: LocalDeviceSession,
    /// Why (see [`removal_reason`]).
    pub reason: &'static str,
    /// The DeviceSessionReport `online:false` to send (none for a revoke);
    /// drop it when there is no control connection.
    pub report: Option<ControlSend>,
}

/// What a DeviceAuth response did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum AuthOutcome {
    /// Installed: send `response_packet` (or a synthesised heartbeat reply
    /// when empty) to `addr`.
    Installed {
        /// Device session id.
        session_id: u64,
        /// The device's address.
        addr: SocketAddr,
        /// The device reply from the centre.
        response_packet: Vec<u8>,
        /// Bytes of the device's request (send no reply larger than it:
        /// the amplification bound).
        request_len: usize,
        /// A previous session of the same identity that this one replaced
        /// (not reported: the centre moved ownership itself).
        replaced: Option<Box<LocalDeviceSession>>,
        /// Sessions evicted to make room: the least recently heard of a
        /// full table, one displaced from a full source /24.
        evicted: Vec<Removal>,
        /// Whether the new session receives fan-out at once (exempt
        /// source, or no wait).
        receiving: bool,
    },
    /// Refused by the centre: send `response_packet` to `addr` if any.
    Failed {
        /// The device's address.
        addr: SocketAddr,
        /// The centre's error.
        error: String,
        /// The device reply from the centre (may be empty).
        response_packet: Vec<u8>,
        /// Bytes of the device's request (the amplification bound).
        request_len: usize,
    },
    /// Another identity is authenticated on `addr`: refused; send `report`
    /// so the centre drops the new session.
    EndpointTaken {
        /// The device's address.
        addr: SocketAddr,
        /// The DeviceSessionReport `online:false`.
        report: ControlSend,
    },
    /// An endpoint cap is full (the account's on this edge, or the source
    /// /24's, see [`EndpointPolicy`]): send `reply` (the reject a single
    /// node sends, code 3) to `addr`, and `report` so the centre drops the
    /// new session.
    EndpointLimit {
        /// The device's address.
        addr: SocketAddr,
        /// The heartbeat reject.
        reply: Vec<u8>,
        /// Bytes of the device's request (the amplification bound).
        request_len: usize,
        /// The DeviceSessionReport `online:false`.
        report: ControlSend,
    },
    /// No pending request with that id (expired or unknown).
    Unknown,
}

/// What a packet from a device means for its session.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Touch {
    /// A live session: handle the packet locally; send `renew` if present.
    Live {
        /// Device session id.
        session_id: u64,
        /// Its epoch.
        session_epoch: u64,
        /// A DeviceSessionRenew to send.
        renew: Option<ControlSend>,
        /// This packet made the session start receiving fan-out (heard
        /// again after the wait): publish it as a receiver.
        started_receiving: bool,
    },
    /// Unknown identity, another address or an expired grant: a Type 1 or
    /// Type 2 packet goes to [`EdgeSessions::request_auth`], others are
    /// ignored.
    NeedsAuth,
}

/// Counters of the edge's session table.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct EdgeSessionCounters {
    /// DeviceAuth requests sent.
    pub auth_requests: u64,
    /// Requests not sent because one was pending for the identity.
    pub auth_pending_drops: u64,
    /// Pending requests expired (5 s) or evicted.
    pub auth_expired: u64,
    /// Responses matching no pending request.
    pub auth_unknown: u64,
    /// Grants installed.
    pub installed: u64,
    /// Failed authentications.
    pub auth_failed: u64,
    /// Grants refused for another identity on the endpoint, or a grant
    /// naming another identity than the request.
    pub endpoint_refused: u64,
    /// Renewals sent.
    pub renews_sent: u64,
    /// Renewals granted.
    pub renews_ok: u64,
    /// Renewals refused by the centre.
    pub renews_failed: u64,
    /// Sessions removed (any reason).
    pub removed: u64,
    /// Logins not proxied: their source /24 (/64) spent its budget.
    pub auth_prefix_drops: u64,
    /// Logins not proxied: their identity spent its budget.
    pub auth_identity_drops: u64,
    /// Logins not proxied: the edge spent the centre's DeviceAuth budget
    /// ([`DEVICE_AUTH_PER_S`]); the device's next heartbeat tries again.
    pub auth_rate_drops: u64,
    /// Grants refused: the account holds `max_per_account` endpoints here.
    pub account_endpoint_limit_rejects: u64,
    /// Grants refused: the source /24 (/64) is full and the account holds
    /// as many of it as any other.
    pub prefix_endpoint_limit_rejects: u64,
    /// Sessions displaced from a full source /24 (/64).
    pub prefix_endpoint_evictions: u64,
    /// Sessions that started receiving after the heard-twice wait.
    pub endpoints_heard_twice: u64,
    /// Sessions ended by an ICMP unreachable for their address.
    pub unreachable_sessions_ended: u64,
}

#[derive(Debug)]
struct PendingAuth {
    identity: String,
    addr: SocketAddr,
    sent_at: Instant,
    request_len: usize,
    /// The device's request header (for a reject the edge sends itself;
    /// `None` if the datagram does not decode).
    header: Option<Header>,
}

/// The edge's table of local device sessions and pending authentications.
#[derive(Debug)]
pub struct EdgeSessions {
    cfg: EdgeSessionsConfig,
    sessions: HashMap<String, LocalDeviceSession>,
    by_id: HashMap<u64, String>,
    by_addr: HashMap<SocketAddr, String>,
    pending: HashMap<u64, PendingAuth>,
    /// The pending request of each identity at each source address: a
    /// request forged from another address does not hold a device's own.
    pending_by_source: HashMap<(String, SocketAddr), u64>,
    control_session: u64,
    caps: EndpointCaps,
    prefix_budget: BucketTable<SourcePrefix>,
    /// Keyed by source /24 (/64) and identity, as the centre's per-user
    /// budget: forged logins from one network cannot lock a device out of
    /// another.
    identity_budget: BucketTable<(SourcePrefix, String)>,
    /// DeviceAuth requests toward the centre (one key).
    node_budget: BucketTable<()>,
    counters: EdgeSessionCounters,
}

fn report(ids: &mut MessageIds, wall_ms: i64, s: &LocalDeviceSession, reason: &str) -> ControlSend {
    let r = DeviceSessionReport {
        session_id: s.session_id(),
        session_epoch: s.session_epoch(),
        device_id: s.grant.route.device_id,
        online: false,
        reason: reason.to_owned(),
        reported_at_ms: wall_ms,
    };
    ControlSend::json(
        Subtype::DEVICE_SESSION_REPORT,
        Flags::CONTROL,
        ids.next_id(),
        0,
        0,
        &r,
    )
}

impl EdgeSessions {
    /// An empty table.
    pub fn new(cfg: EdgeSessionsConfig) -> Self {
        let b = cfg.auth_budget;
        Self {
            caps: EndpointCaps::default(),
            prefix_budget: BucketTable::per_min(b.prefix_per_min, b.prefix_burst, b.table_max),
            identity_budget: BucketTable::per_min(
                b.identity_per_min,
                b.identity_burst,
                b.table_max,
            ),
            node_budget: BucketTable::per_min(b.centre_per_s.saturating_mul(60), b.centre_burst, 1),
            cfg,
            sessions: HashMap::new(),
            by_id: HashMap::new(),
            by_addr: HashMap::new(),
            pending: HashMap::new(),
            pending_by_source: HashMap::new(),
            control_session: 0,
            counters: EdgeSessionCounters::default(),
        }
    }

    /// The counters.
    pub fn counters(&self) -> &EdgeSessionCounters {
        &self.counters
    }

    /// Sessions installed.
    pub fn len(&self) -> usize {
        self.sessions.len()
    }

    /// Whether no session is installed.
    pub fn is_empty(&self) -> bool {
        self.sessions.is_empty()
    }

    /// Pending DeviceAuth requests.
    pub fn pending(&self) -> usize {
        self.pending.len()
    }

    /// The session of `identity`.
    pub fn get(&self, identity: &str) -> Option<&LocalDeviceSession> {
        self.sessions.get(identity)
    }

    /// The session authenticated on `addr`.
    pub fn at(&self, addr: &SocketAddr) -> Option<&LocalDeviceSession> {
        self.by_addr.get(addr).and_then(|i| self.sessions.get(i))
    }

    /// The session with device session id `session_id`.
    pub fn by_session_id(&self, session_id: u64) -> Option<&LocalDeviceSession> {
        self.by_id
            .get(&session_id)
            .and_then(|i| self.sessions.get(i))
    }

    /// Every session (for local fan-out and heartbeats).
    pub fn iter(&self) -> impl Iterator<Item = &LocalDeviceSession> {
        self.sessions.values()
    }

    fn drop_pending(&mut self, request_id: u64) -> Option<PendingAuth> {
        let p = self.pending.remove(&request_id)?;
        self.pending_by_source.remove(&(p.identity.clone(), p.addr));
        Some(p)
    }

    /// Proxies a Type 1/2 datagram of `identity` from `addr` (real client
    /// IP `source_ip`) to the centre at `now` (§3.8): the DeviceAuth
    /// request with the entire raw datagram; `None` (counted) while a
    /// request for that identity from `addr` is pending, when the edge
    /// spent the centre's budget, or when `addr`'s /24 (/64) or the
    /// identity from that network spent its budget ([`AuthBudgetConfig`]; exempt
    /// sources are not budgeted).
    /// The caller checks first that new authentications are allowed (link
    /// ready, §6.1).
    pub fn request_auth(
        &mut self,
        ids: &mut MessageIds,
        now: Instant,
        identity: &str,
        addr: SocketAddr,
        source_ip: &str,
        packet: &[u8],
    ) -> Option<ControlSend> {
        let source = (identity.to_owned(), addr);
        if let Some(id) = self.pending_by_source.get(&source).copied() {
            let live = self
                .pending
                .get(&id)
                .is_some_and(|p| now.saturating_duration_since(p.sent_at) < PENDING_AUTH_TIMEOUT);
            if live {
                self.counters.auth_pending_drops += 1;
                return None;
            }
            self.drop_pending(id);
            self.counters.auth_expired += 1;
        }
        if !self.node_budget.has_token(&(), now) {
            self.counters.auth_rate_drops += 1;
            return None;
        }
        if !self.cfg.endpoints.exempt(addr) {
            self.prefix_budget.sweep(now);
            self.identity_budget.sweep(now);
            let prefix = SourcePrefix::of(addr.ip());
            if !self.prefix_budget.has_token(&prefix, now) {
                self.counters.auth_prefix_drops += 1;
                return None;
            }
            if !self
                .identity_budget
                .take((prefix, identity.to_owned()), now)
            {
                self.counters.auth_identity_drops += 1;
                return None;
            }
            self.prefix_budget.take(prefix, now);
        }
        self.node_budget.take((), now);
        if self.pending.len() >= self.cfg.max_pending.max(1) {
            if let Some(oldest) = self
                .pending
                .iter()
                .min_by_key(|(_, p)| p.sent_at)
                .map(|(id, _)| *id)
            {
                self.drop_pending(oldest);
                self.counters.auth_expired += 1;
            }
        }
        let request_id = ids.next_id();
        self.pending.insert(
            request_id,
            PendingAuth {
                identity: identity.to_owned(),
                addr,
                sent_at: now,
                request_len: packet.len(),
                header: codec::decode(packet).ok().map(|p| p.header),
            },
        );
        self.pending_by_source.insert(source, request_id);
        self.counters.auth_requests += 1;
        let req = DeviceAuthRequest {
            request_id,
            source_ip: source_ip.to_owned(),
            packet: packet.to_vec(),
        };
        Some(ControlSend::json(
            Subtype::DEVICE_AUTH,
            reliable(),
            request_id,
            0,
            0,
            &req,
        ))
    }

    fn take(&mut self, identity: &str) -> Option<LocalDeviceSession> {
        let s = self.sessions.remove(identity)?;
        if self.caps.holds(s.key(), s.addr) {
            self.caps.release(s.key());
        }
        self.by_id.remove(&s.session_id());
        if self.by_addr.get(&s.addr).is_some_and(|i| i == identity) {
            self.by_addr.remove(&s.addr);
        }
        self.counters.removed += 1;
        Some(s)
    }

    fn removal(
        &mut self,
        ids: &mut MessageIds,
        wall_ms: i64,
        identity: &str,
        reason: &'static str,
    ) -> Option<Removal> {
        let session = self.take(identity)?;
        let report =
            (reason != removal_reason::REVOKED).then(|| report(ids, wall_ms, &session, reason));
        Some(Removal {
            session,
            reason,
            report,
        })
    }

    /// Applies a DeviceAuth response at `now` / `wall_ms` (§3.8).
    pub fn handle_auth_response(
        &mut self,
        ids: &mut MessageIds,
        now: Instant,
        wall_ms: i64,
        resp: DeviceAuthResponse,
    ) -> AuthOutcome {
        let Some(p) = self.drop_pending(resp.request_id) else {
            self.counters.auth_unknown += 1;
            return AuthOutcome::Unknown;
        };
        let grant = match resp.grant {
            Some(g) if resp.success && g.route.session_id != 0 => g,
            _ => {
                self.counters.auth_failed += 1;
                return AuthOutcome::Failed {
                    addr: p.addr,
                    error: resp.error,
                    response_packet: resp.response_packet,
                    request_len: p.request_len,
                };
            }
        };
        let exempt = self.cfg.endpoints.exempt(p.addr);
        let receiving = exempt || self.cfg.endpoints.receive_after().is_zero();
        let candidate = LocalDeviceSession {
            identity: p.identity.clone(),
            addr: p.addr,
            grant,
            last_seen: now,
            renew: None,
            control_session: self.control_session,
            heard_since: p.sent_at,
            receiving,
        };
        let granted_identity =
            identity_key(&candidate.grant.route.username, candidate.grant.route.ssid);
        let endpoint_taken = self
            .by_addr
            .get(&p.addr)
            .is_some_and(|other| *other != p.identity);
        if granted_identity != p.identity || endpoint_taken {
            self.counters.endpoint_refused += 1;
            return AuthOutcome::EndpointTaken {
                addr: p.addr,
                report: report(ids, wall_ms, &candidate, removal_reason::UDP_ENDPOINT_TAKEN),
            };
        }
        let replaced = self.take(&p.identity);
        // The same device at the same address keeps receiving.
        let candidate = match &replaced {
            Some(old) if old.addr == p.addr && old.receiving => LocalDeviceSession {
                receiving: true,
                heard_since: old.heard_since,
                ..candidate
            },
            _ => candidate,
        };
        let mut evicted = Vec::new();
        match self
            .caps
            .claim(candidate.key(), p.addr, &self.cfg.endpoints, now)
        {
            Ok(None) => {}
            Ok(Some(victim)) => {
                self.counters.prefix_endpoint_evictions += 1;
                let identity = self
                    .sessions
                    .values()
                    .find(|s| s.key() == victim)
                    .map(|s| s.identity.clone());
                evicted.extend(identity.and_then(|i| {
                    self.removal(ids, wall_ms, &i, removal_reason::ENDPOINT_EVICTED)
                }));
            }
            Err(limit) => {
                let reason = match limit {
                    EndpointLimit::Account => {
                        self.counters.account_endpoint_limit_rejects += 1;
                        RejectReason::AccountEndpointLimit
                    }
                    EndpointLimit::Prefix => {
                        self.counters.prefix_endpoint_limit_rejects += 1;
                        RejectReason::PrefixEndpointLimit
                    }
                };
                return AuthOutcome::EndpointLimit {
                    addr: p.addr,
                    reply: p
                        .header
                        .as_ref()
                        .map(|h| heartbeat_reject(h, reason))
                        .unwrap_or_default(),
                    request_len: p.request_len,
                    report: report(ids, wall_ms, &candidate, removal_reason::ENDPOINT_LIMIT),
                };
            }
        }
        let replaced = replaced.map(Box::new);
        if self.sessions.len() >= self.cfg.max_sessions.max(1) {
            if let Some(idle) = self
                .sessions
                .values()
                .min_by_key(|s| s.last_seen)
                .map(|s| s.identity.clone())
            {
                evicted.extend(self.removal(ids, wall_ms, &idle, removal_reason::SESSION_EVICTED));
            }
        }
        let session_id = candidate.session_id();
        let receiving = candidate.receiving;
        self.by_id.insert(session_id, p.identity.clone());
        self.by_addr.insert(p.addr, p.identity.clone());
        self.sessions.insert(p.identity, candidate);
        self.counters.installed += 1;
        AuthOutcome::Installed {
            session_id,
            addr: p.addr,
            response_packet: resp.response_packet,
            request_len: p.request_len,
            replaced,
            evicted,
            receiving,
        }
    }

    /// A packet of `identity` from `from` at `now` / `wall_ms`: a live
    /// session is refreshed and, for a heartbeat whose grant ends within
    /// `renew_before`, renewed (one renewal outstanding per session).
    pub fn touch(
        &mut self,
        ids: &mut MessageIds,
        now: Instant,
        wall_ms: i64,
        identity: &str,
        from: SocketAddr,
        heartbeat: bool,
    ) -> Touch {
        let renew_before = i64::try_from(self.cfg.renew_before.as_millis()).unwrap_or(i64::MAX);
        let Some(s) = self.sessions.get_mut(identity) else {
            return Touch::NeedsAuth;
        };
        if s.addr != from || wall_ms >= s.grant.expires_at_ms {
            return Touch::NeedsAuth;
        }
        s.last_seen = now;
        let started_receiving = !s.receiving
            && now.saturating_duration_since(s.heard_since) >= self.cfg.endpoints.receive_after();
        if started_receiving {
            s.receiving = true;
            self.counters.endpoints_heard_twice += 1;
        }
        self.caps.renew(s.key(), from, now);
        let mut renew = None;
        if heartbeat
            && s.renew.is_none()
            && s.grant.expires_at_ms.saturating_sub(wall_ms) <= renew_before
        {
            let request_id = ids.next_id();
            s.renew = Some(request_id);
            let req = DeviceSessionRenew {
                request_id,
                session_id: s.session_id(),
                session_epoch: s.session_epoch(),
                ..DeviceSessionRenew::default()
            };
            renew = Some(ControlSend::json(
                Subtype::DEVICE_SESSION_RENEW,
                reliable(),
                request_id,
                0,
                0,
                &req,
            ));
            self.counters.renews_sent += 1;
        }
        Touch::Live {
            session_id: s.session_id(),
            session_epoch: s.session_epoch(),
            renew,
            started_receiving,
        }
    }

    /// Applies a DeviceSessionRenew response: a success moves the grant
    /// expiry to `expires_at_ms`; a failure is counted and the session
    /// lives until its grant expires. Whether it matched the outstanding
    /// renewal of a session.
    pub fn handle_renew_response(&mut self, resp: &DeviceSessionRenew) -> bool {
        let Some(s) = self
            .by_id
            .get(&resp.session_id)
            .and_then(|i| self.sessions.get_mut(i))
        else {
            return false;
        };
        if s.renew != Some(resp.request_id) || s.session_epoch() != resp.session_epoch {
            return false;
        }
        s.renew = None;
        if resp.success {
            s.grant.expires_at_ms = s.grant.expires_at_ms.max(resp.expires_at_ms);
            self.counters.renews_ok += 1;
        } else {
            self.counters.renews_failed += 1;
        }
        true
    }

    /// An ICMP destination unreachable (port, host or network) was read
    /// at `now` for a datagram sent to `addr`: the session there ends
    /// (`endpoint_unreachable`, reported), as on a single node
    /// (draarl-v1 §3.6); a session that came up at `addr` after `now` is
    /// kept (the report is older than it).
    pub fn handle_unreachable(
        &mut self,
        ids: &mut MessageIds,
        now: Instant,
        wall_ms: i64,
        addr: SocketAddr,
    ) -> Option<Removal> {
        let identity = self.by_addr.get(&addr)?.clone();
        if self.sessions.get(&identity)?.heard_since > now {
            return None;
        }
        self.counters.unreachable_sessions_ended += 1;
        self.removal(
            ids,
            wall_ms,
            &identity,
            removal_reason::ENDPOINT_UNREACHABLE,
        )
    }

    /// A DeviceSessionRevoke: removes the session only if the epoch
    /// matches (not reported).
    pub fn handle_revoke(
        &mut self,
        ids: &mut MessageIds,
        revoke: &DeviceSessionRevoke,
    ) -> Option<Removal> {
        let identity = self.by_id.get(&revoke.session_id)?.clone();
        if self.sessions.get(&identity)?.session_epoch() != revoke.session_epoch {
            return None;
        }
        self.removal(ids, 0, &identity, removal_reason::REVOKED)
    }

    /// Applies a route upsert to the live grant of its session (same
    /// epoch); `Some(true)` when the change ends the session's speaker
    /// lease (domain changed or sending disabled, §3.8), `None` when no
    /// session has that id and epoch.
    pub fn apply_route(&mut self, route: &DeviceRoute) -> Option<bool> {
        let identity = self.by_id.get(&route.session_id)?;
        let s = self.sessions.get_mut(identity)?;
        if s.session_epoch() != route.session_epoch {
            return None;
        }
        let lease_ends = s.grant.route.domain_id != route.domain_id
            || (route.disable_send && !s.grant.route.disable_send);
        s.grant.route = route.clone();
        Some(lease_ends)
    }

    /// A route remove: the session ends (`route_removed`).
    pub fn remove_route(
        &mut self,
        ids: &mut MessageIds,
        wall_ms: i64,
        session_id: u64,
    ) -> Option<Removal> {
        let identity = self.by_id.get(&session_id)?.clone();
        self.removal(ids, wall_ms, &identity, removal_reason::ROUTE_REMOVED)
    }

    /// Applies a committed projection (§3.6 step 6): every route present
    /// refreshes its session's grant; sessions absent from it are removed
    /// (`route_removed`).
    pub fn apply_projection(
        &mut self,
        ids: &mut MessageIds,
        wall_ms: i64,
        p: &Projection,
    ) -> Vec<Removal> {
        let gone: Vec<String> = self
            .sessions
            .values()
            .filter(|s| {
                p.devices
                    .get(&s.session_id())
                    .is_none_or(|r| r.session_epoch != s.session_epoch())
            })
            .map(|s| s.identity.clone())
            .collect();
        let out = gone
            .iter()
            .filter_map(|i| self.removal(ids, wall_ms, i, removal_reason::ROUTE_REMOVED))
            .collect();
        for s in self.sessions.values_mut() {
            if let Some(r) = p.devices.get(&s.session_id()) {
                s.grant.route = r.clone();
            }
        }
        out
    }

    /// Expires what is due at `now` / `wall_ms`: pending requests after
    /// 5 s, sessions silent for `device_timeout` (`device_timeout`) and
    /// sessions whose grant expired (`grant_expired`).
    pub fn handle_timeout(
        &mut self,
        ids: &mut MessageIds,
        now: Instant,
        wall_ms: i64,
    ) -> Vec<Removal> {
        let stale: Vec<u64> = self
            .pending
            .iter()
            .filter(|(_, p)| now.saturating_duration_since(p.sent_at) >= PENDING_AUTH_TIMEOUT)
            .map(|(id, _)| *id)
            .collect();
        for id in stale {
            self.drop_pending(id);
            self.counters.auth_expired += 1;
        }
        let mut due: Vec<(String, &'static str)> = Vec::new();
        for s in self.sessions.values() {
            if now.saturating_duration_since(s.last_seen) >= self.cfg.device_timeout {
                due.push((s.identity.clone(), removal_reason::DEVICE_TIMEOUT));
            } else if wall_ms >= s.grant.expires_at_ms {
                due.push((s.identity.clone(), removal_reason::GRANT_EXPIRED));
            }
        }
        due.into_iter()
            .filter_map(|(i, r)| self.removal(ids, wall_ms, &i, r))
            .collect()
    }

    /// The earliest instant [`EdgeSessions::handle_timeout`] has work,
    /// given the wall clock `wall_ms` read at `now`.
    pub fn poll_timeout(&self, now: Instant, wall_ms: i64) -> Option<Instant> {
        let pending = self
            .pending
            .values()
            .map(|p| p.sent_at + PENDING_AUTH_TIMEOUT);
        let sessions = self.sessions.values().map(|s| {
            let left = u64::try_from(s.grant.expires_at_ms.saturating_sub(wall_ms)).unwrap_or(0);
            (s.last_seen + self.cfg.device_timeout).min(now + Duration::from_millis(left))
        });
        pending.chain(sessions).min()
    }

    /// Removes every session with `reason` (e.g. `control_unavailable`
    /// after the grace period, §6.1).
    pub fn remove_all(
        &mut self,
        ids: &mut MessageIds,
        wall_ms: i64,
        reason: &'static str,
    ) -> Vec<Removal> {
        let all: Vec<String> = self.sessions.keys().cloned().collect();
        all.iter()
            .filter_map(|i| self.removal(ids, wall_ms, i, reason))
            .collect()
    }

    /// The control link detached (§6.1): pending requests and outstanding
    /// renewals are forgotten; sessions stay.
    pub fn detach(&mut self) {
        self.counters.auth_expired += self.pending.len() as u64;
        self.pending.clear();
        self.pending_by_source.clear();
        for s in self.sessions.values_mut() {
            s.renew = None;
        }
    }

    /// The control session now attached (§3.6 step 2): grants installed or
    /// reconfirmed from now on were issued through it.
    pub fn set_control_session(&mut self, control_session: u64) {
        self.control_session = control_session;
    }

    /// The sessions to reconfirm at `now` / `wall_ms` (§3.9): heard within
    /// the device timeout, grant unexpired; with their old control session.
    pub fn confirm_items(&self, now: Instant, wall_ms: i64) -> Vec<ConfirmItem> {
        self.sessions
            .values()
            .filter(|s| {
                now.saturating_duration_since(s.last_seen) < self.cfg.device_timeout
                    && wall_ms < s.grant.expires_at_ms
                    && s.control_session != 0
            })
            .map(|s| ConfirmItem {
                session_id: s.session_id(),
                session_epoch: s.session_epoch(),
                control_session_id: s.control_session,
                device_id: s.grant.route.device_id,
                owner_id: s.grant.owner_id,
                ssid: s.grant.route.ssid,
                ..ConfirmItem::default()
            })
            .collect()
    }

    /// Replaces each session `(old_id, old_epoch)` of `swaps` by its
    /// reconfirmed grant (§3.9: new id, epoch and expiry, through the
    /// attached control session), all at once: a new id may be an old id of
    /// the same batch, never the id of a session that keeps it.
    ///
    /// # Errors
    /// [`SwapError`] for the first swap that does not fit; nothing changed.
    pub fn swap_confirmed(&mut self, swaps: Vec<(u64, u64, DeviceGrant)>) -> Result<(), SwapError> {
        let leaving: HashSet<u64> = swaps.iter().map(|(id, _, _)| *id).collect();
        if leaving.len() != swaps.len() {
            return Err(SwapError::Unknown);
        }
        let mut arriving = HashSet::with_capacity(swaps.len());
        let mut identities = Vec::with_capacity(swaps.len());
        for (old_id, old_epoch, grant) in &swaps {
            let identity = self
                .by_id
                .get(old_id)
                .filter(|i| {
                    self.sessions
                        .get(*i)
                        .is_some_and(|s| s.session_epoch() == *old_epoch)
                })
                .cloned()
                .ok_or(SwapError::Unknown)?;
            if identity_key(&grant.route.username, grant.route.ssid) != identity {
                return Err(SwapError::IdentityChanged);
            }
            let new_id = grant.route.session_id;
            if new_id == 0
                || !arriving.insert(new_id)
                || (self.by_id.contains_key(&new_id) && !leaving.contains(&new_id))
            {
                return Err(SwapError::IdInUse);
            }
            identities.push(identity);
        }
        for id in &leaving {
            self.by_id.remove(id);
        }
        let control_session = self.control_session;
        for ((_, _, grant), identity) in swaps.into_iter().zip(identities) {
            let new_id = grant.route.session_id;
            if let Some(s) = self.sessions.get_mut(&identity) {
                s.grant = grant;
                s.renew = None;
                s.control_session = control_session;
            }
            self.by_id.insert(new_id, identity);
        }
        Ok(())
    }

    /// Removes the session `session_id` whose reconfirmation the centre
    /// refused (`session_reconfirm_rejected`; no report: the centre does
    /// not own it).
    pub fn remove_unconfirmed(&mut self, session_id: u64) -> Option<Removal> {
        let identity = self.by_id.get(&session_id)?.clone();
        let session = self.take(&identity)?;
        Some(Removal {
            session,
            reason: removal_reason::SESSION_RECONFIRM_REJECTED,
            report: None,
        })
    }
}

/// Why a reconfirmed grant could not replace its session (§3.9: the whole
/// attempt fails).
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum SwapError {
    /// No session with that old id and epoch.
    #[error("no session with that id and epoch")]
    Unknown,
    /// The grant names another identity.
    #[error("the grant changes the identity")]
    IdentityChanged,
    /// The new id is zero or another session's.
    #[error("the grant reuses an active session id")]
    IdInUse,
}
