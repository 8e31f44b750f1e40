//! The single node's fan-out admission rules at the edge (draarl-v1 §3.1,
//! §3.6, §9; `EndpointPolicy`): endpoint caps on grants, the heard-twice
//! wait, ICMP unreachable, and the budgets of proxied logins.

use std::time::{Duration, Instant};

use crate::codec::interconnect::messages::{
    DeviceAuthResponse, DeviceGrant, DeviceRoute, DeviceSessionReport,
};
use crate::codec::{decode, encode, Header, PacketType};
use crate::model::EndpointPolicy;

use super::*;

fn heartbeat(user: &str, ssid: u8) -> Vec<u8> {
    let mut h = Header::new(PacketType::Heartbeat);
    h.set_username(user);
    h.ssid = ssid;
    encode(&h, &[]).unwrap()
}

fn grant(session_id: u64, owner_id: i64, user: &str, ssid: u8) -> DeviceAuthResponse {
    DeviceAuthResponse {
        request_id: 0,
        success: true,
        grant: Some(DeviceGrant {
            route: DeviceRoute {
                session_id,
                username: user.into(),
                ssid,
                domain_id: 7,
                session_epoch: 1,
                ..DeviceRoute::default()
            },
            owner_id,
            expires_at_ms: WALL + 120_000,
            ..DeviceGrant::default()
        }),
        response_packet: heartbeat(user, ssid),
        ..DeviceAuthResponse::default()
    }
}

/// Proxies a login of `user`/`ssid` from `at` at `now` and answers it with
/// a grant of session `session_id` for account `owner_id`.
#[allow(clippy::too_many_arguments)]
fn login(
    e: &mut EdgeSessions,
    ids: &mut MessageIds,
    now: Instant,
    at: &str,
    owner_id: i64,
    user: &str,
    ssid: u8,
    session_id: u64,
) -> AuthOutcome {
    let identity = identity_key(user, ssid);
    let at = addr(at);
    let send = e
        .request_auth(
            ids,
            now,
            &identity,
            at,
            &at.ip().to_string(),
            &heartbeat(user, ssid),
        )
        .expect("proxied");
    let mut resp = grant(session_id, owner_id, user, ssid);
    resp.request_id = send.message_id;
    e.handle_auth_response(ids, now, WALL, resp)
}

fn policy(account: usize, prefix: usize) -> EdgeSessionsConfig {
    EdgeSessionsConfig {
        endpoints: EndpointPolicy {
            max_per_account: account,
            max_per_prefix: prefix,
            receive_after_ms: 2_000,
            exempt_loopback: false,
        },
        ..EdgeSessionsConfig::default()
    }
}

fn report_of(send: &crate::core::interconnect::ControlSend) -> DeviceSessionReport {
    send.decode().unwrap()
}

#[test]
fn a_ninth_endpoint_of_an_account_is_refused_like_on_a_single_node() {
    let t0 = crate::test_clock::origin();
    let mut ids = MessageIds::new();
    let mut e = EdgeSessions::new(policy(8, 32));
    for ssid in 1..=8u8 {
        let at = format!("192.0.{ssid}.1:4000");
        let out = login(
            &mut e,
            &mut ids,
            t0,
            &at,
            40,
            "alice",
            ssid,
            u64::from(ssid),
        );
        assert!(matches!(out, AuthOutcome::Installed { .. }), "{out:?}");
    }
    let out = login(&mut e, &mut ids, t0, "192.0.9.1:4000", 40, "alice", 9, 9);
    let AuthOutcome::EndpointLimit {
        addr: to,
        reply,
        request_len,
        report,
    } = out
    else {
        panic!("{out:?}");
    };
    assert_eq!(to, addr("192.0.9.1:4000"));
    // The single node's reject: code 3, too_many_devices.
    let p = decode(&reply).unwrap();
    assert_eq!(p.data[0], 3);
    assert_eq!(&p.data[1..], b"too_many_devices");
    assert!(reply.len() <= request_len + "too_many_devices".len() + 1);
    let r = report_of(&report);
    assert_eq!(
        (r.session_id, r.online, r.reason.as_str()),
        (9, false, "endpoint_limit")
    );
    assert_eq!(e.len(), 8);
    assert_eq!(e.counters().account_endpoint_limit_rejects, 1);
    // Another account is not affected; the same device logging in again
    // from a new port replaces its entry.
    assert!(matches!(
        login(&mut e, &mut ids, t0, "192.0.9.2:4000", 41, "bob", 1, 10),
        AuthOutcome::Installed { .. }
    ));
    assert!(matches!(
        login(&mut e, &mut ids, t0, "192.0.1.1:4001", 40, "alice", 1, 1),
        AuthOutcome::Installed { .. }
    ));
}

#[test]
fn a_full_prefix_evicts_the_largest_holder_and_refuses_it_more() {
    let t0 = crate::test_clock::origin();
    let mut ids = MessageIds::new();
    let mut e = EdgeSessions::new(policy(8, 3));
    for ssid in 1..=3u8 {
        let at = format!("198.51.100.{ssid}:1");
        let now = t0 + Duration::from_secs(u64::from(ssid));
        assert!(matches!(
            login(
                &mut e,
                &mut ids,
                now,
                &at,
                40,
                "alice",
                ssid,
                u64::from(ssid)
            ),
            AuthOutcome::Installed { .. }
        ));
    }
    // Alice holds the whole /24: one more of hers is refused (code 3).
    let out = login(&mut e, &mut ids, t0, "198.51.100.9:1", 40, "alice", 4, 4);
    let AuthOutcome::EndpointLimit { reply, .. } = out else {
        panic!("{out:?}");
    };
    assert_eq!(
        &decode(&reply).unwrap().data[1..],
        b"too_many_devices_from_network"
    );
    // Bob takes the place of alice's least recently heard endpoint.
    let out = login(&mut e, &mut ids, t0, "198.51.100.10:1", 41, "bob", 1, 5);
    let AuthOutcome::Installed { evicted, .. } = out else {
        panic!("{out:?}");
    };
    assert_eq!(evicted.len(), 1);
    assert_eq!(evicted[0].session.session_id(), 1);
    assert_eq!(evicted[0].reason, "endpoint_evicted");
    assert!(!report_of(evicted[0].report.as_ref().unwrap()).online);
    assert!(e.get("alice-1").is_none());
    assert_eq!(e.counters().prefix_endpoint_evictions, 1);
    assert_eq!(e.counters().prefix_endpoint_limit_rejects, 1);
}

#[test]
fn a_new_endpoint_receives_once_heard_again_after_the_wait() {
    let t0 = crate::test_clock::origin();
    let mut ids = MessageIds::new();
    let mut e = EdgeSessions::new(policy(8, 32));
    let out = login(&mut e, &mut ids, t0, "203.0.113.5:7000", 40, "alice", 1, 1);
    let AuthOutcome::Installed { receiving, .. } = out else {
        panic!("{out:?}");
    };
    assert!(!receiving);
    assert!(!e.get("alice-1").unwrap().receiving());
    let from = addr("203.0.113.5:7000");
    let touch = |e: &mut EdgeSessions, ids: &mut MessageIds, after_ms: u64| match e.touch(
        ids,
        t0 + Duration::from_millis(after_ms),
        WALL,
        "alice-1",
        from,
        true,
    ) {
        Touch::Live {
            started_receiving, ..
        } => started_receiving,
        Touch::NeedsAuth => panic!("not live"),
    };
    assert!(!touch(&mut e, &mut ids, 1_999));
    assert!(touch(&mut e, &mut ids, 2_000));
    assert!(!touch(&mut e, &mut ids, 7_000), "starts once");
    assert!(e.get("alice-1").unwrap().receiving());
    assert_eq!(e.counters().endpoints_heard_twice, 1);
    // Logging in again at the same address keeps receiving; loopback is
    // exempt when the policy says so.
    let out = login(&mut e, &mut ids, t0, "203.0.113.5:7000", 40, "alice", 1, 1);
    assert!(matches!(
        out,
        AuthOutcome::Installed {
            receiving: true,
            ..
        }
    ));
    let mut lo = EdgeSessions::new(EdgeSessionsConfig::default());
    let out = login(&mut lo, &mut ids, t0, "127.0.0.1:7000", 40, "alice", 2, 2);
    assert!(matches!(
        out,
        AuthOutcome::Installed {
            receiving: true,
            ..
        }
    ));
}

#[test]
fn icmp_unreachable_ends_the_session_and_reports_it() {
    let t0 = crate::test_clock::origin();
    let mut ids = MessageIds::new();
    let mut e = EdgeSessions::new(policy(8, 32));
    login(&mut e, &mut ids, t0, "203.0.113.5:7000", 40, "alice", 1, 1);
    let at = addr("203.0.113.5:7000");
    // A report older than the login is ignored; another port is not it.
    assert!(e
        .handle_unreachable(&mut ids, t0 - Duration::from_millis(1), WALL, at)
        .is_none());
    assert!(e
        .handle_unreachable(&mut ids, t0, WALL, addr("203.0.113.5:7001"))
        .is_none());
    let r = e.handle_unreachable(&mut ids, t0, WALL, at).unwrap();
    assert_eq!(r.reason, "endpoint_unreachable");
    assert!(!report_of(r.report.as_ref().unwrap()).online);
    assert!(e.is_empty());
    assert_eq!(e.counters().unreachable_sessions_ended, 1);
    // Its endpoint entry is free again.
    assert!(matches!(
        login(&mut e, &mut ids, t0, "203.0.113.5:7002", 40, "alice", 1, 2),
        AuthOutcome::Installed { .. }
    ));
}

#[test]
fn proxied_logins_are_budgeted_per_source_prefix_and_per_identity() {
    let t0 = crate::test_clock::origin();
    let mut ids = MessageIds::new();
    let mut e = EdgeSessions::new(policy(8, 32));
    let hb = heartbeat("x", 1);
    // 20 logins of distinct identities from one /24, then its budget is spent.
    for i in 0..20u8 {
        let who = identity_key("user", i + 1);
        let at = addr(&format!("198.51.100.{}:1", i + 1));
        assert!(e.request_auth(&mut ids, t0, &who, at, "ip", &hb).is_some());
    }
    let at = addr("198.51.100.200:1");
    assert!(e
        .request_auth(&mut ids, t0, "user-99", at, "ip", &hb)
        .is_none());
    assert_eq!(e.counters().auth_prefix_drops, 1);
    // One identity from one network: 5 at once, then its budget there is
    // spent.
    let mut sent = 0;
    for n in 0..10u8 {
        let at = addr(&format!("192.0.7.{}:1", n + 1));
        if let Some(send) = e.request_auth(&mut ids, t0, "ivan-42", at, "ip", &hb) {
            sent += 1;
            let failed = DeviceAuthResponse {
                request_id: send.message_id,
                ..DeviceAuthResponse::default()
            };
            e.handle_auth_response(&mut ids, t0, WALL, failed);
        }
    }
    assert_eq!(sent, 5);
    assert_eq!(e.counters().auth_identity_drops, 5);
    // The same identity from another network is not locked out by them,
    // nor is another identity; the budgets refill (6 a minute).
    assert!(e
        .request_auth(&mut ids, t0, "ivan-42", addr("192.0.60.1:1"), "ip", &hb)
        .is_some());
    assert!(e
        .request_auth(&mut ids, t0, "carol-1", addr("192.0.50.1:1"), "ip", &hb)
        .is_some());
    let later = t0 + Duration::from_secs(10);
    assert!(e
        .request_auth(&mut ids, later, "ivan-42", addr("192.0.7.99:1"), "ip", &hb)
        .is_some());
    // Exempt sources are not budgeted.
    let mut lo = EdgeSessions::new(EdgeSessionsConfig::default());
    for i in 0..50u8 {
        let who = identity_key("bench", i + 1);
        assert!(lo
            .request_auth(&mut ids, t0, &who, addr("127.0.0.1:9"), "ip", &hb)
            .is_some());
    }
}

#[test]
fn proxied_logins_stay_within_the_centres_device_auth_budget() {
    let t0 = crate::test_clock::origin();
    let mut ids = MessageIds::new();
    let hb = heartbeat("x", 1);
    // Exempt sources too: the budget is the centre's, not the source's.
    let mut e = EdgeSessions::new(EdgeSessionsConfig::default());
    let mut try_at = |e: &mut EdgeSessions, at: Instant, n: u32, from: u32| {
        (from..from + n)
            .filter(|i| {
                let who = format!("bench{i}-1");
                e.request_auth(&mut ids, at, &who, addr("127.0.0.1:9"), "ip", &hb)
                    .is_some()
            })
            .count() as u32
    };
    // A burst sends DEVICE_AUTH_BURST at once, and no more, without holding
    // the refused ones pending (their next heartbeat tries again).
    assert_eq!(try_at(&mut e, t0, 80, 0), DEVICE_AUTH_BURST);
    assert_eq!(
        e.counters().auth_rate_drops,
        80 - u64::from(DEVICE_AUTH_BURST)
    );
    assert_eq!(e.pending(), DEVICE_AUTH_BURST as usize);
    // Requests all through the next second: at most the centre's 500 of
    // them are sent (the refill and the banked burst).
    let second = t0 + Duration::from_secs(1);
    let sent: u32 = (0..1_000u32)
        .map(|ms| {
            try_at(
                &mut e,
                second + Duration::from_millis(u64::from(ms)),
                1,
                10_000 + ms,
            )
        })
        .sum();
    assert!(sent <= 500, "{sent}");
    assert!(sent >= DEVICE_AUTH_PER_S, "{sent}");
}

#[test]
fn a_login_forged_from_another_address_does_not_hold_the_devices_own() {
    let t0 = crate::test_clock::origin();
    let mut ids = MessageIds::new();
    let hb = heartbeat("x", 1);
    let mut e = EdgeSessions::new(policy(8, 32));
    let forged = addr("203.0.113.9:1");
    let real = addr("198.51.100.7:1");
    assert!(e
        .request_auth(&mut ids, t0, "bob-45", forged, "ip", &hb)
        .is_some());
    // The forged request is pending: the real device's is sent all the same.
    assert!(e
        .request_auth(&mut ids, t0, "bob-45", real, "ip", &hb)
        .is_some());
    // Its own retry while its request is pending is not.
    assert!(e
        .request_auth(&mut ids, t0, "bob-45", real, "ip", &hb)
        .is_none());
    assert_eq!(e.counters().auth_pending_drops, 1);
    assert_eq!(e.pending(), 2);
}
