use std::time::Duration;

use crate::codec::interconnect::{RelayFrame, Subtype};

use super::*;

fn downstream(now: Instant, epoch: u64, pv: u64, required: u64, id: u64) -> Accepted {
    let inner = inner(120);
    let mut h = header("center", 1, id, Subtype::RELAY_DOWNSTREAM);
    h.cluster_epoch = epoch;
    h.projection_version = pv;
    h.hop_count = 1;
    Accepted {
        node_id: NodeId::CENTRE,
        header: h,
        payload: RelayFrame {
            header: RelayHeader {
                required_projection_version: required,
                ..relay_header(7)
            },
            inner: &inner,
        }
        .to_vec()
        .unwrap(),
        received_at: now,
    }
}

fn ready(now: Instant, epoch: u64, version: u64) -> ProjectionWait {
    let mut w = ProjectionWait::new(ProjectionWaitConfig::default());
    w.set_ready(true);
    w.set_projection(now, epoch, version);
    w
}

#[test]
fn drops_deliveries_and_parking() {
    let now = crate::test_clock::origin();
    let mut w = ProjectionWait::new(ProjectionWaitConfig::default());
    assert_eq!(
        w.handle_downstream(now, downstream(now, 7, 1, 1, 1)),
        WaitVerdict::Dropped(WaitDrop::NotReady)
    );
    let mut w = ready(now, 7, 3);
    let old = downstream(now, 7, 1, 1, 2);
    let later = now + Duration::from_millis(201);
    assert_eq!(
        w.handle_downstream(later, old),
        WaitVerdict::Dropped(WaitDrop::Stale)
    );
    assert_eq!(
        w.handle_downstream(now, downstream(now, 8, 1, 1, 3)),
        WaitVerdict::Dropped(WaitDrop::EpochMismatch)
    );
    assert_eq!(
        w.handle_downstream(now, downstream(now, 7, 2, 1, 4)),
        WaitVerdict::Dropped(WaitDrop::VersionMismatch)
    );
    let mut not_relay = downstream(now, 7, 1, 1, 5);
    not_relay.header.subtype = Subtype::HEARTBEAT;
    assert_eq!(
        w.handle_downstream(now, not_relay),
        WaitVerdict::Dropped(WaitDrop::NotARelay)
    );
    let on_time = downstream(now, 7, 3, 3, 6);
    assert_eq!(
        w.handle_downstream(now, on_time.clone()),
        WaitVerdict::Deliver(on_time)
    );
    // Version 5 needed, 3 applied: parked until a delta brings 5.
    let ahead = downstream(now, 7, 5, 5, 7);
    assert_eq!(w.handle_downstream(now, ahead.clone()), WaitVerdict::Parked);
    assert_eq!(w.poll_timeout(), Some(now + Duration::from_millis(20)));
    w.set_projection(now + Duration::from_millis(5), 7, 4);
    assert_eq!(w.poll_release(), None);
    w.set_projection(now + Duration::from_millis(10), 7, 5);
    assert_eq!(w.poll_release(), Some(ahead));
    assert_eq!(w.poll_timeout(), None);
    let c = w.counters();
    assert_eq!(
        (
            c.stale_drops,
            c.epoch_drops,
            c.version_mismatch_drops,
            c.not_relay_drops,
            c.delivered,
            c.parked,
            c.released
        ),
        (1, 1, 1, 1, 1, 1, 1)
    );
}

#[test]
fn parked_frames_age_out_or_go_with_the_epoch_or_the_link() {
    let now = crate::test_clock::origin();
    let mut w = ready(now, 7, 1);
    assert_eq!(
        w.handle_downstream(now, downstream(now, 7, 2, 2, 1)),
        WaitVerdict::Parked
    );
    // Re-checked every 20 ms; still waiting at 180 ms, gone after 200 ms.
    let mut t = now;
    while let Some(next) = w.poll_timeout() {
        t = next;
        w.handle_timeout(t);
    }
    assert!(t > now + Duration::from_millis(200));
    assert!(t <= now + Duration::from_millis(220));
    assert_eq!(w.counters().stale_drops, 1);
    assert_eq!(w.parked(), 0);

    assert_eq!(
        w.handle_downstream(t, downstream(t, 7, 2, 2, 2)),
        WaitVerdict::Parked
    );
    w.set_projection(t, 8, 5);
    assert_eq!(w.poll_release(), None);
    assert_eq!(w.counters().epoch_drops, 1);

    assert_eq!(
        w.handle_downstream(t, downstream(t, 8, 9, 9, 3)),
        WaitVerdict::Parked
    );
    w.set_ready(false);
    assert_eq!(w.parked(), 0);
    assert_eq!(w.counters().not_ready_drops, 1);
}

#[test]
fn the_park_is_bounded_oldest_first() {
    let now = crate::test_clock::origin();
    let mut w = ProjectionWait::new(ProjectionWaitConfig {
        max_parked: 2,
        ..ProjectionWaitConfig::default()
    });
    w.set_ready(true);
    w.set_projection(now, 7, 0);
    for id in 1..=3 {
        assert_eq!(
            w.handle_downstream(now, downstream(now, 7, 1, 1, id)),
            WaitVerdict::Parked
        );
    }
    assert_eq!(w.counters().overflow_drops, 1);
    w.set_projection(now, 7, 1);
    let ids: Vec<u64> = std::iter::from_fn(|| w.poll_release())
        .map(|a| a.header.message_id)
        .collect();
    assert_eq!(ids, vec![2, 3]);
}
