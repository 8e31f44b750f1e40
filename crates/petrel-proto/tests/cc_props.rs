//! Property tests: every controller takes arbitrary, extreme and inconsistent events
//! (zero and huge RTTs, huge acks, years of idle time, counters near `u64::MAX` or
//! going backwards) without panicking, and keeps usable outputs.
#![allow(clippy::unwrap_used)]

use std::time::{Duration, Instant};

use petrel_proto::cc::{AckEvent, CongestionKind, LossEvent, LossKind, SentEvent};
use proptest::prelude::*;

#[derive(Debug, Clone)]
enum Event {
    Sent {
        bytes: u64,
        in_flight: u64,
        app_limited: bool,
    },
    Ack {
        bytes: u64,
        rtt: Option<Duration>,
        srtt: Option<Duration>,
        sent_ago: Duration,
        delivered: u64,
        prior_delivered: u64,
        tx_in_flight: u64,
        lost: u64,
        prior_lost: u64,
        app_limited: bool,
    },
    Loss {
        bytes: u64,
        timeout: bool,
        sent_ago: Duration,
        tx_in_flight: u64,
        lost: u64,
        prior_lost: u64,
    },
}

fn big() -> impl Strategy<Value = u64> {
    prop_oneof![
        Just(0u64),
        1..100_000u64,
        Just(u64::MAX),
        (u64::MAX - 1000)..=u64::MAX,
        any::<u64>()
    ]
}

fn duration() -> impl Strategy<Value = Duration> {
    prop_oneof![
        Just(Duration::ZERO),
        (0..50_000u64).prop_map(Duration::from_micros),
        (0..400 * 24 * 3600u64).prop_map(Duration::from_secs),
    ]
}

fn event() -> impl Strategy<Value = Event> {
    prop_oneof![
        (big(), big(), any::<bool>()).prop_map(|(bytes, in_flight, app_limited)| Event::Sent {
            bytes,
            in_flight,
            app_limited
        }),
        (
            (
                big(),
                proptest::option::of(duration()),
                proptest::option::of(duration()),
                duration()
            ),
            (big(), big(), big(), big(), big(), any::<bool>())
        )
            .prop_map(
                |(
                    (bytes, rtt, srtt, sent_ago),
                    (delivered, prior_delivered, tx_in_flight, lost, prior_lost, app_limited),
                )| {
                    Event::Ack {
                        bytes,
                        rtt,
                        srtt,
                        sent_ago,
                        delivered,
                        prior_delivered,
                        tx_in_flight,
                        lost,
                        prior_lost,
                        app_limited,
                    }
                }
            ),
        (big(), any::<bool>(), duration(), big(), big(), big()).prop_map(
            |(bytes, timeout, sent_ago, tx_in_flight, lost, prior_lost)| Event::Loss {
                bytes,
                timeout,
                sent_ago,
                tx_in_flight,
                lost,
                prior_lost
            }
        ),
    ]
}

fn before(now: Instant, ago: Duration) -> Instant {
    now.checked_sub(ago).unwrap_or(now)
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(256))]

    #[test]
    fn controllers_survive_extreme_inputs(
        kind in 0..CongestionKind::ALL.len(),
        mds in prop_oneof![Just(0u64), 1..70_000u64, Just(u64::MAX)],
        seed in any::<u64>(),
        events in proptest::collection::vec((duration(), event()), 1..120),
    ) {
        let kind = CongestionKind::ALL[kind];
        let mut cc = kind.build_seeded(mds, seed);
        let mut now = Instant::now();
        for (dt, e) in events {
            now = now.checked_add(dt).unwrap_or(now);
            match e {
                Event::Sent { bytes, in_flight, app_limited } => {
                    let mut ev = SentEvent::new(now, bytes, in_flight, false);
                    ev.app_limited = app_limited;
                    cc.on_sent(&ev);
                }
                Event::Ack { bytes, rtt, srtt, sent_ago, delivered, prior_delivered, tx_in_flight, lost, prior_lost, app_limited } => {
                    let sent = before(now, sent_ago);
                    let mut ev = AckEvent::new(now, bytes, sent);
                    ev.rtt = rtt;
                    ev.srtt = srtt;
                    ev.delivered = delivered;
                    ev.prior_delivered = prior_delivered;
                    ev.prior_delivered_time = before(sent, sent_ago);
                    ev.first_sent_time = before(sent, sent_ago / 2);
                    ev.tx_in_flight = tx_in_flight;
                    ev.lost = lost;
                    ev.prior_lost = prior_lost;
                    ev.app_limited = app_limited;
                    cc.on_ack(&ev);
                }
                Event::Loss { bytes, timeout, sent_ago, tx_in_flight, lost, prior_lost } => {
                    let kind = if timeout { LossKind::Timeout } else { LossKind::FastRetransmit };
                    let mut ev = LossEvent::new(now, kind, bytes, before(now, sent_ago));
                    ev.tx_in_flight = tx_in_flight;
                    ev.lost = lost;
                    ev.prior_lost = prior_lost;
                    ev.in_flight = tx_in_flight;
                    cc.on_loss(&ev);
                }
            }
            prop_assert!(cc.cwnd() > 0, "{kind}: zero cwnd");
            prop_assert!(cc.send_quantum() > 0, "{kind}: zero send quantum");
            prop_assert!(cc.pacing_rate().is_none_or(|r| r > 0), "{kind}: zero pacing rate");
        }
    }
}
