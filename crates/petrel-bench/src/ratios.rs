//! Ratios between cases measured side by side in one run: the figures that
//! stay comparable across machines (`specs/benchmarks.md`), unlike absolute
//! round trips/s.
//!
//! Two families:
//! - **RUDP against its baselines** (loopback echo, `benchmark = "echo"`): for
//!   each case shape (payload, clients × window) with a `rudp` result, RUDP's
//!   throughput and p99 RTT divided by those of every other protocol of that
//!   shape (raw UDP, tokio_kcp, quinn, TCP, WebSocket).
//! - **FEC against ARQ-only** (RUDP through the emulator, `benchmark =
//!   "rudp"`): for each impairment profile and shape, fixed and adaptive FEC
//!   divided by ARQ-only.
//! - **Petrel against kcptun** (`benchmark = "rudp"` with `parameters.peer`
//!   naming kcptun): for each impairment profile and shape, Petrel ARQ-only
//!   divided by kcptun without FEC, and each Petrel FEC case (fixed, adaptive)
//!   divided by each kcptun FEC shape, e.g. `random 1024B-4x16: rudp fec-fixed /
//!   kcptun 8+2`.
//!
//! Throughput ratios above 1 and p99 ratios below 1 favour the numerator.

use crate::record::ResultRecord;

/// One ratio row: `numerator / denominator` within one group of cases.
#[derive(Debug, Clone, PartialEq)]
pub struct Ratio {
    /// What the two cases share, e.g. `1024B-4x16` or `random 1024B-4x16`.
    pub group: String,
    /// The case in the numerator, e.g. `rudp` or `fec-adaptive`.
    pub numerator: String,
    /// The case in the denominator, e.g. `udp` or `arq`.
    pub denominator: String,
    /// Median round trips/s ratio.
    pub throughput: f64,
    /// Median p99 RTT ratio, when both cases recorded one.
    pub p99: Option<f64>,
}

fn param<'a>(r: &'a ResultRecord, key: &str) -> Option<&'a serde_json::Value> {
    r.parameters.get(key)
}

fn param_str(r: &ResultRecord, key: &str) -> Option<String> {
    param(r, key).and_then(|v| v.as_str()).map(str::to_owned)
}

/// `8+2` from a record's `fec_shape` parameter.
fn fec_shape(r: &ResultRecord) -> Option<String> {
    let shape = param(r, "fec_shape")?;
    let n = |k: &str| shape.get(k).and_then(serde_json::Value::as_u64);
    Some(format!("{}+{}", n("data_shards")?, n("parity_shards")?))
}

/// Whether a `rudp` record is a kcptun run (`parameters.peer` = `kcptun …`).
fn is_kcptun(r: &ResultRecord) -> bool {
    param_str(r, "peer").is_some_and(|p| p.starts_with("kcptun"))
}

/// The label of a `rudp` record within its group: Petrel's `arq`,
/// `fec-fixed` (8+2), `fec-fixed-10+3`, `fec-adaptive`; kcptun's `none` or its
/// shape (`8+2`).
fn rudp_label(r: &ResultRecord, fec: &str) -> String {
    let shape = fec_shape(r);
    match (is_kcptun(r), fec, shape.as_deref()) {
        (true, "none", _) => "none".to_owned(),
        (true, _, Some(shape)) => shape.to_owned(),
        (false, "none", _) => "arq".to_owned(),
        (false, "fixed", Some(shape)) if shape != "8+2" => format!("fec-fixed-{shape}"),
        (_, other, _) => format!("fec-{other}"),
    }
}

/// `1024B-4x16` from a record's payload, clients and window parameters.
pub(crate) fn case_shape(r: &ResultRecord) -> Option<String> {
    let n = |k: &str| param(r, k).and_then(serde_json::Value::as_u64);
    Some(format!(
        "{}B-{}x{}",
        n("payload")?,
        n("clients")?,
        n("window")?
    ))
}

fn median(r: &ResultRecord, key: &str) -> Option<f64> {
    r.summary.get(key).map(|s| s.median)
}

fn ratio(group: &str, num: (&str, &ResultRecord), den: (&str, &ResultRecord)) -> Option<Ratio> {
    let t_num = median(num.1, "round_trips_per_sec")?;
    let t_den = median(den.1, "round_trips_per_sec").filter(|t| *t > 0.0)?;
    let p99 = match (median(num.1, "rtt_p99_us"), median(den.1, "rtt_p99_us")) {
        (Some(a), Some(b)) if b > 0.0 => Some(a / b),
        _ => None,
    };
    Some(Ratio {
        group: group.to_owned(),
        numerator: num.0.to_owned(),
        denominator: den.0.to_owned(),
        throughput: t_num / t_den,
        p99,
    })
}

/// Every ratio the records allow, in record order (see the module docs).
pub fn ratios(records: &[ResultRecord]) -> Vec<Ratio> {
    let mut out = Vec::new();
    // (group, label, record) of both families.
    let mut echo: Vec<(String, String, &ResultRecord)> = Vec::new();
    let mut impaired: Vec<(String, String, &ResultRecord)> = Vec::new();
    let mut kcptun: Vec<(String, String, &ResultRecord)> = Vec::new();
    for r in records {
        let Some(shape) = case_shape(r) else { continue };
        match r.benchmark.as_str() {
            "echo" => {
                if let Some(p) = param_str(r, "protocol") {
                    echo.push((shape, p, r));
                }
            }
            "rudp" => {
                if let (Some(profile), Some(fec)) = (param_str(r, "profile"), param_str(r, "fec")) {
                    let entry = (format!("{profile} {shape}"), rudp_label(r, &fec), r);
                    if is_kcptun(r) {
                        kcptun.push(entry);
                    } else {
                        impaired.push(entry);
                    }
                }
            }
            _ => {}
        }
    }
    for (group, label, r) in &echo {
        if label != "rudp" {
            continue;
        }
        for (g, other, o) in &echo {
            if g == group && other != "rudp" {
                out.extend(ratio(group, ("rudp", r), (other, o)));
            }
        }
    }
    for (group, label, r) in &impaired {
        if label != "arq" {
            continue;
        }
        for (g, other, o) in &impaired {
            if g == group && other != "arq" {
                out.extend(ratio(group, (other, o), ("arq", r)));
            }
        }
    }
    for (group, label, r) in &impaired {
        for (g, other, o) in &kcptun {
            // ARQ against ARQ, FEC against FEC.
            if g == group && ((label == "arq") == (other == "none")) {
                out.extend(ratio(
                    group,
                    (&format!("rudp {label}"), r),
                    (&format!("kcptun {other}"), o),
                ));
            }
        }
    }
    out
}

/// Renders `ratios` as an aligned text table.
pub fn render(ratios: &[Ratio]) -> String {
    let rows: Vec<[String; 3]> = ratios
        .iter()
        .map(|r| {
            [
                format!("{}: {} / {}", r.group, r.numerator, r.denominator),
                format!("{:.2}", r.throughput),
                r.p99.map_or_else(|| "-".to_owned(), |p| format!("{p:.2}")),
            ]
        })
        .collect();
    let width = rows
        .iter()
        .map(|r| r[0].chars().count())
        .max()
        .unwrap_or(0)
        .max(5);
    let mut out = format!("{:<width$}  rt/s ratio  p99 ratio\n", "ratio");
    for [name, t, p] in rows {
        out.push_str(&format!("{name:<width$}  {t:>10}  {p:>9}\n"));
    }
    out.push_str(
        "(rt/s ratio above 1: the first is faster; p99 ratio below 1: its tail is shorter. \
         Raw UDP is a baseline: one datagram per system call, where RUDP batches.)\n",
    );
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::record::Spread;

    fn record(benchmark: &str, params: serde_json::Value, rt: f64, p99: f64) -> ResultRecord {
        let mut r = ResultRecord::begin(benchmark, "case", &params).unwrap();
        let spread = |v: f64| Spread::of(&[v]).unwrap();
        r.summary.insert("round_trips_per_sec".into(), spread(rt));
        r.summary.insert("rtt_p99_us".into(), spread(p99));
        r
    }

    fn echo(protocol: &str, clients: u64, rt: f64, p99: f64) -> ResultRecord {
        let p = serde_json::json!({"protocol": protocol, "payload": 1024, "clients": clients, "window": 16});
        record("echo", p, rt, p99)
    }

    fn rudp(profile: &str, fec: &str, rt: f64, p99: f64) -> ResultRecord {
        let p = serde_json::json!({"profile": profile, "fec": fec, "payload": 1024, "clients": 4, "window": 16});
        record("rudp", p, rt, p99)
    }

    #[test]
    fn rudp_against_each_baseline_of_its_shape_only() {
        let records = [
            echo("udp", 4, 1000.0, 100.0),
            echo("rudp", 4, 800.0, 150.0),
            echo("quic", 4, 400.0, 300.0),
            echo("udp", 1, 50.0, 10.0),
        ];
        let r = ratios(&records);
        assert_eq!(r.len(), 2);
        assert_eq!(
            (r[0].numerator.as_str(), r[0].denominator.as_str()),
            ("rudp", "udp")
        );
        assert_eq!(r[0].group, "1024B-4x16");
        assert!((r[0].throughput - 0.8).abs() < 1e-9);
        assert!((r[0].p99.unwrap() - 1.5).abs() < 1e-9);
        assert!((r[1].throughput - 2.0).abs() < 1e-9);
        assert!(render(&r).contains("1024B-4x16: rudp / quic        2.00"));
    }

    #[test]
    fn fec_against_arq_within_one_profile() {
        let records = [
            rudp("random", "none", 1000.0, 100.0),
            rudp("random", "adaptive", 2000.0, 50.0),
            rudp("burst", "fixed", 3000.0, 10.0),
        ];
        let r = ratios(&records);
        assert_eq!(r.len(), 1);
        assert_eq!(r[0].group, "random 1024B-4x16");
        assert_eq!(r[0].numerator, "fec-adaptive");
        assert!((r[0].throughput - 2.0).abs() < 1e-9);
        assert!((r[0].p99.unwrap() - 0.5).abs() < 1e-9);
    }

    fn kcptun(profile: &str, shape: Option<(u8, u8)>, rt: f64, p99: f64) -> ResultRecord {
        let (fec, fec_shape) = match shape {
            Some((d, p)) => (
                "fixed",
                serde_json::json!({"data_shards": d, "parity_shards": p}),
            ),
            None => ("none", serde_json::Value::Null),
        };
        let p = serde_json::json!({"peer": "kcptun 20210922", "profile": profile, "fec": fec,
            "fec_shape": fec_shape, "payload": 1024, "clients": 4, "window": 16});
        record("rudp", p, rt, p99)
    }

    #[test]
    fn petrel_against_kcptun_arq_with_arq_and_fec_with_fec() {
        let records = [
            rudp("random", "none", 1000.0, 100.0),
            rudp("random", "fixed", 3000.0, 40.0),
            rudp("burst", "adaptive", 2800.0, 30.0),
            kcptun("random", None, 500.0, 200.0),
            kcptun("random", Some((8, 2)), 1500.0, 80.0),
            kcptun("random", Some((10, 3)), 2000.0, 50.0),
            kcptun("burst", Some((10, 3)), 1400.0, 60.0),
        ];
        let r = ratios(&records);
        let names: Vec<String> = r
            .iter()
            .map(|r| format!("{}: {} / {}", r.group, r.numerator, r.denominator))
            .collect();
        assert_eq!(
            names,
            [
                "random 1024B-4x16: fec-fixed / arq",
                "random 1024B-4x16: rudp arq / kcptun none",
                "random 1024B-4x16: rudp fec-fixed / kcptun 8+2",
                "random 1024B-4x16: rudp fec-fixed / kcptun 10+3",
                "burst 1024B-4x16: rudp fec-adaptive / kcptun 10+3",
            ]
        );
        assert!((r[2].throughput - 2.0).abs() < 1e-9);
        assert!((r[2].p99.unwrap() - 0.5).abs() < 1e-9);
        assert!((r[4].throughput - 2.0).abs() < 1e-9);
    }

    #[test]
    fn zero_denominator_gives_no_ratio() {
        let records = [echo("udp", 4, 0.0, 0.0), echo("rudp", 4, 10.0, 0.0)];
        assert!(ratios(&records).is_empty());
    }
}
