//! kcptun's SNMP log (`--snmplog FILE --snmpperiod S`): every S seconds a CSV row
//! of kcp-go's process-wide counters (`Unix`, then `BytesSent` … `FECShortShards`),
//! cumulative since the process started, after a header row.
//!
//! kcptun reads the file name as a Go time layout, so digits and the layout words
//! (`Jan`, `Mon`, `MST`, `PM`, `pm`) in it would be replaced by the date:
//! [`snmp_path`] builds a name free of them, or refuses.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

/// Most bytes of an SNMP log read (a row is < 400 bytes; a round writes a few
/// dozen rows).
const MAX_LOG_BYTES: u64 = 1 << 20;
/// Most columns kept from a row (kcp-go writes 25).
const MAX_COLUMNS: usize = 64;
/// Go time-layout words that must not appear in a `--snmplog` name.
const LAYOUT_WORDS: [&str; 5] = ["Jan", "Mon", "MST", "PM", "pm"];

/// Where a child's SNMP log goes: `dir/<side>-snmp.csv`, or why it cannot.
///
/// # Errors
/// A message when the path holds a digit or a Go layout word.
pub fn snmp_path(dir: &Path, side: &str) -> Result<PathBuf, String> {
    let path = dir.join(format!("{side}-snmp.csv"));
    let text = path.to_string_lossy();
    let bad =
        text.chars().any(|c| c.is_ascii_digit()) || LAYOUT_WORDS.iter().any(|w| text.contains(w));
    if bad {
        return Err(format!(
            "SNMP log path {} holds digits or Go time-layout words, which kcptun would replace",
            path.display()
        ));
    }
    Ok(path)
}

/// Seconds since the Unix epoch now, as kcptun's `Unix` column.
pub fn unix_now() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_secs())
}

/// The last complete row of the SNMP log `text`, by column name; `None` without a
/// header and one row. Cells that are not unsigned integers are left out.
pub fn last_row(text: &str) -> Option<BTreeMap<String, u64>> {
    let mut lines = text.lines();
    let header: Vec<&str> = lines.next()?.split(',').take(MAX_COLUMNS).collect();
    // The writer may be midway through a row: take the last one with every cell.
    let last = lines.rfind(|l| l.split(',').count() == header.len())?;
    Some(
        header
            .iter()
            .zip(last.split(','))
            .filter_map(|(k, v)| Some(((*k).to_owned(), v.trim().parse().ok()?)))
            .collect(),
    )
}

fn read_log(path: &Path) -> Option<String> {
    use std::io::Read;
    let mut text = String::new();
    std::fs::File::open(path)
        .ok()?
        .take(MAX_LOG_BYTES)
        .read_to_string(&mut text)
        .ok()?;
    Some(text)
}

/// Waits at most `limit` for a row of `path` written after `after` (Unix
/// seconds), so it counts everything up to then.
///
/// # Errors
/// What was missing when the limit passed.
pub fn row_after(
    path: &Path,
    after: u64,
    limit: Duration,
) -> Result<BTreeMap<String, u64>, String> {
    let deadline = Instant::now() + limit;
    loop {
        let row = read_log(path).as_deref().and_then(last_row);
        match row {
            Some(r) if r.get("Unix").is_some_and(|&t| t > after) => return Ok(r),
            _ if Instant::now() >= deadline => {
                return Err(format!(
                    "no SNMP row after Unix time {after} in {} within {limit:?}",
                    path.display()
                ))
            }
            _ => std::thread::sleep(Duration::from_millis(50)),
        }
    }
}

/// The sum of column `key` over `rows` (both kcptun processes); `None` if a row
/// lacks it.
pub fn sum(rows: &[&BTreeMap<String, u64>], key: &str) -> Option<u64> {
    rows.iter().map(|r| r.get(key).copied()).sum()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn last_complete_row_by_column() {
        let text = "Unix,OutBytes,FECRecovered\n10,100,1\n11,250,3\n12,9";
        let row = last_row(text).unwrap();
        assert_eq!(row["Unix"], 11);
        assert_eq!(row["OutBytes"], 250);
        assert_eq!(row["FECRecovered"], 3);
        assert!(last_row("Unix,OutBytes\n").is_none());
        assert!(last_row("").is_none());
        // A cell that is not a count is left out, not guessed.
        assert!(!last_row("Unix,X\n1,-5\n").unwrap().contains_key("X"));
    }

    #[test]
    fn paths_kcptun_would_rewrite_are_refused() {
        assert!(snmp_path(Path::new("/tmp/petrel-kcptun-abc"), "client").is_ok());
        assert!(snmp_path(Path::new("/tmp/run7"), "client").is_err());
        assert!(snmp_path(Path::new("/tmp/Monday"), "server").is_err());
    }

    #[test]
    fn sums_need_every_row() {
        let a: BTreeMap<String, u64> = [("OutBytes".to_owned(), 5)].into();
        let b: BTreeMap<String, u64> = [("OutBytes".to_owned(), 7)].into();
        assert_eq!(sum(&[&a, &b], "OutBytes"), Some(12));
        assert_eq!(sum(&[&a, &b], "FECRecovered"), None);
    }
}
