//! Side-by-side summary table of benchmark cases.
//!
//! On a small or shared machine absolute figures are not comparable with
//! published ones; ratios between cases measured in one run are
//! (`specs/benchmarks.md`), hence one table for all cases of a run.

use std::fmt::Write as _;

use crate::record::ResultRecord;

/// One case's headline figures (medians across rounds).
#[derive(Debug, Clone, PartialEq)]
pub struct Row {
    /// Case name.
    pub case: String,
    /// Throughput (round trips/s).
    pub round_trips_per_sec: f64,
    /// Median RTT (µs).
    pub p50_us: Option<f64>,
    /// 99th-percentile RTT (µs).
    pub p99_us: Option<f64>,
    /// Process CPU over the measured interval (%; 100 = one core).
    pub cpu_percent: Option<f64>,
    /// Errors of every kind.
    pub errors: u64,
    /// The verdict.
    pub ok: bool,
}

impl Row {
    /// The row of a result record: medians across rounds, errors summed.
    pub fn from_record(r: &ResultRecord) -> Self {
        let median = |key: &str| r.summary.get(key).map(|s| s.median);
        Self {
            case: r.case.clone(),
            round_trips_per_sec: median("round_trips_per_sec").unwrap_or(0.0),
            p50_us: median("rtt_p50_us"),
            p99_us: median("rtt_p99_us"),
            cpu_percent: median("cpu_percent"),
            errors: r.errors.values().sum(),
            ok: r.ok,
        }
    }
}

const HEADERS: [&str; 7] = ["case", "rt/s", "p50 µs", "p99 µs", "CPU %", "errors", "ok"];

fn opt(v: Option<f64>, decimals: usize) -> String {
    v.map_or_else(|| "-".to_owned(), |v| format!("{v:.decimals$}"))
}

/// Renders `rows` as an aligned text table (one header line, one line per
/// row; numbers right-aligned).
pub fn render(rows: &[Row]) -> String {
    let cells: Vec<[String; 7]> = rows
        .iter()
        .map(|r| {
            [
                r.case.clone(),
                format!("{:.0}", r.round_trips_per_sec),
                opt(r.p50_us, 0),
                opt(r.p99_us, 0),
                opt(r.cpu_percent, 0),
                r.errors.to_string(),
                if r.ok { "yes" } else { "NO" }.to_owned(),
            ]
        })
        .collect();
    let mut widths = HEADERS.map(|h| h.chars().count());
    for row in &cells {
        for (w, c) in widths.iter_mut().zip(row) {
            *w = (*w).max(c.chars().count());
        }
    }
    let mut out = String::new();
    let line = |out: &mut String, row: &[String]| {
        for (i, (c, w)) in row.iter().zip(widths).enumerate() {
            let pad = " ".repeat(w - c.chars().count());
            let sep = if i == 0 { "" } else { "  " };
            if i == 0 {
                let _ = write!(out, "{sep}{c}{pad}");
            } else {
                let _ = write!(out, "{sep}{pad}{c}");
            }
        }
        out.push('\n');
    };
    line(&mut out, &HEADERS.map(str::to_owned));
    for row in &cells {
        line(&mut out, row);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn columns_align_and_missing_values_show_a_dash() {
        let rows = [
            Row {
                case: "udp-1024B-4x16".into(),
                round_trips_per_sec: 81234.4,
                p50_us: Some(700.0),
                p99_us: Some(1500.0),
                cpu_percent: Some(99.6),
                errors: 0,
                ok: true,
            },
            Row {
                case: "tcp".into(),
                round_trips_per_sec: 5.0,
                p50_us: None,
                p99_us: None,
                cpu_percent: None,
                errors: 3,
                ok: false,
            },
        ];
        let text = render(&rows);
        let lines: Vec<&str> = text.lines().collect();
        assert_eq!(lines.len(), 3);
        assert!(lines[1].starts_with("udp-1024B-4x16  81234"));
        assert!(lines[1].ends_with("yes"));
        assert!(lines[2].contains(" - ") && lines[2].ends_with("NO"));
        let width = |l: &str| l.chars().count();
        assert!(lines.iter().all(|l| width(l) == width(lines[0])));
    }
}
