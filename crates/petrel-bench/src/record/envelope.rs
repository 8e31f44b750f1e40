//! The result envelope every Petrel benchmark writes (`specs/benchmarks.md`,
//! "What every Petrel result records").
//!
//! A [`ResultRecord`] is self-describing: a report is rendered from these JSON
//! files alone, so it carries the exact command line, build (git revision,
//! rustc), host (CPU model, logical cores, kernel), start time, all parameters,
//! socket buffers, per-round figures with min/median/max, error counters and
//! the `ok` verdict. The benchmark-specific parts (`parameters`, `rounds`) are
//! written from the typed structs of the sibling modules and held here as
//! `serde_json::Value`s, so one envelope reads the files of every benchmark,
//! old ones included.

use std::collections::BTreeMap;
use std::io;
use std::path::Path;
use std::time::SystemTime;

use petrel_sys::socket::ServerClientBuffers;
use serde::{Deserialize, Serialize};

/// Version of the JSON layout below; bumped on any incompatible change.
pub const SCHEMA_VERSION: u32 = 1;

/// Errors building or writing a result record.
#[derive(Debug, thiserror::Error)]
pub enum RecordError {
    /// A benchmark's parameters or round figures could not be turned into JSON.
    #[error("cannot serialise {what} to JSON: {source}")]
    Serialize {
        /// Which part of the record failed.
        what: &'static str,
        /// The serde error.
        source: serde_json::Error,
    },
    /// Writing the JSON file failed.
    #[error("cannot write result file {path}: {source}")]
    Write {
        /// The file being written.
        path: String,
        /// The I/O error.
        source: io::Error,
    },
}

/// How the binary that produced a result was built (captured by `build.rs`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct BuildInfo {
    /// `git rev-parse HEAD` at build time, or `"unknown"`.
    pub git_revision: String,
    /// Whether tracked files differ from `HEAD` (`None`: unknown). Read when
    /// the record is made if the source tree the binary was built from is
    /// still at `git_revision` (cargo rebuilds after any edit, so a
    /// `cargo run` binary matches it); `None` if that tree has moved to
    /// another revision; as at build time if git cannot be run. Untracked
    /// files are ignored.
    pub git_dirty: Option<bool>,
    /// `rustc --version` of the compiler that built this crate, or `"unknown"`.
    pub rustc_version: String,
    /// `"release"` or `"debug"` (from `debug_assertions`).
    pub profile: String,
}

impl BuildInfo {
    /// The build information compiled into this binary.
    pub fn current() -> Self {
        static LIVE_DIRTY: std::sync::OnceLock<Option<Option<bool>>> = std::sync::OnceLock::new();
        let built_dirty = match env!("PETREL_GIT_DIRTY") {
            "true" => Some(true),
            "false" => Some(false),
            _ => None,
        };
        let git_dirty = LIVE_DIRTY
            .get_or_init(|| live_dirty(env!("PETREL_GIT_REVISION")))
            .unwrap_or(built_dirty);
        let profile = if cfg!(debug_assertions) {
            "debug"
        } else {
            "release"
        };
        Self {
            git_revision: env!("PETREL_GIT_REVISION").to_owned(),
            git_dirty,
            rustc_version: env!("PETREL_RUSTC_VERSION").to_owned(),
            profile: profile.to_owned(),
        }
    }
}

/// Whether the source tree this crate was built from differs from `HEAD`
/// now: `None` when git cannot tell (not a checkout, no git), `Some(None)`
/// when the tree is at another revision than `revision`. Uses `git
/// diff-index`, which only reads (`git status` would rewrite `.git/index`).
fn live_dirty(revision: &str) -> Option<Option<bool>> {
    let dir = env!("CARGO_MANIFEST_DIR");
    let git = |args: &[&str]| {
        std::process::Command::new("git")
            .arg("-C")
            .arg(dir)
            .args(args)
            .stderr(std::process::Stdio::null())
            .output()
            .ok()
    };
    let head = git(&["rev-parse", "HEAD"]).filter(|o| o.status.success())?;
    if String::from_utf8_lossy(&head.stdout).trim() != revision {
        return Some(None);
    }
    Some(
        match git(&["diff-index", "--quiet", "HEAD", "--"])?.status.code() {
            Some(0) => Some(false),
            Some(1) => Some(true),
            _ => None,
        },
    )
}

/// The machine a result was measured on.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct HostInfo {
    /// First `model name` in `/proc/cpuinfo`, or `"unknown"`.
    pub cpu_model: String,
    /// Logical cores available to this process.
    pub logical_cores: usize,
    /// Kernel release from `/proc/sys/kernel/osrelease` (`uname -r`), or `"unknown"`.
    pub kernel: String,
}

impl HostInfo {
    /// Reads the host description; fields that cannot be read become `"unknown"`.
    pub fn current() -> Self {
        let unknown = || "unknown".to_owned();
        let logical_cores = std::thread::available_parallelism()
            .map(usize::from)
            .unwrap_or_else(|_| petrel_sys::proc::logical_cores().unwrap_or(0));
        Self {
            cpu_model: petrel_sys::proc::cpu_model().unwrap_or_else(unknown),
            logical_cores,
            kernel: petrel_sys::proc::kernel_release().unwrap_or_else(unknown),
        }
    }
}

/// Minimum, median and maximum of one figure across rounds.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct Spread {
    /// Smallest value.
    pub min: f64,
    /// Median (mean of the two middle values for an even count).
    pub median: f64,
    /// Largest value.
    pub max: f64,
}

impl Spread {
    /// Spread of `values`; `None` when empty or when any value is NaN.
    pub fn of(values: &[f64]) -> Option<Self> {
        if values.is_empty() || values.iter().any(|v| v.is_nan()) {
            return None;
        }
        let mut sorted = values.to_vec();
        sorted.sort_by(f64::total_cmp);
        let n = sorted.len();
        let median = if n % 2 == 1 {
            sorted[n / 2]
        } else {
            (sorted[n / 2 - 1] + sorted[n / 2]) / 2.0
        };
        Some(Self {
            min: sorted[0],
            median,
            max: sorted[n - 1],
        })
    }
}

/// Latency percentiles in µs (HDR histogram, 3 significant digits).
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize, Deserialize)]
pub struct Percentiles {
    /// Number of samples.
    pub count: u64,
    /// Mean (µs).
    pub mean_us: f64,
    /// Median (µs).
    pub p50_us: u64,
    /// 95th percentile (µs).
    pub p95_us: u64,
    /// 99th percentile (µs).
    pub p99_us: u64,
    /// Maximum (µs).
    pub max_us: u64,
}

/// One benchmark result: the envelope shared by every Petrel benchmark.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ResultRecord {
    /// Layout version ([`SCHEMA_VERSION`]).
    pub schema_version: u32,
    /// Benchmark family, e.g. `"echo"`, `"netem"`, `"reflector"`.
    pub benchmark: String,
    /// Case name within the run, e.g. `"udp-1024B-4x16"`.
    pub case: String,
    /// The exact command line (`argv`, program first).
    pub command_line: Vec<String>,
    /// RNG seeds, one per round (empty when the benchmark uses no randomness).
    pub seeds: Vec<u64>,
    /// How the binary was built.
    pub build: BuildInfo,
    /// Where it ran.
    pub host: HostInfo,
    /// Start time, RFC 3339 UTC.
    pub started_at: String,
    /// Every parameter of the run: the benchmark's parameters struct
    /// (see the table in [`crate::record`]).
    pub parameters: serde_json::Value,
    /// Socket buffers of the server and the first client, when the
    /// benchmark owns sockets (flat: `requested_send`, `server_recv`, …).
    pub socket_buffers: Option<ServerClientBuffers>,
    /// Per-round figures, in round order: the benchmark's round struct
    /// (see the table in [`crate::record`]).
    pub rounds: Vec<serde_json::Value>,
    /// Min/median/max across rounds of each headline figure.
    pub summary: BTreeMap<String, Spread>,
    /// Error counters summed over rounds, by kind; `ok` requires all zero.
    pub errors: BTreeMap<String, u64>,
    /// Peak resident set size of the process at the end of the run (bytes).
    pub peak_rss_bytes: Option<u64>,
    /// The verdict; the process exit code follows it.
    pub ok: bool,
}

impl ResultRecord {
    /// Starts a record now: captures argv, build, host and start time.
    /// Rounds, summary, errors and the verdict are filled in by the benchmark.
    ///
    /// # Errors
    /// [`RecordError::Serialize`] when `parameters` cannot be serialised.
    pub fn begin(
        benchmark: &str,
        case: &str,
        parameters: &impl Serialize,
    ) -> Result<Self, RecordError> {
        let parameters =
            serde_json::to_value(parameters).map_err(|source| RecordError::Serialize {
                what: "parameters",
                source,
            })?;
        Ok(Self {
            schema_version: SCHEMA_VERSION,
            benchmark: benchmark.to_owned(),
            case: case.to_owned(),
            command_line: std::env::args_os()
                .map(|a| a.to_string_lossy().into_owned())
                .collect(),
            seeds: Vec::new(),
            build: BuildInfo::current(),
            host: HostInfo::current(),
            started_at: rfc3339_utc(SystemTime::now()),
            parameters,
            socket_buffers: None,
            rounds: Vec::new(),
            summary: BTreeMap::new(),
            errors: BTreeMap::new(),
            peak_rss_bytes: None,
            ok: false,
        })
    }

    /// Appends one round's figures.
    ///
    /// # Errors
    /// [`RecordError::Serialize`] when `round` cannot be serialised.
    pub fn push_round(&mut self, round: &impl Serialize) -> Result<(), RecordError> {
        let value = serde_json::to_value(round).map_err(|source| RecordError::Serialize {
            what: "round",
            source,
        })?;
        self.rounds.push(value);
        Ok(())
    }

    /// Pretty-printed JSON.
    ///
    /// # Errors
    /// [`RecordError::Serialize`] (not expected: every field is plain data).
    pub fn to_json(&self) -> Result<String, RecordError> {
        serde_json::to_string_pretty(self).map_err(|source| RecordError::Serialize {
            what: "record",
            source,
        })
    }

    /// Writes the record as pretty JSON to `path`.
    ///
    /// # Errors
    /// [`RecordError::Write`] on I/O failure.
    pub fn write_json(&self, path: &Path) -> Result<(), RecordError> {
        let mut text = self.to_json()?;
        text.push('\n');
        std::fs::write(path, text).map_err(|source| RecordError::Write {
            path: path.display().to_string(),
            source,
        })
    }
}

/// `time` as RFC 3339 UTC with second precision, e.g. `2026-11-30T10:45:52Z`.
pub fn rfc3339_utc(time: SystemTime) -> String {
    humantime::format_rfc3339_seconds(time).to_string()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn spread_of_odd_even_and_empty() {
        let s = Spread::of(&[3.0, 1.0, 2.0]).unwrap();
        assert_eq!((s.min, s.median, s.max), (1.0, 2.0, 3.0));
        let s = Spread::of(&[4.0, 1.0, 2.0, 3.0]).unwrap();
        assert_eq!((s.min, s.median, s.max), (1.0, 2.5, 4.0));
        assert!(Spread::of(&[]).is_none());
        assert!(Spread::of(&[1.0, f64::NAN]).is_none());
    }

    #[test]
    fn record_round_trips_through_json() {
        let mut r =
            ResultRecord::begin("echo", "udp", &serde_json::json!({"payload": 1024})).unwrap();
        r.push_round(&serde_json::json!({"round_trips": 5}))
            .unwrap();
        r.errors.insert("content".into(), 0);
        let back: ResultRecord = serde_json::from_str(&r.to_json().unwrap()).unwrap();
        assert_eq!(back, r);
        assert_eq!(back.schema_version, SCHEMA_VERSION);
        assert!(back.started_at.ends_with('Z'));
        assert!(!back.build.git_revision.is_empty());
        assert!(back.host.logical_cores >= 1);
    }

    #[test]
    fn rfc3339_of_epoch() {
        assert_eq!(rfc3339_utc(SystemTime::UNIX_EPOCH), "1970-01-01T00:00:00Z");
    }
}
