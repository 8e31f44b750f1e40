//! One range-checked configuration error, its message built from the range itself.
//!
//! Every crate validates numeric configuration the same way: a field, a value and an
//! inclusive range. Writing the allowed range by hand next to the constant that
//! enforces it lets the two drift apart; here the message renders the
//! [`RangeInclusive`] that was checked, so it cannot.
//!
//! Values and bounds are rendered with [`Debug`]: integers as
//! digits (`65536..=268435456`), floats as Rust prints them (`1e-9..=0.1`) and
//! [`Duration`]s with their unit (`1ms..=5s`). A unit that the
//! type does not carry (bytes, segments) is appended with [`check_range_in`]; a
//! duration the user gives in seconds renders in seconds with [`check_secs`].

use std::fmt::Debug;
use std::ops::RangeInclusive;
use std::time::Duration;

use thiserror::Error;

/// A configuration value outside its allowed inclusive range.
///
/// Displays as `{field} = {value} is outside {range}`, e.g.
/// `partitions = 0 is outside 1..=32` or `mtu = 20 bytes is outside 50..=65507 bytes`.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
#[error("{field} = {value} is outside {range}")]
pub struct RangeError {
    /// The field's name as the user writes it (TOML key, CLI flag or struct field).
    pub field: &'static str,
    /// The rejected value, rendered (with its unit, if one was given).
    pub value: String,
    /// The allowed range, rendered from the checked [`RangeInclusive`] (with its unit).
    pub range: String,
}

/// `Ok(())` if `range` contains `value`, else a [`RangeError`] naming `field`.
///
/// ```
/// use petrel_sys::range::check_range;
/// let e = check_range("writers", 0usize, &(1..=32)).unwrap_err();
/// assert_eq!(e.to_string(), "writers = 0 is outside 1..=32");
/// ```
///
/// # Errors
/// [`RangeError`] when `value` is below the start, above the end, or unordered
/// against them (a float NaN).
pub fn check_range<T: PartialOrd + Debug>(
    field: &'static str,
    value: T,
    range: &RangeInclusive<T>,
) -> Result<(), RangeError> {
    if range.contains(&value) {
        return Ok(());
    }
    Err(RangeError {
        field,
        value: format!("{value:?}"),
        range: format!("{:?}..={:?}", range.start(), range.end()),
    })
}

/// As [`check_range`], with `unit` after the value and after the range:
/// `mtu = 20 bytes is outside 50..=65507 bytes`.
///
/// # Errors
/// As [`check_range`].
pub fn check_range_in<T: PartialOrd + Debug>(
    field: &'static str,
    value: T,
    range: &RangeInclusive<T>,
    unit: &str,
) -> Result<(), RangeError> {
    check_range(field, value, range).map_err(|mut e| {
        e.value = format!("{} {unit}", e.value);
        e.range = format!("{} {unit}", e.range);
        e
    })
}

/// As [`check_range`] for a duration given in seconds (a CLI flag or config
/// key in s): value and bounds render as decimal seconds, not as
/// [`Duration`]'s `Debug` (`0ns`, `1ms..=3600s`):
/// `seconds = 0 s is outside 0.001..=3600 s`.
///
/// # Errors
/// As [`check_range`].
pub fn check_secs(
    field: &'static str,
    value: Duration,
    range: &RangeInclusive<Duration>,
) -> Result<(), RangeError> {
    check_range(field, value, range).map_err(|_| RangeError {
        field,
        value: format!("{} s", value.as_secs_f64()),
        range: format!(
            "{}..={} s",
            range.start().as_secs_f64(),
            range.end().as_secs_f64()
        ),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn accepts_both_bounds_and_rejects_outside() {
        let r = 65_536usize..=268_435_456;
        assert!(check_range("socket_buffer_bytes", 65_536, &r).is_ok());
        assert!(check_range("socket_buffer_bytes", 268_435_456, &r).is_ok());
        let e = check_range("socket_buffer_bytes", 1024, &r).unwrap_err();
        assert_eq!(
            e.to_string(),
            "socket_buffer_bytes = 1024 is outside 65536..=268435456"
        );
        assert_eq!((e.field, e.value.as_str()), ("socket_buffer_bytes", "1024"));
    }

    #[test]
    fn message_follows_the_range_not_hand_typed_text() {
        const WRITERS: RangeInclusive<usize> = 1..=32;
        let e = check_range("partitions", 0, &WRITERS).unwrap_err();
        assert_eq!(e.to_string(), "partitions = 0 is outside 1..=32");
        let e = check_range("partitions", 65, &(1..=64)).unwrap_err();
        assert_eq!(e.range, "1..=64");
    }

    #[test]
    fn units_floats_durations_and_nan() {
        let e = check_range_in("mtu", 20usize, &(50..=65_507), "bytes").unwrap_err();
        assert_eq!(e.to_string(), "mtu = 20 bytes is outside 50..=65507 bytes");
        let r = Duration::from_millis(1)..=Duration::from_secs(5);
        let e = check_range("interval", Duration::ZERO, &r).unwrap_err();
        assert_eq!(e.to_string(), "interval = 0ns is outside 1ms..=5s");
        let e = check_range("target", 0.5f64, &(1e-9..=0.1)).unwrap_err();
        assert_eq!(e.to_string(), "target = 0.5 is outside 1e-9..=0.1");
        assert!(check_range("target", f64::NAN, &(0.0..=1.0)).is_err());
    }

    #[test]
    fn seconds_render_as_decimal_seconds() {
        let r = Duration::from_millis(1)..=Duration::from_secs(3600);
        assert!(check_secs("seconds", Duration::from_millis(1), &r).is_ok());
        let e = check_secs("seconds", Duration::ZERO, &r).unwrap_err();
        assert_eq!(e.to_string(), "seconds = 0 s is outside 0.001..=3600 s");
        let e = check_secs("warmup", Duration::from_millis(3_600_500), &r).unwrap_err();
        assert_eq!(e.to_string(), "warmup = 3600.5 s is outside 0.001..=3600 s");
    }
}
