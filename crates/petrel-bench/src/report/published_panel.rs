//! The "Published vs Petrel" panel: each seed's headline figure next to
//! Petrel's figure for the same case on the machine that ran the results,
//! both as a share of a limit measured on their own machine.

use std::fmt::Write as _;

use super::published::{compare, figures, Comparison, Limit, PublishedFigure};
use super::svg::{escape, number};
use crate::record::ResultRecord;

/// `v` in `unit`, with µs of a millisecond or more shown in ms.
fn value(v: f64, unit: &str) -> String {
    if unit == "µs" && v >= 1000.0 {
        format!("{} ms", number(v / 1000.0))
    } else {
        format!("{} {unit}", number(v))
    }
}

fn published_value(f: &PublishedFigure) -> String {
    if f.is_range() {
        let hi = value(f.high, &f.unit);
        let lo = value(f.low, &f.unit);
        // "844–869 rt/s": the unit once, after the high end.
        let lo_number = lo.split(' ').next().unwrap_or(&lo);
        format!("{lo_number}–{hi}")
    } else {
        value(f.low, &f.unit)
    }
}

fn share(v: f64, limit: f64) -> String {
    format!("{} %", number(100.0 * v / limit))
}

fn published_share(f: &PublishedFigure) -> String {
    match (&f.published_limit, f.limit) {
        (_, Limit::None) => "–".to_owned(),
        (Some((limit, source)), _) => {
            let s = if f.is_range() {
                format!(
                    "{}–{}",
                    number(100.0 * f.low / limit),
                    share(f.high, *limit)
                )
            } else {
                share(f.low, *limit)
            };
            format!(
                "{s} <small>of {} ({})</small>",
                escape(&value(*limit, &f.unit)),
                escape(source)
            )
        }
        (None, _) => "<small>no limit published</small>".to_owned(),
    }
}

fn row(out: &mut String, c: &Comparison<'_>) {
    let f = c.figure;
    let note = f
        .note
        .as_ref()
        .map(|n| format!("<br><small>mapping: {}</small>", escape(n)))
        .unwrap_or_default();
    let _ = write!(
        out,
        "<tr data-figure=\"{}\"><td>{}<br><small>{}</small></td><td>{}{note}</td><td>{}</td><td>{}<br><small>{}</small></td><td>{}</td>",
        escape(&f.id),
        escape(&f.seed),
        escape(&f.source),
        escape(&f.case),
        escape(&f.metric),
        escape(&published_value(f)),
        escape(&f.machine),
        published_share(f),
    );
    match &c.petrel {
        None => {
            let _ = write!(
                out,
                "<td class=\"not-run\" colspan=\"4\">not run <small>(no result with {})</small></td></tr>",
                escape(&f.petrel_case())
            );
        }
        Some(p) => {
            let spread = if p.value.min == p.value.max {
                String::new()
            } else {
                format!(
                    " <small>({}–{})</small>",
                    number(p.value.min),
                    number(p.value.max)
                )
            };
            let more = if p.other_matches > 0 {
                format!(" <small>(+{} more matching)</small>", p.other_matches)
            } else {
                String::new()
            };
            let petrel_share = match (&p.limit, f.limit) {
                (_, Limit::None) => "–".to_owned(),
                (Some(l), _) => format!(
                    "{} <small>of {} ({})</small>",
                    share(p.value.median, l.value),
                    escape(&value(l.value, &f.unit)),
                    escape(&l.what)
                ),
                (None, _) => "<small>no limit measured in these results</small>".to_owned(),
            };
            let comparability = if p.same_machine {
                "same CPU model".to_owned()
            } else {
                format!(
                    "not like-for-like: different machine (published: {}; here: {})",
                    f.machine, p.machine
                )
            };
            let _ = write!(
                out,
                "<td>{}{more}</td><td class=\"petrel\">{}{spread}</td><td>{petrel_share}</td><td class=\"comparability\">{}</td></tr>",
                escape(&p.case),
                escape(&value(p.value.median, &f.unit)),
                escape(&comparability)
            );
        }
    }
}

/// Renders the panel into `out` for `records`.
pub(super) fn published_panel(out: &mut String, records: &[ResultRecord]) {
    out.push_str("<section id=\"published-vs-petrel\"><h2>Published vs Petrel</h2>");
    let figures = match figures() {
        Ok(f) => f,
        Err(e) => {
            let _ = write!(out, "<p class=\"bad\">{}</p></section>", escape(&e.to_string()));
            return;
        }
    };
    out.push_str("<p>Each seed's published headline figure (crates/petrel-bench/data/published.toml) next to Petrel's figure for the same case in these results. The machines differ, so compare the shares: each side divided by a limit measured on its own machine (raw UDP echo of the same shape; in-flight messages ÷ emulated RTT; the link rate; the relay's forwarding ceiling). Petrel: median across rounds (min–max).</p>");
    out.push_str("<table class=\"published\"><tr><th>seed</th><th>published case</th><th>metric</th><th>published (machine)</th><th>published share of limit</th><th>Petrel case</th><th>Petrel, this machine</th><th>Petrel share of limit</th><th>comparability</th></tr>");
    for c in compare(figures, records) {
        row(out, &c);
    }
    out.push_str("</table></section>");
}
