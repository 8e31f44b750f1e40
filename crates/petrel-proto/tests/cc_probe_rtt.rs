//! BBRv3's ProbeRTT over a 60 s bulk flow (20 Mbit/s, 8 ms RTT, 1 BDP queue; the rate
//! is scaled down so a minute simulates in seconds): it runs about every 5 s, holds
//! about half a BDP rather than 4 segments, and costs at most 3 % of the goodput.
//! The regression test the research notes (§5) ask for, after the reference whose
//! BBRv3 lost 35 % at 8 ms RTT.
#![allow(clippy::unwrap_used)]

mod cc_support;

use std::time::{Duration, Instant};

use cc_support::{flow_config, Dumbbell, Path};
use petrel_proto::cc::CongestionKind;

const MTU: usize = 1200;

#[test]
fn bbrv3_probe_rtt_costs_little_over_a_minute() {
    let t0 = Instant::now();
    let rtt = Duration::from_millis(8);
    let path = Path::with_bdp_queue(20_000_000, rtt, 1.0, MTU);
    let bdp = path.rate_bps as f64 / 8.0 * rtt.as_secs_f64();
    let mut sim = Dumbbell::new(path, t0);
    sim.add_flow(flow_config(CongestionKind::BbrV3), t0);
    let start = t0 + Duration::from_secs(1);
    sim.run_until(start);
    let before = sim.received(0);

    // Sample the cwnd every ms: a ProbeRTT shows as a stretch below 0.6 BDP.
    let step = Duration::from_millis(1);
    let end = start + Duration::from_secs(60);
    let mut episodes = Vec::new();
    let mut in_probe: Option<(Instant, f64, u32)> = None;
    let mut min_cwnd = u64::MAX;
    while sim.now < end {
        let next = sim.now + step;
        sim.run_until(next);
        let cwnd = sim.sender_stats(0).cwnd;
        min_cwnd = min_cwnd.min(cwnd);
        let low = (cwnd as f64) < 0.6 * bdp;
        in_probe = match (in_probe, low) {
            (None, true) => Some((sim.now, cwnd as f64, 1)),
            (Some((since, sum, n)), true) => Some((since, sum + cwnd as f64, n + 1)),
            (Some((since, sum, n)), false) => {
                episodes.push((since, sim.now - since, sum / f64::from(n)));
                None
            }
            (None, false) => None,
        };
    }
    let goodput = (sim.received(0) - before) as f64 / 60.0;
    let share = goodput / path.payload_capacity(MTU);
    println!(
        "bbrv3 60 s: goodput {:.2} Mbit/s = {:.2} % of the link, {} ProbeRTT episodes, \
         drops {}, min cwnd {min_cwnd} bytes (BDP {bdp:.0})",
        goodput * 8e-6,
        share * 100.0,
        episodes.len(),
        sim.drops
    );
    for (at, len, mean) in &episodes {
        println!(
            "  at {:.3} s for {:?}, mean cwnd {:.2} BDP",
            (*at - t0).as_secs_f64(),
            len,
            mean / bdp
        );
    }
    assert!(
        share >= 0.97,
        "ProbeRTT cost more than 3 %: {:.2} %",
        share * 100.0
    );
    // Every 5 s (plus the 200 ms spent in it), not every 10 s and not constantly.
    assert!(
        (10..=13).contains(&episodes.len()),
        "{} episodes",
        episodes.len()
    );
    for pair in episodes.windows(2) {
        let gap = pair[1].0 - pair[0].0;
        assert!(gap <= Duration::from_millis(5600), "ProbeRTT {gap:?} apart");
    }
    for (_, len, mean) in &episodes {
        assert!(*mean >= 0.45 * bdp, "ProbeRTT held {:.2} BDP", mean / bdp);
        assert!(
            *len <= Duration::from_millis(300),
            "ProbeRTT lasted {len:?}"
        );
    }
    assert!(min_cwnd >= 4 * MTU as u64);
}
