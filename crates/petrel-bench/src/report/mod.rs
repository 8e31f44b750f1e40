//! The static HTML report: `report.html` rendered from the JSON result files
//! of one directory alone (`specs/benchmarks.md`, "A report is rendered from
//! these JSON files alone").
//!
//! The page opens with a one-screen summary (what ran, what won, what
//! failed or was skipped), then the published-vs-Petrel panel (each seed's
//! headline figure from `data/published.toml` next to Petrel's for the same
//! case, both as a share of a limit measured on their own machine), then
//! inline SVG charts (throughput, p99 RTT and CPU per case, grouped by case
//! shape with one bar per protocol, min/max whiskers across rounds, unit on
//! the value axis, x-axis label and titled legend), a table of every case, the
//! ratios, a resource table (peak RSS, requested and actual socket buffers),
//! the environment (git revision, rustc, CPU, kernel) and the exact command of
//! every result. It is self-contained: it loads no script, font, style sheet
//! or image from anywhere.
//!
//! Cases a run skipped (an external peer that is not installed) are listed in
//! `skipped.txt` next to the results ([`note_skipped`]); the summary names them
//! with their reason.

mod html;
mod placement;
pub mod published;
mod published_panel;
mod shell;
mod skipped;
mod summary;
pub mod svg;

use std::path::{Path, PathBuf};

pub use html::{render_html, render_report};
pub use skipped::{load_skipped, note_skipped, Skipped, SKIPPED_FILE};

use crate::record::ResultRecord;

/// File name the report is written to inside the results directory.
pub const REPORT_FILE: &str = "report.html";

/// Most result files one report reads; a directory with more is refused
/// rather than rendered into an unreadable page.
pub const MAX_RECORDS: usize = 1000;

/// Why a report could not be rendered.
#[derive(Debug, thiserror::Error)]
pub enum ReportError {
    /// The directory could not be listed or a file not read or written.
    #[error("cannot {what} {path}: {source}")]
    Io {
        /// `"read"`, `"list"` or `"write"`.
        what: &'static str,
        /// The path concerned.
        path: String,
        /// The I/O error.
        source: std::io::Error,
    },
    /// A `.json` file is not a Petrel result record.
    #[error("{path} is not a Petrel result record: {source}")]
    Parse {
        /// The offending file.
        path: String,
        /// The JSON error.
        source: serde_json::Error,
    },
    /// No `.json` result files in the directory.
    #[error("no JSON result files in {0}")]
    Empty(String),
    /// More than [`MAX_RECORDS`] result files.
    #[error("{path} holds {count} JSON files; at most {MAX_RECORDS} are rendered")]
    TooMany {
        /// The directory.
        path: String,
        /// How many `.json` files it holds.
        count: usize,
    },
}

fn io_error(what: &'static str, path: &Path) -> impl FnOnce(std::io::Error) -> ReportError {
    let path = path.display().to_string();
    move |source| ReportError::Io { what, path, source }
}

/// Protocols in report order: the baseline, Petrel, the peers over UDP,
/// then the TCP-based ones; others follow in name order.
const PROTOCOL_ORDER: [&str; 6] = ["udp", "rudp", "kcp", "quic", "tcp", "websocket"];

fn protocol_rank(r: &ResultRecord) -> usize {
    let proto = r.parameters.get("protocol").and_then(|p| p.as_str());
    PROTOCOL_ORDER
        .iter()
        .position(|p| Some(*p) == proto)
        .unwrap_or(PROTOCOL_ORDER.len())
}

/// Profiles and FEC modes of RUDP through the emulator in report order:
/// least to most impaired, ARQ-only before FEC.
const PROFILE_ORDER: [&str; 4] = ["none", "random", "burst", "soak"];
const FEC_ORDER: [&str; 3] = ["none", "fixed", "adaptive"];

fn impairment_rank(r: &ResultRecord) -> (usize, usize) {
    let rank = |key: &str, order: &[&str]| {
        let v = r.parameters.get(key).and_then(|p| p.as_str());
        order
            .iter()
            .position(|p| Some(*p) == v)
            .unwrap_or(order.len())
    };
    (rank("profile", &PROFILE_ORDER), rank("fec", &FEC_ORDER))
}

/// Reads every `*.json` file directly in `dir` as a [`ResultRecord`],
/// ordered by protocol (see `PROTOCOL_ORDER`), then impairment profile and
/// FEC mode, then case name.
///
/// # Errors
/// [`ReportError`]: unreadable directory or file, a file that is not a
/// record, no records, or more than [`MAX_RECORDS`].
pub fn load_records(dir: &Path) -> Result<Vec<ResultRecord>, ReportError> {
    let mut paths = Vec::new();
    for entry in std::fs::read_dir(dir).map_err(io_error("list", dir))? {
        let path = entry.map_err(io_error("list", dir))?.path();
        if path.extension().is_some_and(|e| e == "json") && path.is_file() {
            paths.push(path);
        }
    }
    if paths.is_empty() {
        return Err(ReportError::Empty(dir.display().to_string()));
    }
    if paths.len() > MAX_RECORDS {
        return Err(ReportError::TooMany {
            path: dir.display().to_string(),
            count: paths.len(),
        });
    }
    let mut records = paths
        .iter()
        .map(|path| {
            let text = std::fs::read_to_string(path).map_err(io_error("read", path))?;
            serde_json::from_str(&text).map_err(|source| ReportError::Parse {
                path: path.display().to_string(),
                source,
            })
        })
        .collect::<Result<Vec<ResultRecord>, _>>()?;
    records.sort_by_cached_key(|r| (protocol_rank(r), impairment_rank(r), r.case.clone()));
    Ok(records)
}

/// Renders `dir/report.html` from the result files in `dir` and its skip
/// list ([`SKIPPED_FILE`], optional); returns its path.
///
/// # Errors
/// As [`load_records`] and [`load_skipped`], or [`ReportError::Io`] when
/// writing fails.
pub fn write_report(dir: &Path) -> Result<PathBuf, ReportError> {
    let records = load_records(dir)?;
    let skipped = load_skipped(dir)?;
    let path = dir.join(REPORT_FILE);
    std::fs::write(&path, render_report(&records, &skipped)).map_err(io_error("write", &path))?;
    Ok(path)
}
