//! The FEC retained-memory budget is one per endpoint: two connections through
//! lossy relays fill it, and the endpoint's total never exceeds it.

#![allow(clippy::unwrap_used)] // tests fail loudly on any unexpected error

use std::net::SocketAddr;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use bytes::Bytes;
use petrel::{Connection, Endpoint, EndpointConfig, FecConfig, FecScheme};
use tokio::net::UdpSocket;

const BUDGET: usize = 16 << 10;
const MESSAGES: u32 = 150;

fn localhost() -> SocketAddr {
    "127.0.0.1:0".parse().unwrap()
}

fn fec() -> FecConfig {
    FecConfig {
        scheme: FecScheme::Fixed {
            data_shards: 8,
            parity_shards: 2,
        },
        budget: BUDGET,
        // Unrecoverable groups stay until the budget releases them.
        group_expiry: Duration::from_secs(60),
        ..FecConfig::default()
    }
}

fn message(i: u32, conn: u8) -> Bytes {
    let mut v = vec![conn; 1000];
    v[..4].copy_from_slice(&i.to_be_bytes());
    Bytes::from(v)
}

/// Forwards between one client and `server`, dropping 3 of every 10 datagrams
/// each way once the first 20 (the handshake) have passed: enough loss in a row
/// that many 8+2 groups cannot be rebuilt and stay retained.
async fn lossy_relay(server: SocketAddr) -> SocketAddr {
    let sock = UdpSocket::bind(localhost()).await.unwrap();
    let addr = sock.local_addr().unwrap();
    tokio::spawn(async move {
        let mut client = None;
        let mut buf = vec![0u8; 65_536];
        let (mut up, mut down) = (0u32, 0u32);
        while let Ok((n, from)) = sock.recv_from(&mut buf).await {
            let (to, count) = if from == server {
                let Some(c) = client else { continue };
                (c, &mut down)
            } else {
                client = Some(from);
                (server, &mut up)
            };
            *count += 1;
            if *count > 20 && (3..6).contains(&(*count % 10)) {
                continue;
            }
            let _ = sock.send_to(&buf[..n], to).await;
        }
    });
    addr
}

fn spawn_echo(conn: Connection) {
    tokio::spawn(async move {
        while let Ok(Some(msg)) = conn.recv().await {
            if conn.send(msg).await.is_err() {
                break;
            }
        }
    });
}

async fn exchange(conn: Connection, tag: u8) -> Connection {
    let sender = {
        let conn = conn.clone();
        tokio::spawn(async move {
            for i in 0..MESSAGES {
                conn.send(message(i, tag)).await.unwrap();
            }
        })
    };
    for i in 0..MESSAGES {
        let got = conn.recv().await.unwrap().expect("closed early");
        assert_eq!(got, message(i, tag), "conn {tag} message {i}");
    }
    sender.await.unwrap();
    conn
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_connections_share_one_endpoint_budget() {
    let server = Endpoint::bind(
        localhost(),
        EndpointConfig {
            fec: fec(),
            ..EndpointConfig::server()
        },
    )
    .await
    .unwrap();
    let server_addr = server.local_addr();
    let client = Arc::new(
        Endpoint::bind(
            localhost(),
            EndpointConfig {
                fec: fec(),
                ..EndpointConfig::default()
            },
        )
        .await
        .unwrap(),
    );

    let done = Arc::new(AtomicBool::new(false));
    let watcher = {
        let (client, done) = (client.clone(), done.clone());
        tokio::spawn(async move {
            let mut max = 0;
            while !done.load(Ordering::Relaxed) {
                max = max.max(client.stats().fec_retained_bytes);
                tokio::time::sleep(Duration::from_millis(1)).await;
            }
            max
        })
    };

    let run = async {
        let a = client
            .connect(lossy_relay(server_addr).await)
            .await
            .unwrap();
        spawn_echo(server.accept().await.unwrap());
        let b = client
            .connect(lossy_relay(server_addr).await)
            .await
            .unwrap();
        spawn_echo(server.accept().await.unwrap());
        assert_eq!(server.stats().connections_open, 2);
        tokio::join!(exchange(a, 1), exchange(b, 2))
    };
    let (a, b) = tokio::time::timeout(Duration::from_secs(30), run)
        .await
        .expect("echo timed out");
    done.store(true, Ordering::Relaxed);
    let sampled_max = watcher.await.unwrap();

    for (name, stats) in [("client", client.stats()), ("server", server.stats())] {
        assert!(
            stats.fec_peak_retained_bytes as usize <= BUDGET,
            "{name}: {stats:?}"
        );
        assert!(stats.fec_retained_bytes <= stats.fec_peak_retained_bytes);
    }
    assert!(sampled_max as usize <= BUDGET);
    // The budget was under pressure: both directions lost whole groups' worth.
    let released = client.stats().fec_groups_released_for_budget
        + server.stats().fec_groups_released_for_budget;
    assert!(released > 0, "{:?} {:?}", client.stats(), server.stats());
    let per_conn: u64 = client
        .connection_stats()
        .iter()
        .map(|c| c.fec.unwrap().decoder.groups_released_for_budget)
        .sum();
    assert_eq!(per_conn, client.stats().fec_groups_released_for_budget);

    // Closed and dropped connections return what they held.
    for conn in [&a, &b] {
        tokio::time::timeout(Duration::from_secs(10), conn.close())
            .await
            .unwrap()
            .unwrap();
    }
    drop((a, b));
    let start = Instant::now();
    while client.stats().fec_retained_bytes != 0 && start.elapsed() < Duration::from_secs(5) {
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    assert_eq!(client.stats().fec_retained_bytes, 0, "{:?}", client.stats());
}
