//! The runtime around the sans-IO core: one UDP socket, a reader thread that
//! owns the [`Reflector`], the fan-out engine's send threads, and tokio tasks
//! that persist store events and reload the directory periodically.
//!
//! Ingress runs on one thread: decode, auth and routing cost microseconds per
//! packet and keep per-device order trivially; the expensive part, fan-out,
//! is parallel. Argon2 never runs on this thread: the core emits password
//! checks, which run on tokio's blocking pool (at most
//! `session.password_checks_in_flight` at once) and come back over a bounded
//! channel, read every loop turn (≤ 20 ms).

use std::net::{SocketAddr, UdpSocket};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering::Relaxed};
use std::sync::mpsc::{self, Receiver, TrySendError};
use std::sync::{Arc, Mutex, PoisonError};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use serde::Deserialize;
use socket2::{Domain, Protocol, Socket, Type};
use thiserror::Error;
use tokio::sync::{mpsc as tmpsc, Notify};

use crate::codec::encode_raw;
use crate::directory::Directory;
use crate::fanout::{FanoutConfig, FanoutEngine, FanoutStatsSnapshot};
use crate::recording::{relative_path, Recorder, RecorderStats, Recording, RecordingConfig};
use crate::session::{check, ConfigRangeError, Reflector, SessionConfig, SessionStats, StoreEvent};
use crate::store::{Store, StoreError, StoreOptions};

/// Receive buffer size; larger datagrams are cut and then fail the 800-byte rule.
const RECV_BUF: usize = 1460;
/// How long the reader blocks before checking timers and the stop flag.
const READ_TICK: Duration = Duration::from_millis(20);
/// Store events waiting for the database at most.
const EVENT_QUEUE: usize = 4096;
/// How often the reader publishes its counters.
const STATS_EVERY: Duration = Duration::from_millis(10);

/// Server configuration: the TOML file's shape, with documented defaults.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct ServerConfig {
    /// UDP listen address. Default `0.0.0.0:60050` (the reference's port).
    pub listen: SocketAddr,
    /// Store location: a SQLite file path (created on first start), a
    /// `sqlite:` URL or a `postgres://user:password@host/db` URL (see
    /// [`Store::open`]). Default `petrel-reflector.db`. The password is
    /// redacted wherever the location is printed.
    pub db: String,
    /// Public talkgroup created on a fresh store. Default 999.
    pub default_group_id: i64,
    /// Directory reload period, ms (reference: 10 000), 1000–3600000.
    pub reload_interval_ms: u64,
    /// Text history kept, days (reference `comm.retention_days`: 30), 1–3650.
    pub message_retention_days: u32,
    /// Requested SO_RCVBUF and SO_SNDBUF, bytes (reference: 4 MiB), 64 KiB–256 MiB.
    pub socket_buffer_bytes: usize,
    /// Session-core policy.
    pub session: SessionConfig,
    /// Fan-out engine.
    pub fanout: FanoutConfig,
    /// Voice recording (off by default).
    pub recording: RecordingConfig,
    /// TCP address of `/healthz`, `/metrics` and the admin API; `None`
    /// disables HTTP. Default `127.0.0.1:9000` (the reference's web port).
    pub http_listen: Option<SocketAddr>,
    /// Bearer token for the admin API; unset disables it (404). 16+ characters.
    pub admin_token: Option<String>,
}

impl Default for ServerConfig {
    fn default() -> Self {
        Self {
            listen: SocketAddr::from(([0, 0, 0, 0], 60050)),
            db: "petrel-reflector.db".into(),
            default_group_id: 999,
            reload_interval_ms: 10_000,
            message_retention_days: 30,
            socket_buffer_bytes: 4 << 20,
            session: SessionConfig::default(),
            fanout: FanoutConfig::default(),
            recording: RecordingConfig::default(),
            http_listen: Some(SocketAddr::from(([127, 0, 0, 1], 9000))),
            admin_token: None,
        }
    }
}

impl ServerConfig {
    /// Checks every field against its range.
    pub fn validate(&self) -> Result<(), ConfigRangeError> {
        check(
            "default_group_id",
            self.default_group_id,
            1,
            i64::MAX,
            "1..",
        )?;
        check(
            "reload_interval_ms",
            self.reload_interval_ms,
            1_000,
            3_600_000,
            "1000..=3600000",
        )?;
        check(
            "socket_buffer_bytes",
            self.socket_buffer_bytes,
            64 << 10,
            256 << 20,
            "65536..=268435456",
        )?;
        self.session.validate()?;
        self.fanout.validate()?;
        self.recording.validate()
    }
}

/// Why the server could not start.
#[derive(Debug, Error)]
pub enum ServerError {
    /// A configuration value is out of range.
    #[error("config: {0}")]
    Config(#[from] ConfigRangeError),
    /// Opening or loading the store failed.
    #[error("store: {0}")]
    Store(#[from] StoreError),
    /// Socket or thread setup failed.
    #[error("io: {0}")]
    Io(#[from] std::io::Error),
}

/// Counters of a running server.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ServerStats {
    /// Session-core counters.
    pub session: SessionStats,
    /// Fan-out counters.
    pub fanout: FanoutStatsSnapshot,
    /// Devices online.
    pub online: usize,
    /// Directory reloads dropped because the reader had not taken the previous one.
    pub reloads_skipped: u64,
    /// Store writes that failed.
    pub store_errors: u64,
    /// Store events and recordings dropped because the writer's queue (4096) was full.
    pub store_events_dropped: u64,
    /// Recorder counters (all zero when recording is off).
    pub recording: RecorderStats,
}

#[derive(Debug, Default)]
struct Published {
    session: SessionStats,
    recording: RecorderStats,
    online: usize,
}

/// Where a running server's counters are read from (cheap to clone).
#[derive(Debug, Clone)]
pub(crate) struct StatsSource {
    published: Arc<Mutex<Published>>,
    fanout: Arc<crate::fanout::FanoutStats>,
    reloads_skipped: Arc<AtomicU64>,
    store_errors: Arc<AtomicU64>,
    store_events_dropped: Arc<AtomicU64>,
}

impl StatsSource {
    pub(crate) fn read(&self) -> ServerStats {
        let p = self
            .published
            .lock()
            .unwrap_or_else(PoisonError::into_inner);
        ServerStats {
            session: p.session.clone(),
            fanout: self.fanout.snapshot(),
            online: p.online,
            reloads_skipped: self.reloads_skipped.load(Relaxed),
            store_errors: self.store_errors.load(Relaxed),
            store_events_dropped: self.store_events_dropped.load(Relaxed),
            recording: p.recording.clone(),
        }
    }
}

/// A running reflector. Call [`ServerHandle::shutdown`] to stop it.
#[derive(Debug)]
pub struct ServerHandle {
    local_addr: SocketAddr,
    stop: Arc<AtomicBool>,
    http_addr: Option<SocketAddr>,
    reader: Option<JoinHandle<()>>,
    stats: StatsSource,
    reload: Arc<Notify>,
    /// Store writer first, then the tasks aborted at shutdown.
    tasks: Vec<tokio::task::JoinHandle<()>>,
}

fn bind(cfg: &ServerConfig) -> std::io::Result<UdpSocket> {
    let s = Socket::new(
        Domain::for_address(cfg.listen),
        Type::DGRAM,
        Some(Protocol::UDP),
    )?;
    if cfg.listen.is_ipv6() {
        s.set_only_v6(false)?;
    }
    // Buffers are a request; the kernel may clamp them (net.core.rmem_max).
    let _ = s.set_recv_buffer_size(cfg.socket_buffer_bytes);
    let _ = s.set_send_buffer_size(cfg.socket_buffer_bytes);
    s.bind(&cfg.listen.into())?;
    let sock: UdpSocket = s.into();
    sock.set_read_timeout(Some(READ_TICK))?;
    Ok(sock)
}

impl ServerHandle {
    /// Opens the store, binds the socket and starts every thread and task.
    /// Must be called inside a tokio runtime.
    pub async fn start(mut cfg: ServerConfig) -> Result<Self, ServerError> {
        cfg.validate()?;
        cfg.session.partitions = cfg.fanout.writers;
        let store = Store::open(
            &cfg.db,
            StoreOptions {
                default_group_id: cfg.default_group_id,
                ..StoreOptions::default()
            },
        )
        .await?;
        let dir = store.load_directory().await?;
        let sock = bind(&cfg)?;
        let local_addr = sock.local_addr()?;
        let engine = FanoutEngine::start(&sock, &cfg.fanout)?;
        let fanout = Arc::clone(engine.stats());
        let store_for_http = store.clone();

        let (event_tx, mut event_rx) = tmpsc::channel::<Persist>(EVENT_QUEUE);
        let (dir_tx, dir_rx) = mpsc::sync_channel::<Directory>(1);
        let stop = Arc::new(AtomicBool::new(false));
        let published = Arc::new(Mutex::new(Published::default()));
        let store_errors = Arc::new(AtomicU64::new(0));
        let reloads_skipped = Arc::new(AtomicU64::new(0));
        let reload_now = Arc::new(Notify::new());
        let stats = StatsSource {
            published: Arc::clone(&published),
            fanout,
            reloads_skipped: Arc::clone(&reloads_skipped),
            store_errors: Arc::clone(&store_errors),
            store_events_dropped: Arc::new(AtomicU64::new(0)),
        };
        let mut http_addr = None;
        let mut http_task = None;
        if let Some(listen) = cfg.http_listen {
            let listener = tokio::net::TcpListener::bind(listen).await?;
            http_addr = Some(listener.local_addr()?);
            let app = crate::http::router(crate::http::AppState {
                stats: stats.clone(),
                store: store_for_http,
                reload: Arc::clone(&reload_now),
                admin_token: cfg.admin_token.as_deref().map(Arc::from),
            });
            http_task = Some(tokio::spawn(async move {
                if let Err(e) = axum::serve(listener, app).await {
                    tracing::warn!(error = %e, "http server stopped");
                }
            }));
        }

        let writer_store = store.clone();
        let errs = Arc::clone(&store_errors);
        let rec_dir = std::path::PathBuf::from(&cfg.recording.dir);
        let events = tokio::spawn(async move {
            while let Some(p) = event_rx.recv().await {
                let result = match p {
                    Persist::Event(e) => writer_store.apply(&e).await.map_err(|e| e.to_string()),
                    Persist::Recording(r) => write_recording(&rec_dir, &writer_store, &r).await,
                };
                if let Err(err) = result {
                    errs.fetch_add(1, Relaxed);
                    tracing::warn!(error = %err, "store write failed");
                }
            }
        });
        let period = Duration::from_millis(cfg.reload_interval_ms);
        let skipped = Arc::clone(&reloads_skipped);
        let errs = Arc::clone(&store_errors);
        let now_signal = Arc::clone(&reload_now);
        let retention_days = cfg.message_retention_days;
        let reload = tokio::spawn(async move {
            let mut tick = tokio::time::interval(period);
            tick.tick().await;
            loop {
                tokio::select! {
                    _ = tick.tick() => {}
                    () = now_signal.notified() => {}
                }
                let keep_ms = i64::from(retention_days) * 86_400_000;
                if let Err(err) = store.prune_messages(unix_ms() - keep_ms).await {
                    errs.fetch_add(1, Relaxed);
                    tracing::warn!(error = %err, "message pruning failed");
                }
                match store.load_directory().await {
                    Ok(d) => {
                        if let Err(TrySendError::Full(_)) = dir_tx.try_send(d) {
                            skipped.fetch_add(1, Relaxed);
                        }
                    }
                    Err(err) => {
                        errs.fetch_add(1, Relaxed);
                        tracing::warn!(error = %err, "directory reload failed");
                    }
                }
            }
        });

        let mut core = Reflector::new(cfg.session.clone(), dir, Instant::now());
        if cfg.recording.enabled {
            core = core.with_recorder(Recorder::new(cfg.recording.clone()));
        }
        let (checks_tx, checks_rx) = mpsc::sync_channel(cfg.session.password_checks_in_flight);
        let io = ReaderIo {
            runtime: tokio::runtime::Handle::current(),
            checks_tx,
            checks_rx,
            sock,
            events: event_tx,
            events_dropped: Arc::clone(&stats.store_events_dropped),
            dirs: dir_rx,
            stop: Arc::clone(&stop),
            published: Arc::clone(&published),
        };
        let reader = std::thread::Builder::new()
            .name("refl-ingress".into())
            .spawn(move || reader_loop(core, &io, engine))?;
        tracing::info!(%local_addr, "reflector listening");
        let mut tasks = vec![events, reload];
        tasks.extend(http_task);
        Ok(Self {
            local_addr,
            http_addr,
            stop,
            reader: Some(reader),
            stats,
            reload: reload_now,
            tasks,
        })
    }

    /// The bound UDP address.
    pub fn local_addr(&self) -> SocketAddr {
        self.local_addr
    }

    /// The bound HTTP address, if HTTP is enabled.
    pub fn http_addr(&self) -> Option<SocketAddr> {
        self.http_addr
    }

    /// Current counters (session counters lag by at most ~20 ms).
    pub fn stats(&self) -> ServerStats {
        self.stats.read()
    }

    /// Reloads the directory from the store now instead of at the next interval.
    pub fn reload_now(&self) {
        self.reload.notify_one();
    }

    /// Stops ingress, the send threads and the reload task, then lets the
    /// store writer finish the events already queued.
    pub async fn shutdown(mut self) {
        self.stop.store(true, Relaxed);
        if let Some(r) = self.reader.take() {
            let _ = tokio::task::spawn_blocking(move || r.join()).await;
        }
        let mut tasks = std::mem::take(&mut self.tasks).into_iter();
        let writer = tasks.next();
        for t in tasks {
            t.abort();
        }
        // The reader has exited, so the event channel is closed and the
        // writer ends after the queued events.
        if let Some(w) = writer {
            let _ = w.await;
        }
    }
}

impl Drop for ServerHandle {
    fn drop(&mut self) {
        self.stop.store(true, Relaxed);
        for t in &self.tasks {
            t.abort();
        }
    }
}

fn unix_ms() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| i64::try_from(d.as_millis()).unwrap_or(i64::MAX))
}

/// Work for the background writer.
#[derive(Debug)]
enum Persist {
    Event(StoreEvent),
    Recording(Recording),
}

/// Writes `<dir>/<YYYY>/<MM>/<D>/….raw` and its store row.
async fn write_recording(
    dir: &std::path::Path,
    store: &Store,
    r: &Recording,
) -> Result<(), String> {
    let rel = relative_path(r);
    let path = dir.join(&rel);
    let frames: Vec<&[u8]> = r.frames.iter().map(Vec::as_slice).collect();
    let bytes = encode_raw(&frames).map_err(|e| e.to_string())?;
    if let Some(parent) = path.parent() {
        tokio::fs::create_dir_all(parent)
            .await
            .map_err(|e| e.to_string())?;
    }
    tokio::fs::write(&path, &bytes)
        .await
        .map_err(|e| format!("{}: {e}", path.display()))?;
    store
        .add_recording(r, &rel, bytes.len() as u64)
        .await
        .map_err(|e| e.to_string())
}

/// What the reader thread talks to.
struct ReaderIo {
    /// Where password checks run (`spawn_blocking`).
    runtime: tokio::runtime::Handle,
    /// Check results: (check id, password matched).
    checks_tx: mpsc::SyncSender<(u64, bool)>,
    checks_rx: Receiver<(u64, bool)>,
    sock: UdpSocket,
    events: tmpsc::Sender<Persist>,
    events_dropped: Arc<AtomicU64>,
    dirs: Receiver<Directory>,
    stop: Arc<AtomicBool>,
    published: Arc<Mutex<Published>>,
}

fn reader_loop(mut core: Reflector, io: &ReaderIo, mut engine: FanoutEngine) {
    let ReaderIo {
        runtime,
        checks_tx,
        checks_rx,
        sock,
        events,
        events_dropped,
        dirs,
        stop,
        published,
    } = io;
    let mut buf = [0u8; RECV_BUF];
    let mut last_publish = Instant::now();
    core.set_wall_clock(last_publish, unix_ms());
    while !stop.load(Relaxed) {
        match sock.recv_from(&mut buf) {
            Ok((n, src)) => core.handle_datagram(Instant::now(), src, &buf[..n]),
            Err(e)
                if matches!(
                    e.kind(),
                    std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut
                ) => {}
            Err(e) => tracing::debug!(error = %e, "recv_from"),
        }
        let now = Instant::now();
        if now >= core.poll_timeout() {
            core.set_wall_clock(now, unix_ms());
            core.handle_timeout(now);
        }
        if let Ok(d) = dirs.try_recv() {
            core.replace_directory(d);
        }
        while let Ok((id, ok)) = checks_rx.try_recv() {
            core.handle_password_check(now, id, ok);
        }
        while let Some(check) = core.poll_password_check() {
            let tx = checks_tx.clone();
            // The channel holds one result per check in flight, so this send
            // waits only while the reader is between two drains.
            runtime.spawn_blocking(move || {
                let _ = tx.send((check.id(), check.run()));
            });
        }
        while let Some(t) = core.poll_transmit() {
            if let Err(e) = sock.send_to(&t.payload, t.dst) {
                tracing::debug!(error = %e, dst = %t.dst, "reply send failed");
            }
        }
        while let Some(f) = core.poll_frame() {
            engine.submit(f);
        }
        let mut store_events: Vec<Persist> = std::iter::from_fn(|| core.poll_event())
            .map(Persist::Event)
            .collect();
        store_events.extend(std::iter::from_fn(|| core.poll_recording()).map(Persist::Recording));
        for p in store_events {
            if events.try_send(p).is_err() {
                events_dropped.fetch_add(1, Relaxed);
            }
        }
        if now.saturating_duration_since(last_publish) >= STATS_EVERY {
            last_publish = now;
            let mut p = published.lock().unwrap_or_else(PoisonError::into_inner);
            p.session = core.stats().clone();
            p.online = core.online();
            if let Some(r) = core.recorder_stats() {
                p.recording = r.clone();
            }
        }
    }
    engine.shutdown();
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn example_config_equals_defaults() {
        let text = include_str!("../reflector.example.toml");
        let cfg: ServerConfig = toml::from_str(text).unwrap();
        assert_eq!(cfg, ServerConfig::default());
        assert!(cfg.validate().is_ok());
    }

    #[test]
    fn unknown_keys_and_bad_ranges_are_errors() {
        assert!(toml::from_str::<ServerConfig>("listen_port = 1").is_err());
        let cfg: ServerConfig = toml::from_str("[fanout]\nframe_queue = 0").unwrap();
        assert_eq!(cfg.validate().unwrap_err().field, "frame_queue");
    }
}
