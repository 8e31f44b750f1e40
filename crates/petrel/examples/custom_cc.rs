//! A congestion controller written outside Petrel and plugged into a connection:
//! a plain AIMD window (start at 4 datagrams, grow by one datagram per window
//! acknowledged, halve once per round trip on loss, never below 2 datagrams),
//! driven by the ARQ's events through the public `CongestionController` trait,
//! built per connection by a `ControllerFactory` set in `KcpConfig::controller`.
//!
//! Run with `cargo run -p petrel --example custom_cc` (a 1 MB transfer through
//! the in-process emulator at 5 % loss and 10 ms one way; a few seconds,
//! loopback only). In your own crate, depend on `petrel-proto` as well as
//! `petrel`: the trait lives in `petrel_proto::cc`. It prints what the
//! controller saw: acks, losses, its smallest and largest window.
//!
//! A built-in controller, selectable by name (`--cc`), is added inside
//! `petrel-proto` instead; the guide's contributor chapter lists the steps.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use bytes::Bytes;
use petrel::{Endpoint, EndpointConfig, KcpConfig};
use petrel_netem::{Profile, Relay, RelayConfig};
use petrel_proto::cc::{
    AckEvent, CongestionController, ControllerFactory, ControllerParams, LossEvent, SentEvent,
};

/// Bytes transferred.
const TRANSFER_BYTES: usize = 1_000_000;

type Error = Box<dyn std::error::Error + Send + Sync>;

/// Counters every controller the factory built adds to, shared with `main`.
#[derive(Debug, Default)]
struct Seen {
    acks: AtomicU64,
    losses: AtomicU64,
    reductions: AtomicU64,
    min_cwnd: AtomicU64,
    max_cwnd: AtomicU64,
}

/// Additive increase, multiplicative decrease, in bytes.
#[derive(Debug)]
struct Aimd {
    cwnd: u64,
    mss: u64,
    /// Bytes acknowledged since the window last grew.
    acked_since_growth: u64,
    /// Losses of segments sent before this instant belong to a reduction already
    /// made (one halving per round trip).
    recovery_start: Option<Instant>,
    seen: Arc<Seen>,
}

impl Aimd {
    fn new(mss: u64, seen: Arc<Seen>) -> Self {
        Self {
            cwnd: 4 * mss,
            mss,
            acked_since_growth: 0,
            recovery_start: None,
            seen,
        }
    }

    fn record_window(&self) {
        self.seen.min_cwnd.fetch_min(self.cwnd, Ordering::Relaxed);
        self.seen.max_cwnd.fetch_max(self.cwnd, Ordering::Relaxed);
    }
}

impl CongestionController for Aimd {
    fn on_sent(&mut self, _event: &SentEvent) {}

    fn on_ack(&mut self, event: &AckEvent) {
        self.seen.acks.fetch_add(1, Ordering::Relaxed);
        self.acked_since_growth += event.acked_bytes;
        if self.acked_since_growth >= self.cwnd {
            self.acked_since_growth -= self.cwnd;
            self.cwnd += self.mss;
            self.record_window();
        }
    }

    fn on_loss(&mut self, event: &LossEvent) {
        self.seen.losses.fetch_add(1, Ordering::Relaxed);
        if self
            .recovery_start
            .is_some_and(|start| event.sent_time < start)
        {
            return; // already halved for this round trip
        }
        self.recovery_start = Some(event.now);
        self.cwnd = (self.cwnd / 2).max(2 * self.mss);
        self.acked_since_growth = 0;
        self.seen.reductions.fetch_add(1, Ordering::Relaxed);
        self.record_window();
    }

    fn cwnd(&self) -> u64 {
        self.cwnd
    }

    fn pacing_rate(&self) -> Option<u64> {
        None // send what the window allows at once
    }

    fn send_quantum(&self) -> u64 {
        u64::MAX // no pacer, so no burst limit
    }

    fn set_max_datagram_size(&mut self, max_datagram_size: u64) {
        self.mss = max_datagram_size;
        self.cwnd = self.cwnd.max(2 * self.mss);
    }

    fn name(&self) -> &'static str {
        "aimd"
    }
}

/// Builds one [`Aimd`] per connection.
#[derive(Debug, Default)]
struct AimdFactory {
    seen: Arc<Seen>,
}

impl ControllerFactory for AimdFactory {
    fn build(&self, _now: Instant, params: &ControllerParams) -> Box<dyn CongestionController> {
        let aimd = Aimd::new(params.max_datagram_size, Arc::clone(&self.seen));
        aimd.record_window();
        Box::new(aimd)
    }

    fn name(&self) -> &str {
        "aimd"
    }
}

/// Sends [`TRANSFER_BYTES`] through an emulated lossy link with the AIMD
/// controller on the sender; returns what the controller saw and the bytes the
/// server received.
async fn run() -> Result<(Arc<Seen>, usize), Error> {
    // `KcpConfig` is `Copy`, so it holds a `&'static` factory: a `static`, or one
    // leaked once per configuration (not per connection).
    let factory: &'static AimdFactory = Box::leak(Box::new(AimdFactory {
        seen: Arc::new(Seen {
            min_cwnd: AtomicU64::new(u64::MAX),
            ..Seen::default()
        }),
    }));

    let server = Endpoint::bind("127.0.0.1:0".parse()?, EndpointConfig::server()).await?;
    let server_addr = server.local_addr();
    let receiver = tokio::spawn(async move {
        let conn = server.accept().await.ok_or("server endpoint closed")?;
        let mut received = 0;
        while let Some(msg) = conn.recv().await? {
            received += msg.len();
        }
        Ok::<_, Error>(received)
    });
    let mut relay_config = RelayConfig::new("127.0.0.1:0".parse()?, server_addr);
    relay_config.route = Profile::Random.route();
    let relay = Relay::start(relay_config)?;

    let client = Endpoint::bind(
        "127.0.0.1:0".parse()?,
        EndpointConfig {
            kcp: KcpConfig::default().with_controller(factory),
            ..EndpointConfig::default()
        },
    )
    .await?;
    let conn = client.connect(relay.local_addr()).await?;
    let chunk = Bytes::from(vec![7u8; 10_000]);
    for _ in 0..TRANSFER_BYTES / chunk.len() {
        conn.send(chunk.clone()).await?;
    }
    conn.close().await?;
    let received = receiver.await??;
    relay.stop()?;

    let seen = Arc::clone(&factory.seen);
    println!(
        "controller {:?}: {} acks, {} losses, {} halvings, window {}..{} bytes; {} bytes delivered",
        factory.name(),
        seen.acks.load(Ordering::Relaxed),
        seen.losses.load(Ordering::Relaxed),
        seen.reductions.load(Ordering::Relaxed),
        seen.min_cwnd.load(Ordering::Relaxed),
        seen.max_cwnd.load(Ordering::Relaxed),
        received,
    );
    Ok((seen, received))
}

#[tokio::main]
async fn main() -> Result<(), Error> {
    tokio::time::timeout(Duration::from_secs(60), run()).await??;
    Ok(())
}

#[cfg(test)]
#[allow(clippy::unwrap_used)] // a test fails loudly
mod tests {
    use std::sync::atomic::Ordering;

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn the_plugged_in_controller_drives_the_window() {
        let (seen, received) = super::run().await.expect("the transfer completes");
        assert_eq!(received, super::TRANSFER_BYTES);
        assert!(seen.acks.load(Ordering::Relaxed) > 0);
        assert!(seen.losses.load(Ordering::Relaxed) > 0, "no loss at 5 %");
        assert!(seen.reductions.load(Ordering::Relaxed) > 0);
        let (min, max) = (
            seen.min_cwnd.load(Ordering::Relaxed),
            seen.max_cwnd.load(Ordering::Relaxed),
        );
        assert!(min < max, "the window never moved: {min}..{max}");
    }
}
