//! The one error every config section reports: a value outside its range,
//! named by its TOML key.

use thiserror::Error;

/// A configuration value outside its allowed range.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
#[error("{field} = {value} is outside {range}")]
pub struct ConfigRangeError {
    /// Field name as written in the TOML file.
    pub field: &'static str,
    /// The rejected value.
    pub value: String,
    /// Allowed range, human-readable.
    pub range: &'static str,
}

/// `Ok` if `lo <= value <= hi`, else the error naming `field` and `range`.
pub(crate) fn check<T: PartialOrd + std::fmt::Display>(
    field: &'static str,
    value: T,
    lo: T,
    hi: T,
    range: &'static str,
) -> Result<(), ConfigRangeError> {
    if value < lo || value > hi {
        return Err(ConfigRangeError {
            field,
            value: value.to_string(),
            range,
        });
    }
    Ok(())
}
