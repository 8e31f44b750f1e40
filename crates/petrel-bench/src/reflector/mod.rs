//! The reflector fan-out load generator of `petrel bench reflector`, after
//! draarl-v1 §7 / benchmarks §D: every simulated device binds its own
//! 127.x.y.z address, logs in with real heartbeats, then one speaker per
//! group sends voice on an absolute schedule with a marker, stage id,
//! sequence and send time in the payload.
//!
//! It starts its own reflector on a fresh temporary store, as a child process
//! ([`ServerProcess::Child`], measured from `/proc/<child pid>`) or
//! in-process. CPU is reported three ways, because they differ: the
//! reflector's (the child, or the `refl-*` threads), the load generator's
//! threads (its receive threads `lg-recv` also separately), and the whole
//! host from `/proc/stat` — the last includes loopback delivery in softirq
//! context and anything else running on the machine. RSS: the child's, and
//! this process's.
//!
//! Files, one concern each: [`LoadConfig`] and its errors (`config`), the
//! simulated devices and their login (`device`), the store a stage runs on
//! (`store_setup`), the reflector child (`child`), one stage's send loop
//! (`drive`), its receive threads (`receive`), the send schedule and the
//! heartbeats (`schedule`), CPU samples (`cpu`, read through
//! `petrel_sys::proc`); the `RESULT` line (`result`). The recorded figures are
//! [`LoadResult`], defined with every other result field in [`crate::record`].
//! The soak with churn (`--soak`) is [`soak`], on the same devices, store
//! and child.
//!
//! With `--edges N --layout L` (issue 15 item 6) the stage runs against a
//! centre and N edges as child processes instead ([`cluster`]): the layout
//! of devices over edges (`cluster_layout`), the edge children and their
//! enrolment (`edge_child`), per-node CPU, memory and `/metrics` readings
//! (`node_probe`, `node_metrics`), the frame receipts per node (`receipts`)
//! and the attribution of every missing datagram to a node's counter
//! (`loss_attribution`), and the stage's output lines (`cluster_lines`);
//! the stage driver takes those through `stage_probe`. Cluster and
//! single-node stages split the devices over load-generator processes
//! (`generator_pool` drives them, `generator_child` is one, `generator_wire`
//! their protocol, `fd_budget` how many sockets each may hold), so 20 000
//! devices fit under a 20 000 open-files limit.
//!
//! Not here: the reflector itself (`petrel_reflector::runtime::server`).

mod app_http;
mod apps;
mod child;
pub mod cluster;
pub mod cluster_layout;
mod cluster_lines;
mod config;
mod cpu;
mod device;
mod drive;
mod edge_child;
pub mod fd_budget;
pub mod generator_child;
mod generator_pool;
mod generator_wire;
mod ghost;
pub mod loss_attribution;
pub mod node_metrics;
mod node_probe;
pub mod receipts;
mod receive;
mod result;
mod schedule;
pub mod soak;
mod stage_probe;
mod store_setup;
mod ws_client;

use std::net::SocketAddr;

pub use crate::record::reflector::{LoadResult, ReceiverKindResult};
pub use config::{LoadConfig, LoadError, ServerProcess};
pub use device::device_ip;

use petrel_reflector::model::{AppApiConfig, HttpConfig, ServerConfig};
use petrel_reflector::runtime::server::ServerHandle;

/// Sets up a fresh store and reflector, logs every device in, and runs one stage.
///
/// # Errors
/// [`LoadError`] when `cfg` is out of range, the store or the reflector
/// cannot be set up, a socket fails, or devices cannot log in.
pub async fn run(cfg: &LoadConfig) -> Result<LoadResult, LoadError> {
    cfg.validate()?;
    let db_path = std::env::temp_dir().join(format!("petrel-refl-bench-{}.db", std::process::id()));
    let db = db_path.to_string_lossy().into_owned();
    let result = run_with_db(cfg, &db).await;
    for ext in ["", "-wal", "-shm"] {
        let _ = std::fs::remove_file(format!("{db}{ext}"));
    }
    result
}

async fn run_with_db(cfg: &LoadConfig, db: &str) -> Result<LoadResult, LoadError> {
    let group_ids = store_setup::populate(cfg, db).await?;
    let fanout = cfg.fanout();
    let apps = cfg.ghosts + cfg.ws > 0;
    let (res, counters) = match &cfg.server {
        ServerProcess::InProcess => {
            let server = ServerHandle::start(ServerConfig {
                listen: SocketAddr::from(([127, 0, 0, 1], 0)),
                db: db.into(),
                fanout,
                // App receivers log in over HTTP, without a captcha.
                http_listen: apps.then(|| SocketAddr::from(([127, 0, 0, 1], 0))),
                login_captcha: false,
                apps: Some(app_api()),
                http: app_http(),
                ..ServerConfig::default()
            })
            .await?;
            let target = drive::Target {
                udp: server.local_addr(),
                http: server.http_addr(),
                pid: None,
                group_ids,
            };
            let cfg2 = cfg.clone();
            let res = tokio::task::spawn_blocking(move || {
                drive::drive(&cfg2, &target, &stage_probe::NoProbe)
            })
            .await
            .map_err(|e| LoadError::Invalid(e.to_string()))?;
            let f = server.stats().fanout;
            server.shutdown().await;
            let counters = child::FanoutCounters {
                frames_dropped: f.frames_dropped,
                frames_expired: f.frames_expired,
                queue_high_water: f.queue_high_water,
                max_dispatch_ns: f.max_dispatch_ns,
            };
            (res, counters)
        }
        ServerProcess::Child(program) => {
            let (program, db, cfg2) = (program.clone(), db.to_owned(), cfg.clone());
            tokio::task::spawn_blocking(move || {
                let server = child::ServerChild::start(&program, &db, &fanout)?;
                let target = drive::Target {
                    udp: server.udp,
                    http: Some(server.http),
                    pid: Some(server.pid()),
                    group_ids,
                };
                let res = drive::drive(&cfg2, &target, &stage_probe::NoProbe);
                let counters = server.fanout()?;
                Ok::<_, LoadError>((res, counters))
            })
            .await
            .map_err(|e| LoadError::Invalid(e.to_string()))??
        }
    };
    res.map(|mut r| {
        r.frames_dropped = counters.frames_dropped + counters.frames_expired;
        r.frames_expired = counters.frames_expired;
        r.queue_high_water = counters.queue_high_water;
        r.max_dispatch_ms = counters.max_dispatch_ns as f64 / 1e6;
        r
    })
}

/// The app API of a stage's reflector: every app login comes from
/// 127.0.0.1, so the per-prefix login budget must not be what is measured.
fn app_api() -> AppApiConfig {
    AppApiConfig {
        login_per_minute: 100_000,
        login_burst: 100_000,
        ..AppApiConfig::default()
    }
}

/// The HTTP limits of a stage's reflector: every WebSocket receiver and
/// every routing call comes from 127.0.0.1.
fn app_http() -> HttpConfig {
    HttpConfig {
        max_connections: 65_536,
        max_connections_per_ip: 65_536,
        max_connections_per_prefix: 65_536,
        per_ip_rps: 100_000,
        per_ip_burst: 100_000,
        ..HttpConfig::default()
    }
}
