//! Attacks on the I/O driver layer (`driver`, `io`, `router`) with real loopback
//! sockets: floods of garbage from many source ports, GSO trains with hostile
//! segment sizes, handshake floods, connection-table exhaustion, peers that never
//! read, and many clients over two socket shards. Each test is bounded in
//! datagrams and wall time; the numbers each asserts are what the endpoint's
//! counters must show.

#![allow(clippy::unwrap_used)] // tests fail loudly on any unexpected error

mod raw_peer;

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::{Duration, Instant};

use bytes::Bytes;
use petrel::{Connection, ControlConfig, Endpoint, EndpointConfig, EndpointStats};
use petrel_sys::SendBatch;
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;
use tokio::net::UdpSocket;
use tokio::time::timeout;

use raw_peer::{initial, native_handshake, push};

/// The tests run one at a time: their timing bounds and the memory measurement
/// assume the two cores are not shared with another flood.
static SERIAL: tokio::sync::Mutex<()> = tokio::sync::Mutex::const_new(());

fn localhost() -> SocketAddr {
    "127.0.0.1:0".parse().unwrap()
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

/// An echo server accepting every connection.
async fn echo_server(config: EndpointConfig) -> (Arc<Endpoint>, SocketAddr) {
    let server = Arc::new(Endpoint::bind(localhost(), config).await.unwrap());
    let addr = server.local_addr();
    let acceptor = server.clone();
    tokio::spawn(async move {
        while let Some(conn) = acceptor.accept().await {
            spawn_echo(conn);
        }
    });
    (server, addr)
}

async fn client() -> Endpoint {
    Endpoint::bind(localhost(), EndpointConfig::default())
        .await
        .unwrap()
}

fn message(i: u32, len: usize) -> Bytes {
    let mut v = i.to_be_bytes().to_vec();
    v.extend((0..len).map(|j| (i as usize * 31 + j) as u8));
    Bytes::from(v)
}

/// Echoes numbered messages one at a time until `stop`; returns (round trips,
/// slowest round trip). Every echo must come back intact within 5 s.
async fn echo_until(conn: Connection, stop: Arc<std::sync::atomic::AtomicBool>) -> (u32, Duration) {
    let mut i = 0u32;
    let mut slowest = Duration::ZERO;
    while !stop.load(std::sync::atomic::Ordering::Relaxed) {
        let msg = message(i, 50 + (i as usize * 97) % 1200);
        let t = Instant::now();
        conn.send(msg.clone()).await.unwrap();
        let echo = timeout(Duration::from_secs(5), conn.recv())
            .await
            .expect("legit echo stalled")
            .unwrap();
        assert_eq!(echo, Some(msg), "echo {i}");
        slowest = slowest.max(t.elapsed());
        i += 1;
    }
    (i, slowest)
}

/// Sends `count` numbered messages from one task and checks every echo on this one.
async fn stream_and_check(conn: &Connection, count: u32, len: usize) {
    let sender = {
        let conn = conn.clone();
        tokio::spawn(async move {
            for i in 0..count {
                conn.send(message(i, len + i as usize % 700)).await.unwrap();
            }
        })
    };
    for i in 0..count {
        let got = timeout(Duration::from_secs(20), conn.recv())
            .await
            .expect("echo within 20 s")
            .unwrap();
        assert_eq!(got, Some(message(i, len + i as usize % 700)), "echo {i}");
    }
    sender.await.unwrap();
}

/// Waits until `f` holds or `limit` passes; returns whether it held.
async fn eventually(limit: Duration, mut f: impl FnMut() -> bool) -> bool {
    let start = Instant::now();
    while start.elapsed() < limit {
        if f() {
            return true;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    f()
}

fn drops(s: &EndpointStats) -> u64 {
    s.dropped_unknown + s.dropped_malformed + s.dropped_handshake
}

/// This process's resident set, in KiB (0 where /proc is missing).
fn rss_kib() -> u64 {
    std::fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|s| {
            s.lines()
                .find(|l| l.starts_with("VmRSS:"))
                .and_then(|l| l.split_whitespace().nth(1))
                .and_then(|v| v.parse().ok())
        })
        .unwrap_or(0)
}

/// Attacker sockets, each on its own source port.
async fn sockets(n: usize) -> Vec<UdpSocket> {
    let mut v = Vec::with_capacity(n);
    for _ in 0..n {
        v.push(UdpSocket::bind(localhost()).await.unwrap());
    }
    v
}

/// Garbage, truncated and oversized datagrams (up to 65 507 B, the largest IPv4 UDP
/// payload) from 64 source ports while an honest connection keeps echoing: every
/// echo comes back intact, the drops are counted, no connection appears, memory
/// stays bounded.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn garbage_from_many_ports_while_a_connection_echoes() {
    let _serial = SERIAL.lock().await;
    let (server, addr) = echo_server(EndpointConfig::server()).await;
    let honest = client().await;
    let conn = honest.connect(addr).await.unwrap();
    let stop = Arc::new(std::sync::atomic::AtomicBool::new(false));
    // Held until the stats are read: `echo_until` drops its handle when it
    // stops, which closes the connection and races `connections_open` below.
    let _keep_open = conn.clone();
    let echo = tokio::spawn(echo_until(conn, stop.clone()));
    let mut rss_before = 0;
    let attackers = sockets(64).await;
    let mut rng = ChaCha8Rng::seed_from_u64(11);
    let mut sent = 0u64;
    let mut sent_bytes = 0u64;
    for round in 0..120u32 {
        if round == 30 {
            // Buffers that grow with traffic (the receive batch) have grown.
            rss_before = rss_kib();
        }
        for (k, sock) in attackers.iter().enumerate() {
            let len = match (round as usize + k) % 12 {
                0 => 65_507,
                1 => rng.gen_range(1..24),
                2 => 24, // a bare KCP header of an unknown conv
                3 => 10, // a native control header alone
                4 => rng.gen_range(30_000..65_507),
                _ => rng.gen_range(25..1500),
            };
            let mut dg: Vec<u8> = (0..len).map(|_| rng.gen()).collect();
            match k % 4 {
                // Native control header with an INITIAL type, then junk or nothing.
                0 if dg.len() >= 10 => dg[..10].copy_from_slice(b"\0\0\0\0PTRL\x01\x01"),
                1 if dg.len() >= 10 => dg[..10].copy_from_slice(b"\0\0\0\0PTRL\x01\x04"),
                _ => {}
            }
            sock.send_to(&dg, addr).await.unwrap();
            sent += 1;
            sent_bytes += dg.len() as u64;
        }
        // ~5 MB per 10 rounds: enough to overrun a default receive buffer at
        // times, paced so the honest connection gets turns.
        if round % 2 == 1 {
            tokio::time::sleep(Duration::from_millis(2)).await;
        }
    }
    let counted = eventually(Duration::from_secs(3), || {
        drops(&server.stats()) >= sent * 9 / 10
    })
    .await;
    stop.store(true, std::sync::atomic::Ordering::Relaxed);
    let (round_trips, slowest) = echo.await.unwrap();
    let stats = server.stats();
    let rss_after = rss_kib();
    eprintln!(
        "garbage: sent {sent} datagrams / {sent_bytes} B; server {stats:?}; honest {round_trips} \
         round trips, slowest {slowest:?}; rss {rss_before} -> {rss_after} KiB"
    );
    assert!(counted, "drops not counted: sent {sent}, {stats:?}");
    assert!(stats.datagrams_received >= sent * 9 / 10, "{stats:?}");
    assert_eq!(stats.connections_accepted, 1, "{stats:?}");
    assert_eq!(stats.connections_open, 1, "{stats:?}");
    assert!(
        round_trips >= 10,
        "honest connection starved: {round_trips}"
    );
    // Garbage is answered with nothing: one RETRY, the honest client's.
    assert_eq!(stats.handshake_replies, 1, "{stats:?}");
    // The last 57 MB of garbage left nothing behind: no queue grows with it.
    assert!(
        rss_after.saturating_sub(rss_before) < 16 * 1024,
        "rss grew {rss_before} -> {rss_after} KiB"
    );
}

/// A zero-length datagram is a datagram too: it must be counted like any other
/// malformed one (a flood of them would otherwise be invisible in the stats).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn empty_datagrams_are_counted() {
    let _serial = SERIAL.lock().await;
    let (server, addr) = echo_server(EndpointConfig::server()).await;
    let sock = UdpSocket::bind(localhost()).await.unwrap();
    for i in 0..200 {
        sock.send_to(&[], addr).await.unwrap();
        if i % 50 == 49 {
            tokio::time::sleep(Duration::from_millis(2)).await;
        }
    }
    let counted = eventually(Duration::from_secs(3), || {
        server.stats().dropped_malformed >= 200
    })
    .await;
    let stats = server.stats();
    assert!(counted, "empty datagrams not counted: {stats:?}");
    assert_eq!(stats.datagrams_received, 200, "{stats:?}");
    assert_eq!(stats.bytes_received, 0, "{stats:?}");
}

/// GSO trains of hostile segment sizes (1 byte × 64, 7 × 64, 1 400 with a short
/// last one, 65 507 / 2): the server, reading them as GRO trains, splits and counts
/// every segment as a datagram, exactly, and an honest connection keeps working.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn gso_trains_of_hostile_sizes_are_split_and_counted() {
    let _serial = SERIAL.lock().await;
    let (server, addr) = echo_server(EndpointConfig {
        recv_buffer: Some(4 << 20),
        ..EndpointConfig::server()
    })
    .await;
    let honest = client().await;
    let conn = honest.connect(addr).await.unwrap();
    let socket = std::net::UdpSocket::bind(localhost()).unwrap();
    let mut batch = SendBatch::new(64);
    batch.set_gso(true);
    let shapes: [(usize, usize, usize); 5] = [
        // (segment size, segments, last segment size)
        (1, 64, 1),
        (7, 64, 3),
        (1400, 40, 200),
        (32_000, 2, 1),
        (12, 5, 12),
    ];
    let before = server.stats();
    let mut segments_sent = 0u64;
    let mut bytes = 0u64;
    for round in 0..20u8 {
        for &(size, count, last) in &shapes {
            let mut train: Vec<Vec<u8>> = (0..count - 1)
                .map(|i| vec![0xA0 ^ round ^ i as u8; size])
                .collect();
            train.push(vec![0x5A; last]);
            let sent = batch.send_train(&socket, Some(addr), &train).unwrap();
            assert_eq!(sent, count);
            segments_sent += count as u64;
            bytes += train.iter().map(|s| s.len() as u64).sum::<u64>();
        }
        tokio::time::sleep(Duration::from_millis(5)).await;
        // The honest connection works between trains.
        let msg = message(u32::from(round), 900);
        conn.send(msg.clone()).await.unwrap();
        let echo = timeout(Duration::from_secs(5), conn.recv()).await.unwrap();
        assert_eq!(echo.unwrap(), Some(msg));
    }
    let counted = eventually(Duration::from_secs(3), || {
        let s = server.stats();
        s.dropped_malformed + s.dropped_unknown - before.dropped_malformed - before.dropped_unknown
            >= segments_sent
    })
    .await;
    let stats = server.stats();
    eprintln!(
        "gso trains: {segments_sent} segments / {bytes} B in {} GSO sends; server {stats:?}",
        batch.system_calls()
    );
    assert!(
        counted,
        "segments not all counted: {segments_sent}, {stats:?}"
    );
    assert_eq!(
        stats.dropped_malformed + stats.dropped_unknown
            - before.dropped_malformed
            - before.dropped_unknown,
        segments_sent,
        "{stats:?}"
    );
    assert_eq!(stats.connections_accepted, 1);
}

/// 64 ports × 250 INITIALs (each a fresh nonce): the stateless handshake keeps no
/// connection, answers at most one RETRY per INITIAL (never more bytes than it
/// received), the bounded reply queue holds, and an honest client gets in during
/// the flood.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn initial_flood_from_many_ports_keeps_no_state() {
    let _serial = SERIAL.lock().await;
    let (server, addr) = echo_server(EndpointConfig::server()).await;
    let attackers = sockets(64).await;
    let flood = tokio::spawn(async move {
        let mut seed = 1_000u64;
        for round in 0..250 {
            for sock in &attackers {
                sock.send_to(&initial(seed), addr).await.unwrap();
                seed += 1;
            }
            if round % 4 == 3 {
                tokio::time::sleep(Duration::from_millis(1)).await;
            }
        }
        seed - 1_000
    });
    let honest = client().await;
    let conn = timeout(Duration::from_secs(5), honest.connect(addr))
        .await
        .expect("honest connect hung during the flood")
        .expect("honest connect failed during the flood");
    let sent = flood.await.unwrap();
    let msg = message(1, 1000);
    conn.send(msg.clone()).await.unwrap();
    assert_eq!(
        timeout(Duration::from_secs(5), conn.recv())
            .await
            .unwrap()
            .unwrap(),
        Some(msg)
    );
    tokio::time::sleep(Duration::from_millis(200)).await;
    let stats = server.stats();
    eprintln!("initial flood: {sent} INITIALs; server {stats:?}");
    assert_eq!(stats.connections_open, 1, "{stats:?}");
    assert_eq!(stats.connections_accepted, 1, "{stats:?}");
    // One RETRY per INITIAL read (the kernel drops what overflows the receive
    // buffer); the honest client's few datagrams aside.
    assert!(
        stats.handshake_replies + 8 >= stats.datagrams_received,
        "{stats:?}"
    );
    assert!(
        stats.handshake_replies <= stats.datagrams_received,
        "{stats:?}"
    );
    assert!(stats.datagrams_received <= sent + 8, "{stats:?}");
    assert_eq!(stats.unattached_send_dropped, 0, "{stats:?}");
    assert!(stats.bytes_sent <= stats.bytes_received, "{stats:?}");
}

/// Completed handshakes from 48 ports fill `max_connections` (32) and go silent:
/// a newcomer is refused (counted) while they hold the table, then gets in once
/// the idle timeout evicted them.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn silent_connections_fill_the_table_then_are_evicted() {
    let _serial = SERIAL.lock().await;
    let control = ControlConfig {
        keepalive_interval: Duration::from_millis(200),
        idle_timeout: Duration::from_secs(2),
        ..ControlConfig::default()
    };
    let (server, addr) = echo_server(EndpointConfig {
        max_connections: 32,
        max_connections_per_ip: 1000,
        max_connections_per_prefix: 1000,
        control: control.clone(),
        ..EndpointConfig::server()
    })
    .await;
    // All at once, well within one idle timeout.
    let mut handshakes = Vec::new();
    for (seed, sock) in sockets(48).await.into_iter().enumerate() {
        handshakes.push(tokio::spawn(async move {
            native_handshake(&sock, addr, seed as u64, Duration::from_millis(300))
                .await
                .is_some()
        }));
    }
    let mut established = 0;
    for h in handshakes {
        established += usize::from(h.await.unwrap());
    }
    let stats = server.stats();
    assert_eq!(established, 32, "{stats:?}");
    assert_eq!(stats.connections_open, 32, "{stats:?}");
    // The 16 refused retry their INITIAL until their 300 ms run out.
    assert!(stats.refused_max_connections >= 16, "{stats:?}");
    let refused = stats.refused_max_connections;
    // Full table: a newcomer's handshake is refused (it gets no ACCEPT).
    let newcomer = Endpoint::bind(
        localhost(),
        EndpointConfig {
            connect_timeout: Duration::from_millis(300),
            control,
            ..EndpointConfig::default()
        },
    )
    .await
    .unwrap();
    assert!(newcomer.connect(addr).await.is_err());
    assert!(server.stats().refused_max_connections > refused);
    // The silent ones time out (2 s idle) and are unregistered.
    let evicted = eventually(Duration::from_secs(5), || {
        server.stats().connections_open == 0
    })
    .await;
    assert!(evicted, "{:?}", server.stats());
    let conn = timeout(Duration::from_secs(3), newcomer.connect(addr))
        .await
        .unwrap()
        .expect("newcomer refused after eviction");
    let msg = message(7, 300);
    conn.send(msg.clone()).await.unwrap();
    assert_eq!(
        timeout(Duration::from_secs(5), conn.recv())
            .await
            .unwrap()
            .unwrap(),
        Some(msg)
    );
    let stats = server.stats();
    eprintln!("table flood: {stats:?}");
    assert_eq!(stats.connections_open, 1);
    assert_eq!(stats.connections_accepted, 33);
}

/// Eight peers that complete the handshake, push data for the server to echo and
/// then never read (their receive buffers overflow, the kernel drops the echoes,
/// the server retransmits into the void), on the same shard as eight honest
/// connections: the honest ones keep their round trips short — one shard's driver
/// never waits on a peer.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn peers_that_never_read_do_not_stall_the_shard() {
    let _serial = SERIAL.lock().await;
    let (server, addr) = echo_server(EndpointConfig {
        max_connections_per_address: 64,
        ..EndpointConfig::server()
    })
    .await;
    let dead = sockets(8).await;
    for (seed, sock) in dead.iter().enumerate() {
        socket2::SockRef::from(sock)
            .set_recv_buffer_size(1024)
            .unwrap();
        let est = native_handshake(sock, addr, 500 + seed as u64, Duration::from_secs(2))
            .await
            .expect("handshake");
        // 200 KB to echo, in windowed bursts the server accepts.
        for sn in 0..200u32 {
            sock.send_to(&push(est.conv, sn, &[sn as u8; 1000]), addr)
                .await
                .unwrap();
        }
    }
    let stop = Arc::new(std::sync::atomic::AtomicBool::new(false));
    let mut honest = Vec::new();
    let mut endpoints = Vec::new();
    for _ in 0..8 {
        let ep = client().await;
        let conn = ep.connect(addr).await.unwrap();
        endpoints.push(ep);
        honest.push(tokio::spawn(echo_until(conn, stop.clone())));
    }
    tokio::time::sleep(Duration::from_secs(3)).await;
    stop.store(true, std::sync::atomic::Ordering::Relaxed);
    let mut slowest = Duration::ZERO;
    let mut total = 0;
    for task in honest {
        let (n, s) = task.await.unwrap();
        assert!(n >= 20, "an honest connection starved: {n} round trips");
        total += n;
        slowest = slowest.max(s);
    }
    let stats = server.stats();
    let dead_stats: Vec<_> = server
        .connection_stats()
        .iter()
        .map(|c| c.kcp.retransmissions_timeout + c.kcp.retransmissions_fast)
        .collect();
    eprintln!(
        "dead readers: honest {total} round trips, slowest {slowest:?}; server {stats:?}; \
         retransmissions per connection {dead_stats:?}"
    );
    assert!(slowest < Duration::from_secs(1), "{slowest:?}");
    assert_eq!(stats.send_errors, 0, "{stats:?}");
    // The honest eight are open; dead readers end by the dead-link rule.
    assert!(stats.connections_open >= 8, "{stats:?}");
    assert_eq!(stats.connections_accepted, 16, "{stats:?}");
}

/// Two socket shards, 24 clients streaming numbered messages of mixed sizes while 32
/// ports spray garbage: every echo arrives, in order, byte for byte; no connection
/// is lost.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_shards_many_clients_under_garbage() {
    let _serial = SERIAL.lock().await;
    let (server, addr) = echo_server(EndpointConfig {
        io_threads: 2,
        recv_buffer: Some(4 << 20),
        ..EndpointConfig::server()
    })
    .await;
    let stop = Arc::new(std::sync::atomic::AtomicBool::new(false));
    let spray = {
        let stop = stop.clone();
        tokio::spawn(async move {
            let attackers = sockets(32).await;
            let mut rng = ChaCha8Rng::seed_from_u64(3);
            let mut sent = 0u64;
            while !stop.load(std::sync::atomic::Ordering::Relaxed) {
                for sock in &attackers {
                    let len = rng.gen_range(0..1500);
                    let dg: Vec<u8> = (0..len).map(|_| rng.gen()).collect();
                    sock.send_to(&dg, addr).await.unwrap();
                    sent += 1;
                }
                tokio::time::sleep(Duration::from_millis(2)).await;
            }
            sent
        })
    };
    let clients = 24;
    let mut tasks = Vec::new();
    for c in 0..clients {
        tasks.push(tokio::spawn(async move {
            let ep = Endpoint::bind(
                localhost(),
                EndpointConfig {
                    io_threads: 1 + c % 2,
                    ..EndpointConfig::default()
                },
            )
            .await
            .unwrap();
            let conn = timeout(Duration::from_secs(5), ep.connect(addr))
                .await
                .unwrap()
                .unwrap();
            stream_and_check(&conn, 300, 100 + c * 40).await;
            conn.stats()
        }));
    }
    for task in tasks {
        let stats = timeout(Duration::from_secs(60), task)
            .await
            .expect("client hung")
            .unwrap();
        assert_eq!(stats.send_errors, 0);
    }
    stop.store(true, std::sync::atomic::Ordering::Relaxed);
    let sprayed = spray.await.unwrap();
    let stats = server.stats();
    eprintln!("two shards: {sprayed} garbage datagrams; server {stats:?}");
    assert_eq!(stats.connections_accepted, clients as u64, "{stats:?}");
    assert_eq!(stats.connections_open, clients as u64, "{stats:?}");
    assert_eq!(stats.send_errors, 0, "{stats:?}");
}

/// Whether `dg` is a native ACCEPT (version 1, type 3).
fn is_accept(dg: &[u8]) -> bool {
    dg.len() >= 10 && dg[..9] == *b"\0\0\0\0PTRL\x01" && dg[9] == 3
}

/// A `connect` cancelled by the application (its future dropped, e.g. by a
/// timeout) while the handshake is in flight: when the server's ACCEPT arrives
/// afterwards, the connection it would open has no handle, so it must not stay
/// registered (holding a slot and a receive-buffer reservation, and kept alive by
/// keepalives for ever): it closes, on both sides.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn cancelled_connect_leaves_no_orphan_connection() {
    let _serial = SERIAL.lock().await;
    let control = ControlConfig {
        keepalive_interval: Duration::from_millis(200),
        idle_timeout: Duration::from_secs(1),
        ..ControlConfig::default()
    };
    let (server, server_addr) = echo_server(EndpointConfig {
        control: control.clone(),
        ..EndpointConfig::server()
    })
    .await;
    let client = Arc::new(
        Endpoint::bind(
            localhost(),
            EndpointConfig {
                control,
                ..EndpointConfig::default()
            },
        )
        .await
        .unwrap(),
    );
    // A relay between them that holds the server's ACCEPT back.
    let relay = Arc::new(UdpSocket::bind(localhost()).await.unwrap());
    let relay_addr = relay.local_addr().unwrap();
    let connect = {
        let client = client.clone();
        tokio::spawn(async move { client.connect(relay_addr).await.map(|_| ()) })
    };
    let mut buf = vec![0u8; 65_536];
    let mut client_addr = None;
    let accept = timeout(Duration::from_secs(5), async {
        loop {
            let (n, from) = relay.recv_from(&mut buf).await.unwrap();
            if from == server_addr {
                if is_accept(&buf[..n]) {
                    return buf[..n].to_vec();
                }
                relay
                    .send_to(&buf[..n], client_addr.unwrap())
                    .await
                    .unwrap();
            } else {
                client_addr = Some(from);
                relay.send_to(&buf[..n], server_addr).await.unwrap();
            }
        }
    })
    .await
    .expect("handshake through the relay");
    let client_addr = client_addr.unwrap();
    // The application gives up on the connect; then the ACCEPT arrives.
    connect.abort();
    assert!(connect.await.unwrap_err().is_cancelled());
    relay.send_to(&accept, client_addr).await.unwrap();
    // From here the relay forwards both ways.
    {
        let relay = relay.clone();
        tokio::spawn(async move {
            let mut buf = vec![0u8; 65_536];
            while let Ok((n, from)) = relay.recv_from(&mut buf).await {
                let to = if from == server_addr {
                    client_addr
                } else {
                    server_addr
                };
                let _ = relay.send_to(&buf[..n], to).await;
            }
        });
    }
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert_eq!(server.stats().connections_accepted, 1);
    // Three idle timeouts later nobody holds the connection: it must be gone.
    let gone = eventually(Duration::from_secs(3), || {
        client.stats().connections_open == 0 && server.stats().connections_open == 0
    })
    .await;
    assert!(
        gone,
        "orphan connection: client {:?} server {:?}",
        client.stats(),
        server.stats()
    );
}
