//! `petrel bench matrix`: a TOML list of echo cases, each run for several
//! rounds, and the merging of per-round results into one record per case.
//!
//! The runner (one process per case and round, so a case cannot inherit
//! another's sockets, heap or runtime threads) lives in `petrel-cli`; what
//! lives here is the configuration, its validation and the merge.
//!
//! `matrices/peers.toml` in this crate is the default suite as a matrix.
//!
//! ```toml
//! rounds = 3              # optional, 1..=100 (default 3)
//! seeds = [42, 43, 44]    # optional, one per round (default 42, 43, 44, …)
//! seconds = 2.0           # optional default for every case (default 3)
//! warmup = 0.5            # optional default for every case (default 1)
//!
//! [[case]]
//! protocol = "quic"       # udp | tcp | websocket | rudp | kcp | quic
//! payload = 1024          # optional, bytes (default 1024)
//! clients = 4             # optional (default 1)
//! window = 16             # optional (default 1)
//! io_threads = 1          # optional, 1..=64 (default 1)
//! seconds = 2.0           # optional, overrides the top-level value
//! warmup = 0.5            # optional, overrides the top-level value
//! ```
//!
//! The loopback echo draws no random numbers: a round's seed labels it in
//! the record (`seeds`, and `seed` in each round) so a matrix with
//! impairment profiles can reuse the same layout.

use std::collections::BTreeMap;
use std::time::Duration;

use petrel_sys::range::{check_range, RangeError};
use serde::Deserialize;

use crate::echo::EchoConfig;
use crate::record::{ResultRecord, Spread};

/// Protocol names a case may use (the `--protocol` values of `bench echo`).
pub const PROTOCOLS: [&str; 6] = ["udp", "tcp", "websocket", "rudp", "kcp", "quic"];
/// Most cases one matrix may hold.
pub const MAX_CASES: usize = 256;
/// Most tokio worker threads a case may ask for.
pub const MAX_IO_THREADS: usize = 64;
/// Seed of the first round when none are given; round i gets `FIRST_SEED + i`.
pub const FIRST_SEED: u64 = 42;
/// Rounds when none are given.
pub const DEFAULT_ROUNDS: u32 = 3;

/// A matrix file that cannot be used, naming the field.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum MatrixError {
    /// Not valid TOML or not the layout above.
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
    case: Vec<RawCase>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct RawCase {
    protocol: String,
    payload: Option<usize>,
    clients: Option<usize>,
    window: Option<usize>,
    io_threads: Option<usize>,
    seconds: Option<f64>,
    warmup: Option<f64>,
}

/// One echo case of a matrix.
#[derive(Debug, Clone, PartialEq)]
pub struct MatrixCase {
    /// One of [`PROTOCOLS`].
    pub protocol: String,
    /// Payload, clients, window, warm-up and measured interval (`rounds` is 1:
    /// each round runs in its own process).
    pub echo: EchoConfig,
    /// Tokio worker threads, 1..=64.
    pub io_threads: usize,
}

impl MatrixCase {
    /// The case name `bench echo` records, e.g. `quic-1024B-4x16`.
    pub fn name(&self) -> String {
        format!(
            "{}-{}B-{}x{}",
            self.protocol, self.echo.payload, self.echo.clients, self.echo.window
        )
    }
}

/// A validated matrix.
#[derive(Debug, Clone, PartialEq)]
pub struct Matrix {
    /// The cases, in file order.
    pub cases: Vec<MatrixCase>,
    /// One seed per round.
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

impl Matrix {
    /// Parses and validates a matrix file.
    ///
    /// # Errors
    /// [`MatrixError::Syntax`] for bad TOML or unknown keys,
    /// [`MatrixError::Field`] naming the first field out of range.
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
        let defaults = EchoConfig::default();
        let top_seconds = raw
            .seconds
            .map(|v| seconds("seconds".into(), v))
            .transpose()?;
        let top_warmup = raw
            .warmup
            .map(|v| seconds("warmup".into(), v))
            .transpose()?;
        let mut cases = Vec::with_capacity(raw.case.len());
        for (i, c) in raw.case.into_iter().enumerate() {
            let at = |f: &str| format!("case[{i}].{f}");
            if !PROTOCOLS.contains(&c.protocol.as_str()) {
                return Err(field_error(
                    at("protocol"),
                    c.protocol,
                    "one of udp, tcp, websocket, rudp, kcp, quic",
                ));
            }
            let io_threads = c.io_threads.unwrap_or(1);
            check_range("io_threads", io_threads, &(1..=MAX_IO_THREADS))
                .map_err(|e| out_of_range(at("io_threads"), e))?;
            let measured = match c.seconds {
                Some(v) => seconds(at("seconds"), v)?,
                None => top_seconds.unwrap_or(defaults.measured),
            };
            let warmup = match c.warmup {
                Some(v) => seconds(at("warmup"), v)?,
                None => top_warmup.unwrap_or(defaults.warmup),
            };
            let echo = EchoConfig {
                payload: c.payload.unwrap_or(defaults.payload),
                clients: c.clients.unwrap_or(defaults.clients),
                window: c.window.unwrap_or(defaults.window),
                warmup,
                measured,
                rounds: 1,
            };
            echo.validate().map_err(|e| MatrixError::Field {
                field: at(e.field),
                value: e.value,
                allowed: format!("in {}", e.range),
            })?;
            cases.push(MatrixCase {
                protocol: c.protocol,
                echo,
                io_threads,
            });
        }
        Ok(Self { cases, seeds })
    }
}

/// Merges the single-round records of one case (in round order, one per
/// seed) into one record: rounds concatenated (each tagged with its index,
/// seed and the command that produced it), min/median/max recomputed across
/// rounds, errors summed, peak RSS the largest, `ok` only if every round was.
///
/// # Errors
/// [`MatrixError::Merge`] when `parts` is empty, its length differs from
/// `seeds`, a part is not a single round, or the parts are of different cases.
pub fn merge_rounds(parts: &[ResultRecord], seeds: &[u64]) -> Result<ResultRecord, MatrixError> {
    let first = parts
        .first()
        .ok_or_else(|| MatrixError::Merge("no rounds".into()))?;
    if parts.len() != seeds.len() {
        return Err(MatrixError::Merge(format!(
            "{} results for {} seeds",
            parts.len(),
            seeds.len()
        )));
    }
    let mut merged = first.clone();
    merged.rounds.clear();
    merged.errors.clear();
    merged.seeds = seeds.to_vec();
    let mut figures: BTreeMap<String, Vec<f64>> = BTreeMap::new();
    for (i, (part, &seed)) in parts.iter().zip(seeds).enumerate() {
        if part.case != first.case || part.rounds.len() != 1 {
            return Err(MatrixError::Merge(format!(
                "round {i} is case {} with {} rounds; expected {} with 1",
                part.case,
                part.rounds.len(),
                first.case
            )));
        }
        let mut round = part.rounds[0].clone();
        if let Some(obj) = round.as_object_mut() {
            obj.insert("round".into(), i.into());
            obj.insert("seed".into(), seed.into());
            obj.insert("command_line".into(), part.command_line.clone().into());
        }
        merged.rounds.push(round);
        for (kind, n) in &part.errors {
            *merged.errors.entry(kind.clone()).or_default() += n;
        }
        for (key, spread) in &part.summary {
            figures.entry(key.clone()).or_default().push(spread.median);
        }
        merged.peak_rss_bytes = merged.peak_rss_bytes.max(part.peak_rss_bytes);
        merged.ok &= part.ok;
    }
    merged.summary = figures
        .into_iter()
        .filter_map(|(k, v)| Some((k, Spread::of(&v)?)))
        .collect();
    if let Some(obj) = merged.parameters.as_object_mut() {
        obj.insert("rounds".into(), parts.len().into());
    }
    Ok(merged)
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
        assert_eq!(c.echo.measured, Duration::from_secs(2));
        assert_eq!(c.echo.warmup, Duration::from_millis(500));
        assert_eq!((c.echo.rounds, c.io_threads), (1, 1));
        assert_eq!(m.cases[1].echo.measured, Duration::from_secs(1));
        assert_eq!(m.cases[1].name(), "udp-1024B-1x1");
    }

    #[test]
    fn shipped_matrix_parses() {
        let m = Matrix::from_toml(include_str!("../matrices/peers.toml")).unwrap();
        assert_eq!(m.cases.len(), 12);
        assert_eq!(m.seeds, [42, 43, 44]);
        for p in PROTOCOLS {
            assert_eq!(m.cases.iter().filter(|c| c.protocol == p).count(), 2, "{p}");
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

    fn part(case: &str, rtt: f64, ok: bool) -> ResultRecord {
        let mut r = ResultRecord::begin("echo", case, &serde_json::json!({"rounds": 1})).unwrap();
        r.push_round(&serde_json::json!({"round": 0, "round_trips_per_sec": rtt}))
            .unwrap();
        r.summary
            .insert("round_trips_per_sec".into(), Spread::of(&[rtt]).unwrap());
        r.errors.insert("lost".into(), u64::from(!ok));
        r.peak_rss_bytes = Some(rtt as u64);
        r.ok = ok;
        r
    }

    #[test]
    fn merge_recomputes_the_spread_and_sums_errors() {
        let parts = [
            part("udp-x", 300.0, true),
            part("udp-x", 100.0, false),
            part("udp-x", 200.0, true),
        ];
        let m = merge_rounds(&parts, &[42, 43, 44]).unwrap();
        let s = m.summary["round_trips_per_sec"];
        assert_eq!((s.min, s.median, s.max), (100.0, 200.0, 300.0));
        assert_eq!(m.seeds, [42, 43, 44]);
        assert_eq!(m.rounds.len(), 3);
        assert_eq!(m.rounds[1]["round"], 1);
        assert_eq!(m.rounds[2]["seed"], 44);
        assert!(m.rounds[0]["command_line"].is_array());
        assert_eq!(m.errors["lost"], 1);
        assert_eq!(m.parameters["rounds"], 3);
        assert_eq!(m.peak_rss_bytes, Some(300));
        assert!(!m.ok);
        let good = [part("udp-x", 1.0, true)];
        assert!(merge_rounds(&good, &[7]).unwrap().ok);
    }

    #[test]
    fn merge_refuses_mismatched_parts() {
        assert!(merge_rounds(&[], &[]).is_err());
        let a = part("udp-x", 1.0, true);
        assert!(merge_rounds(std::slice::from_ref(&a), &[1, 2]).is_err());
        let b = part("tcp-x", 1.0, true);
        assert!(merge_rounds(&[a.clone(), b], &[1, 2]).is_err());
        let mut two = a.clone();
        two.rounds.push(serde_json::json!({}));
        assert!(merge_rounds(&[a, two], &[1, 2]).is_err());
    }
}
