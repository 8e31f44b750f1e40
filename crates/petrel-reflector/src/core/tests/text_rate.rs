//! The per-device Type 4 budget: texts beyond it are neither forwarded nor
//! stored, and voice never spends it.

use super::*;

fn drain_texts(s: &mut Sim) -> (usize, usize) {
    let frames = std::iter::from_fn(|| s.r.poll_frame()).count();
    let stored = std::iter::from_fn(|| s.r.poll_event())
        .filter(|e| matches!(e, StoreEvent::Text { .. }))
        .count();
    (frames, stored)
}

#[test]
fn texts_beyond_the_device_budget_are_dropped_and_counted() {
    let mut s = Sim::new();
    s.login("127.0.0.1:1", "alice", 7);
    s.login("127.0.0.2:1", "bob", 1);
    drain_texts(&mut s);
    // Defaults: a burst of 5, then 30 a minute (one every 2 s).
    for i in 0..12u8 {
        s.send(
            "127.0.0.1:1",
            &media(PacketType::Text, "alice", 7, &[b'a' + i]),
        );
    }
    assert_eq!(drain_texts(&mut s), (5, 5));
    assert_eq!(s.r.stats().text_rate_drops, 7);
    assert_eq!(s.r.stats().text_frames, 5);
    // Voice does not spend the text budget and is not limited by it.
    for _ in 0..20 {
        s.send("127.0.0.1:1", &media(PacketType::Voice, "alice", 7, b"v"));
    }
    assert_eq!(s.r.stats().voice_frames, 20);
    assert_eq!(s.r.stats().text_rate_drops, 7);
    std::iter::from_fn(|| s.r.poll_frame()).count();
    // Another device has its own budget.
    s.send("127.0.0.2:1", &media(PacketType::Text, "bob", 1, b"b"));
    assert_eq!(drain_texts(&mut s), (1, 1));
    // 1.9 s later not a whole token yet; at 2 s one more text.
    s.advance(1_900);
    s.send("127.0.0.1:1", &media(PacketType::Text, "alice", 7, b"x"));
    assert_eq!(drain_texts(&mut s), (0, 0));
    s.advance(200);
    s.send("127.0.0.1:1", &media(PacketType::Text, "alice", 7, b"y"));
    s.send("127.0.0.1:1", &media(PacketType::Text, "alice", 7, b"z"));
    assert_eq!(drain_texts(&mut s), (1, 1));
    assert_eq!(s.r.stats().text_rate_drops, 9);
}

#[test]
fn text_budget_follows_the_configuration() {
    let mut s = Sim::with(SessionConfig {
        text_per_minute: 600,
        text_burst: 1,
        ..SessionConfig::default()
    });
    s.login("127.0.0.1:1", "alice", 7);
    s.login("127.0.0.2:1", "bob", 1);
    drain_texts(&mut s);
    let mut forwarded = 0;
    // 20 a second for 3 s against a budget of 10 a second: about every
    // other one fits (±1 for where the refills fall between sends).
    for _ in 0..60 {
        s.send("127.0.0.1:1", &media(PacketType::Text, "alice", 7, b"t"));
        forwarded += drain_texts(&mut s).0;
        s.advance(50);
    }
    assert!((29..=31).contains(&forwarded), "{forwarded}");
    assert_eq!(s.r.stats().text_rate_drops, 60 - forwarded as u64);
}
