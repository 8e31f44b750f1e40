//! Two [`Session`]s over the seeded simulated link (`support`): KCP over FEC end
//! to end, loss reports included.
//!
//! `cargo test -p petrel-proto --test session_sim -- --nocapture` prints the
//! none / fixed / adaptive comparison at 5 % loss.
#![allow(clippy::unwrap_used)]

mod support;

use std::time::{Duration, Instant};

use petrel_proto::fec::FecScheme;
use petrel_proto::handshake::{Binding, Established, FecDescriptor, NegotiatedParams, RAW_PARAMS};
use petrel_proto::session::{Session, SessionConfig};
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;
use support::{Link, LinkConfig, Sim};

const FIXED: FecScheme = FecScheme::Fixed {
    data_shards: 8,
    parity_shards: 2,
};

/// Messages of one run: 1200 of 100..=1100 bytes, 4 every 10 ms (≈ 240 kB/s).
const MESSAGES: usize = 1200;
const PER_TICK: usize = 4;
const TICK: Duration = Duration::from_millis(10);

#[derive(Debug)]
struct Outcome {
    /// Simulated time until the last message arrived.
    completion: Duration,
    /// 99th percentile and maximum of per-message delivery time (send → recv).
    latency_p99: Duration,
    latency_max: Duration,
    /// Retransmissions by the sender's ARQ (timeout + fast).
    retransmissions: u64,
    /// Data shards the receiver rebuilt from parity.
    recoveries: u64,
    /// Parity shards sent by the sender.
    parity_sent: u64,
    /// Largest parity any of the sender's groups carried.
    max_parity: u8,
    /// Loss reports the receiver sent.
    reports_sent: u64,
}

fn session(scheme: FecScheme, now: Instant) -> Session {
    support::fec_session(scheme, 0x5e55_1011, now)
}

/// Sends [`MESSAGES`] from `a` to `b` over a link with `loss` each way and 20 ms
/// one-way delay; asserts each arrives once, in order, byte-identical.
fn run(scheme: FecScheme, loss: f64, seed: u64) -> Outcome {
    let start = Instant::now();
    let link = LinkConfig {
        loss,
        ..LinkConfig::clean(Duration::from_millis(20))
    };
    let mut sim = Sim::new(
        start,
        session(scheme, start),
        session(scheme, start),
        Link::new(link, seed),
        Link::new(link, seed ^ 0xFFFF),
    );
    let mut rng = ChaCha8Rng::seed_from_u64(seed);
    let messages: Vec<Vec<u8>> = (0..MESSAGES)
        .map(|_| {
            let mut m = vec![0; rng.gen_range(100..=1100)];
            rng.fill(&mut m[..]);
            m
        })
        .collect();
    let (mut sent, mut received) = (0, 0);
    let mut sent_at = Vec::with_capacity(MESSAGES);
    let mut latency = Vec::with_capacity(MESSAGES);
    let mut app_at = start;
    let limit = start + Duration::from_secs(120);
    while received < MESSAGES {
        assert!(sim.now < limit, "stalled: {received}/{MESSAGES} delivered");
        if sim.now >= app_at {
            for _ in 0..PER_TICK {
                if sent < MESSAGES && sim.a.can_send(messages[sent].len()) {
                    sim.a.send(&messages[sent]).unwrap();
                    sent_at.push(sim.now);
                    sent += 1;
                }
            }
            app_at += TICK;
        }
        if !sim.step(app_at) {
            sim.now = sim.now.max(app_at);
        }
        while let Some(m) = sim.b.recv() {
            assert!(received < MESSAGES, "more messages than were sent");
            assert_eq!(&m[..], &messages[received][..], "message {received}");
            latency.push(sim.now - sent_at[received]);
            received += 1;
        }
    }
    let completion = sim.elapsed();
    latency.sort();
    // Let the last acks and reports settle, then nothing else may arrive.
    let settle = sim.now + Duration::from_secs(2);
    while sim.step(settle) {}
    assert!(sim.b.recv().is_none(), "a message was delivered twice");
    let (a, b) = (sim.a.stats(), sim.b.stats());
    let (a_fec, b_fec) = (a.fec.unwrap_or_default(), b.fec.unwrap_or_default());
    Outcome {
        completion,
        latency_p99: latency[MESSAGES * 99 / 100],
        latency_max: latency[MESSAGES - 1],
        retransmissions: a.kcp.retransmissions_timeout + a.kcp.retransmissions_fast,
        recoveries: b_fec.decoder.shards_recovered,
        parity_sent: a_fec.encoder.parity_shards_sent,
        max_parity: a_fec.encoder.max_parity_observed,
        reports_sent: b_fec.loss_reports_sent,
    }
}

#[test]
fn fixed_fec_recovers_more_than_arq_retransmits() {
    for seed in [1, 2, 3] {
        let o = run(FIXED, 0.05, seed);
        assert!(o.parity_sent > 0, "{o:?}");
        assert!(
            o.recoveries > o.retransmissions,
            "seed {seed}: FEC should repair most losses before the ARQ notices: {o:?}"
        );
        assert_eq!(o.reports_sent, 0, "fixed parity needs no reports: {o:?}");
    }
}

#[test]
fn without_fec_the_arq_repairs_everything() {
    let o = run(FecScheme::None, 0.05, 1);
    assert!(o.retransmissions > 0, "{o:?}");
    assert_eq!((o.recoveries, o.parity_sent), (0, 0));
}

#[test]
fn adaptive_sends_no_parity_without_loss() {
    let o = run(FecScheme::ADAPTIVE_DEFAULT, 0.0, 4);
    assert!(o.reports_sent > 0, "the receiver must report: {o:?}");
    assert_eq!((o.parity_sent, o.max_parity), (0, 0), "{o:?}");
    assert_eq!(o.retransmissions, 0, "{o:?}");
}

#[test]
fn adaptive_raises_parity_under_loss() {
    let o = run(FecScheme::ADAPTIVE_DEFAULT, 0.10, 5);
    assert!(o.reports_sent > 0, "{o:?}");
    assert!(o.max_parity >= 2, "10 % loss needs parity: {o:?}");
    assert!(o.recoveries > 0, "{o:?}");
}

#[test]
fn idle_sessions_have_only_the_control_timer() {
    let start = Instant::now();
    let mut sim = Sim::new(
        start,
        session(FIXED, start),
        session(FIXED, start),
        Link::new(LinkConfig::clean(Duration::from_millis(5)), 9),
        Link::new(LinkConfig::clean(Duration::from_millis(5)), 10),
    );
    sim.a.send(&[7; 3000]).unwrap();
    let settle = start + Duration::from_secs(1);
    while sim.step(settle) {}
    assert_eq!(sim.b.recv().map(|m| m.len()), Some(3000));
    // Groups closed and expired: what is left is the raw-mode idle deadline.
    let idle = start + SessionConfig::default().control.idle_timeout;
    for s in [&sim.a, &sim.b] {
        let t = s.poll_timeout().unwrap();
        assert!(
            t >= idle,
            "{:?} after start, expected the idle deadline",
            t - start
        );
        assert_eq!(s.stats().fec.unwrap().encoder.retained_bytes, 0);
    }
}

/// Native binding: CLOSE / CLOSE-ACK travel beside the FEC shards, after every
/// message was delivered and acknowledged, under loss.
#[test]
fn graceful_close_after_all_data_under_loss() {
    let start = Instant::now();
    let native = |token| {
        let established = Established {
            conv: 0x0c10_5e00,
            // What the handshake negotiated; the local scheme (none) is overridden.
            params: NegotiatedParams {
                fec: FecDescriptor::Fixed { data: 8, parity: 2 },
                ..RAW_PARAMS
            },
            binding: Binding::Native { nonce: 1, token },
        };
        Session::new(&established, &SessionConfig::default(), start).unwrap()
    };
    let link = LinkConfig {
        loss: 0.05,
        ..LinkConfig::clean(Duration::from_millis(10))
    };
    let mut sim = Sim::new(
        start,
        native(42),
        native(42),
        Link::new(link, 21),
        Link::new(link, 22),
    );
    for i in 0..200u32 {
        sim.a.send(&i.to_le_bytes().repeat(100)).unwrap();
    }
    sim.a.close(start);
    assert!(!sim.a.is_closed(), "data is still in flight");
    let (mut got, limit) = (0u32, start + Duration::from_secs(30));
    while !(sim.a.is_closed() && sim.b.is_closed()) {
        assert!(sim.step(limit), "close did not complete");
        while let Some(m) = sim.b.recv() {
            assert_eq!(&m[..], &got.to_le_bytes().repeat(100)[..]);
            got += 1;
        }
        if sim.b.peer_closing() {
            assert_eq!(got, 200, "CLOSE overtook data");
        }
    }
    assert_eq!(got, 200);
    assert_eq!((sim.a.error(), sim.b.error()), (None, None));
    assert_eq!((sim.a.poll_timeout(), sim.b.poll_timeout()), (None, None));
    assert!(sim.a.stats().fec.unwrap().encoder.parity_shards_sent > 0);
}

#[test]
fn comparison_at_five_percent_loss() {
    println!("scheme    seed  completion  p99/max latency  retransmissions  recoveries  parity_sent  max_parity");
    for (name, scheme) in [
        ("none", FecScheme::None),
        ("fixed8+2", FIXED),
        ("adaptive", FecScheme::ADAPTIVE_DEFAULT),
    ] {
        for seed in [7, 8, 9] {
            let o = run(scheme, 0.05, seed);
            println!(
                "{name:<9} {seed:>4}  {:>7} ms  {:>6}/{:<4} ms  {:>15}  {:>10}  {:>11}  {:>10}",
                o.completion.as_millis(),
                o.latency_p99.as_millis(),
                o.latency_max.as_millis(),
                o.retransmissions,
                o.recoveries,
                o.parity_sent,
                o.max_parity
            );
        }
    }
}
