//! `petrel report DIR`: renders `DIR/report.html` from the JSON result files
//! in DIR and its optional `skipped.txt` (see `petrel_bench::report`): the
//! summary, the published-vs-Petrel panel, charts and tables.
//!
//! Exit codes: 0 when written, 1 when the directory or a file cannot be
//! read or the page not written, 2 for a directory that holds no result files
//! or a file that is not a result record.

use std::path::PathBuf;
use std::process::ExitCode;

use clap::Args;
use petrel_bench::report::{write_report, ReportError};

#[derive(Debug, Args)]
pub struct ReportArgs {
    /// Directory of JSON result files (e.g. `petrel-results/<timestamp>`).
    dir: PathBuf,
}

/// Runs `petrel report`; returns the process exit code.
pub fn main(args: &ReportArgs) -> ExitCode {
    match write_report(&args.dir) {
        Ok(path) => {
            println!("report: {}", path.display());
            ExitCode::SUCCESS
        }
        Err(e) => {
            eprintln!("error: {e}");
            match e {
                ReportError::Empty(_) | ReportError::Parse { .. } | ReportError::TooMany { .. } => {
                    ExitCode::from(2)
                }
                ReportError::Io { .. } => ExitCode::FAILURE,
            }
        }
    }
}
