//! The bottom of the runtime: the endpoint's UDP socket, its configuration, counters
//! and random numbers, and sending datagrams.
//!
//! Everything above shares one [`EndpointIo`] — connections (`conn`), the client
//! handshake driver (`connect`), the datagram router (`router`) — and it knows
//! nothing of them, so imports point one way:
//! `io` ← `conn` ← `connect` ← `router` ← `connection` ← `endpoint`.

use std::net::SocketAddr;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Mutex;
use std::time::{SystemTime, UNIX_EPOCH};

use petrel_proto::handshake::HandshakeMode;
use petrel_sys::socket::{bind_udp, BufferRequest, OnRefusal, UdpOptions};
use petrel_sys::SocketBuffers;
use rand::distributions::{Distribution, Standard};
use rand::Rng;

use crate::config::EndpointConfig;
use crate::stats::{ConnectionStats, EndpointCounters};

/// The socket and what every part of the endpoint reads or counts.
#[derive(Debug)]
pub(crate) struct EndpointIo {
    socket: tokio::net::UdpSocket,
    pub(crate) local_addr: SocketAddr,
    pub(crate) buffers: SocketBuffers,
    pub(crate) config: EndpointConfig,
    pub(crate) mode: HandshakeMode,
    rng: Mutex<rand_chacha::ChaCha20Rng>,
    pub(crate) counters: EndpointCounters,
    gone: AtomicBool,
}

impl EndpointIo {
    pub(crate) fn new(
        socket: tokio::net::UdpSocket,
        buffers: SocketBuffers,
        config: EndpointConfig,
        mode: HandshakeMode,
        rng: rand_chacha::ChaCha20Rng,
    ) -> std::io::Result<Self> {
        Ok(Self {
            local_addr: socket.local_addr()?,
            socket,
            buffers,
            config,
            mode,
            rng: Mutex::new(rng),
            counters: EndpointCounters::default(),
            gone: AtomicBool::new(false),
        })
    }

    /// A value from the endpoint's random stream (seeded by `EndpointConfig::seed`).
    pub(crate) fn random<T>(&self) -> T
    where
        Standard: Distribution<T>,
    {
        self.rng.lock().unwrap_or_else(|e| e.into_inner()).gen()
    }

    pub(crate) fn next_seed(&self) -> u64 {
        self.random()
    }

    pub(crate) fn is_gone(&self) -> bool {
        self.gone.load(Ordering::Acquire)
    }

    /// Marks the endpoint as shut down: new connects fail with `EndpointGone`.
    pub(crate) fn mark_gone(&self) {
        self.gone.store(true, Ordering::Release);
    }

    /// Waits for the next datagram.
    pub(crate) async fn recv_from(&self, buf: &mut [u8]) -> std::io::Result<(usize, SocketAddr)> {
        self.socket.recv_from(buf).await
    }

    /// Sends one datagram; a full socket buffer drops it (counted in `stats`).
    ///
    /// The `sendto` goes straight to the non-blocking socket: tokio's `try_send_to` answers
    /// `WouldBlock` from its cached readiness until the reactor has first polled a new
    /// socket, which silently cost every fresh endpoint its first datagram.
    pub(crate) fn send_datagram(&self, buf: &[u8], peer: SocketAddr, stats: &mut ConnectionStats) {
        match socket2::SockRef::from(&self.socket).send_to(buf, &peer.into()) {
            Ok(n) => {
                EndpointCounters::add(&self.counters.datagrams_sent, 1);
                EndpointCounters::add(&self.counters.bytes_sent, n as u64);
            }
            Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => stats.send_dropped += 1,
            Err(_) => stats.send_errors += 1,
        }
    }

    /// Sends a datagram that belongs to no connection (handshake traffic).
    pub(crate) fn send_unattached(&self, buf: &[u8], peer: SocketAddr) {
        let mut scratch = ConnectionStats::default();
        self.send_datagram(buf, peer, &mut scratch);
        EndpointCounters::add(&self.counters.unattached_send_dropped, scratch.send_dropped);
        EndpointCounters::add(&self.counters.unattached_send_errors, scratch.send_errors);
    }
}

/// Binds the endpoint's non-blocking UDP socket with the requested buffer sizes; a
/// size the kernel refuses fails the bind.
pub(crate) fn bind(
    addr: SocketAddr,
    send_buffer: Option<usize>,
    recv_buffer: Option<usize>,
) -> std::io::Result<(tokio::net::UdpSocket, SocketBuffers)> {
    let (socket, buffers) = bind_udp(&UdpOptions {
        buffers: BufferRequest {
            send: send_buffer,
            recv: recv_buffer,
        },
        on_refusal: OnRefusal::Fail,
        nonblocking: true,
        ..UdpOptions::new(addr)
    })?;
    Ok((tokio::net::UdpSocket::from_std(socket)?, buffers))
}

/// Milliseconds since the Unix epoch (the handshake's timestamps), 0 before it.
pub(crate) fn wall_clock_ms() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_millis() as u64)
}
