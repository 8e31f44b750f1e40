//! The `petrel` command: clap subcommands over Petrel's crates.

mod reflector;

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
    /// DraARLv1 voice reflector: serve, and manage users, groups, devices.
    Reflector(reflector::ReflectorArgs),
}

fn main() -> anyhow::Result<ExitCode> {
    match Cli::parse().command {
        Command::Reflector(a) => reflector::run(a),
    }
}
