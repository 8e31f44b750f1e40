//! A finished voice recording (draarl-v1 §5.3) and where its file goes.

use super::device::DeviceKey;

/// Duration of one Opus frame, ms (16 kHz, 960 samples).
pub(crate) const FRAME_MS: u64 = 60;

/// A finished recording.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Recording {
    /// Talker.
    pub device: DeviceKey,
    /// Talker's group while recording.
    pub group_id: i64,
    /// Wall-clock start, Unix ms.
    pub started_unix_ms: i64,
    /// Opus frames (merged packets already split).
    pub frames: Vec<Vec<u8>>,
}

impl Recording {
    /// Estimated length: frames × 60 ms.
    pub fn duration_ms(&self) -> u64 {
        self.frames.len() as u64 * FRAME_MS
    }
}

/// Relative path of a recording: `YYYY/MM/D/u<owner>s<ssid>_<YYYYMMDDTHHMMSSZ>.raw`
/// (UTC; month zero-padded, day not, as the reference's object keys).
/// Two recordings of one talker starting in the same second share it; the
/// writer then uses [`numbered_path`].
pub fn relative_path(r: &Recording) -> String {
    numbered_path(r, 0)
}

/// [`relative_path`] for `n = 0`, else with `-<n>` before `.raw`
/// (`u4s7_20240229T235959Z-1.raw`): the names the writer tries in turn,
/// creating each only if it does not exist yet.
pub fn numbered_path(r: &Recording, n: u32) -> String {
    let secs = r.started_unix_ms.div_euclid(1000);
    let (y, m, d) = civil_from_days(secs.div_euclid(86_400));
    let t = secs.rem_euclid(86_400);
    let suffix = if n == 0 {
        String::new()
    } else {
        format!("-{n}")
    };
    format!(
        "{y:04}/{m:02}/{d}/u{}s{}_{y:04}{m:02}{d:02}T{:02}{:02}{:02}Z{suffix}.raw",
        r.device.0,
        r.device.1,
        t / 3600,
        t % 3600 / 60,
        t % 60
    )
}

/// Gregorian date of a day count since 1970-01-01 (H. Hinnant's algorithm).
fn civil_from_days(z: i64) -> (i64, u32, u32) {
    let z = z + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = (doy - (153 * mp + 2) / 5 + 1) as u32;
    let m = if mp < 10 { mp + 3 } else { mp - 9 } as u32;
    (yoe + era * 400 + i64::from(m <= 2), m, d)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn paths_use_utc_dates() {
        let rec = Recording {
            device: (4, 7),
            group_id: 1,
            started_unix_ms: 1_709_251_199_000, // 2024-02-29T23:59:59Z
            frames: vec![],
        };
        assert_eq!(relative_path(&rec), "2024/02/29/u4s7_20240229T235959Z.raw");
        assert_eq!(
            numbered_path(&rec, 2),
            "2024/02/29/u4s7_20240229T235959Z-2.raw"
        );
        assert_eq!(civil_from_days(0), (1970, 1, 1));
        assert_eq!(civil_from_days(-1), (1969, 12, 31));
    }
}
