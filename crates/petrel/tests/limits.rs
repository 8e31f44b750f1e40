//! Endpoint-wide and per-source limits driven past their bounds on loopback:
//! connections per /24, the receive-buffer budget, and the rate of repeated
//! legacy SYN answers.
#![allow(clippy::unwrap_used)] // tests fail loudly on any unexpected error

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use petrel::{Connection, Endpoint, EndpointConfig, Mode};
use tokio::net::UdpSocket;
use tokio::time::timeout;

fn spawn_echo(conn: Connection) {
    tokio::spawn(async move {
        while let Ok(Some(msg)) = conn.recv().await {
            if conn.send(msg).await.is_err() {
                break;
            }
        }
    });
}

async fn echo_server(config: EndpointConfig) -> (Arc<Endpoint>, SocketAddr) {
    let server = Arc::new(
        Endpoint::bind("127.0.0.1:0".parse().unwrap(), config)
            .await
            .unwrap(),
    );
    let addr = server.local_addr();
    let acceptor = server.clone();
    tokio::spawn(async move {
        while let Some(conn) = acceptor.accept().await {
            spawn_echo(conn);
        }
    });
    (server, addr)
}

/// A client endpoint on `ip` that gives up connecting after 500 ms.
async fn client(ip: &str) -> Endpoint {
    let config = EndpointConfig {
        connect_timeout: Duration::from_millis(500),
        ..EndpointConfig::default()
    };
    Endpoint::bind(format!("{ip}:0").parse().unwrap(), config)
        .await
        .unwrap()
}

/// Three hosts of one /24, each within its per-IP limit: the third is refused
/// by the per-prefix limit and counted.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn connections_per_slash_24_are_limited() {
    let (server, addr) = echo_server(EndpointConfig {
        max_connections_per_ip: 1,
        max_connections_per_prefix: 2,
        ..EndpointConfig::server()
    })
    .await;
    let (mut endpoints, mut conns) = (Vec::new(), Vec::new());
    for ip in ["127.0.0.1", "127.0.0.2"] {
        let c = client(ip).await;
        conns.push(c.connect(addr).await.unwrap());
        endpoints.push(c);
    }
    let third = client("127.0.0.3").await;
    assert!(third.connect(addr).await.is_err());
    let s = server.stats();
    assert_eq!((s.connections_open, s.refused_per_prefix), (2, 1), "{s:?}");
    assert_eq!(s.refused_per_peer, 0, "{s:?}");
}

/// A budget for two connections' receive buffers: the third connection is
/// refused and counted; closing one makes room again.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn receive_buffer_budget_bounds_the_endpoint() {
    let defaults = EndpointConfig::default();
    let per_connection = 2 * usize::from(defaults.kcp.rcv_wnd) * defaults.kcp.mtu;
    let (server, addr) = echo_server(EndpointConfig {
        recv_buffer_budget: 2 * per_connection + per_connection / 2,
        ..EndpointConfig::server()
    })
    .await;
    let c = client("127.0.0.1").await;
    let first = c.connect(addr).await.unwrap();
    let _second = c.connect(addr).await.unwrap();
    assert!(c.connect(addr).await.is_err());
    let s = server.stats();
    assert_eq!((s.connections_open, s.refused_recv_budget), (2, 1), "{s:?}");
    first.close().await.unwrap();
    let mut again = None;
    for _ in 0..20 {
        if let Ok(conn) = c.connect(addr).await {
            again = Some(conn);
            break;
        }
    }
    assert!(again.is_some(), "{:?}", server.stats());
}

/// A peer repeating the SYN of a connection it already has gets at most the
/// per-second allowance of repeated SYN-ACKs; the rest are dropped and counted.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn repeated_legacy_syns_are_answered_at_a_bounded_rate() {
    let (server, addr) = echo_server(EndpointConfig {
        mode: Mode::Legacy,
        ..EndpointConfig::server()
    })
    .await;
    let sock = UdpSocket::bind("127.0.0.1:0").await.unwrap();
    let mut syn = vec![1u8];
    syn.extend_from_slice(&42u32.to_le_bytes());
    let mut buf = [0u8; 2048];
    sock.send_to(&syn, addr).await.unwrap();
    timeout(Duration::from_secs(2), sock.recv_from(&mut buf))
        .await
        .unwrap()
        .unwrap();
    for _ in 0..50 {
        sock.send_to(&syn, addr).await.unwrap();
    }
    let mut answers = 0;
    while let Ok(Ok(_)) = timeout(Duration::from_millis(300), sock.recv_from(&mut buf)).await {
        answers += 1;
    }
    let s = server.stats();
    assert!(answers <= 4, "{answers} answers to 50 repeated SYNs; {s:?}");
    assert!(s.dropped_reply_rate >= 46, "{s:?}");
    assert_eq!(s.connections_open, 1, "{s:?}");
}
