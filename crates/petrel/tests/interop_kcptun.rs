//! Interop with the real kcptun (Debian `kcptun`: kcp-go, its FEC and smux inside)
//! through Petrel's impairment relay at the `random` profile (5 % loss, 10 ms
//! delay, 1 % duplication, 5 % reordered by +15 ms, both ways):
//!
//! - `petrel_client_through_kcptun_server`: a Petrel client (`Mode::KcpGo` +
//!   [`petrel::smux`]) ⇄ relay ⇄ `kcptun-server` ⇄ TCP echo;
//! - `kcptun_client_through_petrel_server`: TCP client ⇄ `kcptun-client` ⇄ relay
//!   ⇄ Petrel server, which echoes every smux stream.
//!
//! Each moves [`TRANSFER`] bytes up and the same bytes back (SHA-256 compared),
//! and asserts FEC recoveries on both sides: Petrel's decoder counter and
//! kcptun's SNMP `FECRecovered`; kcptun's `InCsumErrors` and `KCPInErrors` stay
//! 0 (every CRC and segment Petrel wrote was accepted). Settings on both sides
//! (`support_kcptun`): crypt none, FEC 10+3, MTU 1200, windows 128/512, `fast3`.
//!
//! `speed_against_kcptun` (ignored; `cargo test --release -p petrel --test
//! interop_kcptun -- --ignored --nocapture`) times the same echo for kcptun ⇄
//! kcptun, Petrel client ⇄ kcptun-server and kcptun-client ⇄ Petrel server
//! through the same relay and prints the goodputs.
//!
//! Skipped, with a message on stderr, without the kcptun binaries; with
//! `PETREL_REQUIRE_KCPTUN` set (CI) their absence fails the tests instead.

#![allow(clippy::unwrap_used)] // tests fail loudly on any unexpected error

mod support_kcptun;

use std::collections::HashMap;
use std::path::Path;
use std::sync::atomic::AtomicBool;
use std::sync::Arc;
use std::time::{Duration, Instant};

use petrel::smux::{SmuxConfig, SmuxSession, SmuxStream};
use petrel::{ConnectionStats, Endpoint};
use sha2::{Digest, Sha256};
use support_kcptun::*;

/// Bytes moved each way in the interop tests.
const TRANSFER: usize = 10 << 20;
/// Bound on one transfer, well under a minute.
const LIMIT: Duration = Duration::from_secs(45);

/// What one echo through kcptun showed.
struct Run {
    echoed: Echoed,
    /// Petrel's connection counters after the transfer.
    petrel: ConnectionStats,
    /// kcptun's SNMP counters after the transfer.
    kcptun: HashMap<String, u64>,
}

/// Writes `data` to `stream` while reading the echo back; SHA-256 of the echo.
async fn echo_through(stream: &mut SmuxStream, data: Arc<Vec<u8>>) -> Echoed {
    let start = Instant::now();
    let writer = stream.writer();
    let total = data.len();
    let write = tokio::spawn(async move {
        for chunk in data.chunks(64 * 1024) {
            writer.write(chunk).await.unwrap();
        }
    });
    let mut hasher = Sha256::new();
    let mut got = 0;
    while got < total {
        let chunk = tokio::time::timeout(LIMIT.saturating_sub(start.elapsed()), stream.read())
            .await
            .unwrap_or_else(|_| panic!("echo: {got} of {total} bytes after {LIMIT:?}"))
            .unwrap()
            .unwrap_or_else(|| panic!("stream ended after {got} of {total} bytes"));
        hasher.update(&chunk);
        got += chunk.len();
    }
    let elapsed = start.elapsed();
    write.await.unwrap();
    Echoed {
        bytes: got,
        sha256: hasher.finalize().into(),
        elapsed,
    }
}

/// A Petrel client pushes `data` through `kcptun-server` (whose target echoes)
/// via the relay.
async fn petrel_client_run(server_bin: &Path, data: Arc<Vec<u8>>, seed: u64) -> Run {
    let dir = scratch_dir("petrelclient");
    let stop = Arc::new(AtomicBool::new(false));
    let (echo, echo_thread) = echo_server(stop.clone());
    let stop_echo = StopOnDrop(stop);
    let port = free_udp_port();
    let listen = format!("127.0.0.1:{port}");
    let (server, snmp) = spawn_kcptun(
        server_bin,
        &["-l", &listen, "-t", &echo.to_string()],
        &dir,
        "server",
    );
    wait_listener("udp", port, Duration::from_secs(5));
    let relay = random_relay(listen.parse().unwrap(), seed);

    let endpoint = Endpoint::bind("127.0.0.1:0".parse().unwrap(), petrel_config(false))
        .await
        .unwrap();
    let conn = endpoint.connect(relay.local_addr()).await.unwrap();
    let session = SmuxSession::client(conn.clone(), SmuxConfig::default()).unwrap();
    let mut stream = session.open().await.unwrap();
    let echoed = echo_through(&mut stream, data).await;
    stream.close().await.unwrap();
    let petrel = conn.stats();
    let kcptun = snmp_row_after(&snmp, unix_now());
    relay.stop().unwrap();
    drop(server);
    drop(stop_echo);
    echo_thread.join().unwrap();
    let _ = std::fs::remove_dir_all(&dir);
    Run {
        echoed,
        petrel,
        kcptun,
    }
}

/// Serves `endpoint`: every smux stream of every connection is echoed.
fn serve_echo(endpoint: Arc<Endpoint>) -> tokio::task::JoinHandle<()> {
    tokio::spawn(async move {
        while let Some(conn) = endpoint.accept().await {
            tokio::spawn(async move {
                let session = SmuxSession::server(conn, SmuxConfig::default()).unwrap();
                while let Some(mut stream) = session.accept().await {
                    tokio::spawn(async move {
                        while let Ok(Some(chunk)) = stream.read().await {
                            if stream.write(&chunk).await.is_err() {
                                return;
                            }
                        }
                        let _ = stream.close().await;
                    });
                }
            });
        }
    })
}

/// A TCP client pushes `data` through `kcptun-client` via the relay to a Petrel
/// server that echoes it.
async fn kcptun_client_run(client_bin: &Path, data: Arc<Vec<u8>>, seed: u64) -> Run {
    let dir = scratch_dir("kcptunclient");
    let endpoint = Arc::new(
        Endpoint::bind("127.0.0.1:0".parse().unwrap(), petrel_config(true))
            .await
            .unwrap(),
    );
    let server = serve_echo(endpoint.clone());
    let relay = random_relay(endpoint.local_addr(), seed);
    let port = free_tcp_port();
    let local = format!("127.0.0.1:{port}");
    let (client, snmp) = spawn_kcptun(
        client_bin,
        &["-l", &local, "-r", &relay.local_addr().to_string()],
        &dir,
        "client",
    );
    wait_listener("tcp", port, Duration::from_secs(5));
    let addr = local.parse().unwrap();
    let echoed = tokio::task::spawn_blocking(move || tcp_echo_roundtrip(addr, data, LIMIT))
        .await
        .unwrap();
    let stats = endpoint.connection_stats();
    assert_eq!(stats.len(), 1, "one kcp-go session from kcptun-client");
    let kcptun = snmp_row_after(&snmp, unix_now());
    drop(client);
    relay.stop().unwrap();
    server.abort();
    let _ = std::fs::remove_dir_all(&dir);
    Run {
        echoed,
        petrel: stats[0],
        kcptun,
    }
}

/// What every run must show: the echo is exact, kcptun accepted all Petrel
/// wrote, and both sides rebuilt datagrams from the other's parity.
fn check(name: &str, run: &Run, expected: [u8; 32]) {
    assert_eq!(run.echoed.bytes, TRANSFER);
    assert_eq!(
        run.echoed.sha256, expected,
        "{name}: echo differs from what was sent"
    );
    for counter in ["InCsumErrors", "KCPInErrors"] {
        assert_eq!(
            run.kcptun.get(counter),
            Some(&0),
            "{name}: kcptun {counter}: {:?}",
            run.kcptun
        );
    }
    let fec = run.petrel.fec.expect("the connection runs FEC");
    assert_eq!(fec.decoder.malformed, 0, "{name}: {fec:?}");
    assert!(
        fec.decoder.shards_recovered > 0,
        "{name}: Petrel rebuilt nothing from kcptun's parity: {fec:?}"
    );
    assert!(
        run.kcptun["FECRecovered"] > 0,
        "{name}: kcptun rebuilt nothing from Petrel's parity: {:?}",
        run.kcptun
    );
    eprintln!(
        "{name}: {} B each way in {:?} ({:.2} MB/s); petrel recovered {} shards, \
         retransmitted {} + {} fast; kcptun FECRecovered {}, RetransSegs {}",
        run.echoed.bytes,
        run.echoed.elapsed,
        run.echoed.bytes as f64 / run.echoed.elapsed.as_secs_f64() / 1e6,
        fec.decoder.shards_recovered,
        run.petrel.kcp.retransmissions_timeout,
        run.petrel.kcp.retransmissions_fast,
        run.kcptun["FECRecovered"],
        run.kcptun.get("RetransSegs").copied().unwrap_or(0),
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn petrel_client_through_kcptun_server() {
    let Some(bin) = kcptun("kcptun-server") else {
        return;
    };
    let (data, hash) = payload(TRANSFER, 1);
    let run = petrel_client_run(&bin, Arc::new(data), 11).await;
    check("petrel client -> kcptun-server", &run, hash);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kcptun_client_through_petrel_server() {
    let Some(bin) = kcptun("kcptun-client") else {
        return;
    };
    let (data, hash) = payload(TRANSFER, 2);
    let run = kcptun_client_run(&bin, Arc::new(data), 12).await;
    check("kcptun-client -> petrel server", &run, hash);
}

/// Checks a shape-mismatch error: ours as configured, the peer's 10+3 if named.
fn check_mismatch(side: &str, err: &petrel::ConnectionError, elapsed: Duration) {
    let petrel::ConnectionError::FecShapeMismatch(m) = err else {
        panic!("{side}: expected a shape mismatch, got {err:?}");
    };
    eprintln!("{side}: {m} after {elapsed:?}");
    assert_eq!(m.ours, (4, 2), "{side}: {m}");
    assert!(
        m.peer_data_shards
            .is_none_or(|d| d == u32::from(DATA_SHARDS)),
        "{side}: {m}"
    );
    assert!(
        m.peer_parity_shards
            .is_none_or(|p| p == u32::from(PARITY_SHARDS)),
        "{side}: {m}"
    );
    assert!(
        elapsed < Duration::from_secs(5),
        "{side}: detected after {elapsed:?}"
    );
}

/// Petrel at 4+2 against kcptun at 10+3 (no relay): the Petrel side's connection
/// ends with `FecShapeMismatch` within seconds, whichever side opened it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn mismatched_shape_against_kcptun_is_a_clear_error() {
    let (Some(client_bin), Some(server_bin)) = (kcptun("kcptun-client"), kcptun("kcptun-server"))
    else {
        return;
    };
    let dir = scratch_dir("mismatch");
    let (data, _) = payload(1 << 20, 4);

    // Petrel client -> kcptun-server.
    let stop = Arc::new(AtomicBool::new(false));
    let (echo, echo_thread) = echo_server(stop.clone());
    let stop_echo = StopOnDrop(stop);
    let port = free_udp_port();
    let listen = format!("127.0.0.1:{port}");
    let (server, _) = spawn_kcptun(
        &server_bin,
        &["-l", &listen, "-t", &echo.to_string()],
        &dir,
        "server",
    );
    wait_listener("udp", port, Duration::from_secs(5));
    let endpoint = Endpoint::bind(
        "127.0.0.1:0".parse().unwrap(),
        petrel_config_shaped(false, 4, 2),
    )
    .await
    .unwrap();
    let start = Instant::now();
    let conn = endpoint.connect(listen.parse().unwrap()).await.unwrap();
    let session = SmuxSession::client(conn.clone(), SmuxConfig::default()).unwrap();
    let mut stream = session.open().await.unwrap();
    let writer = stream.writer();
    let up = data.clone();
    tokio::spawn(async move {
        for chunk in up.chunks(64 * 1024) {
            if writer.write(chunk).await.is_err() {
                return;
            }
        }
    });
    let err = loop {
        match tokio::time::timeout(Duration::from_secs(10), stream.read()).await {
            Ok(Ok(Some(_))) => {}
            Ok(Err(petrel::smux::SmuxError::Connection(e))) => break e,
            Ok(other) => panic!("petrel client: expected a connection error, got {other:?}"),
            Err(_) => panic!("petrel client: no error after 10 s, a silent stall"),
        }
    };
    check_mismatch("petrel client -> kcptun-server", &err, start.elapsed());
    drop(server);
    drop(stop_echo);
    echo_thread.join().unwrap();

    // kcptun-client -> Petrel server.
    let endpoint = Endpoint::bind(
        "127.0.0.1:0".parse().unwrap(),
        petrel_config_shaped(true, 4, 2),
    )
    .await
    .unwrap();
    let tcp_port = free_tcp_port();
    let local = format!("127.0.0.1:{tcp_port}");
    let (client, _) = spawn_kcptun(
        &client_bin,
        &["-l", &local, "-r", &endpoint.local_addr().to_string()],
        &dir,
        "client",
    );
    wait_listener("tcp", tcp_port, Duration::from_secs(5));
    let start = Instant::now();
    let addr: std::net::SocketAddr = local.parse().unwrap();
    // The TCP side only feeds kcptun-client; the echo never comes back.
    let feeder = std::thread::spawn(move || {
        use std::io::Write;
        let mut s = std::net::TcpStream::connect(addr).unwrap();
        s.set_write_timeout(Some(Duration::from_secs(10))).unwrap();
        for chunk in data.chunks(64 * 1024) {
            if s.write_all(chunk).is_err() {
                return;
            }
        }
        // Keeps the stream open while the server detects the mismatch.
        std::thread::sleep(Duration::from_secs(2));
    });
    let conn = tokio::time::timeout(Duration::from_secs(5), endpoint.accept())
        .await
        .unwrap()
        .unwrap();
    let err = loop {
        match tokio::time::timeout(Duration::from_secs(10), conn.recv()).await {
            Ok(Ok(Some(_))) => {}
            Ok(Err(e)) => break e,
            Ok(Ok(None)) => panic!("petrel server: closed without an error"),
            Err(_) => panic!("petrel server: no error after 10 s, a silent stall"),
        }
    };
    check_mismatch("kcptun-client -> petrel server", &err, start.elapsed());
    drop(client);
    feeder.join().unwrap();
    let _ = std::fs::remove_dir_all(&dir);
}

/// kcptun-client ⇄ relay ⇄ kcptun-server ⇄ TCP echo: the baseline.
fn kcptun_pair_run(client_bin: &Path, server_bin: &Path, data: Arc<Vec<u8>>, seed: u64) -> Echoed {
    let dir = scratch_dir("kcptunpair");
    let stop = Arc::new(AtomicBool::new(false));
    let (echo, echo_thread) = echo_server(stop.clone());
    let stop_echo = StopOnDrop(stop);
    let port = free_udp_port();
    let listen = format!("127.0.0.1:{port}");
    let (server, _) = spawn_kcptun(
        server_bin,
        &["-l", &listen, "-t", &echo.to_string()],
        &dir,
        "server",
    );
    wait_listener("udp", port, Duration::from_secs(5));
    let relay = random_relay(listen.parse().unwrap(), seed);
    let tcp_port = free_tcp_port();
    let local = format!("127.0.0.1:{tcp_port}");
    let (client, _) = spawn_kcptun(
        client_bin,
        &["-l", &local, "-r", &relay.local_addr().to_string()],
        &dir,
        "client",
    );
    wait_listener("tcp", tcp_port, Duration::from_secs(5));
    let echoed = tcp_echo_roundtrip(local.parse().unwrap(), data, LIMIT);
    drop(client);
    relay.stop().unwrap();
    drop(server);
    drop(stop_echo);
    echo_thread.join().unwrap();
    let _ = std::fs::remove_dir_all(&dir);
    echoed
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "speed comparison: run with --release -- --ignored --nocapture"]
async fn speed_against_kcptun() {
    let (Some(client_bin), Some(server_bin)) = (kcptun("kcptun-client"), kcptun("kcptun-server"))
    else {
        return;
    };
    const ROUNDS: u64 = 5;
    let mbps = |e: &Echoed| e.bytes as f64 / e.elapsed.as_secs_f64() / 1e6;
    let (data, hash) = payload(TRANSFER, 3);
    let data = Arc::new(data);
    let mut rows: Vec<(&str, Vec<f64>)> = vec![
        ("kcptun-client <-> kcptun-server", Vec::new()),
        ("petrel client <-> kcptun-server", Vec::new()),
        ("kcptun-client <-> petrel server", Vec::new()),
    ];
    for round in 0..ROUNDS {
        let seed = 100 + round;
        let (c, s, d) = (client_bin.clone(), server_bin.clone(), data.clone());
        let e = tokio::task::spawn_blocking(move || kcptun_pair_run(&c, &s, d, seed))
            .await
            .unwrap();
        assert_eq!(e.sha256, hash);
        rows[0].1.push(mbps(&e));
        let run = petrel_client_run(&server_bin, data.clone(), seed).await;
        assert_eq!(run.echoed.sha256, hash);
        rows[1].1.push(mbps(&run.echoed));
        let run = kcptun_client_run(&client_bin, data.clone(), seed).await;
        assert_eq!(run.echoed.sha256, hash);
        rows[2].1.push(mbps(&run.echoed));
    }
    eprintln!(
        "echo of {TRANSFER} B each way through the `random` relay, {ROUNDS} rounds \
         (MB/s per direction; crypt none, FEC {DATA_SHARDS}+{PARITY_SHARDS}, MTU {MTU}, \
         windows {SND_WND}/{RCV_WND}, {PRESET}):"
    );
    for (name, v) in &rows {
        let mut s = v.clone();
        s.sort_by(f64::total_cmp);
        eprintln!("  {name}: median {:.2}, runs {v:.2?}", s[s.len() / 2]);
    }
}
