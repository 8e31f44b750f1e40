//! [`Endpoint`]: one UDP socket carrying many connections — the public handle.
//!
//! Binding builds the layers bottom-up: the sockets (one per shard) and shared state
//! ([`EndpointIo`](crate::io::EndpointIo)), the router ([`Router`]), then one I/O
//! driver task per shard ([`EndpointGuard`]); `connect` and `accept` hand out
//! [`Connection`]s that keep the guard alive.

use std::net::SocketAddr;
use std::sync::{Arc, Weak};
use std::time::Instant;

use petrel_proto::handshake::{
    HandshakeMode, HandshakeStats, KcpGoConfig, LegacyConfig, NativeConfig, ServerHandshake,
};
use petrel_proto::session::fec_descriptor;
use petrel_sys::SocketBuffers;
use rand::{Rng, SeedableRng};
use tokio::sync::mpsc;

use crate::config::{ConfigError, EndpointConfig, Mode};
use crate::connection_handle::Connection;
use crate::connection_state::ConnShared;
use crate::driver::EndpointGuard;
use crate::error::ConnectError;
use crate::io::{self, EndpointIo};
use crate::router::{lock, Router, ServerState};
use crate::stats::{ConnectionStats, EndpointStats};

/// A UDP socket (or, with `EndpointConfig::io_threads` > 1, a group of
/// `SO_REUSEPORT` sockets on one address) that carries many reliable connections, as
/// a client, a server or both.
///
/// Dropping the `Endpoint` and every [`Connection`] from it stops its tasks; connections
/// still open then end with [`ConnectionError::EndpointGone`](crate::ConnectionError).
#[derive(Debug)]
pub struct Endpoint {
    guard: Arc<EndpointGuard>,
    accept_rx: tokio::sync::Mutex<mpsc::Receiver<Arc<ConnShared>>>,
}

impl Endpoint {
    /// Binds a UDP socket on `addr` (port 0 picks a free port) and starts the endpoint.
    ///
    /// Must be called inside a tokio runtime. Errors: an invalid configuration
    /// (`io::ErrorKind::InvalidInput`, naming the field) or the bind failure.
    pub async fn bind(addr: SocketAddr, config: EndpointConfig) -> std::io::Result<Self> {
        config.validate().map_err(invalid_input)?;
        let mode = handshake_mode(&config);
        mode.validate()
            .map_err(|e| invalid_input(ConfigError(e.to_string())))?;
        // Native and legacy servers choose the conv, so a conv can name the shard
        // that reads it; raw convs are fixed and kcp-go datagrams may start with a
        // random nonce, so those keep the kernel's 4-tuple hash.
        let steer = matches!(mode, HandshakeMode::Native(_) | HandshakeMode::Legacy(_));
        let bound = io::bind(
            addr,
            config.io_threads,
            config.send_buffer,
            config.recv_buffer,
            steer,
            config.gro,
        )?;
        let mut rng = match config.seed {
            Some(seed) => rand_chacha::ChaCha20Rng::seed_from_u64(seed),
            None => rand_chacha::ChaCha20Rng::from_entropy(),
        };
        let server = if config.accept_incoming {
            let handshake = ServerHandshake::new(mode, rng.gen(), rng.gen())
                .map_err(|e| invalid_input(ConfigError(e.to_string())))?;
            Some(ServerState::new(handshake, Instant::now()))
        } else {
            None
        };
        let (accept_tx, accept_rx) = mpsc::channel(config.accept_queue);
        let io = Arc::new(EndpointIo::new(bound, config, mode, rng)?);
        let router = Arc::new(Router::new(io, server, accept_tx));
        Ok(Self {
            guard: Arc::new(EndpointGuard::start(router)),
            accept_rx: tokio::sync::Mutex::new(accept_rx),
        })
    }

    /// The local address the socket is bound to.
    pub fn local_addr(&self) -> SocketAddr {
        self.guard.router.io.local_addr
    }

    /// Socket buffer sizes requested and granted by the kernel (the first shard's).
    pub fn socket_buffers(&self) -> SocketBuffers {
        self.guard.router.io.buffers
    }

    /// Opens a connection to `peer` with this endpoint's handshake mode.
    ///
    /// Native and legacy modes resend their opening datagram until the server answers or
    /// `connect_timeout` passes; raw and kcp-go modes need no handshake and return at
    /// once. kcp-go mode holds one connection per peer: a second `connect` to the
    /// same address fails with [`ConnectError::Handshake`] while the first is open.
    pub async fn connect(&self, peer: SocketAddr) -> Result<Connection, ConnectError> {
        let shared = self.guard.router.connect(peer).await?;
        Ok(Connection::new(shared, self.guard.clone()))
    }

    /// Waits for the next incoming connection. Returns `None` if the endpoint does not
    /// accept incoming connections (`EndpointConfig::accept_incoming` is false).
    pub async fn accept(&self) -> Option<Connection> {
        self.guard.router.server.as_ref()?;
        let shared = self.accept_rx.lock().await.recv().await?;
        Some(Connection::new(shared, self.guard.clone()))
    }

    /// A snapshot of the endpoint's counters.
    pub fn stats(&self) -> EndpointStats {
        stats_of(&self.guard.router)
    }

    /// A handle that reads [`stats`](Self::stats) from elsewhere (a metrics task, a
    /// benchmark harness) without keeping the endpoint alive.
    pub fn stats_reader(&self) -> StatsReader {
        StatsReader(Arc::downgrade(&self.guard.router))
    }

    /// Counters of the server handshake, if this endpoint accepts connections.
    pub fn handshake_stats(&self) -> Option<HandshakeStats> {
        let server = self.guard.router.server.as_ref()?;
        Some(lock(server).handshake.stats())
    }

    /// Sum of the counters of every open connection (for benchmarks and metrics).
    pub fn connection_stats(&self) -> Vec<ConnectionStats> {
        let conns: Vec<_> = lock(&self.guard.router.registry)
            .conns
            .values()
            .cloned()
            .collect();
        conns.iter().map(|c| c.lock().snapshot()).collect()
    }
}

fn stats_of(router: &Router) -> EndpointStats {
    let open = lock(&router.registry).conns.len() as u64;
    router.io.counters.snapshot(open, &router.fec_budget)
}

/// Reads an endpoint's counters without keeping it alive ([`Endpoint::stats_reader`]).
#[derive(Debug, Clone)]
pub struct StatsReader(Weak<Router>);

impl StatsReader {
    /// A snapshot of the endpoint's counters, or `None` once the endpoint and every
    /// connection from it are gone.
    pub fn stats(&self) -> Option<EndpointStats> {
        self.0.upgrade().map(|router| stats_of(&router))
    }
}

fn invalid_input(e: ConfigError) -> std::io::Error {
    std::io::Error::new(std::io::ErrorKind::InvalidInput, e)
}

/// The sans-IO handshake configuration for an endpoint configuration.
fn handshake_mode(config: &EndpointConfig) -> HandshakeMode {
    let kcp = &config.kcp;
    let mtu = u16::try_from(kcp.mtu).unwrap_or(u16::MAX);
    match config.mode {
        Mode::Native => HandshakeMode::Native(NativeConfig {
            mtu,
            snd_wnd: kcp.snd_wnd,
            rcv_wnd: kcp.rcv_wnd,
            connect_timeout: config.connect_timeout,
            fec: fec_descriptor(&config.fec),
            fec_max_data: config.fec_max_data,
            fec_max_parity: config.fec_max_parity,
            ..NativeConfig::default()
        }),
        Mode::Legacy => HandshakeMode::Legacy(LegacyConfig {
            mtu,
            snd_wnd: kcp.snd_wnd,
            rcv_wnd: kcp.rcv_wnd,
            connect_timeout: config.connect_timeout,
            ..LegacyConfig::default()
        }),
        Mode::Raw { conv } => HandshakeMode::Raw { conv },
        Mode::KcpGo { crypt_none } => HandshakeMode::KcpGo(KcpGoConfig {
            mtu,
            snd_wnd: kcp.snd_wnd,
            rcv_wnd: kcp.rcv_wnd,
            crypt_header: crypt_none,
        }),
    }
}
