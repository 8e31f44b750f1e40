//! The data plane's state: the node sessions it accepts Type 0 from and
//! sends Type 0 to, the accepted-frame queue and the outbound queue
//! (draarl-interconnect §4.3, §7). The pipeline itself is in
//! `acceptance.rs`, the sending side in `outbound.rs`.

use std::collections::{HashMap, VecDeque};
use std::net::SocketAddr;
use std::time::{Duration, Instant};

use thiserror::Error;

use crate::codec::interconnect::{Challenge, DataBind, EnvelopeError, NodeId, RelayError, Subtype};

use super::accepted::Accepted;
use super::address_binding::BindReject;
use super::counters::{BridgeCounters, ProtectionCounters, TrafficCounters};
use super::data_budget::DataLimits;
use super::node_session::{NodeSession, NodeSessionParams};
use super::replay_window::Replay;
use super::transmit::Outbound;

/// Which side of the link this data plane is (§1).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Role {
    /// The centre: many edge sessions, looked up by (source id, session
    /// id); a UDP source must be the bound data address; only
    /// RelayUpstream is taken from UDP.
    Centre,
    /// An edge: one session, the centre's (`center`); its source address is
    /// not checked; every subtype §3.5 defines is handed on.
    Edge,
}

/// Limits of the data plane (§7 `Interconnect.Resources`, defaults there).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct DataPlaneConfig {
    /// `MaxNodes`: node sessions kept (256); a new node past it evicts the
    /// least recently heard one.
    pub max_nodes: usize,
    /// Freshness: |now − SentAtMillis| ≤ this many ms (2000 on UDP).
    pub freshness_ms: u64,
    /// Per-node packet and byte rates.
    pub limits: DataLimits,
    /// `DataQueuePerNode` (512).
    pub queue_per_node: usize,
    /// `DataQueueGlobal` (4096).
    pub queue_global: usize,
    /// `DataMaxQueueAgeMS` (200 ms): a queued frame older than this is
    /// dropped when polled.
    pub max_queue_age: Duration,
    /// Outbound datagrams held until polled (4096); past it the oldest is
    /// evicted.
    pub outbound_capacity: usize,
}

impl Default for DataPlaneConfig {
    fn default() -> Self {
        Self {
            max_nodes: 256,
            freshness_ms: 2000,
            limits: DataLimits::default(),
            queue_per_node: 512,
            queue_global: 4096,
            max_queue_age: Duration::from_millis(200),
            outbound_capacity: 4096,
        }
    }
}

/// Why a DataBind message from the control plane was not answered.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Error)]
pub enum BindRequestError {
    /// No live session with that node id and session id.
    #[error("no such node session")]
    NoSession,
    /// Only `request` is taken over TLS at the centre.
    #[error("DataBind over TLS must be a request")]
    NotARequest,
    /// The edge does not issue challenges.
    #[error("only the centre issues DataBind challenges")]
    WrongRole,
}

/// The sans-IO Type 0 data plane of one node (centre or edge).
///
/// Fed `(now, wall clock, source, datagram)` through
/// [`DataPlane::handle_datagram`]; polled with
/// [`DataPlane::poll_accepted`] (frames that passed §4.3) and
/// [`DataPlane::poll_transmit`] (envelopes built by
/// [`DataPlane::relay_upstream`], [`DataPlane::relay_downstream`],
/// [`DataPlane::send_proof`]); [`DataPlane::handle_timeout`] at
/// [`DataPlane::poll_timeout`] drops stale queued frames. `now` is the
/// monotonic clock (queue age, challenge life); the wall clock in Unix ms
/// is passed separately (freshness, rate windows, SentAtMillis).
#[derive(Debug)]
pub struct DataPlane {
    pub(super) role: Role,
    pub(super) local_id: NodeId,
    pub(super) cfg: DataPlaneConfig,
    pub(super) sessions: HashMap<NodeId, NodeSession>,
    pub(super) queue: VecDeque<Accepted>,
    pub(super) outbound: VecDeque<Outbound>,
    pub(super) bridge: BridgeCounters,
}

impl DataPlane {
    /// The centre's data plane (local id `center`).
    pub fn centre(cfg: DataPlaneConfig) -> Self {
        Self::new(Role::Centre, NodeId::CENTRE, cfg)
    }

    /// An edge's data plane; `local_id` is the edge's node id (the source
    /// of what it sends).
    pub fn edge(local_id: NodeId, cfg: DataPlaneConfig) -> Self {
        Self::new(Role::Edge, local_id, cfg)
    }

    fn new(role: Role, local_id: NodeId, cfg: DataPlaneConfig) -> Self {
        Self {
            role,
            local_id,
            cfg,
            sessions: HashMap::new(),
            queue: VecDeque::new(),
            outbound: VecDeque::new(),
            bridge: BridgeCounters::default(),
        }
    }

    /// This data plane's role.
    pub fn role(&self) -> Role {
        self.role
    }

    /// Installs a node session after `node_auth_ok` (§3.2 step 5). A new
    /// session of the same node replaces the old one (replay window,
    /// budget, binding and counters start afresh, and its queued frames are
    /// dropped). At the edge the one session is the centre's, whatever
    /// `params.node_id` says, and its data address (`CenterUDP`) is to be
    /// set again with [`DataPlane::set_centre_address`]. Past `max_nodes`
    /// the least recently heard session is evicted.
    pub fn attach(&mut self, now: Instant, mut params: NodeSessionParams) {
        if self.role == Role::Edge {
            params.node_id = NodeId::CENTRE;
        }
        let id = params.node_id;
        if self.sessions.contains_key(&id) {
            self.purge_queue(id);
        } else if self.sessions.len() >= self.cfg.max_nodes.max(1) {
            let oldest = self
                .sessions
                .iter()
                .min_by_key(|(_, s)| s.last_heard)
                .map(|(k, _)| *k);
            if let Some(oldest) = oldest {
                self.detach_node(oldest);
                self.bridge.session_evictions += 1;
            }
        }
        self.sessions.insert(id, NodeSession::new(now, params));
    }

    /// Removes the session `session_id` of `node_id` (a stale callback of a
    /// replaced session does nothing, §6.2). Returns whether it was there.
    pub fn detach(&mut self, node_id: NodeId, session_id: u64) -> bool {
        let key = self.table_key(node_id);
        if self
            .sessions
            .get(&key)
            .is_some_and(|s| s.params.session_id == session_id)
        {
            self.detach_node(key);
            true
        } else {
            false
        }
    }

    fn detach_node(&mut self, id: NodeId) {
        self.purge_queue(id);
        self.sessions.remove(&id);
    }

    fn purge_queue(&mut self, id: NodeId) {
        let before = self.queue.len();
        self.queue.retain(|a| a.node_id != id);
        self.bridge.orphaned_drops += (before - self.queue.len()) as u64;
    }

    pub(super) fn table_key(&self, node_id: NodeId) -> NodeId {
        match self.role {
            Role::Centre => node_id,
            Role::Edge => NodeId::CENTRE,
        }
    }

    /// Centre: answers a DataBind message received over TLS (§4.5): a
    /// `request` records `fresh` (32 random bytes drawn by the runtime) as
    /// the session's one outstanding challenge, replacing any earlier one,
    /// and returns the `challenge` message to send back over TLS.
    ///
    /// # Errors
    /// [`BindRequestError`]; anything but a request also counts a
    /// `data_bind_rejects`.
    pub fn handle_bind_request(
        &mut self,
        now: Instant,
        node_id: NodeId,
        session_id: u64,
        message: &DataBind,
        fresh: Challenge,
    ) -> Result<DataBind, BindRequestError> {
        if self.role != Role::Centre {
            return Err(BindRequestError::WrongRole);
        }
        let s = self
            .sessions
            .get_mut(&node_id)
            .filter(|s| s.params.session_id == session_id)
            .ok_or(BindRequestError::NoSession)?;
        if *message != DataBind::Request {
            s.protection.data_bind_rejects += 1;
            return Err(BindRequestError::NotARequest);
        }
        s.binding.issue(now, fresh);
        Ok(DataBind::Challenge(fresh))
    }

    /// Edge: sets the centre's data address (`CenterUDP`), where upstream
    /// and proofs go; `None` sends upstream over TLS. Returns false when no
    /// centre session is attached.
    pub fn set_centre_address(&mut self, addr: Option<SocketAddr>) -> bool {
        match self.sessions.get_mut(&NodeId::CENTRE) {
            Some(s) if self.role == Role::Edge => {
                s.binding.set(addr);
                true
            }
            _ => false,
        }
    }

    /// The data address of `node_id` (bound by proof at the centre, set by
    /// configuration at the edge).
    pub fn data_address(&self, node_id: NodeId) -> Option<SocketAddr> {
        self.sessions
            .get(&self.table_key(node_id))
            .and_then(|s| s.binding.bound())
    }

    /// The session id of `node_id`'s live session.
    pub fn session_id(&self, node_id: NodeId) -> Option<u64> {
        self.sessions
            .get(&self.table_key(node_id))
            .map(|s| s.params.session_id)
    }

    /// The nodes with a live session.
    pub fn node_ids(&self) -> Vec<NodeId> {
        self.sessions.keys().copied().collect()
    }

    /// Live node sessions.
    pub fn node_count(&self) -> usize {
        self.sessions.len()
    }

    /// Frames waiting in the accepted queue.
    pub fn queued(&self) -> usize {
        self.queue.len()
    }

    /// `node_id`'s protection counters (§7).
    pub fn protection(&self, node_id: NodeId) -> Option<&ProtectionCounters> {
        self.sessions
            .get(&self.table_key(node_id))
            .map(|s| &s.protection)
    }

    /// `node_id`'s traffic counters.
    pub fn traffic(&self, node_id: NodeId) -> Option<&TrafficCounters> {
        self.sessions
            .get(&self.table_key(node_id))
            .map(|s| &s.traffic)
    }

    /// The bridge counters (§7).
    pub fn bridge(&self) -> &BridgeCounters {
        &self.bridge
    }

    /// Pops the next accepted frame, dropping (and counting as
    /// `data_stale_drops`) any that waited longer than `max_queue_age`.
    pub fn poll_accepted(&mut self, now: Instant) -> Option<Accepted> {
        while let Some(a) = self.queue.pop_front() {
            let stale = now.saturating_duration_since(a.received_at) > self.cfg.max_queue_age;
            if let Some(s) = self.sessions.get_mut(&a.node_id) {
                s.protection.queued_data = s.protection.queued_data.saturating_sub(1);
                if stale {
                    s.protection.data_stale_drops += 1;
                    s.traffic.drops += 1;
                    continue;
                }
            }
            return Some(a);
        }
        None
    }

    /// Drops queued frames that became stale by `now` and challenges older
    /// than 10 s.
    pub fn handle_timeout(&mut self, now: Instant) {
        while let Some(front) = self.queue.front() {
            if now.saturating_duration_since(front.received_at) <= self.cfg.max_queue_age {
                break;
            }
            if let Some(a) = self.queue.pop_front() {
                if let Some(s) = self.sessions.get_mut(&a.node_id) {
                    s.protection.queued_data = s.protection.queued_data.saturating_sub(1);
                    s.protection.data_stale_drops += 1;
                    s.traffic.drops += 1;
                }
            }
        }
        for s in self.sessions.values_mut() {
            s.binding.expire(now);
        }
    }

    /// When the oldest queued frame turns stale; `None` with an empty queue.
    pub fn poll_timeout(&self) -> Option<Instant> {
        self.queue
            .front()
            .map(|a| a.received_at + self.cfg.max_queue_age + Duration::from_nanos(1))
    }

    /// Pops the next envelope to send.
    pub fn poll_transmit(&mut self) -> Option<Outbound> {
        self.outbound.pop_front()
    }

    pub(super) fn push_outbound(&mut self, o: Outbound) {
        if self.outbound.len() >= self.cfg.outbound_capacity.max(1) {
            self.outbound.pop_front();
            self.bridge.outbound_evictions += 1;
        }
        self.outbound.push_back(o);
    }
}

/// Why an authenticated-looking datagram was refused (§4.3). Steps 2–6
/// leave it "not consumed" (it falls through to the device path, which
/// rejects Type 0); from step 7 on it is consumed and dropped.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Rejection {
    /// Step 1: a Type 0 envelope cut short (dropped, not left to the
    /// device path).
    Truncated,
    /// Step 2: no live session for (source id, NodeSessionID).
    Unauthenticated,
    /// Step 3: decode or tag failure (hop count > 2 included).
    Invalid(EnvelopeError),
    /// Step 4: session id, key epoch or source id differ.
    IdentityMismatch,
    /// Step 5: outside ±`freshness_ms`.
    Expired,
    /// Step 6: replay window.
    Replayed(Replay),
    /// Step 7: over the hard packet or byte rate.
    OverBudget,
    /// Step 8: a DataBind that did not bind.
    BindRejected(BindReject),
    /// Step 9: not from the bound data address.
    UnboundAddress,
    /// Step 10: the node's queue is full.
    QueueFull,
    /// Step 10: the global queue is full.
    GlobalQueueFull,
    /// Step 11: a subtype the UDP path does not take.
    UnexpectedSubtype(Subtype),
    /// A relay payload that does not decode (§4.6).
    InvalidRelay(RelayError),
}

impl Rejection {
    /// Whether the datagram was consumed by the Type 0 path (from step 7
    /// on) rather than left for the device path.
    pub fn is_consumed(&self) -> bool {
        !matches!(
            self,
            Rejection::Unauthenticated
                | Rejection::Invalid(_)
                | Rejection::IdentityMismatch
                | Rejection::Expired
                | Rejection::Replayed(_)
        )
    }
}

/// What [`DataPlane::handle_datagram`] did with a datagram.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Verdict {
    /// Not shaped like Type 0: hand it to the device path.
    NotType0,
    /// Accepted and queued; [`DataPlane::poll_accepted`] yields it.
    Queued,
    /// A DataBind proof bound this data address (step 8).
    Bound(SocketAddr),
    /// Refused; see [`Rejection::is_consumed`].
    Rejected(Rejection),
}
