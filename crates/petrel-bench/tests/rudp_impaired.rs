//! Short RUDP-under-impairment runs over real loopback sockets and the netem relay.

#![allow(clippy::unwrap_used)]

use std::time::Duration;

use petrel_bench::echo::EchoConfig;
use petrel_bench::rudp_bench::{run_rudp_bench, FecMode, IoModel, RudpBenchConfig};
use petrel_netem::Profile;

fn short(profile: Profile, io_model: IoModel, io_threads: usize) -> RudpBenchConfig {
    RudpBenchConfig {
        echo: EchoConfig {
            payload: 1024,
            clients: 4,
            window: 16,
            warmup: Duration::from_millis(300),
            measured: Duration::from_secs(1),
            rounds: 1,
        },
        io_model,
        io_threads,
        profile,
        ..Default::default()
    }
}

#[test]
fn random_loss_is_measured_and_repaired_by_retransmission() {
    let report = run_rudp_bench(&short(Profile::Random, IoModel::Shared, 1)).unwrap();
    let r = &report.rounds[0];
    assert!(report.record.ok, "{:#?}", report.rounds);
    assert_eq!(r.echo.errors.total(), 0);
    assert!(r.echo.round_trips > 0);
    // Every message sent was echoed: the ARQ repaired every loss.
    assert_eq!(r.echo.server_echoed, r.echo.sent);
    assert_eq!(r.echo.sent, r.echo.round_trips + r.echo.warmup_round_trips);
    // 5 % per direction over a few thousand packets: a wide band, not a statistic.
    assert!(
        (0.02..=0.09).contains(&r.relay.measured_loss),
        "{}",
        r.relay.measured_loss
    );
    assert!((r.relay.configured_loss - 0.05).abs() < 1e-12);
    assert!(r.retransmissions > 0);
    assert!(r.retransmissions_per_1000_rt.unwrap() > 0.0);
    // 10 ms each way: no round trip can be faster than 20 ms.
    assert!(r.echo.rtt.p50_us >= 20_000, "{:?}", r.echo.rtt);
    assert!(r.echo.rtt.p50_us <= r.echo.rtt.p95_us && r.echo.rtt.p99_us <= r.echo.rtt.max_us);
    // Headers, acks and retransmissions cost something; more than doubling would be a bug.
    let overhead = r.overhead_percent.unwrap();
    assert!((0.0..100.0).contains(&overhead), "{overhead}");
    assert!(r.udp_bytes_sent > r.app_bytes);
    // Messages sit in the 10 ms delay line, so a route holds at least one.
    assert!(r.relay.route_peak_bytes >= 1024);
    assert!(r.relay.upstream.duplicated + r.relay.downstream.duplicated > 0);
    assert!(r.fec.is_none());

    let json: serde_json::Value = serde_json::from_str(&report.record.to_json().unwrap()).unwrap();
    assert_eq!(json["benchmark"], "rudp");
    assert_eq!(json["seeds"], serde_json::json!([42]));
    assert_eq!(json["parameters"]["profile"], "random");
    for key in [
        "round_trips_per_sec",
        "rtt_p50_us",
        "rtt_p95_us",
        "rtt_p99_us",
        "rtt_max_us",
        "cpu_percent",
        "peak_rss_bytes",
        "overhead_percent",
        "retransmissions_per_1000_rt",
        "measured_loss_percent",
        "relay_route_peak_bytes",
    ] {
        assert!(json["summary"].get(key).is_some(), "summary lacks {key}");
    }
    assert!(json["socket_buffers"].is_object());
}

#[test]
fn sharded_clean_link_loses_nothing_and_rounds_take_successive_seeds() {
    let cfg = RudpBenchConfig {
        echo: EchoConfig {
            measured: Duration::from_millis(500),
            warmup: Duration::from_millis(100),
            rounds: 2,
            ..short(Profile::None, IoModel::Sharded, 2).echo
        },
        seed: 7,
        ..short(Profile::None, IoModel::Sharded, 2)
    };
    let report = run_rudp_bench(&cfg).unwrap();
    assert!(report.record.ok, "{:#?}", report.rounds);
    assert_eq!(report.record.seeds, vec![7, 8]);
    assert_eq!(report.record.case, "rudp-none-arq-1024B-4x16-sharded2");
    for (i, r) in report.rounds.iter().enumerate() {
        assert_eq!(r.seed, 7 + i as u64);
        assert_eq!(r.echo.round as usize, i);
        assert_eq!(r.relay.measured_loss, 0.0);
        assert_eq!(r.relay.configured_loss, 0.0);
        assert!(r.echo.round_trips > 0);
    }
}

#[test]
fn fec_recovers_shards_under_random_loss() {
    for (fec, parity) in [(FecMode::Fixed, 2..=2), (FecMode::Adaptive, 1..=4)] {
        let cfg = RudpBenchConfig {
            fec,
            ..short(Profile::Random, IoModel::Shared, 1)
        };
        let report = run_rudp_bench(&cfg).unwrap();
        let r = &report.rounds[0];
        assert!(report.record.ok, "{fec:?}: {:#?}", report.rounds);
        assert_eq!(r.echo.server_echoed, r.echo.sent);
        let f = r.fec.unwrap();
        assert!(f.recoveries > 0, "{fec:?}: {f:?}");
        assert!(f.recoveries_per_1000_rt.unwrap() > 0.0);
        assert!(f.parity_shards_sent > 0);
        assert!(parity.contains(&f.max_parity), "{fec:?}: {f:?}");
        // Under load some group is always open or awaiting repair, so a sampler
        // that reads the connections sees retained bytes.
        assert!(f.sampled_peak_retained_bytes > 0, "{fec:?}: {f:?}");
        assert!(f.connection_peak_retained_bytes > 0);
        assert!(report
            .record
            .summary
            .contains_key("fec_recoveries_per_1000_rt"));
        // Parity costs bandwidth: ≥ 1 parity shard per 8 data shards is 12.5 % on
        // its own, against ~14 % for ARQ only under this loss; 10 % is a loose floor.
        assert!(r.overhead_percent.unwrap() > 10.0);
    }
}
