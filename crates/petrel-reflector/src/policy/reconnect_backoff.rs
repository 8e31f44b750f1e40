//! The edge's reconnect backoff after losing the centre
//! (draarl-interconnect §6.1, §3.6): 250 ms doubling per failed attempt up
//! to 5 s, each delay spread by ±20 % so that edges cut off together do not
//! reconnect in step, and back to 250 ms after a successful handshake.

use std::time::Duration;

/// The first delay.
pub const BACKOFF_INITIAL: Duration = Duration::from_millis(250);
/// The longest delay before jitter.
pub const BACKOFF_CAP: Duration = Duration::from_secs(5);
/// The spread of each delay, as a fraction (±20 %).
pub const BACKOFF_JITTER: f64 = 0.2;

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

    /// After a successful handshake: the next delay is
    /// [`BACKOFF_INITIAL`] again.
    pub fn reset(&mut self) {
        self.next = BACKOFF_INITIAL;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn doubles_to_the_cap_with_jitter_and_resets() {
        let mut b = ReconnectBackoff::new();
        let ms = |d: Duration| d.as_millis();
        let plain: Vec<_> = (0..7).map(|_| ms(b.next_delay(0.0))).collect();
        assert_eq!(plain, [250, 500, 1000, 2000, 4000, 5000, 5000]);
        assert_eq!(ms(b.next_delay(1.0)), 6000);
        assert_eq!(ms(b.next_delay(-1.0)), 4000);
        assert_eq!(ms(b.next_delay(-7.0)), 4000, "spread is clamped");
        b.reset();
        assert_eq!(ms(b.next_delay(0.5)), 275);
    }
}
