//! Short echo runs over real loopback sockets.

#![allow(clippy::unwrap_used)]

use std::time::Duration;

use petrel_bench::echo::tcp::TcpTransport;
use petrel_bench::echo::udp::UdpTransport;
use petrel_bench::echo::{run_echo, EchoConfig, EchoReport, EchoTransport};

fn short(clients: usize, window: usize) -> EchoConfig {
    EchoConfig {
        payload: 1024,
        clients,
        window,
        warmup: Duration::from_millis(100),
        measured: Duration::from_millis(500),
        rounds: 1,
    }
}

async fn run<T: EchoTransport>(t: &T, cfg: &EchoConfig) -> EchoReport {
    run_echo(t, cfg, &format!("{}-test", t.name()))
        .await
        .unwrap()
}

fn assert_clean(report: &EchoReport) {
    let round = &report.rounds[0];
    assert!(report.record.ok, "{:#?}", report.rounds);
    assert_eq!(round.errors.total(), 0, "{:?}", round.errors);
    assert!(round.round_trips > 0);
    assert!(round.warmup_round_trips > 0);
    assert_eq!(round.rtt.count, round.round_trips);
    assert!(round.rtt.p50_us <= round.rtt.p99_us && round.rtt.p99_us <= round.rtt.max_us);
    // Everything sent was echoed: warm-up and measured, nothing left over.
    assert_eq!(round.sent, round.round_trips + round.warmup_round_trips);
    assert_eq!(round.server_echoed, round.sent);
    assert!(round.drain_s < 2.0);
}

fn assert_json_fields(report: &EchoReport) {
    let json: serde_json::Value = serde_json::from_str(&report.record.to_json().unwrap()).unwrap();
    for key in [
        "schema_version",
        "command_line",
        "seeds",
        "build",
        "host",
        "started_at",
        "parameters",
        "socket_buffers",
        "rounds",
        "summary",
        "errors",
        "ok",
    ] {
        assert!(json.get(key).is_some(), "missing {key}");
    }
    for key in ["git_revision", "git_dirty", "rustc_version"] {
        assert!(json["build"].get(key).is_some(), "missing build.{key}");
    }
    for key in ["cpu_model", "logical_cores", "kernel"] {
        assert!(json["host"].get(key).is_some(), "missing host.{key}");
    }
    for key in ["round_trips_per_sec", "rtt_p50_us", "rtt_p99_us"] {
        let s = &json["summary"][key];
        assert!(s["min"].as_f64().unwrap() <= s["median"].as_f64().unwrap());
    }
    assert_eq!(json["ok"], serde_json::Value::Bool(true));
    assert_eq!(json["parameters"]["window"], 16);
    assert_eq!(json["rounds"].as_array().unwrap().len(), 1);
}

#[tokio::test]
async fn udp_echo_is_clean_and_records_buffers() {
    let report = run(&UdpTransport::default(), &short(2, 16)).await;
    assert_clean(&report);
    assert_json_fields(&report);
    let buffers = report.record.socket_buffers.unwrap();
    assert_eq!(buffers.server.recv_requested, Some(4 * 1024 * 1024));
    assert_eq!(buffers.server.send_requested, Some(64 * 1024));
    assert!(buffers.server.recv_actual > 0 && buffers.client.send_actual > 0);
    assert_eq!(report.record.errors["lost"], 0);
}

#[tokio::test]
async fn tcp_echo_is_clean() {
    let report = run(&TcpTransport, &short(2, 16)).await;
    assert_clean(&report);
    assert_json_fields(&report);
    assert_eq!(report.record.parameters["reliable"], true);
}

#[tokio::test]
async fn single_client_window_one_and_max_payload() {
    let mut cfg = short(1, 1);
    cfg.payload = 65_507;
    cfg.measured = Duration::from_millis(200);
    assert_clean(&run(&UdpTransport::default(), &cfg).await);
    assert_clean(&run(&TcpTransport, &cfg).await);
}

#[tokio::test]
async fn rounds_give_a_spread() {
    let mut cfg = short(1, 4);
    cfg.measured = Duration::from_millis(150);
    cfg.warmup = Duration::ZERO;
    cfg.rounds = 3;
    let report = run(&UdpTransport::default(), &cfg).await;
    assert_eq!(report.rounds.len(), 3);
    assert_eq!(report.record.rounds.len(), 3);
    let s = report.record.summary["round_trips_per_sec"];
    assert!(s.min <= s.median && s.median <= s.max && s.min > 0.0);
}

#[tokio::test]
async fn invalid_config_is_an_error_not_a_run() {
    let cfg = EchoConfig {
        clients: 0,
        ..short(1, 1)
    };
    let err = run_echo(&TcpTransport, &cfg, "bad").await.unwrap_err();
    assert!(err.to_string().contains("clients"), "{err}");
}
