//! Where a record is charted and compared: its panel, its group within the
//! panel and its series, by benchmark kind.

use std::fmt::Write as _;

use super::published::parameter;
use super::svg::number;
use crate::ratios::case_shape;
use crate::record::ResultRecord;

/// The protocol of a record: `parameters.protocol`, else the benchmark name.
pub(super) fn protocol(r: &ResultRecord) -> String {
    r.parameters
        .get("protocol")
        .and_then(|p| p.as_str())
        .map_or_else(|| r.benchmark.clone(), str::to_owned)
}

/// The case shape shared across protocols, e.g. `1024B-4x16`: the case name
/// without its protocol prefix.
fn shape(r: &ResultRecord) -> String {
    let proto = protocol(r);
    r.case
        .strip_prefix(&format!("{proto}-"))
        .unwrap_or(&r.case)
        .to_owned()
}

pub(super) fn peer(r: &ResultRecord) -> String {
    r.parameters
        .get("peer")
        .and_then(|p| p.as_str())
        .unwrap_or("")
        .to_owned()
}

/// Values in first-seen order without repeats.
pub(super) fn ordered(values: impl Iterator<Item = String>) -> Vec<String> {
    let mut out: Vec<String> = Vec::new();
    for v in values {
        if !out.contains(&v) {
            out.push(v);
        }
    }
    out
}

/// Where a record is charted and compared.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) struct Placement {
    /// Panel: its own charts and value axis.
    pub panel: String,
    /// Group within the panel: one x position.
    pub group: String,
    /// Series: one bar colour per group.
    pub series: String,
    /// What the x positions are.
    pub x_label: &'static str,
    /// What the series are.
    pub legend: &'static str,
}

/// A fixed FEC group's shape as `D+P` (`parameters.fec_shape`), so 8+2 and 10+3
/// runs of one profile are separate bars.
fn fec_shape(r: &ResultRecord) -> Option<String> {
    let shape = r.parameters.get("fec_shape")?;
    let data = shape.get("data_shards")?.as_u64()?;
    let parity = shape.get("parity_shards")?.as_u64()?;
    Some(format!("{data}+{parity}"))
}

/// Where a record is charted: (panel, group within the panel, series).
/// Each panel gets its own charts and value axis, so a 1×1 case's p99 is not
/// dwarfed by a 4×16 one's: loopback echo has one panel per case shape with
/// a bar per protocol; RUDP through the emulator has one panel per shape,
/// grouped by impairment profile, with a bar per FEC mode (prefixed with the
/// peer's name for an external peer such as kcptun, suffixed with the runtime
/// layout when it is not one current-thread runtime, e.g. `arq sharded2`);
/// goodput has one panel per link (and loss or scenario, when set), grouped by
/// controller, with a bar per transport.
pub(super) fn placement(r: &ResultRecord) -> Placement {
    let param = |k: &str| r.parameters.get(k).and_then(|v| v.as_str());
    match (r.benchmark.as_str(), param("profile"), param("fec")) {
        ("rudp", Some(profile), Some(fec)) => {
            let fec = match (fec, fec_shape(r)) {
                ("none", _) => "arq".to_owned(),
                ("fixed", Some(shape)) => format!("fixed {shape}"),
                (fec, _) => fec.to_owned(),
            };
            let mut series = match peer(r).split(' ').next() {
                Some(name) if !name.is_empty() => format!("{name} {fec}"),
                _ => fec,
            };
            // A runtime layout other than one current-thread runtime is its own
            // series (the arknet matrix runs each case both ways), named as the
            // case name's suffix is.
            let threads = r.parameters.get("io_threads").and_then(|v| v.as_u64());
            match (param("io_model"), threads) {
                (Some("sharded"), Some(n)) => {
                    let _ = write!(series, " sharded{n}");
                }
                (_, Some(n)) if n > 1 => {
                    let _ = write!(series, " shared{n}");
                }
                _ => {}
            }
            let shape = case_shape(r).unwrap_or_else(|| shape(r));
            Placement {
                panel: format!("RUDP through the emulator, {shape}"),
                group: profile.to_owned(),
                series,
                x_label: "impairment profile",
                legend: "FEC mode (and runtime layout)",
            }
        }
        ("echo", _, _) => Placement {
            panel: format!("Loopback echo, {}", shape(r)),
            group: shape(r),
            series: protocol(r),
            x_label: "case shape (payload B-clients×window)",
            legend: "protocol",
        },
        // Case `<transport>-<cc>-<link>`: one panel per link, grouped by controller.
        (crate::goodput::BENCHMARK, _, _) => {
            let shape = shape(r);
            let (cc, link) = shape.split_once('-').unwrap_or(("", &shape));
            let mut panel = format!("Bulk goodput, {link}");
            if let Some(scenario) = parameter(r, "scenario").and_then(|s| s.as_str()) {
                let _ = write!(panel, ", scenario {scenario}");
            }
            if let Some(loss) = parameter(r, "loss")
                .and_then(serde_json::Value::as_f64)
                .filter(|l| *l > 0.0)
            {
                let _ = write!(panel, ", loss={}", number(loss));
            }
            Placement {
                panel,
                group: cc.to_owned(),
                series: protocol(r),
                x_label: "congestion controller",
                legend: "transport",
            }
        }
        _ => Placement {
            panel: r.benchmark.clone(),
            group: shape(r),
            series: protocol(r),
            x_label: "case",
            legend: "protocol",
        },
    }
}
