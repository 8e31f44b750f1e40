//! Steered socket shards and refused handshakes: a conv in a lane costs about
//! `io_threads` conv draws (4 HMAC-SHA256 rounds each, under the server's one
//! handshake lock), so an opening the limits refuse anyway must not pay for a
//! lane. Legacy SYNs carry no cookie: one address at its connection limit could
//! otherwise make every SYN cost some 64 draws (about 40 µs in release builds),
//! 64 times the cost of a refusal before steering.

#![allow(clippy::unwrap_used)] // tests fail loudly on any unexpected error

use std::net::SocketAddr;
use std::time::Duration;

use petrel::{Endpoint, EndpointConfig, Mode};
use petrel_proto::handshake::LegacyMessage;
use tokio::net::UdpSocket;

#[tokio::test]
async fn refused_legacy_syns_do_not_pay_for_a_lane() {
    let server = Endpoint::bind(
        "127.0.0.1:0".parse::<SocketAddr>().unwrap(),
        EndpointConfig {
            io_threads: 64,
            mode: Mode::Legacy,
            max_connections_per_address: 1,
            ..EndpointConfig::server()
        },
    )
    .await
    .unwrap();
    let attacker = UdpSocket::bind("127.0.0.1:0").await.unwrap();
    let syn = |sync_id: u32| {
        let mut d = Vec::new();
        LegacyMessage::Syn { sync_id }.encode(&mut d);
        d
    };
    // One connection: the address is now at its limit.
    attacker
        .send_to(&syn(0), server.local_addr())
        .await
        .unwrap();
    let _first = tokio::time::timeout(Duration::from_secs(5), server.accept())
        .await
        .unwrap()
        .unwrap();
    let before = server.handshake_stats().unwrap().conv_draws;
    let refused = 300u64;
    for i in 1..=refused {
        attacker
            .send_to(&syn(i as u32), server.local_addr())
            .await
            .unwrap();
        if i % 50 == 0 {
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
    }
    let deadline = tokio::time::Instant::now() + Duration::from_secs(10);
    while server.stats().refused_per_peer < refused {
        assert!(
            tokio::time::Instant::now() < deadline,
            "{:?}",
            server.stats()
        );
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    let draws = server.handshake_stats().unwrap().conv_draws - before;
    assert!(
        draws <= 2 * refused,
        "{refused} refused SYNs cost {draws} conv draws"
    );
}
