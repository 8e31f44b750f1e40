//! The `petrel` command: clap subcommands over Petrel's crates.

mod args;
mod bench;
mod bench_goodput;
mod bench_idle;
mod bench_rudp;
mod man;
mod matrix;
mod netem;
mod progress;
mod reflector;
mod reflector_cluster;
mod reflector_login;
mod reflector_soak;
mod report;

use std::process::ExitCode;

use clap::{CommandFactory, FromArgMatches, Parser, Subcommand};

/// Fast, reliable, measurable real-time networking over UDP.
#[derive(Debug, Parser)]
#[command(name = "petrel", version = env!("PETREL_VERSION"), about)]
pub(crate) struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Debug, Subcommand)]
enum Command {
    /// Run benchmarks (no subcommand: the default suite).
    Bench(bench::BenchArgs),
    /// Relay UDP through a seeded impairment emulator (loss, delay, bandwidth, ...).
    Netem(Box<netem::NetemArgs>),
    /// DraARLv1 voice reflector: serve, and manage users, groups, devices.
    Reflector(reflector::ReflectorArgs),
    /// Render DIR/report.html from the JSON result files in DIR.
    Report(report::ReportArgs),
    /// Write the man pages of `petrel` and its subcommands (packaging).
    #[command(hide = true)]
    Man(man::ManArgs),
}

/// `cmd` with every flag that takes a value accepting a negative number as that
/// value, in every subcommand: `--seconds -1` then reaches the flag's own check,
/// which names its range, instead of reading `-1` as an unknown flag.
fn negative_numbers_as_values(cmd: clap::Command) -> clap::Command {
    cmd.mut_args(|arg| {
        if arg.get_action().takes_values() && !arg.is_positional() {
            arg.allow_negative_numbers(true)
        } else {
            arg
        }
    })
    .mut_subcommands(negative_numbers_as_values)
}

/// The command line, parsed (clap's own exit on `--help`, `--version` and usage
/// errors).
fn parse() -> Cli {
    let mut cmd = negative_numbers_as_values(Cli::command());
    let matches = cmd.get_matches_mut();
    Cli::from_arg_matches(&matches).unwrap_or_else(|e| e.format(&mut cmd).exit())
}

fn main() -> ExitCode {
    let outcome = match parse().command {
        Command::Bench(args) => return bench::main(args),
        Command::Report(args) => return report::main(&args),
        Command::Netem(args) => netem::run(*args),
        Command::Reflector(args) => reflector::run(args),
        Command::Man(args) => man::run(&args),
    };
    match outcome {
        Ok(code) => code,
        Err(e) => {
            eprintln!("error: {e:#}");
            ExitCode::FAILURE
        }
    }
}
