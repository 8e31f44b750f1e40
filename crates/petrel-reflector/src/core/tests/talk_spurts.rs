//! Talk spurts for the dashboard (`talk_spurts.rs`) as the core emits them,
//! and the online sessions per group and kind.

use super::*;
use crate::model::DeviceKind;

/// alice talks three packets 120 ms apart: one start when her first packet
/// wins the floor, one end 600 ms after her last; bob, refused the floor
/// meanwhile, and text start no spurt.
#[test]
fn forwarded_voice_starts_and_ends_a_spurt() {
    let mut s = Sim::new();
    s.r.set_wall_clock(s.now, 1_000_000);
    s.login("127.0.0.1:1", "alice", 7);
    s.login("127.0.0.2:1", "bob", 1);
    for i in 0..3 {
        s.send("127.0.0.1:1", &media(PacketType::Voice, "alice", 7, b"a"));
        if i == 1 {
            s.send("127.0.0.2:1", &media(PacketType::Voice, "bob", 1, b"b"));
            s.send("127.0.0.2:1", &media(PacketType::Text, "bob", 1, b"hi"));
        }
        if i < 2 {
            s.advance(120);
        }
    }
    let start = s.r.poll_talk_spurt().expect("a start");
    assert_eq!(
        (start.phase, start.device, start.kind, start.group_id),
        (SpurtPhase::Started, (1, 7), DeviceKind::Udp, 999)
    );
    assert_eq!(start.started_unix_ms, 1_000_000);
    assert!(
        s.r.poll_talk_spurt().is_none(),
        "one start; bob had no floor"
    );
    assert!(s.r.poll_timeout() <= s.now + Duration::from_millis(601));
    s.advance(600);
    assert!(s.r.poll_talk_spurt().is_none());
    s.advance(1);
    let end = s.r.poll_talk_spurt().expect("an end");
    assert_eq!(
        (end.phase, end.device, end.duration_ms),
        (SpurtPhase::Ended, (1, 7), 240)
    );
    assert_eq!(s.r.stats().talk_spurts, 1);
}

/// A device that goes offline mid-spurt (here: its endpoint reported
/// unreachable) ends it at once.
#[test]
fn going_offline_ends_the_spurt() {
    let mut s = Sim::new();
    s.login("127.0.0.1:1", "alice", 7);
    s.send("127.0.0.1:1", &media(PacketType::Voice, "alice", 7, b"a"));
    assert_eq!(
        s.r.poll_talk_spurt().map(|e| e.phase),
        Some(SpurtPhase::Started)
    );
    s.advance(100);
    s.r.handle_unreachable(s.now, addr("127.0.0.1:1"));
    assert_eq!(s.r.online(), 0);
    assert_eq!(
        s.r.poll_talk_spurt().map(|e| e.phase),
        Some(SpurtPhase::Ended)
    );
}

#[test]
fn sessions_are_counted_per_group_and_kind() {
    let mut m = Membership::default();
    let member = |port: u16, kind| Member {
        addr: addr(&format!("127.0.0.1:{port}")),
        kind,
        receives: true,
    };
    m.set((1, 1), 5, member(1, DeviceKind::Udp));
    m.set((2, 1), 5, member(2, DeviceKind::Ghost));
    m.set((3, 1), 5, member(3, DeviceKind::Udp));
    m.set((4, 1), 2, member(4, DeviceKind::WebSocket));
    let counts = |m: &Membership| {
        m.sessions_per_group()
            .iter()
            .map(|g| (g.group_id, g.udp, g.ghost, g.websocket))
            .collect::<Vec<_>>()
    };
    assert_eq!(counts(&m), [(2, 0, 0, 1), (5, 2, 1, 0)]);
    // A move and a departure.
    m.set((3, 1), 2, member(3, DeviceKind::Udp));
    m.remove((4, 1));
    assert_eq!(counts(&m), [(2, 1, 0, 0), (5, 1, 1, 0)]);
}
