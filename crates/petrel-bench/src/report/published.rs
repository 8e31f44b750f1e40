//! The seeds' published headline figures (`data/published.toml`, embedded at
//! build time) and their match against the result records of one run.
//!
//! Each figure names the Petrel case it compares with (a `benchmark` and the
//! parameters a record must carry, optionally the fields of one reflector
//! stage) and the limit both sides are divided by, so a reader sees the
//! published figure and Petrel's as shares of what each machine allows
//! instead of two absolute numbers from different hardware
//! (`specs/benchmarks.md`: "compare ratios measured side by side").
//!
//! Matching is by parameters alone, so records of new peers or scenarios slot
//! in without code: a goodput record with `transport = "ngtcp2"` matches the
//! published ngtcp2 row. A record that carries a qualifier (`peer`,
//! `scenario`, a non-zero `loss`) matches only a figure that names it, so a
//! kcptun RUDP result is never shown as Petrel's and a lossy goodput run
//! never as the loss-free published case.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::OnceLock;

use serde::Deserialize;
use serde_json::Value;

use crate::record::{ResultRecord, Spread};

/// The data file, as embedded.
pub const PUBLISHED_TOML: &str = include_str!("../../data/published.toml");

/// Parameters that, when a record carries them with a value other than
/// null, `""`, `0` or `false`, must be named by a figure's mapping for the
/// record to match it.
pub const QUALIFIERS: [&str; 3] = ["peer", "scenario", "loss"];

/// What both sides of a comparison are divided by.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Limit {
    /// No share (latency, loss, overhead).
    None,
    /// Raw UDP echo round trips/s of the same payload, clients and window,
    /// measured in the same run.
    RawUdpEcho,
    /// clients × window ÷ emulated RTT (twice the record's one-way link
    /// delay); without delay, the same-run raw UDP echo of the same shape.
    WindowRtt,
    /// The emulated link rate, Mbit/s.
    LinkRate,
    /// The relay's `sendmmsg`/`recvmmsg` forwarding ceiling
    /// (`petrel bench netem`), packets/s, when the results hold one.
    RawForwarding,
}

/// A value of a figure's case mapping: text or a number.
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(untagged)]
pub enum MatchValue {
    /// Matches the same string, or that string followed by a space and more.
    Text(String),
    /// Matches a JSON number of the same value.
    Number(f64),
}

impl MatchValue {
    fn matches(&self, v: &Value) -> bool {
        match (self, v) {
            (Self::Text(want), Value::String(got)) => {
                got == want
                    || got
                        .strip_prefix(want.as_str())
                        .is_some_and(|rest| rest.starts_with(' '))
            }
            (Self::Number(want), Value::Number(got)) => got
                .as_f64()
                .is_some_and(|g| (g - want).abs() <= 1e-9 * want.abs().max(1.0)),
            _ => false,
        }
    }
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct RawFile {
    figure: Vec<RawFigure>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct RawFigure {
    id: String,
    seed: String,
    source: String,
    machine: String,
    case: String,
    metric: String,
    unit: String,
    value: Option<f64>,
    low: Option<f64>,
    high: Option<f64>,
    limit: Limit,
    published_limit: Option<f64>,
    published_limit_source: Option<String>,
    note: Option<String>,
    petrel: BTreeMap<String, MatchValue>,
    #[serde(default)]
    stage: BTreeMap<String, MatchValue>,
}

/// One published figure, validated.
#[derive(Debug, Clone, PartialEq)]
pub struct PublishedFigure {
    /// Unique kebab-case identifier.
    pub id: String,
    /// The publication, e.g. `"arknet RUDP"`.
    pub seed: String,
    /// Where the number is quoted, e.g. `"specs/benchmarks.md §B"`.
    pub source: String,
    /// The machine the publication measured on.
    pub machine: String,
    /// The published case, in words.
    pub case: String,
    /// The record figure it compares with: a `summary` key, or with a
    /// [`stage`](Self::stage) a field of one element of `rounds`.
    pub metric: String,
    /// Unit of the values and limits, e.g. `"rt/s"`.
    pub unit: String,
    /// Published value, or the low end of a published range.
    pub low: f64,
    /// Published value, or the high end of a published range.
    pub high: f64,
    /// What both sides are divided by.
    pub limit: Limit,
    /// The limit on the published machine, with how it is known.
    pub published_limit: Option<(f64, String)>,
    /// How the mapping was chosen where the source is vague.
    pub note: Option<String>,
    /// The Petrel case: `benchmark` and parameters a record must carry.
    pub petrel: BTreeMap<String, MatchValue>,
    /// Fields one element of `rounds` must carry (reflector stages).
    pub stage: BTreeMap<String, MatchValue>,
}

impl PublishedFigure {
    /// Whether the published figure is a range.
    pub fn is_range(&self) -> bool {
        self.low != self.high
    }

    /// The `benchmark` the Petrel case belongs to.
    pub fn benchmark(&self) -> &str {
        match self.petrel.get("benchmark") {
            Some(MatchValue::Text(b)) => b,
            _ => "",
        }
    }

    /// The Petrel case in words, e.g. `protocol=udp payload=1024 …`.
    pub fn petrel_case(&self) -> String {
        self.petrel
            .iter()
            .chain(&self.stage)
            .map(|(k, v)| match v {
                MatchValue::Text(t) => format!("{k}={t}"),
                MatchValue::Number(n) => format!("{k}={n}"),
            })
            .collect::<Vec<_>>()
            .join(" ")
    }
}

/// A data file that cannot be used, naming the entry.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum PublishedError {
    /// Not valid TOML or not the layout of `data/published.toml`.
    #[error("published figures: {0}")]
    Syntax(String),
    /// An entry with missing or contradictory fields.
    #[error("published figure {id}: {problem}")]
    Entry {
        /// The entry's `id` (or its index when the id is the problem).
        id: String,
        /// What is wrong.
        problem: String,
    },
}

fn validate(
    raw: RawFigure,
    seen: &mut BTreeSet<String>,
) -> Result<PublishedFigure, PublishedError> {
    let bad = |problem: &str| PublishedError::Entry {
        id: raw.id.clone(),
        problem: problem.to_owned(),
    };
    let kebab = !raw.id.is_empty()
        && raw
            .id
            .chars()
            .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-');
    if !kebab {
        return Err(bad("id must be non-empty kebab-case"));
    }
    if !seen.insert(raw.id.clone()) {
        return Err(bad("duplicate id"));
    }
    for (field, text) in [
        ("seed", &raw.seed),
        ("source", &raw.source),
        ("machine", &raw.machine),
        ("case", &raw.case),
        ("metric", &raw.metric),
        ("unit", &raw.unit),
    ] {
        if text.trim().is_empty() {
            return Err(bad(&format!("{field} is empty")));
        }
    }
    let (low, high) = match (raw.value, raw.low, raw.high) {
        (Some(v), None, None) => (v, v),
        (None, Some(l), Some(h)) if l < h => (l, h),
        (None, Some(_), Some(_)) => return Err(bad("low must be below high")),
        _ => return Err(bad("give either value, or low and high")),
    };
    if !(low.is_finite() && high.is_finite() && low > 0.0) {
        return Err(bad("values must be finite and positive"));
    }
    let published_limit = match (raw.published_limit, raw.published_limit_source) {
        (None, None) => None,
        (Some(l), Some(s)) if l.is_finite() && l > 0.0 && !s.trim().is_empty() => Some((l, s)),
        _ => {
            return Err(bad(
                "published_limit needs a positive value and a published_limit_source",
            ))
        }
    };
    if raw.limit == Limit::None && published_limit.is_some() {
        return Err(bad("limit = \"none\" takes no published_limit"));
    }
    if raw.limit == Limit::LinkRate && raw.unit != "Mbit/s" {
        return Err(bad("limit = \"link_rate\" compares Mbit/s"));
    }
    if !matches!(raw.petrel.get("benchmark"), Some(MatchValue::Text(b)) if !b.is_empty()) {
        return Err(bad("[figure.petrel] needs benchmark = \"…\""));
    }
    Ok(PublishedFigure {
        id: raw.id,
        seed: raw.seed,
        source: raw.source,
        machine: raw.machine,
        case: raw.case,
        metric: raw.metric,
        unit: raw.unit,
        low,
        high,
        limit: raw.limit,
        published_limit,
        note: raw.note,
        petrel: raw.petrel,
        stage: raw.stage,
    })
}

/// Parses and validates a published-figures file in the layout of
/// `data/published.toml`.
///
/// # Errors
/// [`PublishedError`] for invalid TOML, unknown fields, a duplicate id, a
/// value given both as `value` and as a range, non-positive values, a limit
/// without its source, or a mapping without `benchmark`.
pub fn parse(text: &str) -> Result<Vec<PublishedFigure>, PublishedError> {
    let raw: RawFile = toml::from_str(text).map_err(|e| PublishedError::Syntax(e.to_string()))?;
    let mut seen = BTreeSet::new();
    raw.figure
        .into_iter()
        .map(|f| validate(f, &mut seen))
        .collect()
}

/// The embedded figures ([`PUBLISHED_TOML`]), parsed once.
///
/// # Errors
/// As [`parse`]; a test keeps the embedded file valid.
pub fn figures() -> Result<&'static [PublishedFigure], PublishedError> {
    static FIGURES: OnceLock<Result<Vec<PublishedFigure>, PublishedError>> = OnceLock::new();
    FIGURES
        .get_or_init(|| parse(PUBLISHED_TOML))
        .as_ref()
        .map(Vec::as_slice)
        .map_err(Clone::clone)
}

/// A parameter of a record: `parameters.<key>`, else `parameters.case.<key>`
/// (goodput nests its case).
pub(crate) fn parameter<'a>(r: &'a ResultRecord, key: &str) -> Option<&'a Value> {
    r.parameters
        .get(key)
        .or_else(|| r.parameters.get("case").and_then(|c| c.get(key)))
}

fn is_set(v: &Value) -> bool {
    match v {
        Value::Null => false,
        Value::Bool(b) => *b,
        Value::Number(n) => n.as_f64().is_some_and(|f| f != 0.0),
        Value::String(s) => !s.is_empty(),
        Value::Array(a) => !a.is_empty(),
        Value::Object(o) => !o.is_empty(),
    }
}

fn record_matches(f: &PublishedFigure, r: &ResultRecord) -> bool {
    if r.benchmark != f.benchmark() {
        return false;
    }
    let named = f
        .petrel
        .iter()
        .filter(|(k, _)| k.as_str() != "benchmark")
        .all(|(k, want)| parameter(r, k).is_some_and(|v| want.matches(v)));
    let unqualified = QUALIFIERS
        .iter()
        .all(|q| f.petrel.contains_key(*q) || !parameter(r, q).is_some_and(is_set));
    named && unqualified
}

/// Petrel's figure for one published case, from one record.
#[derive(Debug, Clone, PartialEq)]
pub struct PetrelFigure {
    /// The record's case name.
    pub case: String,
    /// The metric: the record's summary spread, or across the matching
    /// stages of a reflector record.
    pub value: Spread,
    /// This run's limit for the case, when it can be measured.
    pub limit: Option<MeasuredLimit>,
    /// Other records that matched the same figure (the first is shown).
    pub other_matches: usize,
    /// CPU model and logical cores of the machine that ran it.
    pub machine: String,
    /// Whether the published machine is the same CPU model.
    pub same_machine: bool,
}

/// A limit measured (or derived from the parameters) in this run.
#[derive(Debug, Clone, PartialEq)]
pub struct MeasuredLimit {
    /// In the figure's unit.
    pub value: f64,
    /// What it is, in words, e.g. `raw UDP echo, same shape, this run (udp-1024B-1x1)`.
    pub what: String,
}

/// One published figure and, when the run has its case, Petrel's.
#[derive(Debug, Clone, PartialEq)]
pub struct Comparison<'a> {
    /// The published side.
    pub figure: &'a PublishedFigure,
    /// Petrel's side; `None` when no record matches (the case was not run).
    pub petrel: Option<PetrelFigure>,
}

fn number(r: &ResultRecord, key: &str) -> Option<f64> {
    parameter(r, key).and_then(Value::as_f64)
}

fn metric_of(f: &PublishedFigure, r: &ResultRecord) -> Option<Spread> {
    if f.stage.is_empty() {
        return r.summary.get(&f.metric).copied();
    }
    let values: Vec<f64> = r
        .rounds
        .iter()
        .filter(|round| {
            f.stage
                .iter()
                .all(|(k, want)| round.get(k).is_some_and(|v| want.matches(v)))
        })
        .filter_map(|round| round.get(&f.metric).and_then(Value::as_f64))
        .collect();
    Spread::of(&values)
}

/// Raw UDP echo of the payload, clients and window of `r`, in `records`.
fn raw_udp_echo(r: &ResultRecord, records: &[ResultRecord]) -> Option<MeasuredLimit> {
    let shape = ["payload", "clients", "window"].map(|k| number(r, k));
    let udp = records.iter().find(|o| {
        o.benchmark == "echo"
            && parameter(o, "protocol").and_then(Value::as_str) == Some("udp")
            && ["payload", "clients", "window"].map(|k| number(o, k)) == shape
            && shape.iter().all(Option::is_some)
    })?;
    let value = udp.summary.get("round_trips_per_sec")?.median;
    (value > 0.0).then(|| MeasuredLimit {
        value,
        what: format!("raw UDP echo of the same shape, this run ({})", udp.case),
    })
}

fn window_rtt(r: &ResultRecord, records: &[ResultRecord]) -> Option<MeasuredLimit> {
    let delay_ms = r
        .parameters
        .get("link")
        .and_then(|l| l.get("delay"))
        .and_then(Value::as_f64)
        .unwrap_or(0.0);
    match (number(r, "clients"), number(r, "window")) {
        (Some(c), Some(w)) if delay_ms > 0.0 => Some(MeasuredLimit {
            value: c * w / (2.0 * delay_ms / 1000.0),
            what: format!("{c} × {w} in flight ÷ {} ms emulated RTT", 2.0 * delay_ms),
        }),
        _ => raw_udp_echo(r, records),
    }
}

fn link_rate(r: &ResultRecord) -> Option<MeasuredLimit> {
    let bps = number(r, "link_rate_bps").filter(|b| *b > 0.0)?;
    Some(MeasuredLimit {
        value: bps / 1e6,
        what: "the emulated link rate".to_owned(),
    })
}

fn raw_forwarding(records: &[ResultRecord]) -> Option<MeasuredLimit> {
    records
        .iter()
        .filter(|o| o.benchmark == "netem")
        .flat_map(|o| {
            o.rounds.iter().filter_map(move |round| {
                let pps = round.get("ceiling")?.get("pps")?.as_f64()?;
                Some((pps, &o.case))
            })
        })
        .filter(|(pps, _)| *pps > 0.0)
        .max_by(|a, b| a.0.total_cmp(&b.0))
        .map(|(value, case)| MeasuredLimit {
            value,
            what: format!("relay forwarding ceiling, this run ({case})"),
        })
}

fn limit_of(limit: Limit, r: &ResultRecord, records: &[ResultRecord]) -> Option<MeasuredLimit> {
    match limit {
        Limit::None => None,
        Limit::RawUdpEcho => raw_udp_echo(r, records),
        Limit::WindowRtt => window_rtt(r, records),
        Limit::LinkRate => link_rate(r),
        Limit::RawForwarding => raw_forwarding(records),
    }
}

/// Each figure of `figures` with Petrel's figure for its case from
/// `records`, in `figures` order. The first matching record with the metric
/// is used; the others are counted.
pub fn compare<'a>(
    figures: &'a [PublishedFigure],
    records: &[ResultRecord],
) -> Vec<Comparison<'a>> {
    figures
        .iter()
        .map(|f| {
            let mut matches = records
                .iter()
                .filter(|r| record_matches(f, r))
                .filter_map(|r| Some((r, metric_of(f, r)?)));
            let petrel = matches.next().map(|(r, value)| {
                let same_machine = f.machine.contains(&r.host.cpu_model);
                PetrelFigure {
                    case: r.case.clone(),
                    value,
                    limit: limit_of(f.limit, r, records),
                    other_matches: matches.count(),
                    machine: format!(
                        "{}, {} logical cores",
                        r.host.cpu_model, r.host.logical_cores
                    ),
                    same_machine,
                }
            });
            Comparison { figure: f, petrel }
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn embedded_file_is_valid_and_covers_every_seed() {
        let figures = figures().unwrap();
        let seeds: BTreeSet<&str> = figures.iter().map(|f| f.seed.as_str()).collect();
        for seed in [
            "arknet UDP echo",
            "arknet RUDP",
            "QUIC implementations goodput",
            "DraARL reflector fan-out",
        ] {
            assert!(seeds.contains(seed), "no figure of {seed}");
        }
        let benchmarks: BTreeSet<&str> = figures.iter().map(PublishedFigure::benchmark).collect();
        assert_eq!(
            benchmarks,
            ["echo", "goodput", "reflector", "rudp"]
                .into_iter()
                .collect()
        );
        // The figures the issue quotes, with their units.
        let get = |id: &str| figures.iter().find(|f| f.id == id).unwrap();
        let random_fixed = get("arknet-rudp-random-fixed-throughput");
        assert_eq!((random_fixed.low, random_fixed.high), (844.0, 869.0));
        assert_eq!(random_fixed.published_limit.as_ref().unwrap().0, 3200.0);
        assert_eq!(get("arknet-udp-16x1-throughput").low, 87_835.0);
        assert_eq!(get("arknet-rudp-random-adaptive-p99").low, 142_500.0);
        assert_eq!(get("quic-goodput-aioquic").low, 50.5);
        assert_eq!(get("draarl-9000-20ms-pps").stage.len(), 2);
    }

    #[test]
    fn invalid_entries_are_named() {
        let entry = |extra: &str| {
            format!(
                "[[figure]]\nid = \"x\"\nseed = \"s\"\nsource = \"src\"\nmachine = \"m\"\ncase = \"c\"\nmetric = \"round_trips_per_sec\"\nunit = \"rt/s\"\nlimit = \"none\"\n{extra}\n[figure.petrel]\nbenchmark = \"echo\"\n"
            )
        };
        assert_eq!(parse(&entry("value = 5")).unwrap()[0].low, 5.0);
        for (extra, needle) in [
            ("", "either value"),
            ("value = 5\nlow = 1\nhigh = 2", "either value"),
            ("low = 3\nhigh = 2", "below high"),
            ("value = -1", "positive"),
            (
                "value = 5\npublished_limit = 10\npublished_limit_source = \"x\"",
                "takes no published_limit",
            ),
            ("value = 5\ncolour = 1", "unknown field"),
        ] {
            let err = parse(&entry(extra)).unwrap_err().to_string();
            assert!(err.contains(needle), "{extra}: {err}");
        }
        let twice = format!("{}{}", entry("value = 1"), entry("value = 2"));
        assert!(parse(&twice)
            .unwrap_err()
            .to_string()
            .contains("duplicate id"));
        let no_benchmark = entry("value = 1").replace("benchmark = \"echo\"", "protocol = \"udp\"");
        assert!(parse(&no_benchmark)
            .unwrap_err()
            .to_string()
            .contains("needs benchmark"));
    }

    #[test]
    fn text_matches_whole_words_and_numbers_by_value() {
        let t = MatchValue::Text("quinn".into());
        assert!(t.matches(&Value::from("quinn")));
        assert!(t.matches(&Value::from("quinn 0.11.12")));
        assert!(!t.matches(&Value::from("quinnx")));
        assert!(!t.matches(&Value::from(1)));
        let n = MatchValue::Number(1024.0);
        assert!(n.matches(&serde_json::json!(1024)));
        assert!(n.matches(&serde_json::json!(1024.0)));
        assert!(!n.matches(&serde_json::json!(1025)));
        assert!(!n.matches(&Value::from("1024")));
    }
}
