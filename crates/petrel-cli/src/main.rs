//! The `petrel` command: clap subcommands over Petrel's crates.

mod bench;
mod matrix;
mod report;

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
    /// Run benchmarks (no subcommand: the default suite).
    Bench(bench::BenchArgs),
    /// Render DIR/report.html from the JSON result files in DIR.
    Report(report::ReportArgs),
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    match cli.command {
        Command::Bench(args) => bench::main(args),
        Command::Report(args) => report::main(&args),
    }
}
