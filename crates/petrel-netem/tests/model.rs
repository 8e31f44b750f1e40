//! Statistical and exact checks of the sans-IO link model on a simulated clock.
#![allow(clippy::unwrap_used)]

use std::time::{Duration, Instant};

use petrel_netem::Direction::{Downstream, Upstream};
use petrel_netem::{
    BurstLoss, DropCause, GilbertElliott, LinkConfig, LinkStats, Profile, Route, RouteCapacity,
    RouteConfig, Transmit, Verdict,
};

const N: u64 = 200_000;
/// The spec's tolerance for rates over ≥ 100 000 packets: ±0.5 percentage points.
const PP: f64 = 0.005;

/// A test packet: an id to follow it, and a size.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Pkt {
    id: u64,
    len: usize,
}

impl petrel_netem::Packet for Pkt {
    fn wire_len(&self) -> usize {
        self.len
    }
}

/// A released packet and its arrival time.
type Released = (Transmit<Pkt>, Instant);

fn route(link: LinkConfig) -> Route<Pkt> {
    let cfg = RouteConfig::symmetric(link);
    cfg.validate().unwrap();
    Route::new(&cfg, 42, 0)
}

/// Offers `count` packets of `len` bytes upstream, one every `gap`, and drains releases
/// in time order; returns the verdicts, the releases with their arrival times, and stats.
fn run(
    r: &mut Route<Pkt>,
    count: u64,
    len: usize,
    gap: Duration,
) -> (Vec<Verdict>, Vec<Released>, LinkStats) {
    let t0 = Instant::now();
    let mut verdicts = Vec::with_capacity(count as usize);
    let mut out = Vec::new();
    let mut sent_at = Vec::with_capacity(count as usize);
    let drain = |r: &mut Route<Pkt>, until: Instant, out: &mut Vec<_>, sent_at: &[Instant]| {
        while let Some(d) = r.next_deadline(Upstream) {
            if d > until {
                break;
            }
            let tx: Transmit<Pkt> = r.poll_transmit(Upstream, d).unwrap();
            let at = sent_at[tx.packet.id as usize];
            out.push((tx, at));
        }
    };
    for id in 0..count {
        let now = t0 + gap * id as u32;
        drain(r, now, &mut out, &sent_at);
        sent_at.push(now);
        verdicts.push(r.offer(Upstream, now, Pkt { id, len }));
    }
    drain(r, t0 + Duration::from_secs(3600), &mut out, &sent_at);
    (verdicts, out, *r.link(Upstream).stats())
}

fn ratio(n: u64, of: u64) -> f64 {
    n as f64 / of as f64
}

fn assert_close(what: &str, observed: f64, expected: f64) {
    assert!(
        (observed - expected).abs() <= PP,
        "{what}: observed {observed:.5}, expected {expected:.5} ± {PP}"
    );
}

#[test]
fn random_loss_matches_configuration() {
    for p in [0.01, 0.05, 0.2] {
        let mut r = route(LinkConfig {
            random_loss: p,
            ..Default::default()
        });
        let (_, out, s) = run(&mut r, N, 100, Duration::from_micros(10));
        assert_close("random loss", s.observed_loss(), p);
        assert_eq!(s.dropped.random + out.len() as u64, N);
        assert_eq!(s.dropped.total(), s.dropped.random);
    }
}

#[test]
fn burst_drops_exactly_k_of_every_n() {
    let mut r = route(LinkConfig {
        burst: Some(BurstLoss { k: 3, n: 100 }),
        ..Default::default()
    });
    let (verdicts, _, s) = run(&mut r, N, 100, Duration::from_micros(10));
    assert_eq!(s.dropped.burst, N / 100 * 3);
    for (i, v) in verdicts.iter().enumerate() {
        let expect_drop = i % 100 >= 97;
        assert_eq!(
            v.dropped == Some(DropCause::Burst),
            expect_drop,
            "packet {i}"
        );
    }
}

#[test]
fn gilbert_elliott_matches_stationary_loss() {
    let g = GilbertElliott {
        p_good_to_bad: 0.01,
        p_bad_to_good: 0.25,
        loss_good: 0.001,
        loss_bad: 0.5,
    };
    let link = LinkConfig {
        gilbert: Some(g),
        ..Default::default()
    };
    let expected = link.configured_loss();
    let mut r = route(link);
    let (verdicts, _, s) = run(&mut r, 500_000, 100, Duration::from_micros(10));
    assert_close("gilbert loss", s.observed_loss(), expected);
    // Losses are bursty: P(loss | previous lost) is far above the mean loss.
    let lost: Vec<bool> = verdicts.iter().map(|v| v.dropped.is_some()).collect();
    let pairs = lost.windows(2).filter(|w| w[0]).count() as f64;
    let both = lost.windows(2).filter(|w| w[0] && w[1]).count() as f64;
    assert!(
        both / pairs > 5.0 * expected,
        "conditional loss {}",
        both / pairs
    );
}

#[test]
fn soak_combines_burst_and_random_loss() {
    let link = Profile::Soak.link();
    let mut r = route(link.clone());
    let (_, _, s) = run(&mut r, N, 100, Duration::from_micros(100));
    assert_eq!(s.dropped.burst, N / 100 * 3);
    assert_close("soak loss", s.observed_loss(), link.configured_loss());
    // Random loss applies to the packets burst loss let through.
    assert_close(
        "random share",
        ratio(s.dropped.random, N - s.dropped.burst),
        0.02,
    );
}

#[test]
fn duplication_and_reordering_rates_match() {
    let link = LinkConfig {
        duplicate: 0.01,
        reorder: 0.05,
        delay: Duration::from_millis(10),
        reorder_delay: Duration::from_millis(15),
        ..Default::default()
    };
    let mut r = route(link);
    let (_, out, s) = run(&mut r, N, 100, Duration::from_micros(100));
    assert_close("duplication", ratio(s.duplicated, N), 0.01);
    assert_eq!(out.len() as u64, N + s.duplicated);
    assert_close("reorder", ratio(s.reordered, N + s.duplicated), 0.05);
    // Reordered packets arrive after later ones: count release-order inversions.
    let late = out
        .windows(2)
        .filter(|w| w[1].0.packet.id < w[0].0.packet.id)
        .count() as u64;
    assert!(
        late > s.reordered / 2,
        "{late} inversions for {} reordered",
        s.reordered
    );
    for (tx, at) in &out {
        let d = tx.scheduled - *at;
        assert!(
            d == Duration::from_millis(10) || d == Duration::from_millis(25),
            "{d:?}"
        );
    }
}

#[test]
fn jitter_stays_within_bounds_with_the_configured_mean() {
    let link = LinkConfig {
        delay: Duration::from_millis(10),
        jitter: Duration::from_millis(2),
        ..Default::default()
    };
    let mut r = route(link);
    let (_, out, _) = run(&mut r, N, 100, Duration::from_micros(100));
    let mut sum = 0.0;
    for (tx, at) in &out {
        let d = (tx.scheduled - *at).as_secs_f64() * 1e3;
        assert!((8.0..=12.0).contains(&d), "{d} ms");
        sum += d;
    }
    assert!((sum / out.len() as f64 - 10.0).abs() < 0.02);
}

#[test]
fn same_seed_same_decisions_and_routes_are_independent() {
    let cfg = Profile::Soak.route();
    let decide = |seed, index, dir| {
        let mut r: Route<Pkt> = Route::new(&cfg, seed, index);
        let t0 = Instant::now();
        (0..N)
            .map(|id| {
                let now = t0 + Duration::from_micros(id);
                let v = r.offer(dir, now, Pkt { id, len: 100 });
                while r.poll_transmit(dir, now + Duration::from_secs(1)).is_some() {}
                v
            })
            .collect::<Vec<_>>()
    };
    let a = decide(42, 0, Upstream);
    assert_eq!(a, decide(42, 0, Upstream));
    for other in [
        decide(42, 1, Upstream),
        decide(42, 0, Downstream),
        decide(43, 0, Upstream),
    ] {
        assert_ne!(a, other);
        // Independence: random drops coincide about as often as p² predicts.
        let both = a
            .iter()
            .zip(&other)
            .filter(|(x, y)| {
                x.dropped == Some(DropCause::Random) && y.dropped == Some(DropCause::Random)
            })
            .count() as f64;
        let expected = N as f64 * 0.97 * 0.02 * 0.02;
        assert!(
            (both - expected).abs() < 4.0 * expected.sqrt() + 5.0,
            "{both} vs {expected}"
        );
    }
}

#[test]
fn twice_the_link_rate_is_shaped_with_queue_drops() {
    let rate = 100_000_000;
    let link = LinkConfig {
        rate_bps: Some(rate),
        queue_packets: Some(100),
        delay: Duration::from_millis(1),
        ..Default::default()
    };
    let mut r = route(link);
    // 1200 B every 48 µs = 200 Mbit/s offered.
    let (_, out, s) = run(&mut r, N, 1200, Duration::from_micros(48));
    let first = out.first().unwrap().0.scheduled;
    let last = out.last().unwrap().0.scheduled;
    let bits = (s.forwarded_bytes - 1200) as f64 * 8.0;
    let observed = bits / (last - first).as_secs_f64();
    assert!(
        (observed / rate as f64 - 1.0).abs() <= 0.02,
        "{observed} bit/s"
    );
    assert!(
        s.dropped.queue > N * 45 / 100,
        "queue drops {}",
        s.dropped.queue
    );
    assert_eq!(s.in_packets, s.forwarded_packets + s.dropped.queue);
    assert_eq!(s.queue_peak_packets, 100);
    assert_eq!(s.queue_peak_bytes, 100 * 1200);
}

#[test]
fn queue_byte_limit_holds() {
    let link = LinkConfig {
        rate_bps: Some(1_000_000),
        queue_bytes: Some(10_000),
        ..Default::default()
    };
    let mut r = route(link);
    let (_, _, s) = run(&mut r, 1000, 1000, Duration::from_micros(1));
    assert_eq!(s.queue_peak_bytes, 10_000);
    assert_eq!(s.dropped.queue, 990);
}

#[test]
fn route_capacity_bounds_both_directions_together() {
    let cfg = RouteConfig {
        capacity: RouteCapacity {
            bytes: 1 << 20,
            packets: 100,
        },
        ..RouteConfig::symmetric(LinkConfig {
            delay: Duration::from_secs(1),
            ..Default::default()
        })
    };
    let mut r: Route<Pkt> = Route::new(&cfg, 1, 0);
    let t0 = Instant::now();
    for id in 0..1000 {
        let dir = if id % 2 == 0 { Upstream } else { Downstream };
        r.offer(dir, t0, Pkt { id, len: 10 });
    }
    assert_eq!(r.held_packets(), 100);
    let dropped =
        r.link(Upstream).stats().dropped.capacity + r.link(Downstream).stats().dropped.capacity;
    assert_eq!(dropped, 900);

    let cfg = RouteConfig {
        capacity: RouteCapacity {
            bytes: 10_000,
            packets: 8192,
        },
        ..cfg
    };
    let mut r: Route<Pkt> = Route::new(&cfg, 1, 0);
    for id in 0..100 {
        r.offer(Upstream, t0, Pkt { id, len: 1500 });
    }
    assert_eq!(r.held_bytes(), 6 * 1500);
    assert_eq!(r.link(Upstream).stats().dropped.capacity, 94);
    // Releasing frees room again.
    let later = t0 + Duration::from_secs(1);
    while r.poll_transmit(Upstream, later).is_some() {}
    assert_eq!(r.held_bytes(), 0);
    assert_eq!(
        r.offer(Upstream, later, Pkt { id: 100, len: 1500 }).queued,
        1
    );
}

#[test]
fn peak_held_is_the_most_held_at_once_over_both_directions() {
    let mut r = route(LinkConfig {
        delay: Duration::from_millis(10),
        ..Default::default()
    });
    let t0 = Instant::now();
    r.offer(Upstream, t0, Pkt { id: 0, len: 100 });
    r.offer(Downstream, t0, Pkt { id: 1, len: 300 });
    assert_eq!((r.peak_held_bytes(), r.peak_held_packets()), (400, 2));
    // After both are released, a single smaller packet does not lower the peak.
    let later = t0 + Duration::from_millis(10);
    while r.poll_transmit(Upstream, later).is_some() {}
    while r.poll_transmit(Downstream, later).is_some() {}
    assert_eq!(r.held_bytes(), 0);
    r.offer(Upstream, later, Pkt { id: 2, len: 50 });
    assert_eq!((r.peak_held_bytes(), r.peak_held_packets()), (400, 2));
}

#[test]
fn invalid_configuration_names_the_field() {
    let bad = [
        (
            LinkConfig {
                random_loss: 1.5,
                ..Default::default()
            },
            "random_loss",
        ),
        (
            LinkConfig {
                duplicate: -0.1,
                ..Default::default()
            },
            "duplicate",
        ),
        (
            LinkConfig {
                reorder: f64::NAN,
                ..Default::default()
            },
            "reorder",
        ),
        (
            LinkConfig {
                rate_bps: Some(0),
                ..Default::default()
            },
            "rate_bps",
        ),
        (
            LinkConfig {
                burst: Some(BurstLoss { k: 5, n: 4 }),
                ..Default::default()
            },
            "burst.k",
        ),
        (
            LinkConfig {
                burst: Some(BurstLoss { k: 0, n: 0 }),
                ..Default::default()
            },
            "burst.n",
        ),
        (
            LinkConfig {
                delay: Duration::from_secs(61),
                ..Default::default()
            },
            "delay",
        ),
        (
            LinkConfig {
                queue_packets: Some(0),
                ..Default::default()
            },
            "queue_packets",
        ),
    ];
    for (cfg, field) in bad {
        let e = cfg.validate().unwrap_err();
        assert_eq!(e.field, field);
        assert!(e.to_string().contains(field));
    }
}

mod invariants {
    use super::*;
    use proptest::prelude::*;

    fn link_config() -> impl Strategy<Value = LinkConfig> {
        (
            (0.0..=1.0f64, proptest::option::of((0u32..=10, 1u32..=20))),
            (0u64..=50, 0u64..=20, 0.0..=0.5f64, 0.0..=0.5f64),
            proptest::option::of(1_000u64..=1_000_000_000),
            (
                proptest::option::of(1usize..=64),
                proptest::option::of(1usize..=100_000),
            ),
        )
            .prop_map(
                |((loss, burst), (delay, jitter, dup, reorder), rate, (qp, qb))| LinkConfig {
                    random_loss: loss,
                    burst: burst.map(|(k, n)| BurstLoss { k: k.min(n), n }),
                    delay: Duration::from_millis(delay),
                    jitter: Duration::from_millis(jitter),
                    duplicate: dup,
                    reorder,
                    rate_bps: rate,
                    queue_packets: qp,
                    queue_bytes: qb,
                    ..Default::default()
                },
            )
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(64))]

        /// Every packet (and copy) is forwarded, dropped or still held; the route never
        /// holds more than its capacity; releases come out in deadline order.
        #[test]
        fn packets_are_conserved_and_bounded(
            link in link_config(),
            cap_packets in 1usize..=200,
            sizes in proptest::collection::vec((1usize..=1500, 0u64..=2000), 1..400),
        ) {
            let cfg = RouteConfig {
                capacity: RouteCapacity { bytes: 64 * 1024, packets: cap_packets },
                ..RouteConfig::symmetric(link)
            };
            prop_assert!(cfg.validate().is_ok());
            let mut r: Route<Pkt> = Route::new(&cfg, 9, 3);
            let mut now = Instant::now();
            let mut last_release = now;
            for (id, (len, gap_us)) in sizes.iter().enumerate() {
                now += Duration::from_micros(*gap_us);
                while let Some(tx) = r.poll_transmit(Upstream, now) {
                    prop_assert!(tx.scheduled <= now && tx.scheduled >= last_release);
                    last_release = tx.scheduled;
                }
                r.offer(Upstream, now, Pkt { id: id as u64, len: *len });
                prop_assert!(r.held_packets() <= cap_packets);
                prop_assert!(r.held_bytes() <= 64 * 1024);
                let s = r.link(Upstream).stats();
                prop_assert_eq!(
                    s.in_packets + s.duplicated,
                    s.forwarded_packets + s.dropped.total() + r.held_packets() as u64
                );
            }
        }
    }
}
