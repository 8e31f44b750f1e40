//! Batched I/O of the runtime on real loopback sockets: content through GSO and
//! `sendmmsg`, no loss behind small socket buffers, no reordering across socket
//! shards, idle drivers that never wake, and busy polling only for dense traffic.
//!
//! The wait on a full send buffer itself is tested against a simulated socket in
//! the `driver` module: Linux frees a loopback datagram's send-buffer charge as
//! soon as it is handed to the receiving side, so a loopback socket never reports
//! `EAGAIN` to one sender.

#![allow(clippy::unwrap_used)] // tests fail loudly on any unexpected error

use std::collections::HashMap;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use bytes::Bytes;
use petrel::{Connection, Endpoint, EndpointConfig, Mode, MAX_BUSY_POLL};
use petrel_proto::kcp::segment::{segments, Command};
use tokio::net::UdpSocket;

fn localhost() -> SocketAddr {
    "127.0.0.1:0".parse().unwrap()
}

/// Message `i` of a test stream: its index, then `len` bytes derived from it.
fn message(i: u32, len: usize) -> Bytes {
    let mut v = i.to_be_bytes().to_vec();
    v.extend((0..len).map(|j| (i as usize * 31 + j) as u8));
    Bytes::from(v)
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

/// Sends `count` messages of `len` bytes from a separate task while this one checks
/// every echo, in order and byte for byte.
async fn stream_and_check(conn: &Connection, count: u32, len: usize) {
    let sender = {
        let conn = conn.clone();
        tokio::spawn(async move {
            for i in 0..count {
                conn.send(message(i, len)).await.unwrap();
            }
        })
    };
    for i in 0..count {
        let got = tokio::time::timeout(Duration::from_secs(30), conn.recv())
            .await
            .expect("echo within 30 s")
            .unwrap();
        assert_eq!(got, Some(message(i, len)), "echo {i}");
    }
    sender.await.unwrap();
}

/// A client endpoint with `config`, a server with `config` that accepts and echoes,
/// and the client's connection to it.
async fn echo_pair(config: EndpointConfig) -> (Endpoint, Endpoint, Connection) {
    let server = EndpointConfig {
        accept_incoming: true,
        ..config.clone()
    };
    let server = Endpoint::bind(localhost(), server).await.unwrap();
    let client = Endpoint::bind(localhost(), config).await.unwrap();
    let conn = client.connect(server.local_addr()).await.unwrap();
    spawn_echo(server.accept().await.unwrap());
    (server, client, conn)
}

/// [`echo_pair`] with defaults but `busy_poll`.
async fn busy_poll_pair(busy_poll: Duration) -> (Endpoint, Endpoint, Connection) {
    echo_pair(EndpointConfig {
        busy_poll,
        ..EndpointConfig::default()
    })
    .await
}

#[tokio::test]
async fn bulk_echo_arrives_intact_with_gso_on_and_off() {
    for gso in [true, false] {
        let (server, client, conn) = echo_pair(EndpointConfig {
            gso,
            gro: gso,
            ..EndpointConfig::default()
        })
        .await;
        // Large messages: every one fills whole MTU-sized segments, so the sessions
        // produce trains of equal-size datagrams to one peer.
        stream_and_check(&conn, 600, 8000).await;
        let (c, s) = (client.stats(), server.stats());
        for (side, st) in [("client", c), ("server", s)] {
            assert!(
                st.datagrams_sent > 2 * st.send_syscalls,
                "{side} gso={gso}: batches of > 2 datagrams per call expected: {st:?}"
            );
            assert!(st.recv_syscalls > 0 && st.datagrams_received >= st.recv_syscalls);
            // Only the handshake is copied; data goes from encoder to kernel in place.
            assert!(st.bytes_copied < 1000, "{side}: {st:?}");
            assert_eq!(st.send_errors, 0, "{side}: {st:?}");
            if gso {
                assert!(st.datagrams_sent_gso > 0, "{side}: no GSO train: {st:?}");
            } else {
                assert_eq!(st.datagrams_sent_gso, 0, "{side}: {st:?}");
            }
        }
        assert_eq!(conn.stats().send_errors, 0);
        assert_eq!(server.connection_stats()[0].send_errors, 0);
    }
}

/// `EndpointConfig::busy_poll`: a bulk echo, whose datagrams arrive far closer
/// together than the limit (the longest, 1 ms, so that a loaded test machine
/// still qualifies), is served by busy polls that find work, and arrives intact;
/// with zero no driver ever busy-polls.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn dense_traffic_is_busy_polled_and_zero_turns_it_off() {
    for (busy_poll, expect_polls) in [(MAX_BUSY_POLL, true), (Duration::ZERO, false)] {
        let (server, client, conn) = busy_poll_pair(busy_poll).await;
        stream_and_check(&conn, 400, 8000).await;
        let (c, s) = (client.stats(), server.stats());
        if expect_polls {
            assert!(
                c.busy_poll_hits + s.busy_poll_hits > 0,
                "no busy poll found work: client {c:?}, server {s:?}"
            );
            assert!(c.busy_poll_hits <= c.busy_polls && s.busy_poll_hits <= s.busy_polls);
        } else {
            assert_eq!((c.busy_polls, s.busy_polls), (0, 0), "{c:?} {s:?}");
        }
    }
}

/// Sparse traffic, one small message every 5 ms, leaves the drivers sleeping
/// between messages: a busy poll needs two idle waits in a row shorter than half
/// the default limit (25 µs), which a reply and the ack after it can give once in
/// a while, but never every message (always polling would be at least one per
/// message on each side).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sparse_traffic_is_not_busy_polled() {
    let (server, client, conn) = busy_poll_pair(EndpointConfig::default().busy_poll).await;
    let messages = 60u32;
    for i in 0..messages {
        conn.send(message(i, 100)).await.unwrap();
        assert_eq!(conn.recv().await.unwrap(), Some(message(i, 100)));
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    let polls = client.stats().busy_polls + server.stats().busy_polls;
    assert!(
        polls <= u64::from(messages / 2),
        "{polls} busy polls for {messages} sparse messages"
    );
}

/// Datagrams that reach no connection never make a driver poll, however dense:
/// a stranger who sends a junk datagram every few microseconds (far inside the
/// longest limit, 1 ms) only wakes the drivers, as it did without busy polling,
/// rather than keeping a core spinning between its datagrams.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn junk_traffic_never_starts_a_busy_poll() {
    let server = Endpoint::bind(
        localhost(),
        EndpointConfig {
            busy_poll: MAX_BUSY_POLL,
            ..EndpointConfig::server()
        },
    )
    .await
    .unwrap();
    let stranger = UdpSocket::bind(localhost()).await.unwrap();
    for i in 0..3000u32 {
        // Unknown convs, a bare byte, an empty datagram.
        let junk = match i % 3 {
            0 => i.to_be_bytes().repeat(8),
            1 => vec![0x55],
            _ => Vec::new(),
        };
        stranger.send_to(&junk, server.local_addr()).await.unwrap();
        if i % 100 == 0 {
            tokio::task::yield_now().await;
        }
    }
    tokio::time::sleep(Duration::from_millis(200)).await;
    let s = server.stats();
    assert!(s.datagrams_received > 0, "{s:?}");
    assert_eq!(s.busy_polls, 0, "{s:?}");
}

#[tokio::test]
async fn small_socket_buffers_and_a_fast_sender_lose_nothing_in_the_runtime() {
    // The smallest buffers Linux grants (it doubles and floors the request).
    let small = |server: bool| EndpointConfig {
        send_buffer: Some(2048),
        recv_buffer: Some(2048),
        accept_incoming: server,
        ..EndpointConfig::default()
    };
    let server = Endpoint::bind(localhost(), small(true)).await.unwrap();
    let client = Endpoint::bind(localhost(), small(false)).await.unwrap();
    assert!(server.socket_buffers().send_actual < 16 * 1024);
    let conn = client.connect(server.local_addr()).await.unwrap();
    spawn_echo(server.accept().await.unwrap());
    stream_and_check(&conn, 2000, 1000).await;
    let (c, s) = (conn.stats(), server.connection_stats()[0]);
    for (side, st) in [("client", c), ("server", s)] {
        assert_eq!(st.send_errors, 0, "{side}: {st:?}");
    }
}

/// Relays one client's datagrams to the server and back, recording every KCP data
/// segment's `sn` per direction; counts a segment seen for the first time with an
/// `sn` below one already seen (a reordering — a retransmission repeats an `sn`
/// and is not counted).
async fn recording_relay(server: SocketAddr) -> (SocketAddr, Arc<AtomicU64>, Arc<AtomicU64>) {
    let bind = || {
        let socket = std::net::UdpSocket::bind(localhost()).unwrap();
        // Room for whole windows: a datagram the kernel drops before the relay
        // records it would come back as a retransmission and look reordered.
        socket2::SockRef::from(&socket)
            .set_recv_buffer_size(4 << 20)
            .unwrap();
        socket.set_nonblocking(true).unwrap();
        Arc::new(UdpSocket::from_std(socket).unwrap())
    };
    let (front, back) = (bind(), bind());
    back.connect(server).await.unwrap();
    let addr = front.local_addr().unwrap();
    let reordered = Arc::new(AtomicU64::new(0));
    let data = Arc::new(AtomicU64::new(0));
    let client = Arc::new(tokio::sync::OnceCell::<SocketAddr>::new());
    let recorder = |reordered: Arc<AtomicU64>, data: Arc<AtomicU64>| {
        let seen = Mutex::new((HashMap::<u32, ()>::new(), None::<u32>));
        move |datagram: &[u8]| {
            let mut seen = seen.lock().unwrap();
            for segment in segments(datagram).flatten() {
                if segment.header.cmd != Command::Push {
                    continue;
                }
                let sn = segment.header.sn;
                data.fetch_add(1, Ordering::Relaxed);
                if seen.0.insert(sn, ()).is_some() {
                    continue;
                }
                if seen.1.is_some_and(|max| sn < max) {
                    reordered.fetch_add(1, Ordering::Relaxed);
                }
                seen.1 = Some(seen.1.map_or(sn, |max| max.max(sn)));
            }
        }
    };
    {
        let (front, back, client) = (front.clone(), back.clone(), client.clone());
        let record = recorder(reordered.clone(), data.clone());
        tokio::spawn(async move {
            let mut buf = vec![0u8; 65536];
            while let Ok((n, from)) = front.recv_from(&mut buf).await {
                let _ = client.set(from);
                record(&buf[..n]);
                let _ = back.send(&buf[..n]).await;
            }
        });
    }
    {
        let record = recorder(reordered.clone(), data.clone());
        tokio::spawn(async move {
            let mut buf = vec![0u8; 65536];
            while let Ok(n) = back.recv(&mut buf).await {
                record(&buf[..n]);
                if let Some(to) = client.get() {
                    let _ = front.send_to(&buf[..n], to).await;
                }
            }
        });
    }
    (addr, reordered, data)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_socket_shards_never_reorder_a_connections_datagrams() {
    let clients = 6;
    let server = Endpoint::bind(
        localhost(),
        EndpointConfig {
            io_threads: 2,
            recv_buffer: Some(4 << 20),
            ..EndpointConfig::server()
        },
    )
    .await
    .unwrap();
    let server = Arc::new(server);
    {
        let server = server.clone();
        tokio::spawn(async move {
            while let Some(conn) = server.accept().await {
                spawn_echo(conn);
            }
        });
    }
    let mut tasks = Vec::new();
    let mut records = Vec::new();
    for _ in 0..clients {
        // Each client's relay reaches the server from its own port; the server
        // spreads the connections over its two shards.
        let (relay, reordered, data) = recording_relay(server.local_addr()).await;
        records.push((reordered, data));
        tasks.push(tokio::spawn(async move {
            let client = Endpoint::bind(
                localhost(),
                EndpointConfig {
                    recv_buffer: Some(4 << 20),
                    ..EndpointConfig::default()
                },
            )
            .await
            .unwrap();
            let conn = client.connect(relay).await.unwrap();
            stream_and_check(&conn, 1500, 600).await;
            conn.stats().kcp
        }));
    }
    let mut kcp = Vec::new();
    for task in tasks {
        kcp.push(task.await.unwrap());
    }
    for (i, (reordered, data)) in records.iter().enumerate() {
        assert!(data.load(Ordering::Relaxed) >= 3000, "client {i}");
        assert_eq!(
            reordered.load(Ordering::Relaxed),
            0,
            "client {i} reordered: {:?}",
            kcp[i]
        );
    }
    let stats = server.stats();
    assert_eq!(stats.connections_open, clients);
    assert_eq!(stats.send_errors, 0);
}

/// Native and legacy servers choose each conv so that its first byte names the
/// shard with the fewest connections, and the socket group delivers by that byte:
/// the shards split the connections evenly and each reads only its own, whatever
/// the 4-tuples hash to. A client endpoint with two shards reads each connection
/// on its conv's shard too.
#[tokio::test]
async fn steered_shards_split_connections_evenly_and_read_only_their_own() {
    for mode in [Mode::Native, Mode::Legacy] {
        let server = Endpoint::bind(
            localhost(),
            EndpointConfig {
                io_threads: 2,
                mode,
                ..EndpointConfig::server()
            },
        )
        .await
        .unwrap();
        let client_config = EndpointConfig {
            mode,
            ..EndpointConfig::default()
        };
        let mut clients = Vec::new();
        let mut homes = [0usize; 2];
        for i in 0..8u32 {
            // Odd clients bind two shards of their own.
            let client = Endpoint::bind(
                localhost(),
                EndpointConfig {
                    io_threads: 1 + (i % 2) as usize,
                    ..client_config.clone()
                },
            )
            .await
            .unwrap();
            let conn = client.connect(server.local_addr()).await.unwrap();
            let accepted = server.accept().await.unwrap();
            assert_eq!(accepted.conv(), conn.conv());
            let lane = usize::from(conn.conv().to_le_bytes()[0]) % 2;
            assert_eq!(accepted.io_shard(), lane, "{mode:?} server side");
            if i % 2 == 1 {
                assert_eq!(conn.io_shard(), lane, "{mode:?} client side");
            }
            homes[accepted.io_shard()] += 1;
            spawn_echo(accepted);
            clients.push((client, conn));
        }
        assert_eq!(homes, [4, 4], "{mode:?}");
        for (client, conn) in &clients {
            stream_and_check(conn, 200, 900).await;
            assert_eq!(client.stats().datagrams_off_home_shard, 0, "{mode:?}");
        }
        let stats = server.stats();
        assert!(stats.datagrams_received > 8 * 200, "{stats:?}");
        assert_eq!(stats.datagrams_off_home_shard, 0, "{mode:?} {stats:?}");
    }
}

/// A server bound with `server` and two socket shards, and a one-shard client.
async fn two_shard_server_and_client(server: EndpointConfig) -> (Endpoint, Endpoint) {
    let server = Endpoint::bind(
        localhost(),
        EndpointConfig {
            io_threads: 2,
            ..server
        },
    )
    .await
    .unwrap();
    let client = Endpoint::bind(localhost(), EndpointConfig::default())
        .await
        .unwrap();
    (server, client)
}

#[tokio::test]
async fn idle_connections_wake_no_driver() {
    let (server, client) = two_shard_server_and_client(EndpointConfig {
        max_connections_per_address: 1000,
        max_connections_per_ip: 1000,
        ..EndpointConfig::server()
    })
    .await;
    let mut conns = Vec::new();
    for i in 0..200 {
        let conn = client.connect(server.local_addr()).await.unwrap();
        spawn_echo(server.accept().await.unwrap());
        conn.send(message(i, 64)).await.unwrap();
        assert_eq!(conn.recv().await.unwrap(), Some(message(i, 64)));
        conns.push(conn);
    }
    // Let the last acks land (on a loaded machine a retransmission may still be
    // due: wait for a quiet 300 ms, at most 3 s), then watch an idle second
    // (keepalive is 5 s).
    let wakeups = |s: petrel::EndpointStats| s.driver_wakeups + s.timer_wakeups + s.busy_polls;
    let total = || wakeups(client.stats()) + wakeups(server.stats());
    for _ in 0..10 {
        let before = total();
        tokio::time::sleep(Duration::from_millis(300)).await;
        if total() == before {
            break;
        }
    }
    let before = (client.stats(), server.stats());
    tokio::time::sleep(Duration::from_secs(1)).await;
    let after = (client.stats(), server.stats());
    assert_eq!(
        wakeups(after.0) + wakeups(after.1),
        wakeups(before.0) + wakeups(before.1),
        "idle connections woke (or busy-polled) a driver or timer: before {before:?}, after {after:?}"
    );
}

/// A client endpoint with one socket and two connections to a steered server
/// sends both connections' MTU-sized datagrams to one peer address, so its
/// batches can carry GSO trains that mix the two convs; a receiver with GRO reads
/// such a train as one datagram, and the reuseport program steers all of it by
/// its first byte: the second connection's datagrams are then read on the first
/// one's shard (and may be processed concurrently with, and so before, datagrams
/// of the same connection read on its own shard).
#[tokio::test]
async fn steered_shards_read_only_their_own_with_two_connections_from_one_address() {
    let (server, client) = two_shard_server_and_client(EndpointConfig::server()).await;
    let mut conns = Vec::new();
    for _ in 0..2 {
        let conn = client.connect(server.local_addr()).await.unwrap();
        let accepted = server.accept().await.unwrap();
        conns.push((conn, accepted.io_shard()));
        spawn_echo(accepted);
    }
    assert_ne!(conns[0].1, conns[1].1, "one connection per shard");
    let (a, b) = (conns[0].0.clone(), conns[1].0.clone());
    tokio::join!(
        stream_and_check(&a, 400, 8000),
        stream_and_check(&b, 400, 8000)
    );
    let stats = server.stats();
    assert_eq!(stats.datagrams_off_home_shard, 0, "{stats:?}");
}
