//! `petrel bench rudp`: RUDP echo through the impairment relay
//! (`specs/benchmarks.md` §B), with Petrel or kcptun (`--peer kcptun`) as the
//! implementation under test.
//!
//! Exit codes: 0 when the result is `ok` (or kcptun is not installed and
//! `PETREL_REQUIRE_KCPTUN` is unset: the case is skipped with one line), 1 when it
//! is not or the run failed, 2 for invalid arguments.

use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::time::Duration;

use anyhow::Context as _;
use clap::{Args, ValueEnum};
use petrel_bench::echo::EchoConfig;
use petrel_bench::record::ResultRecord;
use petrel_bench::rudp_bench::kcptun::{kcptun_required, INSTALL_HINT};
use petrel_bench::rudp_bench::{
    run_kcptun_bench, run_rudp_bench, FecMode, FecShape, IoModel, KcptunBenchError,
    KcptunBenchReport, LinkOverrides, RudpBenchConfig, RudpBenchError, RudpBenchReport, RudpPeer,
};
use petrel_bench::table;
use petrel_netem::Profile;

use crate::args::{bench_seconds, millis, percent, FullRange, Quoted};
use petrel_bench::rudp_bench::case_name;

/// Exit code for invalid arguments (the same as clap's parse errors).
const EXIT_USAGE: u8 = 2;

/// Impairment profiles of §B.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
enum ProfileArg {
    /// No impairment.
    None,
    /// 5 % loss, 10 ms one-way, 1 % duplication, 5 % reordered by +15 ms.
    Random,
    /// 3 of every 100 dropped, plus random's delay, duplication and reordering.
    Burst,
    /// burst + 2 % random loss; defaults to 120 s, 4096 B, window 16.
    Soak,
}

impl From<ProfileArg> for Profile {
    fn from(p: ProfileArg) -> Self {
        match p {
            ProfileArg::None => Profile::None,
            ProfileArg::Random => Profile::Random,
            ProfileArg::Burst => Profile::Burst,
            ProfileArg::Soak => Profile::Soak,
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
enum IoModelArg {
    /// One runtime with --io-threads workers.
    Shared,
    /// --io-threads single-thread runtimes; clients dealt out round-robin.
    Sharded,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
enum PeerArg {
    /// Petrel RUDP endpoints in this process.
    Petrel,
    /// kcptun-client/kcptun-server child processes (kcp-go), a TCP echo behind them,
    /// tuned like Petrel; skipped when not installed (apt install kcptun).
    Kcptun,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
enum FecArg {
    /// ARQ only.
    None,
    /// Fixed groups of --fec-shape (default 8 data + 2 parity shards).
    Fixed,
    /// Up to 8 data + 4 parity shards, parity from the peer's loss reports.
    Adaptive,
}

/// Arguments of `petrel bench rudp`.
#[derive(Debug, Args)]
pub struct RudpBenchArgs {
    /// Message size including the 16-byte header (bytes, 16..=65507). Default 1024
    /// (4096 with --profile soak).
    #[arg(long, value_parser = usize::full_range())]
    payload: Option<usize>,
    /// Concurrent clients (1..=1024).
    #[arg(long, default_value_t = 4, value_parser = usize::full_range())]
    clients: usize,
    /// Messages in flight per client (1..=4096).
    #[arg(long, default_value_t = 16, value_parser = usize::full_range())]
    window: usize,
    /// Runtime layout.
    #[arg(long, value_enum, default_value_t = IoModelArg::Shared)]
    io_model: IoModelArg,
    /// Workers of the shared runtime (1 = current-thread), or number of shards (1..=64).
    #[arg(long, default_value_t = 1, value_parser = usize::full_range())]
    io_threads: usize,
    /// Implementation under test.
    #[arg(long, value_enum, default_value_t = PeerArg::Petrel)]
    peer: PeerArg,
    /// Forward error correction (kcptun: none or fixed).
    #[arg(long, value_enum, default_value_t = FecArg::None)]
    fec: FecArg,
    /// Data+parity shards of a fixed FEC group, D in 1..=64, P in 1..=16 (default
    /// 8+2); only with --fec fixed.
    #[arg(long, value_name = "D+P", value_parser = parse_shape)]
    fec_shape: Option<FecShape>,
    /// Impairment of both directions.
    #[arg(long, value_enum, default_value_t = ProfileArg::None)]
    profile: ProfileArg,
    /// Override: random loss per direction (%, 0..=100).
    #[arg(long, value_name = "PERCENT", value_parser = Quoted(percent), allow_negative_numbers = true)]
    loss: Option<f64>,
    /// Override: one-way delay (ms, 0..=60000).
    #[arg(long, value_name = "MS", value_parser = Quoted(millis), allow_negative_numbers = true)]
    delay_ms: Option<Duration>,
    /// Override: duplication per direction (%, 0..=100).
    #[arg(long, value_name = "PERCENT", value_parser = Quoted(percent), allow_negative_numbers = true)]
    duplicate: Option<f64>,
    /// Override: share of packets reordered by the profile's extra delay (%, 0..=100).
    #[arg(long, value_name = "PERCENT", value_parser = Quoted(percent), allow_negative_numbers = true)]
    reorder: Option<f64>,
    /// Measured seconds (0.001..=3600). Default 3 (120 with --profile soak).
    #[arg(long, value_parser = Quoted(bench_seconds))]
    seconds: Option<Duration>,
    /// Warm-up seconds (0..=3600).
    #[arg(long, default_value = "2", value_parser = Quoted(bench_seconds))]
    warmup: Duration,
    /// Rounds (1..=100); round i seeds the relay with seed + i.
    #[arg(long, default_value_t = 3, value_parser = u32::full_range())]
    rounds: u32,
    /// Seed of round 0.
    #[arg(long, default_value_t = 42, value_parser = u64::full_range())]
    seed: u64,
    /// Write the JSON result to FILE (`-` for stdout; the table then goes to stderr).
    #[arg(long, value_name = "FILE")]
    json: Option<PathBuf>,
}

fn parse_shape(s: &str) -> Result<FecShape, String> {
    s.parse()
        .map_err(|e: petrel_bench::rudp_bench::FecShapeError| e.to_string())
}

fn config(args: &RudpBenchArgs) -> RudpBenchConfig {
    let soak = args.profile == ProfileArg::Soak;
    RudpBenchConfig {
        echo: EchoConfig {
            payload: args.payload.unwrap_or(if soak { 4096 } else { 1024 }),
            clients: args.clients,
            window: args.window,
            warmup: args.warmup,
            measured: args
                .seconds
                .unwrap_or(Duration::from_secs(if soak { 120 } else { 3 })),
            rounds: args.rounds,
        },
        io_model: match args.io_model {
            IoModelArg::Shared => IoModel::Shared,
            IoModelArg::Sharded => IoModel::Sharded,
        },
        io_threads: args.io_threads,
        fec: match args.fec {
            FecArg::None => FecMode::None,
            FecArg::Fixed => FecMode::Fixed,
            FecArg::Adaptive => FecMode::Adaptive,
        },
        fec_shape: args.fec_shape,
        peer: match args.peer {
            PeerArg::Petrel => RudpPeer::Petrel,
            PeerArg::Kcptun => RudpPeer::Kcptun,
        },
        profile: args.profile.into(),
        overrides: LinkOverrides {
            loss: args.loss,
            delay: args.delay_ms,
            duplicate: args.duplicate,
            reorder: args.reorder,
        },
        seed: args.seed,
    }
}

fn usage(msg: impl std::fmt::Display) -> ExitCode {
    eprintln!("error: {msg}");
    ExitCode::from(EXIT_USAGE)
}

/// Runs `petrel bench rudp`; returns the process exit code.
pub fn main(args: RudpBenchArgs) -> ExitCode {
    let cfg = config(&args);
    if let Err(e) = cfg.validate() {
        return usage(e);
    }
    if let Err(e) = crate::args::check_json_target(args.json.as_deref()) {
        return usage(e);
    }
    let (record, text) = match cfg.peer {
        RudpPeer::Petrel => match run_rudp_bench(&cfg) {
            Ok(r) => {
                let text = render(&r);
                (r.record, text)
            }
            Err(RudpBenchError::Config(e)) => return usage(e),
            Err(e) => {
                eprintln!("error: {e:#}");
                return ExitCode::FAILURE;
            }
        },
        RudpPeer::Kcptun => match run_kcptun_bench(&cfg) {
            Ok(r) => {
                let text = render_kcptun(&r);
                (r.record, text)
            }
            Err(KcptunBenchError::NotInstalled) if !kcptun_required() => {
                println!(
                    "kcptun not installed: skipped {} ({INSTALL_HINT})",
                    case_name(&cfg)
                );
                return ExitCode::SUCCESS;
            }
            Err(KcptunBenchError::Config(e)) => return usage(e),
            Err(e) => {
                eprintln!("error: {e:#}");
                return ExitCode::FAILURE;
            }
        },
    };
    match output(&record, &text, args.json.as_deref()) {
        Ok(()) if record.ok => ExitCode::SUCCESS,
        Ok(()) => ExitCode::FAILURE,
        Err(e) => {
            eprintln!("error: {e:#}");
            ExitCode::FAILURE
        }
    }
}

/// `median [min..max]` lines of `keys` present in `record`'s summary.
fn figures(record: &ResultRecord, rounds: usize, keys: &[(&str, &str, usize)]) -> String {
    let s = &record.summary;
    let fig = |key: &str, decimals: usize| {
        s.get(key).map_or_else(
            || "-".to_owned(),
            |v| {
                format!(
                    "{:.d$} [{:.d$}..{:.d$}]",
                    v.median,
                    v.min,
                    v.max,
                    d = decimals
                )
            },
        )
    };
    let mut text = format!("median [min..max] over {rounds} rounds:\n");
    for &(label, key, decimals) in keys {
        if key.starts_with("fec_") && !s.contains_key(key) {
            continue;
        }
        text.push_str(&format!("  {label}: {}\n", fig(key, decimals)));
    }
    text
}

/// The summary table plus the §B figures the echo table has no columns for.
fn render(report: &RudpBenchReport) -> String {
    let mut text = table::render(&[report.summary_row()]);
    text.push_str(&figures(
        &report.record,
        report.rounds.len(),
        &[
            ("RTT p95 µs", "rtt_p95_us", 0),
            ("RTT max µs", "rtt_max_us", 0),
            ("overhead %", "overhead_percent", 1),
            (
                "retransmissions / 1000 rt",
                "retransmissions_per_1000_rt",
                1,
            ),
            ("measured loss %", "measured_loss_percent", 2),
            ("relay route peak bytes", "relay_route_peak_bytes", 0),
            ("peak RSS bytes", "peak_rss_bytes", 0),
            ("FEC recoveries / 1000 rt", "fec_recoveries_per_1000_rt", 1),
            (
                "FEC retained bytes (100 ms samples, peak)",
                "fec_sampled_peak_retained_bytes",
                0,
            ),
            ("FEC max parity", "fec_max_parity", 0),
            ("FEC policy changes", "fec_policy_changes", 0),
        ],
    ));
    if let Some(r) = report.rounds.first() {
        text.push_str(&format!(
            "configured loss: {:.2} % per direction\n",
            r.relay.configured_loss * 100.0
        ));
    }
    text
}

/// The summary table, kcptun's figures (its processes' CPU next to the bench
/// process's), the peer's version and the flags it ran with.
fn render_kcptun(report: &KcptunBenchReport) -> String {
    let mut text = table::render(&[report.summary_row()]);
    text.push_str(&figures(
        &report.record,
        report.rounds.len(),
        &[
            ("RTT p95 µs", "rtt_p95_us", 0),
            ("RTT max µs", "rtt_max_us", 0),
            ("kcptun CPU % (client + server)", "children_cpu_percent", 1),
            ("kcptun-client CPU %", "client_cpu_percent", 1),
            ("kcptun-server CPU %", "server_cpu_percent", 1),
            ("overhead % (SNMP OutBytes)", "overhead_percent", 1),
            (
                "retransmissions / 1000 rt (SNMP RetransSegs)",
                "retransmissions_per_1000_rt",
                1,
            ),
            (
                "FEC recoveries / 1000 rt (SNMP FECRecovered)",
                "fec_recoveries_per_1000_rt",
                1,
            ),
            ("measured loss %", "measured_loss_percent", 2),
            ("peak RSS bytes (bench process)", "peak_rss_bytes", 0),
        ],
    ));
    if let Some(r) = report.rounds.first() {
        text.push_str(&format!(
            "configured loss: {:.2} % per direction\n",
            r.relay.configured_loss * 100.0
        ));
    }
    if let Some(why) = report.rounds.iter().find_map(|r| r.snmp_error.as_deref()) {
        text.push_str(&format!("kcptun SNMP counters missing: {why}\n"));
    }
    text.push_str(&format!("{}: {}\n", report.peer, report.tuning.summary()));
    text
}

fn output(record: &ResultRecord, text: &str, json: Option<&Path>) -> anyhow::Result<()> {
    match json {
        Some(path) if path == Path::new("-") => {
            eprint!("{text}");
            println!("{}", record.to_json()?);
        }
        Some(path) => {
            print!("{text}");
            record
                .write_json(path)
                .with_context(|| format!("writing {}", path.display()))?;
        }
        None => print!("{text}"),
    }
    Ok(())
}
