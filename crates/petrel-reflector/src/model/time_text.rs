//! Times as the app APIs write them (`specs/draarl-apps.md` §1.1): RFC 3339
//! in UTC with the fraction's trailing zeros trimmed, and the legacy
//! `YYYY-MM-DD HH:MM:SS`.

use std::time::{Duration, UNIX_EPOCH};

/// `unix_ms` as RFC 3339 UTC, e.g. `2026-08-05T12:00:00.123Z` (no fraction
/// when it is zero). Times before 1970 are written as 1970-01-01.
pub fn rfc3339_utc(unix_ms: i64) -> String {
    let at = UNIX_EPOCH + Duration::from_millis(u64::try_from(unix_ms).unwrap_or(0));
    let full = humantime::format_rfc3339_nanos(at).to_string();
    // `…SS.nnnnnnnnnZ`: trim the fraction's zeros, and the dot if nothing is left.
    match full.split_once('.') {
        Some((secs, frac)) => {
            let digits = frac.trim_end_matches('Z').trim_end_matches('0');
            if digits.is_empty() {
                format!("{secs}Z")
            } else {
                format!("{secs}.{digits}Z")
            }
        }
        None => full,
    }
}

/// `unix_ms` as `YYYY-MM-DD HH:MM:SS` (UTC), the legacy user-field form.
pub fn legacy_datetime(unix_ms: i64) -> String {
    let text = rfc3339_utc(unix_ms);
    text.get(..19).unwrap_or(&text).replacen('T', " ", 1)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fractions_are_trimmed() {
        assert_eq!(rfc3339_utc(0), "1970-01-01T00:00:00Z");
        assert_eq!(rfc3339_utc(1_785_931_200_123), "2026-08-05T12:00:00.123Z");
        assert_eq!(rfc3339_utc(1_785_931_200_100), "2026-08-05T12:00:00.1Z");
        assert_eq!(rfc3339_utc(1_785_931_260_000), "2026-08-05T12:01:00Z");
        assert_eq!(rfc3339_utc(-5), "1970-01-01T00:00:00Z");
        assert_eq!(legacy_datetime(1_785_931_200_123), "2026-08-05 12:00:00");
    }
}
