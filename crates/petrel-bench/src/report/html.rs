//! The report page: the summary and published-vs-Petrel panel (rendered by
//! their own modules), charts, tables, environment and commands.

use std::collections::BTreeSet;
use std::fmt::Write as _;

use super::placement::{ordered, peer, placement};
use super::published_panel::published_panel;
use super::shell::shell_line;
use super::skipped::Skipped;
use super::summary::summary;
use super::svg::{bar_chart, escape, number, Axes, Bar, Group};
use crate::ratios::ratios;
use crate::record::{ResultRecord, Spread};

fn chart(records: &[&ResultRecord], key: &str, title: &str, unit: &str) -> String {
    let placed: Vec<_> = records.iter().map(|r| (placement(r), *r)).collect();
    let series = ordered(placed.iter().map(|(p, _)| p.series.clone()));
    let groups: Vec<Group> = ordered(placed.iter().map(|(p, _)| p.group.clone()))
        .into_iter()
        .map(|label| {
            let mut bars: Vec<Bar> = placed
                .iter()
                .filter(|(p, _)| p.group == label)
                .filter_map(|(p, r)| {
                    let s = r.summary.get(key)?;
                    Some(Bar {
                        series: p.series.clone(),
                        value: s.median,
                        min: s.min,
                        max: s.max,
                        case: r.case.clone(),
                    })
                })
                .collect();
            bars.sort_by_key(|b| series.iter().position(|s| *s == b.series));
            Group { label, bars }
        })
        .collect();
    // Every member of a panel has the same kind, hence the same labels.
    let (x_label, legend) = placed
        .first()
        .map_or(("case", "protocol"), |(p, _)| (p.x_label, p.legend));
    let axes = Axes {
        unit,
        x_label,
        legend,
    };
    bar_chart(title, &axes, &series, &groups)
}

/// Headline figures charted per panel: (summary key, title, unit).
const CHARTED: [(&str, &str, &str); 6] = [
    (
        "round_trips_per_sec",
        "Throughput (round trips/s, higher is better)",
        "round trips/s",
    ),
    ("rtt_p99_us", "p99 RTT (µs, lower is better)", "µs"),
    (
        "cpu_percent",
        "Process CPU (% of one core, lower is better)",
        "% of one core",
    ),
    (
        "overhead_percent",
        "Network overhead (UDP payload bytes beyond the application's, %, lower is better)",
        "%",
    ),
    (
        "goodput_mbps",
        "Bulk goodput, first to last byte (Mbit/s, higher is better)",
        "Mbit/s",
    ),
    (
        "efficiency_percent",
        "Efficiency, goodput / link rate (%, higher is better)",
        "%",
    ),
];

fn charts(out: &mut String, records: &[ResultRecord]) {
    out.push_str("<h2>Charts</h2><p>Bars: median across rounds; whiskers: min and max. Each panel has its own axes.</p>");
    for panel in ordered(records.iter().map(|r| placement(r).panel)) {
        let members: Vec<&ResultRecord> = records
            .iter()
            .filter(|r| placement(r).panel == panel)
            .collect();
        let _ = write!(out, "<h3>{}</h3>", escape(&panel));
        for (key, title, unit) in CHARTED {
            if members.iter().any(|r| r.summary.contains_key(key)) {
                out.push_str(&chart(&members, key, title, unit));
            }
        }
    }
}

fn ratio_table(out: &mut String, records: &[ResultRecord]) {
    let rows = ratios(records);
    if rows.is_empty() {
        return;
    }
    out.push_str("<h2>Ratios</h2><table><tr><th>cases</th><th>numerator</th><th>denominator</th><th>round trips/s ratio</th><th>p99 RTT ratio</th></tr>");
    for r in rows {
        let p99 = r.p99.map_or_else(|| "–".to_owned(), |p| format!("{p:.2}"));
        let _ = write!(
            out,
            "<tr><td>{}</td><td>{}</td><td>{}</td><td>{:.2}</td><td>{p99}</td></tr>",
            escape(&r.group),
            escape(&r.numerator),
            escape(&r.denominator),
            r.throughput
        );
    }
    out.push_str("</table><p>Medians of cases measured side by side in this run. Throughput above 1 and p99 below 1 favour the numerator.</p>");
}

fn spread_cell(s: Option<&Spread>) -> String {
    match s {
        Some(s) => format!(
            "{} <small>({}–{})</small>",
            number(s.median),
            number(s.min),
            number(s.max)
        ),
        None => "–".to_owned(),
    }
}

fn opt_bytes(v: Option<usize>) -> String {
    v.map_or_else(|| "OS default".to_owned(), |b| b.to_string())
}

fn summary_table(out: &mut String, records: &[ResultRecord]) {
    out.push_str("<h2>All cases</h2><table><tr><th>case</th><th>peer</th><th>rounds</th><th>round trips/s</th><th>p50 RTT µs</th><th>p99 RTT µs</th><th>CPU %</th><th>errors</th><th>ok</th></tr>");
    for r in records {
        let errors: u64 = r.errors.values().sum();
        let _ = write!(
            out,
            "<tr><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{errors}</td><td class=\"{}\">{}</td></tr>",
            escape(&r.case),
            escape(&peer(r)),
            r.rounds.len(),
            spread_cell(r.summary.get("round_trips_per_sec")),
            spread_cell(r.summary.get("rtt_p50_us")),
            spread_cell(r.summary.get("rtt_p99_us")),
            spread_cell(r.summary.get("cpu_percent")),
            if r.ok { "ok" } else { "bad" },
            if r.ok { "yes" } else { "NO" },
        );
    }
    out.push_str("</table><p>Cells: median (min–max) across rounds.</p>");
}

fn resource_table(out: &mut String, records: &[ResultRecord]) {
    out.push_str("<h2>Resources</h2><table><tr><th>case</th><th>peak RSS MiB</th><th>SO_SNDBUF requested</th><th>SO_SNDBUF server / client</th><th>SO_RCVBUF requested</th><th>SO_RCVBUF server / client</th></tr>");
    for r in records {
        let rss = r.peak_rss_bytes.map_or_else(
            || "–".to_owned(),
            |b| format!("{:.1}", b as f64 / (1024.0 * 1024.0)),
        );
        let _ = write!(out, "<tr><td>{}</td><td>{rss}</td>", escape(&r.case));
        match &r.socket_buffers {
            Some(b) => {
                let _ = write!(
                    out,
                    "<td>{}</td><td>{} / {}</td><td>{}</td><td>{} / {}</td></tr>",
                    opt_bytes(b.server.send_requested),
                    b.server.send_actual,
                    b.client.send_actual,
                    opt_bytes(b.server.recv_requested),
                    b.server.recv_actual,
                    b.client.recv_actual
                );
            }
            None => out.push_str("<td colspan=\"4\">no sockets recorded</td></tr>"),
        }
    }
    out.push_str("</table><p>Buffer sizes in bytes, as read back with getsockopt (Linux reports twice the granted value and caps requests at net.core.wmem_max / rmem_max). Peak RSS: the process's high-water mark during the case (<code>VmHWM</code>, reset before each case of a multi-case run; memory the allocator kept from earlier cases still counts).</p>");
}

/// Each distinct value of one environment field, joined.
fn distinct(records: &[ResultRecord], f: impl Fn(&ResultRecord) -> String) -> String {
    let set: BTreeSet<String> = records.iter().map(f).collect();
    set.into_iter().collect::<Vec<_>>().join("; ")
}

fn environment(out: &mut String, records: &[ResultRecord]) {
    let rows: [(&str, String); 8] = [
        (
            "git revision",
            distinct(records, |r| r.build.git_revision.clone()),
        ),
        (
            "tree modified",
            distinct(records, |r| match r.build.git_dirty {
                Some(d) => d.to_string(),
                None => "unknown".to_owned(),
            }),
        ),
        (
            "rustc",
            distinct(records, |r| r.build.rustc_version.clone()),
        ),
        ("profile", distinct(records, |r| r.build.profile.clone())),
        ("CPU", distinct(records, |r| r.host.cpu_model.clone())),
        (
            "logical cores",
            distinct(records, |r| r.host.logical_cores.to_string()),
        ),
        ("kernel", distinct(records, |r| r.host.kernel.clone())),
        ("started", distinct(records, |r| r.started_at.clone())),
    ];
    out.push_str("<h2>Environment</h2><table>");
    for (k, v) in rows {
        let _ = write!(out, "<tr><th>{k}</th><td>{}</td></tr>", escape(&v));
    }
    out.push_str("</table>");
}

fn commands(out: &mut String, records: &[ResultRecord]) {
    out.push_str("<h2>Commands</h2><pre>");
    for r in records {
        let _ = writeln!(
            out,
            "# {}\n{}",
            escape(&r.case),
            escape(&shell_line(&r.command_line))
        );
        for round in &r.rounds {
            if let Some(argv) = round.get("command_line").and_then(|c| c.as_array()) {
                let argv: Vec<String> = argv
                    .iter()
                    .filter_map(|a| a.as_str().map(str::to_owned))
                    .collect();
                let _ = writeln!(out, "{}", escape(&shell_line(&argv)));
            }
        }
    }
    out.push_str("</pre>");
}

const STYLE: &str = "body{font-family:sans-serif;margin:24px;max-width:1140px}table{border-collapse:collapse;margin:8px 0}td,th{border:1px solid #ccc;padding:3px 8px;text-align:left;font-size:13px}td.bad,p.bad{color:#b00;font-weight:bold}td.not-run{color:#777;font-style:italic}#summary{border:2px solid #0072B2;padding:4px 14px;margin:12px 0}#summary h3{margin:8px 0 4px}#summary p{margin:4px 0}pre{background:#f6f6f6;padding:8px;white-space:pre-wrap;font-size:12px}svg{display:block;margin:12px 0}";

/// The whole page for `records` (one per case, in the given order), with
/// no skipped cases.
pub fn render_html(records: &[ResultRecord]) -> String {
    render_report(records, &[])
}

/// The whole page: the summary (naming `skipped` among what failed), the
/// published-vs-Petrel panel, charts, tables, environment and commands.
pub fn render_report(records: &[ResultRecord], skipped: &[Skipped]) -> String {
    let all_ok = records.iter().all(|r| r.ok) && skipped.is_empty();
    let mut out = String::new();
    let _ = write!(
        out,
        "<!DOCTYPE html><html lang=\"en\"><head><meta charset=\"utf-8\"><title>Petrel benchmark report</title><style>{STYLE}</style></head><body><h1>Petrel benchmark report</h1><p>{} result(s); verdict: <b>{}</b>. Compare ratios measured side by side in this run, not absolute figures from other machines (specs/benchmarks.md).</p>",
        records.len(),
        if all_ok { "all ok" } else { "NOT all ok" }
    );
    summary(&mut out, records, skipped);
    published_panel(&mut out, records);
    charts(&mut out, records);
    summary_table(&mut out, records);
    ratio_table(&mut out, records);
    resource_table(&mut out, records);
    environment(&mut out, records);
    commands(&mut out, records);
    out.push_str("</body></html>\n");
    out
}
