//! The relay against hostile configuration and traffic: a relay pointed at itself, a
//! flood of client addresses, maximum-size datagrams. Real loopback sockets, bounded.

#![allow(clippy::unwrap_used)]

use std::net::{SocketAddr, UdpSocket};
use std::time::{Duration, Instant};

use petrel_netem::{Relay, RelayConfig};

fn addr(s: &str) -> SocketAddr {
    s.parse().unwrap()
}

/// A relay whose upstream is its own listen socket would feed itself until `max_routes`.
#[test]
fn relaying_to_itself_is_a_config_error() {
    for (listen, upstream) in [
        ("127.0.0.1:4000", "127.0.0.1:4000"),
        ("0.0.0.0:4000", "127.0.0.1:4000"),
        ("[::]:4000", "[::1]:4000"),
    ] {
        let err = RelayConfig::new(addr(listen), addr(upstream))
            .validate()
            .unwrap_err();
        assert_eq!(err.field, "upstream", "{listen} -> {upstream}");
    }
    // Same port on another host, or another port: fine.
    for (listen, upstream) in [
        ("0.0.0.0:4000", "10.0.0.2:4000"),
        ("127.0.0.1:4000", "127.0.0.1:4001"),
    ] {
        RelayConfig::new(addr(listen), addr(upstream))
            .validate()
            .unwrap();
    }
}

/// Many client addresses: routes stop at `max_routes`, the rest are counted as
/// rejected; 65 507-byte datagrams pass or are counted, never crash the relay.
#[test]
fn client_address_flood_is_bounded() {
    let server = UdpSocket::bind("127.0.0.1:0").unwrap();
    server
        .set_read_timeout(Some(Duration::from_millis(200)))
        .unwrap();
    let mut cfg = RelayConfig::new(addr("127.0.0.1:0"), server.local_addr().unwrap());
    cfg.max_routes = 8;
    let relay = Relay::start(cfg).unwrap();
    let to = relay.local_addr();
    let big = vec![0x5Au8; 65_507];
    let mut clients = Vec::new();
    for i in 0..40 {
        let c = UdpSocket::bind("127.0.0.1:0").unwrap();
        let payload: &[u8] = if i % 5 == 0 { &big } else { b"hello" };
        c.send_to(payload, to).unwrap();
        c.send_to(&[], to).unwrap();
        clients.push(c);
    }
    let mut buf = vec![0u8; 65_536];
    let mut forwarded = 0;
    let start = Instant::now();
    while start.elapsed() < Duration::from_secs(2) {
        match server.recv_from(&mut buf) {
            Ok(_) => forwarded += 1,
            Err(_) => break,
        }
    }
    let stats = relay.stop().unwrap();
    assert!(stats.routes.len() <= 8, "{} routes", stats.routes.len());
    assert!(
        stats.routes_rejected >= 64,
        "rejected {}",
        stats.routes_rejected
    );
    assert!(forwarded <= 16, "forwarded {forwarded}");
    assert!(forwarded >= 8, "forwarded {forwarded}");
}
