use std::time::Duration;

use crate::codec::interconnect::{
    seal, Challenge, Channel, DataBind, EnvelopeError, RelayError, Subtype,
};

use super::*;

const EDGE_ADDR: &str = "10.0.0.2:60050";

fn bound_centre(cfg: DataPlaneConfig) -> (DataPlane, Instant) {
    let (mut c, now) = centre(cfg);
    assert_eq!(
        bind(&mut c, now, "edge-a", SESSION_A, 1, 1, addr(EDGE_ADDR)),
        Verdict::Bound(addr(EDGE_ADDR))
    );
    (c, now)
}

#[test]
fn valid_delivered_replay_expired_unbound_as_in_section_11() {
    let cfg = DataPlaneConfig {
        freshness_ms: 50,
        ..DataPlaneConfig::default()
    };
    let (mut c, now) = bound_centre(cfg);
    let base_in = c.traffic(node("edge-a")).unwrap().in_packets;
    let valid = upstream(2);
    assert_eq!(
        c.handle_datagram(now, WALL, addr(EDGE_ADDR), &valid),
        Verdict::Queued
    );
    let replay = c.handle_datagram(now, WALL, addr(EDGE_ADDR), &valid);
    assert_eq!(
        replay,
        Verdict::Rejected(Rejection::Replayed(Replay::Duplicate))
    );
    let mut old = header("edge-a", SESSION_A, 3, Subtype::RELAY_UPSTREAM);
    old.sent_at_ms = WALL - 1000;
    let old = seal(&old, &relay_payload(7), &key_of(1), Channel::Udp).unwrap();
    let expired = c.handle_datagram(now, WALL, addr(EDGE_ADDR), &old);
    assert_eq!(expired, Verdict::Rejected(Rejection::Expired));
    let other_port = c.handle_datagram(now, WALL, addr("10.0.0.2:60051"), &upstream(4));
    assert_eq!(other_port, Verdict::Rejected(Rejection::UnboundAddress));
    assert!(!replay_consumed(&replay) && !replay_consumed(&expired));
    assert!(replay_consumed(&other_port));

    let t = c.traffic(node("edge-a")).unwrap();
    assert_eq!(t.in_packets - base_in, 4);
    assert_eq!(t.drops, 3);
    let p = c.protection(node("edge-a")).unwrap();
    assert_eq!(
        (p.replay_drops, p.expired_drops, p.unbound_address_drops),
        (1, 1, 1)
    );
    assert_eq!(c.bridge().invalid_type0, 2);

    let got = c.poll_accepted(now).unwrap();
    assert_eq!(got.node_id, node("edge-a"));
    assert_eq!(got.header.message_id, 2);
    assert_eq!(got.relay().unwrap().header.domain_id, 7);
    assert_eq!(c.poll_accepted(now), None);
}

fn replay_consumed(v: &Verdict) -> bool {
    match v {
        Verdict::Rejected(r) => r.is_consumed(),
        _ => true,
    }
}

#[test]
fn edge_peer_accepts_centre_and_rejects_replay_and_3_s_old() {
    let now = crate::test_clock::origin();
    let mut e = DataPlane::edge(node("edge-b"), DataPlaneConfig::default());
    e.attach(now, params("center", 77, 3));
    let mut h = header("center", 77, 10, Subtype::RELAY_DOWNSTREAM);
    h.hop_count = 1;
    let d = seal(&h, &relay_payload(7), &key_of(3), Channel::Udp).unwrap();
    // The centre's source address is not checked at the edge.
    assert_eq!(
        e.handle_datagram(now, WALL, addr("192.0.2.1:1"), &d),
        Verdict::Queued
    );
    assert_eq!(
        e.handle_datagram(now, WALL, addr("192.0.2.1:1"), &d),
        Verdict::Rejected(Rejection::Replayed(Replay::Duplicate))
    );
    h.message_id = 11;
    h.sent_at_ms = WALL - 3000;
    let old = seal(&h, &relay_payload(7), &key_of(3), Channel::Udp).unwrap();
    assert_eq!(
        e.handle_datagram(now, WALL, addr("192.0.2.1:1"), &old),
        Verdict::Rejected(Rejection::Expired)
    );
    let t = e.traffic(NodeId::CENTRE).unwrap();
    assert_eq!((t.in_packets, t.drops), (3, 2));
    // A source other than `center`, signed with the right key: identity.
    let forged = seal(
        &header("edge-x", 77, 12, Subtype::RELAY_DOWNSTREAM),
        &relay_payload(7),
        &key_of(3),
        Channel::Udp,
    )
    .unwrap();
    assert_eq!(
        e.handle_datagram(now, WALL, addr("192.0.2.1:1"), &forged),
        Verdict::Rejected(Rejection::IdentityMismatch)
    );
}

#[test]
fn forged_session_key_epoch_and_hop_count_never_reach_the_handler() {
    let (mut c, now) = bound_centre(DataPlaneConfig::default());
    let before = *c.traffic(node("edge-a")).unwrap();
    // Forged session id: no such session.
    let forged = seal(
        &header("edge-a", SESSION_A + 1, 5, Subtype::RELAY_UPSTREAM),
        &relay_payload(7),
        &key_of(1),
        Channel::Udp,
    )
    .unwrap();
    assert_eq!(
        c.handle_datagram(now, WALL, addr(EDGE_ADDR), &forged),
        Verdict::Rejected(Rejection::Unauthenticated)
    );
    assert_eq!(c.bridge().unauthenticated_type0, 1);
    // Key epoch −1 (u32::MAX): identity reject.
    let mut h = header("edge-a", SESSION_A, 6, Subtype::RELAY_UPSTREAM);
    h.key_epoch = u32::MAX;
    let wrong_epoch = seal(&h, &relay_payload(7), &key_of(1), Channel::Udp).unwrap();
    assert_eq!(
        c.handle_datagram(now, WALL, addr(EDGE_ADDR), &wrong_epoch),
        Verdict::Rejected(Rejection::IdentityMismatch)
    );
    // Hop count 3, re-signed with the valid key: invalid.
    let mut h = header("edge-a", SESSION_A, 7, Subtype::RELAY_UPSTREAM);
    h.hop_count = 2;
    let mut hop3 = seal(&h, &relay_payload(7), &key_of(1), Channel::Udp).unwrap();
    hop3[134] = 3;
    let n = hop3.len() - 32;
    let tag = key_of(1).tag(&hop3[..n]);
    hop3[n..].copy_from_slice(&tag);
    assert_eq!(
        c.handle_datagram(now, WALL, addr(EDGE_ADDR), &hop3),
        Verdict::Rejected(Rejection::Invalid(EnvelopeError::HopCountTooHigh(3)))
    );
    // Wrong key.
    let wrong_key = seal(
        &header("edge-a", SESSION_A, 8, Subtype::RELAY_UPSTREAM),
        &relay_payload(7),
        &key_of(2),
        Channel::Udp,
    )
    .unwrap();
    assert_eq!(
        c.handle_datagram(now, WALL, addr(EDGE_ADDR), &wrong_key),
        Verdict::Rejected(Rejection::Invalid(EnvelopeError::BadTag))
    );
    let p = c.protection(node("edge-a")).unwrap();
    assert_eq!(
        (p.identity_rejects, p.invalid_auth_tags, p.hop_count_drops),
        (1, 1, 1)
    );
    assert_eq!(c.bridge().invalid_type0, 3);
    assert_eq!(*c.traffic(node("edge-a")).unwrap(), before);
    assert_eq!(c.queued(), 0);
    // None of them is consumed: they fall through to the device path.
    for d in [&forged, &wrong_epoch, &hop3, &wrong_key] {
        match c.handle_datagram(now, WALL, addr(EDGE_ADDR), d) {
            Verdict::Rejected(r) => assert!(!r.is_consumed(), "{r:?}"),
            v => panic!("{v:?}"),
        }
    }
    // Not Type 0 at all: the device path's.
    assert_eq!(
        c.handle_datagram(now, WALL, addr(EDGE_ADDR), &inner(120)),
        Verdict::NotType0
    );
}

#[test]
fn freshness_is_two_seconds_either_way() {
    let (mut c, now) = bound_centre(DataPlaneConfig::default());
    for (id, offset, ok) in [
        (2, -2000, true),
        (3, 2000, true),
        (4, -2001, false),
        (5, 2001, false),
    ] {
        let mut h = header("edge-a", SESSION_A, id, Subtype::RELAY_UPSTREAM);
        h.sent_at_ms = WALL + offset;
        let d = seal(&h, &relay_payload(7), &key_of(1), Channel::Udp).unwrap();
        let v = c.handle_datagram(now, WALL, addr(EDGE_ADDR), &d);
        if ok {
            assert_eq!(v, Verdict::Queued, "{offset}");
        } else {
            assert_eq!(v, Verdict::Rejected(Rejection::Expired), "{offset}");
        }
    }
    assert_eq!(c.protection(node("edge-a")).unwrap().expired_drops, 2);
}

#[test]
fn replayed_older_than_the_window() {
    let (mut c, now) = bound_centre(DataPlaneConfig::default());
    assert_eq!(
        c.handle_datagram(now, WALL, addr(EDGE_ADDR), &upstream(5000)),
        Verdict::Queued
    );
    assert_eq!(
        c.handle_datagram(now, WALL, addr(EDGE_ADDR), &upstream(904)),
        Verdict::Rejected(Rejection::Replayed(Replay::TooOld))
    );
    assert_eq!(
        c.handle_datagram(now, WALL, addr(EDGE_ADDR), &upstream(905)),
        Verdict::Queued
    );
    assert_eq!(c.protection(node("edge-a")).unwrap().replay_drops, 1);
}

#[test]
fn unbound_until_proved_and_the_binding_follows_the_proof() {
    let (mut c, now) = centre(DataPlaneConfig::default());
    assert_eq!(
        c.handle_datagram(now, WALL, addr(EDGE_ADDR), &upstream(1)),
        Verdict::Rejected(Rejection::UnboundAddress)
    );
    // A proof with no challenge outstanding.
    let proof = |id: u64, ch: Option<Challenge>| {
        seal(
            &header("edge-a", SESSION_A, id, Subtype::DATA_BIND),
            &DataBind::Proof(ch).to_vec(),
            &key_of(1),
            Channel::Udp,
        )
        .unwrap()
    };
    assert_eq!(
        c.handle_datagram(
            now,
            WALL,
            addr(EDGE_ADDR),
            &proof(2, Some(Challenge([1; 32])))
        ),
        Verdict::Rejected(Rejection::BindRejected(BindReject::NoChallenge))
    );
    // A wrong proof consumes the challenge: the right one then fails too.
    let fresh = Challenge([9; 32]);
    c.handle_bind_request(now, node("edge-a"), SESSION_A, &DataBind::Request, fresh)
        .unwrap();
    assert_eq!(
        c.handle_datagram(
            now,
            WALL,
            addr(EDGE_ADDR),
            &proof(3, Some(Challenge([8; 32])))
        ),
        Verdict::Rejected(Rejection::BindRejected(BindReject::Mismatch))
    );
    assert_eq!(
        c.handle_datagram(now, WALL, addr(EDGE_ADDR), &proof(4, Some(fresh))),
        Verdict::Rejected(Rejection::BindRejected(BindReject::NoChallenge))
    );
    // An expired challenge.
    c.handle_bind_request(now, node("edge-a"), SESSION_A, &DataBind::Request, fresh)
        .unwrap();
    let late = now + CHALLENGE_TTL + Duration::from_millis(1);
    assert_eq!(
        c.handle_datagram(late, WALL, addr(EDGE_ADDR), &proof(5, Some(fresh))),
        Verdict::Rejected(Rejection::BindRejected(BindReject::ChallengeExpired))
    );
    // A request over TLS must not carry a challenge; only requests are taken.
    assert_eq!(
        c.handle_bind_request(
            now,
            node("edge-a"),
            SESSION_A,
            &DataBind::Proof(None),
            fresh
        ),
        Err(BindRequestError::NotARequest)
    );
    assert_eq!(
        c.handle_bind_request(now, node("edge-a"), 1, &DataBind::Request, fresh),
        Err(BindRequestError::NoSession)
    );
    assert_eq!(c.protection(node("edge-a")).unwrap().data_bind_rejects, 5);
    // Bind, then rebind from a new port (NAT rebinding): the old port is out.
    assert_eq!(
        bind(&mut c, now, "edge-a", SESSION_A, 1, 6, addr(EDGE_ADDR)),
        Verdict::Bound(addr(EDGE_ADDR))
    );
    assert_eq!(
        c.handle_datagram(now, WALL, addr(EDGE_ADDR), &upstream(7)),
        Verdict::Queued
    );
    assert_eq!(
        bind(
            &mut c,
            now,
            "edge-a",
            SESSION_A,
            1,
            8,
            addr("10.0.0.2:4000")
        ),
        Verdict::Bound(addr("10.0.0.2:4000"))
    );
    assert_eq!(
        c.handle_datagram(now, WALL, addr(EDGE_ADDR), &upstream(9)),
        Verdict::Rejected(Rejection::UnboundAddress)
    );
    assert_eq!(c.data_address(node("edge-a")), Some(addr("10.0.0.2:4000")));
    assert_eq!(
        c.protection(node("edge-a")).unwrap().unbound_address_drops,
        2
    );
}

#[test]
fn over_rate_drops_and_counts_the_soft_event_once() {
    let cfg = DataPlaneConfig {
        limits: DataLimits {
            soft_pps: 2,
            hard_pps: 3,
            hard_bytes_per_s: 1_000_000,
        },
        ..DataPlaneConfig::default()
    };
    let (mut c, now) = centre(cfg);
    c.attach(now, params("edge-b", SESSION_B, 2));
    // Both behind one NAT address, each with its own budget. The proofs
    // are the first packets of second WALL.
    bind(
        &mut c,
        now,
        "edge-a",
        SESSION_A,
        1,
        1,
        addr("10.0.0.9:1000"),
    );
    bind(
        &mut c,
        now,
        "edge-b",
        SESSION_B,
        2,
        1,
        addr("10.0.0.9:1001"),
    );
    let wall = WALL + 1000;
    let at = |id: u64| {
        let mut h = header("edge-a", SESSION_A, id, Subtype::RELAY_UPSTREAM);
        h.sent_at_ms = wall;
        seal(&h, &relay_payload(7), &key_of(1), Channel::Udp).unwrap()
    };
    for id in 2..=4 {
        assert_eq!(
            c.handle_datagram(now, wall, addr("10.0.0.9:1000"), &at(id)),
            Verdict::Queued
        );
    }
    assert_eq!(
        c.handle_datagram(now, wall, addr("10.0.0.9:1000"), &at(5)),
        Verdict::Rejected(Rejection::OverBudget)
    );
    let p = c.protection(node("edge-a")).unwrap();
    assert_eq!((p.data_soft_limit_events, p.data_hard_limit_drops), (1, 1));
    let mut h = header("edge-b", SESSION_B, 2, Subtype::RELAY_UPSTREAM);
    h.sent_at_ms = wall;
    let b = seal(&h, &relay_payload(7), &key_of(2), Channel::Udp).unwrap();
    assert_eq!(
        c.handle_datagram(now, wall, addr("10.0.0.9:1001"), &b),
        Verdict::Queued
    );
    // The next second has a fresh budget.
    let mut h = header("edge-a", SESSION_A, 6, Subtype::RELAY_UPSTREAM);
    h.sent_at_ms = wall + 1000;
    let next = seal(&h, &relay_payload(7), &key_of(1), Channel::Udp).unwrap();
    assert_eq!(
        c.handle_datagram(now, wall + 1000, addr("10.0.0.9:1000"), &next),
        Verdict::Queued
    );
}

#[test]
fn byte_budget_at_one_megabit() {
    let limits = DataLimits {
        hard_bytes_per_s: 125_000,
        ..DataLimits::default()
    };
    let mut b = DataBudget::default();
    assert!(b.charge(&limits, WALL, 100_000).allowed);
    assert!(!b.charge(&limits, WALL, 30_000).allowed);
    assert!(b.charge(&limits, WALL, 25_000).allowed);
    assert!(b.charge(&limits, WALL + 1000, 30_000).allowed);
    // Windows align to whole Unix seconds, also before 1970.
    let mut b = DataBudget::default();
    assert!(b.charge(&limits, -1, 125_000).allowed);
    assert!(b.charge(&limits, 0, 125_000).allowed);
}

#[test]
fn centre_takes_only_relay_upstream_from_udp() {
    let (mut c, now) = bound_centre(DataPlaneConfig::default());
    for (id, sub) in [
        (2, Subtype::HEARTBEAT),
        (3, Subtype::RELAY_DOWNSTREAM),
        (4, Subtype(0x77)),
    ] {
        let d = seal(
            &header("edge-a", SESSION_A, id, sub),
            b"{}",
            &key_of(1),
            Channel::Udp,
        )
        .unwrap();
        assert_eq!(
            c.handle_datagram(now, WALL, addr(EDGE_ADDR), &d),
            Verdict::Rejected(Rejection::UnexpectedSubtype(sub))
        );
    }
    let bad_relay = seal(
        &header("edge-a", SESSION_A, 5, Subtype::RELAY_UPSTREAM),
        &[0; 41],
        &key_of(1),
        Channel::Udp,
    )
    .unwrap();
    assert_eq!(
        c.handle_datagram(now, WALL, addr(EDGE_ADDR), &bad_relay),
        Verdict::Rejected(Rejection::InvalidRelay(RelayError::TooShort(41)))
    );
    let p = c.protection(node("edge-a")).unwrap();
    assert_eq!((p.unexpected_subtype_drops, p.invalid_relay_drops), (3, 1));
    assert_eq!(c.queued(), 0);
}

#[test]
fn queues_are_bounded_and_stale_frames_drop() {
    let cfg = DataPlaneConfig {
        queue_per_node: 2,
        queue_global: 3,
        ..DataPlaneConfig::default()
    };
    let (mut c, now) = bound_centre(cfg);
    c.attach(now, params("edge-b", SESSION_B, 2));
    bind(&mut c, now, "edge-b", SESSION_B, 2, 1, addr("10.0.0.3:1"));
    assert_eq!(
        c.handle_datagram(now, WALL, addr(EDGE_ADDR), &upstream(2)),
        Verdict::Queued
    );
    assert_eq!(
        c.handle_datagram(now, WALL, addr(EDGE_ADDR), &upstream(3)),
        Verdict::Queued
    );
    assert_eq!(
        c.handle_datagram(now, WALL, addr(EDGE_ADDR), &upstream(4)),
        Verdict::Rejected(Rejection::QueueFull)
    );
    let b = |id| {
        seal(
            &header("edge-b", SESSION_B, id, Subtype::RELAY_UPSTREAM),
            &relay_payload(7),
            &key_of(2),
            Channel::Udp,
        )
        .unwrap()
    };
    let later = now + Duration::from_millis(150);
    assert_eq!(
        c.handle_datagram(later, WALL, addr("10.0.0.3:1"), &b(2)),
        Verdict::Queued
    );
    assert_eq!(
        c.handle_datagram(later, WALL, addr("10.0.0.3:1"), &b(3)),
        Verdict::Rejected(Rejection::GlobalQueueFull)
    );
    assert_eq!(c.protection(node("edge-a")).unwrap().data_queue_drops, 1);
    assert_eq!(c.bridge().global_queue_drops, 1);
    assert_eq!(c.protection(node("edge-a")).unwrap().queued_data, 2);
    // The two of edge-a are 201 ms old by then: stale.
    assert_eq!(
        c.poll_timeout(),
        Some(now + Duration::from_millis(200) + Duration::from_nanos(1))
    );
    let t = now + Duration::from_millis(201);
    let got = c.poll_accepted(t).unwrap();
    assert_eq!(got.node_id, node("edge-b"));
    assert_eq!(c.protection(node("edge-a")).unwrap().data_stale_drops, 2);
    assert_eq!(c.protection(node("edge-a")).unwrap().queued_data, 0);
    assert_eq!(c.poll_accepted(t), None);
    // handle_timeout drops stale frames without polling.
    assert_eq!(
        c.handle_datagram(t, WALL, addr(EDGE_ADDR), &upstream(5)),
        Verdict::Queued
    );
    c.handle_timeout(t + Duration::from_millis(300));
    assert_eq!(c.queued(), 0);
    assert_eq!(c.protection(node("edge-a")).unwrap().data_stale_drops, 3);
}

#[test]
fn sessions_replace_detach_and_evict() {
    let cfg = DataPlaneConfig {
        max_nodes: 2,
        ..DataPlaneConfig::default()
    };
    let (mut c, now) = bound_centre(cfg);
    assert_eq!(
        c.handle_datagram(now, WALL, addr(EDGE_ADDR), &upstream(2)),
        Verdict::Queued
    );
    // A new session of edge-a replaces the old: queued frames go, the old
    // session id is unknown, the binding starts afresh.
    c.attach(now, params("edge-a", SESSION_A + 1, 1));
    assert_eq!(c.queued(), 0);
    assert_eq!(c.bridge().orphaned_drops, 1);
    assert_eq!(
        c.handle_datagram(now, WALL, addr(EDGE_ADDR), &upstream(3)),
        Verdict::Rejected(Rejection::Unauthenticated)
    );
    assert_eq!(c.data_address(node("edge-a")), None);
    // A stale detach of the old session does nothing.
    assert!(!c.detach(node("edge-a"), SESSION_A));
    assert_eq!(c.node_count(), 1);
    c.attach(now + Duration::from_secs(1), params("edge-b", SESSION_B, 2));
    c.attach(now + Duration::from_secs(2), params("edge-c", 3, 3));
    // edge-a was heard least recently: evicted.
    assert_eq!(c.node_count(), 2);
    assert_eq!(c.session_id(node("edge-a")), None);
    assert_eq!(c.bridge().session_evictions, 1);
    assert!(c.detach(node("edge-b"), SESSION_B));
    assert_eq!(c.node_count(), 1);
}

/// Re-signs `d` (its tag over everything before it) with edge-a's key.
fn resign(d: &mut [u8]) {
    let n = d.len() - 32;
    let tag = key_of(1).tag(&d[..n]);
    d[n..].copy_from_slice(&tag);
}

#[test]
fn step_3_refusals_are_counted_under_their_own_cause() {
    let (mut c, now) = bound_centre(DataPlaneConfig::default());
    let src = addr(EDGE_ADDR);
    let mut h = header("edge-a", SESSION_A, 20, Subtype::RELAY_UPSTREAM);
    h.hop_count = 2;
    let base = seal(&h, &relay_payload(7), &key_of(1), Channel::Udp).unwrap();
    for hop in [3u8, 255] {
        let mut d = base.clone();
        d[134] = hop;
        resign(&mut d);
        assert_eq!(
            c.handle_datagram(now, WALL, src, &d),
            Verdict::Rejected(Rejection::Invalid(EnvelopeError::HopCountTooHigh(hop)))
        );
    }
    // A payload over the UDP limit, correctly signed, length fields right.
    let mut big = base[..143].to_vec();
    big.extend(vec![0u8; 1401]);
    big.extend([0u8; 32]);
    let len = big.len();
    big[4..6].copy_from_slice(&u16::try_from(len).unwrap().to_be_bytes());
    big[139..143].copy_from_slice(&1401u32.to_be_bytes());
    resign(&mut big);
    assert!(matches!(
        c.handle_datagram(now, WALL, src, &big),
        Verdict::Rejected(Rejection::Invalid(EnvelopeError::TooLong { .. }))
    ));
    // A wrong length field, re-signed.
    let mut wrong_len = base.clone();
    wrong_len[4..6].copy_from_slice(&1000u16.to_be_bytes());
    resign(&mut wrong_len);
    assert!(matches!(
        c.handle_datagram(now, WALL, src, &wrong_len),
        Verdict::Rejected(Rejection::Invalid(EnvelopeError::LengthMismatch { .. }))
    ));
    let p = c.protection(node("edge-a")).unwrap();
    assert_eq!(
        (
            p.invalid_auth_tags,
            p.hop_count_drops,
            p.oversize_drops,
            p.malformed_envelopes
        ),
        (0, 2, 1, 1)
    );
    // 174 bytes: cut short, counted and dropped, not left to the device path.
    let cut = &base[..174];
    assert_eq!(
        c.handle_datagram(now, WALL, src, cut),
        Verdict::Rejected(Rejection::Truncated)
    );
    assert!(Rejection::Truncated.is_consumed());
    assert_eq!(c.bridge().truncated_type0, 1);
    // A device datagram is still not Type 0.
    let mut device = base[..174].to_vec();
    device[48] = 2;
    assert_eq!(
        c.handle_datagram(now, WALL, src, &device),
        Verdict::NotType0
    );
}
