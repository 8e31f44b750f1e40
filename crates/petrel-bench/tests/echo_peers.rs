//! Short echo runs of the peer libraries (WebSocket, tokio_kcp, quinn) over
//! real loopback sockets: clean runs, and results that name the peer.

#![allow(clippy::unwrap_used)]

use std::time::Duration;

use petrel_bench::echo::kcp::KcpTransport;
use petrel_bench::echo::quic::QuicTransport;
use petrel_bench::echo::udp::{DEFAULT_RECV_BUFFER, DEFAULT_SEND_BUFFER};
use petrel_bench::echo::websocket::WebSocketTransport;
use petrel_bench::echo::{peers, run_echo, BufferRequest, EchoConfig, EchoReport, EchoTransport};

const BUFFERS: BufferRequest = BufferRequest {
    send: Some(DEFAULT_SEND_BUFFER),
    recv: Some(DEFAULT_RECV_BUFFER),
};

fn short(clients: usize, window: usize, payload: usize) -> EchoConfig {
    EchoConfig {
        payload,
        clients,
        window,
        warmup: Duration::from_millis(100),
        measured: Duration::from_millis(400),
        rounds: 1,
    }
}

async fn run_clean<T: EchoTransport>(t: &T, cfg: &EchoConfig) -> EchoReport {
    let report = run_echo(t, cfg, &format!("{}-test", t.name()))
        .await
        .unwrap();
    let round = &report.rounds[0];
    assert!(report.record.ok, "{}: {:#?}", t.name(), report.rounds);
    assert!(round.round_trips > 0);
    assert_eq!(round.sent, round.round_trips + round.warmup_round_trips);
    assert_eq!(round.server_echoed, round.sent);
    assert_eq!(report.record.parameters["reliable"], true);
    report
}

#[tokio::test]
async fn websocket_echo_is_clean_and_names_its_peer() {
    let t = WebSocketTransport;
    let report = run_clean(&t, &short(2, 16, 1024)).await;
    assert_eq!(report.record.parameters["peer"], peers::WEBSOCKET);
    assert!(peers::WEBSOCKET.starts_with("tokio-tungstenite 0."));
    run_clean(&t, &short(1, 1, 65_507)).await;
}

#[tokio::test]
async fn kcp_echo_is_clean_and_names_its_peer() {
    let t = KcpTransport::new(BUFFERS);
    let report = run_clean(&t, &short(2, 16, 1024)).await;
    assert_eq!(report.record.parameters["peer"], peers::KCP);
    assert!(peers::KCP.starts_with("tokio_kcp 0."));
    let buffers = report.record.socket_buffers.unwrap();
    assert_eq!(buffers.server.recv_requested, Some(DEFAULT_RECV_BUFFER));
    // Fragmented into 55 KCP segments of MTU 1200, within the 128/512 windows.
    run_clean(&t, &short(1, 1, 65_507)).await;
}

#[tokio::test]
async fn quic_echo_is_clean_and_names_its_peer() {
    let t = QuicTransport::new(BUFFERS).unwrap();
    let report = run_clean(&t, &short(2, 16, 1024)).await;
    assert_eq!(report.record.parameters["peer"], peers::QUIC);
    assert!(peers::QUIC.starts_with("quinn 0.11."));
    assert_eq!(report.record.errors["server"], 0);
    run_clean(&t, &short(1, 1, 65_507)).await;
}
