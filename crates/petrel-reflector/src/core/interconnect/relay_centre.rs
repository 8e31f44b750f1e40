//! The centre's checks of an edge's RelayUpstream and the relays it
//! makes (draarl-interconnect §4.6, §5.2, §5.4, §3.10), sans-IO.
//!
//! ```text
//!  accepted 0x30 (§4.3) ─▶ check_upstream, in §5.2 order:
//!     relay decode ─▶ inner: DraA, length = L, Type 4/5, password zero
//!     ─▶ this control session owns (session, epoch) ─▶ route exists ─▶ sending allowed
//!     ─▶ route epoch = relay epoch ─▶ route domain ≠ 0 ─▶ inner identity = route (SSID, username, callsign 0 | exact)
//!     ─▶ domain := the route's (never the edge's) ─▶ Type 5: LeaseTable::voice accepts │ Type 4: lease 0
//!  ─▶ UpstreamRelay {talker, group, domain, kind} ─▶ record once, local delivery, one downstream per target edge
//!  centre-direct frame ─▶ centre_talker_lease (voice: the domain's lease as `center`) ─▶ centre_relay_header
//! ```
//!
//! Downstream copies carry Reserved 0: it holds the source group only
//! for targets that negotiated feature bit 8 (§4.6), which this centre
//! does not offer ([`crate::codec::interconnect::Offer::MINIMUM`]).
//! Centre-local session-aware receivers get the copy tagged with the
//! route's group ([`tag_reserved`]).

use std::collections::HashMap;
use std::time::Instant;

use crate::codec::interconnect::messages::DeviceRoute;
use crate::codec::interconnect::{
    check_inner, inner_matches_route, InnerError, InnerKind, NodeId, RelayError, RelayFrame,
    RelayHeader, RouteIdentity,
};
use crate::codec::{set_reserved, Header};
use crate::model::DeviceKey;

use super::device_auth_centre::device_id;
use super::device_owners::{ControlRef, DeviceOwners};
use super::outbound::MessageIds;
use super::speaker_lease_centre::{LeaseDecision, LeaseOwner, LeaseReject, LeaseTable};

/// Set in the SessionID of a relay that a centre-direct device originated
/// (§5.2, source `center`): such a device has no edge device session, so
/// its relay carries this bit with its [`device_id`] and epoch 1; edge
/// session ids (the centre's MessageID counter) never reach it.
pub const CENTRE_SESSION_BIT: u64 = 1 << 63;

/// Why an upstream relay was dropped (§5.2).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum RelayReject {
    /// The relay payload does not decode.
    Decode(RelayError),
    /// The inner packet breaks a §4.6 rule.
    Inner(InnerError),
    /// The sending control session does not own (session, epoch).
    NotOwner,
    /// The session has no route.
    NoRoute,
    /// The route disables sending.
    SendDisabled,
    /// The route's epoch differs from the relay's.
    EpochMismatch,
    /// The route names no domain (a device in no group).
    NoDomain,
    /// The inner identity is not the route's.
    IdentityMismatch,
    /// Type 5 without the current speaker lease.
    Lease(LeaseReject),
    /// Type 4 with a non-zero lease id.
    TextLease,
}

/// Counters of upstream relays, one per outcome.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct RelayCounters {
    /// Accepted.
    pub accepted: u64,
    /// [`RelayReject::Decode`].
    pub decode_drops: u64,
    /// [`RelayReject::Inner`].
    pub inner_drops: u64,
    /// [`RelayReject::NotOwner`].
    pub not_owner_drops: u64,
    /// [`RelayReject::NoRoute`].
    pub no_route_drops: u64,
    /// [`RelayReject::SendDisabled`].
    pub send_disabled_drops: u64,
    /// [`RelayReject::EpochMismatch`].
    pub epoch_drops: u64,
    /// [`RelayReject::NoDomain`].
    pub no_domain_drops: u64,
    /// [`RelayReject::IdentityMismatch`].
    pub identity_drops: u64,
    /// [`RelayReject::Lease`].
    pub lease_drops: u64,
    /// [`RelayReject::TextLease`].
    pub text_lease_drops: u64,
}

impl RelayCounters {
    fn count(&mut self, r: &Result<UpstreamRelay<'_>, RelayReject>) {
        let c = match r {
            Ok(_) => &mut self.accepted,
            Err(RelayReject::Decode(_)) => &mut self.decode_drops,
            Err(RelayReject::Inner(_)) => &mut self.inner_drops,
            Err(RelayReject::NotOwner) => &mut self.not_owner_drops,
            Err(RelayReject::NoRoute) => &mut self.no_route_drops,
            Err(RelayReject::SendDisabled) => &mut self.send_disabled_drops,
            Err(RelayReject::EpochMismatch) => &mut self.epoch_drops,
            Err(RelayReject::NoDomain) => &mut self.no_domain_drops,
            Err(RelayReject::IdentityMismatch) => &mut self.identity_drops,
            Err(RelayReject::Lease(_)) => &mut self.lease_drops,
            Err(RelayReject::TextLease) => &mut self.text_lease_drops,
        };
        *c += 1;
    }

    /// Every counter with its name, for metrics export.
    pub fn counters(&self) -> Vec<(&'static str, u64)> {
        vec![
            ("upstream_accepted", self.accepted),
            ("upstream_decode_drops", self.decode_drops),
            ("upstream_inner_drops", self.inner_drops),
            ("upstream_not_owner_drops", self.not_owner_drops),
            ("upstream_no_route_drops", self.no_route_drops),
            ("upstream_send_disabled_drops", self.send_disabled_drops),
            ("upstream_epoch_drops", self.epoch_drops),
            ("upstream_no_domain_drops", self.no_domain_drops),
            ("upstream_identity_drops", self.identity_drops),
            ("upstream_lease_drops", self.lease_drops),
            ("upstream_text_lease_drops", self.text_lease_drops),
        ]
    }
}

/// An upstream relay that passed every check.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct UpstreamRelay<'a> {
    /// The relay header, DomainID set to the route's.
    pub header: RelayHeader,
    /// The inner packet as the edge sent it.
    pub inner: &'a [u8],
    /// Text or voice.
    pub kind: InnerKind,
    /// The talker: owner account and SSID.
    pub talker: DeviceKey,
    /// The route's group (the recording's and Reserved's).
    pub group_id: i64,
}

/// Checks an upstream relay `payload` received from `control` at `now`
/// against the centre's device sessions (§5.2, in order; see the module
/// docs), counting the outcome; a Type 5 frame's accepted lease is
/// refreshed.
///
/// # Errors
/// The first [`RelayReject`] found; nothing changes but the counters.
pub fn check_upstream<'a>(
    owners: &DeviceOwners,
    routes: &HashMap<u64, DeviceRoute>,
    leases: &mut LeaseTable,
    counters: &mut RelayCounters,
    now: Instant,
    control: ControlRef,
    payload: &'a [u8],
) -> Result<UpstreamRelay<'a>, RelayReject> {
    let r = check(owners, routes, leases, now, control, payload);
    counters.count(&r);
    r
}

fn check<'a>(
    owners: &DeviceOwners,
    routes: &HashMap<u64, DeviceRoute>,
    leases: &mut LeaseTable,
    now: Instant,
    control: ControlRef,
    payload: &'a [u8],
) -> Result<UpstreamRelay<'a>, RelayReject> {
    let frame = RelayFrame::parse(payload).map_err(RelayReject::Decode)?;
    let kind = check_inner(frame.inner).map_err(RelayReject::Inner)?;
    let h = frame.header;
    if !owners.owns(control, h.session_id, h.session_epoch) {
        return Err(RelayReject::NotOwner);
    }
    let owner = owners
        .get(h.session_id)
        .ok_or(RelayReject::NotOwner)?
        .identity;
    let route = routes.get(&h.session_id).ok_or(RelayReject::NoRoute)?;
    if route.disable_send {
        return Err(RelayReject::SendDisabled);
    }
    if route.session_epoch != h.session_epoch {
        return Err(RelayReject::EpochMismatch);
    }
    if route.domain_id == 0 {
        return Err(RelayReject::NoDomain);
    }
    let identity = RouteIdentity {
        username: &route.username,
        ssid: route.ssid,
        callsign: &route.callsign,
    };
    if !inner_matches_route(frame.inner, &identity) {
        return Err(RelayReject::IdentityMismatch);
    }
    let header = RelayHeader {
        domain_id: route.domain_id,
        ..h
    };
    match kind {
        InnerKind::Voice => {
            let lease_owner = LeaseOwner {
                node: control.node,
                control_session: control.control_session,
                session_id: h.session_id,
                session_epoch: h.session_epoch,
            };
            leases
                .voice(now, lease_owner, route.domain_id, h.speaker_lease_id)
                .map_err(RelayReject::Lease)?;
        }
        InnerKind::Text => {
            if !LeaseTable::text_lease_ok(h.speaker_lease_id) {
                return Err(RelayReject::TextLease);
            }
        }
    }
    Ok(UpstreamRelay {
        header,
        inner: frame.inner,
        kind,
        talker: (owner.owner_id, owner.ssid),
        group_id: route.group_id,
    })
}

/// A copy of `inner` whose Reserved field holds `reserved` (0 for
/// physical receivers, the source group for session-aware ones).
pub fn tag_reserved(inner: &[u8], reserved: u32) -> Vec<u8> {
    let mut copy = inner.to_vec();
    set_reserved(&mut copy, reserved);
    copy
}

/// The lease owner of the centre-direct talker `talker` (node `center`,
/// §3.10).
pub fn centre_lease_owner(talker: DeviceKey) -> LeaseOwner {
    LeaseOwner {
        node: NodeId::CENTRE,
        control_session: 0,
        session_id: CENTRE_SESSION_BIT | device_id(talker).unsigned_abs(),
        session_epoch: 1,
    }
}

/// Claims (or keeps) the speaker lease of `domain` for the centre-direct
/// talker `talker` at `now` (§3.10: centre-local devices compete in the
/// same table); the lease id, or `None` while another owner holds it.
pub fn centre_talker_lease(
    leases: &mut LeaseTable,
    ids: &mut MessageIds,
    now: Instant,
    talker: DeviceKey,
    domain: u64,
) -> Option<u64> {
    match leases.claim(ids, now, centre_lease_owner(talker), domain, 0, true) {
        LeaseDecision::Grant { lease_id, .. } => Some(lease_id),
        LeaseDecision::Deny { .. } => None,
    }
}

/// The relay header of a frame a centre-direct talker sent into `domain`
/// (§5.2 last paragraph): its [`centre_lease_owner`] session and epoch,
/// `lease_id` for voice (0 for text). The required projection version is
/// set per target when the downstream copies are made.
pub fn centre_relay_header(talker: DeviceKey, domain: u64, lease_id: u64) -> RelayHeader {
    let owner = centre_lease_owner(talker);
    RelayHeader {
        session_id: owner.session_id,
        session_epoch: owner.session_epoch,
        domain_id: domain,
        required_projection_version: 0,
        speaker_lease_id: lease_id,
    }
}

/// The talker of a forwarded packet header: the username (as the
/// directory resolves it with `user_id`) and SSID.
pub fn talker_of(h: &Header, user_id: impl FnOnce(&str) -> Option<i64>) -> Option<DeviceKey> {
    let id = user_id(h.username_str()?)?;
    Some((id, h.ssid))
}
