//! Type 0 envelopes carried over the control connection
//! (draarl-interconnect §3.4): the receiver's checks in order — envelope
//! decode and HMAC (control size limit), identity, unknown subtype (drop,
//! or close when CRITICAL), freshness ±30 s, and the replay window the
//! session **shares** with its UDP path (§4.4, §12). A replayed ID is
//! dropped, except the reliable messages the receiver must re-acknowledge
//! (centre: DeviceConfig; edge: RouteDelta, RouteSnapshotCommit,
//! DeviceConfig), which are delivered marked duplicate.
//!
//! ```text
//!  type0 frame ─base64─▶ open(key, Control) ─▶ identity ─▶ subtype known? ─no─▶ drop | Close (CRITICAL)
//!                                                          ─▶ ±30 s ─▶ replay window (shared with UDP)
//!                                                          ─▶ Deliver{duplicate}
//! ```
//!
//! The centre's per-node control budget and DeviceAuth budget (§7) are not
//! applied here.

use crate::codec::interconnect::{
    is_expired, open, Channel, EnvelopeHeader, Flags, NodeId, Subtype,
};

use super::data_plane::{DataPlane, Rejection, Role};
use super::replay_window::Replay;

/// Freshness limit of envelopes over the control connection (§3.4).
pub const CONTROL_FRESHNESS_MS: u64 = 30_000;

/// What [`DataPlane::handle_control_envelope`] decided.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ControlVerdict {
    /// Hand it to the control dispatcher.
    Deliver {
        /// The envelope fields.
        header: EnvelopeHeader,
        /// The payload (JSON for every control subtype).
        payload: Vec<u8>,
        /// A replayed reliable message: re-acknowledge it, do not apply it
        /// again.
        duplicate: bool,
    },
    /// Dropped.
    Drop(Rejection),
    /// An unknown subtype flagged CRITICAL: send `node_protocol_error`
    /// "unsupported critical Type 0 subtype" and close.
    Close,
}

fn redelivered_on_replay(role: Role, subtype: Subtype) -> bool {
    match role {
        Role::Centre => subtype == Subtype::DEVICE_CONFIG,
        Role::Edge => matches!(
            subtype,
            Subtype::ROUTE_DELTA | Subtype::ROUTE_SNAPSHOT_COMMIT | Subtype::DEVICE_CONFIG
        ),
    }
}

impl DataPlane {
    /// Checks an envelope (already base64-decoded from a `type0` frame)
    /// received on the control connection of `node_id`'s session
    /// `session_id`, at the wall clock `wall_ms` (Unix ms). Failures count
    /// in the session's protection counters like their UDP counterparts.
    pub fn handle_control_envelope(
        &mut self,
        wall_ms: i64,
        node_id: NodeId,
        session_id: u64,
        envelope: &[u8],
    ) -> ControlVerdict {
        let key = self.table_key(node_id);
        let role = self.role;
        let Some(s) = self.sessions.get_mut(&key) else {
            return ControlVerdict::Drop(Rejection::Unauthenticated);
        };
        if s.params.session_id != session_id {
            return ControlVerdict::Drop(Rejection::Unauthenticated);
        }
        let env = match open(envelope, &s.params.key, Channel::Control) {
            Ok(env) => env,
            Err(e) => {
                s.protection.count_open_error(&e);
                return ControlVerdict::Drop(Rejection::Invalid(e));
            }
        };
        let h = env.header;
        let expected_source = match role {
            Role::Centre => s.params.node_id,
            Role::Edge => NodeId::CENTRE,
        };
        if h.node_session_id != session_id
            || h.key_epoch != s.params.key_epoch
            || h.source != expected_source
        {
            s.protection.identity_rejects += 1;
            return ControlVerdict::Drop(Rejection::IdentityMismatch);
        }
        if !h.subtype.is_known() {
            s.protection.unexpected_subtype_drops += 1;
            return if h.flags.contains(Flags::CRITICAL) {
                ControlVerdict::Close
            } else {
                ControlVerdict::Drop(Rejection::UnexpectedSubtype(h.subtype))
            };
        }
        if is_expired(h.sent_at_ms, wall_ms, CONTROL_FRESHNESS_MS) {
            s.protection.expired_drops += 1;
            return ControlVerdict::Drop(Rejection::Expired);
        }
        let duplicate = match s.replay.check_and_record(h.message_id) {
            Ok(()) => false,
            Err(Replay::Duplicate) if redelivered_on_replay(role, h.subtype) => true,
            Err(r) => {
                s.protection.replay_drops += 1;
                return ControlVerdict::Drop(Rejection::Replayed(r));
            }
        };
        let payload = env.payload.to_vec();
        ControlVerdict::Deliver {
            header: h,
            payload,
            duplicate,
        }
    }
}
