//! The merge of one case's per-round records (one process per round) into
//! the case's record: rounds concatenated, min/median/max recomputed.

use std::collections::BTreeMap;

use super::MatrixError;
use crate::record::{ResultRecord, Spread};

/// The numeric top-level fields of one round's figures (not its index).
fn round_figures(round: &serde_json::Value) -> Vec<(String, f64)> {
    round.as_object().map_or_else(Vec::new, |obj| {
        obj.iter()
            .filter(|(k, _)| k.as_str() != "round")
            .filter_map(|(k, v)| Some((k.clone(), v.as_f64()?)))
            .collect()
    })
}

/// Merges the single-round records of one case (in round order, one per
/// seed) into one record: rounds concatenated (each tagged with its index,
/// seed and the command that produced it), min/median/max recomputed across
/// rounds (of each part's summary medians; for a part without a summary, of
/// its round's numeric fields), errors summed, peak RSS the largest, `ok` only if every round was.
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
        if part.summary.is_empty() {
            // A benchmark that keeps no summary (a reflector stage): its
            // round's numbers are the figures.
            for (key, v) in round_figures(&part.rounds[0]) {
                figures.entry(key).or_default().push(v);
            }
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
    fn rounds_without_a_summary_merge_their_numeric_fields() {
        let stage = |pps: f64| {
            let mut r =
                ResultRecord::begin("reflector", "reflector-1g-20ms", &serde_json::json!({}))
                    .unwrap();
            r.push_round(
                &serde_json::json!({"round": 0, "output_pps": pps, "server_process": "child"}),
            )
            .unwrap();
            r.ok = true;
            r
        };
        let m = merge_rounds(&[stage(30.0), stage(10.0), stage(20.0)], &[1, 2, 3]).unwrap();
        let s = m.summary["output_pps"];
        assert_eq!((s.min, s.median, s.max), (10.0, 20.0, 30.0));
        assert_eq!(m.summary.len(), 1, "{:?}", m.summary);
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
