//! The centre's route projection sync with its edges over the control
//! plane (draarl-interconnect §3.6 steps 5–6, §3.7): one
//! [`CentreRouteSync`] per live node session, created empty at version 0
//! when the session opens, answered with a full snapshot on `node_ready`
//! and on a resync request, fed the edges' ACKs, resending unacknowledged
//! messages and closing a session whose sync ran out of attempts.
//!
//! ```text
//!  NodeUp ─▶ CentreRouteSync::new(epoch)      NodeReady / 0x15 ─▶ snapshot ─▶ send_control × n
//!  0x14 RouteAck ─▶ handle_ack                 timer ─▶ handle_timeout ─▶ resend | close
//!  route changes (device grants, §3.8) ─▶ upsert / remove ─▶ RouteDelta
//! ```
//!
//! The table holds one entry per live node session, so it is bounded by
//! the server's `max_nodes`.

use std::collections::HashMap;
use std::sync::{Mutex, MutexGuard, PoisonError};
use std::time::Instant;

use crate::codec::interconnect::messages::{DeviceRoute, RouteAck, RouteResyncRequest};
use crate::codec::interconnect::{EnvelopeHeader, NodeId, Subtype};
use crate::core::interconnect::{
    AckOutcome, CentreRouteSync, ControlSend, ProjectionError, RetryOutcome,
};

use super::centre::CentreSender;

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(PoisonError::into_inner)
}

/// Counters of the centre's route dispatch (the per-edge sync counters
/// live in each [`CentreRouteSync`]).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct CentreRouteStats {
    /// Snapshots sent (`node_ready` and resync requests).
    pub snapshots_sent: u64,
    /// Route messages that could not be queued (no session, full queue).
    pub send_failures: u64,
    /// ACKs accepted.
    pub acks_accepted: u64,
    /// ACKs refused or carrying an error.
    pub acks_refused: u64,
    /// Route payloads that did not decode.
    pub bad_payloads: u64,
    /// Sessions closed because an ACK never came (§3.7).
    pub ack_timeouts: u64,
    /// `node_ready` of a session whose node-up event was never seen (the
    /// event queue was full): the session's projection is started then.
    pub node_up_implied: u64,
}

impl CentreRouteStats {
    /// Every counter with its name, for metrics export.
    pub fn counters(&self) -> Vec<(&'static str, u64)> {
        vec![
            ("snapshots_sent", self.snapshots_sent),
            ("send_failures", self.send_failures),
            ("acks_accepted", self.acks_accepted),
            ("acks_refused", self.acks_refused),
            ("bad_payloads", self.bad_payloads),
            ("ack_timeouts", self.ack_timeouts),
            ("node_up_implied", self.node_up_implied),
        ]
    }
}

struct NodeRoutes {
    session_id: u64,
    sync: CentreRouteSync,
}

/// The centre's route sync of every live edge session.
#[derive(Debug)]
pub struct CentreRoutes {
    cluster_epoch: u64,
    nodes: HashMap<NodeId, NodeRoutes>,
    stats: CentreRouteStats,
}

impl std::fmt::Debug for NodeRoutes {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("NodeRoutes")
            .field("session_id", &self.session_id)
            .field("version", &self.sync.version())
            .finish()
    }
}

impl CentreRoutes {
    /// An empty table in `cluster_epoch` (non-zero; a new value per centre
    /// start, §6.3).
    pub fn new(cluster_epoch: u64) -> Self {
        Self {
            cluster_epoch: cluster_epoch.max(1),
            nodes: HashMap::new(),
            stats: CentreRouteStats::default(),
        }
    }

    /// The cluster epoch.
    pub fn cluster_epoch(&self) -> u64 {
        self.cluster_epoch
    }

    /// Current counters.
    pub fn stats(&self) -> CentreRouteStats {
        self.stats
    }

    /// The projection version `node` last had sent (its route table's
    /// version), if it has a live session.
    pub fn version(&self, node: NodeId) -> Option<u64> {
        self.nodes.get(&node).map(|n| n.sync.version())
    }

    /// The session id of `node`'s live session, if this table holds one.
    pub fn session_id(&self, node: NodeId) -> Option<u64> {
        self.nodes.get(&node).map(|n| n.session_id)
    }

    /// A node session opened: its previous projection is dropped and an
    /// empty one at version 0 is created (§3.6, centre side).
    pub fn node_up(&mut self, node: NodeId, session_id: u64) {
        self.nodes.insert(
            node,
            NodeRoutes {
                session_id,
                sync: CentreRouteSync::new(self.cluster_epoch),
            },
        );
    }

    /// A node session closed.
    pub fn node_down(&mut self, node: NodeId, session_id: u64) {
        if self
            .nodes
            .get(&node)
            .is_some_and(|n| n.session_id == session_id)
        {
            self.nodes.remove(&node);
        }
    }

    fn send_all(&mut self, sender: &CentreSender, node: NodeId, sends: &[ControlSend]) {
        for s in sends {
            if sender.send_control(node, s).is_err() {
                self.stats.send_failures += 1;
            }
        }
    }

    fn live(&mut self, node: NodeId, session_id: u64) -> Option<&mut CentreRouteSync> {
        self.nodes
            .get_mut(&node)
            .filter(|n| n.session_id == session_id)
            .map(|n| &mut n.sync)
    }

    /// `node_ready` of `node`'s session (§3.6 step 5): sends the full
    /// snapshot. Events arrive in order, so a `node_ready` of a session this
    /// table does not hold means its node-up event was dropped: the session
    /// starts here instead of leaving the edge waiting for a snapshot.
    pub fn node_ready(
        &mut self,
        sender: &CentreSender,
        now: Instant,
        node: NodeId,
        session_id: u64,
    ) {
        if self.live(node, session_id).is_none() {
            self.stats.node_up_implied += 1;
            self.node_up(node, session_id);
        }
        let Some(sync) = self.live(node, session_id) else {
            return;
        };
        let sends = sync.snapshot(&mut lock(&sender.message_ids()), now);
        self.stats.snapshots_sent += 1;
        self.send_all(sender, node, &sends);
    }

    /// A route envelope of `node`'s session (0x14 ACK, 0x15 resync);
    /// returns false for any other subtype.
    pub fn handle_envelope(
        &mut self,
        sender: &CentreSender,
        now: Instant,
        node: NodeId,
        session_id: u64,
        header: &EnvelopeHeader,
        payload: &[u8],
    ) -> bool {
        match header.subtype {
            Subtype::ROUTE_ACK => {
                let Ok(ack) = serde_json::from_slice::<RouteAck>(payload) else {
                    self.stats.bad_payloads += 1;
                    return true;
                };
                if let Some(sync) = self.live(node, session_id) {
                    match sync.handle_ack(&ack) {
                        AckOutcome::Accepted => self.stats.acks_accepted += 1,
                        AckOutcome::SyncError(_) | AckOutcome::Refused(_) => {
                            self.stats.acks_refused += 1;
                        }
                    }
                }
                true
            }
            Subtype::ROUTE_RESYNC_REQUEST => {
                let Ok(req) = serde_json::from_slice::<RouteResyncRequest>(payload) else {
                    self.stats.bad_payloads += 1;
                    return true;
                };
                if let Some(sync) = self.live(node, session_id) {
                    let sends = sync.handle_resync(&mut lock(&sender.message_ids()), now, &req);
                    self.stats.snapshots_sent += 1;
                    self.send_all(sender, node, &sends);
                }
                true
            }
            _ => false,
        }
    }

    /// Records `route` in `node`'s projection and sends its delta.
    ///
    /// # Errors
    /// [`ProjectionError`] (bad route, the edge's route limit); `Ok(false)`
    /// when `node` has no live session.
    pub fn upsert(
        &mut self,
        sender: &CentreSender,
        now: Instant,
        node: NodeId,
        route: DeviceRoute,
    ) -> Result<bool, ProjectionError> {
        let Some(n) = self.nodes.get_mut(&node) else {
            return Ok(false);
        };
        let delta = n
            .sync
            .upsert(&mut lock(&sender.message_ids()), now, route)?;
        self.send_all(sender, node, &[delta]);
        Ok(true)
    }

    /// Removes `session_id`'s route from `node`'s projection and sends the
    /// delta; false when there was none.
    pub fn remove(
        &mut self,
        sender: &CentreSender,
        now: Instant,
        node: NodeId,
        device_session: u64,
    ) -> bool {
        let Some(n) = self.nodes.get_mut(&node) else {
            return false;
        };
        let Some(delta) = n
            .sync
            .remove(&mut lock(&sender.message_ids()), now, device_session)
        else {
            return false;
        };
        self.send_all(sender, node, &[delta]);
        true
    }

    /// Resends what is due (§3.7: 1 s, five attempts) and closes the
    /// sessions whose messages ran out of attempts.
    pub fn handle_timeout(&mut self, sender: &CentreSender, now: Instant) {
        let mut resend = Vec::new();
        let mut close = Vec::new();
        for (node, n) in &mut self.nodes {
            if n.sync.poll_timeout().is_none_or(|at| at > now) {
                continue;
            }
            match n.sync.handle_timeout(now) {
                RetryOutcome::Resend(sends) => resend.push((*node, sends)),
                RetryOutcome::Close => close.push((*node, n.session_id)),
            }
        }
        for (node, sends) in resend {
            self.send_all(sender, node, &sends);
        }
        for (node, session_id) in close {
            self.stats.ack_timeouts += 1;
            self.nodes.remove(&node);
            sender.close_session(node, session_id);
        }
    }
}
