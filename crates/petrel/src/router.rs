//! The datagram router: connections by peer and conv, the server handshake, and the
//! `connect`s in progress.
//!
//! Every shard's I/O driver hands each datagram it reads to [`Router::dispatch`],
//! which routes it by its kind: KCP data to the connection keyed by `(peer address,
//! conv)`, control datagrams to that connection's control plane, handshake replies
//! to a pending `connect`, and opening datagrams to the stateless server handshake.
//! One router serves all shards, so a datagram finds its connection whichever
//! shard the kernel delivered it to. A connection lives on one shard, whose driver
//! sends its datagrams. Native and legacy endpoints steer their shards (see
//! `io::bind`): a server gives each connection it accepts a conv whose lane is the
//! shard with the fewest connections, a connection opened by `connect` lives on
//! its conv's lane, and the kernel delivers each datagram to that shard. Other
//! modes keep the kernel's 4-tuple hash: an accepted connection lives on the shard
//! that read its opening datagram, one opened by `connect` on shard 0.

use std::collections::{HashMap, VecDeque};
use std::net::{IpAddr, SocketAddr};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Instant;

use petrel_proto::fec::FecBudget;
use petrel_proto::handshake::{
    Binding, ClientHandshake, ConvLane, DatagramKind, Established, HandshakeMode, LegacyMessage,
    NativeMessage, ServerEvent, ServerHandshake,
};
use petrel_proto::session::{peek_conv, Session};
use petrel_sys::SendBatch;
use tokio::sync::mpsc;

use crate::client_connect::{self, PendingConnect};
use crate::config::EndpointConfig;
use crate::connection_state::{run_timer, ConnShared, ReadySet};
use crate::error::ConnectError;
use crate::io::{wall_clock_ms, EndpointIo};
use crate::limits::{prefix_of, ReplyLimiter};
use crate::stats::EndpointCounters;

/// kcp-go mode: how long a peer whose connection ended on a FEC shape mismatch
/// is ignored. kcp-go has no close message, so without it the next datagram of
/// that peer would open a new connection (as kcp-go's listener does), whose
/// replies would keep the peer's idle timer running while it cannot decode us;
/// longer than the default idle timeout (30 s), so the peer's connection ends.
const SHAPE_MISMATCH_COOLDOWN: std::time::Duration = std::time::Duration::from_secs(60);
/// Most peers kept in the shape-mismatch cooldown; when full, expired entries are
/// removed first and a new peer that still finds no room is not recorded.
const COOLDOWN_PEERS: usize = 4096;

/// Datagrams of one connection's run fed to it per call by
/// [`Router::dispatch_read`]: a GRO train (Linux `UDP_GRO`) holds at most 64.
const RUN_CAPACITY: usize = 64;

/// The cookie secret is replaced this often; cookies stay valid across one rotation.
const SECRET_ROTATION: std::time::Duration = std::time::Duration::from_secs(60);

/// Connections by `(peer, conv)`, and by `(peer, opening id)` — the nonce (native) or
/// sync_id (legacy) of the datagram that opened them — to answer repeated openings in
/// constant time. In kcp-go mode also by peer alone: kcp-go's parity shards carry no
/// conv, and kcp-go serves one session per address.
#[derive(Debug, Default)]
pub(crate) struct Registry {
    pub(crate) conns: HashMap<(SocketAddr, u32), Arc<ConnShared>>,
    by_opening: HashMap<(SocketAddr, u64), u32>,
    /// kcp-go mode: the conv of each peer's one connection (empty in other modes).
    by_peer: HashMap<SocketAddr, u32>,
    kcpgo: bool,
    /// kcp-go mode: peers whose connection ended on a FEC shape mismatch, and
    /// until when their datagrams open nothing (at most [`COOLDOWN_PEERS`]).
    shape_cooldown: HashMap<SocketAddr, Instant>,
    /// Connections per peer address, per peer IP and per /24 or /64, for the
    /// per-peer limits.
    per_address: HashMap<SocketAddr, usize>,
    per_ip: HashMap<IpAddr, usize>,
    per_prefix: HashMap<IpAddr, usize>,
    /// Bytes of `recv_buffer_budget` the registered connections reserve.
    recv_reserved: usize,
    /// Registered connections per home shard (index = shard).
    per_home: Vec<usize>,
    /// Repeated handshake replies per source IP.
    replies: ReplyLimiter,
}

impl Registry {
    fn insert(&mut self, peer: SocketAddr, conn: Arc<ConnShared>, recv_reservation: usize) {
        if let Some(id) = opening_id(conn.established.binding) {
            self.by_opening.insert((peer, id), conn.conv);
        }
        if self.kcpgo {
            self.by_peer.insert(peer, conn.conv);
        }
        if let Some(n) = self.per_home.get_mut(conn.home) {
            *n += 1;
        }
        *self.per_address.entry(peer).or_default() += 1;
        *self.per_ip.entry(peer.ip()).or_default() += 1;
        *self.per_prefix.entry(prefix_of(peer.ip())).or_default() += 1;
        self.recv_reserved += recv_reservation;
        self.conns.insert((peer, conn.conv), conn);
    }

    fn remove(&mut self, peer: SocketAddr, conv: u32, recv_reservation: usize) {
        let Some(conn) = self.conns.remove(&(peer, conv)) else {
            return;
        };
        if let Some(id) = opening_id(conn.established.binding) {
            self.by_opening.remove(&(peer, id));
        }
        if self.by_peer.get(&peer) == Some(&conv) {
            self.by_peer.remove(&peer);
        }
        if let Some(n) = self.per_home.get_mut(conn.home) {
            *n -= 1;
        }
        decrement(&mut self.per_address, peer);
        decrement(&mut self.per_ip, peer.ip());
        decrement(&mut self.per_prefix, prefix_of(peer.ip()));
        self.recv_reserved -= recv_reservation;
    }

    /// Ignores `peer` until `now` + [`SHAPE_MISMATCH_COOLDOWN`]; `false` when the
    /// table is full of unexpired entries.
    fn cool_down(&mut self, peer: SocketAddr, now: Instant) -> bool {
        if self.shape_cooldown.len() >= COOLDOWN_PEERS {
            self.shape_cooldown.retain(|_, until| *until > now);
        }
        if self.shape_cooldown.len() >= COOLDOWN_PEERS {
            return false;
        }
        self.shape_cooldown
            .insert(peer, now + SHAPE_MISMATCH_COOLDOWN);
        true
    }

    /// Whether `peer` is in the shape-mismatch cooldown at `now`.
    fn cooling(&mut self, peer: SocketAddr, now: Instant) -> bool {
        match self.shape_cooldown.get(&peer) {
            Some(until) if *until > now => true,
            Some(_) => {
                self.shape_cooldown.remove(&peer);
                false
            }
            None => false,
        }
    }

    /// Whether one more incoming connection from `peer` would be refused now
    /// (per-peer limits, `max_connections`, the receive-buffer budget).
    fn would_refuse(&self, peer: SocketAddr, config: &EndpointConfig) -> bool {
        self.peer_has_room(peer, config).is_err()
            || self.conns.len() >= config.max_connections
            || self.recv_reserved + config.recv_reservation() > config.recv_buffer_budget
    }

    /// Whether `peer` may open one more incoming connection: `Err` names the
    /// counter of the limit it reached.
    fn peer_has_room(&self, peer: SocketAddr, config: &EndpointConfig) -> Result<(), Refusal> {
        if self.per_address.get(&peer).copied().unwrap_or(0) >= config.max_connections_per_address
            || self.per_ip.get(&peer.ip()).copied().unwrap_or(0) >= config.max_connections_per_ip
        {
            return Err(Refusal::Peer);
        }
        let prefix = self.per_prefix.get(&prefix_of(peer.ip())).copied();
        if prefix.unwrap_or(0) >= config.max_connections_per_prefix {
            return Err(Refusal::Prefix);
        }
        Ok(())
    }
}

/// Where a datagram came from: the peer, and the shard whose socket read it.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Arrival {
    pub(crate) peer: SocketAddr,
    pub(crate) shard: usize,
}

/// Which per-source limit refused an incoming connection.
enum Refusal {
    Peer,
    Prefix,
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
        HandshakeMode::Raw { .. } | HandshakeMode::KcpGo(_) => None,
    }
}

/// The connections, handshakes and queues of one endpoint, above its [`EndpointIo`].
#[derive(Debug)]
pub(crate) struct Router {
    pub(crate) io: Arc<EndpointIo>,
    pub(crate) registry: Mutex<Registry>,
    pub(crate) server: Option<Mutex<ServerState>>,
    pending: Mutex<HashMap<SocketAddr, Vec<Arc<PendingConnect>>>>,
    accept_tx: mpsc::Sender<Arc<ConnShared>>,
    /// Each shard's connections with something to send (index = shard).
    pub(crate) ready: Vec<Arc<ReadySet>>,
    /// Retained FEC shards of every connection, bounded by `config.fec.budget`.
    pub(crate) fec_budget: FecBudget,
}

#[derive(Debug)]
pub(crate) struct ServerState {
    pub(crate) handshake: ServerHandshake,
    rotated_at: Instant,
}

impl ServerState {
    pub(crate) fn new(handshake: ServerHandshake, now: Instant) -> Self {
        Self {
            handshake,
            rotated_at: now,
        }
    }
}

pub(crate) fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

impl Router {
    pub(crate) fn new(
        io: Arc<EndpointIo>,
        server: Option<ServerState>,
        accept_tx: mpsc::Sender<Arc<ConnShared>>,
    ) -> Self {
        let fec_budget = FecBudget::new(io.config.fec.budget);
        let registry = Registry {
            kcpgo: matches!(io.mode, HandshakeMode::KcpGo(_)),
            per_home: vec![0; io.shards.len()],
            ..Registry::default()
        };
        Self {
            ready: io.shards.iter().map(|_| Arc::default()).collect(),
            io,
            registry: Mutex::new(registry),
            server: server.map(Mutex::new),
            pending: Mutex::default(),
            accept_tx,
            fec_budget,
        }
    }

    /// Creates, registers and starts a connection for a finished handshake, living
    /// on shard `home`.
    pub(crate) fn create_connection(
        self: &Arc<Self>,
        now: Instant,
        home: usize,
        peer: SocketAddr,
        established: &Established,
    ) -> Result<Arc<ConnShared>, ConnectError> {
        let session = Session::with_fec_budget(
            established,
            &self.io.config.session_config(),
            now,
            self.fec_budget.clone(),
        )
        .map_err(|e| ConnectError::Handshake(e.to_string()))?;
        let shared = Arc::new(ConnShared::new(
            peer,
            *established,
            session,
            self.io.clone(),
            home,
            self.ready[home].clone(),
        ));
        {
            let mut reg = lock(&self.registry);
            if reg.conns.len() >= self.io.config.max_connections {
                EndpointCounters::add(&self.io.counters.refused_max_connections, 1);
                return Err(ConnectError::TooManyConnections(
                    self.io.config.max_connections,
                ));
            }
            let reservation = self.io.config.recv_reservation();
            if reg.recv_reserved + reservation > self.io.config.recv_buffer_budget {
                EndpointCounters::add(&self.io.counters.refused_recv_budget, 1);
                return Err(ConnectError::ReceiveBudget(
                    self.io.config.recv_buffer_budget,
                ));
            }
            if reg.conns.contains_key(&(peer, established.conv)) {
                return Err(ConnectError::Handshake(format!(
                    "conv {} already in use with {peer}",
                    established.conv
                )));
            }
            if let Some(conv) = reg.by_peer.get(&peer) {
                return Err(ConnectError::Handshake(format!(
                    "kcp-go mode holds one connection per peer, and {peer} has conv {conv}"
                )));
            }
            reg.insert(peer, shared.clone(), reservation);
        }
        let router = self.clone();
        let conn = shared.clone();
        tokio::spawn(async move {
            run_timer(conn.clone()).await;
            router.unregister(conn.peer, conn.conv);
            let mismatch = matches!(
                conn.lock().end,
                Some(crate::error::ConnectionError::FecShapeMismatch(_))
            );
            if mismatch && router.server.is_some() {
                let mut reg = lock(&router.registry);
                if reg.kcpgo && !reg.cool_down(conn.peer, Instant::now()) {
                    EndpointCounters::add(&router.io.counters.cooldown_full, 1);
                }
            }
        });
        Ok(shared)
    }

    pub(crate) fn unregister(&self, peer: SocketAddr, conv: u32) {
        lock(&self.registry).remove(peer, conv, self.io.config.recv_reservation());
    }

    pub(crate) fn lookup(&self, peer: SocketAddr, conv: u32) -> Option<Arc<ConnShared>> {
        lock(&self.registry).conns.get(&(peer, conv)).cloned()
    }

    /// Ends the endpoint: its drivers were stopped. First sends, without waiting,
    /// the control datagrams its connections had queued: a server that drops its
    /// endpoint as soon as `recv` reports the peer's close still sends the
    /// CLOSE-ACK that close is owed (the driver would have sent it on its next
    /// round), so the peer's `close` returns at once rather than after its CLOSE
    /// resends time out. Then ends every connection and pending `connect`.
    pub(crate) fn shutdown(&self) {
        self.send_queued_control(Instant::now());
        self.io.mark_gone();
        for ready in &self.ready {
            ready.close();
        }
        let conns: Vec<_> = lock(&self.registry).conns.values().cloned().collect();
        for conn in conns {
            conn.abort(crate::error::ConnectionError::EndpointGone);
        }
        for pending in lock(&self.pending).values().flatten() {
            pending.fail(ConnectError::EndpointGone);
        }
    }

    /// Sends the queued control datagrams of every registered connection and of
    /// every connection waiting in a ready set (one that just ended is
    /// unregistered by its timer task but still waits there for its driver), on
    /// its home shard's socket, batched (`sendmmsg`, up to 64 datagrams a call).
    /// Best effort, without waiting: a datagram the socket refuses is not counted,
    /// as no handle is left to read a counter.
    fn send_queued_control(&self, now: Instant) {
        let mut conns: VecDeque<_> = lock(&self.registry).conns.values().cloned().collect();
        for ready in &self.ready {
            ready.take(&mut conns);
        }
        let mut by_shard: Vec<(Vec<Vec<u8>>, Vec<SocketAddr>)> =
            self.io.shards.iter().map(|_| Default::default()).collect();
        for conn in conns {
            if let Some((datagrams, dests)) = by_shard.get_mut(conn.home) {
                for datagram in conn.take_control_transmits(now) {
                    datagrams.push(datagram);
                    dests.push(conn.peer);
                }
            }
        }
        let mut batch = SendBatch::new(petrel_sys::batch::MAX_GSO_SEGMENTS);
        for (shard, (datagrams, dests)) in self.io.shards.iter().zip(&by_shard) {
            let mut sent = 0;
            while sent < datagrams.len() {
                match batch.send_slices(&shard.socket, &datagrams[sent..], &dests[sent..]) {
                    Ok(n) if n > 0 => sent += n,
                    // A full buffer: nothing waits at teardown.
                    Ok(_) => break,
                    Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => break,
                    // This destination was refused: go on with the next one.
                    Err(_) => sent += 1,
                }
            }
        }
    }

    /// Routes one received datagram.
    pub(crate) fn dispatch(
        self: &Arc<Self>,
        now: Instant,
        from: Arrival,
        dg: &[u8],
        reply: &mut Vec<u8>,
    ) {
        match self.io.mode.classify(dg) {
            DatagramKind::Data => self.on_data(now, from, dg, reply),
            DatagramKind::NativeControl => self.on_native_control(now, from, dg, reply),
            DatagramKind::LegacyControl => self.on_legacy_control(now, from, dg, reply),
        }
    }

    /// Routes the datagrams of one read from `from` (a GRO train, or one datagram)
    /// in order, as [`Router::dispatch`] would one by one, except that consecutive
    /// KCP data datagrams of one registered connection reach it in one call: one
    /// lookup, one lock and one round of wake-ups for the run instead of one per
    /// datagram. (A GRO train is one peer's same-size datagrams; in bulk they are
    /// one connection's data.) kcp-go endpoints, which route by peer, go one by one.
    pub(crate) fn dispatch_read<'d>(
        self: &Arc<Self>,
        now: Instant,
        from: Arrival,
        datagrams: impl Iterator<Item = &'d [u8]>,
        reply: &mut Vec<u8>,
    ) {
        let kcpgo = matches!(self.io.mode, HandshakeMode::KcpGo(_));
        let mut run: Option<(u32, Arc<ConnShared>)> = None;
        // The run lives on the stack: a read must not cost an allocation. A run
        // longer than the array (a train holds at most 64 segments) is fed in parts.
        let mut batch: [&[u8]; RUN_CAPACITY] = [&[]; RUN_CAPACITY];
        let mut len = 0;
        for dg in datagrams {
            let conv = match self.io.mode.classify(dg) {
                DatagramKind::Data if !kcpgo => peek_conv(dg),
                _ => None,
            };
            if let (Some(conv), Some((run_conv, run_conn))) = (conv, &run) {
                if conv == *run_conv {
                    if run_conn.home != from.shard {
                        EndpointCounters::add(&self.io.counters.datagrams_off_home_shard, 1);
                    }
                    if len == RUN_CAPACITY {
                        run_conn.on_data_run(now, &batch[..len]);
                        len = 0;
                    }
                    batch[len] = dg;
                    len += 1;
                    continue;
                }
            }
            if let Some((_, conn)) = run.take() {
                conn.on_data_run(now, &batch[..len]);
                len = 0;
            }
            let Some(conv) = conv else {
                self.dispatch(now, from, dg, reply);
                continue;
            };
            match self.lookup(from.peer, conv) {
                Some(conn) => {
                    if conn.home != from.shard {
                        EndpointCounters::add(&self.io.counters.datagrams_off_home_shard, 1);
                    }
                    batch[0] = dg;
                    len = 1;
                    run = Some((conv, conn));
                }
                None => self.on_unregistered_data(now, from, dg, reply),
            }
        }
        if let Some((_, conn)) = run {
            conn.on_data_run(now, &batch[..len]);
        }
    }

    fn on_data(self: &Arc<Self>, now: Instant, from: Arrival, dg: &[u8], reply: &mut Vec<u8>) {
        let peer = from.peer;
        if let HandshakeMode::KcpGo(_) = self.io.mode {
            return self.on_kcpgo_data(now, from, dg, reply);
        }
        let Some(conv) = peek_conv(dg) else {
            EndpointCounters::add(&self.io.counters.dropped_malformed, 1);
            return;
        };
        if let Some(conn) = self.lookup(peer, conv) {
            if conn.home != from.shard {
                EndpointCounters::add(&self.io.counters.datagrams_off_home_shard, 1);
            }
            conn.on_data(now, dg);
        } else {
            self.on_unregistered_data(now, from, dg, reply);
        }
    }

    /// A KCP data datagram whose `(peer, conv)` has no connection.
    fn on_unregistered_data(
        self: &Arc<Self>,
        now: Instant,
        from: Arrival,
        dg: &[u8],
        reply: &mut Vec<u8>,
    ) {
        if matches!(self.io.mode, HandshakeMode::Raw { .. }) && self.server.is_some() {
            // Raw KCP has no handshake: the first datagram with our conv opens the connection.
            if let Some(conn) = self.server_handshake(now, from, dg, reply) {
                conn.on_data(now, dg);
            }
        } else {
            EndpointCounters::add(&self.io.counters.dropped_unknown, 1);
        }
    }

    /// kcp-go mode routes by peer address, as kcp-go's listener does: a known
    /// peer's datagrams go to its connection (whose session rejects, and counts,
    /// a foreign conv or a bad CRC); a new peer's first datagram with a valid
    /// header and a conv opens one on a server, unless the peer's last connection
    /// ended on a FEC shape mismatch less than [`SHAPE_MISMATCH_COOLDOWN`] ago.
    fn on_kcpgo_data(
        self: &Arc<Self>,
        now: Instant,
        from: Arrival,
        dg: &[u8],
        reply: &mut Vec<u8>,
    ) {
        let peer = from.peer;
        let (conn, cooling) = {
            let mut reg = lock(&self.registry);
            let conn = reg
                .by_peer
                .get(&peer)
                .and_then(|conv| reg.conns.get(&(peer, *conv)).cloned());
            let cooling = conn.is_none() && reg.cooling(peer, now);
            (conn, cooling)
        };
        if let Some(conn) = conn {
            conn.on_data(now, dg);
        } else if cooling {
            EndpointCounters::add(&self.io.counters.dropped_shape_cooldown, 1);
        } else if self.server.is_some() {
            if let Some(conn) = self.server_handshake(now, from, dg, reply) {
                conn.on_data(now, dg);
            }
        } else {
            EndpointCounters::add(&self.io.counters.dropped_unknown, 1);
        }
    }

    fn on_native_control(
        self: &Arc<Self>,
        now: Instant,
        from: Arrival,
        dg: &[u8],
        reply: &mut Vec<u8>,
    ) {
        let peer = from.peer;
        match NativeMessage::decode(dg) {
            Ok(
                NativeMessage::Keepalive(r)
                | NativeMessage::KeepaliveAck(r)
                | NativeMessage::Close(r)
                | NativeMessage::CloseAck(r),
            ) => match self.lookup(peer, r.conv) {
                Some(conn) => conn.on_control(now, dg),
                None => EndpointCounters::add(&self.io.counters.dropped_unknown, 1),
            },
            Ok(
                NativeMessage::Retry { .. }
                | NativeMessage::Accept { .. }
                | NativeMessage::VersionNegotiation { .. },
            ) => self.to_pending(now, peer, dg),
            // INITIAL, and datagrams of versions we do not speak: the server decides.
            _ => {
                if self.repeat_reply(now, from, dg, reply) {
                    return;
                }
                self.server_handshake(now, from, dg, reply);
            }
        }
    }

    fn on_legacy_control(
        self: &Arc<Self>,
        now: Instant,
        from: Arrival,
        dg: &[u8],
        reply: &mut Vec<u8>,
    ) {
        let peer = from.peer;
        match LegacyMessage::decode(dg) {
            Ok(LegacyMessage::Syn { .. }) => {
                if !self.repeat_reply(now, from, dg, reply) {
                    self.server_handshake(now, from, dg, reply);
                }
            }
            Ok(LegacyMessage::SynAck { .. }) => self.to_pending(now, peer, dg),
            Ok(LegacyMessage::Fin { conv, .. }) => match self.lookup(peer, conv) {
                Some(conn) => conn.on_control(now, dg),
                None => EndpointCounters::add(&self.io.counters.dropped_unknown, 1),
            },
            Err(_) => EndpointCounters::add(&self.io.counters.dropped_malformed, 1),
        }
    }

    /// A handshake reply for a `connect` in progress.
    fn to_pending(self: &Arc<Self>, now: Instant, peer: SocketAddr, dg: &[u8]) {
        let pendings: Vec<_> = lock(&self.pending).get(&peer).cloned().unwrap_or_default();
        if pendings.is_empty() {
            EndpointCounters::add(&self.io.counters.dropped_unknown, 1);
            return;
        }
        for pending in pendings {
            let home = |e: &Established| self.io.shard_of_conv(e.conv).unwrap_or(0);
            if pending.handle_input(now, dg, |e| self.create_connection(now, home(e), peer, e)) {
                return;
            }
        }
    }

    /// Answers an opening datagram (INITIAL / SYN) repeated by a peer that is already
    /// connected because our ACCEPT / SYN-ACK was lost.
    fn repeat_reply(&self, now: Instant, from: Arrival, dg: &[u8], reply: &mut Vec<u8>) -> bool {
        let peer = from.peer;
        let Some(server) = self.server.as_ref() else {
            return false;
        };
        let Some(id) = opening_id_of(&self.io.mode, dg) else {
            return false;
        };
        let conn = {
            let mut reg = lock(&self.registry);
            let Some(conv) = reg.by_opening.get(&(peer, id)).copied() else {
                return false;
            };
            let Some(conn) = reg.conns.get(&(peer, conv)).cloned() else {
                return false;
            };
            // Handled either way: a repeat beyond the allowance gets no answer.
            if !reg.replies.allow(now, peer.ip()) {
                EndpointCounters::add(&self.io.counters.dropped_reply_rate, 1);
                return true;
            }
            conn
        };
        if !lock(server)
            .handshake
            .repeat_reply(&conn.established, dg, reply)
        {
            return false;
        }
        self.io.send_unattached(from.shard, reply, peer);
        EndpointCounters::add(&self.io.counters.handshake_replies, 1);
        true
    }

    /// Feeds an opening datagram to the stateless server handshake; registers and queues
    /// the connection it accepts.
    fn server_handshake(
        self: &Arc<Self>,
        now: Instant,
        from: Arrival,
        dg: &[u8],
        reply: &mut Vec<u8>,
    ) -> Option<Arc<ConnShared>> {
        let peer = from.peer;
        let Some(server) = self.server.as_ref() else {
            EndpointCounters::add(&self.io.counters.dropped_unknown, 1);
            return None;
        };
        // Steered shards: the conv names the shard with the fewest connections,
        // and that shard reads (and sends) everything of the connection. A lane
        // costs about `io_threads` conv draws under the handshake lock, so an
        // opening the limits below would refuse anyway (a legacy SYN needs no
        // cookie) takes any conv, as before steering.
        let lane = {
            let reg = lock(&self.registry);
            if self.accept_tx.capacity() == 0 || reg.would_refuse(peer, &self.io.config) {
                ConvLane::ANY
            } else {
                self.io.lane_for_next(&reg.per_home)
            }
        };
        let event = {
            let mut server = lock(server);
            if now.duration_since(server.rotated_at) >= SECRET_ROTATION {
                let secret = self.io.random();
                server.handshake.rotate_secret(secret);
                server.rotated_at = now;
            }
            server.handshake.handle_in_lane(now, peer, dg, reply, lane)
        };
        match event {
            ServerEvent::Drop(_) => {
                EndpointCounters::add(&self.io.counters.dropped_handshake, 1);
                None
            }
            ServerEvent::Reply(_) => {
                self.io.send_unattached(from.shard, reply, peer);
                EndpointCounters::add(&self.io.counters.handshake_replies, 1);
                None
            }
            ServerEvent::Accept(established) => {
                if self.accept_tx.capacity() == 0 {
                    EndpointCounters::add(&self.io.counters.refused_accept_queue_full, 1);
                    return None;
                }
                match lock(&self.registry).peer_has_room(peer, &self.io.config) {
                    Ok(()) => {}
                    Err(Refusal::Peer) => {
                        EndpointCounters::add(&self.io.counters.refused_per_peer, 1);
                        return None;
                    }
                    Err(Refusal::Prefix) => {
                        EndpointCounters::add(&self.io.counters.refused_per_prefix, 1);
                        return None;
                    }
                }
                let home = self.io.shard_of_conv(established.conv);
                let conn = self
                    .create_connection(now, home.unwrap_or(from.shard), peer, &established)
                    .ok()?;
                if self.accept_tx.try_send(conn.clone()).is_err() {
                    EndpointCounters::add(&self.io.counters.refused_accept_queue_full, 1);
                    conn.abort(crate::error::ConnectionError::Closed);
                    return None;
                }
                if !reply.is_empty() {
                    self.io.send_unattached(from.shard, reply, peer);
                }
                EndpointCounters::add(&self.io.counters.connections_accepted, 1);
                Some(conn)
            }
        }
    }

    /// Runs the client handshake with `peer` to completion.
    pub(crate) async fn connect(
        self: &Arc<Self>,
        peer: SocketAddr,
    ) -> Result<Arc<ConnShared>, ConnectError> {
        let io = &self.io;
        if io.is_gone() {
            return Err(ConnectError::EndpointGone);
        }
        let now = Instant::now();
        let handshake = ClientHandshake::new(io.mode, now, wall_clock_ms(), io.next_seed())
            .map_err(|e| ConnectError::Handshake(e.to_string()))?;
        if let Some(established) = handshake.established() {
            // Raw KCP: nothing to negotiate.
            let established = *established;
            let conn = self.create_connection(now, 0, peer, &established)?;
            EndpointCounters::add(&io.counters.connections_connected, 1);
            return Ok(conn);
        }
        let pending = Arc::new(PendingConnect::new(handshake));
        lock(&self.pending)
            .entry(peer)
            .or_default()
            .push(pending.clone());
        // Dropped when `drive` returns, and also when the caller drops this future
        // first (a timeout around `connect`): either way the handshake leaves the
        // map, and a connection its reply opened that nobody will get is closed.
        let _registered = PendingGuard {
            router: self,
            peer,
            pending: pending.clone(),
        };
        let result = client_connect::drive(io, peer, &pending).await;
        if result.is_ok() {
            EndpointCounters::add(&io.counters.connections_connected, 1);
        }
        result
    }
}

/// A `connect`'s entry in the router's `pending` map, removed on drop; see
/// [`PendingConnect::end`].
struct PendingGuard<'a> {
    router: &'a Router,
    peer: SocketAddr,
    pending: Arc<PendingConnect>,
}

impl Drop for PendingGuard<'_> {
    fn drop(&mut self) {
        {
            let mut map = lock(&self.router.pending);
            if let Some(list) = map.get_mut(&self.peer) {
                list.retain(|p| !Arc::ptr_eq(p, &self.pending));
                if list.is_empty() {
                    map.remove(&self.peer);
                }
            }
        }
        self.pending.end();
    }
}
