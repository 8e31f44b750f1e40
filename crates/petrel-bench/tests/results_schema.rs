//! `RESULTS.md` documents every recorded field: an example of each result
//! struct is serialised, and every key it writes (nested ones included) must
//! appear in the document as `` `key` ``. A field added to a struct in
//! `src/record/` without a line in the document fails here.

#![allow(clippy::unwrap_used)]

use std::collections::BTreeSet;
use std::net::SocketAddr;
use std::time::Duration;

use petrel_bench::record::echo::{EchoErrors, EchoIoModel, EchoParameters, EchoRound, TlsSession};
use petrel_bench::record::endpoint_io::EndpointIo;
use petrel_bench::record::goodput::{
    GoodputCase, GoodputParameters, GoodputRound, RelayFigures as GoodputRelay,
    ScenarioExpectation, SenderStats, TransportSettings,
};
use petrel_bench::record::idle::{IdleMode, IdleParameters, IdleReport};
use petrel_bench::record::netem::{NetemMode, NetemParameters, NetemRound};
use petrel_bench::record::reflector::{LoadResult, ReceiverKindResult, ReflectorParameters};
use petrel_bench::record::reflector_cluster::{
    ClusterParameters, ClusterStage, GeneratorStage, LossAttribution, NodeStage,
};
use petrel_bench::record::reflector_soak::{SoakParameters, SoakResult};
use petrel_bench::record::rudp::{
    FecFigures, FecMode, FecShape, IoModel, KcpSummary, KcptunParameters, KcptunRound,
    KcptunTuning, RelayFigures, RudpParameters, RudpRound,
};
use petrel_bench::record::{Percentiles, ResultRecord, ServerClientBuffers, Spread};
use petrel_netem::bench::{AccuracyConfig, AccuracyResult, CeilingConfig, CeilingResult};
use petrel_netem::{
    BurstLoss, DirectionReport, GilbertElliott, Lateness, LinkConfig, LinkStats, RelayStats,
    RouteReport,
};
use petrel_sys::socket::SocketBuffers;
use serde::Serialize;

/// Every object key in `value`, at any depth.
fn keys(value: &serde_json::Value, out: &mut BTreeSet<String>) {
    match value {
        serde_json::Value::Object(map) => {
            for (k, v) in map {
                out.insert(k.clone());
                keys(v, out);
            }
        }
        serde_json::Value::Array(items) => items.iter().for_each(|v| keys(v, out)),
        _ => {}
    }
}

/// The keys `example` writes that `RESULTS.md` does not mention.
fn undocumented(example: &impl Serialize) -> Vec<String> {
    let doc = include_str!("../RESULTS.md");
    let mut found = BTreeSet::new();
    keys(&serde_json::to_value(example).unwrap(), &mut found);
    found
        .into_iter()
        .filter(|k| !doc.contains(&format!("`{k}`")))
        .collect()
}

fn echo_round() -> EchoRound {
    EchoRound {
        round: 0,
        sent: 1,
        warmup_round_trips: 1,
        round_trips: 1,
        measured_s: 1.0,
        drain_s: 0.0,
        round_trips_per_sec: 1.0,
        rtt: Percentiles::default(),
        cpu_percent: Some(1.0),
        server_echoed: 1,
        errors: EchoErrors::default(),
        server_io: Some(EndpointIo::default()),
    }
}

fn link_config() -> LinkConfig {
    LinkConfig {
        burst: Some(BurstLoss { k: 1, n: 10 }),
        gilbert: Some(GilbertElliott {
            p_good_to_bad: 0.01,
            p_bad_to_good: 0.3,
            loss_good: 0.0,
            loss_bad: 0.5,
        }),
        ..LinkConfig::default()
    }
}

fn relay_stats() -> RelayStats {
    let direction = DirectionReport {
        stats: LinkStats::default(),
        configured_loss: 0.0,
        observed_loss: 0.0,
        configured_rate_bps: Some(1),
        observed_in_bps: 0.0,
        observed_forwarded_bps: 0.0,
    };
    RelayStats {
        uptime_ms: 0.0,
        thread_cpu_ms: 0.0,
        max_routes: 1,
        routes_rejected: 0,
        truncated: 0,
        recv_errors: 0,
        send_errors: 0,
        send_dropped: 0,
        routes_expired: 0,
        route_setup_errors: 0,
        lateness: Lateness::default(),
        upstream_total: LinkStats::default(),
        downstream_total: LinkStats::default(),
        routes: vec![RouteReport {
            index: 0,
            client: SocketAddr::from(([127, 0, 0, 1], 1)),
            upstream_local: None,
            age_ms: 0.0,
            peak_held_bytes: 0,
            peak_held_packets: 0,
            upstream: direction.clone(),
            downstream: direction,
        }],
    }
}

#[test]
fn the_envelope_is_documented() {
    let mut r = ResultRecord::begin("echo", "case", &serde_json::json!({})).unwrap();
    let side = SocketBuffers {
        send_requested: Some(1),
        send_actual: 1,
        recv_requested: Some(1),
        recv_actual: 1,
    };
    r.socket_buffers = Some(ServerClientBuffers {
        server: side,
        client: side,
    });
    let one = Spread {
        min: 1.0,
        median: 1.0,
        max: 1.0,
    };
    r.summary.insert("round_trips_per_sec".into(), one);
    r.peak_rss_bytes = Some(1);
    // The map keys of `summary` and `errors` are figure and error names,
    // documented with each benchmark; only the envelope's own keys count.
    let mut v = serde_json::to_value(&r).unwrap();
    v["summary"] = serde_json::to_value(one).unwrap();
    assert_eq!(undocumented(&v), Vec::<String>::new());
}

#[test]
fn echo_is_documented() {
    let params = EchoParameters {
        protocol: "udp".into(),
        payload: 1,
        clients: 1,
        window: 1,
        warmup_s: 1.0,
        seconds: 1.0,
        drain_limit_s: 1.0,
        rounds: 1,
        runtime: "current_thread".into(),
        runtime_workers: 1,
        reliable: true,
        peer: Some("quinn 0".into()),
        io_model: EchoIoModel::Sharded,
        shards: 2,
        work: 1,
    };
    assert_eq!(undocumented(&params), Vec::<String>::new());
    let tls = TlsSession {
        version: "TLSv1_3".into(),
        cipher_suite: "x".into(),
        library: "rustls 0".into(),
        certificate: "self-signed".into(),
    };
    let mut with_tls = serde_json::to_value(&params).unwrap();
    with_tls["tls"] = serde_json::to_value(&tls).unwrap();
    assert_eq!(undocumented(&with_tls), Vec::<String>::new());
    assert_eq!(undocumented(&echo_round()), Vec::<String>::new());
    assert_eq!(
        undocumented(&EchoErrors::default().by_kind()),
        Vec::<String>::new()
    );
}

#[test]
fn rudp_is_documented() {
    let params = RudpParameters {
        payload: 1,
        clients: 1,
        window: 1,
        warmup_s: 1.0,
        seconds: 1.0,
        drain_limit_s: 1.0,
        rounds: 1,
        io_model: IoModel::Shared,
        io_threads: 1,
        fec: FecMode::Adaptive,
        fec_shape: Some(FecShape {
            data_shards: 8,
            parity_shards: 2,
        }),
        fec_scheme: "Adaptive".into(),
        fec_group_wait_ms: 1.0,
        profile: "random".into(),
        link: link_config(),
        seed: 1,
        kcp: KcpSummary::from(&petrel::KcpConfig::default()),
        relay_socket_buffer: 1,
    };
    assert_eq!(undocumented(&params), Vec::<String>::new());
    let round = RudpRound {
        seed: 1,
        echo: echo_round(),
        app_bytes: 1,
        udp_bytes_sent: 1,
        datagrams_sent: 1,
        overhead_percent: Some(1.0),
        retransmissions: 1,
        retransmissions_per_1000_rt: Some(1.0),
        endpoint_send_waits: 0,
        relay: RelayFigures::new(&relay_stats(), &link_config()),
        fec: Some(FecFigures {
            recoveries: 1,
            recoveries_per_1000_rt: Some(1.0),
            groups_unrecoverable: 0,
            parity_shards_sent: 1,
            max_parity: 1,
            policy_changes: 0,
            sampled_peak_retained_bytes: 1,
            connection_peak_retained_bytes: 1,
        }),
        peak_rss_bytes: Some(1),
    };
    assert_eq!(undocumented(&round), Vec::<String>::new());
}

#[test]
fn rudp_kcptun_is_documented() {
    let shape = FecShape {
        data_shards: 10,
        parity_shards: 3,
    };
    let params = KcptunParameters {
        peer: "kcptun 1".into(),
        payload: 1,
        clients: 1,
        window: 1,
        warmup_s: 1.0,
        seconds: 1.0,
        drain_limit_s: 1.0,
        rounds: 1,
        fec: FecMode::Fixed,
        fec_shape: Some(shape),
        profile: "random".into(),
        link: link_config(),
        seed: 1,
        tuning: KcptunTuning::matching(&petrel::KcpConfig::default(), Some(shape), 4, 1),
        snmp_period_s: 1,
        relay_socket_buffer: 1,
    };
    assert_eq!(undocumented(&params), Vec::<String>::new());
    // The SNMP rows are kcp-go's columns; the document names those the figures use.
    let row: std::collections::BTreeMap<String, u64> = [
        "Unix",
        "BytesSent",
        "OutBytes",
        "RetransSegs",
        "FECRecovered",
    ]
    .into_iter()
    .map(|k| (k.to_owned(), 1))
    .collect();
    let round = KcptunRound {
        seed: 1,
        echo: echo_round(),
        app_bytes: 1,
        udp_bytes_sent: Some(1),
        overhead_percent: Some(1.0),
        retransmissions: Some(1),
        retransmissions_per_1000_rt: Some(1.0),
        fec_recoveries: Some(1),
        fec_recoveries_per_1000_rt: Some(1.0),
        client_cpu_percent: Some(1.0),
        server_cpu_percent: Some(1.0),
        children_cpu_percent: Some(2.0),
        client_snmp: Some(row.clone()),
        server_snmp: Some(row),
        snmp_error: Some("x".into()),
        relay: RelayFigures::new(&relay_stats(), &link_config()),
        peak_rss_bytes: Some(1),
    };
    assert_eq!(undocumented(&round), Vec::<String>::new());
}

#[test]
fn goodput_is_documented() {
    let settings = [
        TransportSettings::Rudp {
            mtu_bytes: 1,
            snd_wnd_packets: 1,
            rcv_wnd_packets: 1,
            stream_mode: true,
            socket_buffer_bytes: 1,
        },
        TransportSettings::Quic {
            stream_receive_window_bytes: 1,
            receive_window_bytes: 1,
            send_window_bytes: 1,
            socket_buffer_bytes: 1,
            controller: Some("cubic".into()),
        },
        TransportSettings::Tcp {
            tcp_congestion: Some("cubic".into()),
            socket_buffer_bytes: "kernel autotuning".into(),
        },
        TransportSettings::Peer {
            client_program: "aioquic 1.7.2".into(),
            server_program: "aioquic 1.7.2".into(),
            alpn: "hq-interop".into(),
            sender_controller: "cubic".into(),
            settings: "max_data = 16 MiB".into(),
        },
    ];
    for transport_settings in settings {
        let params = GoodputParameters {
            protocol: "rudp".into(),
            case: GoodputCase {
                transport: "rudp".into(),
                cc: "cubic".into(),
                profile: "p2p".into(),
                bandwidth_bps: 1,
                delay: 1.0,
                queue_packets: 1,
                queue_bytes: Some(1500),
                loss_percent: 1.0,
                size_bytes: 1,
                repetitions: 1,
                seed: 1,
            },
            direction: "client to server".into(),
            rtt_source: "srtt".into(),
            cpu_source: "getrusage".into(),
            scenario: Some(ScenarioExpectation {
                name: "bbr-loss".into(),
                expected: "BBR keeps most of the link".into(),
                criterion: "efficiency_percent >= 50".into(),
            }),
            link_rate_bps: Some(1),
            chunk_bytes: 1,
            transfer_timeout_s: 1.0,
            runtime: "tokio".into(),
            transport_settings,
        };
        assert_eq!(undocumented(&params), Vec::<String>::new());
    }
    let round = GoodputRound {
        repetition: 0,
        seed: 1,
        ok: true,
        error: None,
        bytes_received: 1,
        mismatched_bytes: 0,
        transfer_s: Some(1.0),
        wall_s: Some(1.0),
        goodput_mbps: Some(1.0),
        wall_goodput_mbps: Some(1.0),
        efficiency_percent: Some(1.0),
        wall_efficiency_percent: Some(1.0),
        rtt_p50_ms: Some(1.0),
        rtt_p99_ms: Some(1.0),
        rtt_samples: 1,
        queue_delay_p50_ms: Some(0.0),
        queue_delay_p99_ms: Some(0.0),
        cpu_s: Some(1.0),
        cpu_s_per_gb: Some(1.0),
        verdict: Some("pass".into()),
        sender: SenderStats {
            sender_io: Some(EndpointIo::default()),
            receiver_io: Some(EndpointIo::default()),
            ..SenderStats::default()
        },
        relay: Some(GoodputRelay {
            upstream_forwarded_bytes: 1,
            upstream_queue_drops: 0,
            upstream_queue_peak_packets: 1,
            downstream_queue_drops: 0,
            relay_send_dropped: 0,
            lateness_max_us: 1.0,
            upstream_random_drops: 0,
            downstream_random_drops: 0,
        }),
    };
    assert_eq!(undocumented(&round), Vec::<String>::new());
}

#[test]
fn idle_is_documented() {
    let params = IdleParameters {
        connections: 1,
        measured: 1.0,
        mode: IdleMode::Native,
    };
    let report = IdleReport {
        connections: 1,
        setup_seconds: 1.0,
        cpu_percent: 1.0,
        wakeups_per_second: 1.0,
        datagrams_per_second: 1.0,
        rss_bytes: 1,
        rss_bytes_per_connection: 1.0,
    };
    assert_eq!(undocumented(&params), Vec::<String>::new());
    assert_eq!(undocumented(&report), Vec::<String>::new());
}

#[test]
fn netem_is_documented() {
    let params = NetemParameters {
        mode: NetemMode::Both,
        ceiling: CeilingConfig::default(),
        accuracy: AccuracyConfig {
            delay: Duration::from_millis(10),
            ..AccuracyConfig::default()
        },
        loadavg_at_start: Some("0.00 0.00 0.00 1/1 1".into()),
    };
    let round = NetemRound {
        ceiling: Some(CeilingResult {
            sent: 1,
            received: 1,
            lost: 0,
            seconds: 1.0,
            pps: 1.0,
            gbit_per_s: 1.0,
            cpu_seconds: 1.0,
            relay: relay_stats(),
        }),
        delay_accuracy: Some(AccuracyResult {
            sent: 1,
            received: 1,
            offered_pps: 1.0,
            cpu_seconds: 1.0,
            relay_lateness: Lateness::default(),
            end_to_end_excess: Lateness::default(),
            relay: relay_stats(),
        }),
    };
    assert_eq!(undocumented(&params), Vec::<String>::new());
    assert_eq!(undocumented(&round), Vec::<String>::new());
}

fn reflector_parameters() -> ReflectorParameters {
    ReflectorParameters {
        levels: vec![100],
        groups: 1,
        interval_ms: vec![120],
        payload: 320,
        duration_s: 5,
        writers: 2,
        max_frame_age_ms: 120,
        in_process: false,
        ghosts: 200,
        ws: 200,
    }
}

#[test]
fn reflector_is_documented() {
    let params = reflector_parameters();
    let stage = LoadResult {
        server_rss_mb: Some(1.0),
        server_process: "child".into(),
        by_kind: vec![ReceiverKindResult::default()],
        ..LoadResult::default()
    };
    assert_eq!(undocumented(&params), Vec::<String>::new());
    assert_eq!(undocumented(&stage), Vec::<String>::new());
}

#[test]
fn reflector_soak_is_documented() {
    let params = SoakParameters {
        devices: 5000,
        groups: 10,
        interval_ms: 120,
        payload: 320,
        soak_s: 60,
        warmup_s: 10,
        seed: 1,
        churn_per_s: 5,
        settle_ms: 2000,
        writers: 2,
        max_frame_age_ms: 120,
    };
    let result = SoakResult {
        failures: vec!["x".into()],
        ..SoakResult::default()
    };
    assert_eq!(undocumented(&params), Vec::<String>::new());
    assert_eq!(undocumented(&result), Vec::<String>::new());
}

#[test]
fn reflector_cluster_is_documented() {
    let params = ClusterParameters {
        stages: reflector_parameters(),
        edges: 3,
        layout: "cross".into(),
        baseline: true,
        devices_per_process: Some(10_000),
    };
    let stage = ClusterStage {
        layout: "cross".into(),
        edges: 3,
        load: LoadResult {
            server_rss_mb: Some(1.0),
            server_process: "cluster".into(),
            ..LoadResult::default()
        },
        nodes: vec![NodeStage {
            name: "edge-b".into(),
            ..NodeStage::default()
        }],
        cost_us_per_packet: Some(1.0),
        cost_ratio_to_single: Some(1.0),
        loss: LossAttribution::default(),
        generators: vec![GeneratorStage {
            name: "gen-0".into(),
            ..GeneratorStage::default()
        }],
        ..ClusterStage::default()
    };
    assert_eq!(undocumented(&params), Vec::<String>::new());
    assert_eq!(undocumented(&stage), Vec::<String>::new());
}
