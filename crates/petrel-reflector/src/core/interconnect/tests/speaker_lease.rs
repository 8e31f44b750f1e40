//! Speaker leases (§3.10): the §11 lease timeline, the edge's claim,
//! buffer, block and renew rules, and a centre + two edges property.

use std::time::{Duration, Instant};

use proptest::prelude::*;

use crate::codec::interconnect::messages::SpeakerLease;
use crate::codec::interconnect::{NodeId, Subtype};

use super::*;

fn ms(n: u64) -> Duration {
    Duration::from_millis(n)
}

fn owner(n: &str, session_id: u64) -> LeaseOwner {
    LeaseOwner {
        node: node(n),
        control_session: 77,
        session_id,
        session_epoch: 1,
    }
}

/// Claims are not voice: an owner that renews every 400 ms without a
/// frame loses its lease [`SILENT_LEASE_LIMIT`] after the grant; since a
/// contender waited, it is held off the domain until the contender has
/// taken it (at most [`SILENT_LEASE_HOLDOFF`]). An owner that talks keeps
/// its lease through renewals.
#[test]
fn renewals_without_voice_do_not_hold_a_floor() {
    let t0 = crate::test_clock::origin();
    let mut ids = MessageIds::new();
    let mut l = LeaseTable::new(64);
    let evil = owner("edge-evil", 1);
    let honest = owner("edge-b", 2);
    let LeaseDecision::Grant { lease_id, .. } = l.claim(&mut ids, t0, evil, 7, 0, true) else {
        panic!()
    };
    let mut now = t0;
    while now + ms(400) < t0 + SILENT_LEASE_LIMIT {
        now += ms(400);
        assert!(matches!(
            l.claim(&mut ids, now, evil, 7, lease_id, true),
            LeaseDecision::Grant { .. }
        ));
        // The contender is told to come back no later than the silent limit.
        let LeaseDecision::Deny { retry_after_ms } = l.claim(&mut ids, now, honest, 7, 0, true)
        else {
            panic!("at {:?}", now - t0)
        };
        assert!(now + ms(u64::from(retry_after_ms)) <= t0 + SILENT_LEASE_LIMIT);
    }
    let end = t0 + SILENT_LEASE_LIMIT + ms(1);
    assert_eq!(l.holder(end, 7), None);
    // Re-claiming the moment it died is refused: its silent lease kept
    // a claimant waiting.
    let LeaseDecision::Deny { retry_after_ms } = l.claim(&mut ids, end, evil, 7, 0, true) else {
        panic!()
    };
    assert_eq!(
        u64::from(retry_after_ms),
        SILENT_LEASE_HOLDOFF.as_millis() as u64
    );
    assert_eq!(l.counters().silent_leases, 1);
    let LeaseDecision::Grant { lease_id, .. } = l.claim(&mut ids, end, honest, 7, 0, true) else {
        panic!()
    };
    assert_eq!(l.voice(end + ms(20), honest, 7, lease_id), Ok(()));
    // The contender took the domain: the bar is lifted.
    assert!(l.release(honest, 7, lease_id));
    assert!(matches!(
        l.claim(&mut ids, end + ms(40), evil, 7, 0, true),
        LeaseDecision::Grant { .. }
    ));

    // A talking owner renews and keeps the lease well past the limit.
    let LeaseDecision::Grant { lease_id, .. } = l.claim(&mut ids, t0, evil, 9, 0, true) else {
        panic!()
    };
    for step in 1..=20u64 {
        let now = t0 + ms(step * 200);
        assert_eq!(l.voice(now, evil, 9, lease_id), Ok(()));
        if step % 3 == 0 {
            assert!(matches!(
                l.claim(&mut ids, now, evil, 9, lease_id, true),
                LeaseDecision::Grant { .. }
            ));
        }
    }
    assert_eq!(
        l.holder(t0 + ms(4_000), 9).map(|(o, _)| o.node),
        Some(evil.node)
    );
}

/// With the single node's max-talk rule (10 s over, 5 s hold-off): a
/// talker renewing and talking every 120 ms loses the lease at 10 s — the
/// frame that reaches it is refused, its claims are denied until the
/// hold-off ends — while another talker may take the domain at once; the
/// cut talker competes again afterwards. Without a limit (§3.10) the same
/// over goes on.
#[test]
fn a_talk_limit_ends_a_long_over_and_holds_its_talker_off() {
    let t0 = crate::test_clock::origin();
    let mut ids = MessageIds::new();
    let mut l = LeaseTable::new(64);
    l.set_talk_limit(Some(TalkLimit {
        max_talk: Duration::from_secs(10),
        holdoff: Duration::from_secs(5),
    }));
    let a = owner("edge-a", 101);
    let b = owner("edge-b", 201);
    let LeaseDecision::Grant { lease_id, .. } = l.claim(&mut ids, t0, a, 7, 0, true) else {
        panic!()
    };
    let mut now = t0;
    while now < t0 + ms(9_960) {
        now += ms(120);
        assert_eq!(l.voice(now, a, 7, lease_id), Ok(()), "at {:?}", now - t0);
        if (now - t0).as_millis() % 720 == 0 {
            assert!(matches!(
                l.claim(&mut ids, now, a, 7, lease_id, true),
                LeaseDecision::Grant { .. }
            ));
        }
    }
    now += ms(120);
    assert_eq!(l.voice(now, a, 7, lease_id), Err(LeaseReject::TalkLimit));
    assert_eq!(l.counters().talk_limit_cuts, 1);
    assert_eq!(l.holder(now, 7), None);
    assert_eq!(
        l.claim(&mut ids, now + ms(100), a, 7, 0, true),
        LeaseDecision::Deny {
            retry_after_ms: 4_900
        }
    );
    assert_eq!(l.counters().holdoff_denies, 1);
    // Another talker (and another domain) is free at once.
    assert!(matches!(
        l.claim(&mut ids, now + ms(100), b, 7, 0, true),
        LeaseDecision::Grant { .. }
    ));
    assert!(matches!(
        l.claim(&mut ids, now + ms(100), a, 8, 0, true),
        LeaseDecision::Grant { .. }
    ));
    // After the hold-off the cut talker competes again (b went silent).
    assert!(matches!(
        l.claim(&mut ids, now + ms(5_000), a, 7, 0, true),
        LeaseDecision::Grant { .. }
    ));

    // A renewal claim past the limit ends the lease the same way.
    let mut l = LeaseTable::new(64);
    l.set_talk_limit(Some(TalkLimit {
        max_talk: Duration::from_secs(10),
        holdoff: Duration::from_secs(5),
    }));
    let LeaseDecision::Grant { lease_id, .. } = l.claim(&mut ids, t0, a, 7, 0, true) else {
        panic!()
    };
    let mut now = t0;
    while now < t0 + ms(9_500) {
        now += ms(500);
        assert!(matches!(
            l.claim(&mut ids, now, a, 7, lease_id, true),
            LeaseDecision::Grant { .. }
        ));
        assert_eq!(l.voice(now, a, 7, lease_id), Ok(()));
    }
    assert_eq!(
        l.claim(&mut ids, t0 + ms(10_010), a, 7, lease_id, true),
        LeaseDecision::Deny {
            retry_after_ms: 5_000
        }
    );
    assert_eq!(l.counters().talk_limit_cuts, 1);

    // Without a limit the over goes on.
    let mut l = LeaseTable::new(64);
    let LeaseDecision::Grant { lease_id, .. } = l.claim(&mut ids, t0, a, 7, 0, true) else {
        panic!()
    };
    let mut now = t0;
    while now < t0 + ms(30_000) {
        now += ms(120);
        assert_eq!(l.voice(now, a, 7, lease_id), Ok(()));
    }
    assert_eq!(l.counters().talk_limit_cuts, 0);
}

/// §11 lease timeline in domain 7.
#[test]
fn centre_lease_timeline() {
    let t0 = crate::test_clock::origin();
    let mut ids = MessageIds::new();
    let mut l = LeaseTable::new(64);
    let a = owner("edge-a", 101);
    let b = owner("edge-b", 201);
    let LeaseDecision::Grant { lease_id, ttl_ms } = l.claim(&mut ids, t0, a, 7, 0, true) else {
        panic!()
    };
    assert_eq!(ttl_ms, 1200);
    assert_ne!(lease_id, 0);
    assert_eq!(
        l.claim(&mut ids, t0 + ms(100), b, 7, 0, true),
        LeaseDecision::Deny {
            retry_after_ms: 800
        }
    );
    assert_eq!(l.voice(t0 + ms(500), a, 7, lease_id), Ok(()));
    assert_eq!(
        l.voice(t0 + ms(510), a, 7, lease_id + 1),
        Err(LeaseReject::WrongLeaseId)
    );
    assert_eq!(
        l.voice(t0 + ms(510), b, 7, lease_id),
        Err(LeaseReject::NotOwner)
    );
    // Last voice 500 ms, expiry 1700 ms: free at 1400 ms + ε.
    assert_eq!(
        l.claim(&mut ids, t0 + ms(1200), b, 7, 0, true),
        LeaseDecision::Deny {
            retry_after_ms: 200
        }
    );
    assert_eq!(
        l.claim(&mut ids, t0 + ms(1400), b, 7, 0, true),
        LeaseDecision::Deny { retry_after_ms: 0 }
    );
    let LeaseDecision::Grant {
        lease_id: second, ..
    } = l.claim(&mut ids, t0 + ms(1401), b, 7, 0, true)
    else {
        panic!()
    };
    assert_ne!(second, lease_id);
    assert_eq!(
        l.voice(t0 + ms(1402), a, 7, lease_id),
        Err(LeaseReject::NotOwner)
    );
    assert_eq!(l.holder(t0 + ms(1402), 7), Some((b, second)));
    assert_eq!(l.counters().expired, 1);
}

#[test]
fn centre_claim_rules() {
    let t0 = crate::test_clock::origin();
    let mut ids = MessageIds::new();
    let mut l = LeaseTable::new(64);
    let a = owner("edge-a", 101);
    assert_eq!(
        l.claim(&mut ids, t0, a, 7, 0, false),
        LeaseDecision::Deny { retry_after_ms: 0 }
    );
    assert!(l.is_empty());
    let LeaseDecision::Grant { lease_id, .. } = l.claim(&mut ids, t0, a, 7, 0, true) else {
        panic!()
    };
    // Renewal keeps the id; another id from the same owner is refused.
    assert_eq!(
        l.claim(&mut ids, t0 + ms(800), a, 7, lease_id, true),
        LeaseDecision::Grant {
            lease_id,
            ttl_ms: 1200
        }
    );
    assert_eq!(
        l.claim(&mut ids, t0 + ms(800), a, 7, lease_id + 5, true),
        LeaseDecision::Deny {
            retry_after_ms: 450
        }
    );
    // Another epoch of the same session is another owner.
    let newer = LeaseOwner {
        session_epoch: 2,
        ..a
    };
    assert!(matches!(
        l.claim(&mut ids, t0 + ms(900), newer, 7, 0, true),
        LeaseDecision::Deny { .. }
    ));
    // Each accepted frame refreshes it: alive until 3600 ms.
    assert_eq!(l.voice(t0 + ms(1600), a, 7, lease_id), Ok(()));
    assert_eq!(l.voice(t0 + ms(2400), a, 7, lease_id), Ok(()));
    assert_eq!(
        l.voice(t0 + ms(3601), a, 7, lease_id),
        Err(LeaseReject::NoLease)
    );
    assert!(LeaseTable::text_lease_ok(0));
    assert!(!LeaseTable::text_lease_ok(lease_id));
    // Exact release only.
    let LeaseDecision::Grant { lease_id, .. } = l.claim(&mut ids, t0 + ms(4000), a, 7, 0, true)
    else {
        panic!()
    };
    assert!(!l.release(a, 7, lease_id + 1));
    assert!(!l.release(owner("edge-b", 101), 7, lease_id));
    assert!(l.release(a, 7, lease_id));
    assert!(l.is_empty());
}

/// §11: releasing session 103 frees 1 of 5 domains; releasing node a
/// frees the other 4.
#[test]
fn centre_release_by_session_and_node() {
    let t0 = crate::test_clock::origin();
    let mut ids = MessageIds::new();
    let mut l = LeaseTable::new(64);
    for (i, s) in (101..=105).enumerate() {
        l.claim(&mut ids, t0, owner("a", s), i as u64 + 1, 0, true);
    }
    l.claim(&mut ids, t0, owner("b", 103), 9, 0, true);
    assert_eq!(l.release_session(node("a"), 103), 1);
    assert_eq!(l.release_node(node("a"), 78), 0);
    assert_eq!(l.release_node(node("a"), 77), 4);
    assert_eq!(l.len(), 1);
    assert_eq!(l.sweep(t0 + ms(1200)), 1);
    assert!(l.is_empty());
}

#[test]
fn centre_table_is_bounded_and_answers_claims() {
    let t0 = crate::test_clock::origin();
    let mut ids = MessageIds::new();
    let mut l = LeaseTable::new(2);
    l.claim(&mut ids, t0, owner("a", 1), 1, 0, true);
    l.claim(&mut ids, t0 + ms(10), owner("a", 2), 2, 0, true);
    l.claim(&mut ids, t0 + ms(20), owner("a", 3), 3, 0, true);
    assert_eq!(l.len(), 2);
    assert_eq!(l.counters().evictions, 1);
    assert!(l.holder(t0 + ms(20), 1).is_none());

    let claim = SpeakerLease {
        action: lease_action::CLAIM.into(),
        request_id: 42,
        session_id: 5,
        session_epoch: 1,
        domain_id: 9,
        ..SpeakerLease::default()
    };
    let reply = l
        .handle_message(&mut ids, t0, node("b"), 77, &claim, true)
        .unwrap();
    assert_eq!(reply.subtype, Subtype::SPEAKER_LEASE);
    let r: SpeakerLease = reply.decode().unwrap();
    assert_eq!(
        (r.action.as_str(), r.request_id, r.ttl_ms),
        ("grant", 42, 1200)
    );
    let reply = l
        .handle_message(&mut ids, t0, node("b"), 77, &claim, false)
        .unwrap();
    assert!(!String::from_utf8(reply.payload.clone())
        .unwrap()
        .contains("retry_after_ms"));
    assert_eq!(reply.decode::<SpeakerLease>().unwrap().action, "deny");
    let mut no_id = claim.clone();
    no_id.request_id = 0;
    assert!(l
        .handle_message(&mut ids, t0, node("b"), 77, &no_id, true)
        .is_none());
    assert_eq!(l.counters().invalid_claims, 1);
}

fn answer(claim: &ControlSend, action: &str, lease_id: u64, ttl: u32, retry: u32) -> SpeakerLease {
    let c: SpeakerLease = claim.decode().unwrap();
    assert_eq!(c.action, "claim");
    SpeakerLease {
        action: action.into(),
        lease_id,
        ttl_ms: ttl,
        retry_after_ms: retry,
        ..c
    }
}

fn claim_of(d: VoiceDecision<u32>) -> ControlSend {
    match d {
        VoiceDecision::Buffered { claim: Some(c) } => c,
        other => panic!("{other:?}"),
    }
}

/// §11: an edge grant releases its 2 buffered frames; the holder renews
/// once when ≤ 450 ms remain; other sessions are dropped.
#[test]
fn edge_grant_releases_buffer_and_renews() {
    let t0 = crate::test_clock::origin();
    let mut ids = MessageIds::new();
    let mut e: EdgeSpeaker<u32> = EdgeSpeaker::new(16);
    let claim = claim_of(e.handle_voice(&mut ids, t0, 11, 1, 7, 1));
    assert_eq!(claim.decode::<SpeakerLease>().unwrap().lease_id, 0);
    assert_eq!(
        e.handle_voice(&mut ids, t0 + ms(60), 11, 1, 7, 2),
        VoiceDecision::Buffered { claim: None }
    );
    assert_eq!(
        e.handle_voice(&mut ids, t0 + ms(90), 11, 1, 7, 3),
        VoiceDecision::Dropped(LeaseDrop::BufferFull)
    );
    assert_eq!(
        e.handle_voice(&mut ids, t0 + ms(90), 12, 1, 7, 9),
        VoiceDecision::Dropped(LeaseDrop::OtherTalker)
    );
    let rel = e
        .handle_answer(t0 + ms(100), &answer(&claim, "grant", 55, 5000, 0))
        .unwrap();
    assert_eq!(
        rel,
        Released {
            lease_id: 55,
            frames: vec![1, 2]
        }
    );
    // The talker keeps talking every 120 ms (an idle lease ends, see
    // `edge_idle_lease_starts_a_new_claim`).
    for (k, t) in (220..=1960).step_by(120).enumerate() {
        assert!(matches!(
            e.handle_voice(&mut ids, t0 + ms(t), 11, 1, 7, 100 + k as u32),
            VoiceDecision::Deliver {
                lease_id: 55,
                renew: None,
                ..
            }
        ));
    }
    // ttl clamped to 2400 ms: expires at 2500 ms; renew from 2050 ms.
    assert_eq!(e.holder(t0 + ms(2499), 7), Some((11, 55)));
    assert_eq!(e.holder(t0 + ms(2500), 7), None);
    assert!(matches!(
        e.handle_voice(&mut ids, t0 + ms(2049), 11, 1, 7, 4),
        VoiceDecision::Deliver {
            lease_id: 55,
            renew: None,
            ..
        }
    ));
    let VoiceDecision::Deliver {
        renew: Some(renew), ..
    } = e.handle_voice(&mut ids, t0 + ms(2050), 11, 1, 7, 5)
    else {
        panic!()
    };
    assert_eq!(renew.decode::<SpeakerLease>().unwrap().lease_id, 55);
    assert!(matches!(
        e.handle_voice(&mut ids, t0 + ms(2100), 11, 1, 7, 6),
        VoiceDecision::Deliver { renew: None, .. }
    ));
    assert_eq!(
        e.handle_voice(&mut ids, t0 + ms(2100), 12, 1, 7, 9),
        VoiceDecision::Dropped(LeaseDrop::OtherTalker)
    );
    let rel = e
        .handle_answer(t0 + ms(2120), &answer(&renew, "grant", 55, 1200, 0))
        .unwrap();
    assert!(rel.frames.is_empty());
    // Renewed to 3320 ms; idle from the grant at 2120 ms (the centre sets
    // its last voice then too), so held until 3020 ms.
    assert_eq!(e.holder(t0 + ms(3019), 7), Some((11, 55)));
    assert_eq!(e.holder(t0 + ms(3021), 7), None);
    // A repeated answer matches nothing.
    assert!(e
        .handle_answer(t0 + ms(2130), &answer(&renew, "grant", 55, 1200, 0))
        .is_none());
    assert_eq!(e.counters().stray_answers, 1);
    assert_eq!(e.counters().claims, 2);
}

/// A lease without voice for longer than the centre's 900 ms idle timeout
/// is dead at the centre (§3.10) even before its expiry: the next frame
/// starts a fresh claim and is buffered, not sent under the dead lease id.
#[test]
fn edge_idle_lease_starts_a_new_claim() {
    let t0 = crate::test_clock::origin();
    let mut ids = MessageIds::new();
    let mut e: EdgeSpeaker<u32> = EdgeSpeaker::new(16);
    let claim = claim_of(e.handle_voice(&mut ids, t0, 11, 1, 7, 1));
    e.handle_answer(t0 + ms(10), &answer(&claim, "grant", 55, 1200, 0))
        .unwrap();
    assert!(matches!(
        e.handle_voice(&mut ids, t0 + ms(100), 11, 1, 7, 2),
        VoiceDecision::Deliver { lease_id: 55, .. }
    ));
    // 1 s of silence (a talk spurt ended), expiry still ahead at 1210 ms.
    assert_eq!(e.holder(t0 + ms(1001), 7), None);
    let claim = claim_of(e.handle_voice(&mut ids, t0 + ms(1100), 11, 1, 7, 3));
    assert_eq!(claim.decode::<SpeakerLease>().unwrap().lease_id, 0);
    let rel = e
        .handle_answer(t0 + ms(1110), &answer(&claim, "grant", 56, 1200, 0))
        .unwrap();
    assert_eq!(
        rel,
        Released {
            lease_id: 56,
            frames: vec![3]
        }
    );
    // The sweep ends an idle lease too.
    e.handle_timeout(t0 + ms(2100));
    assert!(e.is_empty());
}

/// Deny blocks for the retry clamped to [50, 1200] ms and drops the buffer.
#[test]
fn edge_deny_blocks_with_clamped_retry() {
    let t0 = crate::test_clock::origin();
    let mut ids = MessageIds::new();
    let mut e: EdgeSpeaker<u32> = EdgeSpeaker::new(16);
    for (retry, block) in [(10u32, 50u64), (5000, 1200), (300, 300)] {
        let t = t0 + ms(10_000 * u64::from(retry));
        let claim = claim_of(e.handle_voice(&mut ids, t, 11, 1, 7, 1));
        assert!(e
            .handle_answer(t, &answer(&claim, "deny", 0, 0, retry))
            .is_none());
        assert_eq!(
            e.handle_voice(&mut ids, t + ms(block - 1), 11, 1, 7, 2),
            VoiceDecision::Dropped(LeaseDrop::Blocked)
        );
        claim_of(e.handle_voice(&mut ids, t + ms(block), 11, 1, 7, 3));
        e.clear();
    }
    assert_eq!(e.counters().denies, 3);
    assert_eq!(e.counters().buffer_drops, 6);
}

/// §11: a claim older than 300 ms empties the buffer and blocks (50 ms);
/// a failed send blocks 50 ms too; frames older than 300 ms are not
/// released by a late grant.
#[test]
fn edge_claim_timeout_and_stale_frames() {
    let t0 = crate::test_clock::origin();
    let mut ids = MessageIds::new();
    let mut e: EdgeSpeaker<u32> = EdgeSpeaker::new(16);
    let claim = claim_of(e.handle_voice(&mut ids, t0, 11, 1, 7, 1));
    assert_eq!(e.poll_timeout(), Some(t0 + ms(300)));
    e.handle_timeout(t0 + ms(299));
    assert_eq!(e.counters().claim_timeouts, 0);
    e.handle_timeout(t0 + ms(300));
    assert_eq!(e.counters().claim_timeouts, 1);
    assert_eq!(e.counters().buffer_drops, 1);
    assert!(e
        .handle_answer(t0 + ms(310), &answer(&claim, "grant", 5, 1200, 0))
        .is_none());
    assert_eq!(
        e.handle_voice(&mut ids, t0 + ms(349), 11, 1, 7, 2),
        VoiceDecision::Dropped(LeaseDrop::Blocked)
    );
    let claim = claim_of(e.handle_voice(&mut ids, t0 + ms(350), 11, 1, 7, 3));
    e.handle_voice(&mut ids, t0 + ms(600), 11, 1, 7, 4);
    let rel = e
        .handle_answer(t0 + ms(651), &answer(&claim, "grant", 6, 1200, 0))
        .unwrap();
    assert_eq!(rel.frames, vec![4]);

    let claim = claim_of(e.handle_voice(&mut ids, t0 + ms(5000), 21, 1, 8, 1));
    e.claim_send_failed(t0 + ms(5000), 8);
    assert_eq!(
        e.handle_voice(&mut ids, t0 + ms(5049), 21, 1, 8, 2),
        VoiceDecision::Dropped(LeaseDrop::Blocked)
    );
    assert!(e
        .handle_answer(t0 + ms(5010), &answer(&claim, "grant", 7, 1200, 0))
        .is_none());
    // Session removal forgets its lease; the domain is free again.
    assert_eq!(e.release_session(11), 1);
    claim_of(e.handle_voice(&mut ids, t0 + ms(5100), 12, 1, 7, 1));
}

#[test]
fn edge_state_is_bounded() {
    let t0 = crate::test_clock::origin();
    let mut ids = MessageIds::new();
    let mut e: EdgeSpeaker<u32> = EdgeSpeaker::new(3);
    for d in 1..=10u64 {
        e.handle_voice(&mut ids, t0 + ms(d), d, 1, d, 0);
    }
    assert_eq!(e.len(), 3);
    assert_eq!(e.counters().evictions, 7);
}

/// Drives an edge's claim through the centre and back.
fn exchange(
    l: &mut LeaseTable,
    e: &mut EdgeSpeaker<u32>,
    ids: &mut MessageIds,
    now: Instant,
    edge: NodeId,
    claim: &ControlSend,
) -> Option<Released<u32>> {
    let msg: SpeakerLease = claim.decode().unwrap();
    let reply = l.handle_message(ids, now, edge, 77, &msg, true).unwrap();
    e.handle_answer(now, &reply.decode().unwrap())
}

proptest! {
    /// Two edges with two talkers each, one domain, random talkers with
    /// frames ≤ 200 ms apart and instant answers: every frame an edge
    /// delivers carries a lease the centre accepts, unless the centre
    /// lease went idle (> 900 ms since the centre last saw that talker,
    /// while the edge still holds it for its 1200 ms ttl, as §3.10 allows).
    #[test]
    fn delivered_frames_hold_the_centre_lease(
        steps in proptest::collection::vec((0usize..4, 1u64..200), 1..200),
    ) {
        let mut now = crate::test_clock::origin();
        let mut ids = MessageIds::new();
        let mut l = LeaseTable::new(8);
        let mut edges = [EdgeSpeaker::<u32>::new(8), EdgeSpeaker::<u32>::new(8)];
        let names = [node("edge-a"), node("edge-b")];
        let mut seen: std::collections::HashMap<u64, Instant> = std::collections::HashMap::new();
        let mut accepted = 0u64;
        for (i, (who, dt)) in steps.into_iter().enumerate() {
            now += ms(dt);
            let (k, session) = (who / 2, 100 + who as u64);
            for e in &mut edges {
                e.handle_timeout(now);
            }
            let o = LeaseOwner { node: names[k], control_session: 77, session_id: session, session_epoch: 1 };
            let mut out = Vec::new();
            let mut renewal = None;
            match edges[k].handle_voice(&mut ids, now, session, 1, 7, i as u32) {
                VoiceDecision::Deliver { lease_id, renew, .. } => {
                    out.push(lease_id);
                    renewal = renew;
                }
                VoiceDecision::Buffered { claim: Some(c) } => {
                    if let Some(rel) = exchange(&mut l, &mut edges[k], &mut ids, now, names[k], &c) {
                        seen.insert(session, now);
                        out.extend(rel.frames.iter().map(|_| rel.lease_id));
                    }
                }
                _ => {}
            }
            // The frame reaches the centre before the renewal (the
            // renewal would otherwise replace a lease that died idle).
            for lease_id in out {
                if l.voice(now, o, 7, lease_id).is_ok() {
                    accepted += 1;
                    seen.insert(session, now);
                } else {
                    let idle = seen.get(&session).is_none_or(|t| now.duration_since(*t) > LEASE_IDLE_TIMEOUT);
                    prop_assert!(idle, "refused while the centre lease was live");
                }
            }
            if let Some(r) = renewal {
                if exchange(&mut l, &mut edges[k], &mut ids, now, names[k], &r).is_some() {
                    seen.insert(session, now);
                }
            }
        }
        prop_assert_eq!(l.counters().voice_accepted, accepted);
    }
}
