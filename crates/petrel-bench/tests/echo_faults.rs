//! The harness catches faults: a wrapper transport corrupts, drops or
//! duplicates messages on top of real loopback sockets, and the run must
//! count them and refuse `ok`.

#![allow(clippy::unwrap_used)]

use std::io;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use bytes::Bytes;
use petrel_bench::echo::tcp::TcpTransport;
use petrel_bench::echo::udp::UdpTransport;
use petrel_bench::echo::{run_echo, EchoClient, EchoConfig, EchoReport, EchoServer, EchoTransport};

#[derive(Debug, Clone, Copy)]
enum Fault {
    /// Flip one body byte of every 50th echo.
    Corrupt,
    /// Silently skip sending the 20th message.
    DropOne,
    /// Send the 20th message twice.
    Duplicate,
    /// Turn the 10th echo's phase byte from warm-up into measured.
    FlipPhase,
}

struct Faulty<T> {
    inner: T,
    fault: Fault,
}

struct FaultyClient<C> {
    inner: C,
    fault: Fault,
    sends: AtomicU64,
    recvs: AtomicU64,
}

impl<T: EchoTransport> EchoTransport for Faulty<T> {
    type Client = FaultyClient<T::Client>;

    fn name(&self) -> &'static str {
        self.inner.name()
    }

    fn reliable(&self) -> bool {
        self.inner.reliable()
    }

    async fn start_server(&self) -> io::Result<EchoServer> {
        self.inner.start_server().await
    }

    async fn connect(&self, server: SocketAddr, id: u32) -> io::Result<Self::Client> {
        Ok(FaultyClient {
            inner: self.inner.connect(server, id).await?,
            fault: self.fault,
            sends: AtomicU64::new(0),
            recvs: AtomicU64::new(0),
        })
    }
}

impl<C: EchoClient> EchoClient for FaultyClient<C> {
    async fn send(&self, msg: Bytes) -> io::Result<()> {
        let n = self.sends.fetch_add(1, Ordering::Relaxed);
        match self.fault {
            Fault::DropOne if n == 20 => Ok(()),
            Fault::Duplicate if n == 20 => {
                self.inner.send(msg.clone()).await?;
                self.inner.send(msg).await
            }
            _ => self.inner.send(msg).await,
        }
    }

    async fn recv(&self) -> io::Result<Bytes> {
        let msg = self.inner.recv().await?;
        let n = self.recvs.fetch_add(1, Ordering::Relaxed);
        if matches!(self.fault, Fault::Corrupt) && n % 50 == 49 {
            let mut bytes = msg.to_vec();
            bytes[100] ^= 0xFF;
            return Ok(Bytes::from(bytes));
        }
        if matches!(self.fault, Fault::FlipPhase) && n == 9 {
            let mut bytes = msg.to_vec();
            bytes[2] ^= 1;
            return Ok(Bytes::from(bytes));
        }
        Ok(msg)
    }
}

fn cfg() -> EchoConfig {
    EchoConfig {
        payload: 256,
        clients: 1,
        window: 4,
        warmup: Duration::ZERO,
        measured: Duration::from_millis(300),
        rounds: 1,
    }
}

async fn run<T: EchoTransport>(inner: T, fault: Fault) -> EchoReport {
    run_echo(&Faulty { inner, fault }, &cfg(), "faulty")
        .await
        .unwrap()
}

#[tokio::test]
async fn corrupted_echoes_are_content_errors() {
    let report = run(TcpTransport, Fault::Corrupt).await;
    let e = report.rounds[0].errors;
    assert!(!report.record.ok);
    assert!(e.content > 0, "{e:?}");
    // A corrupted echo never frees its slot; with window 4, four of them
    // stall the client, and what is left over is unfinished (TCP).
    assert!(e.unfinished > 0, "{e:?}");
    assert_eq!(report.record.errors["content"], e.content);
}

#[tokio::test]
async fn a_lost_udp_message_is_lost_and_bounded_by_the_drain_limit() {
    let started = Instant::now();
    let report = run(UdpTransport::default(), Fault::DropOne).await;
    let e = report.rounds[0].errors;
    assert!(!report.record.ok);
    assert_eq!((e.lost, e.drain_timeouts, e.unfinished), (1, 1, 0), "{e:?}");
    assert!(report.rounds[0].drain_s <= 2.0);
    assert!(started.elapsed() < Duration::from_secs(4));
}

#[tokio::test]
async fn a_duplicated_echo_is_unexpected() {
    let report = run(UdpTransport::default(), Fault::Duplicate).await;
    let e = report.rounds[0].errors;
    assert!(!report.record.ok);
    assert_eq!(e.unexpected, 1, "{e:?}");
    assert_eq!(e.lost, 0, "{e:?}");
}

#[tokio::test]
async fn a_flipped_phase_is_a_content_error() {
    let cfg = EchoConfig {
        warmup: Duration::from_millis(100),
        ..cfg()
    };
    let faulty = Faulty {
        inner: TcpTransport,
        fault: Fault::FlipPhase,
    };
    let report = run_echo(&faulty, &cfg, "faulty").await.unwrap();
    let e = report.rounds[0].errors;
    assert!(!report.record.ok);
    assert_eq!((e.content, e.unfinished), (1, 1), "{e:?}");
}
