//! The edge's control client (draarl-interconnect §3.6 step 1, §3.2, §3.4,
//! §6.1): keeps one TLS connection to the centre, runs the node handshake,
//! sends a heartbeat every 5 s, checks the centre's envelopes and hands
//! them on, and reconnects with backoff when the connection is lost.
//!
//! ```text
//!  ┌▶ TCP + TLS 1.3 (2 s, pin or CA roots) ─▶ node_enroll ─▶ node_auth_ok (10 s) ─▶ DataPlane::attach
//!  │     └ refused / failed ─────────────────────────────────────────────┐
//!  │  link up: heartbeat 0x05 every 5 s; type0 ─▶ §3.4 checks ─▶ EdgeEvent::Envelope
//!  │  link lost ─▶ DataPlane::detach, EdgeEvent::Disconnected ───────────┤
//!  └─ ReconnectBackoff: 250 ms × 2 up to 5 s, ±20 %, reset if up ≥ 10 s ◀┘
//! ```
//!
//! The handle ([`EdgeControl`]) is what the edge runtime builds on: the
//! current link ([`EdgeControl::link`]), envelopes to the centre
//! ([`EdgeControl::send_envelope`]), the events
//! ([`EdgeControl::take_events`]), and the data plane and MessageID counter
//! it shares with the UDP path. The rest of the connection sequence
//! (DataBind, `node_ready`, the projection, §3.6 steps 2–6) is the edge
//! node's (`edge_node.rs`). Not done: session confirmation (§3.9) and
//! persisting an issued credential (this centre never issues one: only
//! long-term credentials exist).

use std::fmt;
use std::sync::atomic::{AtomicU64, Ordering::Relaxed};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::time::{Duration, Instant};

use rand::Rng;
use rustls::pki_types::ServerName;
use thiserror::Error;
use tokio::io::{AsyncWriteExt, ReadHalf, WriteHalf};
use tokio::net::TcpStream;
use tokio::sync::{mpsc, watch};
use tokio_rustls::client::TlsStream;
use tokio_rustls::TlsConnector;

use super::super::wall_clock::unix_ms;

use super::control_io::{write_frame, ControlIoError, FrameSource};
use super::control_send::{
    seal_frame, ControlEnvelope, ControlSendError, SessionKeys, SEND_QUEUE, UNSUPPORTED_CRITICAL,
};
use super::tls::{server_name, CentreTrust, TlsSetupError};
use crate::codec::interconnect::messages::Heartbeat;
use crate::codec::interconnect::{
    kind, ControlMessage, EnvelopeHeader, Features, Flags, NodeId, NodeKey, Offer, Subtype,
};
use crate::core::interconnect::{
    ControlSend, ControlVerdict, DataPlane, DataPlaneConfig, EdgeHandshake, HandshakeError,
    MessageIds, HANDSHAKE_TIMEOUT,
};
use crate::model::NodeCredential;
use crate::policy::ReconnectBackoff;

/// TCP connect plus TLS handshake, together (§3.6 step 1).
pub const CONNECT_TIMEOUT: Duration = Duration::from_secs(2);
/// Heartbeat period (§3.5 0x05).
pub const HEARTBEAT_INTERVAL: Duration = Duration::from_secs(5);
/// Events held for the edge runtime; beyond it they are dropped and
/// counted.
pub const EVENT_QUEUE: usize = 4096;
/// Where an envelope's MessageID sits (§4.1).
const MESSAGE_ID_AT: usize = 118;

type Tls = TlsStream<TcpStream>;

/// How the edge reaches and trusts its centre.
#[derive(Clone)]
pub struct EdgeControlConfig {
    /// The centre's control address, `host:port` (§2 `Center`).
    pub centre: String,
    /// The TLS server name asked for (§2 `TLSServerName`, default
    /// `localhost`); checked only with [`CentreTrust::Roots`].
    pub server_name: String,
    /// The node's long-term credential (its node id is the one it embeds).
    pub credential: NodeCredential,
    /// The pin of the node token, or CA roots.
    pub trust: CentreTrust,
    /// The versions and features offered ([`Offer::MINIMUM`]).
    pub offer: Offer,
    /// Heartbeat period ([`HEARTBEAT_INTERVAL`]).
    pub heartbeat: Duration,
}

impl fmt::Debug for EdgeControlConfig {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("EdgeControlConfig")
            .field("centre", &self.centre)
            .field("server_name", &self.server_name)
            .field("credential", &self.credential)
            .field("trust", &self.trust)
            .field("offer", &self.offer)
            .field("heartbeat", &self.heartbeat)
            .finish()
    }
}

/// The current node session with the centre.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct EdgeLink {
    /// This edge's node id.
    pub node_id: NodeId,
    /// The session id the centre chose.
    pub session_id: u64,
    /// The negotiated protocol version.
    pub protocol: u8,
    /// The negotiated features.
    pub features: Features,
    /// Successful handshakes so far, this one included.
    pub connects: u64,
}

/// What the control client reports to the edge runtime.
#[derive(Debug, Clone)]
pub enum EdgeEvent {
    /// A session with the centre opened (§3.6: attach, then bind, confirm,
    /// `node_ready`).
    Connected(EdgeLink),
    /// An envelope from the centre passed the §3.4 checks.
    Envelope {
        /// The envelope fields.
        header: EnvelopeHeader,
        /// The JSON payload.
        payload: Vec<u8>,
        /// A replayed reliable message: re-acknowledge, do not apply.
        duplicate: bool,
    },
    /// The session closed (§6.1: keep local sessions for the grace period).
    Disconnected {
        /// The session that closed.
        session_id: u64,
    },
}

/// Why one connection attempt failed.
#[derive(Debug, Error)]
pub enum EdgeConnectError {
    /// TCP connect failed or timed out.
    #[error("connecting: {0}")]
    Connect(String),
    /// The TLS handshake failed (wrong pin, untrusted certificate …).
    #[error("TLS: {0}")]
    Tls(String),
    /// The control connection failed during the node handshake.
    #[error(transparent)]
    Io(#[from] ControlIoError),
    /// No reply within 10 s.
    #[error("no handshake reply within 10 s")]
    Timeout,
    /// The centre refused, or its reply was unusable.
    #[error(transparent)]
    Handshake(#[from] HandshakeError),
}

macro_rules! edge_counters {
    ($($(#[$doc:meta])* $name:ident,)*) => {
        #[derive(Debug, Default)]
        struct Counters { $($name: AtomicU64,)* }

        /// Counters of the edge's control client.
        #[derive(Debug, Clone, Default, PartialEq, Eq)]
        pub struct EdgeControlStats {
            $($(#[$doc])* pub $name: u64,)*
        }

        impl Counters {
            fn snapshot(&self) -> EdgeControlStats {
                EdgeControlStats { $($name: self.$name.load(Relaxed),)* }
            }
        }

        impl EdgeControlStats {
            /// Every counter with its name, for metrics export.
            pub fn counters(&self) -> Vec<(&'static str, u64)> {
                vec![$((stringify!($name), self.$name),)*]
            }
        }
    };
}

edge_counters! {
    /// Successful handshakes.
    connects,
    /// Attempts that failed before TLS completed (TCP, timeout).
    connect_failures,
    /// TLS handshakes that failed (wrong pin or certificate included).
    tls_failures,
    /// Handshakes the centre refused or answered unusably.
    handshake_failures,
    /// Sessions that ended.
    disconnects,
    /// Heartbeats sent.
    heartbeats_sent,
    /// `type0` frames received.
    type0_received,
    /// `type0` frames dropped by the §3.4 checks or bad base64.
    type0_dropped,
    /// Events dropped because the receiver was full or not taken.
    events_dropped,
    /// Frames dropped because the send queue was full.
    send_queue_drops,
}

struct Current {
    link: EdgeLink,
    key: NodeKey,
    key_epoch: u32,
    out: mpsc::Sender<ControlMessage>,
}

struct Shared {
    cfg: EdgeControlConfig,
    node_id: NodeId,
    tls: Arc<rustls::ClientConfig>,
    name: ServerName<'static>,
    counters: Counters,
    current: Mutex<Option<Current>>,
    link: watch::Sender<Option<EdgeLink>>,
    events: mpsc::Sender<EdgeEvent>,
    data: Arc<Mutex<DataPlane>>,
    ids: Arc<Mutex<MessageIds>>,
    instance_id: String,
    /// The session id the edge runtime asked to close (§3.9: a failed
    /// reconfirmation aborts the connection attempt).
    abort: watch::Sender<u64>,
}

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(PoisonError::into_inner)
}

/// The running control client; dropping it (or
/// [`EdgeControl::shutdown`]) closes the connection and stops
/// reconnecting.
pub struct EdgeControl {
    shared: Arc<Shared>,
    link: watch::Receiver<Option<EdgeLink>>,
    events: Mutex<Option<mpsc::Receiver<EdgeEvent>>>,
    task: Option<tokio::task::JoinHandle<()>>,
}

impl fmt::Debug for EdgeControl {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("EdgeControl")
            .field("cfg", &self.shared.cfg)
            .field("link", &*self.link.borrow())
            .finish_non_exhaustive()
    }
}

/// Why the client could not start.
#[derive(Debug, Error)]
pub enum EdgeStartError {
    /// The TLS configuration or server name.
    #[error(transparent)]
    Tls(#[from] TlsSetupError),
    /// The credential's node id is not a valid node id.
    #[error("the credential's node id is invalid")]
    NodeId,
}

impl From<EdgeStartError> for super::super::server_error::ServerError {
    fn from(e: EdgeStartError) -> Self {
        Self::Control(Box::new(e))
    }
}

impl EdgeControl {
    /// Starts connecting (inside a tokio runtime).
    ///
    /// # Errors
    /// [`EdgeStartError`].
    pub fn start(cfg: EdgeControlConfig) -> Result<Self, EdgeStartError> {
        let node_id = NodeId::new(cfg.credential.node_id()).map_err(|_| EdgeStartError::NodeId)?;
        let tls = cfg.trust.client_config()?;
        let name = server_name(&cfg.server_name)?;
        let (link_tx, link) = watch::channel(None);
        let (events_tx, events) = mpsc::channel(EVENT_QUEUE);
        let instance_id = format!("{node_id}-{}", rand::rngs::OsRng.gen::<u64>());
        let shared = Arc::new(Shared {
            cfg,
            node_id,
            tls,
            name,
            counters: Counters::default(),
            current: Mutex::new(None),
            link: link_tx,
            abort: watch::channel(0).0,
            events: events_tx,
            data: Arc::new(Mutex::new(DataPlane::edge(
                node_id,
                DataPlaneConfig::default(),
            ))),
            ids: Arc::new(Mutex::new(MessageIds::new())),
            instance_id,
        });
        let task = tokio::spawn(reconnect_loop(Arc::clone(&shared)));
        Ok(Self {
            shared,
            link,
            events: Mutex::new(Some(events)),
            task: Some(task),
        })
    }

    /// The current session, if connected.
    pub fn link(&self) -> Option<EdgeLink> {
        self.link.borrow().clone()
    }

    /// Waits up to `within` for a session that satisfies `pred` (e.g. a
    /// session id other than the last one, after a reconnect).
    pub async fn wait_for_link(
        &self,
        within: Duration,
        pred: impl Fn(&EdgeLink) -> bool,
    ) -> Option<EdgeLink> {
        let mut rx = self.link.clone();
        let waited =
            tokio::time::timeout(within, rx.wait_for(|l| l.as_ref().is_some_and(&pred))).await;
        match waited {
            Ok(Ok(l)) => l.clone(),
            _ => None,
        }
    }

    /// The event receiver (once; later calls get `None`). Until it is
    /// taken, and whenever it is full, events are dropped and counted.
    pub fn take_events(&self) -> Option<mpsc::Receiver<EdgeEvent>> {
        lock(&self.events).take()
    }

    /// Seals `payload` in an envelope to the centre and queues it;
    /// returns its MessageID.
    ///
    /// # Errors
    /// [`ControlSendError`] (no session, full queue, payload too long).
    pub fn send_envelope(
        &self,
        envelope: &ControlEnvelope,
        payload: &[u8],
    ) -> Result<u64, ControlSendError> {
        self.shared.send_envelope(envelope, payload)
    }

    /// Seals `send` (built by the control logic, with its own MessageID,
    /// kept on resends) for the current session and queues it.
    ///
    /// # Errors
    /// [`ControlSendError`].
    pub fn send_control(&self, send: &ControlSend) -> Result<(), ControlSendError> {
        self.shared
            .send_sealed(send.message_id, &ControlEnvelope::of(send), &send.payload)
    }

    /// Queues an envelope the data plane sealed for the control path
    /// (`Path::Control`: no `CenterUDP`, §4.5) as a `type0` frame, if it
    /// belongs to the current session.
    ///
    /// # Errors
    /// [`ControlSendError::NoSession`] (none, or another session now),
    /// [`ControlSendError::QueueFull`].
    pub fn send_sealed_envelope(
        &self,
        session_id: u64,
        sealed: &[u8],
    ) -> Result<(), ControlSendError> {
        let current = lock(&self.shared.current)
            .as_ref()
            .map(|c| c.link.session_id);
        if current != Some(session_id) {
            return Err(ControlSendError::NoSession);
        }
        let message_id = sealed
            .get(MESSAGE_ID_AT..MESSAGE_ID_AT + 8)
            .and_then(|b| <[u8; 8]>::try_from(b).ok())
            .map_or(0, u64::from_be_bytes);
        self.shared.queue(ControlMessage::type0(sealed, message_id))
    }

    /// Closes the session `session_id` if it is still the current one;
    /// the client reconnects with backoff (§3.9: a failed reconfirmation
    /// aborts the attempt).
    pub fn close_session(&self, session_id: u64) {
        self.shared.abort.send_replace(session_id);
    }

    /// Queues `node_ready` (§3.6 step 5: the centre answers with the full
    /// projection).
    ///
    /// # Errors
    /// [`ControlSendError::NoSession`], [`ControlSendError::QueueFull`].
    pub fn send_node_ready(&self) -> Result<(), ControlSendError> {
        self.shared.queue(ControlMessage::new(kind::NODE_READY))
    }

    /// The edge's Type 0 data plane (its one session is the centre's),
    /// to share with the UDP path.
    pub fn data_plane(&self) -> Arc<Mutex<DataPlane>> {
        Arc::clone(&self.shared.data)
    }

    /// The process-wide MessageID counter (§3.4), shared with the UDP path.
    pub fn message_ids(&self) -> Arc<Mutex<MessageIds>> {
        Arc::clone(&self.shared.ids)
    }

    /// Current counters.
    pub fn stats(&self) -> EdgeControlStats {
        self.shared.counters.snapshot()
    }

    /// Closes the connection and stops reconnecting.
    pub async fn shutdown(mut self) {
        if let Some(task) = self.task.take() {
            task.abort();
            let _ = task.await;
        }
        self.shared.link_lost();
    }
}

impl Drop for EdgeControl {
    fn drop(&mut self) {
        if let Some(task) = &self.task {
            task.abort();
        }
        // Drops the session's sender, so its writer closes the connection.
        self.shared.link_lost();
    }
}

struct Opened {
    session_id: u64,
    frames: FrameSource<ReadHalf<Tls>>,
    write: WriteHalf<Tls>,
    queue: mpsc::Receiver<ControlMessage>,
}

async fn reconnect_loop(shared: Arc<Shared>) {
    let mut backoff = ReconnectBackoff::new();
    loop {
        match shared.open().await {
            Ok(opened) => {
                let started = tokio::time::Instant::now();
                shared.run(opened).await;
                backoff.session_ended(started.elapsed());
            }
            Err(e) => {
                let counter = match e {
                    EdgeConnectError::Connect(_) => &shared.counters.connect_failures,
                    EdgeConnectError::Tls(_) => &shared.counters.tls_failures,
                    _ => &shared.counters.handshake_failures,
                };
                counter.fetch_add(1, Relaxed);
                tracing::warn!(centre = %shared.cfg.centre, error = %e, "edge could not connect to the centre");
            }
        }
        let spread = rand::thread_rng().gen_range(-1.0..=1.0);
        tokio::time::sleep(backoff.next_delay(spread)).await;
    }
}

impl Shared {
    fn emit(&self, event: EdgeEvent) {
        if self.events.try_send(event).is_err() {
            self.counters.events_dropped.fetch_add(1, Relaxed);
        }
    }

    /// TCP, TLS and the node handshake; on success the link is up.
    async fn open(&self) -> Result<Opened, EdgeConnectError> {
        let deadline = tokio::time::Instant::now() + CONNECT_TIMEOUT;
        let tcp = tokio::time::timeout_at(deadline, TcpStream::connect(&self.cfg.centre))
            .await
            .map_err(|_| EdgeConnectError::Connect("timed out".into()))?
            .map_err(|e| EdgeConnectError::Connect(e.to_string()))?;
        let _ = tcp.set_nodelay(true);
        let tls = tokio::time::timeout_at(
            deadline,
            TlsConnector::from(Arc::clone(&self.tls)).connect(self.name.clone(), tcp),
        )
        .await
        .map_err(|_| EdgeConnectError::Tls("handshake timed out".into()))?
        .map_err(|e| EdgeConnectError::Tls(e.to_string()))?;
        let (read, mut write) = tokio::io::split(tls);
        let mut frames = FrameSource::new(read);
        let hs = EdgeHandshake::new(self.node_id, self.cfg.offer);
        let reply = tokio::time::timeout(HANDSHAKE_TIMEOUT, async {
            write_frame(&mut write, &hs.hello(self.cfg.credential.expose())).await?;
            frames.next().await.map(|(m, _)| m)
        })
        .await
        .map_err(|_| EdgeConnectError::Timeout)??;
        let session = hs.handle_reply(&reply)?;
        if session.issued.is_some() {
            tracing::warn!(
                "the centre issued a credential; this edge does not persist issued credentials"
            );
        }
        let (out, queue) = mpsc::channel(SEND_QUEUE);
        let connects = self.counters.connects.fetch_add(1, Relaxed) + 1;
        let link = EdgeLink {
            node_id: self.node_id,
            session_id: session.session.session_id,
            protocol: session.protocol,
            features: session.features,
            connects,
        };
        lock(&self.data).attach(Instant::now(), session.session.clone());
        *lock(&self.current) = Some(Current {
            link: link.clone(),
            key: session.session.key.clone(),
            key_epoch: session.session.key_epoch,
            out,
        });
        self.link.send_replace(Some(link.clone()));
        tracing::info!(
            "edge connected as {}, session {}",
            link.node_id,
            link.session_id
        );
        let session_id = link.session_id;
        self.emit(EdgeEvent::Connected(link));
        Ok(Opened {
            session_id,
            frames,
            write,
            queue,
        })
    }

    /// Carries one session until it ends.
    async fn run(&self, opened: Opened) {
        let Opened {
            session_id,
            mut frames,
            mut write,
            mut queue,
        } = opened;
        let writer = tokio::spawn(async move {
            while let Some(msg) = queue.recv().await {
                if write_frame(&mut write, &msg).await.is_err() {
                    break;
                }
            }
            let _ = write.shutdown().await;
        });
        let mut heartbeat = tokio::time::interval(self.cfg.heartbeat);
        heartbeat.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        heartbeat.tick().await;
        let mut abort = self.abort.subscribe();
        loop {
            tokio::select! {
                _ = heartbeat.tick() => self.send_heartbeat(),
                Ok(()) = abort.changed() => {
                    if *abort.borrow_and_update() == session_id {
                        tracing::warn!(session_id, "edge closes its control session");
                        break;
                    }
                }
                next = frames.next() => match next {
                    Ok((msg, _)) => {
                        if !self.handle_frame(session_id, &msg) {
                            break;
                        }
                    }
                    Err(e) => {
                        tracing::warn!(error = %e, "edge lost the centre");
                        break;
                    }
                },
            }
        }
        self.link_lost();
        // The writer ends once the session's sender (in `current`) is gone.
        let mut writer = writer;
        if tokio::time::timeout(Duration::from_secs(1), &mut writer)
            .await
            .is_err()
        {
            writer.abort();
        }
    }

    /// Handles one frame from the centre; `false` closes the session.
    fn handle_frame(&self, session_id: u64, msg: &ControlMessage) -> bool {
        let c = &self.counters;
        if msg.kind != kind::TYPE0 {
            // The centre sends nothing else after the handshake but the
            // error frame that precedes a close.
            return msg.kind != kind::NODE_PROTOCOL_ERROR && msg.kind != kind::NODE_AUTH_ERROR;
        }
        c.type0_received.fetch_add(1, Relaxed);
        let Ok(envelope) = msg.type0_envelope() else {
            c.type0_dropped.fetch_add(1, Relaxed);
            return true;
        };
        let verdict = lock(&self.data).handle_control_envelope(
            unix_ms(),
            NodeId::CENTRE,
            session_id,
            &envelope,
        );
        match verdict {
            ControlVerdict::Deliver {
                header,
                payload,
                duplicate,
            } => self.emit(EdgeEvent::Envelope {
                header,
                payload,
                duplicate,
            }),
            ControlVerdict::Drop(_) => {
                c.type0_dropped.fetch_add(1, Relaxed);
            }
            ControlVerdict::Close => {
                c.type0_dropped.fetch_add(1, Relaxed);
                if let Some(cur) = lock(&self.current).as_ref() {
                    let _ = cur.out.try_send(ControlMessage {
                        error: UNSUPPORTED_CRITICAL.to_owned(),
                        ..ControlMessage::new(kind::NODE_PROTOCOL_ERROR)
                    });
                }
                return false;
            }
        }
        true
    }

    /// A metrics-free heartbeat (§10 item 8).
    fn send_heartbeat(&self) {
        let hb = Heartbeat {
            instance_id: self.instance_id.clone(),
            sent_at_ms: unix_ms(),
            ..Heartbeat::default()
        };
        let Ok(payload) = serde_json::to_vec(&hb) else {
            return;
        };
        let env = ControlEnvelope {
            subtype: Subtype::HEARTBEAT,
            flags: Flags::CONTROL,
            cluster_epoch: 0,
            projection_version: 0,
        };
        if self.send_envelope(&env, &payload).is_ok() {
            self.counters.heartbeats_sent.fetch_add(1, Relaxed);
        }
    }

    fn send_envelope(
        &self,
        envelope: &ControlEnvelope,
        payload: &[u8],
    ) -> Result<u64, ControlSendError> {
        if lock(&self.current).is_none() {
            return Err(ControlSendError::NoSession);
        }
        let message_id = lock(&self.ids).next_id();
        self.send_sealed(message_id, envelope, payload)?;
        Ok(message_id)
    }

    fn send_sealed(
        &self,
        message_id: u64,
        envelope: &ControlEnvelope,
        payload: &[u8],
    ) -> Result<(), ControlSendError> {
        let (session_id, key, key_epoch) = {
            let cur = lock(&self.current);
            let c = cur.as_ref().ok_or(ControlSendError::NoSession)?;
            (c.link.session_id, c.key.clone(), c.key_epoch)
        };
        let keys = SessionKeys {
            source: self.node_id,
            session_id,
            key: &key,
            key_epoch,
        };
        let frame = seal_frame(&keys, message_id, envelope, payload)?;
        self.queue(frame)
    }

    fn queue(&self, frame: ControlMessage) -> Result<(), ControlSendError> {
        let out = {
            let cur = lock(&self.current);
            cur.as_ref().ok_or(ControlSendError::NoSession)?.out.clone()
        };
        out.try_send(frame).map_err(|_| {
            self.counters.send_queue_drops.fetch_add(1, Relaxed);
            ControlSendError::QueueFull
        })
    }

    /// Ends the current session, if any: detached, reported.
    fn link_lost(&self) {
        let Some(cur) = lock(&self.current).take() else {
            return;
        };
        let session_id = cur.link.session_id;
        lock(&self.data).detach(NodeId::CENTRE, session_id);
        self.link.send_replace(None);
        self.counters.disconnects.fetch_add(1, Relaxed);
        self.emit(EdgeEvent::Disconnected { session_id });
    }
}
