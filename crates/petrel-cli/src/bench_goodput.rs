//! `petrel bench goodput`: bulk goodput of one connection over loopback or the
//! emulator's `p2p` link (`specs/benchmarks.md` §C), client → server for Petrel's
//! transports, server → client (a download) for the QUIC peers. Comma lists of
//! transports and controllers run as a sweep, one case per pair; `--scenario NAME`
//! sets a named link and sweeps its controllers, printing each case's expected
//! outcome and the verdict of its numbers.
//!
//! A QUIC peer that is not installed is skipped with one line naming its install
//! command, unless `PETREL_REQUIRE_QUIC_INTEROP=1` (then the run fails). In a
//! scenario sweep, a transport without one of the scenario's controllers (quinn or
//! TCP without bbrv2/bbrv3, aioquic without BBR) is skipped for that controller.
//!
//! Exit codes: 0 when every case that ran is `ok`, 1 when one is not or the run
//! failed, 2 for invalid arguments (including a pair that cannot run: quinn or Linux
//! TCP with bbrv2/bbrv3, TCP through `p2p`).

use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::time::Duration;

use anyhow::Context as _;
use clap::builder::{PossibleValue, PossibleValuesParser, TypedValueParser};
use clap::{Args, ValueEnum};
use petrel_bench::goodput::{
    peer_required, run_goodput, CongestionKind, GoodputConfig, GoodputError, GoodputProfile,
    GoodputReport, GoodputRound, GoodputTransport, Scenario, RUDP_MTU_RANGE, RUDP_WINDOW_RANGE,
};

use crate::args::{link_delay_ms, mbit_per_s, megabytes, percent, FullRange, Quoted, Whole};

/// Exit code for invalid arguments (the same as clap's parse errors).
const EXIT_USAGE: u8 = 2;

#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
enum TransportArg {
    /// Petrel RUDP with the Petrel controller.
    Rudp,
    /// QUIC (quinn) with the Petrel controller.
    Quic,
    /// QUIC (quinn) with quinn's own controller: reno, cubic, bbrv1 only.
    Quinn,
    /// Kernel TCP via TCP_CONGESTION (reno, cubic, bbrv1 = bbr); loopback only.
    Tcp,
    /// aioquic client ↔ aioquic server (python3 -m pip install aioquic); reno, cubic.
    Aioquic,
    /// aioquic client downloading from a Petrel QUIC server (Petrel controller).
    AioquicQuic,
    /// Petrel QUIC client downloading from an aioquic server (aioquic's reno, cubic).
    QuicAioquic,
    /// ngtcp2 example client ↔ server over HTTP/3 (apt-get install ngtcp2-client
    /// ngtcp2-server); reno, cubic, bbrv1 = bbr, bbrv2 = bbr2.
    Ngtcp2,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
enum ScenarioArg {
    /// 5 Mbit/s, 100 ms RTT, 500 ms queue, 6 MB: BBR holds the RTT, CUBIC fills the queue.
    BbrBufferbloat,
    /// 100 Mbit/s, 20 ms RTT, 1 % loss each way, 10 MB: BBR keeps the link, loss-based collapse.
    BbrLoss,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
enum ProfileArg {
    /// Plain loopback, no emulator.
    None,
    /// Emulated link: --bandwidth-mbps, --delay-ms one way, --queue packets.
    P2p,
}

/// Arguments of `petrel bench goodput`.
#[derive(Debug, Args)]
pub struct GoodputArgs {
    /// Transports, comma-separated.
    #[arg(long, value_enum, value_delimiter = ',', default_value = "rudp")]
    transport: Vec<TransportArg>,
    /// Congestion controllers, comma-separated.
    #[arg(long, value_parser = cc_parser(), value_delimiter = ',', default_value = "cubic", conflicts_with = "scenario")]
    cc: Vec<CongestionKind>,
    /// A named case: sets the link and size, sweeps cubic, bbrv1, bbrv2, bbrv3, reno,
    /// and checks each against the expected outcome.
    #[arg(long, value_enum)]
    scenario: Option<ScenarioArg>,
    /// Link between client and server.
    #[arg(long, value_enum, default_value_t = ProfileArg::P2p, conflicts_with = "scenario")]
    profile: ProfileArg,
    /// p2p link rate per direction (Mbit/s, 1..=10000).
    #[arg(long, default_value_t = 200.0, value_parser = Quoted(mbit_per_s), allow_negative_numbers = true, conflicts_with = "scenario")]
    bandwidth_mbps: f64,
    /// p2p one-way delay per direction (ms, 0..=1000).
    #[arg(long, default_value_t = 4.0, value_parser = Quoted(link_delay_ms), allow_negative_numbers = true, conflicts_with = "scenario")]
    delay_ms: f64,
    /// p2p drop-tail queue per direction (packets, 1..=4096).
    #[arg(long, default_value_t = 1000, value_parser = usize::full_range(), conflicts_with = "scenario")]
    queue: usize,
    /// p2p random loss per direction (%, 0..=100; optional `%`).
    #[arg(long, default_value = "0", value_parser = Quoted(percent), allow_negative_numbers = true, conflicts_with = "scenario")]
    loss: f64,
    /// Bytes to transfer, in MB of 10^6 bytes (> 0; fractions allowed).
    /// Default 100, or the scenario's own size.
    #[arg(long, value_parser = Quoted(megabytes), allow_negative_numbers = true)]
    size_mb: Option<f64>,
    /// Transfers per case (1..=100).
    #[arg(long, default_value_t = 3, value_parser = u32::full_range())]
    repetitions: u32,
    /// RUDP send and receive windows (segments, 16..=4096; default 512): e.g. 1024
    /// to check that spurious timeouts are undone on a deep queue. Other
    /// transports ignore it.
    #[arg(long, value_parser = Whole::new(*RUDP_WINDOW_RANGE.start(), *RUDP_WINDOW_RANGE.end()))]
    rudp_window: Option<u16>,
    /// RUDP datagram size (bytes, header included, 256..=9000; default 1400): e.g.
    /// 8972 for a path of 9000-byte jumbo frames. Other transports ignore it.
    #[arg(long, value_parser = Whole::new(*RUDP_MTU_RANGE.start(), *RUDP_MTU_RANGE.end()))]
    rudp_mtu: Option<u16>,
    /// Seed of repetition 0 (relay, BBR probe timing); repetition i uses seed + i.
    #[arg(long, default_value_t = 42, value_parser = u64::full_range())]
    seed: u64,
    /// Write the JSON result to FILE (`-` for stdout; the table then goes to stderr):
    /// one record for one case, an array of records for a sweep.
    #[arg(long, value_name = "FILE")]
    json: Option<PathBuf>,
    /// Also write one record per case to `DIR/goodput-<case>.json` (for `petrel report DIR`).
    #[arg(long, value_name = "DIR")]
    out_dir: Option<PathBuf>,
}

/// `--cc` values: the registry's controllers that goodput measures
/// ([`GoodputConfig::controllers`]), each with its summary as help.
fn cc_parser() -> impl TypedValueParser<Value = CongestionKind> {
    let values =
        GoodputConfig::controllers().map(|k| PossibleValue::new(k.as_str()).help(k.summary()));
    PossibleValuesParser::new(values).try_map(|name| name.parse::<CongestionKind>())
}

fn transport(t: TransportArg) -> GoodputTransport {
    match t {
        TransportArg::Rudp => GoodputTransport::Rudp,
        TransportArg::Quic => GoodputTransport::Quic,
        TransportArg::Quinn => GoodputTransport::Quinn,
        TransportArg::Tcp => GoodputTransport::Tcp,
        TransportArg::Aioquic => GoodputTransport::Aioquic,
        TransportArg::AioquicQuic => GoodputTransport::AioquicQuic,
        TransportArg::QuicAioquic => GoodputTransport::QuicAioquic,
        TransportArg::Ngtcp2 => GoodputTransport::Ngtcp2,
    }
}

fn scenario(s: ScenarioArg) -> Scenario {
    match s {
        ScenarioArg::BbrBufferbloat => Scenario::BbrBufferbloat,
        ScenarioArg::BbrLoss => Scenario::BbrLoss,
    }
}

/// One case to run, or one a scenario sweep leaves out (and why).
enum Planned {
    Run(GoodputConfig),
    Skip(String),
}

/// Every case of the sweep, validated; an error names the first bad flag or pair.
fn cases(args: &GoodputArgs) -> Result<Vec<Planned>, String> {
    let mut base = GoodputConfig {
        profile: match args.profile {
            ProfileArg::None => GoodputProfile::None,
            ProfileArg::P2p => GoodputProfile::P2p,
        },
        // The value parsers bound all three, so the products fit.
        bandwidth_bps: (args.bandwidth_mbps * 1e6).round() as u64,
        delay: Duration::from_secs_f64(args.delay_ms / 1e3),
        queue_packets: args.queue,
        loss_percent: args.loss * 100.0,
        repetitions: args.repetitions,
        seed: args.seed,
        rudp_window: args
            .rudp_window
            .unwrap_or(GoodputConfig::default().rudp_window),
        rudp_mtu: args.rudp_mtu.unwrap_or(GoodputConfig::default().rudp_mtu),
        ..GoodputConfig::default()
    };
    let controllers = match args.scenario.map(scenario) {
        Some(sc) => {
            base = base.with_scenario(sc);
            sc.controllers().to_vec()
        }
        None => args.cc.clone(),
    };
    if let Some(mb) = args.size_mb {
        base.size_bytes = (mb * 1e6).round() as u64;
    }
    let mut out: Vec<Planned> = Vec::new();
    for &t in &args.transport {
        for &cc in &controllers {
            let case = GoodputConfig {
                transport: transport(t),
                cc,
                ..base
            };
            match case.validate() {
                Ok(())
                    if out
                        .iter()
                        .any(|p| matches!(p, Planned::Run(c) if *c == case)) => {}
                Ok(()) => out.push(Planned::Run(case)),
                Err(e) if args.scenario.is_some() => {
                    out.push(Planned::Skip(format!("{}: {e}", case.case_name())));
                }
                Err(e) => {
                    return Err(format!(
                        "--transport {} --cc {}: {e}",
                        case.transport, case.cc
                    ))
                }
            }
        }
    }
    Ok(out)
}

fn usage(msg: impl std::fmt::Display) -> ExitCode {
    eprintln!("error: {msg}");
    ExitCode::from(EXIT_USAGE)
}

/// Runs `petrel bench goodput`; returns the process exit code.
pub fn main(args: &GoodputArgs) -> ExitCode {
    let cases = match cases(args) {
        Ok(c) => c,
        Err(msg) => return usage(msg),
    };
    if let Err(e) = crate::args::check_json_target(args.json.as_deref()) {
        return usage(e);
    }
    if let Some(dir) = &args.out_dir {
        if let Err(e) = std::fs::create_dir_all(dir) {
            return usage(format!("invalid --out-dir {}: {e}", dir.display()));
        }
    }
    let mut reports = Vec::new();
    for planned in &cases {
        let case = match planned {
            Planned::Run(case) => case,
            Planned::Skip(why) => {
                eprintln!("SKIPPED {why}");
                continue;
            }
        };
        eprintln!(
            "{}: {} × {} bytes",
            case.case_name(),
            case.repetitions,
            case.size_bytes
        );
        match run_goodput(case, |r| eprintln!("  {}", round_line(r))) {
            Ok(report) => reports.push(report),
            Err(GoodputError::PeerMissing(missing)) if !peer_required() => {
                eprintln!(
                    "SKIPPED {}: {missing}; set PETREL_REQUIRE_QUIC_INTEROP=1 to fail instead",
                    case.case_name()
                );
            }
            Err(e) => {
                eprintln!("error: {e:#}");
                return ExitCode::FAILURE;
            }
        }
    }
    match output(&reports, args.json.as_deref(), args.out_dir.as_deref()) {
        Ok(()) if reports.iter().all(|r| r.record.ok) => ExitCode::SUCCESS,
        Ok(()) => ExitCode::FAILURE,
        Err(e) => {
            eprintln!("error: {e:#}");
            ExitCode::FAILURE
        }
    }
}

fn opt(v: Option<f64>, decimals: usize) -> String {
    v.map_or_else(|| "-".to_owned(), |v| format!("{v:.decimals$}"))
}

fn round_line(r: &GoodputRound) -> String {
    let status = match &r.error {
        Some(e) => format!("FAILED: {e}"),
        None if r.mismatched_bytes > 0 => format!("CONTENT MISMATCH: {} bytes", r.mismatched_bytes),
        None => "verified".to_owned(),
    };
    let relay_drops = r.relay.map_or_else(
        || "-".to_owned(),
        |x| (x.upstream_random_drops + x.downstream_random_drops).to_string(),
    );
    let verdict = r
        .verdict
        .as_deref()
        .map_or_else(String::new, |v| format!(", scenario {v}"));
    format!(
        "rep {}: goodput {} Mbit/s ({} %), wall {} Mbit/s, {} s, lost/retx {}, link loss drops {relay_drops}, rtt p50/p99 {}/{} ms, {} CPU s/GB, {status}{verdict}",
        r.repetition,
        opt(r.goodput_mbps, 1),
        opt(r.efficiency_percent, 1),
        opt(r.wall_goodput_mbps, 1),
        opt(r.transfer_s, 3),
        r.sender
            .packets_lost_or_retransmitted
            .map_or_else(|| "-".to_owned(), |n| n.to_string()),
        opt(r.rtt_p50_ms, 1),
        opt(r.rtt_p99_ms, 1),
        opt(r.cpu_s_per_gb, 2),
    )
}

/// `pass` when every repetition met the scenario's check, `concern` when one did
/// not, `-` without a scenario or figures.
fn verdict(r: &GoodputReport) -> &'static str {
    let verdicts: Vec<&str> = r
        .rounds
        .iter()
        .filter_map(|x| x.verdict.as_deref())
        .collect();
    if verdicts.is_empty() {
        "-"
    } else if verdicts.iter().all(|&v| v == "pass") {
        "pass"
    } else {
        "concern"
    }
}

/// One row per case: mean ± stdev [min..max] of goodput, mean of the others; then,
/// for scenario cases, the expected outcome next to the verdict.
fn render(reports: &[GoodputReport]) -> String {
    let mut text = format!(
        "{:<52} {:>4} {:>30} {:>7} {:>8} {:>7} {:>9} {:>9} {:>9} {:>8} {:>3}\n",
        "case",
        "reps",
        "goodput Mbit/s mean±sd [min..max]",
        "eff %",
        "wall Mb/s",
        "wall %",
        "rtt p50",
        "rtt p99",
        "queue p50",
        "CPU s/GB",
        "ok"
    );
    for r in reports {
        let s = |k: &str| r.stats.get(k);
        let goodput = s("goodput_mbps").map_or_else(
            || "-".to_owned(),
            |g| format!("{:.1}±{:.1} [{:.1}..{:.1}]", g.mean, g.stdev, g.min, g.max),
        );
        let mean = |k: &str, d: usize| opt(s(k).map(|x| x.mean), d);
        text.push_str(&format!(
            "{:<52} {:>4} {:>30} {:>7} {:>8} {:>7} {:>9} {:>9} {:>9} {:>8} {:>3}\n",
            r.record.case,
            r.rounds.len(),
            goodput,
            mean("efficiency_percent", 1),
            mean("wall_goodput_mbps", 1),
            mean("wall_efficiency_percent", 1),
            mean("rtt_p50_ms", 1),
            mean("rtt_p99_ms", 1),
            mean("queue_delay_p50_ms", 1),
            mean("cpu_s_per_gb", 2),
            if r.record.ok { "yes" } else { "NO" },
        ));
    }
    let scenario_rows: Vec<&GoodputReport> = reports
        .iter()
        .filter(|r| r.config.scenario.is_some())
        .collect();
    if !scenario_rows.is_empty() {
        text.push_str("\nRTT and queue delay in ms (the sender's srtt; - where the sender is not Petrel's).\n");
        text.push_str(&format!(
            "{:<52} {:>8}  {:<28} expected\n",
            "case", "verdict", "check"
        ));
        for r in scenario_rows {
            if let Some(e) = r.config.expectation() {
                text.push_str(&format!(
                    "{:<52} {:>8}  {:<28} {}\n",
                    r.record.case,
                    verdict(r),
                    e.criterion,
                    e.expected
                ));
            }
        }
    }
    text
}

fn output(
    reports: &[GoodputReport],
    json: Option<&Path>,
    dir: Option<&Path>,
) -> anyhow::Result<()> {
    let text = render(reports);
    let records: Vec<_> = reports.iter().map(|r| &r.record).collect();
    let body = match records.as_slice() {
        [one] => serde_json::to_string_pretty(one)?,
        many => serde_json::to_string_pretty(many)?,
    };
    match json {
        Some(path) if path == Path::new("-") => {
            eprint!("{text}");
            println!("{body}");
        }
        Some(path) => {
            print!("{text}");
            std::fs::write(path, body + "\n")
                .with_context(|| format!("writing {}", path.display()))?;
        }
        None => print!("{text}"),
    }
    if let Some(dir) = dir {
        for r in reports {
            let path = dir.join(format!("goodput-{}.json", r.record.case));
            r.record
                .write_json(&path)
                .with_context(|| format!("writing {}", path.display()))?;
        }
    }
    Ok(())
}
