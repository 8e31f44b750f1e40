//! Adversarial tests of the runtime: hostile datagrams, floods and abrupt peers on real
//! loopback sockets. Each test is bounded in datagram count and wall time.
//!
//! The attacker speaks the protocol through the sans-IO cores of `petrel-proto` over a
//! plain tokio socket, so it can do what no `Endpoint` would: forge, replay, skip, lie.

#![allow(clippy::unwrap_used)] // tests fail loudly on any unexpected error

mod raw_peer;

use std::net::SocketAddr;
use std::time::{Duration, Instant};

use bytes::Bytes;
use petrel::{Connection, ConnectionError, ControlConfig, Endpoint, EndpointConfig, Mode};
use petrel_proto::handshake::{ConnRef, NativeMessage};
use petrel_proto::kcp::segment::{encode_segment, segments, Command, Header};
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;
use tokio::net::UdpSocket;
use tokio::time::timeout;

use raw_peer::{initial, native_handshake};

fn localhost() -> SocketAddr {
    "127.0.0.1:0".parse().unwrap()
}

async fn attacker() -> UdpSocket {
    UdpSocket::bind(localhost()).await.unwrap()
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

/// A native echo server that accepts every connection.
async fn echo_server(config: EndpointConfig) -> (std::sync::Arc<Endpoint>, SocketAddr) {
    let server = std::sync::Arc::new(Endpoint::bind(localhost(), config).await.unwrap());
    let addr = server.local_addr();
    let acceptor = server.clone();
    tokio::spawn(async move {
        while let Some(conn) = acceptor.accept().await {
            spawn_echo(conn);
        }
    });
    (server, addr)
}

/// An honest client: connects and checks a few echoes.
async fn honest_round_trip(client: &Endpoint, server: SocketAddr) {
    let conn = timeout(Duration::from_secs(5), client.connect(server))
        .await
        .expect("honest connect hung")
        .expect("honest connect failed");
    for i in 0..5u8 {
        let msg = Bytes::from(vec![i; 100 + usize::from(i) * 500]);
        conn.send(msg.clone()).await.unwrap();
        let echo = timeout(Duration::from_secs(5), conn.recv())
            .await
            .expect("honest echo hung")
            .unwrap();
        assert_eq!(echo, Some(msg));
    }
}

fn segment(
    conv: u32,
    cmd: Command,
    sn: u32,
    una: u32,
    frg: u8,
    wnd: u16,
    payload: &[u8],
) -> Vec<u8> {
    let header = Header {
        conv,
        cmd,
        frg,
        wnd,
        ts: 0,
        sn,
        una,
        len: 0,
    };
    let mut out = Vec::new();
    encode_segment(&header, payload, &mut out);
    out
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

/// Random garbage, truncated and oversized datagrams in every mode: nothing panics, no
/// connection appears, the drops are counted, and an honest client keeps working.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn garbage_is_counted_and_honest_clients_keep_working() {
    for mode in [Mode::Native, Mode::Legacy, Mode::Raw { conv: 0x1234_5678 }] {
        let (server, addr) = echo_server(EndpointConfig {
            mode,
            ..EndpointConfig::server()
        })
        .await;
        let client = Endpoint::bind(
            localhost(),
            EndpointConfig {
                mode,
                ..EndpointConfig::default()
            },
        )
        .await
        .unwrap();
        if !matches!(mode, Mode::Raw { .. }) {
            honest_round_trip(&client, addr).await;
        }
        let sock = attacker().await;
        let mut rng = ChaCha8Rng::seed_from_u64(7);
        let mut sent = 0u64;
        for i in 0..3000u32 {
            let len = match i % 10 {
                0 => 0,
                1 => rng.gen_range(1..24),
                2 => 5,
                3 => 9,
                4 => 65_000,
                _ => rng.gen_range(24..1500),
            };
            let mut dg: Vec<u8> = (0..len).map(|_| rng.gen()).collect();
            match i % 4 {
                // Native control header (conv 0) with garbage behind it.
                0 if dg.len() >= 4 => dg[..4].copy_from_slice(&[0; 4]),
                1 if dg.len() >= 8 => dg[..8].copy_from_slice(b"\0\0\0\0PTRL"),
                _ => {}
            }
            // A raw server accepts any datagram with its conv; keep garbage away from it.
            if matches!(mode, Mode::Raw { .. })
                && dg.len() >= 4
                && dg[..4] == 0x1234_5678u32.to_le_bytes()
            {
                dg[0] ^= 1;
            }
            sock.send_to(&dg, addr).await.unwrap();
            sent += 1;
            if i % 50 == 0 {
                tokio::time::sleep(Duration::from_millis(1)).await;
            }
        }
        let counted = eventually(Duration::from_secs(3), || {
            let s = server.stats();
            s.dropped_unknown + s.dropped_malformed + s.dropped_handshake >= sent / 2
        })
        .await;
        let stats = server.stats();
        assert!(counted, "{mode:?}: drops not counted: {stats:?}");
        let honest = u64::from(!matches!(mode, Mode::Raw { .. }));
        assert_eq!(stats.connections_accepted, honest, "{mode:?}: {stats:?}");
        if !matches!(mode, Mode::Raw { .. }) {
            honest_round_trip(&client, addr).await;
        }
    }
}

/// 20 000 INITIALs (distinct nonces, one source): the server keeps no state for them and
/// never sends more bytes than it received (`specs/kcp.md` §4).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn initial_flood_keeps_no_state_and_does_not_amplify() {
    let (server, addr) = echo_server(EndpointConfig::server()).await;
    let sock = attacker().await;
    for seed in 0..20_000u64 {
        sock.send_to(&initial(seed), addr).await.unwrap();
        if seed % 64 == 0 {
            tokio::time::sleep(Duration::from_millis(1)).await;
        }
    }
    // A bogus version with a long offered-version list asks for VERSION-NEGOTIATION.
    let mut bogus = initial(1);
    bogus[8] = 0xEE;
    for _ in 0..100 {
        sock.send_to(&bogus, addr).await.unwrap();
    }
    tokio::time::sleep(Duration::from_millis(300)).await;
    let stats = server.stats();
    let hs = server.handshake_stats().unwrap();
    assert!(hs.retries > 1000, "{hs:?}");
    assert_eq!(stats.connections_open, 0, "{stats:?}");
    assert_eq!(hs.accepted, 0, "{hs:?}");
    assert!(
        stats.bytes_sent <= stats.bytes_received,
        "amplification: {} bytes out for {} in",
        stats.bytes_sent,
        stats.bytes_received
    );
}

/// Forged, cross-nonce and cross-address cookies are rejected and answered with no more
/// bytes than they carried; no connection is created.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn forged_and_replayed_cookies_are_rejected() {
    let (server, addr) = echo_server(EndpointConfig::server()).await;
    let a = attacker().await;
    let b = attacker().await;
    let mut buf = vec![0u8; 2048];
    a.send_to(&initial(1), addr).await.unwrap();
    let (n, _) = timeout(Duration::from_secs(2), a.recv_from(&mut buf))
        .await
        .unwrap()
        .unwrap();
    let Ok(NativeMessage::Retry { nonce, cookie }) = NativeMessage::decode(&buf[..n]) else {
        panic!("expected RETRY");
    };
    let with_cookie = |nonce: u64, cookie| {
        let mut out = Vec::new();
        let Ok(NativeMessage::Initial { params, len, .. }) = NativeMessage::decode(&initial(1))
        else {
            unreachable!()
        };
        NativeMessage::Initial {
            nonce,
            params,
            cookie: Some(cookie),
            len,
        }
        .encode(&mut out);
        out
    };
    let mut forged = cookie;
    forged[0] ^= 0x80;
    // Forged cookie; valid cookie under another nonce; valid cookie from another address.
    a.send_to(&with_cookie(nonce, forged), addr).await.unwrap();
    a.send_to(&with_cookie(nonce ^ 1, cookie), addr)
        .await
        .unwrap();
    b.send_to(&with_cookie(nonce, cookie), addr).await.unwrap();
    assert!(
        eventually(Duration::from_secs(2), || server
            .handshake_stats()
            .unwrap()
            .rejected_bad_cookie
            >= 3)
        .await,
        "{:?}",
        server.handshake_stats()
    );
    assert_eq!(server.stats().connections_open, 0);
    // The genuine cookie, from the address it was minted for, still works (and only once
    // per nonce: the repeat is answered from the existing connection).
    a.send_to(&with_cookie(nonce, cookie), addr).await.unwrap();
    assert!(
        eventually(Duration::from_secs(2), || server
            .stats()
            .connections_accepted
            == 1)
        .await
    );
    a.send_to(&with_cookie(nonce, cookie), addr).await.unwrap();
    tokio::time::sleep(Duration::from_millis(100)).await;
    assert_eq!(server.stats().connections_accepted, 1);
}

/// Hostile KCP segments on an established connection: lying `len`, `frg` 255, zero and
/// huge windows, `una`/`sn` far ahead, ACKs for segments never sent, a WASK storm, wrong
/// `conv`, control with wrong tokens. The server counts and survives; the WASK storm is
/// not amplified; an honest connection keeps working.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn hostile_segments_on_an_established_connection() {
    let (server, addr) = echo_server(EndpointConfig::server()).await;
    let sock = attacker().await;
    let est = native_handshake(&sock, addr, 99, Duration::from_secs(5))
        .await
        .expect("attacker handshake");
    let conv = est.conv;
    let mut hostile: Vec<Vec<u8>> = Vec::new();
    // Header claims 4 GiB of payload; claims one byte more than present.
    let mut lying = segment(conv, Command::Push, 0, 0, 0, 128, b"abc");
    lying[20..24].copy_from_slice(&u32::MAX.to_le_bytes());
    hostile.push(lying);
    let mut short = segment(conv, Command::Push, 0, 0, 0, 128, b"abc");
    short[20..24].copy_from_slice(&4u32.to_le_bytes());
    hostile.push(short);
    hostile.push(segment(conv, Command::Push, 1, 0, 255, 128, b"frg255"));
    hostile.push(segment(
        conv,
        Command::Push,
        0,
        u32::MAX / 2,
        0,
        0,
        b"una far ahead",
    ));
    hostile.push(segment(
        conv,
        Command::Push,
        u32::MAX / 2,
        0,
        0,
        u16::MAX,
        b"sn far ahead",
    ));
    hostile.push(segment(conv, Command::Push, u32::MAX, 0, 0, 128, b"sn -1"));
    hostile.push(segment(conv, Command::Ack, 12_345, 0, 0, 128, b""));
    hostile.push(segment(conv, Command::Ack, 0, u32::MAX, 0, 128, b""));
    hostile.push(segment(
        conv ^ 1,
        Command::Push,
        0,
        0,
        0,
        128,
        b"wrong conv",
    ));
    let mut bad_cmd = segment(conv, Command::Push, 2, 0, 0, 128, b"cmd 99");
    bad_cmd[4] = 99;
    hostile.push(bad_cmd);
    for kind in [
        NativeMessage::Keepalive,
        NativeMessage::Close,
        NativeMessage::CloseAck,
    ] {
        let mut out = Vec::new();
        kind(ConnRef { conv, token: 1 }).encode(&mut out);
        hostile.push(out);
    }
    let mut in_bytes = 0usize;
    for _ in 0..20 {
        for dg in &hostile {
            sock.send_to(dg, addr).await.unwrap();
            in_bytes += dg.len();
        }
        tokio::time::sleep(Duration::from_millis(1)).await;
    }
    let wask = segment(conv, Command::WindowAsk, 0, 0, 0, 128, b"");
    for i in 0..5000 {
        sock.send_to(&wask, addr).await.unwrap();
        in_bytes += wask.len();
        if i % 100 == 0 {
            tokio::time::sleep(Duration::from_millis(1)).await;
        }
    }
    let client = Endpoint::bind(localhost(), EndpointConfig::default())
        .await
        .unwrap();
    honest_round_trip(&client, addr).await;
    let mut out_bytes = 0usize;
    let mut buf = vec![0u8; 65_536];
    while let Ok(Ok((n, _))) = timeout(Duration::from_millis(300), sock.recv_from(&mut buf)).await {
        out_bytes += n;
        for seg in segments(&buf[..n]) {
            assert!(
                seg.is_ok() || buf[..4] == [0; 4],
                "server sent a malformed segment"
            );
        }
    }
    assert!(
        out_bytes <= in_bytes,
        "server answered {out_bytes} bytes to {in_bytes} hostile bytes"
    );
    let stats = server.connection_stats();
    let attacked = stats
        .iter()
        .find(|s| s.input_errors > 0)
        .expect("hostile datagrams counted on the attacked connection");
    assert!(attacked.input_errors >= 20, "{attacked:?}");
}

/// A handshake flood from one address that completes every handshake: the accept queue
/// and `max_connections` refuse and count; nothing grows beyond them.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn completed_handshake_flood_is_bounded() {
    let server = Endpoint::bind(
        localhost(),
        EndpointConfig {
            max_connections: 24,
            max_connections_per_address: 64,
            accept_queue: 8,
            ..EndpointConfig::server()
        },
    )
    .await
    .unwrap();
    let addr = server.local_addr();
    let sock = attacker().await;
    let limit = Duration::from_millis(150);
    let mut established = 0;
    for seed in 0..20 {
        if native_handshake(&sock, addr, seed, limit).await.is_some() {
            established += 1;
        }
    }
    let stats = server.stats();
    assert_eq!(established, 8, "{stats:?}");
    assert_eq!(stats.connections_accepted, 8, "{stats:?}");
    assert!(stats.refused_accept_queue_full >= 12, "{stats:?}");
    // Drain the queue and keep accepting: max_connections takes over.
    let mut held = Vec::new();
    for seed in 100..130 {
        while let Ok(Some(c)) = timeout(Duration::from_millis(1), server.accept()).await {
            held.push(c);
        }
        native_handshake(&sock, addr, seed, limit).await;
    }
    let stats = server.stats();
    assert!(stats.connections_open <= 24, "{stats:?}");
    assert!(stats.refused_max_connections > 0, "{stats:?}");
}

/// One address may take every connection slot: with the default `max_connections`
/// (65 536) a single host holds them all for the idle timeout, locking out every other
/// client. A per-peer bound (a few per address, counted) would stop this.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn one_address_cannot_take_every_slot() {
    let (server, addr) = echo_server(EndpointConfig {
        max_connections: 64,
        ..EndpointConfig::server()
    })
    .await;
    let sock = attacker().await;
    for seed in 0..64 {
        native_handshake(&sock, addr, seed, Duration::from_millis(200)).await;
    }
    let client = Endpoint::bind(localhost(), EndpointConfig::default())
        .await
        .unwrap();
    let res = timeout(Duration::from_secs(3), client.connect(addr)).await;
    assert!(
        matches!(res, Ok(Ok(_))),
        "honest client locked out: {:?}",
        server.stats()
    );
}

/// Legacy SYNs need no proof of address and are answered with a larger SYN-ACK (9 bytes
/// for 5): the protocol cannot prevent reflection from spoofed addresses, but one address
/// can neither fill the server nor draw more bytes than it sends once its per-address
/// limit is reached.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn legacy_syn_flood_does_not_amplify_or_fill_the_server() {
    let (server, addr) = echo_server(EndpointConfig {
        mode: Mode::Legacy,
        ..EndpointConfig::server()
    })
    .await;
    let sock = attacker().await;
    for sync_id in 0..2000u32 {
        let mut syn = vec![1u8];
        syn.extend_from_slice(&sync_id.to_le_bytes());
        sock.send_to(&syn, addr).await.unwrap();
        if sync_id % 64 == 0 {
            tokio::time::sleep(Duration::from_millis(1)).await;
        }
    }
    tokio::time::sleep(Duration::from_millis(300)).await;
    let stats = server.stats();
    assert!(stats.connections_open <= 64, "{stats:?}");
    assert!(stats.bytes_sent <= stats.bytes_received, "{stats:?}");
}

fn short_idle() -> ControlConfig {
    ControlConfig {
        keepalive_interval: Duration::from_millis(200),
        idle_timeout: Duration::from_secs(1),
        ..ControlConfig::default()
    }
}

/// A client that vanishes mid-connection (no CLOSE, no further datagram) is detected by
/// the idle timeout; the server's connection ends, is unregistered, and fails sends.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn vanished_client_times_out() {
    let server = Endpoint::bind(
        localhost(),
        EndpointConfig {
            control: short_idle(),
            ..EndpointConfig::server()
        },
    )
    .await
    .unwrap();
    let addr = server.local_addr();
    let sock = attacker().await;
    let est = native_handshake(&sock, addr, 3, Duration::from_secs(5))
        .await
        .unwrap();
    sock.send_to(&segment(est.conv, Command::Push, 0, 0, 0, 128, b"hi"), addr)
        .await
        .unwrap();
    let accepted = timeout(Duration::from_secs(2), server.accept())
        .await
        .unwrap()
        .unwrap();
    assert_eq!(accepted.recv().await.unwrap().as_deref(), Some(&b"hi"[..]));
    drop(sock);
    let end = timeout(Duration::from_secs(5), accepted.recv())
        .await
        .expect("recv hung after the peer vanished");
    assert_eq!(end, Err(ConnectionError::IdleTimeout));
    assert!(
        eventually(Duration::from_secs(2), || server.stats().connections_open
            == 0)
        .await
    );
    let send = timeout(
        Duration::from_secs(1),
        accepted.send(Bytes::from_static(b"x")),
    )
    .await;
    assert_eq!(send.unwrap(), Err(ConnectionError::IdleTimeout));
}

/// A peer that never reads: the sender blocks (backpressure) with bounded queues, and
/// everything arrives in order once the reader starts.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn peer_that_never_reads_gets_backpressure() {
    let server = Endpoint::bind(localhost(), EndpointConfig::server())
        .await
        .unwrap();
    let addr = server.local_addr();
    let client = Endpoint::bind(localhost(), EndpointConfig::default())
        .await
        .unwrap();
    let conn = client.connect(addr).await.unwrap();
    conn.send(Bytes::from_static(b"open")).await.unwrap();
    let accepted = timeout(Duration::from_secs(2), server.accept())
        .await
        .unwrap()
        .unwrap();
    let total = 6000u32;
    let sender = conn.clone();
    let writer = tokio::spawn(async move {
        for i in 0..total {
            sender
                .send(Bytes::from(i.to_be_bytes().repeat(250)))
                .await
                .unwrap();
        }
    });
    tokio::time::sleep(Duration::from_millis(1500)).await;
    assert!(
        !writer.is_finished(),
        "6000 KB went out with nobody reading"
    );
    let cs = conn.stats();
    let limit = EndpointConfig::default().kcp.send_queue_limit as u64;
    assert!(cs.kcp.send_queue <= limit, "{cs:?}");
    assert_eq!(cs.kcp.rmt_wnd, 0, "receiver should advertise a zero window");
    assert_eq!(
        accepted.recv().await.unwrap().as_deref(),
        Some(&b"open"[..])
    );
    for i in 0..total {
        let msg = timeout(Duration::from_secs(10), accepted.recv())
            .await
            .expect("stalled after the reader started")
            .unwrap()
            .unwrap();
        assert_eq!(&msg[..4], &i.to_be_bytes());
    }
    writer.await.unwrap();
}

/// Close while another task sends; drop every handle with data queued; drop the
/// endpoint under a live connection. Nothing hangs and the peer sees a clean end.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn close_races_end_cleanly() {
    // The peer reads and discards: an echoing peer would stop reading once this client's
    // receive window filled with unread echoes, and no flush could ever finish.
    let server = std::sync::Arc::new(
        Endpoint::bind(localhost(), EndpointConfig::server())
            .await
            .unwrap(),
    );
    let addr = server.local_addr();
    let acceptor = server.clone();
    tokio::spawn(async move {
        while let Some(conn) = acceptor.accept().await {
            tokio::spawn(async move { while let Ok(Some(_)) = conn.recv().await {} });
        }
    });
    let client = Endpoint::bind(localhost(), EndpointConfig::default())
        .await
        .unwrap();

    // close() while a sender loops.
    let conn = client.connect(addr).await.unwrap();
    let sender = conn.clone();
    let writer = tokio::spawn(async move {
        loop {
            if let Err(e) = sender.send(Bytes::from(vec![7u8; 3000])).await {
                return e;
            }
        }
    });
    tokio::time::sleep(Duration::from_millis(50)).await;
    let closed = timeout(Duration::from_secs(10), conn.close()).await;
    assert_eq!(closed.expect("close hung"), Ok(()));
    let err = timeout(Duration::from_secs(2), writer)
        .await
        .unwrap()
        .unwrap();
    assert_eq!(err, ConnectionError::Closed);

    // Every handle dropped with data queued: the peer still gets all of it, then EOF.
    let server2 = Endpoint::bind(localhost(), EndpointConfig::server())
        .await
        .unwrap();
    let conn = client.connect(server2.local_addr()).await.unwrap();
    for i in 0..200u32 {
        conn.send(Bytes::from(i.to_be_bytes().to_vec()))
            .await
            .unwrap();
    }
    drop(conn);
    let accepted = timeout(Duration::from_secs(2), server2.accept())
        .await
        .unwrap()
        .unwrap();
    for i in 0..200u32 {
        let msg = timeout(Duration::from_secs(5), accepted.recv())
            .await
            .unwrap()
            .unwrap();
        assert_eq!(msg.as_deref(), Some(&i.to_be_bytes()[..]));
    }
    let eof = timeout(Duration::from_secs(5), accepted.recv())
        .await
        .unwrap();
    assert_eq!(eof, Ok(None));

    // The server endpoint and its handles dropped under a live client connection: the
    // client's recv ends (idle timeout) instead of hanging.
    let client2 = Endpoint::bind(
        localhost(),
        EndpointConfig {
            control: short_idle(),
            ..EndpointConfig::default()
        },
    )
    .await
    .unwrap();
    let conn = client2.connect(server2.local_addr()).await.unwrap();
    conn.send(Bytes::from_static(b"x")).await.unwrap();
    let accepted = timeout(Duration::from_secs(2), server2.accept())
        .await
        .unwrap()
        .unwrap();
    drop(accepted);
    drop(server2);
    let end = timeout(Duration::from_secs(5), conn.recv())
        .await
        .expect("recv hung");
    assert!(end.is_err() || end == Ok(None), "{end:?}");
}

/// Raw mode opens a connection on any datagram with the agreed conv: the bounds still
/// hold when many source ports do so.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn raw_mode_spray_is_bounded() {
    let conv = 0xABCD;
    let server = Endpoint::bind(
        localhost(),
        EndpointConfig {
            mode: Mode::Raw { conv },
            max_connections: 16,
            accept_queue: 4,
            ..EndpointConfig::server()
        },
    )
    .await
    .unwrap();
    let addr = server.local_addr();
    let mut socks = Vec::new();
    for _ in 0..50 {
        let s = attacker().await;
        s.send_to(&segment(conv, Command::Push, 0, 0, 0, 128, b"x"), addr)
            .await
            .unwrap();
        socks.push(s);
    }
    tokio::time::sleep(Duration::from_millis(200)).await;
    let stats = server.stats();
    assert_eq!(stats.connections_accepted, 4, "{stats:?}");
    assert!(stats.refused_accept_queue_full >= 46, "{stats:?}");
    assert!(stats.connections_open <= 16, "{stats:?}");
}

/// Legacy FIN with the right conv but a wrong sync_id does not close the connection.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn legacy_fin_with_wrong_ids_is_ignored() {
    let (server, addr) = echo_server(EndpointConfig {
        mode: Mode::Legacy,
        ..EndpointConfig::server()
    })
    .await;
    let client = Endpoint::bind(
        localhost(),
        EndpointConfig {
            mode: Mode::Legacy,
            ..EndpointConfig::default()
        },
    )
    .await
    .unwrap();
    let conn = client.connect(addr).await.unwrap();
    let sock = attacker().await;
    // Spoofing the client's address is not possible on loopback without raw sockets, so
    // the FINs come from another port: they must neither match nor disturb.
    for sync_id in 0..100u32 {
        let mut fin = vec![3u8];
        fin.extend_from_slice(&sync_id.to_le_bytes());
        fin.extend_from_slice(&conn.conv().to_le_bytes());
        sock.send_to(&fin, addr).await.unwrap();
    }
    tokio::time::sleep(Duration::from_millis(100)).await;
    conn.send(Bytes::from_static(b"still here")).await.unwrap();
    let echo = timeout(Duration::from_secs(2), conn.recv()).await.unwrap();
    assert_eq!(echo.unwrap().as_deref(), Some(&b"still here"[..]));
    assert!(server.stats().dropped_unknown >= 100);
}
