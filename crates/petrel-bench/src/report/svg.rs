//! A small SVG writer for grouped bar charts with min/max error bars.
//!
//! Written here rather than taken from `plotters`: the report needs one chart
//! shape (grouped bars, whiskers, a legend, a linear axis from zero), and
//! emitting that as plain `<rect>`/`<line>`/`<text>` keeps the output
//! deterministic, testable by string search and free of font handling.

use std::fmt::Write as _;

/// Chart width (px).
const WIDTH: f64 = 1100.0;
/// Chart height (px).
const HEIGHT: f64 = 380.0;
const LEFT: f64 = 80.0;
const RIGHT: f64 = 20.0;
const TOP: f64 = 50.0;
const BOTTOM: f64 = 50.0;

/// Fill colours by series index (colour-blind-safe Okabe–Ito palette).
const PALETTE: [&str; 8] = [
    "#0072B2", "#E69F00", "#009E73", "#D55E00", "#CC79A7", "#56B4E9", "#F0E442", "#000000",
];

/// One bar: a series (protocol) within a group (case shape).
#[derive(Debug, Clone, PartialEq)]
pub struct Bar {
    /// Series name, e.g. `"quic"`; picks the colour.
    pub series: String,
    /// Bar height: the median.
    pub value: f64,
    /// Lower whisker.
    pub min: f64,
    /// Upper whisker.
    pub max: f64,
    /// Tooltip and `data-case` attribute.
    pub case: String,
}

/// Bars sharing an x position, e.g. every protocol at `1024B-4x16`.
#[derive(Debug, Clone, PartialEq)]
pub struct Group {
    /// Label under the group.
    pub label: String,
    /// Bars in series order.
    pub bars: Vec<Bar>,
}

/// What a chart's axes and legend say.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Axes<'a> {
    /// Unit of the value axis, e.g. `"round trips/s"`.
    pub unit: &'a str,
    /// What the groups along the x axis are, e.g. `"impairment profile"`.
    pub x_label: &'a str,
    /// What the series are, e.g. `"protocol"`: the legend's title.
    pub legend: &'a str,
}

/// Escapes text for XML/HTML content and attribute values.
pub fn escape(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for c in text.chars() {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '"' => out.push_str("&quot;"),
            '\'' => out.push_str("&#39;"),
            _ => out.push(c),
        }
    }
    out
}

/// A value with at most 3 significant decimals, e.g. `87835`, `221.5`, `0.42`.
pub fn number(v: f64) -> String {
    if v == 0.0 {
        "0".to_owned()
    } else if v.abs() >= 100.0 {
        format!("{v:.0}")
    } else if v.abs() >= 10.0 {
        format!("{v:.1}")
    } else {
        format!("{v:.2}")
    }
}

/// A "nice" axis maximum (1, 2 or 5 × 10ⁿ) at or above `v`.
fn nice_ceiling(v: f64) -> f64 {
    if !(v.is_finite() && v > 0.0) {
        return 1.0;
    }
    let magnitude = 10f64.powf(v.log10().floor());
    [1.0, 2.0, 5.0, 10.0]
        .iter()
        .map(|m| m * magnitude)
        .find(|&c| c >= v)
        .unwrap_or(10.0 * magnitude)
}

/// A grouped bar chart; `series` fixes legend order and colours. The value
/// axis is labelled with `axes.unit`, the x axis with `axes.x_label`, and the
/// legend (one swatch per series) is titled `axes.legend`.
pub fn bar_chart(title: &str, axes: &Axes<'_>, series: &[String], groups: &[Group]) -> String {
    let unit = axes.unit;
    let top_value = groups
        .iter()
        .flat_map(|g| &g.bars)
        .map(|b| b.max.max(b.value))
        .fold(0.0, f64::max);
    let axis_max = nice_ceiling(top_value);
    let plot_h = HEIGHT - TOP - BOTTOM;
    let plot_w = WIDTH - LEFT - RIGHT;
    let y = |v: f64| TOP + plot_h * (1.0 - (v / axis_max).clamp(0.0, 1.0));
    let mut s = String::new();
    let _ = write!(
        s,
        r#"<svg class="chart" width="{WIDTH}" height="{HEIGHT}" viewBox="0 0 {WIDTH} {HEIGHT}" font-family="sans-serif" role="img" aria-label="{t}"><title>{t}</title>"#,
        t = escape(title)
    );
    let _ = write!(
        s,
        r#"<text x="{LEFT}" y="20" font-size="16" font-weight="bold">{}</text>"#,
        escape(title)
    );
    for i in 0..=5 {
        let v = axis_max * f64::from(i) / 5.0;
        let yy = y(v);
        let _ = write!(
            s,
            r##"<line x1="{LEFT}" x2="{}" y1="{yy:.1}" y2="{yy:.1}" stroke="#ddd"/><text x="{}" y="{:.1}" font-size="11" text-anchor="end">{}</text>"##,
            WIDTH - RIGHT,
            LEFT - 6.0,
            yy + 4.0,
            number(v)
        );
    }
    let _ = write!(
        s,
        r#"<text x="16" y="{:.1}" font-size="12" transform="rotate(-90 16 {:.1})" text-anchor="middle">{}</text>"#,
        TOP + plot_h / 2.0,
        TOP + plot_h / 2.0,
        escape(unit)
    );
    let _ = write!(
        s,
        r#"<text class="x-label" x="{:.1}" y="{:.1}" font-size="12" text-anchor="middle">{}</text>"#,
        LEFT + plot_w / 2.0,
        HEIGHT - 8.0,
        escape(axes.x_label)
    );
    let _ = write!(
        s,
        r#"<g class="legend"><text x="{LEFT}" y="41" font-size="12" font-weight="bold">{}:</text>"#,
        escape(axes.legend)
    );
    let legend_x = LEFT + 8.0 * axes.legend.chars().count() as f64 + 16.0;
    for (i, name) in series.iter().enumerate() {
        let x = legend_x + 120.0 * i as f64;
        let _ = write!(
            s,
            r#"<rect x="{x:.1}" y="30" width="12" height="12" fill="{}"/><text x="{:.1}" y="41" font-size="12">{}</text>"#,
            PALETTE[i % PALETTE.len()],
            x + 16.0,
            escape(name)
        );
    }
    s.push_str("</g>");
    let group_w = plot_w / groups.len().max(1) as f64;
    for (gi, group) in groups.iter().enumerate() {
        let gx = LEFT + group_w * gi as f64;
        let bar_w = (group_w * 0.8 / series.len().max(1) as f64).min(60.0);
        let used = bar_w * group.bars.len() as f64;
        let mut x = gx + (group_w - used) / 2.0;
        for bar in &group.bars {
            let colour = series
                .iter()
                .position(|n| *n == bar.series)
                .map_or("#888", |i| PALETTE[i % PALETTE.len()]);
            let top = y(bar.value);
            let _ = write!(
                s,
                r#"<rect class="bar" data-case="{c}" x="{x:.1}" y="{top:.1}" width="{w:.1}" height="{h:.1}" fill="{colour}"><title>{c}: {v} {u} (min {lo}, max {hi})</title></rect>"#,
                c = escape(&bar.case),
                w = bar_w * 0.9,
                h = (TOP + plot_h - top).max(0.0),
                v = number(bar.value),
                u = escape(unit),
                lo = number(bar.min),
                hi = number(bar.max),
            );
            let cx = x + bar_w * 0.45;
            let (y_lo, y_hi) = (y(bar.min), y(bar.max));
            let _ = write!(
                s,
                r##"<g class="whisker" stroke="#222"><line x1="{cx:.1}" x2="{cx:.1}" y1="{y_lo:.1}" y2="{y_hi:.1}"/><line x1="{:.1}" x2="{:.1}" y1="{y_lo:.1}" y2="{y_lo:.1}"/><line x1="{:.1}" x2="{:.1}" y1="{y_hi:.1}" y2="{y_hi:.1}"/></g>"##,
                cx - 4.0,
                cx + 4.0,
                cx - 4.0,
                cx + 4.0
            );
            let _ = write!(
                s,
                r#"<text class="value" x="{cx:.1}" y="{:.1}" font-size="10" text-anchor="middle">{}</text>"#,
                y_hi.min(top) - 4.0,
                number(bar.value)
            );
            x += bar_w;
        }
        let _ = write!(
            s,
            r#"<text x="{:.1}" y="{:.1}" font-size="12" text-anchor="middle">{}</text>"#,
            gx + group_w / 2.0,
            HEIGHT - BOTTOM + 20.0,
            escape(&group.label)
        );
    }
    let _ = write!(
        s,
        r##"<line x1="{LEFT}" x2="{}" y1="{b:.1}" y2="{b:.1}" stroke="#000"/></svg>"##,
        WIDTH - RIGHT,
        b = TOP + plot_h
    );
    s
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn nice_ceilings() {
        assert_eq!(nice_ceiling(87_835.0), 100_000.0);
        assert_eq!(nice_ceiling(221.5), 500.0);
        assert_eq!(nice_ceiling(0.0), 1.0);
        assert_eq!(nice_ceiling(f64::NAN), 1.0);
        assert_eq!(nice_ceiling(2.0), 2.0);
    }

    #[test]
    fn escapes_markup() {
        assert_eq!(
            escape(r#"<a href="x">&'"#),
            "&lt;a href=&quot;x&quot;&gt;&amp;&#39;"
        );
    }

    #[test]
    fn one_rect_and_whisker_per_bar() {
        let bar = |series: &str, v: f64| Bar {
            series: series.to_owned(),
            value: v,
            min: v * 0.9,
            max: v * 1.1,
            case: format!("{series}-case"),
        };
        let groups = [
            Group {
                label: "g1".into(),
                bars: vec![bar("udp", 100.0), bar("quic", 50.0)],
            },
            Group {
                label: "g2".into(),
                bars: vec![bar("udp", 10.0)],
            },
        ];
        let axes = Axes {
            unit: "rt/s",
            x_label: "case shape",
            legend: "protocol",
        };
        let svg = bar_chart("T <1>", &axes, &["udp".into(), "quic".into()], &groups);
        assert_eq!(svg.matches(r#"class="bar""#).count(), 3);
        assert_eq!(svg.matches(r#"class="whisker""#).count(), 3);
        assert!(svg.contains("T &lt;1&gt;"));
        assert!(svg.contains(">100<") && svg.contains(">50.0<"));
        assert!(svg.contains(r#"class="x-label""#) && svg.contains(">case shape</text>"));
        assert!(svg.contains(">protocol:</text>"));
        let legend = &svg[svg.find(r#"<g class="legend">"#).unwrap()..];
        let legend = &legend[..legend.find("</g>").unwrap()];
        assert!(legend.contains(">udp<") && legend.contains(">quic<"));
    }
}
