//! Cases a run skipped (an external peer that is not installed), kept next to
//! the result files as `skipped.txt` so the report's summary can say what did
//! not run and why: one line per case, `<case>\t<reason>`.

use std::io::Write as _;
use std::path::Path;

use super::{io_error, ReportError, MAX_RECORDS};

/// File name of the skip list inside the results directory.
pub const SKIPPED_FILE: &str = "skipped.txt";

/// Longest case name or reason kept, characters; longer ones are cut.
const MAX_FIELD_CHARS: usize = 300;

/// A case that did not run.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Skipped {
    /// The case name it would have had, e.g. `rudp-kcptun-random-fec-fixed-1024B-4x16`.
    pub case: String,
    /// Why, e.g. `kcptun-client not found; install with apt install kcptun`.
    pub reason: String,
}

/// One field on one line: tabs and line breaks become spaces, at most
/// `MAX_FIELD_CHARS` characters.
fn one_line(text: &str) -> String {
    text.chars()
        .map(|c| if c.is_control() { ' ' } else { c })
        .take(MAX_FIELD_CHARS)
        .collect::<String>()
        .trim()
        .to_owned()
}

/// Appends `case` and `reason` to `dir/skipped.txt`.
///
/// # Errors
/// [`ReportError::Io`] when the file cannot be opened or written.
pub fn note_skipped(dir: &Path, case: &str, reason: &str) -> Result<(), ReportError> {
    let path = dir.join(SKIPPED_FILE);
    let mut file = std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(&path)
        .map_err(io_error("write", &path))?;
    writeln!(file, "{}\t{}", one_line(case), one_line(reason)).map_err(io_error("write", &path))
}

/// The skip list of `dir`: empty without a `skipped.txt`; blank lines are
/// ignored, a line without a tab is a case without a reason, and at most
/// [`MAX_RECORDS`] lines are read.
///
/// # Errors
/// [`ReportError::Io`] when the file exists but cannot be read.
pub fn load_skipped(dir: &Path) -> Result<Vec<Skipped>, ReportError> {
    let path = dir.join(SKIPPED_FILE);
    let text = match std::fs::read_to_string(&path) {
        Ok(text) => text,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(Vec::new()),
        Err(e) => return Err(io_error("read", &path)(e)),
    };
    Ok(text
        .lines()
        .filter(|l| !l.trim().is_empty())
        .take(MAX_RECORDS)
        .map(|line| {
            let (case, reason) = line.split_once('\t').unwrap_or((line, ""));
            Skipped {
                case: one_line(case),
                reason: match one_line(reason) {
                    r if r.is_empty() => "no reason given".to_owned(),
                    r => r,
                },
            }
        })
        .collect())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn notes_read_back_one_per_line() {
        let dir = std::env::temp_dir().join(format!("petrel-skipped-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        assert!(load_skipped(&dir).unwrap().is_empty());
        note_skipped(
            &dir,
            "rudp-kcptun-random",
            "kcptun-client not found\tinstall it",
        )
        .unwrap();
        note_skipped(&dir, "goodput-ngtcp2", "").unwrap();
        std::fs::OpenOptions::new()
            .append(true)
            .open(dir.join(SKIPPED_FILE))
            .unwrap()
            .write_all(b"\nbare-case\n")
            .unwrap();
        let skipped = load_skipped(&dir).unwrap();
        let _ = std::fs::remove_dir_all(&dir);
        assert_eq!(skipped.len(), 3);
        assert_eq!(skipped[0].case, "rudp-kcptun-random");
        assert_eq!(skipped[0].reason, "kcptun-client not found install it");
        assert_eq!(skipped[1].reason, "no reason given");
        assert_eq!(skipped[2].case, "bare-case");
    }
}
