//! The closed-loop loopback echo benchmark (`specs/benchmarks.md` §A),
//! generic over the transport.
//!
//! C clients each keep W messages of P bytes in flight against one echo
//! server; every verified echo refills its slot. A run is a warm-up, a
//! measured interval, then a drain of at most [`DRAIN_LIMIT`] during which
//! nothing new is sent. Throughput counts the drain time.
//!
//! A transport plugs in through [`EchoTransport`] (server start + client
//! connect) and [`EchoClient`] (send/receive one whole message). Adapters:
//! [`udp`] and [`tcp`] (baselines), [`rudp`] (Petrel), and the peers a user
//! would pick instead: [`websocket`] (`tokio-tungstenite`), [`kcp`]
//! (`tokio_kcp`) and [`quic`] (`quinn`), plus the TLS variants [`tls`] (TCP +
//! `rustls`) and [`wss`] (WebSocket over `rustls`); each peer result names
//! the library and its version ([`peers`]), a TLS result its session.
//!
//! Every server does [`work`] rounds per message before echoing it when
//! asked (`--work N`). The runtime layout is the caller's: [`run_echo_with`]
//! runs on the current runtime (`shared`), [`run_echo_sharded`] puts the
//! clients on single-thread shard runtimes (`sharded`).
//!
//! Verdict: `ok` only with zero errors of every kind and > 0 measured round
//! trips. For raw UDP a message still outstanding when the drain ends counts
//! as `lost` and is an error too: on loopback at these rates none is
//! expected, and a loss means the receive buffer overflowed, which the run
//! must not hide.

mod config;
pub mod kcp;
pub mod message;
pub mod peers;
pub mod quic;
mod report;
pub mod rudp;
mod run;
pub mod shards;
pub mod tcp;
pub mod tls;
pub mod udp;
pub mod websocket;
pub mod work;
pub mod wss;

use std::future::Future;
use std::io;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use tokio::task::JoinHandle;

pub use crate::record::echo::{EchoErrors, EchoIoModel, EchoParameters, EchoRound, TlsSession};
pub use config::{
    EchoConfig, EchoConfigError, MAX_CLIENTS, MAX_INTERVAL, MAX_PAYLOAD, MAX_ROUNDS, MAX_WINDOW,
};
pub use petrel_sys::socket::{BufferRequest, SocketBuffers};
pub use report::{EchoError, EchoReport};
pub use run::{run_echo, run_echo_sharded, run_echo_with, EchoOptions};

/// How long after the measured interval the harness waits for outstanding
/// echoes (`specs/benchmarks.md` §A: "wait up to 2 s to drain").
pub const DRAIN_LIMIT: Duration = Duration::from_secs(2);

/// The case name an echo run records: `<protocol>-<payload>B-<clients>x<window>`,
/// then `-shared<N>` for a shared runtime of N > 1 workers, `-sharded<N>` for
/// N single-thread client runtimes, and `-work<N>` for N work rounds per echo,
/// e.g. `udp-65507B-4x16-sharded2-work100`.
pub fn case_name(
    protocol: &str,
    cfg: &EchoConfig,
    io_model: EchoIoModel,
    io_threads: usize,
    work: u32,
) -> String {
    let mut name = format!("{protocol}-{}B-{}x{}", cfg.payload, cfg.clients, cfg.window);
    match (io_model, io_threads) {
        (EchoIoModel::Shared, 1) => {}
        (EchoIoModel::Shared, n) => name.push_str(&format!("-shared{n}")),
        (EchoIoModel::Sharded, n) => name.push_str(&format!("-sharded{n}")),
    }
    if work > 0 {
        name.push_str(&format!("-work{work}"));
    }
    name
}

/// One client's connection: sends and receives whole messages.
///
/// The harness calls `send` and `recv` concurrently from two tasks (a sender
/// and a receiver per client), so a blocked `send` never stops echoes from
/// being read.
pub trait EchoClient: Send + Sync + 'static {
    /// Submits one message.
    fn send(&self, msg: Bytes) -> impl Future<Output = io::Result<()>> + Send;
    /// Waits for the next echoed message. An error ends the client and counts
    /// as a disconnect. May be cancelled once no message is outstanding.
    fn recv(&self) -> impl Future<Output = io::Result<Bytes>> + Send;
    /// Actual kernel buffer sizes of the client's socket, if it has one.
    fn socket_buffers(&self) -> Option<SocketBuffers> {
        None
    }
}

/// A transport under test: starts an echo server and connects clients to it.
pub trait EchoTransport: Send + Sync {
    /// The client connection type.
    type Client: EchoClient;
    /// Protocol name as given to `--protocol` (e.g. `"udp"`).
    fn name(&self) -> &'static str;
    /// `true` if every sent message is delivered unless the connection fails:
    /// leftovers after the drain are then `unfinished`, otherwise `lost`.
    fn reliable(&self) -> bool;
    /// The third-party library under test and its version (e.g.
    /// `"quinn 0.11.12"`), recorded as `parameters.peer`; `None` for raw
    /// sockets and Petrel itself.
    fn peer(&self) -> Option<&'static str> {
        None
    }
    /// The TLS session the clients negotiated, once one has connected;
    /// `None` for transports without TLS (QUIC's is part of the protocol and
    /// not recorded here).
    fn tls_session(&self) -> Option<TlsSession> {
        None
    }
    /// Requested socket buffers (bytes); `None` keeps the OS default.
    fn requested_buffers(&self) -> BufferRequest {
        BufferRequest::default()
    }
    /// Starts an echo server on loopback.
    fn start_server(&self) -> impl Future<Output = io::Result<EchoServer>> + Send;
    /// Connects client `client_id` to `server`.
    fn connect(
        &self,
        server: SocketAddr,
        client_id: u32,
    ) -> impl Future<Output = io::Result<Self::Client>> + Send;
}

/// Counters an echo server keeps.
#[derive(Debug, Default)]
pub struct ServerStats {
    /// Messages echoed.
    pub echoed: AtomicU64,
    /// Receive or send failures, and malformed frames (each ends nothing but
    /// that message, except a TCP framing error, which closes the connection).
    pub errors: AtomicU64,
    /// Work rounds per echo ([`work`]), set by the harness before the clients
    /// start; every server applies it to a message before echoing it.
    pub work: work::ServerWork,
}

impl ServerStats {
    /// Counts one echoed message.
    pub fn count_echo(&self) {
        self.echoed.fetch_add(1, Ordering::Relaxed);
    }

    /// Counts one server-side failure.
    pub fn count_error(&self) {
        self.errors.fetch_add(1, Ordering::Relaxed);
    }
}

/// A running echo server; dropping it stops the server task (and, through
/// it, every connection task it owns).
#[derive(Debug)]
pub struct EchoServer {
    addr: SocketAddr,
    task: JoinHandle<()>,
    stats: Arc<ServerStats>,
    buffers: Option<SocketBuffers>,
    endpoint: Option<petrel::StatsReader>,
}

impl EchoServer {
    /// Wraps a server task listening on `addr`.
    pub fn new(
        addr: SocketAddr,
        task: JoinHandle<()>,
        stats: Arc<ServerStats>,
        buffers: Option<SocketBuffers>,
    ) -> Self {
        Self {
            addr,
            task,
            stats,
            buffers,
            endpoint: None,
        }
    }

    /// Lets the harness read a Petrel server endpoint's counters.
    pub fn with_endpoint_stats(mut self, reader: petrel::StatsReader) -> Self {
        self.endpoint = Some(reader);
        self
    }

    /// The Petrel server endpoint's counters now, if the server is a Petrel endpoint.
    pub fn endpoint_stats(&self) -> Option<petrel::EndpointStats> {
        self.endpoint.as_ref()?.stats()
    }

    /// Address clients connect to.
    pub fn local_addr(&self) -> SocketAddr {
        self.addr
    }

    /// The server's counters.
    pub fn stats(&self) -> &ServerStats {
        &self.stats
    }

    /// Actual socket buffers of the server socket, if it has one.
    pub fn socket_buffers(&self) -> Option<SocketBuffers> {
        self.buffers
    }
}

impl Drop for EchoServer {
    fn drop(&mut self) {
        self.task.abort();
    }
}
