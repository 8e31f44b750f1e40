//! [`Endpoint`]: one UDP socket carrying many connections.
//!
//! A reader task owns the receive side of the socket. It routes each datagram by its
//! kind: KCP data to the connection keyed by `(peer address, conv)`, control datagrams to
//! that connection's control plane, handshake replies to a pending `connect`, and opening
//! datagrams to the stateless server handshake. Sending is done by whoever holds a
//! connection's lock, straight on the shared socket.

use std::collections::HashMap;
use std::net::{IpAddr, SocketAddr};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::{Instant, SystemTime, UNIX_EPOCH};

use petrel_proto::fec::FecBudget;
use petrel_proto::handshake::{
    Binding, DatagramKind, Established, HandshakeMode, HandshakeStats, LegacyConfig, LegacyMessage,
    NativeConfig, NativeMessage, ServerEvent, ServerHandshake,
};
use petrel_proto::session::{fec_descriptor, peek_conv, Session};
use rand::{Rng, SeedableRng};
use tokio::sync::mpsc;

use crate::config::{ConfigError, EndpointConfig, Mode};
use crate::conn::ConnShared;
use crate::connect::{self, PendingConnect};
use crate::connection::Connection;
use crate::error::ConnectError;
use crate::socket::{self, SocketBuffers};
use crate::stats::{ConnectionStats, EndpointCounters, EndpointStats};

/// The cookie secret is replaced this often; cookies stay valid across one rotation.
const SECRET_ROTATION: std::time::Duration = std::time::Duration::from_secs(60);

/// A UDP socket that carries many reliable connections, as a client, a server or both.
///
/// Dropping the `Endpoint` and every [`Connection`] from it stops its tasks; connections
/// still open then end with [`ConnectionError::EndpointGone`](crate::ConnectionError).
#[derive(Debug)]
pub struct Endpoint {
    guard: Arc<EndpointGuard>,
    accept_rx: tokio::sync::Mutex<mpsc::Receiver<Arc<ConnShared>>>,
}

/// Keeps the endpoint's reader task alive while any handle exists.
#[derive(Debug)]
pub(crate) struct EndpointGuard {
    pub(crate) io: Arc<EndpointIo>,
    reader: tokio::task::JoinHandle<()>,
}

impl Drop for EndpointGuard {
    fn drop(&mut self) {
        self.reader.abort();
        self.io.shutdown();
    }
}

/// Connections by `(peer, conv)`, and by `(peer, opening id)` — the nonce (native) or
/// sync_id (legacy) of the datagram that opened them — to answer repeated openings in
/// constant time.
#[derive(Debug, Default)]
struct Registry {
    conns: HashMap<(SocketAddr, u32), Arc<ConnShared>>,
    by_opening: HashMap<(SocketAddr, u64), u32>,
    /// Connections per peer address and per peer IP, for the per-peer limits.
    per_address: HashMap<SocketAddr, usize>,
    per_ip: HashMap<IpAddr, usize>,
}

impl Registry {
    fn insert(&mut self, peer: SocketAddr, conn: Arc<ConnShared>) {
        if let Some(id) = opening_id(conn.established.binding) {
            self.by_opening.insert((peer, id), conn.conv);
        }
        *self.per_address.entry(peer).or_default() += 1;
        *self.per_ip.entry(peer.ip()).or_default() += 1;
        self.conns.insert((peer, conn.conv), conn);
    }

    fn remove(&mut self, peer: SocketAddr, conv: u32) {
        let Some(conn) = self.conns.remove(&(peer, conv)) else {
            return;
        };
        if let Some(id) = opening_id(conn.established.binding) {
            self.by_opening.remove(&(peer, id));
        }
        decrement(&mut self.per_address, peer);
        decrement(&mut self.per_ip, peer.ip());
    }

    /// Whether `peer` may open one more incoming connection.
    fn peer_has_room(&self, peer: SocketAddr, config: &EndpointConfig) -> bool {
        self.per_address.get(&peer).copied().unwrap_or(0) < config.max_connections_per_address
            && self.per_ip.get(&peer.ip()).copied().unwrap_or(0) < config.max_connections_per_ip
    }
}

fn decrement<K: std::hash::Hash + Eq>(map: &mut HashMap<K, usize>, key: K) {
    if let std::collections::hash_map::Entry::Occupied(mut e) = map.entry(key) {
        *e.get_mut() -= 1;
        if *e.get() == 0 {
            e.remove();
        }
    }
}

/// The id an opening datagram (INITIAL / SYN) and the connection it opened share.
fn opening_id(binding: Binding) -> Option<u64> {
    match binding {
        Binding::Native { nonce, .. } => Some(nonce),
        Binding::Legacy { sync_id } => Some(u64::from(sync_id)),
        Binding::Raw => None,
    }
}

/// The opening id carried by an INITIAL or SYN datagram.
fn opening_id_of(mode: &HandshakeMode, dg: &[u8]) -> Option<u64> {
    match mode {
        HandshakeMode::Native(_) => match NativeMessage::decode(dg) {
            Ok(NativeMessage::Initial { nonce, .. }) => Some(nonce),
            _ => None,
        },
        HandshakeMode::Legacy(_) => match LegacyMessage::decode(dg) {
            Ok(LegacyMessage::Syn { sync_id }) => Some(u64::from(sync_id)),
            _ => None,
        },
        HandshakeMode::Raw { .. } => None,
    }
}

/// Everything the reader task, connections and handles share.
#[derive(Debug)]
pub(crate) struct EndpointIo {
    socket: tokio::net::UdpSocket,
    local_addr: SocketAddr,
    buffers: SocketBuffers,
    pub(crate) config: EndpointConfig,
    pub(crate) mode: HandshakeMode,
    registry: Mutex<Registry>,
    server: Option<Mutex<ServerState>>,
    pub(crate) pending: Mutex<HashMap<SocketAddr, Vec<Arc<PendingConnect>>>>,
    accept_tx: mpsc::Sender<Arc<ConnShared>>,
    rng: Mutex<rand_chacha::ChaCha20Rng>,
    pub(crate) counters: EndpointCounters,
    /// Retained FEC shards of every connection, bounded by `config.fec.budget`.
    fec_budget: FecBudget,
    gone: AtomicBool,
}

#[derive(Debug)]
struct ServerState {
    handshake: ServerHandshake,
    rotated_at: Instant,
}

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
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
        let (socket, buffers) = socket::bind(addr, config.send_buffer, config.recv_buffer)?;
        let local_addr = socket.local_addr()?;
        let mut rng = match config.seed {
            Some(seed) => rand_chacha::ChaCha20Rng::seed_from_u64(seed),
            None => rand_chacha::ChaCha20Rng::from_entropy(),
        };
        let server = if config.accept_incoming {
            let handshake = ServerHandshake::new(mode, rng.gen(), rng.gen())
                .map_err(|e| invalid_input(ConfigError(e.to_string())))?;
            Some(Mutex::new(ServerState {
                handshake,
                rotated_at: Instant::now(),
            }))
        } else {
            None
        };
        let (accept_tx, accept_rx) = mpsc::channel(config.accept_queue);
        let fec_budget = FecBudget::new(config.fec.budget);
        let io = Arc::new(EndpointIo {
            socket,
            local_addr,
            buffers,
            config,
            mode,
            registry: Mutex::default(),
            server,
            pending: Mutex::default(),
            accept_tx,
            rng: Mutex::new(rng),
            counters: EndpointCounters::default(),
            fec_budget,
            gone: AtomicBool::new(false),
        });
        let reader = tokio::spawn(run_reader(io.clone()));
        Ok(Self {
            guard: Arc::new(EndpointGuard { io, reader }),
            accept_rx: tokio::sync::Mutex::new(accept_rx),
        })
    }

    /// The local address the socket is bound to.
    pub fn local_addr(&self) -> SocketAddr {
        self.guard.io.local_addr
    }

    /// Socket buffer sizes requested and granted by the kernel.
    pub fn socket_buffers(&self) -> SocketBuffers {
        self.guard.io.buffers
    }

    /// Opens a connection to `peer` with this endpoint's handshake mode.
    ///
    /// Native and legacy modes resend their opening datagram until the server answers or
    /// `connect_timeout` passes; raw mode needs no handshake and returns at once.
    pub async fn connect(&self, peer: SocketAddr) -> Result<Connection, ConnectError> {
        let shared = connect::run(&self.guard.io, peer).await?;
        Ok(Connection::new(shared, self.guard.clone()))
    }

    /// Waits for the next incoming connection. Returns `None` if the endpoint does not
    /// accept incoming connections (`EndpointConfig::accept_incoming` is false).
    pub async fn accept(&self) -> Option<Connection> {
        self.guard.io.server.as_ref()?;
        let shared = self.accept_rx.lock().await.recv().await?;
        Some(Connection::new(shared, self.guard.clone()))
    }

    /// A snapshot of the endpoint's counters.
    pub fn stats(&self) -> EndpointStats {
        let open = lock(&self.guard.io.registry).conns.len() as u64;
        self.guard
            .io
            .counters
            .snapshot(open, &self.guard.io.fec_budget)
    }

    /// Counters of the server handshake, if this endpoint accepts connections.
    pub fn handshake_stats(&self) -> Option<HandshakeStats> {
        let server = self.guard.io.server.as_ref()?;
        Some(lock(server).handshake.stats())
    }

    /// Sum of the counters of every open connection (for benchmarks and metrics).
    pub fn connection_stats(&self) -> Vec<ConnectionStats> {
        let conns: Vec<_> = lock(&self.guard.io.registry)
            .conns
            .values()
            .cloned()
            .collect();
        conns.iter().map(|c| c.lock().snapshot()).collect()
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
    }
}

pub(crate) fn wall_clock_ms() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_millis() as u64)
}

impl EndpointIo {
    pub(crate) fn next_seed(&self) -> u64 {
        lock(&self.rng).gen()
    }

    pub(crate) fn is_gone(&self) -> bool {
        self.gone.load(Ordering::Acquire)
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

    /// Creates, registers and starts a connection for a finished handshake.
    pub(crate) fn create_connection(
        self: &Arc<Self>,
        now: Instant,
        peer: SocketAddr,
        established: &Established,
    ) -> Result<Arc<ConnShared>, ConnectError> {
        let session = Session::with_fec_budget(
            established,
            &self.config.session_config(),
            now,
            self.fec_budget.clone(),
        )
        .map_err(|e| ConnectError::Handshake(e.to_string()))?;
        let shared = Arc::new(ConnShared::new(peer, *established, session, self.clone()));
        {
            let mut reg = lock(&self.registry);
            if reg.conns.len() >= self.config.max_connections {
                EndpointCounters::add(&self.counters.refused_max_connections, 1);
                return Err(ConnectError::TooManyConnections(
                    self.config.max_connections,
                ));
            }
            if reg.conns.contains_key(&(peer, established.conv)) {
                return Err(ConnectError::Handshake(format!(
                    "conv {} already in use with {peer}",
                    established.conv
                )));
            }
            reg.insert(peer, shared.clone());
        }
        tokio::spawn(crate::conn::run_timer(shared.clone()));
        Ok(shared)
    }

    pub(crate) fn unregister(&self, peer: SocketAddr, conv: u32) {
        lock(&self.registry).remove(peer, conv);
    }

    fn lookup(&self, peer: SocketAddr, conv: u32) -> Option<Arc<ConnShared>> {
        lock(&self.registry).conns.get(&(peer, conv)).cloned()
    }

    fn shutdown(&self) {
        self.gone.store(true, Ordering::Release);
        let conns: Vec<_> = lock(&self.registry).conns.values().cloned().collect();
        for conn in conns {
            conn.abort(crate::error::ConnectionError::EndpointGone);
        }
        for pending in lock(&self.pending).values().flatten() {
            pending.fail(ConnectError::EndpointGone);
        }
    }

    /// Routes one received datagram.
    fn dispatch(self: &Arc<Self>, now: Instant, peer: SocketAddr, dg: &[u8], reply: &mut Vec<u8>) {
        match self.mode.classify(dg) {
            DatagramKind::Data => self.on_data(now, peer, dg, reply),
            DatagramKind::NativeControl => self.on_native_control(now, peer, dg, reply),
            DatagramKind::LegacyControl => self.on_legacy_control(now, peer, dg, reply),
        }
    }

    fn on_data(self: &Arc<Self>, now: Instant, peer: SocketAddr, dg: &[u8], reply: &mut Vec<u8>) {
        let Some(conv) = peek_conv(dg) else {
            EndpointCounters::add(&self.counters.dropped_malformed, 1);
            return;
        };
        if let Some(conn) = self.lookup(peer, conv) {
            conn.on_data(now, dg);
        } else if matches!(self.mode, HandshakeMode::Raw { .. }) && self.server.is_some() {
            // Raw KCP has no handshake: the first datagram with our conv opens the connection.
            if let Some(conn) = self.server_handshake(now, peer, dg, reply) {
                conn.on_data(now, dg);
            }
        } else {
            EndpointCounters::add(&self.counters.dropped_unknown, 1);
        }
    }

    fn on_native_control(
        self: &Arc<Self>,
        now: Instant,
        peer: SocketAddr,
        dg: &[u8],
        reply: &mut Vec<u8>,
    ) {
        match NativeMessage::decode(dg) {
            Ok(
                NativeMessage::Keepalive(r)
                | NativeMessage::KeepaliveAck(r)
                | NativeMessage::Close(r)
                | NativeMessage::CloseAck(r),
            ) => match self.lookup(peer, r.conv) {
                Some(conn) => conn.on_control(now, dg),
                None => EndpointCounters::add(&self.counters.dropped_unknown, 1),
            },
            Ok(
                NativeMessage::Retry { .. }
                | NativeMessage::Accept { .. }
                | NativeMessage::VersionNegotiation { .. },
            ) => self.to_pending(now, peer, dg),
            // INITIAL, and datagrams of versions we do not speak: the server decides.
            _ => {
                if self.repeat_reply(peer, dg, reply) {
                    return;
                }
                self.server_handshake(now, peer, dg, reply);
            }
        }
    }

    fn on_legacy_control(
        self: &Arc<Self>,
        now: Instant,
        peer: SocketAddr,
        dg: &[u8],
        reply: &mut Vec<u8>,
    ) {
        match LegacyMessage::decode(dg) {
            Ok(LegacyMessage::Syn { .. }) => {
                if !self.repeat_reply(peer, dg, reply) {
                    self.server_handshake(now, peer, dg, reply);
                }
            }
            Ok(LegacyMessage::SynAck { .. }) => self.to_pending(now, peer, dg),
            Ok(LegacyMessage::Fin { conv, .. }) => match self.lookup(peer, conv) {
                Some(conn) => conn.on_control(now, dg),
                None => EndpointCounters::add(&self.counters.dropped_unknown, 1),
            },
            Err(_) => EndpointCounters::add(&self.counters.dropped_malformed, 1),
        }
    }

    /// A handshake reply for a `connect` in progress.
    fn to_pending(self: &Arc<Self>, now: Instant, peer: SocketAddr, dg: &[u8]) {
        let pendings: Vec<_> = lock(&self.pending).get(&peer).cloned().unwrap_or_default();
        if pendings.is_empty() {
            EndpointCounters::add(&self.counters.dropped_unknown, 1);
            return;
        }
        for pending in pendings {
            if pending.handle_input(self, now, peer, dg) {
                return;
            }
        }
    }

    /// Answers an opening datagram (INITIAL / SYN) repeated by a peer that is already
    /// connected because our ACCEPT / SYN-ACK was lost.
    fn repeat_reply(&self, peer: SocketAddr, dg: &[u8], reply: &mut Vec<u8>) -> bool {
        let Some(server) = self.server.as_ref() else {
            return false;
        };
        let Some(id) = opening_id_of(&self.mode, dg) else {
            return false;
        };
        let conn = {
            let reg = lock(&self.registry);
            let Some(conv) = reg.by_opening.get(&(peer, id)) else {
                return false;
            };
            reg.conns.get(&(peer, *conv)).cloned()
        };
        let Some(conn) = conn else {
            return false;
        };
        if !lock(server)
            .handshake
            .repeat_reply(&conn.established, dg, reply)
        {
            return false;
        }
        self.send_unattached(reply, peer);
        EndpointCounters::add(&self.counters.handshake_replies, 1);
        true
    }

    /// Feeds an opening datagram to the stateless server handshake; registers and queues
    /// the connection it accepts.
    fn server_handshake(
        self: &Arc<Self>,
        now: Instant,
        peer: SocketAddr,
        dg: &[u8],
        reply: &mut Vec<u8>,
    ) -> Option<Arc<ConnShared>> {
        let Some(server) = self.server.as_ref() else {
            EndpointCounters::add(&self.counters.dropped_unknown, 1);
            return None;
        };
        let event = {
            let mut server = lock(server);
            if now.duration_since(server.rotated_at) >= SECRET_ROTATION {
                let secret = lock(&self.rng).gen();
                server.handshake.rotate_secret(secret);
                server.rotated_at = now;
            }
            server.handshake.handle(now, peer, dg, reply)
        };
        match event {
            ServerEvent::Drop(_) => {
                EndpointCounters::add(&self.counters.dropped_handshake, 1);
                None
            }
            ServerEvent::Reply(_) => {
                self.send_unattached(reply, peer);
                EndpointCounters::add(&self.counters.handshake_replies, 1);
                None
            }
            ServerEvent::Accept(established) => {
                if self.accept_tx.capacity() == 0 {
                    EndpointCounters::add(&self.counters.refused_accept_queue_full, 1);
                    return None;
                }
                if !lock(&self.registry).peer_has_room(peer, &self.config) {
                    EndpointCounters::add(&self.counters.refused_per_peer, 1);
                    return None;
                }
                let conn = self.create_connection(now, peer, &established).ok()?;
                if self.accept_tx.try_send(conn.clone()).is_err() {
                    EndpointCounters::add(&self.counters.refused_accept_queue_full, 1);
                    conn.abort(crate::error::ConnectionError::Closed);
                    return None;
                }
                if !reply.is_empty() {
                    self.send_unattached(reply, peer);
                }
                EndpointCounters::add(&self.counters.connections_accepted, 1);
                Some(conn)
            }
        }
    }
}

/// Reads datagrams until the endpoint is dropped.
async fn run_reader(io: Arc<EndpointIo>) {
    let mut buf = vec![0u8; 65_536];
    let mut reply = Vec::with_capacity(2048);
    loop {
        match io.socket.recv_from(&mut buf).await {
            Ok((len, peer)) => {
                EndpointCounters::add(&io.counters.datagrams_received, 1);
                EndpointCounters::add(&io.counters.bytes_received, len as u64);
                io.dispatch(Instant::now(), peer, &buf[..len], &mut reply);
            }
            Err(e) => {
                // ICMP errors surface here on some platforms; they say nothing about other
                // peers, so count them and keep serving.
                EndpointCounters::add(&io.counters.recv_errors, 1);
                tracing::debug!(error = %e, "udp recv error");
            }
        }
    }
}
