//! Fan-out admission at default settings, from Internet addresses (the
//! documentation ranges): the endpoint caps, the heard-twice rule and ICMP
//! unreachable reports (see `EndpointPolicy`).

use super::*;

/// A heartbeat from `src`; returns the reject (code, reason), or `None` if accepted.
fn try_login(s: &mut Sim, src: &str, name: &str, ssid: u8) -> Option<(u8, String)> {
    let reply = s.send(src, &hb(name, "Secret12", ssid, None)).unwrap();
    let p = decode(&reply).unwrap();
    if p.header.callsign_str().is_some_and(|c| !c.is_empty()) {
        None
    } else {
        Some(reject_of(&reply))
    }
}

/// The SSID of forged login `i` (2–99, then 106 on).
fn forged_ssid(i: usize) -> u8 {
    if i < 98 {
        2 + i as u8
    } else {
        106 + (i - 98) as u8
    }
}

fn voice_targets(s: &mut Sim, src: &str, name: &str, ssid: u8) -> Vec<SocketAddr> {
    s.send(src, &media(PacketType::Voice, name, ssid, b"opus"));
    s.targets()
}

#[test]
fn the_forged_heartbeat_attack_is_bounded_at_default_settings() {
    let mut s = Sim::new();
    let own = "198.51.100.1:4000";
    s.login(own, "alice", 1);
    // One heartbeat with the account's password from each of 100 forged
    // addresses, each in its own /24.
    let forged: Vec<String> = (0..100).map(|i| format!("10.{i}.0.1:5000")).collect();
    let mut refused = 0;
    for (i, src) in forged.iter().enumerate() {
        match try_login(&mut s, src, "alice", forged_ssid(i)) {
            None => {}
            Some(r) => {
                assert_eq!(r, (3, "too_many_devices".into()));
                refused += 1;
            }
        }
    }
    assert_eq!(refused, 93, "8 endpoints per account, the own one included");
    assert_eq!(s.r.stats().account_endpoint_limit_rejects, 93);
    // As written (one heartbeat each), no forged endpoint ever receives.
    for _ in 0..3 {
        assert_eq!(voice_targets(&mut s, own, "alice", 1), vec![]);
        s.advance(1_000);
    }
    // Kept alive with further forged heartbeats, at most the 7 admitted do.
    for (i, src) in forged.iter().enumerate() {
        s.r.handle_datagram(
            s.now,
            addr(src),
            &hb("alice", "Secret12", forged_ssid(i), None),
        );
        while s.r.poll_transmit().is_some() {}
        run_password_checks(&mut s.r, s.now);
        while s.r.poll_transmit().is_some() {}
    }
    let targets = voice_targets(&mut s, own, "alice", 1);
    assert_eq!(targets.len(), 7);
    assert!(targets
        .iter()
        .all(|t| t.ip().to_string().starts_with("10.")));
    // The 7 forged endpoints and the talker's own.
    assert_eq!(s.r.stats().endpoints_heard_twice, 8);
}

#[test]
fn a_device_receives_once_heard_again_two_seconds_after_login() {
    let mut s = Sim::new();
    s.login("198.51.100.1:4000", "alice", 1);
    s.login("192.0.2.10:4000", "bob", 1);
    let talk = |s: &mut Sim| voice_targets(s, "198.51.100.1:4000", "alice", 1);
    assert_eq!(talk(&mut s), vec![]);
    // Heard again too soon: still waiting.
    s.advance(1_999);
    assert!(s
        .send("192.0.2.10:4000", &hb("bob", "Secret12", 1, None))
        .is_some());
    assert_eq!(s.r.session_receives((2, 1)), Some(false));
    assert_eq!(talk(&mut s), vec![]);
    // A link box's next heartbeat, 5 s after its login.
    s.advance(3_001);
    assert!(s
        .send("192.0.2.10:4000", &hb("bob", "Secret12", 1, None))
        .is_some());
    assert_eq!(talk(&mut s), vec![addr("192.0.2.10:4000")]);
    // A new address starts over (here: after a MAC-less takeover 20 s on).
    s.advance(20_001);
    s.login("192.0.2.11:4000", "bob", 1);
    assert_eq!(s.r.session_receives((2, 1)), Some(false));
    // Any datagram from the bound endpoint counts as heard.
    s.advance(2_000);
    s.send(
        "192.0.2.11:4000",
        &media(PacketType::Text, "bob", 1, b"here"),
    );
    let _ = s.r.poll_frame();
    assert_eq!(s.r.session_receives((2, 1)), Some(true));
}

#[test]
fn an_honest_device_relogging_from_a_new_port_is_not_locked_out() {
    let mut s = Sim::new();
    let mac = "02:42:00:00:00:01";
    assert!(s
        .send("192.0.2.1:1000", &hb("alice", "Secret12", 1, Some(mac)))
        .is_some());
    for ssid in 2..=8 {
        s.login(&format!("198.51.100.{ssid}:1000"), "alice", ssid);
    }
    assert_eq!(
        try_login(&mut s, "203.0.113.9:1000", "alice", 9),
        Some((3, "too_many_devices".into()))
    );
    // The same box from a new port (its MAC proves the takeover, §3.5).
    s.advance(1_000);
    let reply = s
        .send("192.0.2.1:2000", &hb("alice", "Secret12", 1, Some(mac)))
        .unwrap();
    assert!(!decode(&reply)
        .unwrap()
        .header
        .callsign_str()
        .unwrap()
        .is_empty());
    assert_eq!(s.r.session_addr((1, 1)), Some(addr("192.0.2.1:2000")));
    // A device that went silent frees its entry at the liveness timeout.
    for _ in 0..6 {
        s.advance(4_000);
        for ssid in 1..=7 {
            let src = if ssid == 1 {
                "192.0.2.1:2000".to_owned()
            } else {
                format!("198.51.100.{ssid}:1000")
            };
            let mac = (ssid == 1).then_some(mac);
            s.send(&src, &hb("alice", "Secret12", ssid, mac));
        }
    }
    assert_eq!(try_login(&mut s, "203.0.113.9:1000", "alice", 9), None);
}

/// Four accounts fill a /24 (8 endpoints each, kept alive); a newcomer of
/// a fifth account from that /24 is admitted by evicting the least recently
/// heard endpoint of the largest holders, which stops receiving at once
/// and, when it comes back, displaces another of the largest holders, not
/// the newcomer. An account at the largest share asking for more is
/// refused.
#[test]
fn the_network_cap_spans_accounts_and_evicts_from_the_largest_holder() {
    let mut s = Sim::new();
    let mut n = 0;
    for name in ["alice", "bob", "carol", "dave"] {
        for ssid in 1..=8 {
            n += 1;
            s.login(&format!("192.0.2.{n}:1000"), name, ssid);
        }
    }
    s.advance(2_500);
    // Every endpoint heard again (and so receiving), alice-1 first.
    let mut n = 0;
    for name in ["alice", "bob", "carol", "dave"] {
        for ssid in 1..=8 {
            n += 1;
            assert_eq!(
                try_login(&mut s, &format!("192.0.2.{n}:1000"), name, ssid),
                None
            );
        }
        s.advance(10);
    }
    assert!(voice_targets(&mut s, "192.0.2.9:1000", "bob", 1).contains(&addr("192.0.2.1:1000")));
    assert_eq!(try_login(&mut s, "192.0.2.200:1000", "erin", 8), None);
    assert_eq!(s.r.stats().prefix_endpoint_evictions, 1);
    assert_eq!(s.r.stats().prefix_endpoint_limit_rejects, 0);
    // Evicted: offline as far as fan-out goes, counted until its session ends.
    assert_eq!(s.r.session_addr((1, 1)), None);
    assert_eq!(s.r.online(), 33);
    s.advance(1_000);
    assert!(!voice_targets(&mut s, "192.0.2.9:1000", "bob", 1).contains(&addr("192.0.2.1:1000")));
    // alice-1's next heartbeat ends its session and logs it in anew: alice
    // holds 7 < 8, so it displaces bob-1 (the least recently heard of
    // bob, carol and dave), never erin.
    assert_eq!(try_login(&mut s, "192.0.2.1:1000", "alice", 1), None);
    assert_eq!(s.r.stats().evicted_sessions_ended, 1);
    assert_eq!(s.r.stats().prefix_endpoint_evictions, 2);
    assert_eq!(s.r.session_addr((1, 1)), Some(addr("192.0.2.1:1000")));
    assert_eq!(s.r.session_addr((2, 1)), None);
    assert_eq!(try_login(&mut s, "192.0.2.200:1000", "erin", 8), None);
    assert_eq!(s.r.stats().evicted_sessions_ended, 1, "erin kept her place");
    // carol holds 8, as many as anyone: her ninth endpoint is refused (by
    // the account cap first, as before; the prefix rule is in
    // `endpoint_caps.rs`).
    assert_eq!(
        try_login(&mut s, "192.0.2.201:1000", "carol", 9),
        Some((3, "too_many_devices".into()))
    );
    // Another /24 is not affected.
    assert_eq!(try_login(&mut s, "192.0.3.1:1000", "erin", 7), None);
    assert_eq!(s.r.stats().prefix_endpoint_evictions, 2);
}

#[test]
fn loopback_sources_are_exempt_by_default() {
    let mut s = Sim::new();
    for ssid in 1..=20 {
        s.login(&format!("127.0.0.{ssid}:1"), "alice", ssid);
    }
    assert_eq!(voice_targets(&mut s, "127.0.0.1:1", "alice", 1).len(), 19);
    let strict = SessionConfig {
        endpoints: crate::model::EndpointPolicy {
            exempt_loopback: false,
            ..Default::default()
        },
        ..SessionConfig::default()
    };
    let mut s = Sim::with(strict);
    s.login("127.0.0.1:1", "alice", 1);
    assert_eq!(s.r.session_receives((1, 1)), Some(false));
}

#[test]
fn unreachable_ends_every_session_at_that_endpoint() {
    let mut s = Sim::new();
    let shared = "192.0.2.7:9000";
    s.login(shared, "alice", 1);
    s.login(shared, "bob", 1);
    s.login("198.51.100.1:1", "carol", 1);
    s.advance(100);
    s.r.handle_unreachable(s.now, addr("192.0.2.7:9001"));
    assert_eq!(s.r.online(), 3, "another port of the host is not affected");
    s.r.handle_unreachable(s.now, addr(shared));
    assert_eq!(s.r.online(), 1);
    assert_eq!(s.r.stats().unreachable_sessions_ended, 2);
    // A report older than a new login at that address does not end it.
    let read_at = s.now;
    s.advance(100);
    s.login(shared, "alice", 1);
    s.r.handle_unreachable(read_at, addr(shared));
    assert_eq!(s.r.session_addr((1, 1)), Some(addr(shared)));
    // Logging in again there contradicted the first report, so a new one
    // ends the session only after the endpoint has gone silent; its data is
    // refused once it is gone.
    s.advance(6_000);
    s.r.handle_unreachable(s.now, addr(shared));
    s.send(shared, &media(PacketType::Voice, "alice", 1, b"x"));
    assert_eq!(s.r.stats().unknown_device_drops, 1);
}

/// Forged ICMP reports (anyone who can forge a UDP source can forge one)
/// against a link box that keeps its 5 s heartbeat: the first report costs
/// it the audio until its next heartbeat, which logs it in and receiving
/// again at once; later reports are ignored while it talks. Once it really
/// goes silent, a report ends it again.
#[test]
fn forged_unreachable_reports_cannot_keep_a_live_device_deaf() {
    let mut s = Sim::new();
    let boxed = "192.0.2.50:7000";
    s.login(boxed, "alice", 1);
    s.login("198.51.100.1:1", "bob", 1);
    s.advance(2_000);
    s.login(boxed, "alice", 1);
    assert_eq!(s.r.session_receives((1, 1)), Some(true));
    // One forged report a second for 60 s, the box heartbeating every 5 s.
    let mut received = 0;
    for second in 0..60u64 {
        s.r.handle_unreachable(s.now, addr(boxed));
        if second % 5 == 4 {
            let _ = s.send(boxed, &hb("alice", "Secret12", 1, None));
        }
        if voice_targets(&mut s, "198.51.100.1:1", "bob", 1).contains(&addr(boxed)) {
            received += 1;
        }
        s.advance(1_000);
    }
    let st = s.r.stats();
    assert_eq!(
        st.unreachable_sessions_ended, 1,
        "only the first report is believed"
    );
    assert_eq!(st.unreachable_contradicted, 1);
    assert!(st.unreachable_reports_ignored >= 50, "{st:?}");
    assert_eq!(
        received, 56,
        "deaf from the first report to the heartbeat at 4 s"
    );
    // The box goes silent (its last heartbeat was 1 s ago); its port closed
    // for real: the next report after the trusted silence ends it.
    s.advance(4_000);
    s.r.handle_unreachable(s.now, addr(boxed));
    assert_eq!(
        s.r.session_addr((1, 1)),
        Some(addr(boxed)),
        "silent 5 s only"
    );
    s.advance(1_500);
    s.r.handle_unreachable(s.now, addr(boxed));
    assert_eq!(s.r.session_addr((1, 1)), None);
    assert_eq!(s.r.stats().unreachable_sessions_ended, 2);
}

#[test]
fn receive_wait_must_end_before_the_offline_timeout() {
    let mut c = SessionConfig::default();
    c.endpoints.receive_after_ms = 20_000;
    assert_eq!(c.validate().unwrap_err().field, "receive_after_ms");
    c.endpoints.receive_after_ms = 15_001;
    c.offline_timeout_ms = 60_000;
    assert_eq!(c.validate().unwrap_err().field, "receive_after_ms");
    c.endpoints = crate::model::EndpointPolicy {
        max_per_account: 249,
        ..Default::default()
    };
    assert_eq!(c.validate().unwrap_err().field, "max_per_account");
}
