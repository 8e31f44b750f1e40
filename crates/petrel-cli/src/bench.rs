//! `petrel bench`: the default suite and the individual benchmarks
//! (`specs/benchmarks.md`).
//!
//! Exit codes: 0 when every case is `ok`, 1 when one is not or the run
//! failed, 2 for invalid arguments.
//!
//! The default suite: loopback echo (§A) of raw UDP, RUDP and the peers at
//! 1024 B, 4 clients × 16 and 1 × 1; then RUDP through the emulator (§B)
//! ARQ-only / fixed FEC / adaptive FEC under the `none`, `random` and
//! `burst` profiles; then kcptun through the same emulator, profiles and seed
//! with fixed FEC 8+2 and 10+3 under `random` and `burst` (FEC off is left to
//! `bench rudp --peer kcptun --fec none`, to keep the suite near a minute); one
//! round each. Without kcptun the kcptun rows are skipped with one line (an
//! error with `PETREL_REQUIRE_KCPTUN=1`). It prints the summary table and the
//! ratios (RUDP / each baseline, FEC / ARQ-only, Petrel / kcptun) and writes
//! the JSON results and `report.html` into `petrel-results/<timestamp>/`.
//!
//! Echo cases run on one current-thread tokio runtime, like the
//! published UDP figures ("1 runtime / 1 thread"); `bench echo --io-threads N`
//! uses one multi-thread runtime with N workers (the spec's "shared" I/O
//! model). Each result records the runtime flavour and worker count.

use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::time::{Duration, SystemTime};

use anyhow::Context as _;
use clap::{Args, Subcommand, ValueEnum};
use petrel::EndpointConfig;
use petrel_bench::echo::kcp::KcpTransport;
use petrel_bench::echo::quic::QuicTransport;
use petrel_bench::echo::rudp::RudpTransport;
use petrel_bench::echo::shards::Shards;
use petrel_bench::echo::tcp::TcpTransport;
use petrel_bench::echo::tls::TlsTransport;
use petrel_bench::echo::udp::{UdpTransport, DEFAULT_RECV_BUFFER, DEFAULT_SEND_BUFFER};
use petrel_bench::echo::websocket::WebSocketTransport;
use petrel_bench::echo::work::MAX_WORK;
use petrel_bench::echo::wss::WssTransport;
use petrel_bench::echo::{
    case_name as echo_case_name, run_echo_sharded, run_echo_with, BufferRequest, EchoConfig,
    EchoError, EchoIoModel, EchoOptions, EchoReport, EchoTransport,
};
use petrel_bench::measure::reset_peak_rss;
use petrel_bench::ratios;
use petrel_bench::record::{rfc3339_utc, ResultRecord};
use petrel_bench::report::write_report;
use petrel_bench::rudp_bench::kcptun::{kcptun_required, KcptunBinaries, INSTALL_HINT};
use petrel_bench::rudp_bench::{
    case_name as rudp_case_name, run_kcptun_bench, run_rudp_bench, FecMode, FecShape,
    KcptunBenchError, RudpBenchConfig, RudpBenchError, RudpPeer,
};
use petrel_bench::table::{self, Row};
use petrel_netem::Profile;
use tokio::runtime::Handle;

use crate::args::{bench_seconds, FullRange, Quoted};
use crate::progress::Progress;

/// Exit code for invalid arguments (the same as clap's parse errors).
const EXIT_USAGE: u8 = 2;

#[derive(Debug, Args)]
#[command(args_conflicts_with_subcommands = true)]
pub struct BenchArgs {
    #[command(subcommand)]
    command: Option<BenchCommand>,
    #[command(flatten)]
    suite: SuiteArgs,
}

/// Options of the default suite.
#[derive(Debug, Args)]
struct SuiteArgs {
    /// Directory under which a `<timestamp>/` folder of JSON results is written.
    #[arg(long, default_value = "petrel-results")]
    out_dir: PathBuf,
    /// Measured seconds per case, 0.001..=3600 (25 cases: 12 loopback echo, 9 RUDP
    /// and 4 kcptun through the emulator; the suite takes about a minute).
    #[arg(long, default_value = "2", value_parser = Quoted(bench_seconds))]
    seconds: Duration,
    /// Warm-up seconds per case, 0..=3600.
    #[arg(long, default_value = "0.5", value_parser = Quoted(bench_seconds))]
    warmup: Duration,
}

#[derive(Debug, Subcommand)]
enum BenchCommand {
    /// Closed-loop loopback echo (specs/benchmarks.md §A).
    Echo(EchoArgs),
    /// The impairment relay's forwarding ceiling and delay accuracy.
    Netem(crate::netem::NetemBenchArgs),
    /// RUDP echo through the impairment relay (specs/benchmarks.md §B).
    Rudp(Box<crate::bench_rudp::RudpBenchArgs>),
    /// What N established, quiet connections cost (CPU, wake-ups, memory).
    Idle(crate::bench_idle::IdleArgs),
    /// Bulk goodput of one connection (specs/benchmarks.md §C): client → server,
    /// except the external QUIC peers, which download.
    Goodput(crate::bench_goodput::GoodputArgs),
    /// DraARLv1 voice fan-out load test against a reflector child process
    /// (specs/benchmarks.md §D).
    Reflector(crate::reflector::ReflectorBenchArgs),
    /// One load-generator process of a split `bench reflector --edges`
    /// stage, steered over stdin/stdout by the stage driver (internal).
    #[command(hide = true)]
    ReflectorGenerator,
    /// Echo, rudp, goodput and reflector cases from a TOML file, each round in
    /// its own process (3 rounds, seeds 42/43/44 unless the file says
    /// otherwise); prints the estimated wall time; writes JSON + report.
    Matrix(MatrixArgs),
}

#[derive(Debug, Args)]
struct MatrixArgs {
    /// The matrix file (see `petrel_bench::matrix` for its layout).
    #[arg(long, value_name = "FILE")]
    config: PathBuf,
    /// Directory under which a `<timestamp>/` folder of results is written.
    #[arg(long, default_value = "petrel-results")]
    out_dir: PathBuf,
    /// Print the estimated wall time and every round's command line; run nothing.
    #[arg(long)]
    dry_run: bool,
}

/// Transports the echo benchmark can drive; each maps to one adapter in
/// `petrel_bench::echo`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
enum Protocol {
    /// Raw UDP, one server socket.
    Udp,
    /// TCP with length-prefixed messages and TCP_NODELAY.
    Tcp,
    /// WebSocket binary messages over TCP (tokio-tungstenite).
    Websocket,
    /// Petrel reliable UDP (KCP ARQ, native handshake, default tuning).
    Rudp,
    /// KCP through tokio_kcp, tuned like Petrel's defaults.
    Kcp,
    /// QUIC through quinn (rustls/ring), one bidirectional stream per client.
    Quic,
    /// TCP + TLS 1.3 (rustls/ring, self-signed certificate made in-process),
    /// length-prefixed messages as for tcp.
    Tls,
    /// WebSocket (tokio-tungstenite) over TLS 1.3 (rustls/ring).
    Wss,
}

/// Runtime layout of `bench echo` (`--io-model`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
enum IoModelArg {
    /// One runtime with --io-threads workers (1 = current-thread) runs everything.
    Shared,
    /// Server on one current-thread runtime, clients on --io-threads
    /// single-thread runtimes, dealt out round-robin.
    Sharded,
}

#[derive(Debug, Args)]
struct EchoArgs {
    /// Transport under test.
    #[arg(long, value_enum, default_value_t = Protocol::Udp)]
    protocol: Protocol,
    /// Message size including the 16-byte header (bytes, 16..=65507).
    #[arg(long, default_value_t = 1024, value_parser = usize::full_range())]
    payload: usize,
    /// Concurrent clients (1..=1024).
    #[arg(long, default_value_t = 1, value_parser = usize::full_range())]
    clients: usize,
    /// Messages in flight per client (1..=4096).
    #[arg(long, default_value_t = 1, value_parser = usize::full_range())]
    window: usize,
    /// Measured seconds (0.001..=3600).
    #[arg(long, default_value = "3", value_parser = Quoted(bench_seconds))]
    seconds: Duration,
    /// Warm-up seconds (0..=3600).
    #[arg(long, default_value = "1", value_parser = Quoted(bench_seconds))]
    warmup: Duration,
    /// Repetitions with a fresh server and clients (1..=100).
    #[arg(long, default_value_t = 1, value_parser = u32::full_range())]
    rounds: u32,
    /// Tokio worker threads (1..=64): with --io-model shared, 1 = current-thread
    /// runtime, more = one multi-thread runtime shared by server and clients;
    /// with sharded, the number of client runtimes.
    #[arg(long, default_value_t = 1, value_parser = usize::full_range())]
    io_threads: usize,
    /// Runtime layout.
    #[arg(long, value_enum, default_value_t = IoModelArg::Shared)]
    io_model: IoModelArg,
    /// Server work per echo, in rounds of SHA-256 over the whole message
    /// (chained; 0..=1000000, default 0): business computation before the echo.
    #[arg(long, default_value_t = 0, value_parser = u32::full_range())]
    work: u32,
    /// UDP-based transports (udp, rudp, kcp, quic): requested SO_SNDBUF
    /// (bytes; default 65536). Refused for tcp, websocket, tls and wss, which
    /// keep the OS defaults.
    #[arg(long, value_parser = usize::full_range())]
    send_buffer: Option<usize>,
    /// UDP-based transports (udp, rudp, kcp, quic): requested SO_RCVBUF
    /// (bytes; default 4194304). Refused for tcp, websocket, tls and wss.
    #[arg(long, value_parser = usize::full_range())]
    recv_buffer: Option<usize>,
    /// Write the JSON result to FILE (`-` for stdout; the table then goes to stderr).
    #[arg(long, value_name = "FILE")]
    json: Option<PathBuf>,
}

/// Runs `petrel bench`; returns the process exit code.
pub fn main(args: BenchArgs) -> ExitCode {
    let outcome = match args.command {
        None => suite(&args.suite),
        Some(BenchCommand::Echo(echo)) => echo_command(&echo),
        Some(BenchCommand::Rudp(rudp)) => return crate::bench_rudp::main(*rudp),
        Some(BenchCommand::Matrix(m)) => matrix_command(&m),
        Some(BenchCommand::Idle(idle)) => return crate::bench_idle::main(&idle),
        Some(BenchCommand::Goodput(g)) => return crate::bench_goodput::main(&g),
        Some(BenchCommand::Reflector(r)) => {
            let outcome = match (r.edges, r.soak) {
                (Some(edges), _) => crate::reflector_cluster::run(&r, edges),
                (None, Some(seconds)) => crate::reflector_soak::run(&r, seconds),
                (None, None) => crate::reflector::run_bench(r),
            };
            return outcome.unwrap_or_else(|e| {
                eprintln!("error: {e:#}");
                ExitCode::FAILURE
            });
        }
        Some(BenchCommand::ReflectorGenerator) => {
            return match petrel_bench::reflector::generator_child::run_stdio() {
                Ok(()) => ExitCode::SUCCESS,
                Err(e) => {
                    eprintln!("error: load generator: {e}");
                    ExitCode::FAILURE
                }
            }
        }
        Some(BenchCommand::Netem(netem)) => {
            return crate::netem::run_bench(netem).unwrap_or_else(|e| {
                eprintln!("error: {e:#}");
                ExitCode::FAILURE
            })
        }
    };
    match outcome {
        Ok(true) => ExitCode::SUCCESS,
        Ok(false) => ExitCode::FAILURE,
        Err(Failure::Usage(msg)) => {
            eprintln!("error: {msg}");
            ExitCode::from(EXIT_USAGE)
        }
        Err(Failure::Run(e)) => {
            eprintln!("error: {e:#}");
            ExitCode::FAILURE
        }
    }
}

enum Failure {
    /// Invalid arguments (exit 2).
    Usage(String),
    /// The benchmark could not run (exit 1).
    Run(anyhow::Error),
}

impl From<anyhow::Error> for Failure {
    fn from(e: anyhow::Error) -> Self {
        Failure::Run(e)
    }
}

use petrel_bench::matrix::MAX_IO_THREADS;

fn runtime(io_threads: usize) -> Result<tokio::runtime::Runtime, Failure> {
    let mut builder = if io_threads <= 1 {
        tokio::runtime::Builder::new_current_thread()
    } else {
        let mut b = tokio::runtime::Builder::new_multi_thread();
        b.worker_threads(io_threads);
        b
    };
    builder
        .enable_all()
        .build()
        .context("cannot start the tokio runtime")
        .map_err(Failure::Run)
}

fn case_name(protocol: Protocol, cfg: &EchoConfig) -> String {
    let name = protocol
        .to_possible_value()
        .map_or_else(String::new, |v| v.get_name().to_owned());
    format!("{name}-{}B-{}x{}", cfg.payload, cfg.clients, cfg.window)
}

/// The one place a protocol becomes a transport, for the default suite: no
/// work, every task on the current runtime.
async fn run_case(
    protocol: Protocol,
    buffers: BufferRequest,
    cfg: &EchoConfig,
) -> Result<EchoReport, EchoError> {
    let case = case_name(protocol, cfg);
    run_layout(protocol, buffers, cfg, &case, Layout::default()).await
}

/// How `bench echo` lays out one run: the server's work per echo and, for
/// the sharded model, the client runtimes.
#[derive(Default)]
struct Layout<'a> {
    options: EchoOptions,
    shards: Option<&'a [Handle]>,
}

async fn run_on<T: EchoTransport + Clone + 'static>(
    transport: &T,
    cfg: &EchoConfig,
    case: &str,
    layout: Layout<'_>,
) -> Result<EchoReport, EchoError> {
    match layout.shards {
        Some(shards) => run_echo_sharded(transport, cfg, case, layout.options, shards).await,
        None => run_echo_with(transport, cfg, case, layout.options).await,
    }
}

fn setup_error(what: &str, e: impl std::error::Error + Send + Sync + 'static) -> EchoError {
    EchoError::Setup {
        what: what.to_owned(),
        source: std::io::Error::other(e),
    }
}

async fn run_layout(
    protocol: Protocol,
    buffers: BufferRequest,
    cfg: &EchoConfig,
    case: &str,
    layout: Layout<'_>,
) -> Result<EchoReport, EchoError> {
    match protocol {
        Protocol::Udp => run_on(&UdpTransport::new(buffers), cfg, case, layout).await,
        Protocol::Tcp => run_on(&TcpTransport, cfg, case, layout).await,
        Protocol::Websocket => run_on(&WebSocketTransport, cfg, case, layout).await,
        Protocol::Rudp => {
            let transport = RudpTransport::new(EndpointConfig::default(), buffers);
            run_on(&transport, cfg, case, layout).await
        }
        Protocol::Kcp => run_on(&KcpTransport::new(buffers), cfg, case, layout).await,
        Protocol::Quic => {
            let transport = QuicTransport::new(buffers)
                .map_err(|e| setup_error("create the QUIC transport", e))?;
            run_on(&transport, cfg, case, layout).await
        }
        Protocol::Tls => {
            let transport =
                TlsTransport::new().map_err(|e| setup_error("create the TLS transport", e))?;
            run_on(&transport, cfg, case, layout).await
        }
        Protocol::Wss => {
            let transport =
                WssTransport::new().map_err(|e| setup_error("create the WSS transport", e))?;
            run_on(&transport, cfg, case, layout).await
        }
    }
}

fn to_failure(e: EchoError) -> Failure {
    match e {
        EchoError::Config(c) => Failure::Usage(c.to_string()),
        other => Failure::Run(other.into()),
    }
}

fn echo_command(args: &EchoArgs) -> Result<bool, Failure> {
    let cfg = EchoConfig {
        payload: args.payload,
        clients: args.clients,
        window: args.window,
        warmup: args.warmup,
        measured: args.seconds,
        rounds: args.rounds,
    };
    cfg.validate().map_err(|e| Failure::Usage(e.to_string()))?;
    if !(1..=MAX_IO_THREADS).contains(&args.io_threads) {
        return Err(Failure::Usage(format!(
            "invalid --io-threads = {}: must be in 1..={MAX_IO_THREADS}",
            args.io_threads
        )));
    }
    if args.work > MAX_WORK {
        return Err(Failure::Usage(format!(
            "invalid --work = {}: must be in 0..={MAX_WORK}",
            args.work
        )));
    }
    crate::args::check_json_target(args.json.as_deref()).map_err(Failure::Usage)?;
    let stream_based = matches!(
        args.protocol,
        Protocol::Tcp | Protocol::Websocket | Protocol::Tls | Protocol::Wss
    );
    if stream_based && (args.send_buffer.is_some() || args.recv_buffer.is_some()) {
        return Err(Failure::Usage(
            "--send-buffer/--recv-buffer apply to udp, rudp, kcp and quic only; tcp, websocket, tls and wss keep the OS defaults".to_owned(),
        ));
    }
    let buffers = BufferRequest {
        send: Some(args.send_buffer.unwrap_or(DEFAULT_SEND_BUFFER)),
        recv: Some(args.recv_buffer.unwrap_or(DEFAULT_RECV_BUFFER)),
    };
    let io_model = match args.io_model {
        IoModelArg::Shared => EchoIoModel::Shared,
        IoModelArg::Sharded => EchoIoModel::Sharded,
    };
    let protocol_name = args
        .protocol
        .to_possible_value()
        .map_or_else(String::new, |v| v.get_name().to_owned());
    let case = echo_case_name(&protocol_name, &cfg, io_model, args.io_threads, args.work);
    let options = EchoOptions { work: args.work };
    let report = match io_model {
        EchoIoModel::Shared => {
            let layout = Layout {
                options,
                shards: None,
            };
            runtime(args.io_threads)?.block_on(run_layout(
                args.protocol,
                buffers,
                &cfg,
                &case,
                layout,
            ))
        }
        EchoIoModel::Sharded => {
            let shards = Shards::start(args.io_threads)
                .context("cannot start the shard runtimes")
                .map_err(Failure::Run)?;
            let layout = Layout {
                options,
                shards: Some(shards.handles()),
            };
            runtime(1)?.block_on(run_layout(args.protocol, buffers, &cfg, &case, layout))
        }
    }
    .map_err(to_failure)?;
    let text = table::render(&[report.summary_row()]);
    match &args.json {
        Some(path) if path == Path::new("-") => {
            eprint!("{text}");
            println!("{}", report.record.to_json().map_err(anyhow::Error::from)?);
        }
        Some(path) => {
            print!("{text}");
            report
                .record
                .write_json(path)
                .map_err(anyhow::Error::from)?;
        }
        None => print!("{text}"),
    }
    Ok(report.record.ok)
}

/// Protocols of the default suite, in table order: RUDP, its baselines and
/// the peers a user would pick instead.
const SUITE_PROTOCOLS: [Protocol; 6] = [
    Protocol::Udp,
    Protocol::Rudp,
    Protocol::Kcp,
    Protocol::Quic,
    Protocol::Tcp,
    Protocol::Websocket,
];

/// Shapes (clients, window) of the default suite, at 1024 B each.
const SUITE_SHAPES: [(usize, usize); 2] = [(4, 16), (1, 1)];

/// Creates `out_dir/<UTC timestamp>/`, e.g. `petrel-results/20261130T115548Z`.
fn results_dir(out_dir: &Path) -> Result<PathBuf, Failure> {
    let stamp: String = rfc3339_utc(SystemTime::now())
        .chars()
        .filter(|c| !matches!(c, '-' | ':'))
        .collect();
    let dir = out_dir.join(stamp);
    // An output directory that cannot be created is a usage error, found before
    // anything runs.
    std::fs::create_dir_all(&dir)
        .map_err(|e| Failure::Usage(format!("cannot create {}: {e}", dir.display())))?;
    Ok(dir)
}

fn matrix_command(args: &MatrixArgs) -> Result<bool, Failure> {
    let matrix = crate::matrix::load(&args.config).map_err(Failure::Usage)?;
    if args.dry_run {
        print!("{}", crate::matrix::dry_run(&matrix));
        return Ok(true);
    }
    let dir = results_dir(&args.out_dir)?;
    match crate::matrix::run(&matrix, &dir)? {
        crate::matrix::Outcome::Finished(ok) => Ok(ok),
        crate::matrix::Outcome::Refused(msg) => Err(Failure::Usage(msg)),
    }
}

/// Writes `record` as `dir/<case>.json` as soon as its case ends, so a later
/// failure keeps what was measured.
fn save(dir: &Path, record: &ResultRecord) -> Result<(), Failure> {
    let path = dir.join(format!("{}.json", record.case));
    record.write_json(&path).map_err(anyhow::Error::from)?;
    Ok(())
}

/// RUDP through the emulator in the default suite: every FEC mode under
/// each impairment profile, at the §B default shape (1024 B, 4 clients × 16).
const SUITE_PROFILES: [Profile; 3] = [Profile::None, Profile::Random, Profile::Burst];
const SUITE_FEC: [FecMode; 3] = [FecMode::None, FecMode::Fixed, FecMode::Adaptive];

/// kcptun through the emulator in the default suite: fixed FEC of each shape
/// under each profile.
const SUITE_KCPTUN_PROFILES: [Profile; 2] = [Profile::Random, Profile::Burst];
const SUITE_KCPTUN_SHAPES: [FecShape; 2] = [
    FecShape::DEFAULT,
    FecShape {
        data_shards: 10,
        parity_shards: 3,
    },
];

/// The kcptun cases of the suite, or none (after one line saying so) when
/// kcptun is not installed.
///
/// # Errors
/// kcptun missing while `PETREL_REQUIRE_KCPTUN` is set.
fn kcptun_cases(echo: &EchoConfig) -> Result<Vec<RudpBenchConfig>, Failure> {
    if KcptunBinaries::from_path().is_none() {
        if kcptun_required() {
            return Err(Failure::Run(KcptunBenchError::NotInstalled.into()));
        }
        println!("kcptun not installed: skipped kcptun rows ({INSTALL_HINT})");
        return Ok(Vec::new());
    }
    Ok(SUITE_KCPTUN_PROFILES
        .iter()
        .flat_map(|&profile| {
            SUITE_KCPTUN_SHAPES
                .iter()
                .map(move |&shape| RudpBenchConfig {
                    echo: echo.clone(),
                    fec: FecMode::Fixed,
                    fec_shape: Some(shape),
                    peer: RudpPeer::Kcptun,
                    profile,
                    ..RudpBenchConfig::default()
                })
        })
        .collect())
}

fn suite(args: &SuiteArgs) -> Result<bool, Failure> {
    let base = EchoConfig {
        warmup: args.warmup,
        measured: args.seconds,
        ..EchoConfig::default()
    };
    base.validate().map_err(|e| Failure::Usage(e.to_string()))?;
    let dir = results_dir(&args.out_dir)?;
    let rt = runtime(1)?;
    let buffers = BufferRequest {
        send: Some(DEFAULT_SEND_BUFFER),
        recv: Some(DEFAULT_RECV_BUFFER),
    };
    let echo_cases: Vec<(Protocol, EchoConfig)> = SUITE_SHAPES
        .iter()
        .flat_map(|&(clients, window)| {
            let base = &base;
            SUITE_PROTOCOLS.iter().map(move |&p| {
                let cfg = EchoConfig {
                    clients,
                    window,
                    ..base.clone()
                };
                (p, cfg)
            })
        })
        .collect();
    let impaired_cases: Vec<RudpBenchConfig> = SUITE_PROFILES
        .iter()
        .flat_map(|&profile| {
            let base = &base;
            SUITE_FEC.iter().map(move |&fec| RudpBenchConfig {
                echo: EchoConfig {
                    clients: 4,
                    window: 16,
                    ..base.clone()
                },
                fec,
                profile,
                ..RudpBenchConfig::default()
            })
        })
        .collect();
    let kcptun_cases = kcptun_cases(&EchoConfig {
        clients: 4,
        window: 16,
        ..base.clone()
    })?;
    let total = echo_cases.len() + impaired_cases.len() + kcptun_cases.len();
    let mut records = Vec::with_capacity(total);
    let mut progress = Progress::new(total as u64, "cases");
    for (protocol, cfg) in &echo_cases {
        progress.start(case_name(*protocol, cfg));
        reset_peak_rss();
        let report = rt
            .block_on(run_case(*protocol, buffers, cfg))
            .map_err(to_failure)?;
        save(&dir, &report.record)?;
        records.push(report.record);
        progress.finish_step();
    }
    for cfg in &impaired_cases {
        progress.start(rudp_case_name(cfg));
        reset_peak_rss();
        let report = run_rudp_bench(cfg).map_err(|e| match e {
            RudpBenchError::Config(c) => Failure::Usage(c.to_string()),
            other => Failure::Run(other.into()),
        })?;
        save(&dir, &report.record)?;
        records.push(report.record);
        progress.finish_step();
    }
    // What kcptun ran with (the same in every kcptun case but the FEC shape).
    let mut kcptun_flags = None;
    for cfg in &kcptun_cases {
        progress.start(rudp_case_name(cfg));
        reset_peak_rss();
        let report = run_kcptun_bench(cfg).map_err(|e| match e {
            KcptunBenchError::Config(c) => Failure::Usage(c.to_string()),
            other => Failure::Run(other.into()),
        })?;
        save(&dir, &report.record)?;
        kcptun_flags = Some(format!(
            "{} (every kcptun row; FEC as named): {}",
            report.peer,
            report.tuning.summary()
        ));
        records.push(report.record);
        progress.finish_step();
    }
    progress.finish();
    let rows: Vec<Row> = records.iter().map(Row::from_record).collect();
    print!("{}", table::render(&rows));
    print!("\n{}", ratios::render(&ratios::ratios(&records)));
    if let Some(flags) = kcptun_flags {
        println!("{flags}");
    }
    println!("results: {}", dir.display());
    let report = write_report(&dir).map_err(anyhow::Error::from)?;
    println!("report: {}", report.display());
    Ok(records.iter().all(|r| r.ok))
}
