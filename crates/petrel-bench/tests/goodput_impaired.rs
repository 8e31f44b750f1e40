//! Goodput through an impaired `p2p` link: `--loss` really drops packets in both
//! directions and the sender sees them, and the RTT under load is measured through
//! the emulated queue (at or above the base RTT, with the implied queue delay) and
//! checked against a scenario's expectation.
#![allow(clippy::unwrap_used)]

use std::time::Duration;

use petrel_bench::goodput::{
    run_goodput, CongestionKind, GoodputConfig, GoodputProfile, GoodputTransport, Scenario,
};

#[test]
fn random_loss_drops_packets_both_ways_and_the_sender_recovers() {
    let cfg = GoodputConfig {
        transport: GoodputTransport::Quic,
        cc: CongestionKind::Cubic,
        profile: GoodputProfile::P2p,
        bandwidth_bps: 50_000_000,
        delay: Duration::from_millis(2),
        loss_percent: 5.0,
        size_bytes: 500_000,
        repetitions: 1,
        seed: 3,
        ..GoodputConfig::default()
    };
    let report = run_goodput(&cfg, |_| {}).unwrap();
    let round = &report.rounds[0];
    assert!(report.record.ok, "{round:?}");
    assert_eq!(round.bytes_received, cfg.size_bytes);
    let relay = round.relay.unwrap();
    assert!(relay.upstream_random_drops > 0, "{relay:?}");
    assert!(relay.downstream_random_drops > 0, "{relay:?}");
    assert!(
        round.sender.packets_lost_or_retransmitted.unwrap() > 0,
        "{round:?}"
    );
    assert_eq!(report.record.parameters["case"]["loss_percent"], 5.0);
    assert!(
        report.record.case.ends_with("-loss5%"),
        "{}",
        report.record.case
    );
    // CPU per GB is measured (whole-process getrusage, so it is positive).
    assert!(round.cpu_s_per_gb.unwrap() > 0.0, "{round:?}");
}

#[test]
fn rtt_under_load_is_at_least_the_base_rtt_of_the_bufferbloat_link() {
    let cfg = GoodputConfig {
        transport: GoodputTransport::Quic,
        cc: CongestionKind::Cubic,
        size_bytes: 400_000,
        repetitions: 1,
        ..GoodputConfig::default().with_scenario(Scenario::BbrBufferbloat)
    };
    let base_ms = 100.0;
    assert_eq!(cfg.base_rtt(), Some(Duration::from_millis(100)));
    let report = run_goodput(&cfg, |_| {}).unwrap();
    let round = &report.rounds[0];
    assert!(report.record.ok, "{round:?}");
    assert!(round.rtt_samples > 0, "{round:?}");
    let (p50, p99) = (round.rtt_p50_ms.unwrap(), round.rtt_p99_ms.unwrap());
    assert!(p50 >= base_ms && p99 >= p50, "{round:?}");
    let queue = round.queue_delay_p50_ms.unwrap();
    assert!((queue - (p50 - base_ms)).abs() < 1e-9, "{round:?}");
    assert!(round.verdict.is_some(), "{round:?}");
    let scenario = &report.record.parameters["scenario"];
    assert_eq!(scenario["name"], "bbr-bufferbloat");
    assert_eq!(scenario["criterion"], "queue_delay_p50_ms >= 200");
    assert!(report.record.summary.contains_key("rtt_p99_ms"));
}
