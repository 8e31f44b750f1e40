//! The `petrel` command: clap subcommands over Petrel's crates.

mod netem;

use std::process::ExitCode;

use clap::{Parser, Subcommand};

/// Fast, reliable, measurable real-time networking over UDP.
#[derive(Debug, Parser)]
#[command(name = "petrel", version, about)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Debug, Subcommand)]
enum Command {
    /// Relay UDP through a seeded impairment emulator (loss, delay, bandwidth, ...).
    Netem(Box<netem::NetemArgs>),
    /// Run a benchmark.
    Bench {
        #[command(subcommand)]
        which: BenchCommand,
    },
}

#[derive(Debug, Subcommand)]
enum BenchCommand {
    /// The impairment relay's forwarding ceiling and delay accuracy.
    Netem(netem::NetemBenchArgs),
}

fn main() -> anyhow::Result<ExitCode> {
    match Cli::parse().command {
        Command::Netem(args) => netem::run(*args),
        Command::Bench {
            which: BenchCommand::Netem(args),
        } => netem::run_bench(args),
    }
}
