//! `petrel bench matrix --config FILE`: runs every case of a TOML matrix
//! (`petrel_bench::matrix`) for each of its rounds in its own process, by
//! re-invoking this executable as `petrel bench <kind> <options> … --json F`
//! with the round's seed, so no case inherits another's sockets, heap or
//! threads. Per-round results (and each round's stderr) go to `<dir>/rounds/`,
//! the merged record of each case to `<dir>/<case>.json`, and the report to
//! `<dir>/report.html`.
//!
//! A round that exits 0 with no result (or a result without rounds) is a case
//! the subcommand skipped (an external peer that is not installed): its
//! message is shown and the case is left out. A round that exits 2 with no
//! result was given options it refuses: the run stops, quoting its error. Any
//! other round without a result fails its case; the run goes on with the next
//! case and exits 1 at the end. A round running longer than its budget plus
//! [`ROUND_SLACK`] is killed and fails its case the same way.
//!
//! Progress on stderr counts rounds ([`crate::progress`]); the estimated wall
//! time is printed before the first round.

use std::collections::BTreeSet;
use std::fmt::Write as _;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use anyhow::{bail, Context as _};
use petrel_bench::matrix::{merge_rounds, Matrix, MatrixCase};
use petrel_bench::record::ResultRecord;
use petrel_bench::report::write_report;
use petrel_bench::table::{self, Row};

/// Time a round may take beyond its own budget
/// ([`MatrixCase::round_budget`]: warm-up, measured interval and drain, or a
/// transfer's timeout) for process start, handshakes and writing the result,
/// before it is killed.
const ROUND_SLACK: Duration = Duration::from_secs(60);

/// How often a running round is polled for exit.
const POLL: Duration = Duration::from_millis(50);

/// Most bytes of a round's stderr quoted in an error or skip message.
const STDERR_QUOTE: usize = 600;

/// Exit code of a subcommand refusing its arguments.
const EXIT_USAGE: i32 = 2;

/// Reads and validates the matrix file; errors are usage errors (exit 2).
pub fn load(path: &Path) -> Result<Matrix, String> {
    let text = std::fs::read_to_string(path)
        .map_err(|e| format!("cannot read matrix file {}: {e}", path.display()))?;
    Matrix::from_toml(&text).map_err(|e| format!("{}: {e}", path.display()))
}

/// `1 h 02 min`, `21 min 18 s`, `42 s`.
fn human(d: Duration) -> String {
    let s = d.as_secs();
    match (s / 3600, s / 60 % 60, s % 60) {
        (0, 0, s) => format!("{s} s"),
        (0, m, s) => format!("{m} min {s:02} s"),
        (h, m, _) => format!("{h} h {m:02} min"),
    }
}

/// The plan: case count, rounds, the estimated wall time.
pub fn summary(matrix: &Matrix) -> String {
    format!(
        "matrix: {} cases, {} rounds, estimated wall time {} (each round's warm-up and measured time or transfer at the link rate, plus about {} s of setup)",
        matrix.cases.len(),
        matrix.total_rounds(),
        human(matrix.expected_wall_time()),
        petrel_bench::matrix::ROUND_OVERHEAD.as_secs()
    )
}

/// Every round's command line, one per line, after the [`summary`].
pub fn dry_run(matrix: &Matrix) -> String {
    let mut out = summary(matrix);
    out.push('\n');
    for (i, case) in matrix.cases.iter().enumerate() {
        for seed in &case.seeds {
            let _ = writeln!(
                out,
                "case[{i}] seed {seed}: petrel {} --json F",
                case.args(*seed).join(" ")
            );
        }
    }
    out
}

/// Waits for `child` until `limit`; kills it (by its handle) past that.
fn wait_bounded(child: &mut Child, limit: Duration) -> anyhow::Result<Option<i32>> {
    let deadline = Instant::now() + limit;
    loop {
        if let Some(status) = child.try_wait()? {
            return Ok(status.code());
        }
        if Instant::now() >= deadline {
            child.kill()?;
            child.wait()?;
            bail!("round did not finish within {} s; killed", limit.as_secs());
        }
        std::thread::sleep(POLL);
    }
}

/// The last [`STDERR_QUOTE`] bytes of `path`, trimmed, on one line per line.
fn stderr_tail(path: &Path) -> String {
    let text = std::fs::read_to_string(path).unwrap_or_default();
    let text = text.trim();
    let mut start = text.len().saturating_sub(STDERR_QUOTE);
    while !text.is_char_boundary(start) {
        start += 1;
    }
    text[start..].to_owned()
}

/// What one round produced.
enum Round {
    /// Its result record.
    Result(Box<ResultRecord>),
    /// The subcommand skipped the case (exit 0, no result), saying why.
    Skipped(String),
}

/// Why a round produced no result.
enum RoundFailure {
    /// The subcommand refused the matrix's options (exit 2): stops the run.
    Usage(String),
    /// Anything else: fails the case.
    Failed(anyhow::Error),
}

fn run_round(exe: &Path, case: &MatrixCase, seed: u64, json: &Path) -> Result<Round, RoundFailure> {
    let stderr_path = json.with_extension("stderr");
    let stderr = std::fs::File::create(&stderr_path)
        .with_context(|| format!("cannot create {}", stderr_path.display()))
        .map_err(RoundFailure::Failed)?;
    let mut command = Command::new(exe);
    command.args(case.args(seed)).arg("--json").arg(json);
    let mut child = command
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(stderr)
        .spawn()
        .with_context(|| format!("cannot start {}", exe.display()))
        .map_err(RoundFailure::Failed)?;
    let limit = case.round_budget() + ROUND_SLACK;
    let code = wait_bounded(&mut child, limit).map_err(RoundFailure::Failed)?;
    let tail = stderr_tail(&stderr_path);
    if code == Some(EXIT_USAGE) {
        // A usage error is found before anything runs; it writes no result.
        return Err(RoundFailure::Usage(format!(
            "petrel {} refused its options: {tail}",
            case.args(seed).join(" ")
        )));
    }
    // Exit 1 with a result file is a run that was not ok: still a result.
    // Exit 0 with no result, or a result of no rounds, is a case the
    // subcommand skipped.
    let text = std::fs::read_to_string(json)
        .ok()
        .filter(|t| !t.trim().is_empty());
    match (text, code) {
        (Some(text), _) => match serde_json::from_str::<ResultRecord>(&text) {
            Ok(r) if r.rounds.is_empty() && code == Some(0) => Ok(Round::Skipped(tail)),
            Ok(r) => Ok(Round::Result(Box::new(r))),
            Err(e) => Err(RoundFailure::Failed(
                anyhow::Error::new(e).context(format!("cannot parse {}", json.display())),
            )),
        },
        (None, Some(0)) => Ok(Round::Skipped(tail)),
        (None, other) => Err(RoundFailure::Failed(anyhow::anyhow!(
            "exited with {other:?} and wrote no result: {tail}"
        ))),
    }
}

/// Benchmarks whose records the round-trip table ([`table`]) shows.
const ROUND_TRIP_BENCHMARKS: [&str; 2] = ["echo", "rudp"];

/// Headline figures of the other benchmarks, in this order when present.
const HEADLINES: [&str; 8] = [
    "goodput_mbps",
    "efficiency_percent",
    "rtt_p50_ms",
    "rtt_p99_ms",
    "output_pps",
    "loss_pct",
    "latency_avg_ms",
    "latency_p99_ms",
];

/// One line for a record the round-trip table has no columns for: its case,
/// headline figures as median [min..max], and `ok`.
fn headline(r: &ResultRecord) -> String {
    let mut line = r.case.clone();
    for key in HEADLINES {
        if let Some(s) = r.summary.get(key) {
            let _ = write!(line, "  {key} {:.1} [{:.1}..{:.1}]", s.median, s.min, s.max);
        }
    }
    line.push_str(if r.ok { "  ok" } else { "  NOT ok" });
    line
}

/// The file stem for case `index`: its echo name, or the kind and index.
fn stem(index: usize, case: &MatrixCase) -> String {
    match case.echo() {
        Some(_) if case.kind == petrel_bench::matrix::CaseKind::Echo => case.name(),
        _ => format!("case{index:03}-{}", case.kind),
    }
}

/// The outcome of a whole matrix run.
pub enum Outcome {
    /// Every case ran; `true` if every merged record is `ok` and no case failed.
    Finished(bool),
    /// A subcommand refused the matrix's options (a usage error, exit 2).
    Refused(String),
}

/// Runs the matrix into `dir`.
///
/// # Errors
/// The results directory, a merged record or the report cannot be written.
pub fn run(matrix: &Matrix, dir: &Path) -> anyhow::Result<Outcome> {
    let exe = std::env::current_exe().context("cannot find the petrel executable")?;
    let rounds_dir = dir.join("rounds");
    std::fs::create_dir_all(&rounds_dir)
        .with_context(|| format!("cannot create {}", rounds_dir.display()))?;
    eprintln!("{}", summary(matrix));
    let started = Instant::now();
    let mut progress = crate::progress::Progress::new(matrix.total_rounds() as u64, "rounds");
    let argv: Vec<String> = std::env::args().collect();
    let mut rows = Vec::new();
    let mut others = Vec::new();
    let mut failed = Vec::new();
    let mut skipped = Vec::new();
    let mut written = BTreeSet::new();
    let mut all_ok = true;
    'cases: for (index, case) in matrix.cases.iter().enumerate() {
        let label = case.name();
        let stem = stem(index, case);
        let mut parts = Vec::with_capacity(case.seeds.len());
        for (i, &seed) in case.seeds.iter().enumerate() {
            progress.start(format!(
                "{label} round {}/{} (seed {seed})",
                i + 1,
                case.seeds.len()
            ));
            let json: PathBuf = rounds_dir.join(format!("{stem}-r{i}.json"));
            let round = run_round(&exe, case, seed, &json);
            progress.finish_step();
            match round {
                Ok(Round::Result(r)) => parts.push(*r),
                Ok(Round::Skipped(why)) => {
                    eprintln!("case[{index}] {label}: skipped: {why}");
                    skipped.push(label.clone());
                    continue 'cases;
                }
                Err(RoundFailure::Usage(msg)) => {
                    progress.finish();
                    return Ok(Outcome::Refused(format!("case[{index}] {label}: {msg}")));
                }
                Err(RoundFailure::Failed(e)) => {
                    eprintln!("case[{index}] {label} round {i} (seed {seed}) FAILED: {e:#}");
                    failed.push(label.clone());
                    continue 'cases;
                }
            }
        }
        let mut merged = match merge_rounds(&parts, &case.seeds) {
            Ok(m) => m,
            Err(e) => {
                eprintln!("case[{index}] {label} FAILED: {e}");
                failed.push(label.clone());
                continue;
            }
        };
        merged.command_line.clone_from(&argv);
        // Two cases may record the same name (e.g. options the subcommand's
        // name leaves out): the later one gets its index appended.
        let mut file = format!("{}.json", merged.case);
        if !written.insert(file.clone()) {
            file = format!("{}-case{index:03}.json", merged.case);
            written.insert(file.clone());
        }
        merged.write_json(&dir.join(&file))?;
        all_ok &= merged.ok;
        if ROUND_TRIP_BENCHMARKS.contains(&merged.benchmark.as_str()) {
            rows.push(Row::from_record(&merged));
        } else {
            others.push(headline(&merged));
        }
    }
    progress.finish();
    if !rows.is_empty() {
        print!("{}", table::render(&rows));
    }
    for line in &others {
        println!("{line}");
    }
    for (what, list) in [("skipped", &skipped), ("FAILED", &failed)] {
        if !list.is_empty() {
            println!("{what}: {}", list.join("; "));
        }
    }
    println!(
        "wall time: {} (estimated {})",
        human(started.elapsed()),
        human(matrix.expected_wall_time())
    );
    println!("results: {}", dir.display());
    if rows.is_empty() && others.is_empty() {
        println!("no case produced a result; no report");
    } else {
        let report = write_report(dir)?;
        println!("report: {}", report.display());
    }
    Ok(Outcome::Finished(all_ok && failed.is_empty()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn durations_read_as_people_write_them() {
        assert_eq!(human(Duration::from_secs(42)), "42 s");
        assert_eq!(human(Duration::from_secs(1278)), "21 min 18 s");
        assert_eq!(human(Duration::from_secs(3720)), "1 h 02 min");
    }
}
