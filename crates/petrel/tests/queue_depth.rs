//! The default send queue (256 segments) against the largest messages (255
//! segments each): a writer that sends them back to back must not stall, also
//! with small messages queued in front of each.

#![allow(clippy::unwrap_used)]

use std::net::SocketAddr;
use std::time::{Duration, Instant};

use bytes::Bytes;
use petrel::{Endpoint, EndpointConfig};
use tokio::time::timeout;

fn localhost() -> SocketAddr {
    "127.0.0.1:0".parse().unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn largest_messages_back_to_back_with_the_default_queue() {
    let server = Endpoint::bind(localhost(), EndpointConfig::server())
        .await
        .unwrap();
    let client = Endpoint::bind(localhost(), EndpointConfig::default())
        .await
        .unwrap();
    let conn = client.connect(server.local_addr()).await.unwrap();
    let max = conn.max_message_size();
    assert_eq!(max, 299_880);
    let accepted = server.accept().await.unwrap();
    let count = 40u32;
    let writer = {
        let conn = conn.clone();
        tokio::spawn(async move {
            for i in 0..count {
                // A small one first: the big one then needs room behind it.
                conn.send(Bytes::from(vec![i as u8; 10])).await.unwrap();
                conn.send(Bytes::from(vec![i as u8; max])).await.unwrap();
            }
        })
    };
    let start = Instant::now();
    for i in 0..count {
        let small = timeout(Duration::from_secs(10), accepted.recv())
            .await
            .expect("stalled")
            .unwrap()
            .unwrap();
        assert_eq!(small.len(), 10);
        let big = timeout(Duration::from_secs(10), accepted.recv())
            .await
            .expect("stalled")
            .unwrap()
            .unwrap();
        assert_eq!(big.len(), max);
        assert!(big.iter().all(|&b| b == i as u8));
    }
    writer.await.unwrap();
    let s = conn.stats();
    eprintln!(
        "{count} x (10 B + {max} B) in {:?}; {:?}",
        start.elapsed(),
        s.kcp
    );
}
