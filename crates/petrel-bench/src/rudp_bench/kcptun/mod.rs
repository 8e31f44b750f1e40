//! kcptun (kcp-go, with its Reed–Solomon FEC and smux) as the peer of the
//! RUDP-under-impairment benchmark (`specs/benchmarks.md` §B, `petrel bench rudp
//! --peer kcptun`).
//!
//! Each round starts a TCP echo target, `kcptun-server` in front of it, a fresh
//! relay (seeded `seed + round`, the same profile as Petrel's rows) in front of
//! that, and `kcptun-client` dialling the relay with one KCP session per client
//! (`--conn`); the echo harness's TCP clients (the TCP adapter's framing, every
//! echo verified) connect to `kcptun-client`. kcptun runs with no encryption, no
//! compression and Petrel's ARQ settings ([`KcptunTuning::matching`]); FEC is
//! off (`--datashard 0 --parityshard 0`) or fixed at `--fec-shape`.
//!
//! Per round it records the echo figures (the bench process's CPU among them),
//! the relay's counters, the CPU of each kcptun process over the measured
//! interval (`/proc/<pid>/task/*/schedstat`, from the instant the last client
//! connected plus the warm-up, as the harness counts), and kcptun's own counters
//! from its SNMP log (one row a second; the round waits for the first row written
//! after the echo ended): UDP bytes sent, retransmitted segments, FEC recoveries.
//!
//! Children are started and stopped by PID, every wait is bounded, and a child
//! that exits early is reported with its last stderr lines. Without
//! `kcptun-client`/`kcptun-server` in `PATH` the run fails with
//! [`KcptunBenchError::NotInstalled`], which callers turn into a skip.

mod process;
mod report;
mod snmp;
mod transport;
mod tuning;

use std::io;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU32, Ordering};
use std::time::{Duration, Instant};

use petrel::KcpConfig;
use petrel_netem::RelayConfig;
use tokio::runtime::Builder;
use tokio::sync::oneshot;

pub use process::{KcptunBinaries, INSTALL_HINT};
pub use report::KcptunBenchReport;

use super::{case_name, FecShape, RudpBenchConfig, RudpConfigError, RudpPeer};
use crate::echo::udp::DEFAULT_RECV_BUFFER;
use crate::echo::{run_echo, EchoConfig, EchoError, EchoErrors, DRAIN_LIMIT};
use crate::measure::peak_rss_bytes;
use crate::record::rudp::{KcptunParameters, KcptunRound, KcptunTuning, RelayFigures};
use crate::record::{RecordError, ResultRecord, Spread};
use report::{ChildrenCpu, SnmpRows};
use transport::{KcptunEcho, RoundSetup};

/// Set (to anything but `0`) where kcptun must be installed (CI): a missing kcptun
/// is then an error rather than a skipped case.
pub const REQUIRE_ENV: &str = "PETREL_REQUIRE_KCPTUN";

/// Whether [`REQUIRE_ENV`] asks for kcptun.
pub fn kcptun_required() -> bool {
    std::env::var_os(REQUIRE_ENV).is_some_and(|v| !v.is_empty() && v != "0")
}

/// Period of kcptun's SNMP log (`--snmpperiod`, s; its smallest).
pub const SNMP_PERIOD_S: u64 = 1;
/// Most time a round waits for the SNMP rows written after its echo ended.
const SNMP_WAIT: Duration = Duration::from_millis(2500);

/// Why a kcptun run could not produce a result (as opposed to a result that is
/// not `ok`).
#[derive(Debug, thiserror::Error)]
pub enum KcptunBenchError {
    /// `kcptun-client` or `kcptun-server` is not in `PATH`.
    #[error("kcptun not installed: kcptun-client/kcptun-server not in PATH ({INSTALL_HINT})")]
    NotInstalled,
    /// The configuration cannot run.
    #[error(transparent)]
    Config(#[from] RudpConfigError),
    /// The tokio runtime could not be built.
    #[error("cannot start a tokio runtime: {0}")]
    Runtime(io::Error),
    /// The echo harness failed to set up (a kcptun process among it) or a task failed.
    #[error(transparent)]
    Echo(#[from] EchoError),
    /// A kcptun process exited during the round.
    #[error("kcptun failed: {0}")]
    Process(io::Error),
    /// The relay stopped with an error.
    #[error("relay failed: {0}")]
    Relay(io::Error),
    /// The scratch directory for kcptun's SNMP logs could not be created.
    #[error("cannot create {path}: {source}")]
    Scratch {
        /// The directory.
        path: PathBuf,
        /// Why.
        source: io::Error,
    },
    /// The result could not be recorded.
    #[error(transparent)]
    Record(#[from] RecordError),
}

/// A directory for the SNMP logs of one run, removed when dropped. Its name is
/// letters only (see [`snmp`]).
struct Scratch(PathBuf);

impl Scratch {
    fn create() -> Result<Self, KcptunBenchError> {
        static RUNS: AtomicU32 = AtomicU32::new(0);
        let letters = |n: u32| -> String {
            n.to_string()
                .bytes()
                .map(|b| char::from(b'a' + (b - b'0')))
                .collect()
        };
        let run = RUNS.fetch_add(1, Ordering::Relaxed);
        let path = std::env::temp_dir().join(format!(
            "petrel-kcptun-{}-{}",
            letters(std::process::id()),
            letters(run)
        ));
        // A leftover of a crashed run of the same name holds only old logs.
        let _ = std::fs::remove_dir_all(&path);
        std::fs::create_dir_all(&path).map_err(|source| KcptunBenchError::Scratch {
            path: path.clone(),
            source,
        })?;
        Ok(Self(path))
    }

    fn path(&self) -> &Path {
        &self.0
    }
}

impl Drop for Scratch {
    fn drop(&mut self) {
        // Only logs live here; a failure leaves them in the temp directory.
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// Samples both processes' CPU over the measured interval: from `origin` (the
/// last client connected) + `warmup` to + `warmup + measured`.
async fn children_cpu(
    echo: &KcptunEcho,
    origin: oneshot::Receiver<Instant>,
    warmup: Duration,
    measured: Duration,
) -> ChildrenCpu {
    let (Ok(origin), Some((client, server))) = (origin.await, echo.pids()) else {
        return ChildrenCpu::default();
    };
    let cpu = |pid| petrel_sys::proc::threads_cpu_ns(pid, "");
    tokio::time::sleep_until((origin + warmup).into()).await;
    let start = (Instant::now(), cpu(client), cpu(server));
    tokio::time::sleep_until((origin + warmup + measured).into()).await;
    let wall_ns = start.0.elapsed().as_nanos() as f64;
    let percent = |before: Option<u64>, after: Option<u64>| {
        let used = after?.checked_sub(before?)?;
        (wall_ns > 0.0).then(|| used as f64 / wall_ns * 100.0)
    };
    ChildrenCpu {
        client: percent(start.1, cpu(client)),
        server: percent(start.2, cpu(server)),
    }
}

/// The echo of one round and the CPU sampled during it; the sampler is dropped
/// if the echo ends first (a failed setup).
async fn echo_round(
    echo: &KcptunEcho,
    origin: oneshot::Receiver<Instant>,
    cfg: &EchoConfig,
    case: &str,
) -> (Result<crate::echo::EchoReport, EchoError>, ChildrenCpu) {
    let run = run_echo(echo, cfg, case);
    let sample = children_cpu(echo, origin, cfg.warmup, cfg.measured);
    tokio::pin!(run, sample);
    let mut cpu = ChildrenCpu::default();
    let mut sampled = false;
    loop {
        tokio::select! {
            report = &mut run => return (report, cpu),
            c = &mut sample, if !sampled => {
                cpu = c;
                sampled = true;
            }
        }
    }
}

fn snmp_rows(paths: Option<&(PathBuf, PathBuf)>, unavailable: &str, after: u64) -> SnmpRows {
    let Some((client, server)) = paths else {
        return SnmpRows::Missing(unavailable.to_owned());
    };
    match (
        snmp::row_after(client, after, SNMP_WAIT),
        snmp::row_after(server, after, SNMP_WAIT),
    ) {
        (Ok(client), Ok(server)) => SnmpRows::Read { client, server },
        (Err(e), _) | (_, Err(e)) => SnmpRows::Missing(e),
    }
}

/// Runs `cfg` (with `cfg.peer` = [`RudpPeer::Kcptun`]) with kcptun: `cfg.echo.rounds`
/// rounds, each with fresh processes and relay. Blocking; builds its own runtime
/// (do not call it from inside one).
///
/// # Errors
/// [`KcptunBenchError::NotInstalled`] without the binaries; the others when the
/// configuration is invalid or setup fails. Failures during a round (lost
/// echoes, disconnects, …) are counted and make `ok` false.
pub fn run_kcptun_bench(cfg: &RudpBenchConfig) -> Result<KcptunBenchReport, KcptunBenchError> {
    cfg.validate()?;
    if cfg.peer != RudpPeer::Kcptun {
        return Err(RudpConfigError::Field {
            field: "peer",
            value: "petrel".to_owned(),
            range: "kcptun here (Petrel runs through run_rudp_bench)".to_owned(),
        }
        .into());
    }
    let binaries = KcptunBinaries::from_path().ok_or(KcptunBenchError::NotInstalled)?;
    let peer = binaries.version();
    let rt = Builder::new_current_thread()
        .enable_all()
        .build()
        .map_err(KcptunBenchError::Runtime)?;
    let scratch = Scratch::create()?;
    let (snmp_paths, snmp_unavailable) = match (
        snmp::snmp_path(scratch.path(), "client"),
        snmp::snmp_path(scratch.path(), "server"),
    ) {
        (Ok(c), Ok(s)) => (Some((c, s)), String::new()),
        (Err(e), _) | (_, Err(e)) => (None, e),
    };
    let shape: Option<FecShape> = cfg.fixed_shape();
    let tuning = KcptunTuning::matching(
        &KcpConfig::default(),
        shape,
        cfg.echo.clients,
        DEFAULT_RECV_BUFFER,
    );
    let link = cfg.link();
    let relay_base = RelayConfig {
        route: petrel_netem::RouteConfig::symmetric(link.clone()),
        ..RelayConfig::default()
    };
    let params = KcptunParameters {
        peer: peer.clone(),
        payload: cfg.echo.payload,
        clients: cfg.echo.clients,
        window: cfg.echo.window,
        warmup_s: cfg.echo.warmup.as_secs_f64(),
        seconds: cfg.echo.measured.as_secs_f64(),
        drain_limit_s: DRAIN_LIMIT.as_secs_f64(),
        rounds: cfg.echo.rounds,
        fec: cfg.fec,
        fec_shape: shape,
        profile: cfg.profile.name().to_owned(),
        link: link.clone(),
        seed: cfg.seed,
        tuning: tuning.clone(),
        snmp_period_s: SNMP_PERIOD_S,
        relay_socket_buffer: relay_base.socket_buffer,
    };
    let case = case_name(cfg);
    let mut record = ResultRecord::begin("rudp", &case, &params)?;
    let one_round = EchoConfig {
        rounds: 1,
        ..cfg.echo.clone()
    };
    let common = tuning.common_args();
    let mut rounds = Vec::new();
    let mut errors = EchoErrors::default();
    for round in 0..cfg.echo.rounds {
        let seed = cfg.round_seed(round);
        record.seeds.push(seed);
        let (transport, origin) = KcptunEcho::new(RoundSetup {
            binaries: binaries.clone(),
            common: common.clone(),
            conn: tuning.conn,
            snmp: snmp_paths.clone(),
            snmp_period_s: SNMP_PERIOD_S,
            relay: RelayConfig {
                seed,
                ..relay_base.clone()
            },
            clients: cfg.echo.clients,
        });
        let (echo, cpu) = rt.block_on(echo_round(&transport, origin, &one_round, &case));
        let echo = echo?;
        let snmp = snmp_rows(snmp_paths.as_ref(), &snmp_unavailable, snmp::unix_now());
        let finished = transport.finish().map_err(KcptunBenchError::Relay)?;
        // A process that died mid-round is an error with its stderr, even when
        // the echo happened to finish; the others are killed when dropped.
        let mut children = [finished.client, finished.server];
        for child in children.iter_mut().flatten() {
            child.check_running().map_err(KcptunBenchError::Process)?;
        }
        drop(children);
        let relay = finished
            .relay
            .map(|s| RelayFigures::new(&s, &link))
            .ok_or_else(|| KcptunBenchError::Relay(io::Error::other("relay never started")))?;
        for mut r in echo.rounds {
            r.round = round;
            errors.add(&r.errors);
            let figures = KcptunRound::new(
                seed,
                r,
                cfg.echo.payload,
                snmp.clone(),
                cpu,
                relay.clone(),
                peak_rss_bytes(),
            );
            record.push_round(&figures)?;
            rounds.push(figures);
        }
        // Each round's logs start empty: the next processes count from zero.
        if let Some((client, server)) = &snmp_paths {
            let _ = std::fs::remove_file(client);
            let _ = std::fs::remove_file(server);
        }
    }
    drop(scratch);
    summarise(&mut record, &rounds);
    record.errors = errors.by_kind();
    record.peak_rss_bytes = peak_rss_bytes();
    record.ok =
        errors.total() == 0 && !rounds.is_empty() && rounds.iter().all(|r| r.echo.round_trips > 0);
    Ok(KcptunBenchReport {
        record,
        rounds,
        tuning,
        peer,
    })
}

fn summarise(record: &mut ResultRecord, rounds: &[KcptunRound]) {
    let Some(first) = rounds.first() else {
        return;
    };
    for (i, (key, _)) in first.headline().into_iter().enumerate() {
        let values: Vec<f64> = rounds.iter().filter_map(|r| r.headline()[i].1).collect();
        if let Some(spread) = Spread::of(&values) {
            record.summary.insert(key.to_owned(), spread);
        }
    }
}
