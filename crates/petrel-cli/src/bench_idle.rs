//! `petrel bench idle`: the cost of N established, quiet connections.

use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::time::Duration;

use anyhow::Context;
use clap::{Args, ValueEnum};
use petrel_bench::idle::{run_idle, IdleConfig, IdleError, IdleMode};
use petrel_bench::record::ResultRecord;

use crate::args::{seconds, FullRange, Quoted};

/// Exit code for invalid arguments.
const EXIT_USAGE: u8 = 2;

#[derive(Debug, Clone, Copy, ValueEnum)]
enum ModeArg {
    /// Native handshake (keepalive every 5 s).
    Native,
    /// Raw KCP (no keepalive; one client socket per connection).
    Raw,
}

/// Arguments of `petrel bench idle`.
#[derive(Debug, Args)]
pub struct IdleArgs {
    /// Connections to open (1..=100000).
    #[arg(long, default_value_t = 10_000, value_parser = usize::full_range())]
    connections: usize,
    /// Measured idle seconds (0.01..=86400).
    #[arg(long, default_value = "10", value_parser = Quoted(seconds))]
    seconds: Duration,
    /// Handshake mode of the connections.
    #[arg(long, value_enum, default_value_t = ModeArg::Native)]
    mode: ModeArg,
    /// Write the JSON result to FILE (`-` for stdout).
    #[arg(long, value_name = "FILE")]
    json: Option<PathBuf>,
}

/// Runs `petrel bench idle`.
pub fn main(args: &IdleArgs) -> ExitCode {
    match run(args) {
        Ok(code) => code,
        Err(e) => {
            eprintln!("error: {e:#}");
            ExitCode::FAILURE
        }
    }
}

fn run(args: &IdleArgs) -> anyhow::Result<ExitCode> {
    if let Err(e) = crate::args::check_json_target(args.json.as_deref()) {
        eprintln!("error: {e}");
        return Ok(ExitCode::from(EXIT_USAGE));
    }
    let config = IdleConfig {
        connections: args.connections,
        measured: args.seconds,
        mode: match args.mode {
            ModeArg::Native => IdleMode::Native,
            ModeArg::Raw => IdleMode::Raw,
        },
    };
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .context("cannot start the tokio runtime")?;
    let report = match rt.block_on(run_idle(config)) {
        Ok(report) => report,
        Err(IdleError::Config(msg)) => {
            eprintln!("error: {msg}");
            return Ok(ExitCode::from(EXIT_USAGE));
        }
        Err(e) => return Err(e.into()),
    };
    let mut record = ResultRecord::begin(
        "idle",
        &format!("idle-{}", args.connections),
        &config.parameters(),
    )?;
    record.push_round(&report)?;
    record.peak_rss_bytes = petrel_bench::measure::peak_rss_bytes();
    record.ok = report.connections == args.connections;
    let text = format!(
        "connections  setup s  CPU %  wake-ups/s  datagrams/s  RSS MiB  RSS B/conn\n\
         {:>11}  {:>7.2}  {:>5.2}  {:>10.1}  {:>11.1}  {:>7.1}  {:>10.0}\n",
        report.connections,
        report.setup_seconds,
        report.cpu_percent,
        report.wakeups_per_second,
        report.datagrams_per_second,
        report.rss_bytes as f64 / f64::from(1 << 20),
        report.rss_bytes_per_connection,
    );
    match &args.json {
        Some(path) if path == Path::new("-") => {
            eprint!("{text}");
            println!("{}", record.to_json()?);
        }
        Some(path) => {
            print!("{text}");
            record.write_json(path)?;
        }
        None => print!("{text}"),
    }
    Ok(if record.ok {
        ExitCode::SUCCESS
    } else {
        ExitCode::FAILURE
    })
}
