//! The edge's reconnect backoff after losing the centre
//! (draarl-interconnect §6.1, §3.6): 250 ms doubling per failed attempt up
//! to 5 s, each delay spread by ±20 % so that edges cut off together do not
//! reconnect in step, and back to 250 ms after a session that held.
//!
//! Petrel's choice beyond the reference: a session only resets the backoff
//! when it lasted [`STABLE_SESSION`] (two heartbeats). A session closed
//! within seconds (a second edge started with the same node token, whose
//! sessions keep replacing each other, §3.2 step 6) is treated as a failed
//! attempt, so two such edges back off to 5 s instead of reconnecting every
//! 250 ms and tripping the centre's per-IP hello limit.

use std::time::Duration;

/// The first delay.
pub const BACKOFF_INITIAL: Duration = Duration::from_millis(250);
/// The longest delay before jitter.
pub const BACKOFF_CAP: Duration = Duration::from_secs(5);
/// The spread of each delay, as a fraction (±20 %).
pub const BACKOFF_JITTER: f64 = 0.2;
/// How long a session must have lasted for its end to reset the backoff.
pub const STABLE_SESSION: Duration = Duration::from_secs(10);

/// Jittered exponential backoff; the caller supplies the randomness.
#[derive(Debug, Clone)]
pub struct ReconnectBackoff {
    next: Duration,
}

impl Default for ReconnectBackoff {
    fn default() -> Self {
        Self::new()
    }
}

impl ReconnectBackoff {
    /// Starts at [`BACKOFF_INITIAL`].
    pub fn new() -> Self {
        Self {
            next: BACKOFF_INITIAL,
        }
    }

    /// The delay before the next attempt, `base × (1 + 0.2 × spread)` with
    /// `spread` in −1..=1 (clamped), and doubles the base up to
    /// [`BACKOFF_CAP`].
    pub fn next_delay(&mut self, spread: f64) -> Duration {
        let base = self.next;
        self.next = (self.next * 2).min(BACKOFF_CAP);
        base.mul_f64(1.0 + BACKOFF_JITTER * spread.clamp(-1.0, 1.0))
    }

    /// After a session that lasted `lasted`: the next delay is
    /// [`BACKOFF_INITIAL`] again if it lasted at least [`STABLE_SESSION`];
    /// a shorter session leaves the backoff growing as after a failure.
    pub fn session_ended(&mut self, lasted: Duration) {
        if lasted >= STABLE_SESSION {
            self.next = BACKOFF_INITIAL;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn doubles_to_the_cap_with_jitter_and_resets_after_a_stable_session() {
        let mut b = ReconnectBackoff::new();
        let ms = |d: Duration| d.as_millis();
        let plain: Vec<_> = (0..7).map(|_| ms(b.next_delay(0.0))).collect();
        assert_eq!(plain, [250, 500, 1000, 2000, 4000, 5000, 5000]);
        assert_eq!(ms(b.next_delay(1.0)), 6000);
        assert_eq!(ms(b.next_delay(-1.0)), 4000);
        assert_eq!(ms(b.next_delay(-7.0)), 4000, "spread is clamped");
        b.session_ended(STABLE_SESSION - Duration::from_millis(1));
        assert_eq!(ms(b.next_delay(0.0)), 5000, "a short session is no success");
        b.session_ended(STABLE_SESSION);
        assert_eq!(ms(b.next_delay(0.5)), 275);
    }
}
