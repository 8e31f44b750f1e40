//! Starting and stopping a reflector: one UDP socket; a reader thread and
//! `ingress_workers` shard threads, each shard owning one [`Reflector`]
//! (see `shard.rs`); the fan-out engine's send threads; the Argon2 pool;
//! and tokio tasks that persist store events, reload the directory
//! periodically, serve HTTP and sample the dashboard's counters.

use std::net::{SocketAddr, UdpSocket};
use std::sync::atomic::{AtomicBool, Ordering::Relaxed};
use std::sync::mpsc::{self, SyncSender, TrySendError};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use petrel_sys::error_queue::enable_recv_errors;
use petrel_sys::socket::{bind_udp, BufferRequest, OnRefusal, SocketBuffers, UdpOptions};
use tokio::sync::Notify;

use super::app_accounts::AppAccounts;
use super::app_authority::AppAuthority;
use super::app_http::{AppApi, GroupPresence};
use super::dashboard::{self, Dashboard};
use super::fanout::{ConnectionSink, FanoutEngine};
use super::http::AdminToken;
use super::icmp::{IcmpCounters, IcmpWatch, REPORT_QUEUE};
use super::interconnect::{
    centre_identity, CentreDirectory, CentreDispatch, CentreRelay, CentreReload, CentreServices,
    CentreStore, CentreVoiceSource, ControlServer, DirectSessions, IdentityError, NodeAuthority,
    RelayParts, CENTRE_EVENT_QUEUE,
};
use super::recording_files::RecordingFiles;
use super::session_revocation::SessionRevocation;
use super::shard::{self, ShardIo};
use super::shared_tables::SharedTables;
use super::stats::{HistoryStats, ServerStats, StatsSource};
use super::store::{Store, StoreOptions};
use super::store_writer::{spawn_store_writer, Persist};
use super::text_history::TextHistory;
use super::verifier::{PasswordVerifier, VerifierError};
use super::wall_clock::unix_ms;
use super::websocket_hub::WebSocketHub;
use crate::core::interconnect::TalkLimit;
use crate::core::interconnect::MAX_SESSION_ENTRIES;
use crate::core::{Ingress, Recorder, Reflector};

use crate::model::{AppApiConfig, Directory, HttpConfig, Recording, StoreEvent, VerifierConfig};

pub use super::server_error::ServerError;
pub use crate::model::ServerConfig;

/// Smallest queue per ingress shard (reference: 64).
const MIN_SHARD_QUEUE: usize = 64;

/// A running reflector. Call [`ServerHandle::shutdown`] to stop it.
#[derive(Debug)]
pub struct ServerHandle {
    local_addr: SocketAddr,
    /// The account side of app logins, with `[apps]`.
    app_accounts: Option<AppAccounts>,
    stop: Arc<AtomicBool>,
    http_addr: Option<SocketAddr>,
    /// The reader, then the shards.
    threads: Vec<JoinHandle<()>>,
    stats: StatsSource,
    reload: Arc<Notify>,
    /// Store writer first, then the tasks aborted at shutdown.
    tasks: Vec<tokio::task::JoinHandle<()>>,
    /// The centre's control server for edges, with `[interconnect]`.
    control: Option<ControlServer>,
    /// The dispatcher of the control server's events (route sync, §3.7).
    dispatch: Option<CentreDispatch>,
}

fn bind(cfg: &ServerConfig) -> Result<(UdpSocket, SocketBuffers), ServerError> {
    // Buffers are a request; the kernel may clamp them (net.core.rmem_max).
    let (sock, buffers) = bind_udp(&UdpOptions {
        buffers: BufferRequest::both(cfg.socket_buffer_bytes),
        on_refusal: OnRefusal::Ignore,
        dual_stack: true,
        ..UdpOptions::new(cfg.listen)
    })
    .map_err(|cause| ServerError::Bind {
        what: "UDP listen socket",
        addr: cfg.listen,
        cause,
    })?;
    sock.set_read_timeout(Some(shard::READ_TICK))?;
    // ICMP errors end unreachable sessions (see `icmp.rs`); without them
    // (off Linux) sessions end at the liveness timeout only.
    if !enable_recv_errors(&sock)? {
        tracing::info!("ICMP errors are not reported on this platform");
    }
    Ok((sock, buffers))
}

impl ServerHandle {
    /// Binds the UDP socket and the HTTP listener, opens the store, and
    /// starts every thread and task. Binding comes first, so a start that
    /// fails on a taken address creates no SQLite file.
    /// Must be called inside a tokio runtime.
    ///
    /// Without an [`AppAuthority`] (see [`ServerHandle::start_with_apps`]),
    /// app clients cannot log in: every Type 1 login is refused as an
    /// invalid token (`specs/draarl-apps.md` §2.2 step 4), as is every
    /// WebSocket upgrade.
    pub async fn start(cfg: ServerConfig) -> Result<Self, ServerError> {
        Self::start_with_apps(cfg, None).await
    }

    /// [`ServerHandle::start`] with the account store that authorises app
    /// logins and routing changes (`specs/draarl-apps.md` §2.2 steps 4–6,
    /// §3.4 rows 5–7).
    pub async fn start_with_apps(
        cfg: ServerConfig,
        app_authority: Option<Arc<dyn AppAuthority>>,
    ) -> Result<Self, ServerError> {
        cfg.validate()?;
        let session = cfg.session_policy();
        let (sock, socket) = bind(&cfg)?;
        let http_listener = match cfg.http_listen {
            Some(addr) => Some(tokio::net::TcpListener::bind(addr).await.map_err(|cause| {
                ServerError::Bind {
                    what: "HTTP server",
                    addr,
                    cause,
                }
            })?),
            None => None,
        };
        let control_listener =
            if cfg.interconnect.enabled {
                let addr = cfg.interconnect.control_listen;
                Some(tokio::net::TcpListener::bind(addr).await.map_err(|cause| {
                    ServerError::Bind {
                        what: "interconnect control listener",
                        addr,
                        cause,
                    }
                })?)
            } else {
                None
            };
        let store = Store::open(
            &cfg.db,
            StoreOptions {
                default_group_id: cfg.default_group_id,
                ..StoreOptions::default()
            },
        )
        .await?;
        let dir = store.load_directory().await?;
        let history = Arc::new(HistoryStats::default());
        let text_history =
            TextHistory::load(&store, cfg.message_history_max_bytes, &history).await?;
        let recordings = if cfg.recording.enabled {
            let rec_dir = std::path::PathBuf::from(&cfg.recording.dir);
            let quota = cfg.recording.max_total_bytes;
            Some(RecordingFiles::load(rec_dir, quota, &store, &history).await?)
        } else {
            None
        };
        let local_addr = sock.local_addr()?;
        let max_websockets = cfg
            .apps
            .as_ref()
            .map_or(AppApiConfig::default().max_websocket_sessions, |a| {
                a.max_websocket_sessions
            });
        let websockets = Arc::new(WebSocketHub::new(max_websockets));
        let sink: Arc<dyn ConnectionSink> = websockets.clone();
        let engine = Arc::new(FanoutEngine::start(&sock, &cfg.fanout, Some(sink))?);
        let verifier = Arc::new(
            PasswordVerifier::start(&VerifierConfig {
                threads: session.password_checks_in_flight,
                ..VerifierConfig::default()
            })
            .map_err(|e| match e {
                VerifierError::Config(e) => ServerError::Config(e),
                VerifierError::Spawn(e) => ServerError::Io(e),
            })?,
        );
        let workers = cfg.ingress_workers;
        let shared = Arc::new(SharedTables::new(&session, Instant::now()));
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
            http: Arc::default(),
            app_auth: Arc::default(),
            history,
            icmp: Arc::new(IcmpCounters::default()),
            websockets: Arc::clone(&websockets),
            interconnect: None,
            interconnect_routes: None,
            interconnect_voice: None,
        };
        let (event_tx, events) =
            spawn_store_writer(&store, text_history.clone(), recordings, &stats);
        let centre_dir = control_listener
            .is_some()
            .then(|| Arc::new(CentreDirectory::new(dir.clone())));
        // Each shard's queue of centre-direct sessions to end (a centre's
        // edge logins, `centre_direct_sessions.rs`); none without one.
        let mut evictions = Vec::new();
        let control = match (control_listener, &centre_dir) {
            (Some(listener), Some(directory)) => {
                let identity = centre_identity(&cfg.interconnect, &store).await?;
                let tls = identity.server_config().map_err(IdentityError::from)?;
                let (events_tx, centre_events) = tokio::sync::mpsc::channel(CENTRE_EVENT_QUEUE);
                let server = ControlServer::start(
                    listener,
                    &cfg.interconnect,
                    tls,
                    NodeAuthority::from_store(store.clone()),
                    Some(events_tx),
                )?;
                // A new cluster epoch per centre start (§6.3): the start time.
                let epoch = u64::try_from(unix_ms()).unwrap_or(1);
                let (direct, receivers) = DirectSessions::channels(workers);
                evictions = receivers;
                let services = CentreServices {
                    directory: Arc::clone(directory),
                    shared: Arc::clone(&shared),
                    verifier: Arc::clone(&verifier),
                    store: Arc::new(StoreSink(event_tx.clone())),
                    password_checks_in_flight: session.password_checks_in_flight,
                    direct,
                    recovery_window: Duration::from_secs(
                        cfg.interconnect.session_recovery_window_seconds,
                    ),
                    recovered: store.session_entries(MAX_SESSION_ENTRIES).await?,
                    endpoints: session.endpoints,
                };
                let dispatch =
                    CentreDispatch::spawn_with(server.sender(), centre_events, epoch, services)?;
                // The max-talk rule of the local floors holds for the
                // speaker leases too (`speaker_lease_centre.rs`).
                dispatch
                    .devices()
                    .lock()
                    .unwrap_or_else(std::sync::PoisonError::into_inner)
                    .leases
                    .set_talk_limit(Some(TalkLimit {
                        max_talk: Duration::from_secs(session.floor_max_talk_s),
                        holdoff: Duration::from_millis(session.floor_holdoff_ms),
                    }));
                Some((server, dispatch))
            }
            _ => None,
        };
        let (control, dispatch) = match control {
            Some((c, d)) => (Some(c), Some(d)),
            None => (None, None),
        };
        let stats = StatsSource {
            interconnect: control.as_ref().map(ControlServer::stats_source),
            interconnect_routes: dispatch.as_ref().map(CentreDispatch::routes),
            interconnect_voice: match (&control, &dispatch) {
                (Some(c), Some(d)) => Some(CentreVoiceSource {
                    stats: d.voice_stats(),
                    devices: d.devices(),
                    data: c.data_plane(),
                }),
                _ => None,
            },
            ..stats
        };
        let stop = Arc::new(AtomicBool::new(false));
        let reload_now = Arc::new(Notify::new());
        let dash = Dashboard::new(dir.clone());
        // The `[apps]` section in force: on, with port 0 resolved to the UDP
        // listen port.
        let apps_cfg = cfg.apps.clone().filter(|a| a.enabled).map(|mut a| {
            if a.public_port == 0 {
                a.public_port = local_addr.port();
            }
            a
        });
        let app_accounts = match &apps_cfg {
            Some(_) => Some(
                AppAccounts::from_config(&cfg, store.clone(), Arc::clone(&stats.app_auth)).await?,
            ),
            None => None,
        };
        let apps = match (&apps_cfg, &app_accounts) {
            (Some(apps_cfg), Some(accounts)) => {
                let presence: Vec<Arc<dyn GroupPresence>> = vec![shared.clone()];
                let api = AppApi::new(
                    accounts.clone(),
                    apps_cfg.clone(),
                    cfg.login_captcha,
                    presence,
                );
                Some((api, apps_cfg.clone()))
            }
            _ => None,
        };
        // Type 1 logins go to the given authority, else to the account
        // store's when the app API is on.
        let app_authority = app_authority.or_else(|| {
            app_accounts
                .clone()
                .map(|a| Arc::new(a) as Arc<dyn AppAuthority>)
        });
        let mut dir_txs = Vec::new();
        let mut threads = Vec::new();
        // A centre's relay (draarl-interconnect §5.2): the reader's Type 0
        // hook, its worker thread, and the shards' centre-direct frames.
        let relay = match (&control, &dispatch, &centre_dir) {
            (Some(c), Some(d), Some(directory)) => {
                let parts = RelayParts {
                    data: c.data_plane(),
                    control_stats: c.stats_source(),
                    tables: d.tables(),
                    stats: d.voice_stats(),
                    directory: Arc::clone(directory),
                    shared: Arc::clone(&shared),
                    engine: Arc::clone(&engine),
                    sock: sock.try_clone()?,
                    store: Arc::new(StoreSink(event_tx.clone())),
                    recording: cfg
                        .recording
                        .enabled
                        .then(|| cfg.recording.per_shard(workers)),
                };
                let (relay, worker) = CentreRelay::start(parts, Arc::clone(&stop))?;
                threads.push(worker);
                Some(relay)
            }
            _ => None,
        };
        let mut queues = Vec::new();
        let mut report_txs = Vec::new();
        let queue_len = (cfg.ingress_queue / workers).max(MIN_SHARD_QUEUE);
        // Each shard's checks are answered on its own queue, which can hold
        // every check in flight over all shards.
        let in_flight = session.password_checks_in_flight;
        let mut evictions = evictions.into_iter();
        for (i, published) in stats.shards.iter().enumerate() {
            let (dir_tx, dirs) = mpsc::sync_channel::<Directory>(1);
            let (queue_tx, queue) = mpsc::sync_channel(queue_len);
            let (answer_to, answers) = mpsc::sync_channel(in_flight);
            let (report_tx, unreachable) = mpsc::sync_channel(REPORT_QUEUE);
            let (app_answer_to, app_answers) = mpsc::sync_channel(session.app_logins_in_flight);
            let mut core = Reflector::shard(
                session.clone(),
                dir.clone(),
                Instant::now(),
                Box::new(Arc::clone(&shared)),
            );
            if cfg.recording.enabled {
                core = core.with_recorder(Recorder::new(cfg.recording.per_shard(workers)));
            }
            let io = ShardIo {
                queue,
                sock: sock.try_clone()?,
                engine: Arc::clone(&engine),
                verifier: Arc::clone(&verifier),
                answer_to,
                answers,
                events: event_tx.clone(),
                events_dropped: Arc::clone(&stats.store_events_dropped),
                dirs,
                unreachable,
                stop: Arc::clone(&stop),
                published: Arc::clone(published),
                dashboard: dash.clone(),
                app_authority: app_authority.clone(),
                tokio: tokio::runtime::Handle::current(),
                app_answer_to,
                app_answers,
                app_logins_in_flight: session.app_logins_in_flight,
                relay: relay.clone(),
                evictions: evictions.next(),
            };
            threads.push(
                std::thread::Builder::new()
                    .name(format!("refl-shard-{i}"))
                    .spawn(move || shard::shard_loop(core, &io))?,
            );
            dir_txs.push(dir_tx);
            queues.push(queue_tx);
            report_txs.push(report_tx);
        }
        drop(engine);
        let (http_addr, http_task) = match http_listener {
            Some(listener) => {
                let state = super::http::AppState {
                    stats: stats.clone(),
                    store: store.clone(),
                    reload: Arc::clone(&reload_now),
                    admin_token: cfg.admin_token.as_deref().map(AdminToken::new),
                    radio: super::radio_routes::RadioState {
                        shared: Arc::clone(&shared),
                        authority: app_authority.clone(),
                        ptt_hold: Duration::from_millis(session.floor_hold_ms),
                        hub: Arc::clone(&websockets),
                    },
                    websocket: super::websocket::WebSocketState {
                        shared: Arc::clone(&shared),
                        authority: app_authority.clone(),
                        hub: Arc::clone(&websockets),
                        shards: queues.clone(),
                        subscriptions: session.ghost_subscriptions,
                    },
                    dashboard: dash.clone(),
                    edge_nodes: match (&control, &dispatch) {
                        (Some(c), Some(d)) => Some(dashboard::EdgeNodes::new(
                            c.sender(),
                            d.routes(),
                            store.clone(),
                        )),
                        _ => None,
                    },
                    apps,
                };
                let (addr, task) = spawn_http(listener, state, &cfg.http)?;
                let sampler = dashboard::spawn_sampler(stats.clone(), dash.clone());
                (Some(addr), Some([task, sampler]))
            }
            None => (None, None),
        };
        let closer = spawn_connection_closer(Arc::clone(&shared), Arc::clone(&websockets));
        let reader = shard::Reader {
            sock,
            ingress: Ingress::new(&session, workers),
            shards: queues,
            stop: Arc::clone(&stop),
            published: Arc::clone(&stats.ingress),
            icmp: IcmpWatch::new(report_txs, Arc::clone(&stats.icmp)),
            relay,
        };
        threads.insert(
            0,
            std::thread::Builder::new()
                .name("refl-ingress".into())
                .spawn(move || shard::reader_loop(reader))?,
        );
        let centre_reload = match (centre_dir, &dispatch) {
            (Some(directory), Some(d)) => {
                Some(CentreReload::new(directory, d.tables(), d.voice_stats()))
            }
            _ => None,
        };
        let targets = ReloadTargets {
            shards: dir_txs,
            centre: centre_reload,
            dashboard: dash,
            revocation: SessionRevocation::new(store.web_password_stamps().await?),
        };
        let reload = spawn_reload(
            store,
            text_history,
            &cfg,
            targets,
            &stats,
            Arc::clone(&reload_now),
        );
        tracing::info!(%local_addr, workers, "reflector listening");
        let mut tasks = vec![events, reload, closer];
        tasks.extend(http_task.into_iter().flatten());
        Ok(Self {
            local_addr,
            app_accounts,
            http_addr,
            stop,
            threads,
            stats,
            reload: reload_now,
            tasks,
            control,
            dispatch,
        })
    }

    /// The bound interconnect control address, with `[interconnect]
    /// enabled`.
    pub fn control_addr(&self) -> Option<SocketAddr> {
        self.control.as_ref().map(ControlServer::local_addr)
    }

    /// The centre's control server for edges, with `[interconnect]
    /// enabled`.
    pub fn control_server(&self) -> Option<&ControlServer> {
        self.control.as_ref()
    }

    /// The bound UDP address.
    pub fn local_addr(&self) -> SocketAddr {
        self.local_addr
    }

    /// The account store's [`AppAuthority`]
    /// for app sessions (ghost UDP, WebSocket, routing API), with `[apps]`.
    pub fn app_accounts(&self) -> Option<&AppAccounts> {
        self.app_accounts.as_ref()
    }

    /// The bound HTTP address, if HTTP is enabled.
    pub fn http_addr(&self) -> Option<SocketAddr> {
        self.http_addr
    }

    /// Current counters (session counters lag by at most ~20 ms).
    pub fn stats(&self) -> ServerStats {
        self.stats.read()
    }

    /// Live app (ghost) sessions subscribed to `group_id`: (UDP, WebSocket).
    /// For the online counts of `GET /api/radio/groups/stats`
    /// (`specs/draarl-apps.md` §1.5).
    pub fn app_session_counts(&self, group_id: i64) -> (usize, usize) {
        self.stats.shared.ghosts().group_counts(group_id)
    }

    /// Reloads the directory from the store now instead of at the next interval.
    pub fn reload_now(&self) {
        self.reload.notify_one();
    }

    /// Stops ingress, the send threads and the reload task, then lets the
    /// store writer finish the events already queued.
    pub async fn shutdown(mut self) {
        self.stop.store(true, Relaxed);
        self.dispatch.take();
        if let Some(control) = self.control.take() {
            control.shutdown().await;
        }
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

fn spawn_http(
    listener: tokio::net::TcpListener,
    state: super::http::AppState,
    limits: &HttpConfig,
) -> std::io::Result<(SocketAddr, tokio::task::JoinHandle<()>)> {
    let addr = listener.local_addr()?;
    let stats = Arc::clone(&state.stats.http);
    let app = super::http::router(state, limits);
    let task = tokio::spawn(super::http_server::serve(
        listener,
        app,
        limits.clone(),
        stats,
    ));
    Ok((addr, task))
}

/// The store writer's queue as the centre's edge logic writes to it
/// (device records of proxied logins, recordings and texts of edge
/// traffic).
struct StoreSink(tokio::sync::mpsc::Sender<Persist>);

impl CentreStore for StoreSink {
    fn event(&self, e: StoreEvent) -> bool {
        self.0.try_send(Persist::Event(e)).is_ok()
    }

    fn recording(&self, r: Recording) -> bool {
        self.0.try_send(Persist::Recording(r)).is_ok()
    }
}

/// What each directory reload updates.
struct ReloadTargets {
    /// Every shard's directory queue.
    shards: Vec<SyncSender<Directory>>,
    /// The centre's directory for its edges and the sessions they own,
    /// with `[interconnect]`.
    centre: Option<CentreReload>,
    /// The dashboard, for group names.
    dashboard: Dashboard,
    /// The app sessions of accounts that lost their rights.
    revocation: SessionRevocation,
}

/// The task that prunes text history and reloads the directory into every
/// shard (and the dashboard, for group names) each `reload_interval_ms`,
/// or at once when `now` is notified; each reload also ends the app
/// sessions of accounts that lost their rights (`session_revocation.rs`).
fn spawn_reload(
    store: Store,
    text_history: TextHistory,
    cfg: &ServerConfig,
    targets: ReloadTargets,
    stats: &StatsSource,
    now: Arc<Notify>,
) -> tokio::task::JoinHandle<()> {
    let period = Duration::from_millis(cfg.reload_interval_ms);
    let skipped = Arc::clone(&stats.reloads_skipped);
    let errs = Arc::clone(&stats.store_errors);
    let keep_ms = i64::from(cfg.message_retention_days) * 86_400_000;
    let ReloadTargets {
        shards,
        centre,
        dashboard,
        mut revocation,
    } = targets;
    let shared = Arc::clone(&stats.shared);
    let app_auth = Arc::clone(&stats.app_auth);
    tokio::spawn(async move {
        let mut tick = tokio::time::interval(period);
        tick.tick().await;
        loop {
            tokio::select! {
                _ = tick.tick() => {}
                () = now.notified() => {}
            }
            if let Err(err) = text_history.prune_older_than(unix_ms() - keep_ms).await {
                errs.fetch_add(1, Relaxed);
                tracing::warn!(error = %err, "message pruning failed");
            }
            match store.load_directory().await {
                Ok(d) => {
                    let stamps = match store.web_password_stamps().await {
                        Ok(s) => Some(s),
                        Err(err) => {
                            errs.fetch_add(1, Relaxed);
                            tracing::warn!(error = %err, "web password stamps failed");
                            None
                        }
                    };
                    let ended = revocation.apply(&d, stamps, &shared);
                    app_auth
                        .ghost_sessions_revoked
                        .fetch_add(ended as u64, Relaxed);
                    dashboard.set_directory(d.clone());
                    if let Some(c) = &centre {
                        c.apply(d.clone());
                    }
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

/// The task that closes the WebSocket connections whose sessions the
/// registry removed (expired on a shard's sweep, replaced, evicted), once a
/// second.
fn spawn_connection_closer(
    shared: Arc<SharedTables>,
    hub: Arc<WebSocketHub>,
) -> tokio::task::JoinHandle<()> {
    tokio::spawn(async move {
        let mut tick = tokio::time::interval(Duration::from_secs(1));
        loop {
            tick.tick().await;
            let closed: Vec<_> = {
                let mut ghosts = shared.ghosts();
                std::iter::from_fn(|| ghosts.poll_closed()).collect()
            };
            for conn in closed {
                hub.close(conn);
            }
        }
    })
}
