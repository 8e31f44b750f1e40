//! The edge's device side (§3.8, §3.10, §4.7, §5.1, §5.3, §6.1): the
//! auth proxy, local heartbeat answers, local fan-out with sender
//! exclusion, one upstream per frame, the speaker lease before both, the
//! grace period's local floor, fail closed, downstream through the wait
//! rule, and removals with their reports.

use std::net::SocketAddr;
use std::time::{Duration, Instant};

use crate::codec::interconnect::messages::{
    DeviceAuthRequest, DeviceAuthResponse, DeviceGrant, DeviceRoute, DeviceSessionReport,
    DeviceSessionRevoke, RouteOperation, SpeakerLease,
};
use crate::codec::interconnect::{Flags, NodeId, RelayFrame, Subtype};
use crate::codec::{decode, encode, Header, PacketType, HEADER_LEN};
use crate::model::{Frame, FrameKind};

use super::*;

const DOMAIN: u64 = 7;
const GRACE: Duration = Duration::from_secs(15);

pub(super) fn ms(n: u64) -> Duration {
    Duration::from_millis(n)
}

/// A packet of `kind` from `user`/`ssid` with password `secret` and DATA
/// `data`.
fn packet(kind: PacketType, user: &str, ssid: u8, data: &[u8]) -> Vec<u8> {
    let mut h = Header::new(kind);
    h.set_username(user);
    h.set_password("secret1");
    h.ssid = ssid;
    h.dev_model = 2;
    encode(&h, data).unwrap()
}

fn heartbeat(user: &str, ssid: u8) -> Vec<u8> {
    packet(PacketType::Heartbeat, user, ssid, &[0; 41])
}

pub(super) fn route(session_id: u64, user: &str, ssid: u8, domain: u64) -> DeviceRoute {
    DeviceRoute {
        session_id,
        device_id: i64::try_from(session_id).unwrap(),
        username: user.to_owned(),
        callsign: format!("BG{session_id}"),
        ssid,
        dev_model: 2,
        group_id: i64::try_from(domain).unwrap(),
        domain_id: domain,
        session_epoch: 1,
        ..DeviceRoute::default()
    }
}

pub(super) struct Edge {
    pub(super) d: EdgeDevices,
    pub(super) link: EdgeLink,
    pub(super) ids: MessageIds,
    pub(super) t0: Instant,
    out: Vec<EdgeAction>,
}

impl Edge {
    /// A ready edge with an empty projection at (epoch 5, version 0).
    pub(super) fn ready() -> Self {
        let t0 = crate::test_clock::origin();
        let mut e = Edge {
            d: EdgeDevices::new(unpaced()),
            link: EdgeLink::new(GRACE, 64),
            ids: MessageIds::new(),
            t0,
            out: Vec::new(),
        };
        e.link.attached();
        e.d.link_changed();
        e.link.ready();
        e.d.ready(&mut e.ids, t0, WALL, &Projection::new(5));
        e
    }

    pub(super) fn actions(&mut self) -> Vec<EdgeAction> {
        self.d.take_actions(&mut self.out);
        std::mem::take(&mut self.out)
    }

    fn device(&mut self, at: Duration, src: SocketAddr, datagram: &[u8]) -> Vec<EdgeAction> {
        self.d.handle_device(
            &mut self.link,
            &mut self.ids,
            self.t0 + at,
            WALL + i64::try_from(at.as_millis()).unwrap(),
            src,
            datagram,
        );
        self.actions()
    }

    fn control<T: serde::Serialize>(
        &mut self,
        at: Duration,
        subtype: Subtype,
        msg: &T,
    ) -> Vec<EdgeAction> {
        let payload = serde_json::to_vec(msg).unwrap();
        let mut h = header("center", 1, 1, subtype);
        h.flags = Flags::CONTROL;
        assert!(self.d.handle_control(
            &mut self.ids,
            self.t0 + at,
            WALL + i64::try_from(at.as_millis()).unwrap(),
            &h,
            &payload
        ));
        self.actions()
    }

    /// Logs `user`/`ssid` in from `src` as session `session_id` in
    /// `domain`; returns the reply datagram.
    pub(super) fn login(
        &mut self,
        src: SocketAddr,
        user: &str,
        ssid: u8,
        session_id: u64,
        domain: u64,
    ) {
        let acts = self.device(ms(0), src, &heartbeat(user, ssid));
        let [EdgeAction::Control(req)] = acts.as_slice() else {
            panic!("{acts:?}")
        };
        assert_eq!(req.subtype, Subtype::DEVICE_AUTH);
        let r: DeviceAuthRequest = req.decode().unwrap();
        assert_eq!(r.source_ip, src.ip().to_string());
        assert_eq!(r.packet, heartbeat(user, ssid));
        let resp = DeviceAuthResponse {
            request_id: r.request_id,
            success: true,
            grant: Some(DeviceGrant {
                route: route(session_id, user, ssid, domain),
                owner_id: 40,
                dmrid: 4_600_001,
                expires_at_ms: WALL + 120_000,
                ..DeviceGrant::default()
            }),
            response_packet: b"centre-reply".to_vec(),
            ..DeviceAuthResponse::default()
        };
        let acts = self.control(ms(0), Subtype::DEVICE_AUTH, &resp);
        let [EdgeAction::Reply(t)] = acts.as_slice() else {
            panic!("{acts:?}")
        };
        assert_eq!((t.dst, t.payload.as_slice()), (src, &b"centre-reply"[..]));
    }
}

/// The default edge, less the pacing of logins toward the centre: the
/// tests log many devices in at one instant.
fn unpaced() -> EdgeDevicesConfig {
    let mut cfg = EdgeDevicesConfig::default();
    cfg.sessions.auth_budget.centre_burst = u32::MAX;
    cfg
}

pub(super) fn a(n: u8) -> SocketAddr {
    SocketAddr::from(([127, 0, 0, n], 40_000))
}

fn fanout(acts: &[EdgeAction]) -> Vec<&Frame> {
    acts.iter()
        .filter_map(|x| match x {
            EdgeAction::Fanout(f) => Some(f),
            _ => None,
        })
        .collect()
}

fn upstream(acts: &[EdgeAction]) -> Vec<&Upstream> {
    acts.iter()
        .filter_map(|x| match x {
            EdgeAction::Upstream(u) => Some(u),
            _ => None,
        })
        .collect()
}

fn targets(f: &Frame) -> Vec<SocketAddr> {
    let mut t: Vec<SocketAddr> = f
        .snapshot
        .partitions
        .concat()
        .into_iter()
        .filter(|x| *x != f.exclude)
        .collect();
    t.sort();
    t
}

#[test]
fn heartbeats_are_proxied_then_answered_locally() {
    let mut e = Edge::ready();
    e.login(a(1), "alice", 7, 11, DOMAIN);
    assert_eq!(e.d.sessions().len(), 1);
    assert_eq!(e.d.counters().installed, 1);
    // The next heartbeat is answered here with the grant's callsign, and
    // the password is not echoed.
    let acts = e.device(ms(2000), a(1), &heartbeat("alice", 7));
    let [EdgeAction::Reply(t)] = acts.as_slice() else {
        panic!("{acts:?}")
    };
    let reply = decode(&t.payload).unwrap();
    assert_eq!(reply.header.callsign_str(), Some("BG11"));
    assert!(reply.header.password_bytes().is_empty());
    assert_eq!(reply.data, &[0; 41][..]);
    // The same identity from another address needs a new authentication.
    let acts = e.device(ms(2100), a(2), &heartbeat("alice", 7));
    assert!(
        matches!(acts.as_slice(), [EdgeAction::Control(c)] if c.subtype == Subtype::DEVICE_AUTH)
    );
    // Voice from an unknown identity is dropped, not proxied.
    let acts = e.device(
        ms(2200),
        a(3),
        &packet(PacketType::Voice, "bob", 1, &[1; 20]),
    );
    assert!(acts.is_empty());
    assert_eq!(e.d.counters().unknown_device_drops, 1);
}

#[test]
fn a_refusal_forwards_the_centre_reply_within_the_request_size() {
    let mut e = Edge::ready();
    let hb = heartbeat("mallory", 1);
    let acts = e.device(ms(0), a(9), &hb);
    let [EdgeAction::Control(req)] = acts.as_slice() else {
        panic!()
    };
    let r: DeviceAuthRequest = req.decode().unwrap();
    let refuse = |id, reply: Vec<u8>| DeviceAuthResponse {
        request_id: id,
        success: false,
        error: "invalid_password".into(),
        response_packet: reply,
        ..DeviceAuthResponse::default()
    };
    let acts = e.control(
        ms(1),
        Subtype::DEVICE_AUTH,
        &refuse(r.request_id, vec![3; 100]),
    );
    assert!(
        matches!(acts.as_slice(), [EdgeAction::Reply(t)] if t.dst == a(9) && t.payload == vec![3; 100])
    );
    // A reply larger than the request is withheld.
    let acts = e.device(ms(10), a(9), &hb);
    let [EdgeAction::Control(req)] = acts.as_slice() else {
        panic!()
    };
    let r: DeviceAuthRequest = req.decode().unwrap();
    let acts = e.control(
        ms(11),
        Subtype::DEVICE_AUTH,
        &refuse(r.request_id, vec![3; hb.len() + 1]),
    );
    assert!(acts.is_empty());
    assert_eq!(e.d.counters().replies_withheld, 1);
    assert_eq!(e.d.sessions().len(), 0);
}

#[test]
fn text_fans_out_locally_without_the_sender_and_goes_upstream_once() {
    let mut e = Edge::ready();
    e.login(a(1), "alice", 7, 11, DOMAIN);
    e.login(a(2), "bob", 1, 12, DOMAIN);
    e.login(a(3), "carol", 1, 13, DOMAIN + 1);
    let text = packet(PacketType::Text, "alice", 7, b"hello");
    let acts = e.device(ms(100), a(1), &text);
    let frames = fanout(&acts);
    assert_eq!(frames.len(), 1);
    assert_eq!(frames[0].kind, FrameKind::Text);
    assert_eq!(frames[0].exclude, a(1));
    assert_eq!(targets(frames[0]), vec![a(2)]);
    // The forwarding rewrite: password cleared, identity from the grant.
    let fwd = decode(&frames[0].packet).unwrap();
    assert!(fwd.header.password_bytes().is_empty());
    assert_eq!(fwd.header.callsign_str(), Some("BG11"));
    assert_eq!(fwd.header.dmrid, 4_600_001);
    assert_eq!(fwd.data, b"hello");
    let ups = upstream(&acts);
    assert_eq!(ups.len(), 1);
    let h = ups[0].header;
    assert_eq!(
        (
            h.session_id,
            h.session_epoch,
            h.domain_id,
            h.speaker_lease_id
        ),
        (11, 1, DOMAIN, 0)
    );
    assert_eq!(&ups[0].inner[..], &frames[0].packet[..]);
}

#[test]
fn voice_waits_for_the_lease_then_goes_out_with_its_id() {
    let mut e = Edge::ready();
    e.login(a(1), "alice", 7, 11, DOMAIN);
    e.login(a(2), "bob", 1, 12, DOMAIN);
    let voice = |n: u8| packet(PacketType::Voice, "alice", 7, &[n; 40]);
    // The first frame starts a claim and is buffered; so is the second.
    let acts = e.device(ms(100), a(1), &voice(1));
    let [EdgeAction::Claim { domain, send }] = acts.as_slice() else {
        panic!("{acts:?}")
    };
    assert_eq!(*domain, DOMAIN);
    let claim: SpeakerLease = send.decode().unwrap();
    assert_eq!((claim.session_id, claim.domain_id), (11, DOMAIN));
    assert!(e.device(ms(110), a(1), &voice(2)).is_empty());
    // Bob on the same edge cannot talk over the claim.
    let bob = packet(PacketType::Voice, "bob", 1, &[9; 40]);
    assert!(e.device(ms(120), a(2), &bob).is_empty());
    // The grant releases both frames, in order, each fanned out and
    // relayed with the lease id.
    let grant = SpeakerLease {
        action: "grant".into(),
        request_id: claim.request_id,
        session_id: 11,
        session_epoch: 1,
        domain_id: DOMAIN,
        lease_id: 77,
        ttl_ms: 1200,
        ..SpeakerLease::default()
    };
    let acts = e.control(ms(150), Subtype::SPEAKER_LEASE, &grant);
    let frames = fanout(&acts);
    assert_eq!(frames.len(), 2);
    assert_eq!(decode(&frames[0].packet).unwrap().data, &[1; 40][..]);
    assert_eq!(decode(&frames[1].packet).unwrap().data, &[2; 40][..]);
    assert_eq!(targets(frames[0]), vec![a(2)]);
    let ups = upstream(&acts);
    assert_eq!(ups.len(), 2);
    assert!(ups.iter().all(|u| u.header.speaker_lease_id == 77));
    // Under the lease, frames go out at once.
    let acts = e.device(ms(200), a(1), &voice(3));
    assert_eq!((fanout(&acts).len(), upstream(&acts).len()), (1, 1));
    assert!(e.device(ms(210), a(2), &bob).is_empty());
    assert_eq!(e.d.lease_counters().other_talker_drops, 2);
}

#[test]
fn a_denied_claim_blocks_the_domain() {
    let mut e = Edge::ready();
    e.login(a(1), "alice", 7, 11, DOMAIN);
    let voice = packet(PacketType::Voice, "alice", 7, &[1; 40]);
    let acts = e.device(ms(100), a(1), &voice);
    let [EdgeAction::Claim { send, .. }] = acts.as_slice() else {
        panic!()
    };
    let claim: SpeakerLease = send.decode().unwrap();
    let deny = SpeakerLease {
        action: "deny".into(),
        request_id: claim.request_id,
        session_id: 11,
        domain_id: DOMAIN,
        retry_after_ms: 500,
        ..SpeakerLease::default()
    };
    assert!(e.control(ms(120), Subtype::SPEAKER_LEASE, &deny).is_empty());
    assert!(e.device(ms(300), a(1), &voice).is_empty());
    assert_eq!(e.d.lease_counters().blocked_drops, 1);
    assert_eq!(e.d.lease_counters().buffer_drops, 1);
}

#[test]
fn in_the_grace_period_voice_stays_local_under_the_local_floor() {
    let mut e = Edge::ready();
    e.login(a(1), "alice", 7, 11, DOMAIN);
    e.login(a(2), "bob", 1, 12, DOMAIN);
    e.link.detached(e.t0 + ms(50));
    e.d.link_changed();
    let alice = packet(PacketType::Voice, "alice", 7, &[1; 40]);
    let bob = packet(PacketType::Voice, "bob", 1, &[2; 40]);
    let acts = e.device(ms(100), a(1), &alice);
    assert_eq!(fanout(&acts).len(), 1);
    assert!(upstream(&acts).is_empty());
    assert!(!acts.iter().any(|x| matches!(x, EdgeAction::Claim { .. })));
    // Bob is held off by the local floor until Alice is 900 ms quiet.
    assert!(e.device(ms(500), a(2), &bob).is_empty());
    assert_eq!(fanout(&e.device(ms(1500), a(2), &bob)).len(), 1);
    // Heartbeats are still answered; new devices are not authenticated.
    let acts = e.device(ms(1600), a(1), &heartbeat("alice", 7));
    assert!(matches!(acts.as_slice(), [EdgeAction::Reply(_)]));
    assert!(e.device(ms(1700), a(4), &heartbeat("dave", 1)).is_empty());
    assert_eq!(e.d.counters().auth_unavailable_drops, 1);
    // After the grace period the link fails closed: nothing goes out.
    assert!(e.link.handle_timeout(e.t0 + ms(50) + GRACE));
    assert!(e.device(ms(16_000), a(1), &alice).is_empty());
    e.d.expire_all(&mut e.ids, WALL, removal_reason::CONTROL_UNAVAILABLE);
    let reports: Vec<DeviceSessionReport> = e
        .actions()
        .iter()
        .map(|x| match x {
            EdgeAction::Control(c) => c.decode().unwrap(),
            other => panic!("{other:?}"),
        })
        .collect();
    assert_eq!(reports.len(), 2);
    assert!(reports
        .iter()
        .all(|r| !r.online && r.reason == "control_unavailable"));
    assert_eq!(e.d.receiver_domains(), 0);
}

#[test]
fn an_attached_link_that_is_not_ready_fails_closed() {
    let mut e = Edge::ready();
    e.login(a(1), "alice", 7, 11, DOMAIN);
    e.link.attached();
    e.d.link_changed();
    assert!(e.device(ms(10), a(1), &heartbeat("alice", 7)).is_empty());
    assert!(e
        .device(ms(20), a(1), &packet(PacketType::Text, "alice", 7, b"x"))
        .is_empty());
    assert_eq!(e.link.counters().fail_closed_drops, 2);
    assert_eq!(e.d.sessions().len(), 1);
}

/// A RelayDownstream accepted at `at` for `domain` needing `version`.
fn downstream(e: &Edge, at: Duration, domain: u64, version: u64, reserved: u32) -> Accepted {
    let mut inner = packet(PacketType::Voice, "zed", 3, &[5; 30]);
    inner[38..48].fill(0);
    crate::codec::set_reserved(&mut inner, reserved);
    let payload = RelayFrame {
        header: RelayHeader {
            session_id: 900,
            session_epoch: 1,
            domain_id: domain,
            required_projection_version: version,
            speaker_lease_id: 3,
        },
        inner: &inner,
    }
    .to_vec()
    .unwrap();
    let mut h = header("center", 1, 50, Subtype::RELAY_DOWNSTREAM);
    h.cluster_epoch = 5;
    h.projection_version = version;
    h.hop_count = 1;
    Accepted {
        node_id: NodeId::CENTRE,
        header: h,
        payload,
        received_at: e.t0 + at,
    }
}

#[test]
fn downstream_waits_for_its_projection_and_reaches_every_local_receiver() {
    let mut e = Edge::ready();
    e.login(a(1), "alice", 7, 11, DOMAIN);
    e.login(a(2), "bob", 1, 12, DOMAIN);
    // Version 0 is current: delivered at once to both, nobody excluded,
    // Reserved cleared.
    e.d.handle_downstream(e.t0 + ms(10), downstream(&e, ms(10), DOMAIN, 0, 42));
    let acts = e.actions();
    let frames = fanout(&acts);
    assert_eq!(frames.len(), 1);
    assert_eq!(targets(frames[0]), vec![a(1), a(2)]);
    assert_eq!(decode(&frames[0].packet).unwrap().header.reserved, 0);
    assert!(upstream(&acts).is_empty());
    // Version 1 waits for the delta that brings it.
    e.d.handle_downstream(e.t0 + ms(20), downstream(&e, ms(20), DOMAIN, 1, 0));
    assert!(e.actions().is_empty());
    assert_eq!(e.d.parked(), 1);
    let op = RouteOperation::Upsert {
        route: Box::new(route(14, "dave", 1, DOMAIN)),
    };
    e.d.apply_delta(&mut e.ids, e.t0 + ms(30), WALL, &[op], 5, 1);
    let acts = e.actions();
    assert_eq!(fanout(&acts).len(), 1);
    // One that waits too long is dropped.
    e.d.handle_downstream(e.t0 + ms(40), downstream(&e, ms(40), DOMAIN, 2, 0));
    e.d.handle_timeout(&mut e.ids, e.t0 + ms(300), WALL);
    assert!(fanout(&e.actions()).is_empty());
    assert_eq!(e.d.wait_counters().stale_drops, 1);
    // Not ready: dropped.
    e.d.not_ready();
    e.d.handle_downstream(e.t0 + ms(310), downstream(&e, ms(310), DOMAIN, 1, 0));
    assert!(e.actions().is_empty());
    assert_eq!(e.d.wait_counters().not_ready_drops, 1);
}

#[test]
fn route_changes_move_receivers_and_end_sessions() {
    let mut e = Edge::ready();
    e.login(a(1), "alice", 7, 11, DOMAIN);
    e.login(a(2), "bob", 1, 12, DOMAIN);
    let text = packet(PacketType::Text, "alice", 7, b"hi");
    // Bob stops receiving (disable_recv): alice's text reaches nobody.
    let mut bob = route(12, "bob", 1, DOMAIN);
    bob.disable_recv = true;
    let op = RouteOperation::Upsert {
        route: Box::new(bob),
    };
    e.d.apply_delta(&mut e.ids, e.t0, WALL, &[op], 5, 1);
    let acts = e.device(ms(10), a(1), &text);
    assert!(fanout(&acts).is_empty());
    assert_eq!(upstream(&acts).len(), 1);
    assert_eq!(e.d.counters().no_receiver_frames, 1);
    // Alice is send-banned: dropped.
    let mut alice = route(11, "alice", 7, DOMAIN);
    alice.disable_send = true;
    let op = RouteOperation::Upsert {
        route: Box::new(alice),
    };
    e.d.apply_delta(&mut e.ids, e.t0, WALL, &[op], 5, 2);
    assert!(e.device(ms(20), a(1), &text).is_empty());
    assert_eq!(e.d.counters().send_ban_drops, 1);
    // Removing bob's route ends his session, reported.
    let op = RouteOperation::Remove { session_id: 12 };
    e.d.apply_delta(&mut e.ids, e.t0, WALL, &[op], 5, 3);
    let acts = e.actions();
    let [EdgeAction::Control(c)] = acts.as_slice() else {
        panic!("{acts:?}")
    };
    let r: DeviceSessionReport = c.decode().unwrap();
    assert_eq!((r.session_id, r.reason.as_str()), (12, "route_removed"));
    // A revoke of alice (same epoch) ends her session, unreported.
    let revoke = DeviceSessionRevoke {
        session_id: 11,
        session_epoch: 1,
        reason: "session_migrated".into(),
        ..DeviceSessionRevoke::default()
    };
    assert!(e
        .control(ms(30), Subtype::DEVICE_SESSION_REVOKE, &revoke)
        .is_empty());
    assert_eq!(e.d.sessions().len(), 0);
    assert_eq!(e.d.counters().removed, 2);
}

#[test]
fn a_snapshot_drops_sessions_it_does_not_list() {
    let mut e = Edge::ready();
    e.login(a(1), "alice", 7, 11, DOMAIN);
    e.login(a(2), "bob", 1, 12, DOMAIN);
    let mut p = Projection::new(6);
    p.devices.insert(11, route(11, "alice", 7, DOMAIN + 1));
    e.d.ready(&mut e.ids, e.t0, WALL, &p);
    let acts = e.actions();
    assert_eq!(acts.len(), 1);
    assert_eq!(e.d.sessions().len(), 1);
    assert_eq!(e.d.projection(), (6, 0));
    // Alice now receives in domain 8 only.
    e.d.handle_downstream(e.t0 + ms(5), {
        let mut d = downstream(&e, ms(5), DOMAIN + 1, 0, 0);
        d.header.cluster_epoch = 6;
        d
    });
    let acts = e.actions();
    assert_eq!(targets(fanout(&acts)[0]), vec![a(1)]);
}

#[test]
fn silent_sessions_are_swept_and_reported() {
    let mut e = Edge::ready();
    e.login(a(1), "alice", 7, 11, DOMAIN);
    e.d.handle_timeout(&mut e.ids, e.t0 + ms(10), WALL);
    assert!(e.actions().is_empty());
    e.d.handle_timeout(&mut e.ids, e.t0 + Duration::from_secs(21), WALL + 21_000);
    let acts = e.actions();
    let [EdgeAction::Control(c)] = acts.as_slice() else {
        panic!("{acts:?}")
    };
    let r: DeviceSessionReport = c.decode().unwrap();
    assert_eq!(r.reason, "device_timeout");
    assert!(e.d.poll_timeout().is_some());
}

#[test]
fn app_logins_are_refused_and_garbage_is_counted() {
    let mut e = Edge::ready();
    let login = packet(PacketType::JwtAuth, "", 0, &[b'{'; 120]);
    let acts = e.device(ms(0), a(5), &login);
    let [EdgeAction::Reply(t)] = acts.as_slice() else {
        panic!("{acts:?}")
    };
    let p = decode(&t.payload).unwrap();
    assert_eq!(p.data[0], 1);
    assert_eq!(&p.data[1..], GHOST_UNSUPPORTED.as_bytes());
    assert!(e.device(ms(1), a(5), b"not a packet").is_empty());
    let mut short = heartbeat("x", 1);
    short.truncate(HEADER_LEN);
    assert!(e.device(ms(2), a(5), &short).is_empty());
    assert_eq!(e.d.counters().invalid_packets, 2);
    assert_eq!(e.d.counters().app_logins_refused, 1);
    // Nothing here made a frame.
    assert_eq!(e.d.counters().local_frames, 0);
}
