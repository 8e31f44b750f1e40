//! Password checks leaving the core: bounds, per-device ordering, expiry.

use super::*;

#[test]
fn password_check_budget_bounds_argon2_work() {
    let now = crate::test_clock::origin();
    let cfg = SessionConfig {
        password_checks_per_s: 3,
        ..SessionConfig::default()
    };
    let mut r = Reflector::new(cfg, dir(), now);
    let mut reasons = Vec::new();
    // Wrong passwords from many sources, each a fresh Argon2 verification.
    for i in 0..5u8 {
        r.handle_datagram(
            now,
            SocketAddr::from(([127, 0, 9, i], 1)),
            &hb("alice", "Wrong123", 7 + i, None),
        );
        run_password_checks(&mut r, now);
        reasons.extend(r.poll_transmit().map(|t| reject_of(&t.payload).1));
    }
    // Three checks ran; the other two wait in line for the global budget.
    assert_eq!(reasons, ["invalid_password"; 3]);
    assert_eq!(r.stats().password_checks_queued, 2);
    r.handle_timeout(now);
    assert!(r.poll_password_check().is_none());
    // A second later the budget has refilled: their turn comes.
    let later = now + Duration::from_secs(1);
    r.handle_timeout(later);
    run_password_checks(&mut r, later);
    let reasons: Vec<String> = std::iter::from_fn(|| r.poll_transmit())
        .map(|t| reject_of(&t.payload).1)
        .collect();
    assert_eq!(reasons, ["invalid_password"; 2]);
    assert_eq!(r.stats().password_check_budget_drops, 0);
    // Another second later the budget has refilled again.
    let later = later + Duration::from_secs(1);
    r.handle_datagram(
        later,
        addr("127.0.0.1:1"),
        &hb("alice", "Secret12", 7, None),
    );
    run_password_checks(&mut r, later);
    assert!(!decode(&r.poll_transmit().unwrap().payload)
        .unwrap()
        .header
        .callsign_str()
        .unwrap()
        .is_empty());
}

#[test]
fn password_checks_leave_the_core_bounded_and_one_per_device() {
    let now = crate::test_clock::origin();
    let cfg = SessionConfig {
        password_checks_in_flight: 2,
        ..SessionConfig::default()
    };
    let mut r = Reflector::new(cfg, dir(), now);
    let alice = addr("127.0.0.1:1");
    r.handle_datagram(now, alice, &hb("alice", "Secret12", 7, None));
    // Nothing is answered until the runtime reports the check.
    assert!(r.poll_transmit().is_none());
    let first = r.poll_password_check().expect("a check for alice");
    // More heartbeats from the same device wait for that check: dropped, counted.
    for _ in 0..3 {
        r.handle_datagram(now, alice, &hb("alice", "Secret12", 7, None));
    }
    assert_eq!(r.stats().password_check_pending_drops, 3);
    assert!(r.poll_password_check().is_none() && r.poll_transmit().is_none());
    // Another device gets the second slot; a third device finds none.
    r.handle_datagram(now, addr("127.0.0.2:1"), &hb("bob", "Secret12", 1, None));
    let second = r.poll_password_check().expect("a check for bob");
    r.handle_datagram(now, addr("127.0.0.3:1"), &hb("carol", "Secret12", 1, None));
    assert_eq!(
        reject_of(&r.poll_transmit().unwrap().payload).1,
        "server_busy"
    );
    assert_eq!(r.stats().password_checks_in_flight_drops, 1);
    assert_eq!(r.password_checks_in_flight(), 2);

    // Results may come back in any order; each completes its own login.
    r.handle_password_check(now, second.id(), false);
    let t = r.poll_transmit().unwrap();
    assert_eq!(t.dst, addr("127.0.0.2:1"));
    assert_eq!(reject_of(&t.payload).1, "invalid_password");
    assert!(first.run());
    r.handle_password_check(now, first.id(), true);
    let t = r.poll_transmit().unwrap();
    assert_eq!(t.dst, alice);
    assert!(!decode(&t.payload)
        .unwrap()
        .header
        .callsign_str()
        .unwrap()
        .is_empty());
    assert_eq!(r.session_addr((1, 7)), Some(alice));
    assert_eq!((r.stats().logins, r.password_checks_in_flight()), (1, 0));
    // The password is now cached: the next login of alice needs no check.
    r.handle_datagram(now, addr("127.0.0.1:2"), &hb("alice", "Secret12", 8, None));
    assert!(r.poll_password_check().is_none());
    assert!(!reject_of_or_ok(&r.poll_transmit().unwrap().payload));
    // (Link-box config pushes follow the reply.)
    while r.poll_transmit().is_some() {}

    // A result nobody waits for is counted; a lost one is abandoned after 10 s.
    r.handle_password_check(now, 9_999, true);
    assert_eq!(r.stats().password_check_results_unknown, 1);
    r.handle_datagram(now, addr("127.0.0.2:1"), &hb("bob", "Secret12", 1, None));
    let lost = r.poll_password_check().expect("a check for bob");
    let later = now + Duration::from_secs(16);
    r.handle_timeout(later);
    assert_eq!(r.stats().password_checks_abandoned, 1);
    r.handle_password_check(later, lost.id(), true);
    assert_eq!(r.stats().password_check_results_unknown, 2);
    assert!(r.poll_transmit().is_none());
    r.handle_datagram(later, addr("127.0.0.2:1"), &hb("bob", "Secret12", 1, None));
    assert!(r.poll_password_check().is_some(), "bob may retry");
}

/// Whether a heartbeat reply is a reject (empty callsign).
fn reject_of_or_ok(reply: &[u8]) -> bool {
    decode(reply).unwrap().header.callsign_str() == Some("")
}

#[test]
fn a_check_against_a_replaced_password_is_discarded() {
    let now = crate::test_clock::origin();
    let mut r = Reflector::new(SessionConfig::default(), dir(), now);
    r.handle_datagram(now, addr("127.0.0.1:1"), &hb("alice", "Secret12", 7, None));
    let check = r.poll_password_check().unwrap();
    // The store reload brings a new hash for alice before the result is back.
    let d = r.directory().clone();
    let mut users: Vec<UserRecord> = (1..=7).map(|i| d.user(i).unwrap().clone()).collect();
    users[0].device_password_hash = Some(hash_device_password("Other123", CHEAP).unwrap());
    r.replace_directory(Directory::new(
        users,
        vec![group(999, false)],
        vec![],
        vec![],
    ));
    r.handle_password_check(now, check.id(), check.run());
    assert_eq!(r.stats().password_checks_stale, 1);
    assert_eq!((r.stats().logins, r.online()), (0, 0));
    assert!(r.poll_transmit().is_none());
}

#[test]
fn devices_of_one_user_share_one_password_check() {
    let now = crate::test_clock::origin();
    let mut r = Reflector::new(SessionConfig::default(), dir(), now);
    // Two devices of alice log in at once with the same password: one check.
    r.handle_datagram(now, addr("127.0.0.1:1"), &hb("alice", "Secret12", 7, None));
    let check = r
        .poll_password_check()
        .expect("a check for alice's first device");
    r.handle_datagram(now, addr("127.0.0.1:2"), &hb("alice", "Secret12", 8, None));
    assert!(r.poll_password_check().is_none(), "a second Argon2 check");
    assert_eq!(
        reject_of(&r.poll_transmit().unwrap().payload).1,
        "server_busy"
    );
    assert_eq!(r.stats().password_checks_coalesced, 1);
    // A different password is not the same check: it gets its own.
    r.handle_datagram(now, addr("127.0.0.1:3"), &hb("alice", "Wrong123", 9, None));
    assert!(r.poll_password_check().is_some());
    // Once the first check succeeds, the retry of the second device is verified
    // from the cache, without a check.
    assert!(check.run());
    r.handle_password_check(now, check.id(), true);
    while r.poll_transmit().is_some() {}
    r.handle_datagram(now, addr("127.0.0.1:2"), &hb("alice", "Secret12", 8, None));
    assert!(r.poll_password_check().is_none());
    assert!(!reject_of_or_ok(&r.poll_transmit().unwrap().payload));
    assert_eq!(r.session_addr((1, 8)), Some(addr("127.0.0.1:2")));
}
