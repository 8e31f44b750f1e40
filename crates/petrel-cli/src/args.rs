//! Shared checks of command-line values: numbers with their unit and range,
//! and the `--json FILE` output target.
//!
//! A bad number's error quotes the input as the user typed it, cut to
//! [`QUOTE_MAX`] characters, followed by the accepted range. Clap's own
//! value errors quote the input in full, and a parsed `f64` printed back
//! turns `1e300` into 301 digits; [`Quoted`] avoids both.

use std::ffi::OsStr;
use std::fmt::Display;
use std::path::Path;
use std::str::FromStr;
use std::time::Duration;

use clap::builder::TypedValueParser;
use clap::error::ErrorKind;

/// Longest input (characters) quoted in full in an error message.
const QUOTE_MAX: usize = 40;

/// `input` in quotes, cut to [`QUOTE_MAX`] characters with its length noted.
pub(crate) fn quote(input: &str) -> String {
    let len = input.chars().count();
    if len <= QUOTE_MAX {
        format!("'{input}'")
    } else {
        let head: String = input.chars().take(QUOTE_MAX).collect();
        format!("'{head}…' ({len} characters)")
    }
}

/// A clap value parser from a function whose error says what is accepted
/// (e.g. `must be in 0..=100 %`); the message names the flag and quotes the
/// input with [`quote`]. Clap exits with status 2, like every usage error.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Quoted<T>(pub(crate) fn(&str) -> Result<T, String>);

impl<T: Clone + Send + Sync + 'static> TypedValueParser for Quoted<T> {
    type Value = T;

    fn parse_ref(
        &self,
        cmd: &clap::Command,
        arg: Option<&clap::Arg>,
        value: &OsStr,
    ) -> Result<T, clap::Error> {
        let text = value.to_string_lossy();
        (self.0)(&text).map_err(|reason| value_error(cmd, arg, &text, &reason))
    }
}

/// A clap value parser for a whole number in `min..=max`, with the error
/// of [`Quoted`]. Clap's own integer parsers quote the input in full, and
/// twice with a range.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Whole<T> {
    min: T,
    max: T,
}

impl<T> Whole<T> {
    /// Values in `min..=max`.
    pub(crate) const fn new(min: T, max: T) -> Self {
        Self { min, max }
    }
}

/// The full range of an integer type, for flags whose narrower range the
/// benchmark's config checks (and names) itself.
pub(crate) trait FullRange: Sized {
    /// `Whole::new(T::MIN, T::MAX)`.
    fn full_range() -> Whole<Self>;
}

macro_rules! full_range {
    ($($t:ty),*) => {$(
        impl FullRange for $t {
            fn full_range() -> Whole<Self> {
                Whole::new(<$t>::MIN, <$t>::MAX)
            }
        }
    )*};
}
full_range!(u32, u64, usize);

impl<T> TypedValueParser for Whole<T>
where
    T: FromStr + PartialOrd + Display + Copy + Send + Sync + 'static,
{
    type Value = T;

    fn parse_ref(
        &self,
        cmd: &clap::Command,
        arg: Option<&clap::Arg>,
        value: &OsStr,
    ) -> Result<T, clap::Error> {
        let text = value.to_string_lossy();
        match text.parse::<T>() {
            Ok(v) if self.min <= v && v <= self.max => Ok(v),
            _ => Err(value_error(
                cmd,
                arg,
                &text,
                &format!("must be a whole number in {}..={}", self.min, self.max),
            )),
        }
    }
}

/// `invalid value '<input>' for '--flag <VALUE>': <reason>`, exit status 2.
fn value_error(
    cmd: &clap::Command,
    arg: Option<&clap::Arg>,
    text: &str,
    reason: &str,
) -> clap::Error {
    let flag = arg.map_or_else(|| "a value".to_owned(), |a| format!("'{a}'"));
    let msg = format!("invalid value {} for {flag}: {reason}\n", quote(text));
    clap::Error::raw(ErrorKind::ValueValidation, msg).with_cmd(cmd)
}

/// A finite number in `min..=max`, after removing one trailing `suffix`
/// (the unit, e.g. `ms`; empty for none).
fn real(s: &str, suffix: &str, min: f64, max: f64, unit: &str) -> Result<f64, String> {
    let number = s.strip_suffix(suffix).unwrap_or(s);
    match number.parse::<f64>() {
        Ok(v) if v.is_finite() && (min..=max).contains(&v) => Ok(v),
        Ok(_) => Err(format!("must be in {min}..={max} {unit}")),
        Err(_) => Err(format!("not a number; must be in {min}..={max} {unit}")),
    }
}

/// Seconds for benchmark durations, 0..=86400 (a day); the benchmark's own
/// config then applies its narrower range (e.g. measured time > 0).
pub(crate) fn bench_seconds(s: &str) -> Result<Duration, String> {
    real(s, "", 0.0, 86_400.0, "s").map(Duration::from_secs_f64)
}

/// Seconds of an interval that must tick, 0.01..=86400, an optional `s` suffix.
pub(crate) fn seconds(s: &str) -> Result<Duration, String> {
    real(s, "s", 0.01, 86_400.0, "s").map(Duration::from_secs_f64)
}

/// Milliseconds of delay, 0..=60000, an optional `ms` suffix.
pub(crate) fn millis(s: &str) -> Result<Duration, String> {
    real(s, "ms", 0.0, 60_000.0, "ms").map(|ms| Duration::from_secs_f64(ms / 1e3))
}

/// A percentage 0..=100 (optional `%`), returned as a fraction 0..=1.
pub(crate) fn percent(s: &str) -> Result<f64, String> {
    real(s, "%", 0.0, 100.0, "% (a percentage)").map(|p| p / 100.0)
}

/// Mbit/s of a link rate, 1..=10000.
pub(crate) fn mbit_per_s(s: &str) -> Result<f64, String> {
    real(s, "", 1.0, 10_000.0, "Mbit/s")
}

/// Milliseconds of an emulated one-way delay, 0..=1000.
pub(crate) fn link_delay_ms(s: &str) -> Result<f64, String> {
    real(s, "", 0.0, 1_000.0, "ms")
}

/// Megabytes (10^6 bytes) to transfer, 0.000001..=100000.
pub(crate) fn megabytes(s: &str) -> Result<f64, String> {
    real(s, "", 1e-6, 1e5, "MB")
}

/// Fails before a run, not after it, when `--json` names something the
/// result cannot be written to (the result is only written at the end):
/// anything that exists and is not a regular file (a FIFO would block the
/// write, a device or directory would swallow or refuse it), or a path that
/// cannot be created. `-` means stdout. Creates a missing file and leaves
/// an existing one as it is until the result replaces it.
pub(crate) fn check_json_target(path: Option<&Path>) -> Result<(), String> {
    let Some(p) = path.filter(|p| p.as_os_str() != "-") else {
        return Ok(());
    };
    let shown = p.display();
    match std::fs::metadata(p) {
        Ok(meta) if !meta.is_file() => {
            return Err(format!(
                "invalid --json {shown}: not a regular file (use a file path or `-` for stdout)"
            ));
        }
        Ok(_) => {}
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
        Err(e) => return Err(format!("invalid --json {shown}: {e}")),
    }
    std::fs::OpenOptions::new()
        .append(true)
        .create(true)
        .open(p)
        .map(drop)
        .map_err(|e| format!("invalid --json {shown}: cannot write: {e}"))
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    #[test]
    fn long_inputs_are_cut_and_numbers_never_reformatted() {
        let digits = "9".repeat(300);
        let quoted = quote(&digits);
        assert!(quoted.len() < 70, "{quoted}");
        assert!(quoted.contains("(300 characters)"), "{quoted}");
        assert_eq!(quote("1e300"), "'1e300'");
        let err = bench_seconds("1e300").unwrap_err();
        assert_eq!(err, "must be in 0..=86400 s");
        assert_eq!(
            percent("1e300").unwrap_err(),
            "must be in 0..=100 % (a percentage)"
        );
    }

    #[test]
    fn whole_numbers_name_the_range_and_cut_the_input() {
        let mut cmd = clap::Command::new("t").arg(clap::Arg::new("n").long("n").value_name("N"));
        cmd.build();
        let arg = cmd.get_arguments().next();
        let parser = Whole::<u32>::new(1, 65_536);
        assert_eq!(parser.parse_ref(&cmd, arg, OsStr::new("512")).unwrap(), 512);
        let digits = "9".repeat(300);
        for bad in ["0", "65537", "-1", "1e3", digits.as_str()] {
            let err = parser
                .parse_ref(&cmd, arg, OsStr::new(bad))
                .unwrap_err()
                .to_string();
            assert!(err.contains("must be a whole number in 1..=65536"), "{err}");
            assert!(err.contains("'--n <N>'"), "{err}");
            assert!(err.len() < 200, "{err}");
        }
    }

    #[test]
    fn ranges_and_units() {
        assert_eq!(millis("250ms"), Ok(Duration::from_millis(250)));
        assert_eq!(percent("5%"), Ok(0.05));
        assert_eq!(seconds("2s"), Ok(Duration::from_secs(2)));
        assert_eq!(bench_seconds("0"), Ok(Duration::ZERO));
        for bad in ["-1", "NaN", "inf", "", "abc", "60001"] {
            assert!(millis(bad).is_err(), "{bad}");
        }
        assert!(seconds("0").is_err());
        assert!(megabytes("0").is_err());
    }

    #[test]
    fn json_target_must_be_a_regular_file_or_stdout() {
        assert_eq!(check_json_target(None), Ok(()));
        assert_eq!(check_json_target(Some(Path::new("-"))), Ok(()));
        let dir = std::env::temp_dir();
        let err = check_json_target(Some(&dir)).unwrap_err();
        assert!(err.contains("not a regular file"), "{err}");
        let err = check_json_target(Some(Path::new("/dev/null"))).unwrap_err();
        assert!(err.contains("not a regular file"), "{err}");
        // Opening a FIFO for writing blocks until a reader appears: refused
        // before any open.
        let fifo = dir.join(format!("petrel-json-fifo-{}", std::process::id()));
        let made = std::process::Command::new("mkfifo")
            .arg(&fifo)
            .status()
            .unwrap();
        assert!(made.success());
        let err = check_json_target(Some(&fifo)).unwrap_err();
        std::fs::remove_file(&fifo).unwrap();
        assert!(err.contains("not a regular file"), "{err}");
        let file = dir.join(format!("petrel-json-target-{}.json", std::process::id()));
        assert_eq!(check_json_target(Some(&file)), Ok(()));
        assert!(file.is_file());
        std::fs::remove_file(&file).unwrap();
    }
}
