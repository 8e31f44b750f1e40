//! The idle-cost benchmark: what N established but quiet Petrel connections cost.
//!
//! One server endpoint and one client endpoint on loopback open `connections`
//! connections, exchange one message on each (so every connection has sent, acked
//! and gone quiet), then sit idle for the measured interval. Reported: process CPU %
//! (100 % = one core), timer wake-ups per second (any deadline a connection's timer
//! task woke for: retransmission, keepalive, idle timeout), datagrams per second
//! (keepalives), resident memory in total and per connection.
//!
//! A connection with nothing in flight has no ARQ deadline; in native mode its only
//! timer is the keepalive (default every 5 s), in raw mode the idle timeout (30 s).

use std::net::{Ipv4Addr, SocketAddr};
use std::time::Duration;

use bytes::Bytes;
use petrel::{Endpoint, EndpointConfig, EndpointStats, Mode};
use petrel_sys::range::check_range;

use crate::measure::CpuSample;

use crate::record::idle::IdleParameters;
pub use crate::record::idle::{IdleMode, IdleReport};

/// Parameters of an idle-cost run.
#[derive(Debug, Clone, Copy)]
pub struct IdleConfig {
    /// Connections to open (1..=100 000).
    pub connections: usize,
    /// Measured idle interval.
    pub measured: Duration,
    /// `"native"` or `"raw"`.
    pub mode: IdleMode,
}

impl IdleConfig {
    /// The parameters as recorded.
    pub fn parameters(&self) -> IdleParameters {
        IdleParameters {
            connections: self.connections,
            measured: self.measured.as_secs_f64(),
            mode: self.mode,
        }
    }
}

/// Why an idle-cost run failed.
#[derive(Debug, thiserror::Error)]
pub enum IdleError {
    /// Invalid parameters.
    #[error("invalid idle benchmark parameters: {0}")]
    Config(String),
    /// Socket or connection failure.
    #[error("idle benchmark failed: {0}")]
    Run(String),
}

fn run_err(e: impl std::fmt::Display) -> IdleError {
    IdleError::Run(e.to_string())
}

/// Current resident set size of this process, bytes (0 if `/proc` is unreadable).
fn current_rss_bytes() -> u64 {
    petrel_sys::proc::rss_bytes(std::process::id()).unwrap_or(0)
}

fn totals(a: EndpointStats, b: EndpointStats) -> (u64, u64) {
    (
        a.timer_wakeups + b.timer_wakeups,
        a.datagrams_sent + b.datagrams_sent,
    )
}

/// Runs the idle-cost benchmark inside the current tokio runtime.
pub async fn run_idle(config: IdleConfig) -> Result<IdleReport, IdleError> {
    check_range("connections", config.connections, &(1..=100_000)).map_err(|e| {
        IdleError::Config(format!("{} must be {}, got {}", e.field, e.range, e.value))
    })?;
    if config.measured.is_zero() {
        return Err(IdleError::Config("seconds must be > 0".into()));
    }
    let mode = match config.mode {
        IdleMode::Native => Mode::Native,
        IdleMode::Raw => Mode::Raw { conv: 0x1D1E },
    };
    let localhost = SocketAddr::from((Ipv4Addr::LOCALHOST, 0));
    let rss_before = current_rss_bytes();
    let big = EndpointConfig {
        mode,
        max_connections: config.connections + 16,
        max_connections_per_address: config.connections,
        max_connections_per_ip: config.connections,
        max_connections_per_prefix: config.connections,
        // Each connection reserves its receive buffers (2 × rcv_wnd × mtu).
        recv_buffer_budget: (EndpointConfig::default().recv_buffer_budget).max(
            2 * usize::from(EndpointConfig::default().kcp.rcv_wnd)
                * EndpointConfig::default().kcp.mtu
                * (config.connections + 16),
        ),
        accept_queue: config.connections + 16,
        recv_buffer: Some(4 << 20),
        ..EndpointConfig::default()
    };
    let server = Endpoint::bind(
        localhost,
        EndpointConfig {
            accept_incoming: true,
            ..big.clone()
        },
    )
    .await
    .map_err(run_err)?;
    let client = Endpoint::bind(localhost, big).await.map_err(run_err)?;
    let started = std::time::Instant::now();
    let mut conns = Vec::with_capacity(config.connections);
    let mut accepted = Vec::with_capacity(config.connections);
    // Raw KCP multiplexes connections by `conv` only, so one client socket can carry
    // one raw connection per server; raw runs use a socket per connection.
    let mut raw_clients = Vec::new();
    for i in 0..config.connections {
        let ep = match config.mode {
            IdleMode::Native => &client,
            IdleMode::Raw => {
                let cfg = EndpointConfig {
                    mode,
                    ..EndpointConfig::default()
                };
                raw_clients.push(Endpoint::bind(localhost, cfg).await.map_err(run_err)?);
                raw_clients.last().ok_or_else(|| run_err("no client"))?
            }
        };
        let conn = ep.connect(server.local_addr()).await.map_err(run_err)?;
        let msg = Bytes::from((i as u64).to_be_bytes().to_vec());
        conn.send(msg.clone()).await.map_err(run_err)?;
        let peer = server
            .accept()
            .await
            .ok_or_else(|| run_err("server stopped accepting"))?;
        let got = peer.recv().await.map_err(run_err)?;
        if got.as_ref() != Some(&msg) {
            return Err(run_err(format!("connection {i}: message corrupted")));
        }
        conns.push(conn);
        accepted.push(peer);
    }
    let setup_seconds = started.elapsed().as_secs_f64();
    // Let the last acks land before measuring.
    tokio::time::sleep(Duration::from_millis(500)).await;
    let rss_bytes = current_rss_bytes();
    let all_stats = || {
        raw_clients
            .iter()
            .map(Endpoint::stats)
            .fold(totals(client.stats(), server.stats()), |(w, d), s| {
                (w + s.timer_wakeups, d + s.datagrams_sent)
            })
    };
    let (wakeups0, sent0) = all_stats();
    let cpu0 = CpuSample::now();
    tokio::time::sleep(config.measured).await;
    let cpu1 = CpuSample::now();
    let (wakeups1, sent1) = all_stats();
    let secs = config.measured.as_secs_f64();
    Ok(IdleReport {
        connections: conns.len(),
        setup_seconds,
        cpu_percent: cpu0.percent_until(&cpu1).unwrap_or(f64::NAN),
        wakeups_per_second: (wakeups1 - wakeups0) as f64 / secs,
        datagrams_per_second: (sent1 - sent0) as f64 / secs,
        rss_bytes,
        rss_bytes_per_connection: rss_bytes.saturating_sub(rss_before) as f64 / conns.len() as f64,
    })
}
