//! The sending side of the data plane (draarl-interconnect §4.6, §5):
//! MessageIDs, RelayUpstream from an edge, one RelayDownstream per target
//! edge from the centre, and the edge's DataBind proof.
//!
//! ```text
//!  edge:   device frame ─relay_upstream─▶ 0x30 {PV = own version, epoch 0, hop 0} ─▶ centre
//!  centre: accepted 0x30 ─relay_downstream(targets)─┬─▶ 0x31 {PV = target's version, hop+1} ─▶ edge b
//!                      never the source edge,        ├─▶ 0x31 ─▶ edge c
//!                      never `center`, one per edge  └─▶ …     (UDP if bound, else the TLS path)
//! ```

use thiserror::Error;

use crate::codec::interconnect::{
    seal, Challenge, Channel, DataBind, EnvelopeHeader, Flags, NodeId, RelayError, RelayFrame,
    RelayHeader, SealError, Subtype, MAX_HOP_COUNT,
};

use super::data_plane::{DataPlane, Role};
use super::node_session::NodeSession;
use super::transmit::{Outbound, Path};

/// The MessageID counter (§3.4): one per process, never 0, shared by every
/// envelope the process sends (UDP and TLS; at the centre also device
/// session ids and snapshot ids). An edge counts from 1 as §3.4 says; a
/// centre starts where the previous process cannot have reached
/// ([`MessageIds::after_start`]), because a restarted centre that counted
/// from 1 again would mint device session ids still held by the edges'
/// unconfirmed sessions, and §3.9 fails a reconfirmation whose grant reuses
/// an active id.
#[derive(Debug, Clone)]
pub struct MessageIds {
    next: u64,
}

impl Default for MessageIds {
    fn default() -> Self {
        Self::new()
    }
}

impl MessageIds {
    /// A counter whose first id is 1.
    pub fn new() -> Self {
        Self { next: 1 }
    }

    /// A counter for a process started at `start_unix_ms`: its first id is
    /// `start_unix_ms · 2²⁰`, so a later start begins above every id an
    /// earlier one issued unless that one minted more than 2²⁰ ids per
    /// millisecond of its life (the wall clock until the year 2527 fits).
    pub fn after_start(start_unix_ms: u64) -> Self {
        Self {
            next: start_unix_ms.saturating_mul(1 << 20).max(1),
        }
    }

    /// The next id (1, 2, …; skips 0 should it ever wrap).
    pub fn next_id(&mut self) -> u64 {
        let id = self.next;
        self.next = self.next.wrapping_add(1).max(1);
        id
    }
}

/// A target edge of a downstream relay, with its projection version at
/// send time (§4.6).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct DownstreamTarget {
    /// The edge.
    pub node_id: NodeId,
    /// Its current projection version (RequiredProjectionVersion and
    /// envelope PV of its copy).
    pub projection_version: u64,
}

/// What [`DataPlane::relay_downstream`] did with the target list.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct FanoutReport {
    /// Downstream envelopes queued (one per distinct target edge).
    pub sent: usize,
    /// Targets skipped because they are the source edge (§5.4).
    pub skipped_source: usize,
    /// Targets skipped because they are `center` (§5.2).
    pub skipped_centre: usize,
    /// Repeated targets skipped (one copy per edge).
    pub skipped_duplicate: usize,
    /// Targets without a live node session.
    pub skipped_no_session: usize,
}

/// Why a relay or proof could not be built.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
pub enum BuildError {
    /// Called on the wrong side (upstream and proofs are the edge's,
    /// downstream the centre's).
    #[error("not this role's message")]
    WrongRole,
    /// No centre session is attached (edge).
    #[error("no session with the centre")]
    NoSession,
    /// A proof needs the centre's UDP address (`CenterUDP`).
    #[error("no centre data address configured")]
    NoDataAddress,
    /// Relaying would exceed hop count 2 (§5.4).
    #[error("hop count {0} would exceed 2")]
    HopLimit(u8),
    /// The relay payload is invalid.
    #[error(transparent)]
    Relay(#[from] RelayError),
    /// The envelope could not be sealed.
    #[error(transparent)]
    Seal(#[from] SealError),
}

fn path_of(s: &NodeSession) -> (Path, Channel) {
    match s.binding.bound() {
        Some(addr) => (Path::Udp(addr), Channel::Udp),
        None => (Path::Control, Channel::Control),
    }
}

impl DataPlane {
    fn envelope_for(
        &self,
        s: &NodeSession,
        ids: &mut MessageIds,
        wall_ms: i64,
        subtype: Subtype,
    ) -> EnvelopeHeader {
        EnvelopeHeader {
            source: self.local_id,
            subtype,
            flags: Flags::default(),
            cluster_epoch: 0,
            projection_version: 0,
            node_session_id: s.params.session_id,
            message_id: ids.next_id(),
            sent_at_ms: wall_ms,
            hop_count: 0,
            key_epoch: s.params.key_epoch,
        }
    }

    fn queue_to(&mut self, node_id: NodeId, path: Path, datagram: Vec<u8>) {
        let Some(s) = self.sessions.get_mut(&node_id) else {
            return;
        };
        s.traffic.out_packets += 1;
        s.traffic.out_bytes += datagram.len() as u64;
        let session_id = s.params.session_id;
        let node_id = if self.role == Role::Edge {
            NodeId::CENTRE
        } else {
            node_id
        };
        self.push_outbound(Outbound {
            node_id,
            session_id,
            path,
            datagram,
        });
    }

    /// Edge: queues the one RelayUpstream of a device frame (§5.1) to the
    /// centre: `relay`'s RequiredProjectionVersion and the envelope PV are
    /// set to `projection_version` (the edge's own), ClusterEpoch 0, hop 0.
    /// Goes by UDP when the centre's address is set, else by the TLS path.
    ///
    /// # Errors
    /// [`BuildError`]: wrong role, no centre session, invalid relay.
    pub fn relay_upstream(
        &mut self,
        ids: &mut MessageIds,
        wall_ms: i64,
        projection_version: u64,
        relay: &RelayFrame<'_>,
    ) -> Result<(), BuildError> {
        if self.role != Role::Edge {
            return Err(BuildError::WrongRole);
        }
        let s = self
            .sessions
            .get(&NodeId::CENTRE)
            .ok_or(BuildError::NoSession)?;
        let frame = RelayFrame {
            header: RelayHeader {
                required_projection_version: projection_version,
                ..relay.header
            },
            inner: relay.inner,
        };
        let payload = frame.to_vec()?;
        let mut h = self.envelope_for(s, ids, wall_ms, Subtype::RELAY_UPSTREAM);
        h.projection_version = projection_version;
        let (path, channel) = path_of(s);
        let datagram = seal(&h, &payload, &s.params.key, channel)?;
        self.queue_to(NodeId::CENTRE, path, datagram);
        Ok(())
    }

    /// Centre: queues one RelayDownstream per distinct target edge (§5.2
    /// step 4), never to `origin` (the source edge, or `center` for
    /// centre-originated traffic) nor to `center`. `relay.header.domain_id`
    /// must already be the route's domain. Each copy carries the target's
    /// projection version (relay and envelope), `cluster_epoch`, hop
    /// `origin_hop + 1`, the target's session id, and goes by UDP when the
    /// target's address is bound, else by the TLS path.
    ///
    /// # Errors
    /// [`BuildError`]: wrong role, hop count over 2, invalid relay.
    #[allow(clippy::too_many_arguments)]
    pub fn relay_downstream(
        &mut self,
        ids: &mut MessageIds,
        wall_ms: i64,
        cluster_epoch: u64,
        origin: NodeId,
        origin_hop: u8,
        relay: &RelayFrame<'_>,
        targets: impl IntoIterator<Item = DownstreamTarget>,
    ) -> Result<FanoutReport, BuildError> {
        if self.role != Role::Centre {
            return Err(BuildError::WrongRole);
        }
        let hop = origin_hop.saturating_add(1);
        if hop > MAX_HOP_COUNT {
            return Err(BuildError::HopLimit(hop));
        }
        // Validates the relay once, before any copy is queued.
        relay.to_vec()?;
        let mut report = FanoutReport::default();
        let mut done: Vec<NodeId> = Vec::new();
        for t in targets {
            if t.node_id == origin {
                report.skipped_source += 1;
                continue;
            }
            if t.node_id.is_centre() {
                report.skipped_centre += 1;
                continue;
            }
            if done.contains(&t.node_id) {
                report.skipped_duplicate += 1;
                continue;
            }
            let Some(s) = self.sessions.get(&t.node_id) else {
                report.skipped_no_session += 1;
                continue;
            };
            let frame = RelayFrame {
                header: RelayHeader {
                    required_projection_version: t.projection_version,
                    ..relay.header
                },
                inner: relay.inner,
            };
            let payload = frame.to_vec()?;
            let mut h = self.envelope_for(s, ids, wall_ms, Subtype::RELAY_DOWNSTREAM);
            h.cluster_epoch = cluster_epoch;
            h.projection_version = t.projection_version;
            h.hop_count = hop;
            let (path, channel) = path_of(s);
            let datagram = seal(&h, &payload, &s.params.key, channel)?;
            self.queue_to(t.node_id, path, datagram);
            done.push(t.node_id);
            report.sent += 1;
        }
        Ok(report)
    }

    /// Edge: queues the DataBind proof for `challenge` (received over TLS)
    /// to the centre's UDP address (§4.5, §3.6 step 3).
    ///
    /// # Errors
    /// [`BuildError`]: wrong role, no centre session, no centre address.
    pub fn send_proof(
        &mut self,
        ids: &mut MessageIds,
        wall_ms: i64,
        challenge: Challenge,
    ) -> Result<(), BuildError> {
        if self.role != Role::Edge {
            return Err(BuildError::WrongRole);
        }
        let s = self
            .sessions
            .get(&NodeId::CENTRE)
            .ok_or(BuildError::NoSession)?;
        let addr = s.binding.bound().ok_or(BuildError::NoDataAddress)?;
        let h = self.envelope_for(s, ids, wall_ms, Subtype::DATA_BIND);
        let payload = DataBind::Proof(Some(challenge)).to_vec();
        let datagram = seal(&h, &payload, &s.params.key, Channel::Udp)?;
        self.queue_to(NodeId::CENTRE, Path::Udp(addr), datagram);
        Ok(())
    }
}
