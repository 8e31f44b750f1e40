//! Lost wake-ups after a short `recvmmsg` batch (`RecvBatch::drained`): the
//! driver tells tokio `WouldBlock` after a read that fell short of its batch and
//! sleeps without the read that would return `EAGAIN`. If a datagram could be
//! left in the socket queue while the readiness was cleared, it would sit there
//! until the next arrival. Each round here sends a burst (sizes straddling the
//! 2- and 32-slot batches, zero-length, near-64 KiB, GSO trains read as GRO
//! trains, from many source ports, the last datagram sometimes late so that it
//! lands during the driver's read) and then goes quiet: the server's
//! `datagrams_received` must reach the total with no further traffic.

#![allow(clippy::unwrap_used)]

mod raw_peer;

use std::net::SocketAddr;
use std::time::{Duration, Instant};

use petrel::{Endpoint, EndpointConfig};
use petrel_sys::SendBatch;
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;

static SERIAL: tokio::sync::Mutex<()> = tokio::sync::Mutex::const_new(());

fn localhost() -> SocketAddr {
    "127.0.0.1:0".parse().unwrap()
}

fn udp_rcvbuf_errors() -> u64 {
    let s = std::fs::read_to_string("/proc/net/snmp").unwrap_or_default();
    let mut lines = s.lines().filter(|l| l.starts_with("Udp:"));
    let (Some(h), Some(v)) = (lines.next(), lines.next()) else {
        return 0;
    };
    h.split_whitespace()
        .zip(v.split_whitespace())
        .find(|(k, _)| *k == "RcvbufErrors")
        .and_then(|(_, v)| v.parse().ok())
        .unwrap_or(0)
}

/// Runs `rounds` bursts at an endpoint bound with `config`; returns the slowest
/// catch-up. Panics naming the round whose datagrams were left unread.
async fn bursts(config: EndpointConfig, rounds: usize, seed: u64) -> Duration {
    bursts_with(config, rounds, seed, false).await
}

/// With `icmp`, some datagrams are INITIALs from sockets closed at once: the
/// server's RETRY to them comes back as ICMP port unreachable.
async fn bursts_with(config: EndpointConfig, rounds: usize, seed: u64, icmp: bool) -> Duration {
    let server = Endpoint::bind(localhost(), config).await.unwrap();
    let addr = server.local_addr();
    let reader = server.stats_reader();
    let rcvbuf_before = udp_rcvbuf_errors();
    let handle = tokio::task::spawn_blocking(move || {
        let mut rng = ChaCha8Rng::seed_from_u64(seed);
        let socks: Vec<std::net::UdpSocket> = (0..16)
            .map(|_| std::net::UdpSocket::bind(localhost()).unwrap())
            .collect();
        let mut gso = SendBatch::new(64);
        gso.set_gso(true);
        let mut expected = 0u64;
        let mut slowest = Duration::ZERO;
        let big = vec![0xEEu8; 65_000];
        for round in 0..rounds {
            let n = match rng.gen_range(0..6) {
                0 => rng.gen_range(1..=3),
                1 => rng.gen_range(30..=34),
                2 => rng.gen_range(62..=66),
                _ => rng.gen_range(1..=100),
            };
            let late = rng.gen_bool(0.5);
            for i in 0..n {
                let sock = &socks[rng.gen_range(0..socks.len())];
                if late && i + 1 == n {
                    // Spin a few µs: the last one arrives while the driver reads.
                    let until = Instant::now() + Duration::from_micros(rng.gen_range(0..60));
                    while Instant::now() < until {
                        std::hint::spin_loop();
                    }
                }
                match rng.gen_range(0..10) {
                    9 if icmp => {
                        let gone = std::net::UdpSocket::bind(localhost()).unwrap();
                        gone.send_to(&raw_peer::initial(rng.gen()), addr).unwrap();
                        drop(gone);
                        expected += 1;
                    }
                    0 => {
                        sock.send_to(&[], addr).unwrap();
                        expected += 1;
                    }
                    1 => {
                        sock.send_to(&big[..rng.gen_range(30_000..65_000)], addr)
                            .unwrap();
                        expected += 1;
                    }
                    2 => {
                        // A train of equal segments: read as one GRO train.
                        let size = rng.gen_range(1..1500);
                        let count = rng.gen_range(2..=64usize.min(60_000 / size).max(2));
                        let first: u8 = rng.gen();
                        let train: Vec<Vec<u8>> = (0..count).map(|_| vec![first; size]).collect();
                        let sent = gso.send_train(sock, Some(addr), &train).unwrap();
                        expected += sent as u64;
                    }
                    _ => {
                        let len = rng.gen_range(1..200);
                        let mut dg = vec![0u8; len];
                        rng.fill(&mut dg[..]);
                        sock.send_to(&dg, addr).unwrap();
                        expected += 1;
                    }
                }
            }
            let t = Instant::now();
            loop {
                let got = reader.stats().map(|s| s.datagrams_received).unwrap_or(0);
                if got >= expected {
                    break;
                }
                if t.elapsed() > Duration::from_secs(2) {
                    let lost = udp_rcvbuf_errors() - rcvbuf_before;
                    panic!(
                        "round {round} (burst {n}, late {late}): {got} of {expected} read \
                         after 2 s of quiet; kernel RcvbufErrors since start {lost}; {:?}",
                        reader.stats()
                    );
                }
                std::thread::sleep(Duration::from_micros(50));
            }
            slowest = slowest.max(t.elapsed());
            if rng.gen_bool(0.3) {
                // Let the driver fall asleep.
                std::thread::sleep(Duration::from_micros(rng.gen_range(0..500)));
            }
        }
        (expected, slowest)
    });
    let (expected, slowest) = handle.await.unwrap();
    let stats = server.stats();
    eprintln!("{expected} datagrams, slowest catch-up {slowest:?}; {stats:?}");
    assert_eq!(stats.datagrams_received, expected);
    slowest
}

/// A server with room for a burst in its receive buffer.
fn server(io_threads: usize, gro: bool) -> EndpointConfig {
    EndpointConfig {
        recv_buffer: Some(8 << 20),
        io_threads,
        gro,
        ..EndpointConfig::server()
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bursts_then_quiet_are_read_in_full_one_shard() {
    let _serial = SERIAL.lock().await;
    bursts(server(1, true), 1000, 1).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bursts_then_quiet_are_read_in_full_two_shards() {
    let _serial = SERIAL.lock().await;
    bursts(server(2, true), 1000, 2).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bursts_then_quiet_are_read_in_full_without_gro() {
    let _serial = SERIAL.lock().await;
    bursts(server(1, false), 600, 3).await;
}

#[tokio::test(flavor = "current_thread")]
async fn bursts_then_quiet_are_read_in_full_current_thread() {
    let _serial = SERIAL.lock().await;
    bursts(server(1, true), 500, 4).await;
}

/// ICMP port unreachable for the server's replies (its sockets are unconnected
/// and without IP_RECVERR, so no socket error may cut a batch short).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bursts_then_quiet_are_read_in_full_under_icmp_errors() {
    let _serial = SERIAL.lock().await;
    bursts_with(server(2, true), 600, 5, true).await;
}
