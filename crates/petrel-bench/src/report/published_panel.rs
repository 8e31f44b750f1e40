//! The "Published vs Petrel" panel: each seed's headline figure next to
//! Petrel's figure for the same case on the machine that ran the results,
//! both as a share of a limit measured on their own machine.

use std::fmt::Write as _;

use super::published::{compare, figures, Comparison, Limit, PublishedFigure};
use super::svg::{escape, number};
use crate::record::ResultRecord;

/// Digits of an integer part grouped by thousands: `87835` → `87,835`.
fn grouped(text: &str) -> String {
    let (int, frac) = text
        .split_once('.')
        .map_or((text, None), |(i, f)| (i, Some(f)));
    let digits: Vec<char> = int.chars().collect();
    let mut out = String::new();
    for (i, c) in digits.iter().enumerate() {
        if i > 0
            && (digits.len() - i) % 3 == 0
            && c.is_ascii_digit()
            && digits[i - 1].is_ascii_digit()
        {
            out.push(',');
        }
        out.push(*c);
    }
    if let Some(f) = frac {
        out.push('.');
        out.push_str(f);
    }
    out
}

/// `v` in `unit`, with µs of a millisecond or more shown in ms. Published
/// figures keep their published precision (`exact`); measured ones get
/// three significant digits.
fn value(v: f64, unit: &str, exact: bool) -> String {
    let (v, unit) = if unit == "µs" && v >= 1000.0 {
        (v / 1000.0, "ms")
    } else {
        (v, unit)
    };
    let text = if exact { v.to_string() } else { number(v) };
    format!("{} {unit}", grouped(&text))
}

fn published_value(f: &PublishedFigure) -> String {
    let hi = value(f.high, &f.unit, true);
    if f.is_range() {
        // "844–869 rt/s": the unit once, after the high end.
        let lo = value(f.low, &f.unit, true);
        let lo_number = lo.split(' ').next().unwrap_or(&lo);
        format!("{lo_number}–{hi}")
    } else {
        hi
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
                escape(&value(*limit, &f.unit, true)),
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
        "<tr data-figure=\"{}\"><td>{}<br><small>{}</small></td><td>{}{note}</td><td>{}</td><td class=\"published\">{}</td><td>{}</td>",
        escape(&f.id),
        escape(&f.seed),
        escape(&f.source),
        escape(&f.case),
        escape(&f.metric),
        escape(&published_value(f)),
        published_share(f),
    );
    match &c.petrel {
        None => {
            let _ = write!(
                out,
                "<td class=\"not-run\" colspan=\"3\">not run <small>(no result with {})</small></td><td class=\"comparability\">published on {}</td></tr>",
                escape(&f.petrel_case()),
                escape(&f.machine)
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
                    escape(&value(l.value, &f.unit, false)),
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
                escape(&value(p.value.median, &f.unit, false)),
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
            let _ = write!(
                out,
                "<p class=\"bad\">{}</p></section>",
                escape(&e.to_string())
            );
            return;
        }
    };
    out.push_str("<p>Each seed's published headline figure (crates/petrel-bench/data/published.toml) next to Petrel's figure for the same case in these results. The machines differ, so compare the shares: each side divided by a limit measured on its own machine (raw UDP echo of the same shape; in-flight messages ÷ emulated RTT; the link rate; the relay's forwarding ceiling). Petrel: median across rounds (min–max).</p>");
    out.push_str("<table class=\"published\"><tr><th>seed</th><th>published case</th><th>metric</th><th>published</th><th>published share of limit</th><th>Petrel case</th><th>Petrel, this machine</th><th>Petrel share of limit</th><th>comparability</th></tr>");
    for c in compare(figures, records) {
        row(out, &c);
    }
    out.push_str("</table></section>");
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn values_keep_published_precision_and_group_thousands() {
        assert_eq!(value(87_835.0, "rt/s", true), "87,835 rt/s");
        assert_eq!(value(221.5, "µs", true), "221.5 µs");
        assert_eq!(value(142_500.0, "µs", true), "142.5 ms");
        assert_eq!(
            value(1_234_567.25, "packets/s", true),
            "1,234,567.25 packets/s"
        );
        assert_eq!(value(2_727.6, "rt/s", false), "2,728 rt/s");
        assert_eq!(grouped("-12345"), "-12,345");
    }
}
