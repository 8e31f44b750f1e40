//! Route sync (§3.7): the §11 snapshot, delta and ACK vectors, the resend
//! schedule, duplicates, resync, and centre ↔ edge round trips.

use std::time::Duration;

use proptest::prelude::*;

use crate::codec::interconnect::messages::{
    DeviceRoute, RouteAck, RouteDelta, RouteOperation, RouteResyncRequest, RouteSnapshotBegin,
    RouteSnapshotChunk, RouteSnapshotCommit,
};
use crate::codec::interconnect::Subtype;

use super::*;

fn route(session_id: u64, device_id: i64, domain: u64) -> DeviceRoute {
    DeviceRoute {
        session_id,
        device_id,
        username: format!("user{device_id}"),
        callsign: "BG5ABC".into(),
        ssid: 7,
        domain_id: domain,
        session_epoch: 1,
        ..DeviceRoute::default()
    }
}

/// Feeds every message of `sends` to `edge` as the runtime would.
fn deliver(
    edge: &mut EdgeRouteSync,
    ids: &mut MessageIds,
    sends: &[ControlSend],
) -> Vec<EdgeSyncEvent> {
    sends
        .iter()
        .map(|s| match s.subtype {
            Subtype::ROUTE_SNAPSHOT_BEGIN => edge.handle_begin(ids, s.decode().unwrap()),
            Subtype::ROUTE_SNAPSHOT_CHUNK => edge.handle_chunk(ids, &s.decode().unwrap()),
            Subtype::ROUTE_SNAPSHOT_COMMIT => edge.handle_commit(
                ids,
                s.message_id,
                s.cluster_epoch,
                s.projection_version,
                &s.decode().unwrap(),
                false,
            ),
            Subtype::ROUTE_DELTA => {
                edge.handle_delta(ids, s.message_id, s.decode().unwrap(), false)
            }
            other => panic!("unexpected {other:?}"),
        })
        .collect()
}

fn ack_of(e: &EdgeSyncEvent) -> RouteAck {
    match e {
        EdgeSyncEvent::Applied { ack, .. }
        | EdgeSyncEvent::Committed { ack }
        | EdgeSyncEvent::ReAcked { ack } => {
            assert_eq!(ack.subtype, Subtype::ROUTE_ACK);
            ack.decode().unwrap()
        }
        other => panic!("no ack: {other:?}"),
    }
}

/// A Begin and chunks of `p` as the centre would split it.
fn split(p: &Projection, snapshot_id: u64) -> (RouteSnapshotBegin, Vec<RouteSnapshotChunk>) {
    let json = p.to_json();
    let begin = RouteSnapshotBegin {
        snapshot_id,
        cluster_epoch: p.cluster_epoch,
        projection_version: p.version,
        chunks: chunk_count(json.len() as u64) as u32,
        total_bytes: json.len() as u64,
        checksum: sha256_hex(&json),
    };
    let mut chunks: Vec<RouteSnapshotChunk> = json
        .chunks(SNAPSHOT_CHUNK_BYTES)
        .enumerate()
        .map(|(i, d)| RouteSnapshotChunk {
            snapshot_id,
            index: i as u32,
            data: d.to_vec(),
        })
        .collect();
    if chunks.is_empty() {
        chunks.push(RouteSnapshotChunk {
            snapshot_id,
            index: 0,
            data: Vec::new(),
        });
    }
    (begin, chunks)
}

fn projection_of(n: u64, epoch: u64, version: u64) -> Projection {
    let mut p = Projection::new(epoch);
    p.version = version;
    for s in 1..=n {
        p.devices.insert(s, route(s, s as i64 + 1000, 7));
    }
    p
}

/// §11: 3000 routes (epoch 7, version 12) split into ≥ 2 chunks; added in
/// reverse order, commit restores version 12 and 3000 routes.
#[test]
fn snapshot_of_3000_routes_reassembles_in_reverse_order() {
    let p = projection_of(3000, 7, 12);
    let (begin, chunks) = split(&p, 5);
    assert!(chunks.len() >= 2);
    let mut a = SnapshotAssembly::begin(begin).unwrap();
    for c in chunks.iter().rev() {
        assert_eq!(a.add_chunk(c), Ok(ChunkAdded::Stored));
    }
    let got = a.commit().unwrap();
    assert_eq!(got.version, 12);
    assert_eq!(got.devices.len(), 3000);
    assert_eq!(got, p);
}

/// §11: Begin with chunk count + 1 or a 66-char checksum is refused; a
/// chunk with one extra byte is refused; chunk 0 again unchanged is fine,
/// altered is refused; beyond the total is refused.
#[test]
fn snapshot_chunk_rules() {
    let p = projection_of(3000, 7, 12);
    let (begin, chunks) = split(&p, 5);
    let mut plus = begin.clone();
    plus.chunks += 1;
    assert_eq!(
        SnapshotAssembly::begin(plus).unwrap_err(),
        SnapshotError::ChunkCount
    );
    let mut long = begin.clone();
    long.checksum.push_str("00");
    assert_eq!(
        SnapshotAssembly::begin(long).unwrap_err(),
        SnapshotError::ChecksumFormat
    );
    let mut big = begin.clone();
    big.total_bytes = MAX_SNAPSHOT_BYTES + 1;
    big.chunks = chunk_count(big.total_bytes) as u32;
    assert_eq!(
        SnapshotAssembly::begin(big).unwrap_err(),
        SnapshotError::TooLarge
    );

    let mut a = SnapshotAssembly::begin(begin).unwrap();
    let mut extra = chunks[0].clone();
    extra.data.push(b' ');
    assert_eq!(a.add_chunk(&extra), Err(SnapshotError::ChunkSize));
    assert_eq!(a.add_chunk(&chunks[0]), Ok(ChunkAdded::Stored));
    assert_eq!(a.add_chunk(&chunks[0]), Ok(ChunkAdded::Duplicate));
    let mut altered = chunks[0].clone();
    altered.data[3] ^= 1;
    assert_eq!(
        a.add_chunk(&altered),
        Err(SnapshotError::DifferingDuplicate)
    );
    let mut beyond = chunks[0].clone();
    beyond.index = chunks.len() as u32;
    assert_eq!(a.add_chunk(&beyond), Err(SnapshotError::BeyondTotal));
    let mut short_last = chunks.last().unwrap().clone();
    short_last.data.pop();
    assert_eq!(a.add_chunk(&short_last), Err(SnapshotError::ChunkSize));
    assert_eq!(a.commit(), Err(SnapshotError::Incomplete));
    for c in &chunks[1..] {
        a.add_chunk(c).unwrap();
    }
    assert_eq!(a.commit().unwrap(), p);
}

#[test]
fn snapshot_commit_checks_checksum_and_version() {
    let p = projection_of(3, 7, 12);
    let (mut begin, chunks) = split(&p, 5);
    begin.checksum = sha256_hex(b"other");
    let mut a = SnapshotAssembly::begin(begin.clone()).unwrap();
    a.add_chunk(&chunks[0]).unwrap();
    assert_eq!(a.commit(), Err(SnapshotError::ChecksumMismatch));

    let (mut begin, chunks) = split(&p, 5);
    begin.projection_version = 13;
    let mut a = SnapshotAssembly::begin(begin).unwrap();
    a.add_chunk(&chunks[0]).unwrap();
    assert_eq!(a.commit(), Err(SnapshotError::VersionMismatch));

    // An empty projection is still one (non-empty) chunk; an epoch-0 one
    // is refused at commit.
    let (begin, chunks) = split(&Projection::new(0), 6);
    assert_eq!(
        SnapshotAssembly::begin(begin).unwrap_err(),
        SnapshotError::ZeroId
    );
    let (begin, chunks2) = split(&Projection::new(9), 6);
    assert_eq!(begin.chunks, 1);
    assert_eq!(chunks.len(), 1);
    let mut a = SnapshotAssembly::begin(begin).unwrap();
    a.add_chunk(&chunks2[0]).unwrap();
    assert_eq!(a.commit().unwrap(), Projection::new(9));
}

/// §11: two changes on edge a give a version 2 while edge b stays 0.
#[test]
fn versions_are_per_edge() {
    let t = crate::test_clock::origin();
    let mut ids = MessageIds::new();
    let mut a = CentreRouteSync::new(7);
    let b = CentreRouteSync::new(7);
    a.upsert(&mut ids, t, route(101, 1, 7)).unwrap();
    a.upsert(&mut ids, t, route(102, 2, 7)).unwrap();
    assert_eq!(a.version(), 2);
    assert_eq!(b.version(), 0);
    assert!(a.remove(&mut ids, t, 999).is_none());
    assert_eq!(a.version(), 2);
    let d: RouteDelta = a.remove(&mut ids, t, 101).unwrap().decode().unwrap();
    assert_eq!((d.base_version, d.new_version), (2, 3));
    assert_eq!(
        d.operations,
        vec![RouteOperation::Remove { session_id: 101 }]
    );
    assert_eq!(d.checksum, delta_checksum(&d));
}

/// §11: delta 0→1 upsert {session 11, device 42} applies; a following
/// delta with base 0 → 2 is refused and leaves the projection unchanged.
#[test]
fn delta_apply_rules() {
    let mut ids = MessageIds::new();
    let mut edge = EdgeRouteSync::new();
    let p = Projection::new(7);
    let (begin, chunks) = split(&p, 1);
    edge.handle_begin(&mut ids, begin);
    edge.handle_chunk(&mut ids, &chunks[0]);
    let ev = edge.handle_commit(
        &mut ids,
        2,
        7,
        0,
        &RouteSnapshotCommit { snapshot_id: 1 },
        false,
    );
    assert!(matches!(ev, EdgeSyncEvent::Committed { .. }));
    assert!(edge.is_synced());

    let mk = |base, new, op: RouteOperation| {
        let mut d = RouteDelta {
            cluster_epoch: 7,
            base_version: base,
            new_version: new,
            operations: vec![op],
            checksum: String::new(),
        };
        d.checksum = delta_checksum(&d);
        d
    };
    let up = RouteOperation::Upsert {
        route: Box::new(route(11, 42, 7)),
    };
    let ev = edge.handle_delta(&mut ids, 10, mk(0, 1, up.clone()), false);
    let ack = ack_of(&ev);
    assert_eq!(
        (
            ack.cluster_epoch,
            ack.projection_version,
            ack.ack_for_message_id
        ),
        (7, 1, 10)
    );
    assert_eq!(edge.position(), (7, 1));

    let ev = edge.handle_delta(&mut ids, 11, mk(0, 2, up.clone()), false);
    let EdgeSyncEvent::Resync { request, reason } = ev else {
        panic!("{ev:?}");
    };
    assert_eq!(reason, resync_reason::VERSION_GAP);
    let req: RouteResyncRequest = request.decode().unwrap();
    assert_eq!((req.cluster_epoch, req.projection_version), (7, 1));
    assert_eq!(edge.position(), (7, 1));
    assert_eq!(edge.projection().unwrap().devices.len(), 1);
    assert!(!edge.is_synced());

    // Other failures: epoch, new ≤ base, checksum, empty ops, session 0.
    let mut other_epoch = mk(1, 2, up.clone());
    other_epoch.cluster_epoch = 8;
    other_epoch.checksum = delta_checksum(&other_epoch);
    let mut bad_sum = mk(1, 2, up.clone());
    bad_sum.checksum = sha256_hex(b"x");
    let mut empty = mk(1, 2, up.clone());
    empty.operations.clear();
    empty.checksum = delta_checksum(&empty);
    let cases = [
        (other_epoch, resync_reason::EPOCH_MISMATCH),
        (mk(1, 1, up.clone()), resync_reason::VERSION_GAP),
        (bad_sum, resync_reason::CHECKSUM_MISMATCH),
        (empty, resync_reason::INVALID_DELTA),
        (
            mk(1, 2, RouteOperation::Remove { session_id: 0 }),
            resync_reason::INVALID_DELTA,
        ),
    ];
    for (d, want) in cases {
        match edge.handle_delta(&mut ids, 12, d, false) {
            EdgeSyncEvent::Resync { reason, .. } => assert_eq!(reason, want),
            other => panic!("{other:?}"),
        }
        assert_eq!(edge.position(), (7, 1));
    }
    assert_eq!(edge.counters().resyncs, 6);

    // Duplicates: re-ACKed when already applied, else resync.
    let ev = edge.handle_delta(&mut ids, 10, mk(0, 1, up.clone()), true);
    assert!(matches!(ev, EdgeSyncEvent::ReAcked { .. }));
    assert_eq!(ack_of(&ev).projection_version, 1);
    let ev = edge.handle_delta(&mut ids, 13, mk(1, 2, up), true);
    assert!(matches!(
        ev,
        EdgeSyncEvent::Resync {
            reason: resync_reason::DUPLICATE_MISMATCH,
            ..
        }
    ));
    let ev = edge.handle_commit(
        &mut ids,
        2,
        7,
        1,
        &RouteSnapshotCommit { snapshot_id: 1 },
        true,
    );
    assert_eq!(ack_of(&ev).ack_for_message_id, 2);
    let ev = edge.handle_commit(
        &mut ids,
        2,
        7,
        0,
        &RouteSnapshotCommit { snapshot_id: 1 },
        true,
    );
    assert!(matches!(ev, EdgeSyncEvent::Resync { .. }));
}

#[test]
fn a_delta_before_any_snapshot_asks_for_a_resync() {
    let mut ids = MessageIds::new();
    let mut edge = EdgeRouteSync::new();
    let ev = edge.handle_delta(&mut ids, 3, RouteDelta::default(), false);
    assert!(matches!(
        ev,
        EdgeSyncEvent::Resync {
            reason: resync_reason::NO_PROJECTION,
            ..
        }
    ));
    let ev = edge.handle_chunk(&mut ids, &RouteSnapshotChunk::default());
    assert_eq!(ev, EdgeSyncEvent::Ignored);
}

/// §11: ACK version 4 for pending (msg 11, version 3) is refused; epoch
/// 8 ≠ 7 is refused; (7, 3, 11) is accepted, clears pending and records
/// version 3 / message 11.
#[test]
fn ack_acceptance_rules() {
    let t = crate::test_clock::origin();
    let mut ids = MessageIds::new();
    for _ in 0..8 {
        ids.next_id();
    }
    let mut c = CentreRouteSync::new(7);
    for s in 1..=3 {
        c.upsert(&mut ids, t, route(s, s as i64, 7)).unwrap();
    }
    assert_eq!(c.pending(), 3);
    let ack = |e, v, m| RouteAck {
        cluster_epoch: e,
        projection_version: v,
        ack_for_message_id: m,
        error: String::new(),
    };
    assert_eq!(
        c.handle_ack(&ack(7, 4, 11)),
        AckOutcome::Refused(AckRefusal::VersionMismatch)
    );
    assert_eq!(
        c.handle_ack(&ack(8, 3, 11)),
        AckOutcome::Refused(AckRefusal::EpochMismatch)
    );
    assert_eq!(
        c.handle_ack(&ack(7, 3, 99)),
        AckOutcome::Refused(AckRefusal::UnknownMessage)
    );
    assert_eq!(c.handle_ack(&ack(7, 3, 11)), AckOutcome::Accepted);
    assert_eq!(c.pending(), 0);
    assert_eq!(c.acked(), Some((3, 11)));
    assert_eq!(
        c.handle_ack(&ack(7, 3, 11)),
        AckOutcome::Refused(AckRefusal::UnknownMessage)
    );
    let mut err = ack(7, 3, 11);
    err.error = "apply failed".into();
    assert_eq!(
        c.handle_ack(&err),
        AckOutcome::SyncError("apply failed".into())
    );
    assert_eq!(c.sync_error(), Some("apply failed"));
    assert_eq!(c.counters().acks_refused, 4);
}

/// Pending messages are resent with the same MessageID every ≥ 1 s; after
/// 5 attempts in all the sync fails with `route_ack_timeout`.
#[test]
fn resend_schedule_and_ack_timeout() {
    let t0 = crate::test_clock::origin();
    let ms = Duration::from_millis;
    let mut ids = MessageIds::new();
    let mut c = CentreRouteSync::new(7);
    assert_eq!(c.poll_timeout(), None);
    let first = c.upsert(&mut ids, t0, route(1, 1, 7)).unwrap();
    assert_eq!(c.poll_timeout(), Some(t0 + ms(1000)));
    assert_eq!(c.handle_timeout(t0 + ms(999)), RetryOutcome::Resend(vec![]));
    for k in 1..=4u64 {
        let now = t0 + ms(1000 * k);
        assert_eq!(
            c.handle_timeout(now),
            RetryOutcome::Resend(vec![first.clone()])
        );
        assert_eq!(
            c.handle_timeout(now + ms(250)),
            RetryOutcome::Resend(vec![])
        );
    }
    assert_eq!(c.counters().resends, 4);
    assert_eq!(c.sync_error(), None);
    assert_eq!(c.handle_timeout(t0 + ms(5000)), RetryOutcome::Close);
    assert_eq!(c.sync_error(), Some(ROUTE_ACK_TIMEOUT));
}

#[test]
fn snapshot_supersedes_pending_and_pending_is_bounded() {
    let t = crate::test_clock::origin();
    let mut ids = MessageIds::new();
    let mut c = CentreRouteSync::new(7);
    for s in 1..=(MAX_PENDING_ROUTE_MESSAGES as u64 + 3) {
        c.upsert(&mut ids, t, route(s, 1, 7)).unwrap();
    }
    assert_eq!(c.pending(), MAX_PENDING_ROUTE_MESSAGES);
    assert_eq!(c.counters().pending_evictions, 3);
    let sends = c.snapshot(&mut ids, t);
    // Several full chunks, each within one control envelope.
    assert!(sends.len() >= 5);
    let limit = crate::codec::interconnect::Channel::Control.max_payload();
    assert!(sends.iter().all(|s| s.payload.len() <= limit));
    assert_eq!(c.pending(), 1);
    assert_eq!(c.counters().superseded, MAX_PENDING_ROUTE_MESSAGES as u64);
    let commit = sends.last().unwrap();
    assert_eq!(commit.subtype, Subtype::ROUTE_SNAPSHOT_COMMIT);
    assert_eq!(commit.projection_version, c.version());
    // Every message has its own id; the snapshot id is one more.
    let mut seen: Vec<u64> = sends.iter().map(|s| s.message_id).collect();
    let begin: RouteSnapshotBegin = sends[0].decode().unwrap();
    seen.push(begin.snapshot_id);
    seen.sort_unstable();
    seen.dedup();
    assert_eq!(seen.len(), sends.len() + 1);
}

#[test]
fn route_limit_is_enforced_on_both_sides() {
    let t = crate::test_clock::origin();
    let mut ids = MessageIds::new();
    let mut p = projection_of(MAX_DEVICE_SESSIONS_PER_NODE as u64, 7, 0);
    let extra = RouteOperation::Upsert {
        route: Box::new(route(u64::MAX, 1, 7)),
    };
    assert!(!p.accepts(std::slice::from_ref(&extra)));
    assert_eq!(p.apply(&extra), Err(ProjectionError::TooManyRoutes));
    let replace = RouteOperation::Upsert {
        route: Box::new(route(1, 5, 7)),
    };
    assert!(p.accepts(std::slice::from_ref(&replace)));
    let mut c = CentreRouteSync::new(7);
    assert_eq!(
        c.upsert(&mut ids, t, route(0, 1, 7)),
        Err(ProjectionError::BadRoute)
    );
    assert_eq!(c.version(), 0);
}

/// The delta checksum escapes what Go's encoding/json escapes.
#[test]
fn delta_encoding_follows_go() {
    let mut r = route(11, 42, 7);
    r.nickname = "<a&b>\u{2028}".into();
    let d = RouteDelta {
        cluster_epoch: 7,
        base_version: 0,
        new_version: 1,
        operations: vec![RouteOperation::Upsert { route: Box::new(r) }],
        checksum: "ignored".into(),
    };
    let json = String::from_utf8(go_json(&RouteDelta {
        checksum: String::new(),
        ..d.clone()
    }))
    .unwrap();
    assert!(
        json.contains(r#""nickname":"\u003ca\u0026b\u003e\u2028""#),
        "{json}"
    );
    assert!(json.starts_with(
        r#"{"cluster_epoch":7,"base_version":0,"new_version":1,"operations":[{"kind":"upsert","route":{"session_id":11,"device_id":42,"#
    ));
    assert!(json.ends_with(
        r#""session_epoch":1,"disable_send":false,"disable_recv":false}}],"checksum":""}"#
    ));
    assert_eq!(delta_checksum(&d), sha256_hex(json.as_bytes()));
    // Control characters as Go ≥ 1.22 writes them.
    let text = "\u{1}\u{8}\u{c}\n\t\"\\\u{7f}";
    let want = "\"\\u0001\\b\\f\\n\\t\\\"\\\\\u{7f}\"";
    assert_eq!(go_json(&text), want.as_bytes());
    assert_eq!(delta_checksum(&d).len(), 64);
}

/// Centre and edge together: snapshot, ACK, deltas, a resync after a lost
/// delta, and the reconnect case of §3.6 (base 0 in a new epoch).
#[test]
fn centre_and_edge_round_trip() {
    let t = crate::test_clock::origin();
    let mut cids = MessageIds::new();
    let mut eids = MessageIds::new();
    let mut c = CentreRouteSync::new(7);
    let mut e = EdgeRouteSync::new();
    for s in 1..=5 {
        c.upsert(&mut cids, t, route(s, s as i64, 7)).unwrap();
    }
    let snap = c.snapshot(&mut cids, t);
    let evs = deliver(&mut e, &mut eids, &snap);
    assert_eq!(
        c.handle_ack(&ack_of(evs.last().unwrap())),
        AckOutcome::Accepted
    );
    assert_eq!(e.projection().unwrap(), c.projection());

    let d = c.upsert(&mut cids, t, route(6, 6, 8)).unwrap();
    let evs = deliver(&mut e, &mut eids, &[d]);
    let EdgeSyncEvent::Applied { operations, .. } = &evs[0] else {
        panic!("{evs:?}");
    };
    assert_eq!(operations.len(), 1);
    assert_eq!(c.handle_ack(&ack_of(&evs[0])), AckOutcome::Accepted);

    // A lost delta: the next one does not fit; resync repairs it.
    let _lost = c.remove(&mut cids, t, 1).unwrap();
    let next = c.remove(&mut cids, t, 2).unwrap();
    let evs = deliver(&mut e, &mut eids, &[next]);
    let EdgeSyncEvent::Resync { request, .. } = &evs[0] else {
        panic!("{evs:?}");
    };
    let snap = c.handle_resync(&mut cids, t, &request.decode().unwrap());
    assert_eq!(c.pending(), 1);
    let evs = deliver(&mut e, &mut eids, &snap);
    assert_eq!(
        c.handle_ack(&ack_of(evs.last().unwrap())),
        AckOutcome::Accepted
    );
    assert_eq!(e.projection().unwrap(), c.projection());
    assert!(e.is_synced());

    // Reconnect to a restarted centre: new epoch, version 0.
    e.reset();
    assert!(!e.is_synced());
    let mut c2 = CentreRouteSync::new(8);
    let d = c2.upsert(&mut cids, t, route(9, 9, 7)).unwrap();
    let evs = deliver(&mut e, &mut eids, &[d]);
    assert!(matches!(
        evs[0],
        EdgeSyncEvent::Resync {
            reason: resync_reason::EPOCH_MISMATCH,
            ..
        }
    ));
    let evs = deliver(&mut e, &mut eids, &c2.snapshot(&mut cids, t));
    assert!(matches!(
        evs.last().unwrap(),
        EdgeSyncEvent::Committed { .. }
    ));
    assert_eq!(e.position(), (8, 1));
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(64))]

    /// Any sequence of upserts and removes: an edge applying every delta
    /// ends with the centre's projection, and so does a snapshot delivered
    /// with its chunks shuffled and duplicated.
    #[test]
    fn edge_follows_the_centre(
        ops in proptest::collection::vec((any::<bool>(), 1u64..40, 1u64..5), 1..80),
        order in proptest::collection::vec(any::<prop::sample::Index>(), 0..8),
    ) {
        let t = crate::test_clock::origin();
        let mut cids = MessageIds::new();
        let mut eids = MessageIds::new();
        let mut c = CentreRouteSync::new(3);
        let mut e = EdgeRouteSync::new();
        let evs = deliver(&mut e, &mut eids, &c.snapshot(&mut cids, t));
        prop_assert_eq!(c.handle_ack(&ack_of(evs.last().unwrap())), AckOutcome::Accepted);
        for (up, s, d) in ops {
            let send = if up {
                Some(c.upsert(&mut cids, t, route(s, s as i64, d)).unwrap())
            } else {
                c.remove(&mut cids, t, s)
            };
            if let Some(send) = send {
                let evs = deliver(&mut e, &mut eids, &[send]);
                prop_assert_eq!(c.handle_ack(&ack_of(&evs[0])), AckOutcome::Accepted);
            }
        }
        prop_assert_eq!(e.projection().unwrap(), c.projection());
        prop_assert_eq!(c.pending(), 0);

        // Big enough for several chunks.
        for s in 100..500 {
            c.upsert(&mut cids, t, route(s, s as i64, 1)).unwrap();
        }
        let mut snap = c.snapshot(&mut cids, t);
        let commit = snap.pop().unwrap();
        let begin = snap.remove(0);
        let mut chunks = snap;
        for i in order {
            let k = i.index(chunks.len());
            chunks.push(chunks[k].clone());
            let j = i.index(chunks.len());
            chunks.swap(k, j);
        }
        let mut fresh = EdgeRouteSync::new();
        let mut all = vec![begin];
        all.extend(chunks);
        all.push(commit);
        let evs = deliver(&mut fresh, &mut eids, &all);
        let committed = matches!(evs.last().unwrap(), EdgeSyncEvent::Committed { .. });
        prop_assert!(committed);
        prop_assert_eq!(fresh.projection().unwrap(), c.projection());
    }

    /// Arbitrary chunks never panic the assembly nor grow it past the
    /// declared total.
    #[test]
    fn arbitrary_chunks_are_safe(
        total in 0u64..200_000,
        chunks in proptest::collection::vec((0u32..10, 0usize..40_000), 0..12),
    ) {
        let begin = RouteSnapshotBegin {
            snapshot_id: 1,
            cluster_epoch: 1,
            projection_version: 0,
            chunks: chunk_count(total) as u32,
            total_bytes: total,
            checksum: sha256_hex(b""),
        };
        let mut a = SnapshotAssembly::begin(begin).unwrap();
        let mut stored = 0usize;
        for (index, len) in chunks {
            let c = RouteSnapshotChunk { snapshot_id: 1, index, data: vec![b'x'; len] };
            if a.add_chunk(&c) == Ok(ChunkAdded::Stored) {
                stored += len;
            }
        }
        prop_assert!(stored as u64 <= total);
        prop_assert!(a.commit().is_err());
    }
}
