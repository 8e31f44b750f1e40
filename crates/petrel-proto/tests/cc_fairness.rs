//! Two bulk flows of the same controller share a bottleneck; the second starts 1 s
//! after the first. Over the last 3 s of a 16 s run each gets its fair share ±20 %
//! (BBRv2/v3 need about 10 s to converge; at 8 s they were still 22 % and 14 % apart).
//!
//! Scaled to 50 Mbit/s (8 ms RTT, 1 BDP queue) so that sixteen simulated seconds of
//! two flows stay within a few seconds of a debug build.
#![allow(clippy::unwrap_used)]

mod cc_support;

use std::time::{Duration, Instant};

use cc_support::{flow_config, measure, Dumbbell, Path};
use petrel_proto::cc::CongestionKind;

const MTU: usize = 1200;

fn fairness(kind: CongestionKind) {
    let t0 = Instant::now();
    let path = Path::with_bdp_queue(50_000_000, Duration::from_millis(8), 1.0, MTU);
    let mut sim = Dumbbell::new(path, t0);
    sim.add_flow(flow_config(kind), t0);
    sim.add_flow(flow_config(kind), t0 + Duration::from_secs(1));
    let g = measure(
        &mut sim,
        t0 + Duration::from_secs(13),
        t0 + Duration::from_secs(16),
    );
    let total: f64 = g.iter().sum();
    let fair = total / 2.0;
    println!(
        "{kind}: flows {:.1} / {:.1} Mbit/s, total {:.1} % of the link, drops {}",
        g[0] * 8e-6,
        g[1] * 8e-6,
        total / path.payload_capacity(MTU) * 100.0,
        sim.drops
    );
    for (i, flow) in g.iter().enumerate() {
        assert!(
            (flow - fair).abs() <= 0.2 * fair,
            "{kind}: flow {i} got {:.1} Mbit/s, fair share {:.1}",
            flow * 8e-6,
            fair * 8e-6
        );
    }
    assert!(
        total >= 0.85 * path.payload_capacity(MTU),
        "{kind}: link underused"
    );
}

#[test]
fn reno_flows_converge() {
    fairness(CongestionKind::NewReno);
}

#[test]
fn cubic_flows_converge() {
    fairness(CongestionKind::Cubic);
}

#[test]
fn bbrv1_flows_converge() {
    fairness(CongestionKind::BbrV1);
}

#[test]
fn bbrv2_flows_converge() {
    fairness(CongestionKind::BbrV2);
}

#[test]
fn bbrv3_flows_converge() {
    fairness(CongestionKind::BbrV3);
}
