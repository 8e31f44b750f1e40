//! `petrel bench goodput`: bulk goodput of one connection, client → server, over
//! loopback or the emulator's `p2p` link (`specs/benchmarks.md` §C). Comma lists of
//! transports and controllers run as a sweep, one case per pair.
//!
//! Exit codes: 0 when every case is `ok`, 1 when one is not or the run failed, 2 for
//! invalid arguments (including a pair that cannot run: quinn or Linux TCP with
//! bbrv2/bbrv3, TCP through `p2p`).

use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::time::Duration;

use anyhow::Context as _;
use clap::builder::{PossibleValue, PossibleValuesParser, TypedValueParser};
use clap::{Args, ValueEnum};
use petrel_bench::goodput::{
    run_goodput, CongestionKind, GoodputConfig, GoodputProfile, GoodputReport, GoodputRound,
    GoodputTransport,
};

use crate::args::{link_delay_ms, mbit_per_s, megabytes, FullRange, Quoted};

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
    #[arg(long, value_parser = cc_parser(), value_delimiter = ',', default_value = "cubic")]
    cc: Vec<CongestionKind>,
    /// Link between client and server.
    #[arg(long, value_enum, default_value_t = ProfileArg::P2p)]
    profile: ProfileArg,
    /// p2p link rate per direction (Mbit/s, 1..=10000).
    #[arg(long, default_value_t = 200.0, value_parser = Quoted(mbit_per_s), allow_negative_numbers = true)]
    bandwidth_mbps: f64,
    /// p2p one-way delay per direction (ms, 0..=1000).
    #[arg(long, default_value_t = 4.0, value_parser = Quoted(link_delay_ms), allow_negative_numbers = true)]
    delay_ms: f64,
    /// p2p drop-tail queue per direction (packets, 1..=4096).
    #[arg(long, default_value_t = 1000, value_parser = usize::full_range())]
    queue: usize,
    /// Bytes to transfer, in MB of 10^6 bytes (> 0; fractions allowed).
    #[arg(long, default_value_t = 100.0, value_parser = Quoted(megabytes), allow_negative_numbers = true)]
    size_mb: f64,
    /// Transfers per case (1..=100).
    #[arg(long, default_value_t = 3, value_parser = u32::full_range())]
    repetitions: u32,
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
    }
}

/// Every case of the sweep, validated; an error names the first bad flag or pair.
fn cases(args: &GoodputArgs) -> Result<Vec<GoodputConfig>, String> {
    let base = GoodputConfig {
        profile: match args.profile {
            ProfileArg::None => GoodputProfile::None,
            ProfileArg::P2p => GoodputProfile::P2p,
        },
        // The value parsers bound all three, so the products fit.
        bandwidth_bps: (args.bandwidth_mbps * 1e6).round() as u64,
        delay: Duration::from_secs_f64(args.delay_ms / 1e3),
        queue_packets: args.queue,
        size_bytes: (args.size_mb * 1e6).round() as u64,
        repetitions: args.repetitions,
        seed: args.seed,
        ..GoodputConfig::default()
    };
    let mut out = Vec::new();
    for &t in &args.transport {
        for &cc in &args.cc {
            let case = GoodputConfig {
                transport: transport(t),
                cc,
                ..base
            };
            case.validate()
                .map_err(|e| format!("--transport {} --cc {}: {e}", case.transport, case.cc))?;
            if !out.contains(&case) {
                out.push(case);
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
    for case in &cases {
        eprintln!(
            "{}: {} × {} bytes",
            case.case_name(),
            case.repetitions,
            case.size_bytes
        );
        match run_goodput(case, |r| eprintln!("  {}", round_line(r))) {
            Ok(report) => reports.push(report),
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
    format!(
        "rep {}: goodput {} Mbit/s ({} %), wall {} Mbit/s, {} s, lost/retx {}, {status}",
        r.repetition,
        opt(r.goodput_mbps, 1),
        opt(r.efficiency_percent, 1),
        opt(r.wall_goodput_mbps, 1),
        opt(r.transfer_s, 3),
        r.sender
            .packets_lost_or_retransmitted
            .map_or_else(|| "-".to_owned(), |n| n.to_string()),
    )
}

/// One row per case: mean ± stdev [min..max] of goodput, mean of the others.
fn render(reports: &[GoodputReport]) -> String {
    let mut text = format!(
        "{:<40} {:>4} {:>30} {:>8} {:>10} {:>8} {:>3}\n",
        "case", "reps", "goodput Mbit/s mean±sd [min..max]", "eff %", "wall Mbit/s", "wall %", "ok"
    );
    for r in reports {
        let s = |k: &str| r.stats.get(k);
        let goodput = s("goodput_mbps").map_or_else(
            || "-".to_owned(),
            |g| format!("{:.1}±{:.1} [{:.1}..{:.1}]", g.mean, g.stdev, g.min, g.max),
        );
        text.push_str(&format!(
            "{:<40} {:>4} {:>30} {:>8} {:>10} {:>8} {:>3}\n",
            r.record.case,
            r.rounds.len(),
            goodput,
            opt(s("efficiency_percent").map(|x| x.mean), 1),
            opt(s("wall_goodput_mbps").map(|x| x.mean), 1),
            opt(s("wall_efficiency_percent").map(|x| x.mean), 1),
            if r.record.ok { "yes" } else { "NO" },
        ));
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
