//! The centre's answer to 0x20 DeviceAuth (draarl-interconnect §3.8, §7):
//! the normal device login of the raw datagram an edge forwarded, run off
//! the dispatcher task, and the activation of the device session it
//! grants.
//!
//! ```text
//!  dispatcher ─ AuthGate: DeviceAuthPPSPerNode (500/s), ≤ 256 logins in progress per node ─ over: counted drop
//!    └─▶ task: ProxiedLogin::parse ─▶ start_auth (CentreDirectory, shared LoginGuard keyed by the forwarded IP)
//!          ├ queued ─▶ poll_queued every 10 ms            ┐
//!          └ check ─▶ PasswordVerifier pool ─▶ answer ───┴▶ finish_check (≤ 5 s, else password_check_timeout)
//!        ─▶ activate: routes + devices locked, node session still live?
//!             account's endpoints (direct + every edge's) ≥ max_per_account ─▶ too_many_devices
//!             device record (store event, CentreDirectory) ─▶ owners.activate ─▶ previous owner: revoke + route removed
//!             ─▶ put_route ─▶ CentreRoutes::upsert (RouteDelta to the owning edge)
//!             ─▶ the device's centre-direct session ended (DirectSessions::evict)
//!        ─▶ DeviceAuthResponse {grant, response_packet = the direct login's reply} over control
//! ```
//!
//! The Argon2 work runs on the server's verifier pool; one thread
//! (`refl-centre-auth`) hands the pool's answers to the waiting tasks, so
//! the dispatcher task never blocks. A task that is dropped (the
//! dispatcher stopped) ends its check in flight or its place in line.

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering::Relaxed};
use std::sync::mpsc::{self, SyncSender};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::time::Instant;

use tokio::sync::oneshot;

use super::super::shared_tables::SharedTables;
use super::super::verifier::{Answer, PasswordVerifier};
use super::super::wall_clock::unix_ms;
use super::centre_direct_sessions::DirectSessions;
use super::centre_directory::CentreDirectory;
use super::centre_revoke::revoke_dropped;
use super::centre_tables::CentreTables;
use super::centre_voice_stats::CentreVoiceStats;
use crate::codec::interconnect::messages::DeviceAuthRequest;
use crate::codec::interconnect::NodeId;
use crate::core::device_record_after_login;
use crate::core::interconnect::{
    abandon_check, device_grant, device_id, device_route, finish_check, granted, poll_queued,
    refused, response_message, session_error, start_auth, success_reply, wire_domain,
    ActivateError, AuthFailure, AuthStart, ControlRef, DataBudget, DataLimits, DeviceIdentity,
    PendingLogin, ProxiedLogin, QueuedStep, PROXIED_CHECK_TIMEOUT, QUEUED_CHECK_POLL,
};
use crate::core::RejectReason;
use crate::model::{EndpointPolicy, PasswordCheck, Recording, StoreEvent, UserRecord};

/// Proxied logins one node session may have in progress (parsing, in
/// line, being checked); more are dropped and counted
/// (`device_auth_in_flight_drops`). The edge retries at the device's next
/// heartbeat.
pub const MAX_AUTHS_IN_FLIGHT_PER_NODE: usize = 256;
/// `DeviceAuthPPSPerNode` (§7): DeviceAuth requests per node session per
/// wall-clock second; more are dropped and counted
/// (`device_auth_limit_drops`).
pub const DEVICE_AUTH_PPS_PER_NODE: u32 = 500;

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(PoisonError::into_inner)
}

/// What the centre's proxied logins use of the server.
pub(crate) struct CentreServices {
    /// The directory, replaced at every reload.
    pub(crate) directory: Arc<CentreDirectory>,
    /// The shards' shared tables (the login guard, the domains).
    pub(crate) shared: Arc<SharedTables>,
    /// The Argon2 pool.
    pub(crate) verifier: Arc<PasswordVerifier>,
    /// The store writer (device records, edge recordings and texts).
    pub(crate) store: Arc<dyn CentreStore>,
    /// `session.password_checks_in_flight`: checks in flight at most,
    /// shards and centre together.
    pub(crate) password_checks_in_flight: usize,
    /// The shards' centre-direct sessions, ended when their device logs
    /// in through an edge.
    pub(crate) direct: DirectSessions,
    /// `SessionRecoveryWindowSeconds` (§3.9, §6.2).
    pub(crate) recovery_window: std::time::Duration,
    /// The device-session entries stored before this start (§6.3), loaded
    /// once by the dispatcher.
    pub(crate) recovered: Vec<crate::model::SessionEntryRecord>,
    /// `session.endpoints`: the account cap counts the account's direct
    /// endpoints and its sessions on every edge together.
    pub(crate) endpoints: EndpointPolicy,
}

impl std::fmt::Debug for CentreServices {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("CentreServices")
            .field("password_checks_in_flight", &self.password_checks_in_flight)
            .field("recovery_window", &self.recovery_window)
            .field("recovered", &self.recovered.len())
            .finish_non_exhaustive()
    }
}

/// Where the centre's edge logic persists (the server's store writer):
/// each call queues without waiting and says whether it was queued.
pub trait CentreStore: Send + Sync {
    /// Queues a store event (a device record, a text).
    fn event(&self, e: StoreEvent) -> bool;
    /// Queues a finished voice recording.
    fn recording(&self, r: Recording) -> bool;
}

/// Hands the pool's answers to the tasks waiting for them.
struct CheckAnswers {
    answer_to: SyncSender<Answer>,
    waiting: Arc<Mutex<HashMap<u64, oneshot::Sender<bool>>>>,
}

impl CheckAnswers {
    /// Starts the thread reading the answers; it ends once this and every
    /// check queued with it are gone.
    fn start(capacity: usize) -> std::io::Result<Self> {
        let (answer_to, answers) = mpsc::sync_channel::<Answer>(capacity.max(1));
        let waiting: Arc<Mutex<HashMap<u64, oneshot::Sender<bool>>>> = Arc::default();
        let table = Arc::clone(&waiting);
        std::thread::Builder::new()
            .name("refl-centre-auth".into())
            .spawn(move || {
                while let Ok((id, ok)) = answers.recv() {
                    if let Some(tx) = lock(&table).remove(&id) {
                        let _ = tx.send(ok);
                    }
                }
            })?;
        Ok(Self { answer_to, waiting })
    }

    /// Queues `check` on `verifier`; `None` when its queue is full.
    fn submit(
        &self,
        verifier: &PasswordVerifier,
        check: PasswordCheck,
    ) -> Option<oneshot::Receiver<bool>> {
        let id = check.id();
        let (tx, rx) = oneshot::channel();
        lock(&self.waiting).insert(id, tx);
        if verifier.try_submit_to(check, &self.answer_to).is_err() {
            lock(&self.waiting).remove(&id);
            return None;
        }
        Some(rx)
    }

    fn forget(&self, id: u64) {
        lock(&self.waiting).remove(&id);
    }
}

/// One login's place in the login guard until it ends: a ticket in line
/// (cancelled) or a check in flight (ended) when the task is dropped.
struct GuardHold<'a> {
    shared: &'a SharedTables,
    pending: &'a PendingLogin,
    ticket: Option<u64>,
    checking: bool,
}

impl Drop for GuardHold<'_> {
    fn drop(&mut self) {
        let mut logins = self.shared.login_guard();
        if let Some(t) = self.ticket {
            logins.cancel_queued_check(t);
        }
        if self.checking {
            abandon_check(&mut logins, self.pending);
        }
    }
}

/// A login counted in its node's in-progress bound until dropped.
pub(super) struct InProgress(Arc<AtomicUsize>);

impl Drop for InProgress {
    fn drop(&mut self) {
        self.0.fetch_sub(1, Relaxed);
    }
}

struct NodeGate {
    session_id: u64,
    budget: DataBudget,
    in_progress: Arc<AtomicUsize>,
}

/// Why the gate dropped a request.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum GateDrop {
    /// Over `DeviceAuthPPSPerNode`.
    Rate,
    /// `MAX_AUTHS_IN_FLIGHT_PER_NODE` in progress.
    InProgress,
    /// From a session a newer one of the node replaced.
    Replaced,
}

/// The per-node admission of DeviceAuth requests (§7): one entry per live
/// node session (bounded by `max_nodes`).
#[derive(Default)]
pub(super) struct AuthGate {
    nodes: HashMap<NodeId, NodeGate>,
}

impl AuthGate {
    /// A node session opened (replacing any older one's entry).
    pub(super) fn node_up(&mut self, node: NodeId, session_id: u64) {
        self.nodes.insert(
            node,
            NodeGate {
                session_id,
                budget: DataBudget::default(),
                in_progress: Arc::default(),
            },
        );
    }

    /// A node session closed.
    pub(super) fn node_down(&mut self, node: NodeId, session_id: u64) {
        if self
            .nodes
            .get(&node)
            .is_some_and(|g| g.session_id == session_id)
        {
            self.nodes.remove(&node);
        }
    }

    /// Admits one request of `node`'s session `session_id` at `wall_ms`.
    pub(super) fn admit(
        &mut self,
        node: NodeId,
        session_id: u64,
        wall_ms: i64,
    ) -> Result<InProgress, GateDrop> {
        if self
            .nodes
            .get(&node)
            .is_some_and(|g| g.session_id != session_id)
        {
            return Err(GateDrop::Replaced);
        }
        // Without an entry, the node-up event was dropped (full queue):
        // the session starts here.
        let g = self.nodes.entry(node).or_insert_with(|| NodeGate {
            session_id,
            budget: DataBudget::default(),
            in_progress: Arc::default(),
        });
        let limits = DataLimits {
            soft_pps: DEVICE_AUTH_PPS_PER_NODE,
            hard_pps: DEVICE_AUTH_PPS_PER_NODE,
            hard_bytes_per_s: u64::MAX,
        };
        if !g.budget.charge(&limits, wall_ms, 0).allowed {
            return Err(GateDrop::Rate);
        }
        if g.in_progress.load(Relaxed) >= MAX_AUTHS_IN_FLIGHT_PER_NODE {
            return Err(GateDrop::InProgress);
        }
        g.in_progress.fetch_add(1, Relaxed);
        Ok(InProgress(Arc::clone(&g.in_progress)))
    }
}

/// The proxied-login service the dispatcher runs requests on.
pub(super) struct DeviceAuthService {
    services: CentreServices,
    answers: CheckAnswers,
    next_check: AtomicU64,
    stats: Arc<CentreVoiceStats>,
}

impl DeviceAuthService {
    /// The service over `services`, counting into `stats`.
    pub(super) fn start(
        services: CentreServices,
        stats: Arc<CentreVoiceStats>,
    ) -> std::io::Result<Self> {
        let answers = CheckAnswers::start(services.password_checks_in_flight)?;
        Ok(Self {
            services,
            answers,
            next_check: AtomicU64::new(1),
            stats,
        })
    }

    /// The server's services (directory, store writer).
    pub(super) fn services(&self) -> &CentreServices {
        &self.services
    }

    /// Handles one DeviceAuth payload of `node`'s session
    /// `control_session` to the end: the answer is sent, or counted as
    /// undeliverable.
    pub(super) async fn handle(
        self: Arc<Self>,
        tables: CentreTables,
        node: NodeId,
        control_session: u64,
        payload: Vec<u8>,
        in_progress: InProgress,
    ) {
        let counters = &self.stats.dispatch;
        let Ok(req) = serde_json::from_slice::<DeviceAuthRequest>(&payload) else {
            counters.device_payload_errors.fetch_add(1, Relaxed);
            return;
        };
        let outcome = match ProxiedLogin::parse(&req) {
            Ok(login) => self.authenticate(login).await,
            Err(f) => Err(f),
        };
        drop(in_progress);
        let resp = match outcome {
            Ok((login, user)) => {
                match self.activate(
                    &tables,
                    node,
                    control_session,
                    req.request_id,
                    &login,
                    &user,
                ) {
                    Some(resp) => resp,
                    None => {
                        counters.device_auth_node_gone.fetch_add(1, Relaxed);
                        return;
                    }
                }
            }
            Err(f) => {
                if lock(&tables.routes).session_id(node) != Some(control_session) {
                    counters.device_auth_node_gone.fetch_add(1, Relaxed);
                    return;
                }
                refused(req.request_id, &f)
            }
        };
        {
            let mut c = lock(&self.stats.auth);
            if resp.success {
                c.granted += 1;
            } else if resp.response_packet.is_empty() {
                c.failed += 1;
            } else {
                c.rejected += 1;
            }
        }
        let send = response_message(&mut lock(&tables.sender.message_ids()), &resp);
        if tables.sender.send_control(node, &send).is_err() {
            counters.device_send_failures.fetch_add(1, Relaxed);
        }
    }

    /// The login up to a verified password and an enabled account.
    async fn authenticate(
        &self,
        login: ProxiedLogin,
    ) -> Result<(ProxiedLogin, UserRecord), AuthFailure> {
        let shared = &self.services.shared;
        let check_id = self.next_check.fetch_add(1, Relaxed);
        let start = self.services.directory.with(|dir| {
            start_auth(
                dir,
                &mut shared.login_guard(),
                &mut lock(&self.stats.auth),
                self.services.password_checks_in_flight,
                Instant::now(),
                login,
                check_id,
            )
        });
        let (pending, check, ticket) = match start {
            AuthStart::Failed(f) => return Err(f),
            AuthStart::Verified(login, user) => return Ok((login, user)),
            AuthStart::Check(p, c) => (p, Some(c), None),
            AuthStart::Queued(p, t) => (p, None, Some(t)),
        };
        let mut hold = GuardHold {
            shared,
            pending: &pending,
            ticket,
            checking: check.is_some(),
        };
        let check = match check {
            Some(c) => c,
            None => self.wait_in_line(&mut hold, check_id).await?,
        };
        let Some(answer) = self.answers.submit(&self.services.verifier, check) else {
            self.stats
                .dispatch
                .device_auth_pool_full
                .fetch_add(1, Relaxed);
            return Err(AuthFailure::refuse(
                &pending.login,
                RejectReason::ServerBusy,
            ));
        };
        let ok = match tokio::time::timeout(PROXIED_CHECK_TIMEOUT, answer).await {
            Ok(Ok(ok)) => ok,
            _ => {
                self.answers.forget(check_id);
                return Err(AuthFailure::without_reply(
                    crate::core::interconnect::device_auth_error::CHECK_TIMEOUT,
                ));
            }
        };
        hold.checking = false;
        drop(hold);
        self.services.directory.with(|dir| {
            finish_check(
                dir,
                &mut shared.login_guard(),
                &mut lock(&self.stats.auth),
                Instant::now(),
                pending,
                ok,
            )
        })
    }

    /// Waits in line for the global Argon2 budget (§3.2 fairness, as a
    /// shard does), polling every 10 ms; the check to run once its turn
    /// came.
    async fn wait_in_line(
        &self,
        hold: &mut GuardHold<'_>,
        check_id: u64,
    ) -> Result<PasswordCheck, AuthFailure> {
        let since = Instant::now();
        let Some(ticket) = hold.ticket else {
            return Err(AuthFailure::refuse(
                &hold.pending.login,
                RejectReason::ServerBusy,
            ));
        };
        loop {
            tokio::time::sleep(QUEUED_CHECK_POLL).await;
            let step = poll_queued(
                &mut self.services.shared.login_guard(),
                &mut lock(&self.stats.auth),
                Instant::now(),
                hold.pending,
                ticket,
                since,
                check_id,
            );
            match step {
                QueuedStep::Wait => {}
                QueuedStep::Check(c) => {
                    hold.ticket = None;
                    hold.checking = true;
                    return Ok(c);
                }
                QueuedStep::Failed(f) => {
                    hold.ticket = None;
                    return Err(f);
                }
            }
        }
    }

    /// Activates the device session of `login` for `node`'s session
    /// `control_session` (§3.8) and builds the response; `None` when that
    /// session is no longer live (nothing changed).
    fn activate(
        &self,
        tables: &CentreTables,
        node: NodeId,
        control_session: u64,
        request_id: u64,
        login: &ProxiedLogin,
        user: &UserRecord,
    ) -> Option<crate::codec::interconnect::messages::DeviceAuthResponse> {
        let now = Instant::now();
        let wall = unix_ms();
        let key = (user.id, login.header.ssid);
        let (rec, changed, domain) = self.services.directory.with(|dir| {
            let (rec, changed) =
                device_record_after_login(dir, key, user, &login.header, login.mac());
            let domain = wire_domain(dir, rec.group_id);
            (rec, changed, domain)
        });
        let sender = &tables.sender;
        let ids = sender.message_ids();
        let mut routes = lock(&tables.routes);
        if routes.session_id(node) != Some(control_session) {
            return None;
        }
        let mut devices = lock(&tables.devices);
        let control = ControlRef {
            node,
            control_session,
        };
        let identity = DeviceIdentity {
            owner_id: user.id,
            ssid: key.1,
        };
        let policy = &self.services.endpoints;
        if !policy.exempt(std::net::SocketAddr::new(login.source_ip, 0)) {
            let held = devices.owners.of_account_except(identity)
                + self.services.shared.endpoints_of_account_except(key);
            if held >= policy.max_per_account {
                self.stats
                    .node(node, |c| c.account_endpoint_limit_rejects += 1);
                return Some(refused(
                    request_id,
                    &AuthFailure::refuse(login, RejectReason::AccountEndpointLimit),
                ));
            }
        }
        let activated = devices
            .owners
            .activate(&mut lock(&ids), wall, control, identity);
        let activation = match activated {
            Ok(a) => a,
            Err(ActivateError::NodeFull) => {
                self.stats.node(node, |c| c.session_limit_rejects += 1);
                return Some(refused(
                    request_id,
                    &AuthFailure::refuse(login, RejectReason::ServerFull),
                ));
            }
        };
        let session = activation.session;
        let route = device_route(user, &rec, domain, &session);
        if let Some(prev) = activation.previous {
            revoke_dropped(
                tables,
                &self.stats,
                &mut routes,
                &mut devices,
                now,
                &prev,
                session_error::SESSION_MIGRATED,
            );
        }
        if activation.reused {
            // A route change that alters the domain or disables sending
            // ends the session's speaker lease (§3.8).
            let lease_ends = devices
                .routes
                .get(&session.session_id)
                .is_some_and(|old| old.domain_id != route.domain_id || route.disable_send);
            if lease_ends {
                devices.leases.release_session(node, session.session_id);
            }
        }
        let published = devices.put_route(node, route.clone()).is_ok()
            && matches!(routes.upsert(sender, now, node, route.clone()), Ok(true));
        if !published {
            if let Some(s) = devices.owners.remove(session.session_id) {
                devices.forget(&s);
            }
            routes.remove(sender, now, node, session.session_id);
            self.stats.node(node, |c| c.session_limit_rejects += 1);
            return Some(refused(
                request_id,
                &AuthFailure::refuse(login, RejectReason::ServerFull),
            ));
        }
        devices.entries.record(identity, device_id(key), control);
        drop(devices);
        drop(routes);
        self.services.direct.evict(key, &self.stats);
        if changed {
            self.services.directory.put_device(rec.clone());
            if !self
                .services
                .store
                .event(StoreEvent::DeviceUpsert(rec.clone()))
            {
                self.stats
                    .dispatch
                    .device_store_events_dropped
                    .fetch_add(1, Relaxed);
            }
        }
        let grant = device_grant(route, &rec, &session);
        Some(granted(request_id, grant, success_reply(login, user)))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn node(s: &str) -> NodeId {
        NodeId::new(s).unwrap()
    }

    #[test]
    fn the_gate_bounds_logins_in_progress_and_the_rate_per_node() {
        let mut gate = AuthGate::default();
        let (a, b) = (node("edge-a"), node("edge-b"));
        gate.node_up(a, 1);
        let wall = 1_700_000_000_000;
        let held: Vec<_> = (0..MAX_AUTHS_IN_FLIGHT_PER_NODE)
            .map(|_| gate.admit(a, 1, wall).unwrap())
            .collect();
        assert_eq!(gate.admit(a, 1, wall).err(), Some(GateDrop::InProgress));
        // Another node has its own bound (and starts without a node-up).
        assert!(gate.admit(b, 7, wall).is_ok());
        drop(held);
        assert!(
            gate.admit(a, 1, wall).is_ok(),
            "finished logins free their slots"
        );
        // 500 per wall-clock second, counting the refused ones.
        let mut gate = AuthGate::default();
        gate.node_up(a, 1);
        for _ in 0..DEVICE_AUTH_PPS_PER_NODE {
            drop(gate.admit(a, 1, wall).unwrap());
        }
        assert_eq!(gate.admit(a, 1, wall).err(), Some(GateDrop::Rate));
        assert!(gate.admit(a, 1, wall + 1000).is_ok(), "the next second");
        // A replaced session's requests are refused; its node-down leaves
        // the newer session's entry alone.
        gate.node_up(a, 2);
        assert_eq!(
            gate.admit(a, 1, wall + 1000).err(),
            Some(GateDrop::Replaced)
        );
        gate.node_down(a, 1);
        assert!(gate.admit(a, 2, wall + 1000).is_ok());
        gate.node_down(a, 2);
        assert!(!gate.nodes.contains_key(&a));
    }
}
