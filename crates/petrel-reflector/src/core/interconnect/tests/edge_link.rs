//! The edge's link policy (§6.1): fail closed until ready, local-only
//! grace with an edge-local floor, removal after the grace.

use std::time::Duration;

use super::*;

fn ms(n: u64) -> Duration {
    Duration::from_millis(n)
}

/// §11: control loss with a 50 ms grace: local traffic allowed at 40 ms,
/// denied at 60 ms, then the session is removed (once).
#[test]
fn grace_of_50ms() {
    let t0 = crate::test_clock::origin();
    let mut l = EdgeLink::new(ms(50), 16);
    l.attached();
    l.ready();
    assert_eq!(l.packet_policy(t0), PacketPolicy::Normal);
    l.detached(t0);
    assert_eq!(l.state(), LinkState::Disconnected(t0));
    assert!(!l.allows_new_auth());
    assert_eq!(l.poll_timeout(), Some(t0 + ms(50)));
    assert_eq!(l.packet_policy(t0 + ms(40)), PacketPolicy::LocalOnly);
    assert!(l.local_voice(t0 + ms(40), 7, 1));
    assert!(!l.handle_timeout(t0 + ms(49)));
    assert_eq!(l.packet_policy(t0 + ms(60)), PacketPolicy::Drop);
    assert!(!l.local_voice(t0 + ms(60), 7, 1));
    assert!(l.handle_timeout(t0 + ms(60)));
    assert!(!l.handle_timeout(t0 + ms(70)));
    assert_eq!(l.state(), LinkState::Expired);
    assert_eq!(l.poll_timeout(), None);
    assert_eq!(l.counters().grace_expiries, 1);

    // With the session table: the expiry removes every session.
    let mut ids = MessageIds::new();
    let mut sessions = EdgeSessions::new(EdgeSessionsConfig::default());
    let r = sessions
        .request_auth(&mut ids, t0, "alice-7", addr("10.0.0.1:1"), "ip", b"x")
        .unwrap()
        .message_id;
    let mut grant = crate::codec::interconnect::messages::DeviceGrant::default();
    grant.route.session_id = 5;
    grant.route.username = "alice".into();
    grant.route.ssid = 7;
    grant.expires_at_ms = WALL + 120_000;
    sessions.handle_auth_response(
        &mut ids,
        t0,
        WALL,
        crate::codec::interconnect::messages::DeviceAuthResponse {
            request_id: r,
            success: true,
            grant: Some(grant),
            ..Default::default()
        },
    );
    let gone = sessions.remove_all(&mut ids, WALL, removal_reason::CONTROL_UNAVAILABLE);
    assert_eq!(gone.len(), 1);
    assert_eq!(gone[0].reason, "control_unavailable");
}

/// The edge-local floor: first talker wins, freed after 900 ms idle.
#[test]
fn local_floor_is_half_duplex() {
    let t0 = crate::test_clock::origin();
    let mut l = EdgeLink::new(DISCONNECTED_LOCAL_GRACE, 16);
    l.ready();
    l.detached(t0);
    assert!(l.local_voice(t0, 7, 1));
    assert!(!l.local_voice(t0 + ms(100), 7, 2));
    assert!(l.local_voice(t0 + ms(100), 8, 2));
    assert!(l.local_voice(t0 + ms(800), 7, 1));
    assert!(!l.local_voice(t0 + ms(1699), 7, 2));
    assert!(l.local_voice(t0 + ms(1700), 7, 2));
    assert!(!l.local_voice(t0 + ms(1800), 7, 1));
    assert_eq!(l.counters().local_floor_drops, 3);
    assert_eq!(l.counters().local_voice, 4);
}

/// Fail closed: nothing before the first ready, nothing while attached
/// but not ready; a failed reconnect does not restart the grace; an
/// attached link is not expired; ready ends the grace.
#[test]
fn fail_closed_states_and_grace_clock() {
    let t0 = crate::test_clock::origin();
    let s = Duration::from_secs;
    let mut l = EdgeLink::new(DISCONNECTED_LOCAL_GRACE, 16);
    assert_eq!(l.state(), LinkState::Starting);
    assert_eq!(l.packet_policy(t0), PacketPolicy::Drop);
    l.attached();
    assert_eq!(l.packet_policy(t0), PacketPolicy::Drop);
    assert!(!l.allows_new_auth());
    l.detached(t0);
    assert_eq!(l.state(), LinkState::Starting);
    assert_eq!(l.poll_timeout(), None);
    l.attached();
    l.ready();
    assert!(l.allows_new_auth());
    l.not_ready();
    assert_eq!(l.state(), LinkState::Attached);
    assert_eq!(l.packet_policy(t0), PacketPolicy::Drop);
    l.ready();
    l.detached(t0);
    l.attached();
    assert_eq!(l.packet_policy(t0 + s(5)), PacketPolicy::Drop);
    assert!(!l.handle_timeout(t0 + s(20)));
    l.detached(t0 + s(6));
    assert_eq!(l.state(), LinkState::Disconnected(t0));
    assert_eq!(l.packet_policy(t0 + s(14)), PacketPolicy::LocalOnly);
    assert!(l.handle_timeout(t0 + s(15)));
    l.attached();
    l.ready();
    assert_eq!(l.state(), LinkState::Ready);
    l.detached(t0 + s(30));
    assert_eq!(l.poll_timeout(), Some(t0 + s(45)));
    assert_eq!(l.counters().fail_closed_drops, 4);
}

#[test]
fn local_floors_are_bounded() {
    let t0 = crate::test_clock::origin();
    let mut l = EdgeLink::new(DISCONNECTED_LOCAL_GRACE, 2);
    l.ready();
    l.detached(t0);
    for d in 1..=4u64 {
        assert!(l.local_voice(t0 + ms(d), d, d));
    }
    assert_eq!(l.counters().floor_evictions, 2);
    // Domain 1 was evicted: another talker may take it.
    assert!(l.local_voice(t0 + ms(10), 1, 99));
    // Idle floors are swept.
    l.handle_timeout(t0 + ms(2000));
    assert!(l.local_voice(t0 + ms(2000), 4, 98));
}
