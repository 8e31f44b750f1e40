//! One read holding several datagrams: a raw socket sends UDP GSO trains
//! (`petrel_sys::SendBatch::send_train`) and the endpoint, which enables UDP GRO,
//! reads each train in one `recvmmsg` slot. The driver feeds a train's runs of one
//! connection's data in one call (`Router::dispatch_read`); these tests check that
//! routing, order and counters stay what one-by-one dispatch gives.

#![allow(clippy::unwrap_used)] // tests fail loudly on any unexpected error

mod raw_peer;

use std::collections::HashMap;
use std::net::SocketAddr;
use std::time::Duration;

use petrel::{Connection, Endpoint, EndpointConfig, Mode};
use petrel_proto::handshake::{Binding, ConnRef, Established, NativeMessage};
use petrel_sys::SendBatch;
use tokio::net::UdpSocket;
use tokio::time::timeout;

use raw_peer::{initial, native_handshake, push};

fn localhost() -> SocketAddr {
    "127.0.0.1:0".parse().unwrap()
}

/// A KCP PUSH of `conv`/`sn`, `size` bytes in all; its payload is `tag`, padded
/// with '.'.
fn tagged_push(conv: u32, sn: u32, tag: &str, size: usize) -> Vec<u8> {
    let mut payload = tag.as_bytes().to_vec();
    payload.resize(size - 24, b'.');
    let datagram = push(conv, sn, &payload);
    assert_eq!(datagram.len(), size);
    datagram
}

async fn handshake(sock: &UdpSocket, server: SocketAddr, seed: u64) -> Established {
    native_handshake(sock, server, seed, Duration::from_secs(3))
        .await
        .expect("handshake stalled")
}

fn keepalive(established: &Established) -> Vec<u8> {
    let Binding::Native { token, .. } = established.binding else {
        panic!("a native handshake gives a native binding");
    };
    let mut out = Vec::new();
    NativeMessage::Keepalive(ConnRef {
        conv: established.conv,
        token,
    })
    .encode(&mut out);
    out
}

/// The tags of the messages `conn` delivers until it is quiet for `quiet`.
async fn tags_received(conn: &Connection, quiet: Duration) -> Vec<String> {
    let mut tags = Vec::new();
    while let Ok(Ok(Some(msg))) = timeout(quiet, conn.recv()).await {
        let end = msg.iter().position(|&b| b == b'.').unwrap_or(msg.len());
        tags.push(String::from_utf8_lossy(&msg[..end]).into_owned());
    }
    tags
}

fn gso_batch() -> SendBatch {
    let mut batch = SendBatch::new(64);
    batch.set_gso(true);
    batch
}

/// Two trains from one address mix data of its two connections A and B, data
/// carrying the conv of connection C (which belongs to another address), an
/// unknown conv, an A datagram with an unknown command, A's KEEPALIVE, an INITIAL
/// and a 3-byte tail. A and B get their own data in order, C nothing; every
/// counter is what one-by-one dispatch gives.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_mixed_train_is_routed_by_address_and_conv_in_order() {
    let server = Endpoint::bind(localhost(), EndpointConfig::server())
        .await
        .unwrap();
    let addr = server.local_addr();
    let sock = UdpSocket::bind(localhost()).await.unwrap();
    let other = UdpSocket::bind(localhost()).await.unwrap();
    let a = handshake(&sock, addr, 1).await;
    let b = handshake(&sock, addr, 2).await;
    let c = handshake(&other, addr, 3).await;
    let mut conns = HashMap::new();
    for _ in 0..3 {
        let conn = timeout(Duration::from_secs(3), server.accept())
            .await
            .unwrap()
            .unwrap();
        conns.insert(conn.conv(), conn);
    }
    let before = server.stats();

    const SIZE: usize = 100;
    let mut bad = tagged_push(a.conv, 0, "BAD", SIZE);
    bad[4] = 99; // no such KCP command: an input error of A
    let first = vec![
        tagged_push(a.conv, 0, "A0", SIZE),
        tagged_push(b.conv, 0, "B0", SIZE),
        tagged_push(a.conv, 1, "A1", SIZE),
        tagged_push(c.conv, 0, "C-spoofed", SIZE),
        tagged_push(0xDEAD_BEEF, 0, "unknown", SIZE),
        tagged_push(a.conv, 2, "A2", SIZE),
        bad,
        tagged_push(a.conv, 3, "A3", SIZE),
        tagged_push(b.conv, 1, "B1", SIZE),
        tagged_push(b.conv, 2, "B2", SIZE),
        keepalive(&a), // shorter: ends the train
    ];
    let opening = initial(77);
    let size = opening.len();
    let second = vec![
        tagged_push(a.conv, 4, "A4", size),
        opening,
        tagged_push(a.conv, 5, "A5", size),
        tagged_push(c.conv, 1, "C-spoofed", size),
        tagged_push(b.conv, 3, "B3", size),
        vec![1, 2, 3], // malformed
    ];
    let mut batch = gso_batch();
    let (mut datagrams, mut bytes) = (0, 0);
    for train in [&first, &second] {
        assert_eq!(
            batch.send_train(&sock, Some(addr), train).unwrap(),
            train.len()
        );
        datagrams += train.len() as u64;
        bytes += train.iter().map(|d| d.len() as u64).sum::<u64>();
    }

    let quiet = Duration::from_millis(300);
    assert_eq!(
        tags_received(&conns[&a.conv], quiet).await,
        ["A0", "A1", "A2", "A3", "A4", "A5"]
    );
    assert_eq!(
        tags_received(&conns[&b.conv], quiet).await,
        ["B0", "B1", "B2", "B3"]
    );
    assert!(tags_received(&conns[&c.conv], quiet).await.is_empty());
    let after = server.stats();
    assert_eq!(
        after.datagrams_received - before.datagrams_received,
        datagrams
    );
    assert_eq!(after.bytes_received - before.bytes_received, bytes);
    assert_eq!(after.dropped_unknown - before.dropped_unknown, 3);
    assert_eq!(after.dropped_malformed - before.dropped_malformed, 1);
    assert_eq!(conns[&a.conv].stats().input_errors, 1);
    assert_eq!(conns[&b.conv].stats().input_errors, 0);
    assert_eq!(conns[&c.conv].stats().kcp.segments_received, 0);
}

/// A raw-mode client with two socket shards lets the kernel's 4-tuple hash pick
/// the shard that reads its peer, so a `connect`ed connection (home: shard 0) is
/// read off its home shard for about half the peer ports. A train read there in
/// one call counts each of its datagrams in `datagrams_off_home_shard`.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_datagram_of_a_train_read_off_home_is_counted() {
    const CONV: u32 = 0x1234_5678;
    for _ in 0..40 {
        let peer = UdpSocket::bind(localhost()).await.unwrap();
        let client = Endpoint::bind(
            localhost(),
            EndpointConfig {
                mode: Mode::Raw { conv: CONV },
                io_threads: 2,
                ..EndpointConfig::default()
            },
        )
        .await
        .unwrap();
        let conn = client.connect(peer.local_addr().unwrap()).await.unwrap();
        let before = client.stats();
        let train: Vec<_> = (0..8)
            .map(|i| tagged_push(CONV, i, &format!("M{i}"), 200))
            .collect();
        gso_batch()
            .send_train(&peer, Some(client.local_addr()), &train)
            .unwrap();
        let received = tags_received(&conn, Duration::from_millis(200)).await;
        assert_eq!(received.len(), 8);
        let after = client.stats();
        let off_home = after.datagrams_off_home_shard - before.datagrams_off_home_shard;
        let reads = after.recv_syscalls - before.recv_syscalls;
        if off_home > 0 && reads == 1 {
            assert_eq!(off_home, 8, "one count per run instead of per datagram");
            return;
        }
    }
    panic!("no train was read off its connection's home shard in one read in 40 tries");
}
