//! The report's opening screen: what ran (cases by benchmark, command, git
//! revision, machine), what won (per comparison group, the best series by
//! throughput and by p99 RTT, with its ratio to the runner-up) and what
//! failed (cases not `ok` with their reasons, and skipped cases).

use std::collections::BTreeMap;
use std::fmt::Write as _;

use serde_json::Value;

use super::placement::{ordered, placement};
use super::shell::shell_line;
use super::skipped::Skipped;
use super::svg::{escape, number};
use crate::record::ResultRecord;

/// Most comparison groups and failures listed before "and N more".
const MAX_ROWS: usize = 16;
/// Most distinct command lines listed.
const MAX_COMMANDS: usize = 3;

/// A figure compared within a group: (summary key, unit, higher is better).
type Figure = (&'static str, &'static str, bool);

/// Throughput figures, the first a record has is used.
const THROUGHPUT: [Figure; 2] = [
    ("round_trips_per_sec", "rt/s", true),
    ("goodput_mbps", "Mbit/s", true),
];
/// Tail-latency figures, the first a record has is used.
const TAIL: [Figure; 2] = [("rtt_p99_us", "µs", false), ("rtt_p99_ms", "ms", false)];

/// The best and the runner-up of one group on one figure.
struct Winner {
    best: (String, f64),
    next: Option<(String, f64)>,
    unit: &'static str,
    higher_is_better: bool,
}

/// Among `members` (series, record), the best on the first of `figures`
/// any member has; `None` with fewer than one contender.
fn winner(members: &[(String, &ResultRecord)], figures: &[Figure]) -> Option<Winner> {
    let (key, unit, higher) = *figures
        .iter()
        .find(|(k, _, _)| members.iter().any(|(_, r)| r.summary.contains_key(*k)))?;
    let mut values: Vec<(String, f64)> = members
        .iter()
        .filter_map(|(s, r)| Some((s.clone(), r.summary.get(key)?.median)))
        .filter(|(_, v)| v.is_finite())
        .collect();
    values.sort_by(|a, b| {
        let order = a.1.total_cmp(&b.1);
        if higher {
            order.reverse()
        } else {
            order
        }
    });
    let mut it = values.into_iter();
    Some(Winner {
        best: it.next()?,
        next: it.next(),
        unit,
        higher_is_better: higher,
    })
}

fn winner_cell(w: Option<&Winner>) -> (String, String) {
    let Some(w) = w else {
        return ("–".to_owned(), "–".to_owned());
    };
    let best = format!(
        "<b>{}</b> {} {}",
        escape(&w.best.0),
        number(w.best.1),
        escape(w.unit)
    );
    let margin = match &w.next {
        Some((name, v)) if *v > 0.0 && w.best.1 > 0.0 => {
            let ratio = if w.higher_is_better {
                w.best.1 / v
            } else {
                v / w.best.1
            };
            format!(
                "{ratio:.2}× {} ({} {})",
                escape(name),
                number(*v),
                escape(w.unit)
            )
        }
        Some((name, _)) => format!("vs {}", escape(name)),
        None => "only contender".to_owned(),
    };
    (best, margin)
}

fn what_ran(out: &mut String, records: &[ResultRecord]) {
    let mut kinds: BTreeMap<&str, usize> = BTreeMap::new();
    for r in records {
        *kinds.entry(r.benchmark.as_str()).or_default() += 1;
    }
    let kinds: Vec<String> = kinds.iter().map(|(k, n)| format!("{n} {k}")).collect();
    let commands = ordered(records.iter().map(|r| shell_line(&r.command_line)));
    let revisions = ordered(records.iter().map(|r| {
        let rev: String = r.build.git_revision.chars().take(12).collect();
        match r.build.git_dirty {
            Some(true) => format!("{rev} (modified tree)"),
            _ => rev,
        }
    }));
    let machines = ordered(records.iter().map(|r| {
        format!(
            "{}, {} logical cores, kernel {}",
            r.host.cpu_model, r.host.logical_cores, r.host.kernel
        )
    }));
    let _ = write!(out, "<h3 class=\"summary-head\">What ran</h3>");
    let _ = write!(
        out,
        "<p>{} case(s): {}. Git {}; machine: {}.</p>",
        records.len(),
        escape(&kinds.join(", ")),
        escape(&revisions.join("; ")),
        escape(&machines.join("; "))
    );
    out.push_str("<pre class=\"summary-commands\">");
    for c in commands.iter().take(MAX_COMMANDS) {
        let _ = writeln!(out, "{}", escape(c));
    }
    if commands.len() > MAX_COMMANDS {
        let _ = writeln!(
            out,
            "… and {} more (see Commands)",
            commands.len() - MAX_COMMANDS
        );
    }
    out.push_str("</pre>");
}

fn what_won(out: &mut String, records: &[ResultRecord]) {
    // (panel · group) → members (series, record); raw UDP is the baseline
    // the others are measured against, not a contender.
    let mut groups: Vec<(String, Vec<(String, &ResultRecord)>)> = Vec::new();
    for r in records.iter().filter(|r| r.ok) {
        let p = placement(r);
        if p.series == "udp" {
            continue;
        }
        let label = if p.panel.ends_with(&p.group) {
            p.panel
        } else {
            format!("{} · {}", p.panel, p.group)
        };
        match groups.iter_mut().find(|(l, _)| *l == label) {
            Some((_, members)) => members.push((p.series, r)),
            None => groups.push((label, vec![(p.series, r)])),
        }
    }
    groups.retain(|(_, members)| members.len() > 1);
    out.push_str("<h3 class=\"summary-head\">What won</h3>");
    if groups.is_empty() {
        out.push_str("<p>No group has two cases to compare.</p>");
        return;
    }
    out.push_str("<table class=\"won\"><tr><th>comparison</th><th>most throughput</th><th>margin over the next</th><th>lowest p99 RTT</th><th>margin over the next</th></tr>");
    for (label, members) in groups.iter().take(MAX_ROWS) {
        let (fast, fast_margin) = winner_cell(winner(members, &THROUGHPUT).as_ref());
        let (tail, tail_margin) = winner_cell(winner(members, &TAIL).as_ref());
        let _ = write!(
            out,
            "<tr><td>{}</td><td>{fast}</td><td>{fast_margin}</td><td>{tail}</td><td>{tail_margin}</td></tr>",
            escape(label)
        );
    }
    out.push_str("</table>");
    if groups.len() > MAX_ROWS {
        let _ = write!(
            out,
            "<p>… and {} more groups (see Charts and Ratios).</p>",
            groups.len() - MAX_ROWS
        );
    }
    out.push_str(
        "<p>Medians of ok cases of one run; raw UDP is the baseline, not a contender.</p>",
    );
}

/// Why a record is not `ok`: non-zero error counters, and the `error` or
/// `failures` its rounds give.
fn reasons(r: &ResultRecord) -> String {
    let mut out: Vec<String> = r
        .errors
        .iter()
        .filter(|(_, n)| **n > 0)
        .map(|(k, n)| format!("{k}={n}"))
        .collect();
    let round_reasons = r.rounds.iter().flat_map(|round| {
        let error = round
            .get("error")
            .and_then(Value::as_str)
            .map(str::to_owned);
        let failures = round
            .get("failures")
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
            .filter_map(|f| f.as_str().map(str::to_owned));
        error.into_iter().chain(failures)
    });
    out.extend(ordered(round_reasons));
    if out.is_empty() {
        "not ok, no error counter or message recorded".to_owned()
    } else {
        out.join("; ")
    }
}

fn what_failed(out: &mut String, records: &[ResultRecord], skipped: &[Skipped]) {
    out.push_str("<h3 class=\"summary-head\">What failed</h3>");
    let failed: Vec<&ResultRecord> = records.iter().filter(|r| !r.ok).collect();
    if failed.is_empty() && skipped.is_empty() {
        out.push_str("<p class=\"all-ok\">Nothing: every case is ok and none was skipped.</p>");
        return;
    }
    out.push_str("<table class=\"failed\"><tr><th>case</th><th>outcome</th><th>reason</th></tr>");
    let rows = failed
        .iter()
        .map(|r| (r.case.as_str(), "not ok", reasons(r)))
        .chain(
            skipped
                .iter()
                .map(|s| (s.case.as_str(), "skipped", s.reason.clone())),
        );
    for (case, outcome, reason) in rows.clone().take(MAX_ROWS) {
        let _ = write!(
            out,
            "<tr><td>{}</td><td class=\"bad\">{outcome}</td><td>{}</td></tr>",
            escape(case),
            escape(&reason)
        );
    }
    out.push_str("</table>");
    let total = failed.len() + skipped.len();
    if total > MAX_ROWS {
        let _ = write!(out, "<p>… and {} more.</p>", total - MAX_ROWS);
    }
}

/// Renders the summary section into `out`.
pub(super) fn summary(out: &mut String, records: &[ResultRecord], skipped: &[Skipped]) {
    out.push_str("<section id=\"summary\"><h2>Summary</h2>");
    what_ran(out, records);
    what_won(out, records);
    what_failed(out, records, skipped);
    out.push_str("</section>");
}
