//! The stages of `petrel bench reflector --edges N --layout L` (issue 15
//! item 6, draarl-interconnect §9): a centre and N edges as child processes
//! on loopback, each on its own UDP port, the centre with no devices; and
//! the single-node stage with the same load that the run compares them with.
//!
//! A cluster stage, on a fresh store in a scratch directory: the bench
//! accounts and groups are written (`store_setup`); the centre's
//! config is written with `[interconnect]` on; each edge (`edge-a`,
//! `edge-b`, …) is enrolled with `<program> reflector edge add` against the
//! centre's store, its token kept in a file; the centre starts
//! (`ServerChild::start_centre`), then the edges (`EdgeChild`), and the
//! stage waits until the centre counts every edge's control session. Device
//! `i` then logs in through the edge its layout gives it, with the same
//! heartbeat logins, voice schedule and receivers as the single-node stage
//! (`drive`), from load-generator processes (`generator_pool`: as many
//! as the open-files limit needs); `NodeProbe` reads every node before and after the
//! measurement. Every child is stopped by its pid when the stage ends, on
//! error paths too (the handles stop them when dropped: edges first, then
//! the centre), and the scratch directory goes with them.

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use super::child::ServerChild;
use super::cluster_layout::Layout;
use super::drive::{measured_rounds, Target, WARMUP_ROUNDS};
use super::edge_child::{enrol, EdgeChild};
use super::generator_pool::drive_split;
use super::node_metrics::MetricsReading;
use super::node_probe::{NodeProbe, ProbedNode};
use super::{store_setup, LoadConfig, LoadError, ServerProcess};
use crate::record::reflector_cluster::ClusterStage;

/// Most edges of a cluster stage.
pub const MAX_EDGES: usize = 16;
/// How long the edges may take to open their control sessions.
const CONNECT_TIMEOUT: Duration = Duration::from_secs(30);
/// The centre's gauge of live node sessions.
const ACTIVE_NODES: &str = "petrel_reflector_interconnect_active_nodes";

/// What a cluster stage runs.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ClusterConfig {
    /// Devices, groups, interval, payload, duration and fan-out settings of
    /// every node; `server` must be a child (the `petrel` binary), and
    /// there are no app receivers.
    pub load: LoadConfig,
    /// Edge nodes, 1–[`MAX_EDGES`] (at least 2 for `cross`).
    pub edges: usize,
    /// Which edge each device logs in through.
    pub layout: Layout,
    /// Most devices one load-generator process holds (`None`: what the
    /// open-files limit allows; see `fd_budget`).
    pub devices_per_process: Option<usize>,
}

impl ClusterConfig {
    /// Checks the stage's ranges and the cluster's own.
    ///
    /// # Errors
    /// [`LoadError::Invalid`] naming the first problem.
    pub fn validate(&self) -> Result<(), LoadError> {
        self.load.validate()?;
        let bad = |m: String| Err(LoadError::Invalid(m));
        if !(1..=MAX_EDGES).contains(&self.edges) {
            return bad(format!("edges: 1..={MAX_EDGES}"));
        }
        if self.edges < self.layout.min_edges() {
            return bad(format!(
                "layout {} needs at least {} edges",
                self.layout,
                self.layout.min_edges()
            ));
        }
        if self.load.ghosts + self.load.ws > 0 {
            return bad("--edges runs physical devices only: drop --ghosts and --ws".into());
        }
        if self.devices_per_process == Some(0) {
            return bad("devices per process: at least 1".into());
        }
        if self.load.server == ServerProcess::InProcess {
            return bad("--edges runs every node as a child process: drop --in-process".into());
        }
        Ok(())
    }

    fn program(&self) -> Result<PathBuf, LoadError> {
        match &self.load.server {
            ServerProcess::Child(p) => Ok(p.clone()),
            ServerProcess::InProcess => Err(LoadError::Invalid(
                "a cluster stage needs the petrel binary".into(),
            )),
        }
    }
}

/// Node id of edge `e`: `edge-a`, `edge-b`, …
pub fn edge_name(e: usize) -> String {
    let letter = (b'a' + u8::try_from(e % 26).unwrap_or(0)) as char;
    format!("edge-{letter}")
}

/// Runs one cluster stage: a centre and `cfg.edges` edges on a fresh store,
/// every device logged in through its edge.
///
/// # Errors
/// [`LoadError`] when `cfg` is out of range, a node cannot be set up or
/// started, the edges do not connect, devices cannot log in, or a node
/// reading fails.
pub async fn run_cluster(cfg: &ClusterConfig) -> Result<ClusterStage, LoadError> {
    cfg.validate()?;
    let program = cfg.program()?;
    let cfg = cfg.clone();
    on_fresh_store(&cfg.load.clone(), move |dir, db, group_ids| {
        cluster_stage(&cfg, &program, dir, db, group_ids)
    })
    .await
}

/// Runs `stage` on a blocking thread with a scratch directory holding a
/// fresh store of `load`'s accounts and groups (its path and the groups'
/// ids are passed in); the directory goes when the stage has ended.
async fn on_fresh_store<F>(load: &LoadConfig, stage: F) -> Result<ClusterStage, LoadError>
where
    F: FnOnce(&Path, &str, Vec<i64>) -> Result<ClusterStage, LoadError> + Send + 'static,
{
    let scratch = tempfile::Builder::new()
        .prefix("petrel-refl-cluster-")
        .tempdir()?;
    let db = scratch
        .path()
        .join("store.db")
        .to_string_lossy()
        .into_owned();
    let group_ids = store_setup::populate(load, &db).await?;
    let dir = scratch.path().to_path_buf();
    let result = tokio::task::spawn_blocking(move || stage(&dir, &db, group_ids))
        .await
        .map_err(|e| LoadError::Invalid(e.to_string()))?;
    drop(scratch);
    result
}

fn cluster_stage(
    cfg: &ClusterConfig,
    program: &Path,
    dir: &Path,
    db: &str,
    group_ids: Vec<i64>,
) -> Result<ClusterStage, LoadError> {
    let load = &cfg.load;
    let config = dir.join("centre.toml");
    let token = format!("{:032x}", rand::random::<u128>());
    ServerChild::write_centre_config(&config, db, &load.fanout(), &token)?;
    let names: Vec<String> = (0..cfg.edges).map(edge_name).collect();
    let token_files: Vec<PathBuf> = names
        .iter()
        .map(|n| dir.join(format!("{n}.token")))
        .collect();
    for (name, file) in names.iter().zip(&token_files) {
        enrol(program, db, &config, name, file)?;
    }
    let centre = ServerChild::start_centre(program, config, token)?;
    let control = centre.control.ok_or_else(|| {
        LoadError::Invalid("the centre printed no interconnect control address".into())
    })?;
    // Declared after the centre: dropped (stopped) before it.
    let mut edges = Vec::with_capacity(cfg.edges);
    for (name, file) in names.iter().zip(&token_files) {
        edges.push(EdgeChild::start(program, name, file, control, centre.udp)?);
    }
    wait_connected(&centre, &mut edges)?;
    let mut nodes = vec![ProbedNode {
        name: "centre".into(),
        pid: centre.pid(),
        http: centre.http,
        entry: None,
    }];
    nodes.extend(edges.iter().enumerate().map(|(e, edge)| ProbedNode {
        name: edge.name.clone(),
        pid: edge.pid(),
        http: edge.http,
        entry: Some((edge.udp, e)),
    }));
    let placement = cfg.layout.placement(load.devices, load.groups, cfg.edges);
    let probe = probe(load, nodes, placement)?;
    let target = Target {
        udp: centre.udp,
        http: None,
        pid: None,
        group_ids,
    };
    let (result, generators) =
        drive_split(load, &target, &probe, program, cfg.devices_per_process)?;
    let stage = probe.finish(result, cfg.layout.name(), cfg.edges);
    drop(edges);
    drop(centre);
    stage.map(|s| ClusterStage { generators, ..s })
}

/// Runs the single-node stage of `load` (one `reflector serve` child,
/// every device on it), measured like a cluster stage, with the devices
/// split over load generators the same way (at most
/// `devices_per_process` each).
///
/// # Errors
/// [`LoadError`] as [`run_cluster`].
pub async fn run_single(
    load: &LoadConfig,
    devices_per_process: Option<usize>,
) -> Result<ClusterStage, LoadError> {
    load.validate()?;
    let ServerProcess::Child(program) = load.server.clone() else {
        return Err(LoadError::Invalid(
            "the single-node stage runs the reflector as a child".into(),
        ));
    };
    let load = load.clone();
    on_fresh_store(&load.clone(), move |_, db, group_ids| {
        let server = ServerChild::start(&program, db, &load.fanout())?;
        let nodes = vec![ProbedNode {
            name: "single".into(),
            pid: server.pid(),
            http: server.http,
            entry: Some((server.udp, 0)),
        }];
        let probe = probe(&load, nodes, vec![0; load.devices])?;
        let target = Target {
            udp: server.udp,
            http: None,
            pid: Some(server.pid()),
            group_ids,
        };
        let (result, generators) =
            drive_split(&load, &target, &probe, &program, devices_per_process)?;
        probe
            .finish(result, "single", 0)
            .map(|s| ClusterStage { generators, ..s })
    })
    .await
}

fn probe(
    load: &LoadConfig,
    nodes: Vec<ProbedNode>,
    placement: Vec<usize>,
) -> Result<NodeProbe, LoadError> {
    let rounds = usize::try_from(measured_rounds(load))
        .map_err(|_| LoadError::Invalid("too many rounds".into()))?;
    NodeProbe::new(nodes, placement, load.groups, WARMUP_ROUNDS, rounds)
}

/// Waits until the centre counts a control session for every edge
/// (`petrel_reflector_interconnect_active_nodes`), failing early when an
/// edge exits.
fn wait_connected(centre: &ServerChild, edges: &mut [EdgeChild]) -> Result<(), LoadError> {
    let deadline = Instant::now() + CONNECT_TIMEOUT;
    loop {
        let active = MetricsReading::fetch(centre.http)?
            .get(ACTIVE_NODES)
            .unwrap_or(0.0);
        if active >= edges.len() as f64 {
            return Ok(());
        }
        if let Some(gone) = edges.iter_mut().find_map(EdgeChild::exited) {
            return Err(LoadError::Invalid(gone));
        }
        if Instant::now() > deadline {
            return Err(LoadError::Invalid(format!(
                "{active} of {} edges connected to the centre within {} s",
                edges.len(),
                CONNECT_TIMEOUT.as_secs()
            )));
        }
        std::thread::sleep(Duration::from_millis(100));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn edge_names_follow_the_spec() {
        assert_eq!(edge_name(0), "edge-a");
        assert_eq!(edge_name(2), "edge-c");
        assert_eq!(edge_name(15), "edge-p");
    }

    #[test]
    fn cluster_ranges() {
        let ok = ClusterConfig {
            load: LoadConfig {
                devices: 60,
                groups: 2,
                server: ServerProcess::Child("petrel".into()),
                ..LoadConfig::default()
            },
            edges: 3,
            layout: Layout::Cross,
            devices_per_process: None,
        };
        ok.validate().unwrap();
        let msg = |c: ClusterConfig| c.validate().unwrap_err().to_string();
        assert_eq!(
            msg(ClusterConfig {
                edges: 1,
                ..ok.clone()
            }),
            "invalid parameter: layout cross needs at least 2 edges"
        );
        assert_eq!(
            msg(ClusterConfig {
                edges: 17,
                ..ok.clone()
            }),
            "invalid parameter: edges: 1..=16"
        );
        let mut zero = ok.clone();
        zero.devices_per_process = Some(0);
        assert!(msg(zero).contains("devices per process"));
        let mut ghosts = ok.clone();
        ghosts.load.ghosts = 1;
        assert!(msg(ghosts).contains("--ghosts"));
        let mut in_process = ok;
        in_process.load.server = ServerProcess::InProcess;
        assert!(msg(in_process).contains("--in-process"));
    }
}
