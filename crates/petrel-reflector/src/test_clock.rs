//! The time origin of the unit tests: the one clock read they make, kept
//! out of the sans-IO layers so those contain none at all. Tests then move
//! time forward by adding durations.

use std::time::Instant;

/// An arbitrary starting instant for a simulated clock.
pub(crate) fn origin() -> Instant {
    Instant::now()
}
