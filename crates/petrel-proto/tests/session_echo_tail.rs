//! Echo through the `random` impairment profile (`specs/benchmarks.md` §B: 5 %
//! loss, 10 ms one way, 1 % duplication, 5 % reordered by +15 ms), one client
//! keeping 16 messages of 1024 bytes in flight, the server echoing each: the
//! shape of `petrel bench rudp --profile random` per connection, simulated.
//!
//! The simulation has no CPU cost and an exact clock, so its round trips/s are
//! per connection and its RTTs exact multiples of the link delays: read its
//! figures as relative (`--nocapture` prints them, none / fixed / adaptive side
//! by side in `adaptive_has_the_shortest_tail_then_fixed_then_arq_only`).
//!
//! What makes this profile's tail: a message is delivered in order, so one
//! datagram that arrives late holds up every message behind it. A datagram
//! reordered by 15 ms can only be made on time by FEC (a retransmission would
//! arrive later still), so for latency a late shard is an erasure just like a
//! lost one, and the groups see about twice the configured loss; a lost one
//! that its group cannot rebuild waits for fast retransmit, about one RTT.
//! Without reordering the same run has almost no round trip over 30 ms.
#![allow(clippy::unwrap_used)]

mod support;

use std::collections::VecDeque;
use std::time::{Duration, Instant};

use petrel_proto::fec::FecScheme;
use petrel_proto::session::Session;
use support::{Link, LinkConfig};

const WINDOW: usize = 16;
const PAYLOAD: usize = 1024;
const WARMUP: Duration = Duration::from_secs(2);
const MEASURED: Duration = Duration::from_secs(10);

/// Bound on ARQ retransmissions (fast + timeout, both sides) per 1000 round
/// trips over the three seeds of [`adaptive_echo_under_the_random_profile`].
const RETRANSMISSIONS_PER_1000: f64 = 4.5;

const FIXED: FecScheme = FecScheme::Fixed {
    data_shards: 8,
    parity_shards: 2,
};

/// What one run measured (both sessions' counters summed).
#[derive(Debug, Default)]
struct Outcome {
    /// Round trips completed in the measured interval, per second.
    round_trips_per_s: f64,
    p99: Duration,
    max: Duration,
    /// Round trips slower than 30 ms (base RTT 20 ms), share.
    over_30ms: f64,
    retrans_fast: u64,
    retrans_timeout: u64,
    recoveries: u64,
    parity_sent: u64,
    data_sent: u64,
}

fn session(scheme: FecScheme, now: Instant) -> Session {
    support::fec_session(scheme, 0x5e55_1011, now)
}

fn link(seed: u64) -> Link {
    let mut l = Link::new(
        LinkConfig {
            loss: 0.05,
            duplicate: 0.01,
            ..LinkConfig::clean(Duration::from_millis(10))
        },
        seed,
    );
    l.reorder = 0.05;
    l.reorder_delay = Duration::from_millis(15);
    l
}

fn run(scheme: FecScheme, seed: u64) -> Outcome {
    let start = Instant::now();
    let mut client = session(scheme, start);
    let mut server = session(scheme, start);
    let mut up = link(seed);
    let mut down = link(seed ^ 0xA5A5_5A5A);
    let mut buf = Vec::with_capacity(2048);
    let mut now = start;
    let end = start + WARMUP + MEASURED;
    // Send times of the messages in flight, oldest first (delivery is in order).
    let mut in_flight: VecDeque<(u64, Instant)> = VecDeque::new();
    let mut next_id = 0u64;
    let mut rtts = Vec::new();
    let mut msg = vec![0u8; PAYLOAD];
    while now < end {
        // Client: refill the window; server: echo what arrived.
        while in_flight.len() < WINDOW {
            msg[..8].copy_from_slice(&next_id.to_le_bytes());
            client.send(&msg).unwrap();
            in_flight.push_back((next_id, now));
            next_id += 1;
        }
        while let Some(m) = server.recv() {
            server.send(&m).unwrap();
        }
        while client.poll_transmit(now, &mut buf) {
            up.send(now, &buf);
        }
        while server.poll_transmit(now, &mut buf) {
            down.send(now, &buf);
        }
        let next = [
            client.poll_timeout(),
            server.poll_timeout(),
            up.next_delivery(),
            down.next_delivery(),
        ]
        .into_iter()
        .flatten()
        .min()
        .unwrap();
        now = now.max(next);
        while let Some(d) = up.pop_due(now) {
            let _ = server.input(now, &d);
        }
        while let Some(d) = down.pop_due(now) {
            let _ = client.input(now, &d);
        }
        if client.poll_timeout().is_some_and(|t| t <= now) {
            client.handle_timeout(now);
        }
        if server.poll_timeout().is_some_and(|t| t <= now) {
            server.handle_timeout(now);
        }
        while let Some(m) = client.recv() {
            let id = u64::from_le_bytes(m[..8].try_into().unwrap());
            let (want, sent) = in_flight.pop_front().unwrap();
            assert_eq!(id, want, "in order");
            if sent >= start + WARMUP {
                rtts.push(now - sent);
            }
        }
    }
    rtts.sort();
    let slow = rtts
        .iter()
        .filter(|r| **r > Duration::from_millis(30))
        .count();
    let mut o = Outcome {
        round_trips_per_s: rtts.len() as f64 / MEASURED.as_secs_f64(),
        p99: rtts[rtts.len() * 99 / 100],
        max: *rtts.last().unwrap(),
        over_30ms: slow as f64 / rtts.len() as f64,
        ..Outcome::default()
    };
    for s in [client.stats(), server.stats()] {
        o.retrans_fast += s.kcp.retransmissions_fast;
        o.retrans_timeout += s.kcp.retransmissions_timeout;
        if let Some(f) = s.fec {
            o.recoveries += f.decoder.shards_recovered;
            o.parity_sent += f.encoder.parity_shards_sent;
            o.data_sent += f.encoder.data_shards_sent;
        }
    }
    o
}

fn report(name: &str, seed: u64, o: &Outcome) {
    println!(
        "{name:8} seed {seed}: {:.0} rt/s, p99 {:.1} ms, max {:.1} ms, {:.2} % over 30 ms; \
         retransmissions fast {} timeout {}; recovered {}; parity {} / data {}",
        o.round_trips_per_s,
        o.p99.as_secs_f64() * 1e3,
        o.max.as_secs_f64() * 1e3,
        o.over_30ms * 100.0,
        o.retrans_fast,
        o.retrans_timeout,
        o.recoveries,
        o.parity_sent,
        o.data_sent,
    );
}

/// Adaptive FEC under the `random` profile: round trips per second near the
/// window's limit (16 per 20 ms), under 1.2 % of round trips slower than 30 ms
/// (what is left comes from datagrams 15 ms late or lost that their group could
/// not rebuild: both count as erasures for in-order delivery), parity within
/// the data shards, and few ARQ retransmissions (most of those that remain are
/// fast retransmissions of segments FEC rebuilt after the acks of the segments
/// sent behind them had reached the sender, which an idle sender's early group
/// close, `FecEncoder::flush_idle`, avoids where the parity credit allows).
#[test]
fn adaptive_echo_under_the_random_profile() {
    let (mut retransmissions, mut round_trips) = (0, 0.0);
    for seed in [42, 43, 44] {
        let o = run(FecScheme::ADAPTIVE_DEFAULT, seed);
        report("adaptive", seed, &o);
        retransmissions += o.retrans_fast + o.retrans_timeout;
        round_trips += o.round_trips_per_s * MEASURED.as_secs_f64();
        assert!(o.round_trips_per_s > 740.0, "seed {seed}: {o:?}");
        assert!(o.over_30ms < 0.012, "seed {seed}: {o:?}");
        assert!(o.parity_sent <= o.data_sent, "seed {seed}: {o:?}");
    }
    let per_1000 = 1000.0 * retransmissions as f64 / round_trips;
    assert!(
        per_1000 < RETRANSMISSIONS_PER_1000,
        "{per_1000:.2} per 1000 round trips"
    );
}

/// The same echo with ARQ only, fixed 8+2 and adaptive FEC: each protects the
/// tail better than the one before it (fewer round trips over 30 ms), as the
/// benchmark's p99 column shows (`--nocapture` prints the three).
#[test]
fn adaptive_has_the_shortest_tail_then_fixed_then_arq_only() {
    let slow = |name: &str, scheme: FecScheme| {
        let o = run(scheme, 42);
        report(name, 42, &o);
        o.over_30ms
    };
    let none = slow("none", FecScheme::None);
    let fixed = slow("fixed", FIXED);
    let adaptive = slow("adaptive", FecScheme::ADAPTIVE_DEFAULT);
    assert!(
        adaptive < fixed && fixed < none,
        "share over 30 ms: adaptive {adaptive}, fixed {fixed}, none {none}"
    );
}
