//! A stage driven from several load-generator processes (issue 15: 20 000
//! devices need more sockets than one process may open). The devices are
//! split into contiguous ranges by the open-files budget ([`fd_budget`]),
//! each range held by one `<program> bench reflector-generator` child
//! ([`super::generator_child`]), which this driver steers over its
//! stdin/stdout ([`super::generator_wire`]).
//!
//! What is measured stays that of one generator: every child sends its
//! speakers' rounds from the same wall-clock instant the driver names
//! (warm-up, then measurement, each started by the driver after every child
//! is ready); sent and expected datagrams are summed, each child counting
//! only its own speakers and receivers, so each datagram counts once; the
//! latency histograms are merged bucket by bucket; the frame receipts are
//! added into the stage's, so the loss attribution sees one stage. The
//! children's CPU and memory are the load generator's
//! (`loadgen_cpu_cores`, [`GeneratorStage`]), never a node's.
//!
//! Every wait on a child is bounded; a child that exits, fails or misses a
//! deadline ends the stage with an error naming it, and every child is
//! killed by its pid when the pool goes, on error paths too.

use std::io::{BufReader, Write};
use std::ops::Range;
use std::path::Path;
use std::process::{Child, ChildStdin, Command as Process, Stdio};
use std::sync::mpsc::{self, Receiver, RecvTimeoutError};
use std::time::{Duration, Instant};

use petrel_sys::proc::{load_avg_1m, peak_rss_bytes_of, rss_bytes, threads_cpu_ns};

use super::cpu::{cpu_between, CpuSample};
use super::device::unix_ns;
use super::drive::{measured_rounds, stage_result, Target, WARMUP_ROUNDS};
use super::fd_budget::{self, devices_per_generator, raise_nofile};
use super::generator_wire::{
    line_of, read_message, Command, GeneratorSpec, GeneratorTally, Report,
};
use super::receive::Tally;
use super::stage_probe::StageProbe;
use super::{LoadConfig, LoadError, LoadResult};
use crate::record::reflector_cluster::GeneratorStage;

/// How long the devices may take to log in, all generators together.
const LOGIN_TIMEOUT: Duration = Duration::from_secs(600);
/// Logins the generators of a stage start per second, together. An edge
/// forwards at most 450 a second to the centre (`DeviceAuthPPSPerNode`,
/// draarl-interconnect §7); a login it does not forward is answered at
/// the device's next heartbeat, 2.5 s later, and after four unanswered
/// ones the device counts as failed (draarl-v1 §7.2). The reference's tool
/// is paced by its 32 workers waiting on the server's answers; ours are
/// answered faster than an edge may forward, so they are paced to stay
/// under one edge's share whatever the layout.
const STAGE_LOGINS_PER_S: u32 = 400;
/// How far ahead of a phase's first round the driver names its instant, so
/// every child has the command before it is due.
const LEAD: Duration = Duration::from_millis(200);
/// Slack over a phase's own length before a child counts as hung.
const SLACK: Duration = Duration::from_secs(15);
/// How long a child may take to report its tally after `stop`.
const TALLY_TIMEOUT: Duration = Duration::from_secs(30);
/// Pause after the warm-up and after the last measured round (as the
/// single-process driver: queues drain before a reading).
const SETTLE: Duration = Duration::from_secs(1);

/// One generator child; dropping it kills it by its pid.
struct Generator {
    name: String,
    devices: Range<usize>,
    child: Child,
    stdin: ChildStdin,
}

impl Generator {
    fn tell(&mut self, command: &Command) -> Result<(), LoadError> {
        self.stdin
            .write_all(line_of(command)?.as_bytes())
            .and_then(|()| self.stdin.flush())
            .map_err(|e| LoadError::Invalid(format!("generator {}: {e}", self.name)))
    }

    fn pid(&self) -> u32 {
        self.child.id()
    }
}

impl Drop for Generator {
    fn drop(&mut self) {
        if let Ok(Some(_)) = self.child.try_wait() {
            return;
        }
        // Child::kill is kill(pid, SIGKILL) on this child's pid.
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// A message from generator `.0`: a report, a read error, or `None` at the
/// end of its stdout.
type Heard = (usize, Option<Result<Report, String>>);

/// The running generators of one stage.
struct Pool {
    gens: Vec<Generator>,
    heard: Receiver<Heard>,
    /// Generators whose stdout has closed.
    gone: Vec<bool>,
}

impl Pool {
    /// Starts one `<program> bench reflector-generator` per spec.
    fn start(program: &Path, specs: Vec<GeneratorSpec>) -> Result<Self, LoadError> {
        let (tx, heard) = mpsc::channel();
        let mut gens = Vec::with_capacity(specs.len());
        for (k, spec) in specs.into_iter().enumerate() {
            let name = format!("gen-{k}");
            let mut child = Process::new(program)
                .args(["bench", "reflector-generator"])
                .env("RUST_LOG", "warn")
                .stdin(Stdio::piped())
                .stdout(Stdio::piped())
                .stderr(Stdio::inherit())
                .spawn()
                .map_err(|e| {
                    LoadError::Invalid(format!(
                        "starting {} bench reflector-generator: {e}",
                        program.display()
                    ))
                })?;
            let (stdin, stdout) = (child.stdin.take(), child.stdout.take());
            let devices = spec.first..spec.first + spec.entries.len();
            let (Some(stdin), Some(stdout)) = (stdin, stdout) else {
                let _ = child.kill();
                let _ = child.wait();
                return Err(LoadError::Invalid(format!("generator {name} has no pipes")));
            };
            let mut g = Generator {
                name,
                devices,
                child,
                stdin,
            };
            let tx = tx.clone();
            std::thread::Builder::new()
                .name("lg-pool".into())
                .spawn(move || {
                    let mut out = BufReader::new(stdout);
                    loop {
                        let msg = read_message::<Report>(&mut out).map_err(|e| e.to_string());
                        let end = !matches!(msg, Ok(Some(_)));
                        if tx.send((k, msg.transpose())).is_err() || end {
                            break;
                        }
                    }
                })?;
            g.stdin
                .write_all(line_of(&spec)?.as_bytes())
                .and_then(|()| g.stdin.flush())
                .map_err(|e| LoadError::Invalid(format!("generator {}: {e}", g.name)))?;
            gens.push(g);
        }
        let gone = vec![false; gens.len()];
        Ok(Self { gens, heard, gone })
    }

    fn tell_all(&mut self, command: Command) -> Result<(), LoadError> {
        self.gens.iter_mut().try_for_each(|g| g.tell(&command))
    }

    /// Waits up to `timeout` for every generator's report `what`, taken
    /// from its reports by `pick`; one value per generator, in order.
    fn wait_all<T>(
        &mut self,
        what: &str,
        timeout: Duration,
        pick: impl Fn(Report) -> Option<T>,
    ) -> Result<Vec<T>, LoadError> {
        let deadline = Instant::now() + timeout;
        let mut got: Vec<Option<T>> = self.gens.iter().map(|_| None).collect();
        if let Some(k) = self.gone.iter().position(|&g| g) {
            return Err(self.exited(k, what));
        }
        while got.iter().any(Option::is_none) {
            let left = deadline.saturating_duration_since(Instant::now());
            let (k, msg) = match self.heard.recv_timeout(left) {
                Ok(h) => h,
                Err(RecvTimeoutError::Timeout) => {
                    let late: Vec<&str> = self
                        .gens
                        .iter()
                        .zip(&got)
                        .filter(|(_, v)| v.is_none())
                        .map(|(g, _)| g.name.as_str())
                        .collect();
                    return Err(LoadError::Invalid(format!(
                        "load generator {} did not report {what} within {} s",
                        late.join(", "),
                        timeout.as_secs()
                    )));
                }
                Err(RecvTimeoutError::Disconnected) => {
                    return Err(LoadError::Invalid("every load generator is gone".into()))
                }
            };
            let Some(g) = self.gens.get_mut(k) else {
                continue;
            };
            let report = match msg {
                Some(Ok(r)) => r,
                Some(Err(e)) => {
                    return Err(LoadError::Invalid(format!(
                        "load generator {} (pid {}): {e}",
                        g.name,
                        g.pid()
                    )))
                }
                None => {
                    self.gone[k] = true;
                    // A generator that has said all it had to may end.
                    if got[k].is_some() {
                        continue;
                    }
                    return Err(self.exited(k, what));
                }
            };
            if let Report::Failed { error } = report {
                return Err(LoadError::Invalid(format!(
                    "load generator {} (pid {}) failed: {error}",
                    g.name,
                    g.pid()
                )));
            }
            let name = g.name.clone();
            let slot = &mut got[k];
            match pick(report) {
                Some(v) if slot.is_none() => *slot = Some(v),
                _ => {
                    return Err(LoadError::Invalid(format!(
                        "load generator {name} sent an unexpected report while {what} was due"
                    )))
                }
            }
        }
        Ok(got.into_iter().flatten().collect())
    }

    /// Why the wait for `what` ends: generator `k` has exited.
    fn exited(&mut self, k: usize, what: &str) -> LoadError {
        let g = &mut self.gens[k];
        // Its stdout closed: give it a moment to be reaped.
        let status = (0..50).find_map(|_| match g.child.try_wait() {
            Ok(Some(s)) => Some(s.to_string()),
            _ => {
                std::thread::sleep(Duration::from_millis(10));
                None
            }
        });
        LoadError::Invalid(format!(
            "load generator {} (pid {}) exited ({}) before it reported {what} (see its stderr above)",
            g.name,
            g.pid(),
            status.unwrap_or_else(|| "stdout closed".into())
        ))
    }

    fn pids(&self) -> Vec<u32> {
        self.gens.iter().map(Generator::pid).collect()
    }
}

/// Runs one stage against `target` as [`super::drive::drive`] does, with the
/// devices split over generator processes of `program` (at most
/// `per_process` devices each, and what the open-files limit allows);
/// returns the stage's figures and each generator's share.
///
/// # Errors
/// [`LoadError`] when a generator cannot be started, fails, exits or misses
/// a deadline, devices cannot log in, or a probe reading fails.
pub(super) fn drive_split(
    cfg: &LoadConfig,
    target: &Target,
    probe: &dyn StageProbe,
    program: &Path,
    per_process: Option<usize>,
) -> Result<(LoadResult, Vec<GeneratorStage>), LoadError> {
    let nofile = raise_nofile()?;
    let ranges = fd_budget::split(cfg.devices, devices_per_generator(nofile, per_process)?);
    let stage = unix_ns();
    let rounds = measured_rounds(cfg);
    let receipts = probe.receipts();
    let n_generators = u32::try_from(ranges.len()).unwrap_or(u32::MAX).max(1);
    let specs = ranges
        .iter()
        .map(|r| GeneratorSpec {
            first: r.start,
            entries: r
                .clone()
                .map(|i| probe.entry(i).unwrap_or(target.udp))
                .collect(),
            rows: r.clone().map(|i| probe.receipt_row(i)).collect(),
            devices: cfg.devices,
            groups: cfg.groups,
            interval_ms: cfg.interval_ms,
            payload: cfg.payload,
            stage,
            warmup_rounds: WARMUP_ROUNDS,
            measured_rounds: rounds,
            receipts: receipts.map(|r| r.shape()),
            login_per_s: Some((STAGE_LOGINS_PER_S / n_generators).max(1)),
        })
        .collect();
    let t0 = Instant::now();
    let mut pool = Pool::start(program, specs)?;
    let failed: usize = pool
        .wait_all("its logins", LOGIN_TIMEOUT, |r| match r {
            Report::LoggedIn { failed } => Some(failed),
            _ => None,
        })?
        .into_iter()
        .sum();
    if failed > 0 {
        return Err(probe.login_failure(failed));
    }
    let connect_per_s = cfg.devices as f64 / t0.elapsed().as_secs_f64();
    let host_load_1m = load_avg_1m().unwrap_or(0.0);
    let interval = Duration::from_millis(cfg.interval_ms);
    let phase = |n: u64| interval * u32::try_from(n).unwrap_or(u32::MAX) + LEAD + SLACK;

    pool.tell_all(Command::Warmup {
        at_unix_ns: unix_ns() + LEAD.as_nanos() as u64,
    })?;
    pool.wait_all("its warm-up rounds", phase(WARMUP_ROUNDS), |r| {
        matches!(r, Report::Warmed).then_some(())
    })?;
    std::thread::sleep(SETTLE);
    let pids = pool.pids();
    let first = CpuSample::take_of(&pids, target.pid);
    let first_ns: Vec<u64> = pids.iter().map(|&p| cpu_ns(p)).collect();
    probe.begin()?;
    pool.tell_all(Command::Measure {
        at_unix_ns: unix_ns() + LEAD.as_nanos() as u64,
    })?;
    let sends = pool.wait_all("its measured rounds", phase(rounds), |r| match r {
        Report::Sent { sent, expected } => Some((sent, expected)),
        _ => None,
    })?;
    std::thread::sleep(SETTLE);
    let last = CpuSample::take_of(&pids, target.pid);
    let last_ns: Vec<u64> = pids.iter().map(|&p| cpu_ns(p)).collect();
    probe.end()?;
    let generators: Vec<GeneratorStage> = pool
        .gens
        .iter()
        .zip(first_ns.iter().zip(&last_ns))
        .map(|(g, (a, b))| {
            let cpu_s = b.saturating_sub(*a) as f64 / 1e9;
            GeneratorStage {
                name: g.name.clone(),
                devices: g.devices.len(),
                cpu_s,
                cpu_cores: 0.0,
                rss_mb: rss_bytes(g.pid()).unwrap_or(0) as f64 / MIB,
                peak_rss_mb: peak_rss_bytes_of(g.pid()).unwrap_or(0) as f64 / MIB,
            }
        })
        .collect();
    pool.tell_all(Command::Stop)?;
    let tallies = pool.wait_all("its tally", TALLY_TIMEOUT, |r| match r {
        Report::Tally(t) => Some(t),
        _ => None,
    })?;
    drop(pool);

    let mut tally = Tally::new()?;
    for t in &tallies {
        absorb(&mut tally, t);
        if let (Some(stage_receipts), Some(theirs)) = (receipts, &t.receipts) {
            stage_receipts.absorb(theirs)?;
        }
    }
    let (sent, expected) = sends
        .iter()
        .fold((0, 0), |(s, e), (s2, e2)| (s + s2, e + e2));
    let mut r = stage_result(cfg, sent, expected, &tally);
    r.connect_per_s = connect_per_s;
    r.host_load_1m = host_load_1m;
    r.process_rss_mb = generators.iter().map(|g| g.rss_mb).sum();
    r.server_rss_mb = target.pid.and_then(rss_bytes).map(|b| b as f64 / MIB);
    r.server_process = "child".into();
    cpu_between(&mut r, &first, &last);
    let wall = last.seconds_since(&first).max(1e-9);
    let generators = generators
        .into_iter()
        .map(|g| GeneratorStage {
            cpu_cores: g.cpu_s / wall,
            ..g
        })
        .collect();
    Ok((r, generators))
}

const MIB: f64 = 1024.0 * 1024.0;

/// Every thread's CPU time of process `pid`, ns (0 when it is gone).
fn cpu_ns(pid: u32) -> u64 {
    threads_cpu_ns(pid, "").unwrap_or(0)
}

/// Adds a generator's counts to `tally`: counters summed, latency buckets
/// recorded with their counts (the same histogram bounds on both sides).
fn absorb(tally: &mut Tally, t: &GeneratorTally) {
    tally.received += t.received;
    tally.recv_errors += t.recv_errors;
    tally.wrong_reserved += t.wrong_reserved;
    for &(value, count) in &t.latency_us {
        tally.hist.saturating_record_n(value, count);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn merged_histograms_equal_one_histogram_of_every_sample() {
        let samples_a = [5u64, 90, 1_200, 31_000, 31_000];
        let samples_b = [7u64, 1_250, 250_000];
        let mut one = Tally::new().unwrap();
        for &s in samples_a.iter().chain(&samples_b) {
            one.hist.saturating_record(s);
        }
        let wire = |samples: &[u64]| {
            let mut t = Tally::new().unwrap();
            for &s in samples {
                t.hist.saturating_record(s);
            }
            GeneratorTally {
                received: samples.len() as u64,
                latency_us: t
                    .hist
                    .iter_recorded()
                    .map(|v| (v.value_iterated_to(), v.count_at_value()))
                    .collect(),
                ..GeneratorTally::default()
            }
        };
        let mut merged = Tally::new().unwrap();
        absorb(&mut merged, &wire(&samples_a));
        absorb(&mut merged, &wire(&samples_b));
        assert_eq!(merged.received, 8);
        assert_eq!(merged.hist.len(), one.hist.len());
        assert_eq!(merged.hist.max(), one.hist.max());
        assert_eq!(merged.hist.mean(), one.hist.mean());
        for q in [0.5, 0.9, 0.99] {
            assert_eq!(
                merged.hist.value_at_quantile(q),
                one.hist.value_at_quantile(q)
            );
        }
    }

    fn spec() -> GeneratorSpec {
        GeneratorSpec {
            first: 0,
            entries: vec![std::net::SocketAddr::from(([127, 0, 0, 1], 9)); 2],
            rows: vec![0; 2],
            devices: 2,
            groups: 1,
            interval_ms: 120,
            payload: 320,
            stage: 1,
            warmup_rounds: 8,
            measured_rounds: 1,
            receipts: None,
            login_per_s: None,
        }
    }

    #[test]
    fn a_generator_that_exits_fails_the_wait_with_its_name_and_status() {
        // `false` ignores its arguments and exits 1 at once.
        let mut pool = match Pool::start(Path::new("false"), vec![spec()]) {
            Ok(p) => p,
            // The spec write may already meet the closed pipe.
            Err(e) => {
                assert!(e.to_string().contains("gen-0"), "{e}");
                return;
            }
        };
        let e = pool
            .wait_all("its logins", Duration::from_secs(10), |_| Some(()))
            .err()
            .unwrap()
            .to_string();
        assert!(e.contains("gen-0") && e.contains("exited"), "{e}");
    }

    #[test]
    fn a_silent_generator_fails_the_wait_at_its_deadline_and_is_killed() {
        // `sleep 30` never reports anything.
        let mut pool = Pool {
            gens: Vec::new(),
            heard: mpsc::channel().1,
            gone: vec![false],
        };
        let mut child = Process::new("sleep")
            .arg("30")
            .stdin(Stdio::piped())
            .spawn()
            .unwrap();
        let stdin = child.stdin.take().unwrap();
        let pid = child.id();
        let (tx, rx) = mpsc::channel::<Heard>();
        pool.heard = rx;
        pool.gens.push(Generator {
            name: "gen-0".into(),
            devices: 0..2,
            child,
            stdin,
        });
        let started = Instant::now();
        let e = pool
            .wait_all("its logins", Duration::from_millis(300), |_| Some(()))
            .err()
            .unwrap()
            .to_string();
        assert!(started.elapsed() < Duration::from_secs(5));
        assert!(e.contains("gen-0 did not report its logins"), "{e}");
        drop(pool);
        drop(tx);
        // Killed and reaped: its pid is gone.
        assert!(!Path::new(&format!("/proc/{pid}")).exists());
    }
}
