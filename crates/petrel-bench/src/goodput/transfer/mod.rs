//! One transfer of one repetition: a server that receives and verifies, the emulated
//! link between (with `p2p`), a client that sends, and what each side counted.
//!
//! Every transport follows the same shape: bind the server on loopback, put the relay
//! in front of it if the profile asks, connect the client to the relay (or the
//! server), send [`GoodputConfig::size_bytes`] of the [`pattern`](super::pattern) in
//! chunks of [`CHUNK`] bytes, and let the server time the first and last byte it
//! reads. The client's start (before connecting) is the start of the wall time.
//!
//! The QUIC peer pairs ([`aioquic`], [`ngtcp2`]) run the other way, as the
//! programs do it: the client downloads a file of the pattern from the server; a
//! child-process client is timed by its download file's growth and the file is
//! checked afterwards.

mod aioquic;
mod hq_interop;
mod ngtcp2;
pub(crate) mod peer;
mod quic;
mod rtt;
pub(crate) mod rudp;
mod tcp;

use std::net::{Ipv4Addr, SocketAddr};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use petrel_netem::{LinkConfig, Relay, RelayConfig, RelayStats, RouteCapacity, RouteConfig};

use super::config::{GoodputConfig, GoodputProfile, GoodputTransport};
use super::pattern::Verifier;
use crate::measure::LatencyHistogram;
use petrel_sys::proc::{children_cpu_time, process_cpu_time};

pub(crate) use ngtcp2::WINDOW as NGTCP2_WINDOW;
pub(crate) use rtt::SOURCE as RTT_SOURCE;

/// Bytes per write (and per RUDP message): large enough that per-call costs vanish,
/// small enough that the first byte's timestamp is within 0.1 ms of the first packet.
pub(crate) const CHUNK: usize = 16 << 10;

/// Socket buffers requested for every UDP and TCP socket, bytes (Linux caps the
/// request at `net.core.{w,r}mem_max`; the granted size is recorded).
pub(crate) const SOCKET_BUFFER: usize = 4 << 20;

/// Why a transfer did not complete.
#[derive(Debug, thiserror::Error)]
pub enum TransferError {
    /// A socket, endpoint or relay could not be set up.
    #[error("setup failed: {0}")]
    Setup(String),
    /// The connection failed while transferring.
    #[error("transfer failed: {0}")]
    Transport(String),
    /// Not every byte arrived within [`GoodputConfig::transfer_timeout`].
    #[error("incomplete: {received} of {expected} bytes after {timeout:?}")]
    Timeout {
        /// Bytes the server had verified.
        received: u64,
        /// Bytes sent.
        expected: u64,
        /// The limit.
        timeout: Duration,
    },
}

pub(crate) fn setup(e: impl std::fmt::Display) -> TransferError {
    TransferError::Setup(e.to_string())
}

pub(crate) fn transport(e: impl std::fmt::Display) -> TransferError {
    TransferError::Transport(e.to_string())
}

/// What the server saw.
#[derive(Debug, Clone, Copy, Default)]
pub(crate) struct Receipt {
    pub first_byte: Option<Instant>,
    pub last_byte: Option<Instant>,
    pub verifier: Verifier,
}

impl Receipt {
    /// Times and checks `data`, the next bytes read; publishes the count to `progress`.
    pub(crate) fn on_data(&mut self, data: &[u8], progress: &AtomicU64) {
        if data.is_empty() {
            return;
        }
        let now = Instant::now();
        self.first_byte.get_or_insert(now);
        self.last_byte = Some(now);
        self.verifier.check(data);
        progress.store(self.verifier.received, Ordering::Relaxed);
    }
}

pub use crate::record::goodput::SenderStats;

/// One completed transfer.
#[derive(Debug, Clone)]
pub(crate) struct Transfer {
    pub started: Instant,
    pub receipt: Receipt,
    pub sender: SenderStats,
    pub relay: Option<RelayStats>,
    /// The sender's srtt during the transfer, when the sender is Petrel's.
    pub rtt: Option<LatencyHistogram>,
    /// CPU time of the transport ([`CpuMeter`]).
    pub cpu: Option<Duration>,
}

/// CPU time (user + system) spent on a transfer: this process's, less the relay
/// thread's (the emulated link is not the transport), plus that of the child
/// processes that ended and were waited for meanwhile (the peers).
#[derive(Debug, Clone, Copy)]
pub(crate) struct CpuMeter {
    process: Option<Duration>,
    children: Option<Duration>,
}

/// What [`CpuMeter`] counts, in the result's words.
pub(crate) const CPU_SOURCE: &str = "getrusage user + system: this process (both Petrel sides, pattern generation and checking) minus the relay thread, plus the peer child processes (RUSAGE_CHILDREN)";

impl CpuMeter {
    pub(crate) fn start() -> Self {
        Self {
            process: process_cpu_time(),
            children: children_cpu_time(),
        }
    }

    /// The CPU time since [`start`](Self::start); `relay` is the stopped relay's stats.
    pub(crate) fn stop(&self, relay: Option<&RelayStats>) -> Option<Duration> {
        let process = process_cpu_time()?.checked_sub(self.process?)?;
        let children = children_cpu_time()?.checked_sub(self.children?)?;
        let relay = relay.map_or(Duration::ZERO, |r| {
            Duration::from_secs_f64(r.thread_cpu_ms.max(0.0) / 1e3)
        });
        Some(process.saturating_sub(relay) + children)
    }
}

/// Runs one transfer of `cfg` with `seed` on its own tokio runtime (two workers:
/// one for each side of the connection, the relay has a thread of its own).
pub(crate) fn run(cfg: &GoodputConfig, seed: u64) -> Result<Transfer, TransferError> {
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .map_err(setup)?;
    let progress = Arc::new(AtomicU64::new(0));
    let timeout = cfg.transfer_timeout();
    runtime.block_on(async {
        // The transfer runs as a task, so that the runtime's two workers run both
        // sides (the thread that called `block_on` only waits for it).
        let cfg = *cfg;
        let task_progress = Arc::clone(&progress);
        let mut transfer = tokio::spawn(async move {
            let progress = &task_progress;
            match cfg.transport {
                GoodputTransport::Rudp => rudp::run(&cfg, seed, progress).await,
                GoodputTransport::Quic | GoodputTransport::Quinn => {
                    quic::run(&cfg, seed, progress).await
                }
                GoodputTransport::Tcp => tcp::run(&cfg, progress).await,
                GoodputTransport::Aioquic => aioquic::self_pair(&cfg, seed, progress).await,
                GoodputTransport::AioquicQuic => {
                    aioquic::to_petrel_server(&cfg, seed, progress).await
                }
                GoodputTransport::QuicAioquic => {
                    aioquic::from_petrel_client(&cfg, seed, progress).await
                }
                GoodputTransport::Ngtcp2 => ngtcp2::self_pair(&cfg, seed, progress).await,
            }
        });
        // On timeout the task is aborted: that drops its relay (which stops it) and
        // endpoints; the runtime's drop then ends their tasks.
        match tokio::time::timeout(timeout, &mut transfer).await {
            Ok(joined) => joined.map_err(transport)?,
            Err(_) => {
                transfer.abort();
                Err(TransferError::Timeout {
                    received: progress.load(Ordering::Relaxed),
                    expected: cfg.size_bytes,
                    timeout,
                })
            }
        }
    })
}

pub(crate) fn loopback() -> SocketAddr {
    SocketAddr::from((Ipv4Addr::LOCALHOST, 0))
}

/// The `p2p` link in front of `server`, or nothing over plain loopback.
pub(crate) fn start_relay(
    cfg: &GoodputConfig,
    server: SocketAddr,
    seed: u64,
) -> Result<Option<Relay>, TransferError> {
    if cfg.profile == GoodputProfile::None {
        return Ok(None);
    }
    let link = LinkConfig {
        random_loss: cfg.loss_percent / 100.0,
        delay: cfg.delay,
        rate_bps: Some(cfg.bandwidth_bps),
        queue_packets: Some(cfg.queue_packets),
        queue_bytes: cfg.queue_bytes,
        ..LinkConfig::default()
    };
    // The route must hold a full queue in both directions plus a delay line's worth
    // of packets, or its capacity bound (not the queue) would drop.
    let per_direction = cfg.queue_packets + 8192;
    let capacity = RouteCapacity {
        packets: 2 * per_direction,
        bytes: 2 * per_direction * 1500,
    };
    let config = RelayConfig {
        upstream: server,
        route: RouteConfig {
            capacity,
            ..RouteConfig::symmetric(link)
        },
        seed,
        socket_buffer: SOCKET_BUFFER,
        ..RelayConfig::default()
    };
    Relay::start(config).map(Some).map_err(setup)
}

/// The chunk lengths of a transfer of `size` bytes.
pub(crate) fn chunks(size: u64) -> impl Iterator<Item = (u64, usize)> {
    (0..size)
        .step_by(CHUNK)
        .map(move |offset| (offset, (size - offset).min(CHUNK as u64) as usize))
}
