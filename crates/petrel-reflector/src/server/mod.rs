//! The runtime around the sans-IO core: one UDP socket; a reader thread
//! and `ingress_workers` shard threads, each shard owning one [`Reflector`]
//! (the private `ingress` module); the fan-out engine's send threads; and tokio tasks
//! that persist store events and reload the directory periodically.

mod ingress;

use std::net::{SocketAddr, UdpSocket};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering::Relaxed};
use std::sync::mpsc::{self, SyncSender, TrySendError};
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
use crate::session::{
    check, ConfigRangeError, Ingress, IngressStats, Reflector, SessionConfig, SessionStats,
    SharedState, StoreEvent,
};
use crate::store::{Store, StoreError, StoreOptions};
use crate::verifier::{PasswordVerifier, VerifierConfig, VerifierError, VerifierStats};

/// Store events waiting for the database at most.
const EVENT_QUEUE: usize = 4096;
/// Smallest queue per ingress shard (reference: 64).
const MIN_SHARD_QUEUE: usize = 64;

/// Server configuration: the TOML file's shape, with documented defaults.
/// Its `Debug` output redacts the database password and the admin token.
#[derive(Clone, PartialEq, Eq, Deserialize)]
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
    /// Ingress shards (reference `UDP.IngressWorkers`), 1–64. Default 2.
    /// Each runs the session core for the devices whose username + SSID
    /// hash to it.
    pub ingress_workers: usize,
    /// Datagrams queued for the shards in total, divided equally with at
    /// least 64 each (reference: 4096), 64–1048576; a full shard queue drops
    /// and counts.
    pub ingress_queue: usize,
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
            ingress_workers: 2,
            ingress_queue: 4096,
            session: SessionConfig::default(),
            fanout: FanoutConfig::default(),
            recording: RecordingConfig::default(),
            http_listen: Some(SocketAddr::from(([127, 0, 0, 1], 9000))),
            admin_token: None,
        }
    }
}

impl std::fmt::Debug for ServerConfig {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ServerConfig")
            .field("listen", &self.listen)
            .field("db", &crate::store::redact(&self.db))
            .field("default_group_id", &self.default_group_id)
            .field("reload_interval_ms", &self.reload_interval_ms)
            .field("message_retention_days", &self.message_retention_days)
            .field("socket_buffer_bytes", &self.socket_buffer_bytes)
            .field("ingress_workers", &self.ingress_workers)
            .field("ingress_queue", &self.ingress_queue)
            .field("session", &self.session)
            .field("fanout", &self.fanout)
            .field("recording", &self.recording)
            .field("http_listen", &self.http_listen)
            .field("admin_token", &self.admin_token.as_ref().map(|_| "***"))
            .finish()
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
        check("ingress_workers", self.ingress_workers, 1, 64, "1..=64")?;
        check(
            "ingress_queue",
            self.ingress_queue,
            64,
            1 << 20,
            "64..=1048576",
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

/// Requested and actual socket buffer sizes, bytes (Linux reports twice
/// the usable size, as the reference notes).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct SocketBuffers {
    /// `socket_buffer_bytes` as configured.
    pub requested: usize,
    /// SO_RCVBUF read back.
    pub recv_actual: usize,
    /// SO_SNDBUF read back.
    pub send_actual: usize,
}

/// Counters of a running server.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ServerStats {
    /// Reader counters (rate limits, full shard queues).
    pub ingress: IngressStats,
    /// Ingress shards running.
    pub ingress_workers: usize,
    /// Session-core counters, summed over shards.
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
    /// Recorder counters, summed over shards (all zero when recording is off).
    pub recording: RecorderStats,
    /// The Argon2 verifier pool shared by the shards.
    pub password_checks: VerifierStats,
    /// Socket buffer sizes.
    pub socket: SocketBuffers,
}

/// What one shard publishes every 10 ms.
#[derive(Debug, Default)]
struct Published {
    session: SessionStats,
    recording: RecorderStats,
}

/// Where a running server's counters are read from (cheap to clone).
#[derive(Debug, Clone)]
pub(crate) struct StatsSource {
    ingress: Arc<Mutex<IngressStats>>,
    shards: Vec<Arc<Mutex<Published>>>,
    shared: Arc<SharedState>,
    socket: SocketBuffers,
    verifier: Arc<PasswordVerifier>,
    fanout: Arc<crate::fanout::FanoutStats>,
    reloads_skipped: Arc<AtomicU64>,
    store_errors: Arc<AtomicU64>,
    store_events_dropped: Arc<AtomicU64>,
}

impl StatsSource {
    pub(crate) fn read(&self) -> ServerStats {
        let mut session = SessionStats::default();
        let mut recording = RecorderStats::default();
        for shard in &self.shards {
            let p = shard.lock().unwrap_or_else(PoisonError::into_inner);
            session.add(&p.session);
            recording.add(&p.recording);
        }
        ServerStats {
            ingress: self
                .ingress
                .lock()
                .unwrap_or_else(PoisonError::into_inner)
                .clone(),
            ingress_workers: self.shards.len(),
            session,
            fanout: self.fanout.snapshot(),
            online: self.shared.online(),
            reloads_skipped: self.reloads_skipped.load(Relaxed),
            store_errors: self.store_errors.load(Relaxed),
            store_events_dropped: self.store_events_dropped.load(Relaxed),
            recording,
            password_checks: self.verifier.stats(),
            socket: self.socket,
        }
    }
}

/// A running reflector. Call [`ServerHandle::shutdown`] to stop it.
#[derive(Debug)]
pub struct ServerHandle {
    local_addr: SocketAddr,
    stop: Arc<AtomicBool>,
    http_addr: Option<SocketAddr>,
    /// The reader, then the shards.
    threads: Vec<JoinHandle<()>>,
    stats: StatsSource,
    reload: Arc<Notify>,
    /// Store writer first, then the tasks aborted at shutdown.
    tasks: Vec<tokio::task::JoinHandle<()>>,
}

fn bind(cfg: &ServerConfig) -> std::io::Result<(UdpSocket, SocketBuffers)> {
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
    let buffers = SocketBuffers {
        requested: cfg.socket_buffer_bytes,
        recv_actual: s.recv_buffer_size().unwrap_or(0),
        send_actual: s.send_buffer_size().unwrap_or(0),
    };
    let sock: UdpSocket = s.into();
    sock.set_read_timeout(Some(ingress::READ_TICK))?;
    Ok((sock, buffers))
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
        let (sock, socket) = bind(&cfg)?;
        let local_addr = sock.local_addr()?;
        let engine = Arc::new(FanoutEngine::start(&sock, &cfg.fanout)?);
        let verifier = Arc::new(
            PasswordVerifier::start(&VerifierConfig {
                threads: cfg.session.password_checks_in_flight,
                ..VerifierConfig::default()
            })
            .map_err(|e| match e {
                VerifierError::Config(e) => ServerError::Config(e),
                VerifierError::Spawn(e) => ServerError::Io(e),
            })?,
        );
        let workers = cfg.ingress_workers;
        let shared = Arc::new(SharedState::new(&cfg.session, Instant::now()));
        let stats = StatsSource {
            ingress: Arc::default(),
            shards: (0..workers).map(|_| Arc::default()).collect(),
            shared: Arc::clone(&shared),
            socket,
            verifier: Arc::clone(&verifier),
            fanout: Arc::clone(engine.stats()),
            reloads_skipped: Arc::default(),
            store_errors: Arc::default(),
            store_events_dropped: Arc::default(),
        };
        let stop = Arc::new(AtomicBool::new(false));
        let reload_now = Arc::new(Notify::new());
        let (http_addr, http_task) = match cfg.http_listen {
            Some(listen) => {
                let state = crate::http::AppState {
                    stats: stats.clone(),
                    store: store.clone(),
                    reload: Arc::clone(&reload_now),
                    admin_token: cfg.admin_token.as_deref().map(Arc::from),
                };
                let (addr, task) = spawn_http(listen, state).await?;
                (Some(addr), Some(task))
            }
            None => (None, None),
        };
        let (event_tx, events) = spawn_store_writer(&store, &cfg, &stats);
        let mut dir_txs = Vec::new();
        let mut threads = Vec::new();
        let mut queues = Vec::new();
        let queue_len = (cfg.ingress_queue / workers).max(MIN_SHARD_QUEUE);
        // One result channel per shard, each able to hold every check in
        // flight; results from the shared pool are routed by check id.
        let in_flight = cfg.session.password_checks_in_flight;
        let (routes, mut results): (Vec<_>, Vec<_>) = (0..workers)
            .map(|_| mpsc::sync_channel::<(u64, bool)>(in_flight))
            .unzip();
        let routes = Arc::new(routes);
        for (i, published) in stats.shards.iter().enumerate() {
            let (dir_tx, dirs) = mpsc::sync_channel::<Directory>(1);
            let (queue_tx, queue) = mpsc::sync_channel(queue_len);
            let mut core = Reflector::shard(
                cfg.session.clone(),
                dir.clone(),
                Instant::now(),
                Arc::clone(&shared),
            )
            .with_check_ids(i as u64, workers as u64);
            if cfg.recording.enabled {
                let mut rec = cfg.recording.clone();
                rec.max_active = (rec.max_active / workers).max(1);
                core = core.with_recorder(Recorder::new(rec));
            }
            let io = ingress::ShardIo {
                queue,
                sock: sock.try_clone()?,
                engine: Arc::clone(&engine),
                verifier: Arc::clone(&verifier),
                routes: Arc::clone(&routes),
                results: results.remove(0),
                events: event_tx.clone(),
                events_dropped: Arc::clone(&stats.store_events_dropped),
                dirs,
                stop: Arc::clone(&stop),
                published: Arc::clone(published),
            };
            threads.push(
                std::thread::Builder::new()
                    .name(format!("refl-shard-{i}"))
                    .spawn(move || ingress::shard_loop(core, &io))?,
            );
            dir_txs.push(dir_tx);
            queues.push(queue_tx);
        }
        drop(engine);
        let reader = ingress::Reader {
            sock,
            ingress: Ingress::new(&cfg.session, workers),
            shards: queues,
            stop: Arc::clone(&stop),
            published: Arc::clone(&stats.ingress),
        };
        threads.insert(
            0,
            std::thread::Builder::new()
                .name("refl-ingress".into())
                .spawn(move || ingress::reader_loop(reader))?,
        );
        let reload = spawn_reload(store, &cfg, dir_txs, &stats, Arc::clone(&reload_now));
        tracing::info!(%local_addr, workers, "reflector listening");
        let mut tasks = vec![events, reload];
        tasks.extend(http_task);
        Ok(Self {
            local_addr,
            http_addr,
            stop,
            threads,
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
        let threads = std::mem::take(&mut self.threads);
        let _ = tokio::task::spawn_blocking(move || {
            for t in threads {
                let _ = t.join();
            }
        })
        .await;
        let mut tasks = std::mem::take(&mut self.tasks).into_iter();
        let writer = tasks.next();
        for t in tasks {
            t.abort();
        }
        // The shards have exited, so the event channel is closed and the
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

async fn spawn_http(
    listen: SocketAddr,
    state: crate::http::AppState,
) -> std::io::Result<(SocketAddr, tokio::task::JoinHandle<()>)> {
    let listener = tokio::net::TcpListener::bind(listen).await?;
    let addr = listener.local_addr()?;
    let app = crate::http::router(state);
    let task = tokio::spawn(async move {
        if let Err(e) = axum::serve(listener, app).await {
            tracing::warn!(error = %e, "http server stopped");
        }
    });
    Ok((addr, task))
}

/// The task that persists store events and recordings, in order.
fn spawn_store_writer(
    store: &Store,
    cfg: &ServerConfig,
    stats: &StatsSource,
) -> (tmpsc::Sender<Persist>, tokio::task::JoinHandle<()>) {
    let (tx, mut rx) = tmpsc::channel::<Persist>(EVENT_QUEUE);
    let store = store.clone();
    let errs = Arc::clone(&stats.store_errors);
    let rec_dir = std::path::PathBuf::from(&cfg.recording.dir);
    let task = tokio::spawn(async move {
        while let Some(p) = rx.recv().await {
            let result = match p {
                Persist::Event(e) => store.apply(&e).await.map_err(|e| e.to_string()),
                Persist::Recording(r) => write_recording(&rec_dir, &store, &r).await,
            };
            if let Err(err) = result {
                errs.fetch_add(1, Relaxed);
                tracing::warn!(error = %err, "store write failed");
            }
        }
    });
    (tx, task)
}

/// The task that prunes text history and reloads the directory into every
/// shard each `reload_interval_ms`, or at once when `now` is notified.
fn spawn_reload(
    store: Store,
    cfg: &ServerConfig,
    shards: Vec<SyncSender<Directory>>,
    stats: &StatsSource,
    now: Arc<Notify>,
) -> tokio::task::JoinHandle<()> {
    let period = Duration::from_millis(cfg.reload_interval_ms);
    let skipped = Arc::clone(&stats.reloads_skipped);
    let errs = Arc::clone(&stats.store_errors);
    let keep_ms = i64::from(cfg.message_retention_days) * 86_400_000;
    tokio::spawn(async move {
        let mut tick = tokio::time::interval(period);
        tick.tick().await;
        loop {
            tokio::select! {
                _ = tick.tick() => {}
                () = now.notified() => {}
            }
            if let Err(err) = store.prune_messages(unix_ms() - keep_ms).await {
                errs.fetch_add(1, Relaxed);
                tracing::warn!(error = %err, "message pruning failed");
            }
            match store.load_directory().await {
                Ok(d) => {
                    for shard in &shards {
                        if let Err(TrySendError::Full(_)) = shard.try_send(d.clone()) {
                            skipped.fetch_add(1, Relaxed);
                        }
                    }
                }
                Err(err) => {
                    errs.fetch_add(1, Relaxed);
                    tracing::warn!(error = %err, "directory reload failed");
                }
            }
        }
    })
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn example_config_equals_defaults() {
        let text = include_str!("../../reflector.example.toml");
        let cfg: ServerConfig = toml::from_str(text).unwrap();
        assert_eq!(cfg, ServerConfig::default());
        assert!(cfg.validate().is_ok());
    }

    #[test]
    fn debug_output_redacts_secrets() {
        let cfg = ServerConfig {
            db: "postgres://petrel:hunter2secret@db.example/petrel".into(),
            admin_token: Some("token-0123456789abcdef".into()),
            ..ServerConfig::default()
        };
        let text = format!("{cfg:?}");
        assert!(!text.contains("hunter2secret"), "{text}");
        assert!(!text.contains("token-0123456789abcdef"), "{text}");
        assert!(text.contains("db.example") && text.contains("ingress_workers: 2"));
    }

    #[test]
    fn unknown_keys_and_bad_ranges_are_errors() {
        assert!(toml::from_str::<ServerConfig>("listen_port = 1").is_err());
        let cfg: ServerConfig = toml::from_str("[fanout]\nframe_queue = 0").unwrap();
        assert_eq!(cfg.validate().unwrap_err().field, "frame_queue");
    }
}
