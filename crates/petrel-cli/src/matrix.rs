//! `petrel bench matrix --config FILE`: runs every case of a TOML matrix
//! (`petrel_bench::matrix`) for each round in its own process, by
//! re-invoking this executable as `petrel bench echo … --rounds 1 --json F`,
//! so no case inherits another's sockets, heap or threads. Per-round
//! results go to `<dir>/rounds/`, the merged record of each case to
//! `<dir>/<case>.json`, and the report to `<dir>/report.html`.
//!
//! Progress on stderr counts rounds ([`crate::progress`]).

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use anyhow::{bail, Context as _};
use petrel_bench::echo::DRAIN_LIMIT;
use petrel_bench::matrix::{merge_rounds, Matrix, MatrixCase};
use petrel_bench::record::ResultRecord;
use petrel_bench::report::write_report;
use petrel_bench::table::{self, Row};

/// Time a round may take beyond warm-up, measured interval and drain
/// (process start, handshakes, writing the result) before it is killed.
const ROUND_SLACK: Duration = Duration::from_secs(60);

/// How often a running round is polled for exit.
const POLL: Duration = Duration::from_millis(50);

/// Reads and validates the matrix file; errors are usage errors (exit 2).
pub fn load(path: &Path) -> Result<Matrix, String> {
    let text = std::fs::read_to_string(path)
        .map_err(|e| format!("cannot read matrix file {}: {e}", path.display()))?;
    Matrix::from_toml(&text).map_err(|e| format!("{}: {e}", path.display()))
}

fn echo_args(case: &MatrixCase, json: &Path) -> Vec<String> {
    let e = &case.echo;
    [
        "bench",
        "echo",
        "--protocol",
        &case.protocol,
        "--payload",
        &e.payload.to_string(),
        "--clients",
        &e.clients.to_string(),
        "--window",
        &e.window.to_string(),
        "--seconds",
        &e.measured.as_secs_f64().to_string(),
        "--warmup",
        &e.warmup.as_secs_f64().to_string(),
        "--io-threads",
        &case.io_threads.to_string(),
        "--rounds",
        "1",
        "--json",
    ]
    .iter()
    .map(|s| (*s).to_owned())
    .chain(std::iter::once(json.display().to_string()))
    .collect()
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

fn run_round(exe: &Path, case: &MatrixCase, json: &Path) -> anyhow::Result<ResultRecord> {
    let mut child = Command::new(exe)
        .args(echo_args(case, json))
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .with_context(|| format!("cannot start {}", exe.display()))?;
    let limit = case.echo.warmup + case.echo.measured + DRAIN_LIMIT + ROUND_SLACK;
    let code = wait_bounded(&mut child, limit)?;
    // Exit 1 with a result file is a run that was not ok: still a result.
    let text = std::fs::read_to_string(json).with_context(|| {
        format!(
            "{} exited with {code:?} and wrote no result {}",
            case.name(),
            json.display()
        )
    })?;
    serde_json::from_str(&text).with_context(|| format!("cannot parse {}", json.display()))
}

/// Runs the matrix into `dir`; returns whether every case was `ok`.
pub fn run(matrix: &Matrix, dir: &Path) -> anyhow::Result<bool> {
    let exe = std::env::current_exe().context("cannot find the petrel executable")?;
    let rounds_dir = dir.join("rounds");
    std::fs::create_dir_all(&rounds_dir)
        .with_context(|| format!("cannot create {}", rounds_dir.display()))?;
    let total = (matrix.cases.len() * matrix.seeds.len()) as u64;
    let mut progress = crate::progress::Progress::new(total, "rounds");
    let argv: Vec<String> = std::env::args().collect();
    let mut rows = Vec::new();
    let mut all_ok = true;
    for case in &matrix.cases {
        let name = case.name();
        let mut parts = Vec::with_capacity(matrix.seeds.len());
        for (i, seed) in matrix.seeds.iter().enumerate() {
            let label = format!(
                "{name} round {}/{} (seed {seed})",
                i + 1,
                matrix.seeds.len()
            );
            progress.start(label);
            let json: PathBuf = rounds_dir.join(format!("{name}-r{i}.json"));
            parts.push(run_round(&exe, case, &json)?);
            progress.finish_step();
        }
        let mut merged = merge_rounds(&parts, &matrix.seeds)?;
        merged.command_line.clone_from(&argv);
        merged.write_json(&dir.join(format!("{name}.json")))?;
        all_ok &= merged.ok;
        rows.push(Row::from_record(&merged));
    }
    progress.finish();
    print!("{}", table::render(&rows));
    println!("results: {}", dir.display());
    let report = write_report(dir)?;
    println!("report: {}", report.display());
    Ok(all_ok)
}
