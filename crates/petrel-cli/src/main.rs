//! The `petrel` command: clap subcommands over Petrel's crates.

use clap::Parser;

/// Fast, reliable, measurable real-time networking over UDP.
#[derive(Debug, Parser)]
#[command(name = "petrel", version, about)]
struct Cli {}

fn main() -> anyhow::Result<()> {
    let _cli = Cli::parse();
    Ok(())
}
