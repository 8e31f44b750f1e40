//! `Mode::KcpGo` between two Petrel endpoints on real loopback sockets: the
//! CRC-32 of kcptun's crypt-none header is checked on every datagram (a UDP
//! proxy corrupts some, none reaches KCP), one connection per peer, the
//! configurations kcp-go framing cannot run, and a mismatched FEC shape ending
//! both connections with an error within seconds.

#![allow(clippy::unwrap_used)] // tests fail loudly on any unexpected error

use std::net::SocketAddr;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use bytes::Bytes;
use petrel::{
    ConnectError, Connection, ConnectionError, ControlConfig, Endpoint, EndpointConfig, FecConfig,
    FecScheme, KcpConfig, KcpPreset, Mode,
};
use tokio::net::UdpSocket;

fn localhost() -> SocketAddr {
    "127.0.0.1:0".parse().unwrap()
}

fn config(data_shards: u8, parity_shards: u8, accept_incoming: bool) -> EndpointConfig {
    EndpointConfig {
        mode: Mode::KcpGo { crypt_none: true },
        kcp: KcpConfig {
            mtu: 1350,
            ..KcpConfig::default()
        }
        .with_preset(KcpPreset::Fast3),
        fec: FecConfig {
            scheme: FecScheme::Fixed {
                data_shards,
                parity_shards,
            },
            ..FecConfig::default()
        },
        accept_incoming,
        // Room for whole windows: the runtime sends a window in one batch, and a
        // datagram the kernel drops after the proxy counted it as corrupted would
        // never reach a CRC check.
        recv_buffer: Some(4 << 20),
        ..EndpointConfig::default()
    }
}

fn spawn_echo(server: Arc<Endpoint>) {
    tokio::spawn(async move {
        while let Some(conn) = server.accept().await {
            tokio::spawn(async move {
                while let Ok(Some(msg)) = conn.recv().await {
                    if conn.send(msg).await.is_err() {
                        break;
                    }
                }
            });
        }
    });
}

/// A UDP proxy between one client and `server` that flips a payload bit of every
/// `nth` datagram, both ways; returns its address and the count it corrupted.
async fn corrupting_proxy(server: SocketAddr, nth: u64) -> (SocketAddr, Arc<AtomicU64>) {
    let front = Arc::new(UdpSocket::bind(localhost()).await.unwrap());
    let back = Arc::new(UdpSocket::bind(localhost()).await.unwrap());
    back.connect(server).await.unwrap();
    let addr = front.local_addr().unwrap();
    let corrupted = Arc::new(AtomicU64::new(0));
    let client = Arc::new(tokio::sync::OnceCell::<SocketAddr>::new());
    let seen = Arc::new(AtomicU64::new(0));
    let flip = {
        let (seen, corrupted) = (seen.clone(), corrupted.clone());
        move |buf: &mut [u8]| {
            if seen.fetch_add(1, Ordering::Relaxed) % nth == nth - 1 && buf.len() > 30 {
                // Past the 20-byte crypt header: only the CRC can notice.
                buf[30] ^= 0x40;
                corrupted.fetch_add(1, Ordering::Relaxed);
            }
        }
    };
    {
        let (front, back, client, flip) =
            (front.clone(), back.clone(), client.clone(), flip.clone());
        tokio::spawn(async move {
            let mut buf = vec![0u8; 65536];
            while let Ok((n, from)) = front.recv_from(&mut buf).await {
                let _ = client.set(from);
                flip(&mut buf[..n]);
                let _ = back.send(&buf[..n]).await;
            }
        });
    }
    tokio::spawn(async move {
        let mut buf = vec![0u8; 65536];
        while let Ok(n) = back.recv(&mut buf).await {
            flip(&mut buf[..n]);
            if let Some(to) = client.get() {
                let _ = front.send_to(&buf[..n], to).await;
            }
        }
    });
    (addr, corrupted)
}

fn message(i: u32) -> Bytes {
    let mut v = i.to_be_bytes().to_vec();
    v.extend((0..1500).map(|j| (i as usize * 7 + j) as u8));
    Bytes::from(v)
}

#[tokio::test]
async fn crc_is_checked_on_every_datagram_and_corruption_never_reaches_kcp() {
    let server = Arc::new(
        Endpoint::bind(localhost(), config(8, 2, true))
            .await
            .unwrap(),
    );
    spawn_echo(server.clone());
    let (proxy, corrupted) = corrupting_proxy(server.local_addr(), 25).await;
    let client = Endpoint::bind(localhost(), config(8, 2, false))
        .await
        .unwrap();
    let conn = client.connect(proxy).await.unwrap();
    const MESSAGES: u32 = 400;
    let sender = {
        let conn = conn.clone();
        tokio::spawn(async move {
            for i in 0..MESSAGES {
                conn.send(message(i)).await.unwrap();
            }
        })
    };
    for i in 0..MESSAGES {
        let got = tokio::time::timeout(Duration::from_secs(20), conn.recv())
            .await
            .unwrap()
            .unwrap()
            .unwrap();
        assert_eq!(got, message(i), "echo {i}");
    }
    sender.await.unwrap();
    assert!(corrupted.load(Ordering::Relaxed) > 20);
    let client_stats = conn.stats();
    let server_stats = server.connection_stats()[0];
    for (side, s) in [("client", client_stats), ("server", server_stats)] {
        let fec = s.fec.unwrap();
        assert!(
            fec.decoder.malformed > 0,
            "{side}: no CRC drop counted: {fec:?}"
        );
        assert_eq!(
            s.kcp.input_errors, 0,
            "{side}: a corrupted datagram reached KCP"
        );
        assert_eq!(
            s.input_errors, fec.decoder.malformed,
            "{side}: inputs refused"
        );
    }
    let dropped =
        client_stats.fec.unwrap().decoder.malformed + server_stats.fec.unwrap().decoder.malformed;
    assert_eq!(
        dropped,
        corrupted.load(Ordering::Relaxed),
        "every corrupted datagram dropped"
    );
}

#[tokio::test]
async fn a_new_peer_with_a_bad_crc_opens_nothing() {
    let server = Endpoint::bind(localhost(), config(10, 3, true))
        .await
        .unwrap();
    let raw = UdpSocket::bind(localhost()).await.unwrap();
    // 20-byte crypt header with a wrong CRC, then an FEC data shard holding a KCP header.
    let mut dg = vec![7u8; 16];
    dg.extend_from_slice(&[0, 0, 0, 0]);
    dg.extend_from_slice(&0u32.to_le_bytes());
    dg.extend_from_slice(&0xF1u16.to_le_bytes());
    dg.extend_from_slice(&26u16.to_le_bytes());
    dg.extend_from_slice(&[1; 24]);
    raw.send_to(&dg, server.local_addr()).await.unwrap();
    let deadline = Instant::now() + Duration::from_secs(5);
    while server.handshake_stats().unwrap().dropped_malformed == 0 {
        assert!(Instant::now() < deadline, "{:?}", server.handshake_stats());
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    assert_eq!(server.stats().connections_accepted, 0);
}

#[tokio::test]
async fn a_client_holds_one_connection_per_server() {
    let server = Arc::new(
        Endpoint::bind(localhost(), config(10, 3, true))
            .await
            .unwrap(),
    );
    spawn_echo(server.clone());
    let client = Endpoint::bind(localhost(), config(10, 3, false))
        .await
        .unwrap();
    let first: Connection = client.connect(server.local_addr()).await.unwrap();
    let second = client.connect(server.local_addr()).await;
    assert!(
        matches!(&second, Err(ConnectError::Handshake(m)) if m.contains("one connection per peer")),
        "{second:?}"
    );
    first.send(Bytes::from_static(b"ping")).await.unwrap();
    assert_eq!(first.recv().await.unwrap().unwrap(), &b"ping"[..]);
}

#[tokio::test]
async fn schemes_kcp_go_cannot_run_are_refused_at_bind() {
    let refused = |scheme: FecScheme, crypt_none: bool| async move {
        let mut c = config(10, 3, false);
        c.mode = Mode::KcpGo { crypt_none };
        c.fec.scheme = scheme;
        let err = Endpoint::bind(localhost(), c).await.unwrap_err();
        assert_eq!(err.kind(), std::io::ErrorKind::InvalidInput);
        err.to_string()
    };
    let msg = refused(FecScheme::ADAPTIVE_DEFAULT, true).await;
    assert!(msg.contains("kcp-go framing runs fixed FEC"), "{msg}");
    let msg = refused(FecScheme::None, true).await;
    assert!(msg.contains("kcp-go framing"), "{msg}");
    // Without the crypt header, no FEC is plain KCP: allowed.
    let mut c = config(10, 3, false);
    c.mode = Mode::KcpGo { crypt_none: false };
    c.fec.scheme = FecScheme::None;
    Endpoint::bind(localhost(), c).await.unwrap();
}

/// Petrel at 10+3 against Petrel at 4+2. The server sees the client's 10+3
/// shards and ends with `FecShapeMismatch` naming both shapes. kcp-go mode has
/// no close message, so the server then falls silent: it drops the client's
/// further datagrams, a new connection's included (its shape-mismatch
/// cooldown), instead of opening a new connection for them. The client ends with `FecShapeMismatch` if the
/// server's shards showed it the mismatch, else with `IdleTimeout` (2 s here) —
/// an error within seconds either way, never a stall.
#[tokio::test]
async fn a_mismatched_fec_shape_ends_both_connections_within_seconds() {
    let short_idle = |mut c: EndpointConfig| {
        c.control = ControlConfig {
            keepalive_interval: Duration::from_millis(500),
            idle_timeout: Duration::from_secs(2),
            ..ControlConfig::default()
        };
        c
    };
    let server = Endpoint::bind(localhost(), short_idle(config(4, 2, true)))
        .await
        .unwrap();
    let client = Endpoint::bind(localhost(), short_idle(config(10, 3, false)))
        .await
        .unwrap();
    let conn = client.connect(server.local_addr()).await.unwrap();
    let start = Instant::now();
    let sender = {
        let conn = conn.clone();
        tokio::spawn(async move {
            for i in 0..2000 {
                if conn.send(message(i)).await.is_err() {
                    return;
                }
            }
        })
    };
    let accepted = server.accept().await.unwrap();
    let served = tokio::spawn(async move {
        // Echoes until the connection ends; a failed send ends it too, and the
        // next `recv` (after what is still queued) says why.
        loop {
            match accepted.recv().await {
                Ok(Some(msg)) => {
                    let _ = accepted.send(msg).await;
                }
                other => return other.map(|m| m.map(|b| b.len())),
            }
        }
    });
    let server_err = tokio::time::timeout(Duration::from_secs(10), served)
        .await
        .expect("the server's connection did not end: a silent stall")
        .unwrap();
    let Err(ConnectionError::FecShapeMismatch(m)) = &server_err else {
        panic!("server: expected a shape mismatch, got {server_err:?}");
    };
    eprintln!("server: {m} after {:?}", start.elapsed());
    assert_eq!(
        (m.ours, m.peer_data_shards, m.peer_parity_shards),
        ((4, 2), Some(10), Some(3))
    );
    assert!(
        start.elapsed() < Duration::from_secs(5),
        "{:?}",
        start.elapsed()
    );
    let client_err = loop {
        match tokio::time::timeout(Duration::from_secs(10), conn.recv()).await {
            Ok(Ok(Some(_))) => {}
            Ok(other) => break other.map(|m| m.map(|b| b.len())),
            Err(_) => panic!("the client's connection did not end: a silent stall"),
        }
    };
    eprintln!("client: {client_err:?} after {:?}", start.elapsed());
    match &client_err {
        Err(ConnectionError::FecShapeMismatch(m)) => {
            assert_eq!(m.ours, (10, 3), "{m}");
            assert!(m.peer_data_shards.is_none_or(|d| d == 4), "{m}");
            assert!(m.peer_parity_shards.is_none_or(|p| p == 2), "{m}");
        }
        Err(ConnectionError::IdleTimeout) => {}
        other => panic!("client: expected a shape mismatch or idle timeout, got {other:?}"),
    }
    assert!(
        start.elapsed() < Duration::from_secs(8),
        "{:?}",
        start.elapsed()
    );
    sender.abort();
    // Whether datagrams in flight reach the server after its connection is gone
    // is a race; a new connection from the same address is not: the cooldown
    // drops its datagrams instead of accepting it.
    let again = client.connect(server.local_addr()).await.unwrap();
    again.send(message(0)).await.unwrap();
    let deadline = Instant::now() + Duration::from_secs(2);
    while server.stats().dropped_shape_cooldown == 0 && Instant::now() < deadline {
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    let stats = server.stats();
    assert_eq!(stats.connections_accepted, 1, "{stats:?}");
    assert!(stats.dropped_shape_cooldown > 0, "{stats:?}");
}
