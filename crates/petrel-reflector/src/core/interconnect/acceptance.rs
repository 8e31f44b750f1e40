//! The acceptance pipeline (draarl-interconnect §4.3), in the spec's order:
//!
//! ```text
//!  datagram ─▶ 1 shape ─no─▶ NotType0 (device path) │ cut short ─▶ truncated_type0 (dropped)
//!              2 session (source id, NodeSessionID) ─none─▶ unauthenticated_type0 ┐
//!              3 decode + HMAC ─bad─▶ invalid_auth_tags │ hop_count_drops │       │ not consumed
//!                oversize_drops │ malformed_envelopes                             │
//!              4 identity (session, key epoch, source) ─▶ identity_rejects         │ (invalid_type0
//!                ── count in ──                                                    │  for 3–6)
//!              5 |now − SentAt| ≤ 2 s ─▶ expired_drops                              │
//!              6 replay window ─▶ replay_drops                                     ┘
//!              7 data budget ─▶ data_hard_limit_drops (+ data_soft_limit_events)   ┐
//!              8 0x06 proof ─▶ Bound | data_bind_rejects                           │ consumed
//!              9 source = bound address (centre) ─▶ unbound_address_drops           │
//!             11 subtype (centre: 0x30 only) ─▶ unexpected_subtype_drops           │
//!                relay decode ─▶ invalid_relay_drops                               │
//!             10 node queue 512 / global 4096 ─▶ data_queue_drops / global_queue_drops
//!                ─▶ Queued ─poll_accepted─▶ (stale > 200 ms ─▶ data_stale_drops)
//! ```
//!
//! At the edge (one session, the centre's) step 2 only asks whether a
//! session is attached, the source id is checked in step 4 (it must be
//! `center`), step 9 does not apply, and every subtype §3.5 defines is
//! queued for the dispatcher. The subtype test runs before the queue so a
//! frame the worker would drop never takes a queue slot.

use std::net::SocketAddr;
use std::time::Instant;

use crate::codec::interconnect::{
    is_expired, is_truncated_envelope, open, peek, Channel, DataBind, NodeId, RelayFrame, Subtype,
};

use super::accepted::Accepted;
use super::address_binding::BindReject;
use super::data_plane::{DataPlane, Rejection, Role, Verdict};

impl DataPlane {
    /// Runs `datagram`, read from `src` at the monotonic `now` and the wall
    /// clock `wall_ms` (Unix ms), through the acceptance pipeline.
    pub fn handle_datagram(
        &mut self,
        now: Instant,
        wall_ms: i64,
        src: SocketAddr,
        datagram: &[u8],
    ) -> Verdict {
        let Some(shape) = peek(datagram) else {
            if is_truncated_envelope(datagram) {
                self.bridge.truncated_type0 += 1;
                return Verdict::Rejected(Rejection::Truncated);
            }
            return Verdict::NotType0;
        };
        let role = self.role;
        let key = match (role, shape.source) {
            (Role::Centre, Some(source)) => source,
            (Role::Centre, None) => return self.unauthenticated(),
            (Role::Edge, _) => NodeId::CENTRE,
        };
        let cfg = self.cfg;
        let Some(s) = self.sessions.get_mut(&key) else {
            return self.unauthenticated();
        };
        if role == Role::Centre && s.params.session_id != shape.node_session_id {
            return self.unauthenticated();
        }
        let env = match open(datagram, &s.params.key, Channel::Udp) {
            Ok(env) => env,
            Err(e) => {
                s.protection.count_open_error(&e);
                self.bridge.invalid_type0 += 1;
                return Verdict::Rejected(Rejection::Invalid(e));
            }
        };
        let h = env.header;
        if h.node_session_id != s.params.session_id
            || h.key_epoch != s.params.key_epoch
            || h.source != s.params.node_id
        {
            s.protection.identity_rejects += 1;
            self.bridge.invalid_type0 += 1;
            return Verdict::Rejected(Rejection::IdentityMismatch);
        }
        s.last_heard = now;
        s.traffic.in_packets += 1;
        s.traffic.in_bytes += datagram.len() as u64;
        if is_expired(h.sent_at_ms, wall_ms, cfg.freshness_ms) {
            s.protection.expired_drops += 1;
            s.traffic.drops += 1;
            self.bridge.invalid_type0 += 1;
            return Verdict::Rejected(Rejection::Expired);
        }
        if let Err(r) = s.replay.check_and_record(h.message_id) {
            s.protection.replay_drops += 1;
            s.traffic.drops += 1;
            self.bridge.invalid_type0 += 1;
            return Verdict::Rejected(Rejection::Replayed(r));
        }
        let charge = s.budget.charge(&cfg.limits, wall_ms, datagram.len());
        if charge.soft_event {
            s.protection.data_soft_limit_events += 1;
        }
        if !charge.allowed {
            s.protection.data_hard_limit_drops += 1;
            s.traffic.drops += 1;
            return Verdict::Rejected(Rejection::OverBudget);
        }
        if h.subtype == Subtype::DATA_BIND && role == Role::Centre {
            let result = match DataBind::parse(env.payload) {
                Ok(DataBind::Proof(proof)) => s.binding.prove(now, proof, src),
                _ => Err(BindReject::NotAProof),
            };
            return match result {
                Ok(addr) => Verdict::Bound(addr),
                Err(r) => {
                    s.protection.data_bind_rejects += 1;
                    s.traffic.drops += 1;
                    Verdict::Rejected(Rejection::BindRejected(r))
                }
            };
        }
        if role == Role::Centre && !s.binding.is_bound_to(&src) {
            s.protection.unbound_address_drops += 1;
            s.traffic.drops += 1;
            return Verdict::Rejected(Rejection::UnboundAddress);
        }
        let wanted = match role {
            Role::Centre => h.subtype == Subtype::RELAY_UPSTREAM,
            Role::Edge => {
                h.subtype.is_known()
                    && h.subtype != Subtype::NODE_ENROLL
                    && h.subtype != Subtype::NODE_AUTH
            }
        };
        if !wanted {
            s.protection.unexpected_subtype_drops += 1;
            s.traffic.drops += 1;
            return Verdict::Rejected(Rejection::UnexpectedSubtype(h.subtype));
        }
        if h.subtype.is_relay() {
            if let Err(e) = RelayFrame::parse(env.payload) {
                s.protection.invalid_relay_drops += 1;
                s.traffic.drops += 1;
                return Verdict::Rejected(Rejection::InvalidRelay(e));
            }
        }
        if s.protection.queued_data >= cfg.queue_per_node as u64 {
            s.protection.data_queue_drops += 1;
            s.traffic.drops += 1;
            return Verdict::Rejected(Rejection::QueueFull);
        }
        if self.queue.len() >= cfg.queue_global {
            s.traffic.drops += 1;
            self.bridge.global_queue_drops += 1;
            return Verdict::Rejected(Rejection::GlobalQueueFull);
        }
        s.protection.queued_data += 1;
        self.queue.push_back(Accepted {
            node_id: key,
            header: h,
            payload: env.payload.to_vec(),
            received_at: now,
        });
        Verdict::Queued
    }

    fn unauthenticated(&mut self) -> Verdict {
        self.bridge.unauthenticated_type0 += 1;
        Verdict::Rejected(Rejection::Unauthenticated)
    }
}
