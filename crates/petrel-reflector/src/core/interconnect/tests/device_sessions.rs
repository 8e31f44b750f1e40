//! Device sessions (§3.8): the centre's owner table (ids, epochs, renew,
//! report, roaming, limits) and the edge's session table (pending auth,
//! grants, renewals, removals and their reports), and the two together.

use std::time::Duration;

use crate::codec::interconnect::messages::{
    DeviceAuthRequest, DeviceAuthResponse, DeviceGrant, DeviceRoute, DeviceSessionRenew,
    DeviceSessionReport, DeviceSessionRevoke,
};
use crate::codec::interconnect::Subtype;

use super::*;

fn ctl(n: &str, s: u64) -> ControlRef {
    ControlRef {
        node: node(n),
        control_session: s,
    }
}

const ALICE: DeviceIdentity = DeviceIdentity {
    owner_id: 40,
    ssid: 7,
};

#[test]
fn activation_ids_epochs_and_roaming() {
    let mut ids = MessageIds::new();
    ids.next_id();
    let mut o = DeviceOwners::new(25_000, 1000);
    let a = ctl("edge-a", 1);
    let b = ctl("edge-b", 2);
    let first = o.activate(&mut ids, WALL, a, ALICE).unwrap();
    assert_eq!(first.session.session_id, 2);
    assert_eq!(first.session.session_epoch, 1);
    assert_eq!(first.session.expires_at_ms, WALL + 120_000);
    assert!(!first.reused && first.previous.is_none());
    // Re-authentication through the same control session keeps both.
    let again = o.activate(&mut ids, WALL + 5000, a, ALICE).unwrap();
    assert!(again.reused);
    assert_eq!(again.session.session_id, 2);
    assert_eq!(again.session.session_epoch, 1);
    assert_eq!(again.session.expires_at_ms, WALL + 125_000);
    // Roaming to edge-b: new id, epoch 2, the old owner revoked.
    let moved = o.activate(&mut ids, WALL, b, ALICE).unwrap();
    assert_eq!(moved.session.session_epoch, 2);
    assert_eq!(moved.session.session_id, 3);
    let prev = moved.previous.unwrap();
    assert_eq!(
        (prev.control, prev.session_id, prev.session_epoch),
        (a, 2, 1)
    );
    let revoke = DeviceOwners::revoke_message(&mut ids, 99, &prev, 4242);
    assert_eq!(revoke.subtype, Subtype::DEVICE_SESSION_REVOKE);
    assert_eq!(revoke.cluster_epoch, 99);
    let r: DeviceSessionRevoke = revoke.decode().unwrap();
    assert_eq!(
        (r.session_id, r.session_epoch, r.reason.as_str()),
        (2, 1, "session_migrated")
    );
    assert!(!o.owns(a, 2, 1));
    assert!(o.owns(b, 3, 2));
    assert!(!o.owns(b, 3, 1));
    assert_eq!((o.count(a), o.count(b)), (0, 1));
    assert_eq!(o.counters().migrations, 1);
}

#[test]
fn node_limit_refuses_without_side_effects() {
    let mut ids = MessageIds::new();
    let mut o = DeviceOwners::new(2, 1000);
    let a = ctl("edge-a", 1);
    let b = ctl("edge-b", 2);
    for ssid in 1..=2 {
        o.activate(&mut ids, WALL, a, DeviceIdentity { owner_id: 1, ssid })
            .unwrap();
    }
    let bob = DeviceIdentity {
        owner_id: 2,
        ssid: 1,
    };
    assert_eq!(
        o.activate(&mut ids, WALL, a, bob),
        Err(ActivateError::NodeFull)
    );
    // Bob on edge-b cannot roam into the full edge-a either.
    o.activate(&mut ids, WALL, b, bob).unwrap();
    assert_eq!(
        o.activate(&mut ids, WALL, a, bob),
        Err(ActivateError::NodeFull)
    );
    assert_eq!(o.count(b), 1);
    assert_eq!(o.counters().session_limit_rejects, 2);
    // Re-authentication of an existing one needs no new slot.
    assert!(
        o.activate(
            &mut ids,
            WALL,
            a,
            DeviceIdentity {
                owner_id: 1,
                ssid: 1
            }
        )
        .unwrap()
        .reused
    );
}

#[test]
fn renew_rules() {
    let mut ids = MessageIds::new();
    let mut o = DeviceOwners::new(100, 100);
    let a = ctl("edge-a", 1);
    let s = o.activate(&mut ids, WALL, a, ALICE).unwrap().session;
    let req = |epoch| DeviceSessionRenew {
        request_id: 77,
        session_id: s.session_id,
        session_epoch: epoch,
        ..DeviceSessionRenew::default()
    };
    let decode = |c: ControlSend| -> DeviceSessionRenew { c.decode().unwrap() };
    let ok = decode(o.handle_renew(&mut ids, WALL + 90_000, a, &req(1), true));
    assert!(ok.success);
    assert_eq!((ok.request_id, ok.expires_at_ms), (77, WALL + 210_000));
    assert_eq!(o.get(s.session_id).unwrap().expires_at_ms, WALL + 210_000);
    let r = decode(o.handle_renew(&mut ids, WALL, a, &req(2), true));
    assert_eq!((r.success, r.error.as_str()), (false, "session_not_owned"));
    let r = decode(o.handle_renew(&mut ids, WALL, ctl("edge-a", 9), &req(1), true));
    assert_eq!(r.error, "session_not_owned");
    let r = decode(o.handle_renew(&mut ids, WALL, a, &req(1), false));
    assert_eq!(r.error, "session_route_missing");
    assert_eq!(r.expires_at_ms, 0);
    assert_eq!(o.counters().renewals, 1);
    assert_eq!(o.counters().renew_rejects, 3);
}

#[test]
fn reports_only_from_the_owner_and_disconnect_drops_all() {
    let mut ids = MessageIds::new();
    let mut o = DeviceOwners::new(100, 100);
    let a = ctl("edge-a", 1);
    let s = o.activate(&mut ids, WALL, a, ALICE).unwrap().session;
    let rep = |epoch, online| DeviceSessionReport {
        session_id: s.session_id,
        session_epoch: epoch,
        online,
        reason: "device_timeout".into(),
        ..DeviceSessionReport::default()
    };
    assert_eq!(
        o.handle_report(ctl("edge-b", 2), &rep(1, false)),
        ReportOutcome::NotOwner
    );
    assert_eq!(o.handle_report(a, &rep(2, false)), ReportOutcome::NotOwner);
    assert_eq!(o.handle_report(a, &rep(1, true)), ReportOutcome::Online);
    assert_eq!(
        o.handle_report(a, &rep(1, false)),
        ReportOutcome::Removed(s)
    );
    assert!(o.is_empty());
    for ssid in 1..=3 {
        o.activate(&mut ids, WALL, a, DeviceIdentity { owner_id: 1, ssid })
            .unwrap();
    }
    o.activate(&mut ids, WALL, ctl("edge-a", 2), ALICE).unwrap();
    assert_eq!(o.drop_control(a).len(), 3);
    assert_eq!(o.len(), 1);
}

#[test]
fn identity_epochs_are_bounded_but_never_reused_while_live() {
    let mut ids = MessageIds::new();
    let mut o = DeviceOwners::new(100, 1);
    let a = ctl("edge-a", 1);
    let b = ctl("edge-b", 2);
    o.activate(&mut ids, WALL, a, ALICE).unwrap();
    o.activate(&mut ids, WALL, b, ALICE).unwrap();
    // Bob's activation pushes Alice's counter (2) out.
    o.activate(
        &mut ids,
        WALL,
        a,
        DeviceIdentity {
            owner_id: 2,
            ssid: 1,
        },
    )
    .unwrap();
    assert_eq!(o.counters().epoch_evictions, 1);
    let third = o.activate(&mut ids, WALL, a, ALICE).unwrap();
    assert_eq!(third.session.session_epoch, 3);
}

fn grant(session_id: u64, username: &str, ssid: u8, expires_at_ms: i64) -> DeviceGrant {
    DeviceGrant {
        route: DeviceRoute {
            session_id,
            device_id: 4242,
            username: username.into(),
            ssid,
            domain_id: 7,
            session_epoch: 1,
            ..DeviceRoute::default()
        },
        owner_id: 40,
        expires_at_ms,
        ..DeviceGrant::default()
    }
}

fn ok(request_id: u64, g: DeviceGrant) -> DeviceAuthResponse {
    DeviceAuthResponse {
        request_id,
        success: true,
        grant: Some(g),
        response_packet: vec![1, 2, 3],
        ..DeviceAuthResponse::default()
    }
}

fn removal_report(r: &Removal) -> DeviceSessionReport {
    r.report.as_ref().unwrap().decode().unwrap()
}

#[test]
fn edge_auth_one_pending_per_identity() {
    let t0 = crate::test_clock::origin();
    let mut ids = MessageIds::new();
    let mut e = EdgeSessions::new(EdgeSessionsConfig::default());
    let id = identity_key("alice", 7);
    assert_eq!(id, "alice-7");
    let req = e
        .request_auth(&mut ids, t0, &id, addr("10.0.0.9:5000"), "10.0.0.9", b"raw")
        .unwrap();
    assert_eq!(req.subtype, Subtype::DEVICE_AUTH);
    let r: DeviceAuthRequest = req.decode().unwrap();
    assert_eq!(
        (r.request_id, r.source_ip.as_str(), r.packet.as_slice()),
        (req.message_id, "10.0.0.9", &b"raw"[..])
    );
    assert!(e
        .request_auth(
            &mut ids,
            t0 + Duration::from_millis(4999),
            &id,
            addr("10.0.0.9:5000"),
            "10.0.0.9",
            b"raw"
        )
        .is_none());
    assert!(e
        .request_auth(
            &mut ids,
            t0,
            &identity_key("bob", 1),
            addr("10.0.0.8:5000"),
            "10.0.0.8",
            b"raw"
        )
        .is_some());
    // After 5 s the request is gone; a late response is unknown.
    assert!(e
        .handle_timeout(&mut ids, t0 + Duration::from_secs(5), WALL)
        .is_empty());
    assert_eq!(e.pending(), 0);
    assert_eq!(
        e.handle_auth_response(
            &mut ids,
            t0,
            WALL,
            ok(r.request_id, grant(5, "alice", 7, WALL + 120_000))
        ),
        AuthOutcome::Unknown
    );
    assert_eq!(e.counters().auth_pending_drops, 1);
    assert_eq!(e.counters().auth_expired, 2);
}

#[test]
fn edge_grant_install_failures_and_endpoint_rule() {
    let t0 = crate::test_clock::origin();
    let mut ids = MessageIds::new();
    let mut e = EdgeSessions::new(EdgeSessionsConfig::default());
    let a1 = addr("10.0.0.9:5000");
    let req = |e: &mut EdgeSessions, ids: &mut MessageIds, who: &str, at| {
        e.request_auth(ids, t0, who, at, "10.0.0.9", b"raw")
            .unwrap()
            .message_id
    };
    // Failure forwards the reply.
    let r = req(&mut e, &mut ids, "alice-7", a1);
    let failed = DeviceAuthResponse {
        request_id: r,
        error: "bad password".into(),
        response_packet: vec![9],
        ..DeviceAuthResponse::default()
    };
    assert_eq!(
        e.handle_auth_response(&mut ids, t0, WALL, failed),
        AuthOutcome::Failed {
            addr: a1,
            error: "bad password".into(),
            response_packet: vec![9],
            request_len: 3,
        }
    );
    // Success installs.
    let r = req(&mut e, &mut ids, "alice-7", a1);
    let out = e.handle_auth_response(
        &mut ids,
        t0,
        WALL,
        ok(r, grant(5, "alice", 7, WALL + 120_000)),
    );
    assert!(matches!(
        &out,
        AuthOutcome::Installed {
            session_id: 5,
            replaced: None,
            evicted,
            ..
        } if evicted.is_empty()
    ));
    assert_eq!(e.at(&a1).unwrap().session_id(), 5);
    // Another identity on the same endpoint: refused and reported.
    let r = req(&mut e, &mut ids, "bob-1", a1);
    let AuthOutcome::EndpointTaken { report, .. } = e.handle_auth_response(
        &mut ids,
        t0,
        WALL,
        ok(r, grant(6, "bob", 1, WALL + 120_000)),
    ) else {
        panic!()
    };
    let rep: DeviceSessionReport = report.decode().unwrap();
    assert_eq!(
        (rep.session_id, rep.online, rep.reason.as_str()),
        (6, false, "udp_endpoint_already_authenticated")
    );
    // A grant for another identity than the request is refused too.
    let r = req(&mut e, &mut ids, "carol-2", addr("10.0.0.7:1"));
    assert!(matches!(
        e.handle_auth_response(
            &mut ids,
            t0,
            WALL,
            ok(r, grant(8, "mallory", 2, WALL + 120_000))
        ),
        AuthOutcome::EndpointTaken { .. }
    ));
    // Same identity from a new address replaces the old session.
    let a2 = addr("10.0.0.9:6000");
    assert_eq!(
        e.touch(&mut ids, t0, WALL, "alice-7", a2, true),
        Touch::NeedsAuth
    );
    let r = req(&mut e, &mut ids, "alice-7", a2);
    let AuthOutcome::Installed {
        replaced: Some(old),
        ..
    } = e.handle_auth_response(
        &mut ids,
        t0,
        WALL,
        ok(r, grant(9, "alice", 7, WALL + 120_000)),
    )
    else {
        panic!()
    };
    assert_eq!(old.session_id(), 5);
    assert!(e.at(&a1).is_none());
    assert!(e.by_session_id(5).is_none());
    assert_eq!(e.len(), 1);
}

#[test]
fn edge_renewal_and_timeouts() {
    let t0 = crate::test_clock::origin();
    let s = Duration::from_secs;
    let mut ids = MessageIds::new();
    let mut e = EdgeSessions::new(EdgeSessionsConfig::default());
    let a1 = addr("10.0.0.9:5000");
    let r = e
        .request_auth(&mut ids, t0, "alice-7", a1, "ip", b"raw")
        .unwrap()
        .message_id;
    e.handle_auth_response(
        &mut ids,
        t0,
        WALL,
        ok(r, grant(5, "alice", 7, WALL + 120_000)),
    );
    // 89 s left-margin: no renew until ≤ 30 s remain, heartbeats only.
    assert!(matches!(
        e.touch(&mut ids, t0 + s(15), WALL + 89_999, "alice-7", a1, true),
        Touch::Live { renew: None, .. }
    ));
    assert!(matches!(
        e.touch(&mut ids, t0 + s(30), WALL + 90_000, "alice-7", a1, false),
        Touch::Live { renew: None, .. }
    ));
    let Touch::Live {
        renew: Some(renew), ..
    } = e.touch(&mut ids, t0 + s(30), WALL + 90_000, "alice-7", a1, true)
    else {
        panic!()
    };
    let req: DeviceSessionRenew = renew.decode().unwrap();
    assert_eq!(
        (req.request_id, req.session_id, req.session_epoch),
        (renew.message_id, 5, 1)
    );
    assert!(matches!(
        e.touch(&mut ids, t0 + s(31), WALL + 91_000, "alice-7", a1, true),
        Touch::Live { renew: None, .. }
    ));
    let resp = DeviceSessionRenew {
        success: true,
        expires_at_ms: WALL + 210_000,
        ..req.clone()
    };
    assert!(e.handle_renew_response(&resp));
    assert!(!e.handle_renew_response(&resp));
    assert_eq!(
        e.get("alice-7").unwrap().grant.expires_at_ms,
        WALL + 210_000
    );
    // Silent for 20 s: device_timeout, reported offline.
    assert_eq!(e.poll_timeout(t0 + s(31), WALL + 91_000), Some(t0 + s(51)));
    assert!(e
        .handle_timeout(&mut ids, t0 + s(50), WALL + 110_000)
        .is_empty());
    let gone = e.handle_timeout(&mut ids, t0 + s(51), WALL + 111_000);
    assert_eq!(gone.len(), 1);
    assert_eq!(gone[0].reason, "device_timeout");
    let rep = removal_report(&gone[0]);
    assert_eq!(
        (
            rep.session_id,
            rep.session_epoch,
            rep.online,
            rep.reported_at_ms
        ),
        (5, 1, false, WALL + 111_000)
    );
    assert_eq!(rep.device_id, 4242);

    // A grant that runs out while the device keeps talking: grant_expired.
    let r = e
        .request_auth(&mut ids, t0, "alice-7", a1, "ip", b"raw")
        .unwrap()
        .message_id;
    e.handle_auth_response(
        &mut ids,
        t0,
        WALL,
        ok(r, grant(6, "alice", 7, WALL + 10_000)),
    );
    assert_eq!(
        e.touch(&mut ids, t0 + s(10), WALL + 10_000, "alice-7", a1, false),
        Touch::NeedsAuth
    );
    let gone = e.handle_timeout(&mut ids, t0 + s(10), WALL + 10_000);
    assert_eq!(gone[0].reason, "grant_expired");
}

#[test]
fn edge_revoke_routes_and_removals() {
    let t0 = crate::test_clock::origin();
    let mut ids = MessageIds::new();
    let mut e = EdgeSessions::new(EdgeSessionsConfig {
        max_sessions: 2,
        ..EdgeSessionsConfig::default()
    });
    for (i, who) in ["a", "b", "c"].iter().enumerate() {
        let at = addr(&format!("10.0.0.{}:1", i + 1));
        let r = e
            .request_auth(
                &mut ids,
                t0 + Duration::from_secs(i as u64),
                &identity_key(who, 1),
                at,
                "ip",
                b"x",
            )
            .unwrap()
            .message_id;
        let out = e.handle_auth_response(
            &mut ids,
            t0 + Duration::from_secs(i as u64),
            WALL,
            ok(r, grant(10 + i as u64, who, 1, WALL + 120_000)),
        );
        if i == 2 {
            let AuthOutcome::Installed { mut evicted, .. } = out else {
                panic!("{out:?}")
            };
            let ev = evicted.pop().unwrap();
            assert_eq!(ev.session.identity, "a-1");
            assert_eq!(removal_report(&ev).reason, "session_evicted");
        }
    }
    assert_eq!(e.len(), 2);
    // Revoke needs the epoch.
    let mut rv = DeviceSessionRevoke {
        session_id: 11,
        session_epoch: 2,
        reason: "session_migrated".into(),
        ..DeviceSessionRevoke::default()
    };
    assert!(e.handle_revoke(&mut ids, &rv).is_none());
    rv.session_epoch = 1;
    let gone = e.handle_revoke(&mut ids, &rv).unwrap();
    assert!(gone.report.is_none());
    // Route upserts refresh the grant; a domain change ends the lease.
    let mut route = e.by_session_id(12).unwrap().grant.route.clone();
    route.nickname = "Carol".into();
    assert_eq!(e.apply_route(&route), Some(false));
    route.domain_id = 8;
    assert_eq!(e.apply_route(&route), Some(true));
    assert_eq!(e.by_session_id(12).unwrap().grant.route.domain_id, 8);
    route.session_epoch = 9;
    assert_eq!(e.apply_route(&route), None);
    // A snapshot without the session removes it.
    let mut p = Projection::new(7);
    assert_eq!(e.apply_projection(&mut ids, WALL, &p).len(), 1);
    assert!(e.is_empty());
    let r = e
        .request_auth(&mut ids, t0, "d-1", addr("10.0.0.4:1"), "ip", b"x")
        .unwrap()
        .message_id;
    e.handle_auth_response(&mut ids, t0, WALL, ok(r, grant(20, "d", 1, WALL + 120_000)));
    p.devices.insert(20, grant(20, "d", 1, 0).route);
    assert!(e.apply_projection(&mut ids, WALL, &p).is_empty());
    let gone = e.remove_all(&mut ids, WALL, removal_reason::CONTROL_UNAVAILABLE);
    assert_eq!(removal_report(&gone[0]).reason, "control_unavailable");
    // Detach forgets pending requests.
    e.request_auth(&mut ids, t0, "e-1", addr("10.0.0.5:1"), "ip", b"x")
        .unwrap();
    e.detach();
    assert_eq!(e.pending(), 0);
}

/// Edge ↔ centre: auth, grant, renewal, offline report.
#[test]
fn edge_and_centre_together() {
    let t0 = crate::test_clock::origin();
    let mut cids = MessageIds::new();
    let mut eids = MessageIds::new();
    let mut o = DeviceOwners::new(100, 100);
    let mut e = EdgeSessions::new(EdgeSessionsConfig::default());
    let a = ctl("edge-a", 1);
    let at = addr("10.0.0.9:5000");
    let req: DeviceAuthRequest = e
        .request_auth(&mut eids, t0, "alice-7", at, "10.0.0.9", b"raw")
        .unwrap()
        .decode()
        .unwrap();
    let act = o.activate(&mut cids, WALL, a, ALICE).unwrap();
    let mut g = grant(
        act.session.session_id,
        "alice",
        7,
        act.session.expires_at_ms,
    );
    g.route.session_epoch = act.session.session_epoch;
    e.handle_auth_response(&mut eids, t0, WALL, ok(req.request_id, g));
    let Touch::Live {
        renew: Some(renew), ..
    } = e.touch(
        &mut eids,
        t0 + Duration::from_secs(90),
        WALL + 90_000,
        "alice-7",
        at,
        true,
    )
    else {
        panic!()
    };
    let resp = o.handle_renew(&mut cids, WALL + 90_000, a, &renew.decode().unwrap(), true);
    assert!(e.handle_renew_response(&resp.decode().unwrap()));
    assert_eq!(
        e.get("alice-7").unwrap().grant.expires_at_ms,
        WALL + 210_000
    );
    let gone = e.handle_timeout(&mut eids, t0 + Duration::from_secs(200), WALL + 200_000);
    let rep = removal_report(&gone[0]);
    assert!(matches!(
        o.handle_report(a, &rep),
        ReportOutcome::Removed(_)
    ));
    assert!(o.is_empty());
}

mod properties {
    use std::collections::HashMap;

    use proptest::prelude::*;

    use super::*;

    proptest! {
        /// Any sequence of activations, reports and disconnects: each
        /// identity has at most one session, the per-control counts add up
        /// and stay within the limit, and every new activation of an
        /// identity gets a higher epoch than any before.
        #[test]
        fn owner_table_invariants(
            steps in proptest::collection::vec((0u8..4, 0u8..3, 0i64..4), 1..120),
        ) {
            let mut ids = MessageIds::new();
            let mut o = DeviceOwners::new(3, 1000);
            let mut last_epoch: HashMap<DeviceIdentity, u64> = HashMap::new();
            for (op, c, who) in steps {
                let control = ctl("edge", u64::from(c) + 1);
                let identity = DeviceIdentity { owner_id: who, ssid: 1 };
                match op {
                    0 | 1 => {
                        if let Ok(a) = o.activate(&mut ids, WALL, control, identity) {
                            let prev = last_epoch.get(&identity).copied().unwrap_or(0);
                            if a.reused {
                                prop_assert_eq!(a.session.session_epoch, prev);
                            } else {
                                prop_assert!(a.session.session_epoch > prev);
                            }
                            last_epoch.insert(identity, a.session.session_epoch);
                            prop_assert!(o.owns(control, a.session.session_id, a.session.session_epoch));
                        }
                    }
                    2 => {
                        let owned: Vec<OwnedSession> = (1..=ids.clone().next_id())
                            .filter_map(|id| o.get(id).copied())
                            .filter(|s| s.identity == identity)
                            .collect();
                        for s in owned {
                            let rep = DeviceSessionReport {
                                session_id: s.session_id,
                                session_epoch: s.session_epoch,
                                online: false,
                                ..DeviceSessionReport::default()
                            };
                            let out = o.handle_report(s.control, &rep);
                            prop_assert_eq!(out, ReportOutcome::Removed(s));
                        }
                    }
                    _ => {
                        o.drop_control(control);
                        prop_assert_eq!(o.count(control), 0);
                    }
                }
                let total: usize = (1..=3).map(|c| o.count(ctl("edge", c))).sum();
                prop_assert_eq!(total, o.len());
                prop_assert!((1..=3).all(|c| o.count(ctl("edge", c)) <= 3));
                prop_assert!(o.len() <= 4);
            }
        }

        /// Any sequence of auth requests, responses, touches and timeouts:
        /// the indexes agree (by address, by session id), one session per
        /// address, and the table stays within its limits.
        #[test]
        fn edge_table_invariants(
            steps in proptest::collection::vec((0u8..5, 0u8..4, 0u8..3, 0u64..3000), 1..150),
        ) {
            let mut now = crate::test_clock::origin();
            let mut wall = WALL;
            let mut ids = MessageIds::new();
            let mut e = EdgeSessions::new(EdgeSessionsConfig {
                max_sessions: 3,
                max_pending: 2,
                ..EdgeSessionsConfig::default()
            });
            let mut sent: Vec<(u64, String)> = Vec::new();
            let mut next_session = 100u64;
            for (op, who, port, dt) in steps {
                now += Duration::from_millis(dt);
                wall += dt as i64;
                let name = format!("u{who}");
                let identity = identity_key(&name, 1);
                let at = addr(&format!("10.0.0.1:{}", 1000 + u16::from(port)));
                match op {
                    0 => {
                        if let Some(req) = e.request_auth(&mut ids, now, &identity, at, "ip", b"x") {
                            sent.push((req.message_id, name));
                        }
                    }
                    1 => {
                        if let Some((request_id, user)) = sent.pop() {
                            next_session += 1;
                            e.handle_auth_response(&mut ids, now, wall, ok(request_id, grant(next_session, &user, 1, wall + 60_000)));
                        }
                    }
                    2 => {
                        e.touch(&mut ids, now, wall, &identity, at, true);
                    }
                    3 => {
                        e.handle_timeout(&mut ids, now, wall);
                    }
                    _ => e.detach(),
                }
                prop_assert!(e.len() <= 3);
                prop_assert!(e.pending() <= 2);
                let mut addrs = std::collections::HashSet::new();
                for s in e.iter() {
                    prop_assert!(addrs.insert(s.addr));
                    prop_assert_eq!(e.at(&s.addr).map(|x| x.session_id()), Some(s.session_id()));
                    prop_assert_eq!(e.by_session_id(s.session_id()).map(|x| &x.identity), Some(&s.identity));
                    prop_assert_eq!(e.get(&s.identity).map(|x| x.session_id()), Some(s.session_id()));
                }
            }
        }
    }
}

#[test]
fn owners_count_an_accounts_sessions_over_every_node() {
    let mut ids = MessageIds::new();
    let mut o = DeviceOwners::new(25_000, 1000);
    let (a, b) = (ctl("edge-a", 1), ctl("edge-b", 2));
    let dev = |ssid| DeviceIdentity { owner_id: 40, ssid };
    o.activate(&mut ids, WALL, a, dev(1)).unwrap();
    let second = o.activate(&mut ids, WALL, b, dev(2)).unwrap();
    o.activate(&mut ids, WALL, b, ALICE).unwrap();
    assert_eq!(o.of_account_except(dev(9)), 3);
    // A device's own session is left out (its login replaces it).
    assert_eq!(o.of_account_except(dev(1)), 2);
    let bob = DeviceIdentity {
        owner_id: 41,
        ssid: 1,
    };
    assert_eq!(o.of_account_except(bob), 0);
    // Roaming does not count twice; removals and a lost node free them.
    o.activate(&mut ids, WALL, a, dev(2)).unwrap();
    assert_eq!(o.of_account_except(dev(9)), 3);
    assert!(o.remove(second.session.session_id).is_none());
    assert_eq!(o.drop_control(b).len(), 1);
    assert_eq!(o.of_account_except(dev(9)), 2);
    assert_eq!(o.drop_control(a).len(), 2);
    assert_eq!(o.of_account_except(dev(9)), 0);
}
