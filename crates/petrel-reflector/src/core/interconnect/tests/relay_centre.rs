//! The centre's checks of an upstream relay (draarl-interconnect §5.2, in
//! order, each with its counter), the domain rewrite, the lease rules of
//! Type 4/5 (§3.10), and centre-direct talkers competing for the lease.

use std::collections::HashMap;
use std::time::{Duration, Instant};

use crate::codec::interconnect::messages::DeviceRoute;
use crate::codec::interconnect::{InnerKind, NodeId, RelayFrame, RelayHeader};
use crate::codec::{encode, Header, PacketType};

use super::super::*;
use super::node;

struct Tables {
    owners: DeviceOwners,
    routes: HashMap<u64, DeviceRoute>,
    leases: LeaseTable,
    counters: RelayCounters,
    ids: MessageIds,
    control: ControlRef,
    session: OwnedSession,
    now: Instant,
}

/// alice-7 owned by edge-a's control session 5, route in group 2 of
/// domain 1.
fn tables() -> Tables {
    let mut owners = DeviceOwners::new(10, 10);
    let mut ids = MessageIds::new();
    let control = ControlRef {
        node: node("edge-a"),
        control_session: 5,
    };
    let session = owners
        .activate(
            &mut ids,
            0,
            control,
            DeviceIdentity {
                owner_id: 1,
                ssid: 7,
            },
        )
        .unwrap()
        .session;
    let route = DeviceRoute {
        session_id: session.session_id,
        username: "alice".into(),
        callsign: "BG5ABC".into(),
        ssid: 7,
        group_id: 2,
        domain_id: 1,
        session_epoch: session.session_epoch,
        ..DeviceRoute::default()
    };
    Tables {
        owners,
        routes: HashMap::from([(session.session_id, route)]),
        leases: LeaseTable::new(16),
        counters: RelayCounters::default(),
        ids,
        control,
        session,
        now: crate::test_clock::origin(),
    }
}

fn packet(t: PacketType, name: &str, ssid: u8, callsign: &str) -> Vec<u8> {
    let mut h = Header::new(t);
    h.set_username(name);
    h.ssid = ssid;
    h.set_callsign(callsign);
    h.reserved = 42;
    encode(&h, &[7; 40]).unwrap()
}

impl Tables {
    fn header(&self, lease: u64) -> RelayHeader {
        RelayHeader {
            session_id: self.session.session_id,
            session_epoch: self.session.session_epoch,
            // The edge's claim is ignored: the route's domain wins.
            domain_id: 99,
            required_projection_version: 3,
            speaker_lease_id: lease,
        }
    }

    fn payload(&self, header: RelayHeader, inner: &[u8]) -> Vec<u8> {
        RelayFrame { header, inner }.to_vec().unwrap()
    }

    fn check(&mut self, payload: &[u8]) -> Result<(InnerKind, u64, (i64, u8), i64), RelayReject> {
        check_upstream(
            &self.owners,
            &self.routes,
            &mut self.leases,
            &mut self.counters,
            self.now,
            self.control,
            payload,
        )
        .map(|r| (r.kind, r.header.domain_id, r.talker, r.group_id))
    }

    fn lease(&mut self) -> u64 {
        let owner = LeaseOwner {
            node: self.control.node,
            control_session: self.control.control_session,
            session_id: self.session.session_id,
            session_epoch: self.session.session_epoch,
        };
        match self
            .leases
            .claim(&mut self.ids, self.now, owner, 1, 0, true)
        {
            LeaseDecision::Grant { lease_id, .. } => lease_id,
            d => panic!("{d:?}"),
        }
    }
}

#[test]
fn text_and_leased_voice_pass_with_the_routes_domain() {
    let mut t = tables();
    let text = packet(PacketType::Text, "alice", 7, "");
    let p = t.payload(t.header(0), &text);
    assert_eq!(
        t.check(&p).unwrap(),
        (InnerKind::Text, 1, (1, 7), 2),
        "domain 99 from the edge became the route's 1"
    );
    let lease = t.lease();
    let voice = packet(PacketType::Voice, "alice", 7, "BG5ABC");
    let p = t.payload(t.header(lease), &voice);
    assert_eq!(t.check(&p).unwrap().0, InnerKind::Voice);
    assert_eq!(t.counters.accepted, 2);
    assert_eq!(t.leases.counters().voice_accepted, 1);
}

#[test]
fn every_reject_in_order_with_its_counter() {
    let mut t = tables();
    let voice = packet(PacketType::Voice, "alice", 7, "");
    // Decode: a zero domain is refused by the relay codec.
    let mut bad = t.payload(t.header(0), &voice);
    bad[16..24].fill(0);
    assert!(matches!(t.check(&bad), Err(RelayReject::Decode(_))));
    // Inner: a password in the inner packet.
    let mut pw = voice.clone();
    pw[40] = b'x';
    let p = t.payload(t.header(0), &pw);
    assert!(matches!(t.check(&p), Err(RelayReject::Inner(_))));
    // Not owned: another control session, or another epoch.
    let p = t.payload(t.header(0), &voice);
    t.control.control_session = 6;
    assert_eq!(t.check(&p), Err(RelayReject::NotOwner));
    t.control.control_session = 5;
    let mut h = t.header(0);
    h.session_epoch = 2;
    let other_epoch = t.payload(h, &voice);
    assert_eq!(t.check(&other_epoch), Err(RelayReject::NotOwner));
    // No route.
    let route = t.routes.remove(&t.session.session_id).unwrap();
    assert_eq!(t.check(&p), Err(RelayReject::NoRoute));
    // Sending disabled; route epoch differs; no domain.
    let mut r = route.clone();
    r.disable_send = true;
    t.routes.insert(r.session_id, r);
    assert_eq!(t.check(&p), Err(RelayReject::SendDisabled));
    let mut r = route.clone();
    r.session_epoch = 9;
    t.routes.insert(r.session_id, r);
    assert_eq!(t.check(&p), Err(RelayReject::EpochMismatch));
    let mut r = route.clone();
    r.domain_id = 0;
    t.routes.insert(r.session_id, r);
    assert_eq!(t.check(&p), Err(RelayReject::NoDomain));
    t.routes.insert(route.session_id, route);
    // Identity: username, SSID, callsign.
    for (name, ssid, callsign) in [("bob", 7, ""), ("alice", 8, ""), ("alice", 7, "BG5ABD")] {
        let p = t.payload(
            t.header(0),
            &packet(PacketType::Voice, name, ssid, callsign),
        );
        assert_eq!(
            t.check(&p),
            Err(RelayReject::IdentityMismatch),
            "{name} {ssid} {callsign}"
        );
    }
    // Voice without the lease; text with one.
    assert_eq!(t.check(&p), Err(RelayReject::Lease(LeaseReject::NoLease)));
    let lease = t.lease();
    let wrong = t.payload(t.header(lease + 1), &voice);
    assert_eq!(
        t.check(&wrong),
        Err(RelayReject::Lease(LeaseReject::WrongLeaseId))
    );
    let text = t.payload(t.header(lease), &packet(PacketType::Text, "alice", 7, ""));
    assert_eq!(t.check(&text), Err(RelayReject::TextLease));
    let c = t.counters;
    assert_eq!(
        (
            c.decode_drops,
            c.inner_drops,
            c.not_owner_drops,
            c.no_route_drops,
            c.send_disabled_drops,
            c.epoch_drops,
            c.no_domain_drops,
            c.identity_drops,
            c.lease_drops,
            c.text_lease_drops,
            c.accepted
        ),
        (1, 1, 2, 1, 1, 1, 1, 3, 2, 1, 0)
    );
}

#[test]
fn centre_talkers_compete_for_the_same_lease() {
    let mut t = tables();
    let edge_lease = t.lease();
    // An edge talker holds domain 1: a centre-direct talker is denied.
    assert_eq!(
        centre_talker_lease(&mut t.leases, &mut t.ids, t.now, (9, 1), 1),
        None
    );
    // Once the edge's lease is idle (> 900 ms), the centre talker gets it
    // and keeps it frame after frame; the edge's old lease is refused.
    t.now += Duration::from_millis(901);
    let centre = centre_talker_lease(&mut t.leases, &mut t.ids, t.now, (9, 1), 1).unwrap();
    assert_ne!(centre, edge_lease);
    t.now += Duration::from_millis(100);
    assert_eq!(
        centre_talker_lease(&mut t.leases, &mut t.ids, t.now, (9, 1), 1),
        Some(centre)
    );
    let voice = packet(PacketType::Voice, "alice", 7, "");
    let p = t.payload(t.header(edge_lease), &voice);
    assert_eq!(t.check(&p), Err(RelayReject::Lease(LeaseReject::NotOwner)));
    let h = centre_relay_header((9, 1), 1, centre);
    assert_eq!(h.session_id, CENTRE_SESSION_BIT | (9 * 256 + 1));
    assert_eq!(
        (h.session_epoch, h.domain_id, h.speaker_lease_id),
        (1, 1, centre)
    );
    assert_eq!(centre_lease_owner((9, 1)).node, NodeId::CENTRE);
}

#[test]
fn reserved_is_tagged_on_a_copy() {
    let inner = packet(PacketType::Voice, "alice", 7, "");
    let tagged = tag_reserved(&inner, 0x0102_0304);
    assert_eq!(&tagged[86..90], &[1, 2, 3, 4]);
    assert_eq!(&inner[86..90], &[0, 0, 0, 42]);
    assert_eq!(tagged[..86], inner[..86]);
    assert_eq!(tagged[90..], inner[90..]);
}
