//! The wall clock, for Type 3 time sync, recordings and history pruning.

/// The wall clock, Unix ms (0 before 1970; saturates).
pub(super) fn unix_ms() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| i64::try_from(d.as_millis()).unwrap_or(i64::MAX))
}
