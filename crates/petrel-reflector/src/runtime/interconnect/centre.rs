//! The centre's control server (draarl-interconnect §3.1–§3.4, §3.6 steps
//! 2–3, §7): accepts TCP on `[interconnect] control_listen`, runs the TLS
//! 1.3 handshake and the node handshake, and carries each node session's
//! `type0` frames.
//!
//! ```text
//!  accept ─ PendingSlots::admit: own /24|/64 over its share ─▶ close its oldest (pending_prefix_limited)
//!    │                           table full ─▶ close the busiest network's oldest (pending_evicted)
//!    └─▶ ┌ 10 s: TLS ─▶ hello (≤ 16 KiB) ─▶ CentreHandshake::handle_hello ─ refuse ─▶ error frame, close
//!        │   └ per-IP attempts (30/min) ─▶ NodeAuthority::check ─▶ MaxNodes (a reconnecting id needs no slot)
//!        └   ─▶ session id + 32-byte key ─▶ DataPlane::attach ─▶ node_auth_ok   (replaces the node's old session)
//!  session: length prefix (≤ 4 MiB) ─▶ control budget (over: body skipped unparsed) ─▶ type0 ─▶ DataPlane::handle_control_envelope (§3.4)
//!             ├ 0x05 Heartbeat ─▶ counted, last heartbeat time
//!             ├ 0x06 DataBind request ─▶ challenge over TLS (the UDP proof binds, §4.5)
//!             └ anything else, node_ready ─▶ CentreEvent (the route, lease and device dispatchers)
//! ```
//!
//! Sessions are keyed by node id: a new session of a node closes the old
//! one. A session without any frame for [`SESSION_IDLE_TIMEOUT`] (six
//! missed heartbeats) is closed. Every [`CREDENTIAL_RECHECK`] a live
//! session's credential is checked again, so a node disabled or removed in
//! the store (`petrel reflector edge disable|remove`, another process)
//! loses its session (§3.3 revoke closes the session).
//!
//! The pending cap (§7 `MaxPendingHandshakes`) admits every newcomer and
//! closes an older pending connection instead ([`PendingSlots`]): one
//! source network holds at most a quarter of the slots, so half-open
//! connections renewed every hello deadline from one network cannot keep
//! other networks' edges out. The per-IP attempt limit refuses, as §7
//! specifies.

use std::collections::HashMap;
use std::net::SocketAddr;
use std::sync::atomic::Ordering::Relaxed;
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::time::{Duration, Instant};

use rand::rngs::OsRng;
use rand::RngCore;
use tokio::io::{AsyncWriteExt, ReadHalf, WriteHalf};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::{mpsc, oneshot};
use tokio::task::JoinSet;
use tokio_rustls::server::TlsStream;
use tokio_rustls::TlsAcceptor;

use super::super::wall_clock::unix_ms;
use super::centre_stats::{ControlServerSnapshot, ControlServerStats};
use super::control_io::{write_frame, ControlIoError, FrameSource};
use super::control_send::{
    seal_frame, ControlEnvelope, ControlSendError, SessionKeys, SEND_QUEUE, UNSUPPORTED_CRITICAL,
};
use super::node_authority::NodeAuthority;
use super::pending_slots::{Eviction, PendingSlots};
use crate::codec::interconnect::messages::Heartbeat;
use crate::codec::interconnect::{
    kind, peek_message_id, Challenge, ControlMessage, DataBind, EnvelopeHeader, Features, Flags,
    NodeId, NodeKey, Offer, Subtype, CHALLENGE_LEN,
};
use crate::core::interconnect::{
    AuthRejection, CentreHandshake, ControlSend, ControlVerdict, DataBudget, DataLimits, DataPlane,
    DataPlaneConfig, HelloOutcome, MessageIds, NodeSessionParams, Rejection,
};
use crate::model::{sha256_hex, InterconnectConfig, SourcePrefix};
use crate::policy::{AuthAttempts, AUTH_ATTEMPT_ADDRESSES};

/// A session without a frame this long is closed.
pub const SESSION_IDLE_TIMEOUT: Duration = Duration::from_secs(30);
/// How often a live session's credential is checked again.
pub const CREDENTIAL_RECHECK: Duration = Duration::from_secs(10);
type Tls = TlsStream<TcpStream>;

/// What the control server hands the centre's dispatchers.
#[derive(Debug, Clone)]
pub enum CentreEvent {
    /// A node session opened.
    NodeUp {
        /// The node.
        node_id: NodeId,
        /// Its new session.
        session_id: u64,
        /// The negotiated features.
        features: Features,
        /// The TLS peer address.
        remote: SocketAddr,
    },
    /// The node sent `node_ready` (§3.6 step 5: send it a full snapshot).
    NodeReady {
        /// The node.
        node_id: NodeId,
        /// Its session.
        session_id: u64,
    },
    /// An envelope passed the §3.4 checks, of a subtype the server does
    /// not handle itself.
    Envelope {
        /// The node.
        node_id: NodeId,
        /// Its session.
        session_id: u64,
        /// The envelope fields.
        header: EnvelopeHeader,
        /// The JSON payload.
        payload: Vec<u8>,
        /// A replayed reliable message: re-acknowledge, do not apply.
        duplicate: bool,
    },
    /// A node session closed (replaced, idle, peer gone, error).
    NodeDown {
        /// The node.
        node_id: NodeId,
        /// The session that closed.
        session_id: u64,
    },
}

/// A live node session, as the admin side sees it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NodeStatus {
    /// The node.
    pub node_id: NodeId,
    /// Its session id.
    pub session_id: u64,
    /// The TLS peer.
    pub remote: SocketAddr,
    /// Connected, Unix ms.
    pub connected_at_ms: i64,
    /// The last accepted heartbeat, Unix ms (0 = none yet).
    pub last_heartbeat_ms: i64,
}

struct Entry {
    session_id: u64,
    key: NodeKey,
    out: mpsc::Sender<ControlMessage>,
    close: oneshot::Sender<()>,
    remote: SocketAddr,
    connected_at_ms: i64,
    last_heartbeat_ms: i64,
}

struct Centre {
    cfg: InterconnectConfig,
    acceptor: TlsAcceptor,
    authority: NodeAuthority,
    events: Option<mpsc::Sender<CentreEvent>>,
    stats: Arc<ControlServerStats>,
    attempts: Mutex<AuthAttempts>,
    /// Connections not yet authenticated; dropping a handle closes one.
    pending: Mutex<PendingSlots<oneshot::Sender<()>>>,
    sessions: Mutex<HashMap<NodeId, Entry>>,
    data: Arc<Mutex<DataPlane>>,
    ids: Arc<Mutex<MessageIds>>,
    limits: DataLimits,
}

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(PoisonError::into_inner)
}

/// The running control server. Dropping it (or [`ControlServer::shutdown`])
/// closes the listener and every connection.
pub struct ControlServer {
    local_addr: SocketAddr,
    centre: Arc<Centre>,
    accept: Option<tokio::task::JoinHandle<()>>,
}

impl std::fmt::Debug for ControlServer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ControlServer")
            .field("local_addr", &self.local_addr)
            .field("authority", &self.centre.authority)
            .finish_non_exhaustive()
    }
}

/// Sends control messages the centre's logic built ([`ControlSend`]: its
/// own MessageID, kept on resends) to node sessions; cheap to clone.
#[derive(Clone)]
pub struct CentreSender {
    centre: Arc<Centre>,
}

impl std::fmt::Debug for CentreSender {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("CentreSender").finish_non_exhaustive()
    }
}

impl CentreSender {
    /// Seals `send` for `node_id`'s live session and queues it.
    ///
    /// # Errors
    /// [`ControlSendError`].
    pub fn send_control(
        &self,
        node_id: NodeId,
        send: &ControlSend,
    ) -> Result<(), ControlSendError> {
        self.centre.send_sealed(
            node_id,
            send.message_id,
            &ControlEnvelope::of(send),
            &send.payload,
        )
    }

    /// Queues `envelope`, sealed already for the control channel, as a
    /// `type0` frame to `node_id`'s session if it is still `session_id`:
    /// a downstream relay to an edge whose data address is not bound
    /// (§4.5).
    ///
    /// # Errors
    /// [`ControlSendError::NoSession`] (none, or another session),
    /// [`ControlSendError::QueueFull`].
    pub fn send_type0(
        &self,
        node_id: NodeId,
        session_id: u64,
        envelope: &[u8],
    ) -> Result<(), ControlSendError> {
        let out = {
            let sessions = lock(&self.centre.sessions);
            let e = sessions
                .get(&node_id)
                .filter(|e| e.session_id == session_id)
                .ok_or(ControlSendError::NoSession)?;
            e.out.clone()
        };
        let message_id = peek_message_id(envelope).unwrap_or(0);
        out.try_send(ControlMessage::type0(envelope, message_id))
            .map_err(|_| {
                self.centre.stats.send_queue_drops.fetch_add(1, Relaxed);
                ControlSendError::QueueFull
            })
    }

    /// Closes `node_id`'s session if it is still `session_id` (a route
    /// sync that ran out of attempts, §3.7).
    pub fn close_session(&self, node_id: NodeId, session_id: u64) {
        self.centre.close_session(node_id, session_id);
    }

    /// The process-wide MessageID counter (§3.4).
    pub fn message_ids(&self) -> Arc<Mutex<MessageIds>> {
        Arc::clone(&self.centre.ids)
    }

    /// The centre's Type 0 data plane.
    pub fn data_plane(&self) -> Arc<Mutex<DataPlane>> {
        Arc::clone(&self.centre.data)
    }

    /// The live node sessions, by node id (as [`ControlServer::nodes`]).
    pub fn nodes(&self) -> Vec<NodeStatus> {
        self.centre.nodes()
    }
}

impl ControlServer {
    /// Binds `cfg.control_listen` and starts accepting. `events`, when
    /// given, receives what the server does not handle itself (see
    /// [`CentreEvent`]; when it is full they are dropped and counted);
    /// without it they are counted as unhandled. Must be
    /// called inside a tokio runtime.
    ///
    /// # Errors
    /// The bind error.
    pub async fn bind(
        cfg: &InterconnectConfig,
        tls: Arc<rustls::ServerConfig>,
        authority: NodeAuthority,
        events: Option<mpsc::Sender<CentreEvent>>,
    ) -> std::io::Result<Self> {
        let listener = TcpListener::bind(cfg.control_listen).await?;
        Self::start(listener, cfg, tls, authority, events)
    }

    /// [`ControlServer::bind`] on a listener bound already (the server
    /// binds every socket before it opens the store).
    ///
    /// # Errors
    /// The listener's address cannot be read.
    pub fn start(
        listener: TcpListener,
        cfg: &InterconnectConfig,
        tls: Arc<rustls::ServerConfig>,
        authority: NodeAuthority,
        events: Option<mpsc::Sender<CentreEvent>>,
    ) -> std::io::Result<Self> {
        let local_addr = listener.local_addr()?;
        let centre = Arc::new(Centre {
            cfg: cfg.clone(),
            acceptor: TlsAcceptor::from(tls),
            authority,
            events,
            stats: Arc::default(),
            attempts: Mutex::new(AuthAttempts::new(
                cfg.auth_attempts_per_minute_per_ip,
                AUTH_ATTEMPT_ADDRESSES,
            )),
            pending: Mutex::new(PendingSlots::new(cfg.max_pending_handshakes)),
            sessions: Mutex::new(HashMap::new()),
            data: Arc::new(Mutex::new(DataPlane::centre(DataPlaneConfig {
                max_nodes: cfg.max_nodes,
                ..DataPlaneConfig::default()
            }))),
            ids: Arc::new(Mutex::new(MessageIds::after_start(
                u64::try_from(unix_ms()).unwrap_or(1),
            ))),
            limits: DataLimits {
                soft_pps: cfg.control_soft_pps_per_node,
                hard_pps: cfg.control_hard_pps_per_node,
                hard_bytes_per_s: u64::from(cfg.control_hard_mbps_per_node) * 125_000,
            },
        });
        let accept = tokio::spawn(accept_loop(listener, Arc::clone(&centre)));
        tracing::info!(%local_addr, "interconnect control plane listening");
        Ok(Self {
            local_addr,
            centre,
            accept: Some(accept),
        })
    }

    /// The bound control address.
    pub fn local_addr(&self) -> SocketAddr {
        self.local_addr
    }

    /// Current counters.
    pub fn stats(&self) -> ControlServerSnapshot {
        self.centre.stats.snapshot()
    }

    pub(crate) fn stats_source(&self) -> Arc<ControlServerStats> {
        Arc::clone(&self.centre.stats)
    }

    /// The centre's Type 0 data plane, whose node sessions this server
    /// attaches and detaches (shared with the UDP path, §3.4: one replay
    /// window per session).
    pub fn data_plane(&self) -> Arc<Mutex<DataPlane>> {
        Arc::clone(&self.centre.data)
    }

    /// The process-wide MessageID counter (§3.4), shared with the UDP path.
    pub fn message_ids(&self) -> Arc<Mutex<MessageIds>> {
        Arc::clone(&self.centre.ids)
    }

    /// The live node sessions, by node id.
    pub fn nodes(&self) -> Vec<NodeStatus> {
        self.centre.nodes()
    }

    /// Seals `payload` in an envelope to `node_id`'s session and queues it
    /// as a `type0` frame; returns its MessageID.
    ///
    /// # Errors
    /// [`ControlSendError`].
    pub fn send_envelope(
        &self,
        node_id: NodeId,
        envelope: &ControlEnvelope,
        payload: &[u8],
    ) -> Result<u64, ControlSendError> {
        self.centre.send_envelope(node_id, envelope, payload)
    }

    /// A handle for the centre's dispatchers to send to node sessions and
    /// close them, without owning the server.
    pub fn sender(&self) -> CentreSender {
        CentreSender {
            centre: Arc::clone(&self.centre),
        }
    }

    /// Stops accepting and closes every connection.
    pub async fn shutdown(mut self) {
        if let Some(accept) = self.accept.take() {
            accept.abort();
            let _ = accept.await;
        }
    }
}

impl Drop for ControlServer {
    fn drop(&mut self) {
        if let Some(accept) = &self.accept {
            accept.abort();
        }
        let closed: Vec<_> = lock(&self.centre.sessions).drain().collect();
        let mut data = lock(&self.centre.data);
        for (id, e) in closed {
            data.detach(id, e.session_id);
        }
        self.centre.stats.active_nodes.store(0, Relaxed);
    }
}

/// Frees a pending slot when the handshake ends.
struct Pending {
    centre: Arc<Centre>,
    seq: u64,
}

impl Drop for Pending {
    fn drop(&mut self) {
        let mut slots = lock(&self.centre.pending);
        slots.remove(self.seq);
        let held = slots.len() as u64;
        self.centre.stats.pending_handshakes.store(held, Relaxed);
    }
}

impl Centre {
    /// The live node sessions, by node id.
    fn nodes(&self) -> Vec<NodeStatus> {
        let mut v: Vec<_> = lock(&self.sessions)
            .iter()
            .map(|(id, e)| NodeStatus {
                node_id: *id,
                session_id: e.session_id,
                remote: e.remote,
                connected_at_ms: e.connected_at_ms,
                last_heartbeat_ms: e.last_heartbeat_ms,
            })
            .collect();
        v.sort_by_key(|a| a.node_id);
        v
    }

    /// Takes a pending slot for a connection from `peer`, closing an older
    /// pending connection when the peer's network is over its share or the
    /// table is full (counted). The receiver completes when this
    /// connection is evicted in turn.
    fn admit_pending(self: &Arc<Self>, peer: SocketAddr) -> (Pending, oneshot::Receiver<()>) {
        let (close, evicted) = oneshot::channel();
        let mut slots = lock(&self.pending);
        let (seq, gone) = slots.admit(SourcePrefix::of(peer.ip()), close);
        self.stats
            .pending_handshakes
            .store(slots.len() as u64, Relaxed);
        drop(slots);
        // Dropping the evicted connection's sender closes it.
        if let Some((why, _)) = gone {
            let counter = match why {
                Eviction::PrefixLimited => &self.stats.pending_prefix_limited,
                Eviction::Evicted => &self.stats.pending_evicted,
            };
            counter.fetch_add(1, Relaxed);
        }
        let guard = Pending {
            centre: Arc::clone(self),
            seq,
        };
        (guard, evicted)
    }
}

async fn accept_loop(listener: TcpListener, centre: Arc<Centre>) {
    // Dropping the set (the task aborted) aborts every connection task.
    let mut conns = JoinSet::new();
    loop {
        tokio::select! {
            accepted = listener.accept() => {
                let Ok((tcp, peer)) = accepted else {
                    // Out of descriptors and the like: back off briefly.
                    tokio::time::sleep(Duration::from_millis(50)).await;
                    continue;
                };
                let (guard, evicted) = centre.admit_pending(peer);
                conns.spawn(serve(Arc::clone(&centre), tcp, peer, guard, evicted));
            }
            Some(_) = conns.join_next(), if !conns.is_empty() => {}
        }
    }
}

struct Session {
    node_id: NodeId,
    session_id: u64,
    /// SHA-256 hex of the credential the session was opened with.
    credential_hash: String,
    frames: FrameSource<ReadHalf<Tls>>,
    write: WriteHalf<Tls>,
    out: mpsc::Sender<ControlMessage>,
    queue: mpsc::Receiver<ControlMessage>,
    close: oneshot::Receiver<()>,
}

/// One connection: the handshake under the hello deadline (closed at once
/// when `evicted` completes, its pending slot given to a newcomer), then
/// the session.
async fn serve(
    centre: Arc<Centre>,
    tcp: TcpStream,
    peer: SocketAddr,
    pending: Pending,
    evicted: oneshot::Receiver<()>,
) {
    let _ = tcp.set_nodelay(true);
    let mut hs = CentreHandshake::new(Instant::now(), Offer::CURRENT);
    let deadline = hs
        .poll_timeout()
        .unwrap_or_else(|| Instant::now() + crate::core::interconnect::HANDSHAKE_TIMEOUT);
    let opened = tokio::select! {
        opened = tokio::time::timeout_at(deadline.into(), centre.handshake(tcp, peer, &mut hs)) => opened,
        // Counted when evicted; dropping the handshake closes the socket.
        _ = evicted => return,
    };
    drop(pending);
    match opened {
        Ok(Some(session)) => centre.run(session).await,
        Ok(None) => {}
        Err(_) => {
            hs.handle_timeout(Instant::now());
            centre.stats.handshake_timeouts.fetch_add(1, Relaxed);
        }
    }
}

fn random_session() -> (u64, [u8; 32]) {
    let mut key = [0u8; 32];
    OsRng.fill_bytes(&mut key);
    let id = loop {
        let id = OsRng.next_u64();
        if id != 0 {
            break id;
        }
    };
    (id, key)
}

/// Removes a registered session that never became live.
struct Registered<'a> {
    centre: &'a Centre,
    node_id: NodeId,
    session_id: u64,
    armed: bool,
}

impl Drop for Registered<'_> {
    fn drop(&mut self) {
        if self.armed {
            self.centre.close_session(self.node_id, self.session_id);
        }
    }
}

async fn refuse(write: &mut WriteHalf<Tls>, msg: &ControlMessage) {
    let _ = write_frame(write, msg).await;
    let _ = write.shutdown().await;
}

impl Centre {
    fn emit(&self, event: CentreEvent) {
        let counter = match &self.events {
            None => &self.stats.events_unhandled,
            Some(tx) if tx.try_send(event).is_ok() => &self.stats.events_delivered,
            Some(_) => &self.stats.events_dropped,
        };
        counter.fetch_add(1, Relaxed);
    }

    /// TLS, hello, checks and `node_auth_ok`; `None` when the connection
    /// was refused or failed (counted).
    async fn handshake(
        &self,
        tcp: TcpStream,
        peer: SocketAddr,
        hs: &mut CentreHandshake,
    ) -> Option<Session> {
        let stats = &self.stats;
        let Ok(tls) = self.acceptor.accept(tcp).await else {
            stats.tls_failures.fetch_add(1, Relaxed);
            return None;
        };
        let (read, mut write) = tokio::io::split(tls);
        let mut frames = FrameSource::new(read);
        let hello = match frames.next().await {
            Ok((m, _)) => m,
            Err(ControlIoError::Frame(_)) => {
                stats.frame_errors.fetch_add(1, Relaxed);
                return None;
            }
            Err(_) => return None,
        };
        let pending = match hs.handle_hello(&hello) {
            HelloOutcome::Refuse(msg) => {
                let counter = if msg.kind == kind::NODE_PROTOCOL_ERROR {
                    &stats.protocol_rejected
                } else {
                    &stats.auth_failed
                };
                counter.fetch_add(1, Relaxed);
                refuse(&mut write, &msg).await;
                return None;
            }
            HelloOutcome::CheckCredential(p) => p,
        };
        let admitted = {
            let mut a = lock(&self.attempts);
            let ok = a.admit(peer.ip(), unix_ms());
            stats.auth_ip_evictions.store(a.evictions(), Relaxed);
            ok
        };
        if !admitted {
            stats.auth_rate_rejected.fetch_add(1, Relaxed);
            refuse(&mut write, &hs.reject(AuthRejection::Failed)).await;
            return None;
        }
        let node_id = pending.node_id;
        let credential_hash = sha256_hex(&pending.token);
        let checked = if pending.token.is_empty() {
            Ok(false)
        } else {
            self.authority
                .check_hash(&node_id.to_string(), &credential_hash)
                .await
        };
        if !matches!(checked, Ok(true)) {
            if let Err(e) = checked {
                stats.store_errors.fetch_add(1, Relaxed);
                tracing::warn!(node = %node_id, error = %e, "node credential check failed");
            }
            stats.auth_failed.fetch_add(1, Relaxed);
            refuse(&mut write, &hs.reject(AuthRejection::Failed)).await;
            return None;
        }
        let (session_id, key) = random_session();
        let Ok(node_key) = NodeKey::new(&key) else {
            return None;
        };
        let (out, queue) = mpsc::channel(SEND_QUEUE);
        let (close_tx, close) = oneshot::channel();
        if !self.register(node_id, session_id, &node_key, out.clone(), close_tx, peer) {
            stats.max_nodes_rejected.fetch_add(1, Relaxed);
            refuse(&mut write, &hs.reject(AuthRejection::Capacity)).await;
            return None;
        }
        let mut session = Session {
            node_id,
            session_id,
            credential_hash,
            frames,
            write,
            out,
            queue,
            close,
        };
        // Unregisters the session if the reply fails or the hello deadline
        // cancels this future while the reply is being written.
        let mut registered = Registered {
            centre: self,
            node_id,
            session_id,
            armed: true,
        };
        let sent = match hs.accept(session_id, &key, None) {
            Ok(ok) => write_frame(&mut session.write, &ok).await.is_ok(),
            Err(_) => false,
        };
        if !sent {
            return None;
        }
        registered.armed = false;
        stats.auth_ok.fetch_add(1, Relaxed);
        tracing::info!(node = %node_id, %peer, "edge node connected");
        self.emit(CentreEvent::NodeUp {
            node_id,
            session_id,
            features: pending.negotiated.features,
            remote: peer,
        });
        Some(session)
    }

    /// Makes the new session `node_id`'s current one, closing an older
    /// session of the node, and attaches it to the data plane; `false`
    /// when `max_nodes` other nodes are live.
    fn register(
        &self,
        node_id: NodeId,
        session_id: u64,
        key: &NodeKey,
        out: mpsc::Sender<ControlMessage>,
        close: oneshot::Sender<()>,
        remote: SocketAddr,
    ) -> bool {
        let mut sessions = lock(&self.sessions);
        if !sessions.contains_key(&node_id) && sessions.len() >= self.cfg.max_nodes {
            return false;
        }
        let entry = Entry {
            session_id,
            key: key.clone(),
            out,
            close,
            remote,
            connected_at_ms: unix_ms(),
            last_heartbeat_ms: 0,
        };
        match sessions.insert(node_id, entry) {
            Some(old) => {
                self.stats.sessions_replaced.fetch_add(1, Relaxed);
                let _ = old.close.send(());
            }
            None => {
                self.stats.active_nodes.fetch_add(1, Relaxed);
            }
        }
        lock(&self.data).attach(
            Instant::now(),
            NodeSessionParams {
                node_id,
                session_id,
                key: key.clone(),
                key_epoch: 1,
            },
        );
        true
    }

    /// Removes the session if it is still `node_id`'s current one.
    fn close_session(&self, node_id: NodeId, session_id: u64) {
        let mut sessions = lock(&self.sessions);
        if sessions
            .get(&node_id)
            .is_some_and(|e| e.session_id == session_id)
        {
            sessions.remove(&node_id);
            self.stats.active_nodes.fetch_sub(1, Relaxed);
        }
        lock(&self.data).detach(node_id, session_id);
    }

    async fn run(&self, session: Session) {
        let Session {
            node_id,
            session_id,
            credential_hash,
            mut frames,
            mut write,
            out,
            mut queue,
            mut close,
        } = session;
        let writer = tokio::spawn(async move {
            while let Some(msg) = queue.recv().await {
                if write_frame(&mut write, &msg).await.is_err() {
                    break;
                }
            }
            let _ = write.shutdown().await;
        });
        let mut budget = DataBudget::default();
        let node = node_id.to_string();
        let mut recheck = tokio::time::interval_at(
            tokio::time::Instant::now() + CREDENTIAL_RECHECK,
            CREDENTIAL_RECHECK,
        );
        loop {
            tokio::select! {
                _ = &mut close => break,
                _ = recheck.tick() => match self.authority.check_hash(&node, &credential_hash).await {
                    Ok(true) => {}
                    Ok(false) => {
                        self.stats.credentials_revoked.fetch_add(1, Relaxed);
                        tracing::info!(node = %node_id, "edge node credential revoked");
                        break;
                    }
                    Err(e) => {
                        self.stats.store_errors.fetch_add(1, Relaxed);
                        tracing::warn!(node = %node_id, error = %e, "node credential re-check failed");
                    }
                },
                // The control budget is charged at each length prefix, so
                // a frame over the hard budget is dropped unparsed.
                next = tokio::time::timeout(
                    SESSION_IDLE_TIMEOUT,
                    frames.next_admitting(|len| self.charge(&mut budget, len)),
                ) => match next {
                    Err(_) => {
                        self.stats.idle_closes.fetch_add(1, Relaxed);
                        break;
                    }
                    Ok(Err(ControlIoError::Frame(_))) => {
                        self.stats.frame_errors.fetch_add(1, Relaxed);
                        break;
                    }
                    Ok(Err(_)) => break,
                    Ok(Ok((msg, _))) => {
                        if !self.handle_frame(node_id, session_id, &out, &msg) {
                            break;
                        }
                    }
                },
            }
        }
        self.close_session(node_id, session_id);
        drop(out);
        // Lets the writer send what is queued (a closing error frame)
        // once every sender is gone, within a bound.
        let mut writer = writer;
        if tokio::time::timeout(Duration::from_secs(1), &mut writer)
            .await
            .is_err()
        {
            writer.abort();
        }
        tracing::info!(node = %node_id, "edge node disconnected");
        self.emit(CentreEvent::NodeDown {
            node_id,
            session_id,
        });
    }

    /// Charges a session's control budget with one frame of `len` bytes
    /// (length prefix included, §7 per-node limits); `false` drops it
    /// (counted) before its body is read into memory or parsed.
    fn charge(&self, budget: &mut DataBudget, len: usize) -> bool {
        let charge = budget.charge(&self.limits, unix_ms(), len);
        if charge.soft_event {
            self.stats.control_soft_limit_events.fetch_add(1, Relaxed);
        }
        if !charge.allowed {
            self.stats.control_hard_limit_drops.fetch_add(1, Relaxed);
        }
        charge.allowed
    }

    /// Handles one frame of a session that its budget admitted; `false`
    /// closes it.
    fn handle_frame(
        &self,
        node_id: NodeId,
        session_id: u64,
        out: &mpsc::Sender<ControlMessage>,
        msg: &ControlMessage,
    ) -> bool {
        let stats = &self.stats;
        let wall = unix_ms();
        match msg.kind.as_str() {
            kind::TYPE0 => {
                stats.type0_received.fetch_add(1, Relaxed);
                let Ok(envelope) = msg.type0_envelope() else {
                    stats.type0_dropped.fetch_add(1, Relaxed);
                    return true;
                };
                let verdict =
                    lock(&self.data).handle_control_envelope(wall, node_id, session_id, &envelope);
                match verdict {
                    ControlVerdict::Deliver {
                        header,
                        payload,
                        duplicate,
                    } => self.dispatch(node_id, session_id, header, payload, duplicate),
                    ControlVerdict::Drop(r) => {
                        if matches!(r, Rejection::UnexpectedSubtype(_)) {
                            stats.unsupported_subtype_drops.fetch_add(1, Relaxed);
                        }
                        stats.type0_dropped.fetch_add(1, Relaxed);
                    }
                    ControlVerdict::Close => {
                        stats.unsupported_subtype_drops.fetch_add(1, Relaxed);
                        let _ = out.try_send(ControlMessage {
                            error: UNSUPPORTED_CRITICAL.to_owned(),
                            ..ControlMessage::new(kind::NODE_PROTOCOL_ERROR)
                        });
                        return false;
                    }
                }
            }
            kind::NODE_HEARTBEAT => {
                stats.legacy_heartbeats.fetch_add(1, Relaxed);
            }
            kind::NODE_READY => self.emit(CentreEvent::NodeReady {
                node_id,
                session_id,
            }),
            _ => {
                stats.unknown_kinds.fetch_add(1, Relaxed);
            }
        }
        true
    }

    fn dispatch(
        &self,
        node_id: NodeId,
        session_id: u64,
        header: EnvelopeHeader,
        payload: Vec<u8>,
        duplicate: bool,
    ) {
        let stats = &self.stats;
        match header.subtype {
            Subtype::HEARTBEAT => {
                if serde_json::from_slice::<Heartbeat>(&payload).is_err() {
                    stats.payload_errors.fetch_add(1, Relaxed);
                    return;
                }
                stats.heartbeats.fetch_add(1, Relaxed);
                if let Some(e) = lock(&self.sessions)
                    .get_mut(&node_id)
                    .filter(|e| e.session_id == session_id)
                {
                    e.last_heartbeat_ms = unix_ms();
                }
            }
            Subtype::DATA_BIND => {
                let mut fresh = [0u8; CHALLENGE_LEN];
                OsRng.fill_bytes(&mut fresh);
                let reply = DataBind::parse(&payload).ok().and_then(|m| {
                    lock(&self.data)
                        .handle_bind_request(
                            Instant::now(),
                            node_id,
                            session_id,
                            &m,
                            Challenge(fresh),
                        )
                        .ok()
                });
                let Some(reply) = reply else {
                    stats.data_bind_rejects.fetch_add(1, Relaxed);
                    return;
                };
                let env = ControlEnvelope {
                    subtype: Subtype::DATA_BIND,
                    flags: Flags::CONTROL,
                    cluster_epoch: 0,
                    projection_version: 0,
                };
                if self.send_envelope(node_id, &env, &reply.to_vec()).is_ok() {
                    stats.data_bind_challenges.fetch_add(1, Relaxed);
                }
            }
            _ => self.emit(CentreEvent::Envelope {
                node_id,
                session_id,
                header,
                payload,
                duplicate,
            }),
        }
    }

    fn send_envelope(
        &self,
        node_id: NodeId,
        envelope: &ControlEnvelope,
        payload: &[u8],
    ) -> Result<u64, ControlSendError> {
        if !lock(&self.sessions).contains_key(&node_id) {
            return Err(ControlSendError::NoSession);
        }
        let message_id = lock(&self.ids).next_id();
        self.send_sealed(node_id, message_id, envelope, payload)?;
        Ok(message_id)
    }

    /// Seals and queues one envelope with a MessageID chosen by the caller
    /// (a reliable message keeps its id on every resend, §3.7).
    fn send_sealed(
        &self,
        node_id: NodeId,
        message_id: u64,
        envelope: &ControlEnvelope,
        payload: &[u8],
    ) -> Result<(), ControlSendError> {
        let (session_id, key, out) = {
            let sessions = lock(&self.sessions);
            let e = sessions.get(&node_id).ok_or(ControlSendError::NoSession)?;
            (e.session_id, e.key.clone(), e.out.clone())
        };
        let keys = SessionKeys {
            source: NodeId::CENTRE,
            session_id,
            key: &key,
            key_epoch: 1,
        };
        let frame = seal_frame(&keys, message_id, envelope, payload)?;
        out.try_send(frame).map_err(|_| {
            self.stats.send_queue_drops.fetch_add(1, Relaxed);
            ControlSendError::QueueFull
        })?;
        Ok(())
    }
}
