//! The server's maximum talk time per over (`policy/floor.rs`).

use super::*;

/// alice sends a small voice frame every 800 ms (and a heartbeat every
/// 4 s): at the defaults she holds the floor for 120 s, loses it, and bob's
/// voice then reaches her; she cannot retake it for the 5 s hold-off.
#[test]
fn a_floor_hog_is_cut_at_max_talk_and_others_get_the_floor() {
    let mut s = Sim::new();
    s.login("127.0.0.1:1", "alice", 7);
    s.login("127.0.0.2:1", "bob", 1);
    let mut t = 0;
    while t < 120_000 {
        if t % 4_000 == 0 {
            s.send("127.0.0.1:1", &hb("alice", "Secret12", 7, None));
            s.send("127.0.0.2:1", &hb("bob", "Secret12", 1, None));
        }
        s.send("127.0.0.1:1", &media(PacketType::Voice, "alice", 7, b"a"));
        assert_eq!(s.targets(), vec![addr("127.0.0.2:1")], "{t}");
        s.advance(400);
        s.send("127.0.0.2:1", &media(PacketType::Voice, "bob", 1, b"b"));
        assert!(s.r.poll_frame().is_none(), "{t}");
        s.advance(400);
        t += 800;
    }
    assert_eq!(s.r.stats().floor_talk_limit_cuts, 0);
    s.send("127.0.0.1:1", &media(PacketType::Voice, "alice", 7, b"a"));
    assert!(s.r.poll_frame().is_none());
    assert_eq!(s.r.stats().floor_talk_limit_cuts, 1);
    s.advance(100);
    s.send("127.0.0.2:1", &media(PacketType::Voice, "bob", 1, b"b"));
    assert_eq!(s.targets(), vec![addr("127.0.0.1:1")]);
    // Held off (even with bob silent for more than 900 ms) until 5 s after the cut.
    s.advance(3_000);
    s.send("127.0.0.1:1", &media(PacketType::Voice, "alice", 7, b"a"));
    assert!(s.r.poll_frame().is_none());
    assert_eq!(s.r.stats().floor_holdoff_drops, 1);
    s.advance(1_901);
    s.send("127.0.0.1:1", &media(PacketType::Voice, "alice", 7, b"a"));
    assert_eq!(s.targets(), vec![addr("127.0.0.2:1")]);
}

#[test]
fn max_talk_and_holdoff_are_configurable_and_validated() {
    let bad = SessionConfig {
        floor_max_talk_s: 9,
        ..SessionConfig::default()
    };
    assert_eq!(bad.validate().unwrap_err().field, "floor_max_talk_s");
    let bad = SessionConfig {
        floor_holdoff_ms: 60_001,
        ..SessionConfig::default()
    };
    assert_eq!(bad.validate().unwrap_err().field, "floor_holdoff_ms");
    let mut s = Sim::with(SessionConfig {
        floor_max_talk_s: 10,
        floor_holdoff_ms: 0,
        ..SessionConfig::default()
    });
    s.login("127.0.0.1:1", "alice", 7);
    s.login("127.0.0.2:1", "bob", 1);
    for _ in 0..=13 {
        s.send("127.0.0.1:1", &media(PacketType::Voice, "alice", 7, b"a"));
        s.advance(800);
    }
    assert_eq!(s.r.stats().floor_talk_limit_cuts, 1);
    // No hold-off: alice starts a new over at once.
    s.send("127.0.0.1:1", &media(PacketType::Voice, "alice", 7, b"a"));
    assert_eq!(s.r.stats().floor_holdoff_drops, 0);
    assert!(s.r.poll_frame().is_some());
}
