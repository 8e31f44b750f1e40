//! `petrel bench matrix`: a TOML list of cases, each run for several rounds
//! (one process per round), and the merging of per-round results into one
//! record per case.
//!
//! A case names the `petrel bench` subcommand it runs (`kind`: `echo`,
//! `rudp`, `goodput` or `reflector`; `echo` when absent) and that
//! subcommand's options, named like its flags with `_` for `-`
//! (`fec_shape = "8+2"` is `--fec-shape 8+2`). Each kind has an allow-list
//! ([`options`]): an unknown option, a flag the runner sets itself, or a value
//! of the wrong type or range is an error naming the case and the option,
//! found before anything runs.
//!
//! The runner (in `petrel-cli`) re-invokes `petrel bench <kind> <options> …
//! --json F` once per round with the round's seed, so a case cannot inherit
//! another's sockets, heap or runtime threads; what lives here is the
//! configuration, its validation, the command line of a round, the time a
//! round is expected to take and may take, and the merge ([`merge_rounds`]).
//!
//! `matrices/peers.toml` in this crate is the default suite as a matrix; the
//! repository's `matrices/` holds the seeds' experiments.
//!
//! ```toml
//! rounds = 3              # optional, 1..=100 (default 3)
//! seeds = [42, 43, 44]    # optional, one per round (default 42, 43, 44, …)
//! seconds = 2.0           # optional default for every echo and rudp case
//! warmup = 0.5            # optional default for every echo and rudp case
//!
//! [[case]]                # kind = "echo" (the default)
//! protocol = "quic"       # udp | tcp | websocket | rudp | kcp | quic | tls | wss
//! payload = 1024          # optional, bytes (default 1024)
//! clients = 4             # optional (default 1)
//! window = 16             # optional (default 1)
//! io_threads = 1          # optional, 1..=64 (default 1)
//! work = 100              # optional, SHA-256 passes per echo (default 0)
//! seconds = 2.0           # optional, overrides the top-level value
//!
//! [[case]]
//! kind = "rudp"           # RUDP through the impairment relay (§B)
//! profile = "random"
//! fec = "fixed"
//! seeds = [42]            # optional: this case's rounds, one seed each
//! ```
//!
//! Seeds: `bench rudp` and `bench goodput` take the round's seed (`--seed`);
//! the loopback echo and a reflector stage draw no random numbers, so there
//! a round's seed only labels it in the record (`seeds`, and `seed` in each
//! round).

mod merge;
pub mod options;

use std::collections::BTreeMap;
use std::time::Duration;

use petrel_sys::range::{check_range, RangeError};
use serde::Deserialize;

use crate::echo::{EchoConfig, EchoIoModel, DRAIN_LIMIT};
use crate::reflector::LoadConfig;
pub use merge::merge_rounds;
pub use options::{CaseKind, OptionSpec, OptionValue, ValueKind, ECHO_PROTOCOLS};

/// The echo protocols of the default suite (`matrices/peers.toml` runs each
/// at two shapes); a case may also use the TLS variants ([`ECHO_PROTOCOLS`]).
pub const PROTOCOLS: [&str; 6] = ["udp", "tcp", "websocket", "rudp", "kcp", "quic"];
/// Most cases one matrix may hold.
pub const MAX_CASES: usize = 256;
/// Most tokio worker threads a case may ask for.
pub const MAX_IO_THREADS: usize = 64;
/// Seed of the first round when none are given; round i gets `FIRST_SEED + i`.
pub const FIRST_SEED: u64 = 42;
/// Rounds when none are given.
pub const DEFAULT_ROUNDS: u32 = 3;
/// What a round costs beyond its warm-up and measured time when estimating
/// a matrix's wall time: process start, handshakes, the drain, writing the
/// result (a typical value on a loaded 2-core machine, not a bound).
pub const ROUND_OVERHEAD: Duration = Duration::from_secs(1);
/// `bench rudp` defaults the matrix passes explicitly (§B): 2 s warm-up,
/// 3 s measured (120 s with the soak profile), 1024 B (4096 B soak), 4 × 16.
const RUDP_WARMUP: Duration = Duration::from_secs(2);
const RUDP_SECONDS: Duration = Duration::from_secs(3);
const SOAK_SECONDS: Duration = Duration::from_secs(120);

/// A matrix file that cannot be used, naming the field.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum MatrixError {
    /// Not valid TOML or not the layout above: a missing or unknown key
    /// (the message names it and lists what the case's kind accepts).
    #[error("invalid matrix file: {0}")]
    Syntax(String),
    /// A field out of range, e.g. `case[2].clients`.
    #[error("invalid {field} = {value}: must be {allowed}")]
    Field {
        /// The field, with the case index when it belongs to one.
        field: String,
        /// The value given.
        value: String,
        /// What is allowed.
        allowed: String,
    },
    /// Per-round results that cannot be merged into one record.
    #[error("cannot merge rounds: {0}")]
    Merge(String),
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct RawMatrix {
    rounds: Option<u32>,
    seeds: Option<Vec<u64>>,
    seconds: Option<f64>,
    warmup: Option<f64>,
    #[serde(default)]
    case: Vec<toml::Table>,
}

/// One case of a matrix: a subcommand, its checked options and its rounds.
#[derive(Debug, Clone, PartialEq)]
pub struct MatrixCase {
    /// The subcommand.
    pub kind: CaseKind,
    /// Checked options by name. For `echo` and `rudp` the shape and times
    /// are filled in (from the top level or the subcommand's defaults) so
    /// every round's command line states them.
    pub options: BTreeMap<&'static str, OptionValue>,
    /// One seed per round.
    pub seeds: Vec<u64>,
    /// `echo` and `rudp`: payload, clients, window, warm-up and measured
    /// interval (`rounds` is 1: each round runs in its own process).
    echo: Option<EchoConfig>,
}

impl MatrixCase {
    /// The echo shape and times of an `echo` or `rudp` case.
    pub fn echo(&self) -> Option<&EchoConfig> {
        self.echo.as_ref()
    }

    /// A text option (e.g. `protocol`), if set.
    pub fn text(&self, name: &str) -> Option<&str> {
        self.options.get(name).and_then(OptionValue::as_text)
    }

    /// A whole-number option, if set.
    pub fn whole(&self, name: &str) -> Option<i64> {
        self.options.get(name).and_then(OptionValue::as_whole)
    }

    /// A numeric option (whole numbers converted), if set.
    pub fn real(&self, name: &str) -> Option<f64> {
        self.options.get(name).and_then(OptionValue::as_real)
    }

    /// The name of an `echo` case as `bench echo` records it, e.g.
    /// `quic-1024B-4x16` (see [`crate::echo::case_name`]); for the other kinds the
    /// kind and the options as `key=value`, e.g.
    /// `rudp profile=random fec=fixed …` (the subcommand names its record).
    pub fn name(&self) -> String {
        match (&self.echo, self.kind) {
            (Some(e), CaseKind::Echo) => crate::echo::case_name(
                self.text("protocol").unwrap_or_default(),
                e,
                if self.text("io_model") == Some("sharded") {
                    EchoIoModel::Sharded
                } else {
                    EchoIoModel::Shared
                },
                self.whole("io_threads")
                    .map_or(1, |n| usize::try_from(n).unwrap_or(usize::MAX)),
                self.whole("work")
                    .map_or(0, |n| u32::try_from(n).unwrap_or(u32::MAX)),
            ),
            _ => {
                let mut name = self.kind.name().to_owned();
                for spec in self.kind.options() {
                    if let Some(v) = self.options.get(spec.name) {
                        let value = match v {
                            OptionValue::Text(s) => s.clone(),
                            OptionValue::Whole(n) => n.to_string(),
                            OptionValue::Real(x) => x.to_string(),
                            OptionValue::Flag(b) => b.to_string(),
                        };
                        name.push_str(&format!(" {}={value}", spec.name));
                    }
                }
                name
            }
        }
    }

    /// The arguments of one round after the executable, without `--json`:
    /// `bench <kind>`, every option in allow-list order, then the runner's
    /// flags: one round (`--rounds 1`, goodput `--repetitions 1`) and, for
    /// `rudp` and `goodput`, `--seed <seed>`.
    pub fn args(&self, seed: u64) -> Vec<String> {
        let mut args = vec!["bench".to_owned(), self.kind.name().to_owned()];
        for spec in self.kind.options() {
            if let Some(v) = self.options.get(spec.name) {
                args.extend(v.args(spec));
            }
        }
        let seed = seed.to_string();
        let runner: &[&str] = match self.kind {
            CaseKind::Echo => &["--rounds", "1"],
            CaseKind::Rudp => &["--rounds", "1", "--seed", &seed],
            CaseKind::Goodput => &["--repetitions", "1", "--seed", &seed],
            CaseKind::Reflector => &[],
        };
        args.extend(runner.iter().map(|s| (*s).to_owned()));
        args
    }

    /// The time one round's own work may take: warm-up + measured + drain
    /// limit for `echo` and `rudp`; for `goodput` the transfer timeout of
    /// `bench goodput` (ten times the transfer at the link rate, at least
    /// 30 s); for `reflector` the stage plus the devices' logins (one second
    /// per 100 devices, at least 30 s). The runner adds its own slack for
    /// process start and setup.
    pub fn round_budget(&self) -> Duration {
        match (&self.echo, self.kind) {
            (Some(e), _) => e.warmup + e.measured + DRAIN_LIMIT,
            (None, CaseKind::Goodput) => {
                let at_link_rate = self.goodput_transfer_s();
                Duration::from_secs_f64((at_link_rate * 10.0).max(30.0))
            }
            (None, _) => {
                let devices = self.whole("levels").unwrap_or(0) as f64;
                Duration::from_secs_f64(self.reflector_stage_s() + (devices / 100.0).max(30.0))
            }
        }
    }

    /// How long one round is expected to take, for the wall-time estimate:
    /// warm-up + measured for `echo` and `rudp`, the transfer at the link rate
    /// for `goodput`, the stage plus logins (one second per 1000 devices) for
    /// `reflector`; each plus [`ROUND_OVERHEAD`].
    pub fn expected_round_time(&self) -> Duration {
        let own = match (&self.echo, self.kind) {
            (Some(e), _) => (e.warmup + e.measured).as_secs_f64(),
            (None, CaseKind::Goodput) => self.goodput_transfer_s(),
            (None, _) => {
                self.reflector_stage_s() + self.whole("levels").unwrap_or(0) as f64 / 1000.0
            }
        };
        Duration::from_secs_f64(own) + ROUND_OVERHEAD
    }

    /// Seconds one goodput transfer takes at the link rate: `size_mb`
    /// (default 100) at `bandwidth_mbps` (default 200; the named scenarios'
    /// rates, 5 and 100 Mbit/s, when given; 1 Gbit/s over loopback).
    fn goodput_transfer_s(&self) -> f64 {
        let size_bits = self.real("size_mb").unwrap_or(100.0) * 8e6;
        let mbps = match (self.real("bandwidth_mbps"), self.text("scenario")) {
            (Some(b), _) => b,
            (None, Some("bbr-bufferbloat")) => 5.0,
            (None, Some("bbr-loss")) => 100.0,
            (None, _) if self.text("profile") == Some("none") => 1000.0,
            (None, _) => 200.0,
        };
        size_bits / (mbps * 1e6)
    }

    /// Seconds of a reflector stage: its measurement (`duration_s`, default
    /// 5) and the load generator's settling second before and after it.
    fn reflector_stage_s(&self) -> f64 {
        self.real("duration_s").unwrap_or(5.0) + 2.0
    }
}

/// A validated matrix.
#[derive(Debug, Clone, PartialEq)]
pub struct Matrix {
    /// The cases, in file order.
    pub cases: Vec<MatrixCase>,
    /// The top-level seeds: one per round of every case that sets none.
    pub seeds: Vec<u64>,
}

fn field_error(field: String, value: impl std::fmt::Debug, allowed: &str) -> MatrixError {
    MatrixError::Field {
        field,
        value: format!("{value:?}"),
        allowed: allowed.to_owned(),
    }
}

/// `e` as a [`MatrixError::Field`] named `field`, allowing `in {range}`.
fn out_of_range(field: String, e: RangeError) -> MatrixError {
    MatrixError::Field {
        field,
        value: e.value,
        allowed: format!("in {}", e.range),
    }
}

fn seconds(field: String, v: f64) -> Result<Duration, MatrixError> {
    Duration::try_from_secs_f64(v).map_err(|_| field_error(field, v, "a number of seconds >= 0"))
}

/// Top-level defaults a case inherits.
struct Defaults {
    seconds: Option<Duration>,
    warmup: Option<Duration>,
    seeds: Vec<u64>,
}

impl Matrix {
    /// Parses and validates a matrix file.
    ///
    /// # Errors
    /// [`MatrixError::Syntax`] for bad TOML, unknown keys or options, a flag
    /// the runner sets, or a missing required option (`protocol` of an echo
    /// case, `levels` of a reflector case); [`MatrixError::Field`] naming the
    /// first field or option out of range.
    pub fn from_toml(text: &str) -> Result<Self, MatrixError> {
        let raw: RawMatrix =
            toml::from_str(text).map_err(|e| MatrixError::Syntax(e.to_string()))?;
        let rounds = raw.rounds.unwrap_or(DEFAULT_ROUNDS);
        check_range("rounds", rounds, &(1..=crate::echo::MAX_ROUNDS))
            .map_err(|e| out_of_range("rounds".into(), e))?;
        let seeds = match raw.seeds {
            Some(seeds) if seeds.len() != rounds as usize => {
                return Err(field_error(
                    "seeds".into(),
                    seeds,
                    &format!("a list of {rounds} seeds, one per round"),
                ))
            }
            Some(seeds) => seeds,
            None => (0..u64::from(rounds)).map(|i| FIRST_SEED + i).collect(),
        };
        check_range("case", raw.case.len(), &(1..=MAX_CASES)).map_err(|e| MatrixError::Field {
            field: e.field.into(),
            value: e.value,
            allowed: format!("{} [[case]] tables", e.range),
        })?;
        let defaults = Defaults {
            seconds: raw
                .seconds
                .map(|v| seconds("seconds".into(), v))
                .transpose()?,
            warmup: raw
                .warmup
                .map(|v| seconds("warmup".into(), v))
                .transpose()?,
            seeds: seeds.clone(),
        };
        let cases = raw
            .case
            .into_iter()
            .enumerate()
            .map(|(i, table)| parse_case(i, table, &defaults))
            .collect::<Result<_, _>>()?;
        Ok(Self { cases, seeds })
    }

    /// Rounds of every case together.
    pub fn total_rounds(&self) -> usize {
        self.cases.iter().map(|c| c.seeds.len()).sum()
    }

    /// The expected wall time of the whole matrix: each case's
    /// [`MatrixCase::expected_round_time`] times its rounds.
    pub fn expected_wall_time(&self) -> Duration {
        self.cases
            .iter()
            .map(|c| c.expected_round_time() * c.seeds.len() as u32)
            .sum()
    }
}

fn parse_case(i: usize, mut table: toml::Table, d: &Defaults) -> Result<MatrixCase, MatrixError> {
    let at = |f: &str| format!("case[{i}].{f}");
    let kind = match table.remove("kind") {
        None => CaseKind::Echo,
        Some(v) => match v.as_str().and_then(CaseKind::from_name) {
            Some(k) => k,
            None => {
                let names: Vec<&str> = CaseKind::ALL.iter().map(|k| k.name()).collect();
                return Err(MatrixError::Field {
                    field: at("kind"),
                    value: v.to_string(),
                    allowed: format!("one of {}", names.join(", ")),
                });
            }
        },
    };
    let seeds = match table.remove("seeds") {
        None => d.seeds.clone(),
        Some(v) => case_seeds(&v).ok_or_else(|| MatrixError::Field {
            field: at("seeds"),
            value: v.to_string(),
            allowed: format!(
                "a list of 1..={} seeds (whole numbers >= 0), one per round",
                crate::echo::MAX_ROUNDS
            ),
        })?,
    };
    let mut options = BTreeMap::new();
    for (key, value) in &table {
        let Some(spec) = kind.option(key) else {
            return Err(unknown_option(i, kind, key));
        };
        let checked = spec.value.check(value).map_err(|e| MatrixError::Field {
            field: at(key),
            value: e.value,
            allowed: e.allowed,
        })?;
        options.insert(spec.name, checked);
    }
    let mut case = MatrixCase {
        kind,
        options,
        seeds,
        echo: None,
    };
    match kind {
        CaseKind::Echo | CaseKind::Rudp => resolve_echo(i, &mut case, d)?,
        CaseKind::Reflector => check_reflector(i, &case)?,
        CaseKind::Goodput => {}
    }
    Ok(case)
}

fn case_seeds(v: &toml::Value) -> Option<Vec<u64>> {
    let list = v.as_array()?;
    if list.is_empty() || list.len() > crate::echo::MAX_ROUNDS as usize {
        return None;
    }
    list.iter()
        .map(|s| s.as_integer().and_then(|n| u64::try_from(n).ok()))
        .collect()
}

fn unknown_option(i: usize, kind: CaseKind, key: &str) -> MatrixError {
    if kind.runner_flags().contains(&key) {
        return MatrixError::Syntax(format!(
            "case[{i}]: option `{key}` is set by the matrix runner for each round; remove it"
        ));
    }
    let names: Vec<&str> = kind.options().iter().map(|o| o.name).collect();
    MatrixError::Syntax(format!(
        "case[{i}]: unknown option `{key}` for kind {kind}; {kind} accepts {}",
        names.join(", ")
    ))
}

/// Fills in and checks the echo shape and times of an `echo` or `rudp` case.
fn resolve_echo(i: usize, case: &mut MatrixCase, d: &Defaults) -> Result<(), MatrixError> {
    let at = |f: &str| format!("case[{i}].{f}");
    let soak = case.text("profile") == Some("soak");
    let base = match case.kind {
        CaseKind::Echo => {
            if case.text("protocol").is_none() {
                return Err(MatrixError::Syntax(format!(
                    "case[{i}]: missing option `protocol` (one of {})",
                    ECHO_PROTOCOLS.join(", ")
                )));
            }
            EchoConfig::default()
        }
        _ => EchoConfig {
            payload: if soak { 4096 } else { 1024 },
            clients: 4,
            window: 16,
            warmup: RUDP_WARMUP,
            measured: if soak { SOAK_SECONDS } else { RUDP_SECONDS },
            rounds: 1,
        },
    };
    let size = |name: &str, default: usize| {
        case.whole(name)
            .map_or(default, |v| usize::try_from(v).unwrap_or(usize::MAX))
    };
    let time = |name: &str, top: Option<Duration>, default: Duration| match case.real(name) {
        Some(v) => seconds(at(name), v),
        None => Ok(top.unwrap_or(default)),
    };
    let echo = EchoConfig {
        payload: size("payload", base.payload),
        clients: size("clients", base.clients),
        window: size("window", base.window),
        warmup: time("warmup", d.warmup, base.warmup)?,
        measured: time("seconds", d.seconds, base.measured)?,
        rounds: 1,
    };
    echo.validate().map_err(|e| MatrixError::Field {
        field: at(e.field),
        value: e.value,
        allowed: format!("in {}", e.range),
    })?;
    let whole = |n: usize| OptionValue::Whole(i64::try_from(n).unwrap_or(i64::MAX));
    let o = &mut case.options;
    o.insert("payload", whole(echo.payload));
    o.insert("clients", whole(echo.clients));
    o.insert("window", whole(echo.window));
    o.insert("seconds", OptionValue::Real(echo.measured.as_secs_f64()));
    o.insert("warmup", OptionValue::Real(echo.warmup.as_secs_f64()));
    o.entry("io_threads").or_insert(OptionValue::Whole(1));
    case.echo = Some(echo);
    Ok(())
}

/// A reflector case is one stage: one device count (`levels`, required) and
/// one interval; its parameters are checked as the load generator checks them.
fn check_reflector(i: usize, case: &MatrixCase) -> Result<(), MatrixError> {
    let Some(devices) = case.whole("levels") else {
        return Err(MatrixError::Syntax(format!(
            "case[{i}]: missing option `levels` (one device count: a reflector case is one stage)"
        )));
    };
    let d = LoadConfig::default();
    let num = |name: &str, default: u64| {
        case.whole(name)
            .map_or(default, |v| u64::try_from(v).unwrap_or(u64::MAX))
    };
    let cfg = LoadConfig {
        devices: usize::try_from(devices).unwrap_or(usize::MAX),
        groups: usize::try_from(num("groups", d.groups as u64)).unwrap_or(usize::MAX),
        interval_ms: num("interval_ms", d.interval_ms),
        payload: usize::try_from(num("payload", d.payload as u64)).unwrap_or(usize::MAX),
        duration_s: num("duration_s", d.duration_s),
        writers: usize::try_from(num("writers", d.writers as u64)).unwrap_or(usize::MAX),
        max_frame_age_ms: num("max_frame_age_ms", d.max_frame_age_ms),
        ..d
    };
    cfg.validate().map_err(|e| MatrixError::Field {
        field: format!("case[{i}]"),
        value: format!("levels = {devices}"),
        allowed: e.to_string(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn defaults_are_three_rounds_seeded_42_43_44() {
        let m = Matrix::from_toml(
            "seconds = 2.0\nwarmup = 0.5\n[[case]]\nprotocol = \"quic\"\nclients = 4\nwindow = 16\n[[case]]\nprotocol = \"udp\"\nseconds = 1\n",
        )
        .unwrap();
        assert_eq!(m.seeds, [42, 43, 44]);
        assert_eq!(m.cases.len(), 2);
        let c = &m.cases[0];
        assert_eq!(c.name(), "quic-1024B-4x16");
        let e = c.echo().unwrap();
        assert_eq!(e.measured, Duration::from_secs(2));
        assert_eq!(e.warmup, Duration::from_millis(500));
        assert_eq!((e.rounds, c.whole("io_threads")), (1, Some(1)));
        assert_eq!(m.cases[1].echo().unwrap().measured, Duration::from_secs(1));
        assert_eq!(m.cases[1].name(), "udp-1024B-1x1");
        assert_eq!(m.cases[1].seeds, [42, 43, 44]);
    }

    #[test]
    fn shipped_matrix_parses() {
        let m = Matrix::from_toml(include_str!("../../matrices/peers.toml")).unwrap();
        assert_eq!(m.cases.len(), 12);
        assert_eq!(m.seeds, [42, 43, 44]);
        for p in PROTOCOLS {
            assert_eq!(
                m.cases
                    .iter()
                    .filter(|c| c.text("protocol") == Some(p))
                    .count(),
                2,
                "{p}"
            );
        }
    }

    #[test]
    fn errors_name_the_field() {
        let cases = [
            (
                "[[case]]\nprotocol = \"carrier-pigeon\"\n",
                "case[0].protocol",
            ),
            (
                "[[case]]\nprotocol = \"udp\"\n[[case]]\nprotocol = \"tcp\"\nclients = 0\n",
                "case[1].clients",
            ),
            (
                "[[case]]\nprotocol = \"udp\"\npayload = 15\n",
                "case[0].payload",
            ),
            (
                "[[case]]\nprotocol = \"udp\"\nio_threads = 65\n",
                "case[0].io_threads",
            ),
            (
                "[[case]]\nprotocol = \"udp\"\nseconds = -1.0\n",
                "case[0].seconds",
            ),
            (
                "seconds = 0.0\n[[case]]\nprotocol = \"udp\"\n",
                "case[0].seconds",
            ),
            (
                "rounds = 2\nseeds = [1, 2, 3]\n[[case]]\nprotocol = \"udp\"\n",
                "seeds",
            ),
            ("rounds = 0\n[[case]]\nprotocol = \"udp\"\n", "rounds"),
            ("rounds = 3\n", "case"),
            // The new kinds and keys.
            ("[[case]]\nkind = \"ping\"\n", "case[0].kind"),
            (
                "[[case]]\nkind = \"rudp\"\nfec = \"turbo\"\n",
                "case[0].fec",
            ),
            (
                "[[case]]\nkind = \"rudp\"\nfec_shape = \"8-2\"\n",
                "case[0].fec_shape",
            ),
            (
                "[[case]]\nkind = \"rudp\"\nwindow = 5000\n",
                "case[0].window",
            ),
            ("[[case]]\nkind = \"goodput\"\nloss = 101\n", "case[0].loss"),
            (
                "[[case]]\nkind = \"reflector\"\nlevels = 1\n",
                "case[0].levels",
            ),
            (
                "[[case]]\nkind = \"reflector\"\nlevels = 10\ngroups = 6\n",
                "case[0]",
            ),
            (
                "[[case]]\nprotocol = \"udp\"\nseeds = []\n",
                "case[0].seeds",
            ),
            (
                "[[case]]\nprotocol = \"udp\"\nwork = 1000001\n",
                "case[0].work",
            ),
        ];
        for (text, field) in cases {
            match Matrix::from_toml(text) {
                Err(MatrixError::Field { field: f, .. }) => assert_eq!(f, field, "{text}"),
                other => panic!("{text}: {other:?}"),
            }
        }
        for text in [
            "[[case]]\nprotocol = \"udp\"\nwindw = 4\n",
            "rounds = ",
            "[[case]]\n",
        ] {
            assert!(
                matches!(Matrix::from_toml(text), Err(MatrixError::Syntax(_))),
                "{text}"
            );
        }
    }

    /// The Syntax message of `text`'s error.
    fn syntax(text: &str) -> String {
        match Matrix::from_toml(text) {
            Err(MatrixError::Syntax(msg)) => msg,
            other => panic!("{text}: {other:?}"),
        }
    }

    #[test]
    fn unknown_options_are_named_with_what_the_kind_accepts() {
        let msg = syntax("[[case]]\nkind = \"rudp\"\nfec_shap = \"8+2\"\n");
        assert!(msg.contains("case[0]"), "{msg}");
        assert!(msg.contains("`fec_shap`"), "{msg}");
        assert!(msg.contains("kind rudp"), "{msg}");
        assert!(msg.contains("fec_shape"), "{msg}");
        // An option of another kind is unknown too.
        let msg = syntax("[[case]]\nkind = \"goodput\"\nwindow = 4\n");
        assert!(
            msg.contains("`window`") && msg.contains("kind goodput"),
            "{msg}"
        );
        let msg = syntax("[[case]]\nkind = \"reflector\"\nlevel = 100\n");
        assert!(msg.contains("`level`"), "{msg}");
        // Flags the runner sets per round.
        for (kind, flag) in [
            ("rudp", "seed"),
            ("echo\"\nprotocol = \"udp", "rounds"),
            ("goodput", "repetitions"),
            ("reflector", "json"),
        ] {
            let msg = syntax(&format!("[[case]]\nkind = \"{kind}\"\n{flag} = 1\n"));
            assert!(msg.contains(&format!("`{flag}`")), "{msg}");
            assert!(msg.contains("set by the matrix runner"), "{msg}");
        }
        let msg = syntax("[[case]]\nkind = \"reflector\"\n");
        assert!(msg.contains("missing option `levels`"), "{msg}");
    }

    #[test]
    fn each_kind_parses_into_its_command_line() {
        let m = Matrix::from_toml(
            r#"
            warmup = 0.5
            [[case]]
            protocol = "tls"
            clients = 16
            work = 100
            io_model = "sharded"
            io_threads = 2

            [[case]]
            kind = "rudp"
            peer = "kcptun"
            profile = "random"
            fec = "fixed"
            fec_shape = "10+3"
            seeds = [7]

            [[case]]
            kind = "rudp"
            profile = "soak"

            [[case]]
            kind = "goodput"
            transport = "aioquic"
            scenario = "bbr-loss"
            loss = 1
            size_mb = 10

            [[case]]
            kind = "reflector"
            levels = 1000
            interval_ms = 20
            in_process = true
            "#,
        )
        .unwrap();
        let [echo, rudp, soak, goodput, reflector] = &m.cases[..] else {
            panic!("{:?}", m.cases);
        };
        assert_eq!(echo.kind, CaseKind::Echo);
        assert_eq!(echo.name(), "tls-1024B-16x1-sharded2-work100");
        assert_eq!(
            echo.args(43),
            [
                "bench",
                "echo",
                "--protocol",
                "tls",
                "--payload",
                "1024",
                "--clients",
                "16",
                "--window",
                "1",
                "--seconds",
                "3",
                "--warmup",
                "0.5",
                "--io-model",
                "sharded",
                "--io-threads",
                "2",
                "--work",
                "100",
                "--rounds",
                "1"
            ]
        );
        assert_eq!(rudp.seeds, [7]);
        assert_eq!(
            rudp.args(7),
            [
                "bench",
                "rudp",
                "--peer",
                "kcptun",
                "--profile",
                "random",
                "--fec",
                "fixed",
                "--fec-shape",
                "10+3",
                "--payload",
                "1024",
                "--clients",
                "4",
                "--window",
                "16",
                "--seconds",
                "3",
                "--warmup",
                "0.5",
                "--io-threads",
                "1",
                "--rounds",
                "1",
                "--seed",
                "7"
            ]
        );
        // The soak profile's own defaults: 4096 B, 120 s.
        let s = soak.echo().unwrap();
        assert_eq!((s.payload, s.measured), (4096, Duration::from_secs(120)));
        assert_eq!(soak.round_budget(), Duration::from_millis(122_500));
        assert_eq!(
            goodput.args(44),
            [
                "bench",
                "goodput",
                "--transport",
                "aioquic",
                "--scenario",
                "bbr-loss",
                "--loss",
                "1",
                "--size-mb",
                "10",
                "--repetitions",
                "1",
                "--seed",
                "44"
            ]
        );
        // 10 MB at the scenario's 100 Mbit/s is 0.8 s; the budget is at least 30 s.
        assert_eq!(goodput.round_budget(), Duration::from_secs(30));
        assert_eq!(
            goodput.expected_round_time(),
            Duration::from_millis(800) + ROUND_OVERHEAD
        );
        assert_eq!(
            reflector.args(42),
            [
                "bench",
                "reflector",
                "--levels",
                "1000",
                "--interval-ms",
                "20",
                "--in-process"
            ]
        );
        assert!(reflector.name().starts_with("reflector levels=1000"));
        assert_eq!(m.total_rounds(), 3 + 1 + 3 + 3 + 3);
    }

    #[test]
    fn goodput_controllers_are_the_registry_s() {
        let names: Vec<&str> = crate::goodput::GoodputConfig::controllers()
            .map(|k| k.as_str())
            .collect();
        let Some(ValueKind::Choice(listed)) = CaseKind::Goodput.option("cc").map(|o| o.value)
        else {
            panic!("cc is a choice");
        };
        assert_eq!(listed, &names[..]);
    }

    fn shipped(text: &str) -> Matrix {
        Matrix::from_toml(text).unwrap()
    }

    #[test]
    fn arknet_rudp_has_the_96_published_configurations() {
        let m = shipped(include_str!("../../../../matrices/arknet-rudp.toml"));
        assert!(m.cases.iter().all(|c| c.kind == CaseKind::Rudp));
        assert_eq!(m.total_rounds(), 96);
        let count = |f: &dyn Fn(&MatrixCase) -> bool| -> usize {
            m.cases.iter().filter(|c| f(c)).map(|c| c.seeds.len()).sum()
        };
        let main = |c: &MatrixCase| {
            c.text("profile") != Some("soak") && c.echo().is_some_and(|e| e.payload == 1024)
        };
        assert_eq!(count(&main), 54);
        assert_eq!(
            count(&|c| c.text("profile") == Some("random") && !main(c)),
            36
        );
        assert_eq!(count(&|c| c.text("profile") == Some("soak")), 6);
        for c in &m.cases {
            let e = c.echo().unwrap();
            let soak = c.text("profile") == Some("soak");
            assert_eq!(e.warmup, Duration::from_secs(2));
            let measured = if soak { 120 } else { 3 };
            assert_eq!(e.measured, Duration::from_secs(measured));
            let seeds: &[u64] = if main(c) { &[42, 43, 44] } else { &[42] };
            assert_eq!(c.seeds, seeds);
        }
        // Every (profile, fec, io_model) of the main comparison exactly once.
        let mut keys: Vec<_> = m
            .cases
            .iter()
            .filter(|c| main(c))
            .map(|c| (c.text("profile"), c.text("fec"), c.text("io_model")))
            .collect();
        keys.sort();
        keys.dedup();
        assert_eq!(keys.len(), 18);
        // 54 × 6 s + 36 × 6 s + 6 × 123 s.
        assert_eq!(
            m.expected_wall_time(),
            Duration::from_secs(54 * 6 + 36 * 6 + 6 * 123)
        );
    }

    #[test]
    fn the_other_shipped_matrices_parse() {
        let udp = shipped(include_str!("../../../../matrices/arknet-udp.toml"));
        assert_eq!((udp.cases.len(), udp.total_rounds()), (19, 57));
        let protocols = |p: &str| {
            udp.cases
                .iter()
                .filter(|c| c.text("protocol") == Some(p))
                .count()
        };
        assert_eq!((protocols("tls"), protocols("wss")), (2, 1));
        assert!(udp.cases.iter().any(|c| c.whole("work") == Some(100)));
        assert!(udp
            .cases
            .iter()
            .any(|c| c.text("io_model") == Some("sharded")));
        let big: Vec<usize> = udp
            .cases
            .iter()
            .filter_map(|c| c.echo().filter(|e| e.payload == 65_507).map(|e| e.window))
            .collect();
        assert_eq!(big, [1, 16, 64]);

        let quic = shipped(include_str!("../../../../matrices/quic-goodput.toml"));
        assert!(quic.cases.iter().all(|c| c.kind == CaseKind::Goodput));
        assert_eq!((quic.cases.len(), quic.total_rounds()), (10, 30));
        for t in ["quic", "quinn", "aioquic", "ngtcp2"] {
            assert!(
                quic.cases
                    .iter()
                    .any(|c| c.text("transport") == Some(t)
                        && c.real("bandwidth_mbps") == Some(200.0)),
                "{t}"
            );
        }

        let fanout = shipped(include_str!("../../../../matrices/draarl-fanout.toml"));
        assert!(fanout.cases.iter().all(|c| c.kind == CaseKind::Reflector));
        assert_eq!((fanout.cases.len(), fanout.total_rounds()), (10, 30));

        let kcptun = shipped(include_str!("../../../../matrices/kcptun-rudp.toml"));
        assert_eq!((kcptun.cases.len(), kcptun.total_rounds()), (12, 36));
    }
}
