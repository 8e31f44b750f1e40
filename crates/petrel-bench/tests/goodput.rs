//! Short real goodput runs over loopback sockets: every transport carries 2 MB with
//! verified content, over plain loopback and (UDP transports) through the `p2p`
//! emulated link at 50 Mbit/s, and reports a goodput no higher than the link allows.
#![allow(clippy::unwrap_used)]

use std::time::Duration;

use petrel_bench::goodput::{
    run_goodput, CongestionKind, GoodputConfig, GoodputProfile, GoodputTransport, DEFAULT_RUDP_MTU,
    DEFAULT_RUDP_WINDOW,
};
use petrel_bench::record::ResultRecord;
use petrel_bench::report::render_html;

fn case(transport: GoodputTransport, cc: CongestionKind, profile: GoodputProfile) -> GoodputConfig {
    GoodputConfig {
        transport,
        cc,
        profile,
        bandwidth_bps: 50_000_000,
        delay: Duration::from_millis(4),
        queue_packets: 100,
        queue_bytes: None,
        loss_percent: 0.0,
        size_bytes: 2_000_000,
        repetitions: 1,
        seed: 7,
        scenario: None,
        rudp_window: DEFAULT_RUDP_WINDOW,
        rudp_mtu: DEFAULT_RUDP_MTU,
    }
}

fn check(cfg: GoodputConfig) -> ResultRecord {
    let report = run_goodput(&cfg, |_| {}).unwrap();
    let round = &report.rounds[0];
    assert!(report.record.ok, "{}: {round:?}", cfg.case_name());
    assert_eq!(round.bytes_received, cfg.size_bytes);
    assert_eq!(round.mismatched_bytes, 0);
    let goodput = round.goodput_mbps.unwrap();
    let wall = round.wall_goodput_mbps.unwrap();
    assert!(goodput > 0.0 && wall > 0.0 && wall <= goodput, "{round:?}");
    if let Some(rate) = cfg.link_rate_bps() {
        assert!(
            goodput * 1e6 <= rate as f64 * 1.02,
            "{}: {goodput} Mbit/s",
            cfg.case_name()
        );
        let eff = round.efficiency_percent.unwrap();
        assert!((eff - goodput * 1e6 / rate as f64 * 100.0).abs() < 1e-6);
        let relay = round.relay.unwrap();
        assert!(relay.upstream_forwarded_bytes >= cfg.size_bytes);
    }
    assert_eq!(report.record.errors.values().sum::<u64>(), 0);
    assert!(report.record.summary.contains_key("goodput_mbps_stdev"));
    report.record
}

#[test]
fn rudp_over_loopback_and_p2p() {
    check(case(
        GoodputTransport::Rudp,
        CongestionKind::Cubic,
        GoodputProfile::None,
    ));
    let record = check(case(
        GoodputTransport::Rudp,
        CongestionKind::BbrV3,
        GoodputProfile::P2p,
    ));
    let html = render_html(&[record]);
    assert!(html.contains("Bulk goodput"), "the report charts goodput");
}

/// Jumbo datagrams: every byte arrives, and the record says which size ran.
#[test]
fn rudp_with_jumbo_datagrams_over_loopback() {
    let record = check(GoodputConfig {
        rudp_mtu: 8972,
        ..case(
            GoodputTransport::Rudp,
            CongestionKind::Cubic,
            GoodputProfile::None,
        )
    });
    let json = serde_json::to_value(&record).unwrap();
    assert_eq!(
        json["parameters"]["transport_settings"]["mtu_bytes"],
        serde_json::json!(8972),
        "{json}"
    );
}

#[test]
fn quic_with_a_petrel_controller_over_loopback_and_p2p() {
    check(case(
        GoodputTransport::Quic,
        CongestionKind::BbrV3,
        GoodputProfile::None,
    ));
    check(case(
        GoodputTransport::Quic,
        CongestionKind::NewReno,
        GoodputProfile::P2p,
    ));
}

#[test]
fn quic_with_quinns_controller_over_loopback_and_p2p() {
    check(case(
        GoodputTransport::Quinn,
        CongestionKind::Cubic,
        GoodputProfile::None,
    ));
    check(case(
        GoodputTransport::Quinn,
        CongestionKind::BbrV1,
        GoodputProfile::P2p,
    ));
}

#[test]
fn tcp_over_loopback_only() {
    check(case(
        GoodputTransport::Tcp,
        CongestionKind::Cubic,
        GoodputProfile::None,
    ));
    assert!(case(
        GoodputTransport::Tcp,
        CongestionKind::Cubic,
        GoodputProfile::P2p
    )
    .validate()
    .is_err());
}
