//! `petrel man DIR` (hidden): writes the man pages of `petrel` and every
//! visible subcommand, generated from the clap definitions with
//! `clap_mangen` (`petrel.1`, `petrel-reflector.1`, `petrel-reflector-serve.1`
//! …). The Debian package installs them (`packaging/README.md`).

use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::Context;
use clap::{Args, CommandFactory};

/// Where to write the man pages.
#[derive(Debug, Args)]
pub struct ManArgs {
    /// Output directory (created if missing); existing pages are replaced.
    dir: PathBuf,
}

/// Writes the pages into `args.dir` and prints how many.
pub fn run(args: &ManArgs) -> anyhow::Result<ExitCode> {
    std::fs::create_dir_all(&args.dir)
        .with_context(|| format!("creating {}", args.dir.display()))?;
    clap_mangen::generate_to(crate::Cli::command(), &args.dir)
        .with_context(|| format!("writing man pages to {}", args.dir.display()))?;
    let pages = std::fs::read_dir(&args.dir)
        .with_context(|| format!("listing {}", args.dir.display()))?
        .filter_map(Result::ok)
        .filter(|e| e.path().extension().is_some_and(|x| x == "1"))
        .count();
    println!("{pages} man pages in {}", args.dir.display());
    Ok(ExitCode::SUCCESS)
}
