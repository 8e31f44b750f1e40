//! A sans-IO pacer: a token bucket in bytes refilled at the controller's pacing rate
//! and holding at most one send quantum, so bursts are bounded by the quantum
//! (draft-ietf-ccwg-bbr "Pacing Rate" and "Send Quantum"; RFC 9002 §7.7).
//!
//! Credit is kept in byte·nanoseconds so refills at any rate lose no fraction and the
//! release time of the next datagram is exact to the nanosecond; the caller sleeps
//! until that instant, not a fixed tick.

use std::time::{Duration, Instant};

const NANOS_PER_SEC: u128 = 1_000_000_000;

/// Token bucket in bytes. Starts full, so the first quantum after creation or after
/// an idle period goes out at once.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Pacer {
    /// Credit in bytes × 10⁹ (byte·ns per second of rate).
    credit: u128,
    last: Option<Instant>,
}

impl Pacer {
    /// A full pacer.
    pub fn new() -> Self {
        Self::default()
    }

    /// Whether `bytes` may be sent at `now` at `rate` bytes/s with bursts of at most
    /// `quantum` bytes (at least one datagram). `Ok` consumes the credit; `Err` gives
    /// the instant at which the credit will suffice. A `rate` of 0 never releases
    /// anything before one second per byte; callers that do not pace do not call this.
    ///
    /// # Errors
    /// The release instant when the bucket holds less than `bytes`.
    pub fn try_send(
        &mut self,
        now: Instant,
        bytes: u64,
        rate: u64,
        quantum: u64,
    ) -> Result<(), Instant> {
        let rate = u128::from(rate.max(1));
        let cap = u128::from(quantum.max(bytes)) * NANOS_PER_SEC;
        self.credit = match self.last {
            None => cap,
            Some(last) => {
                let elapsed = now.saturating_duration_since(last).as_nanos();
                self.credit
                    .saturating_add(elapsed.saturating_mul(rate))
                    .min(cap)
            }
        };
        if self.last.is_none_or(|last| now > last) {
            self.last = Some(now);
        }
        let need = u128::from(bytes) * NANOS_PER_SEC;
        if self.credit >= need {
            self.credit -= need;
            return Ok(());
        }
        let wait_ns = (need - self.credit).div_ceil(rate);
        let wait = Duration::from_nanos(u64::try_from(wait_ns).unwrap_or(u64::MAX));
        Err(now
            .checked_add(wait)
            .unwrap_or(now + Duration::from_secs(3600)))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn releases_a_quantum_then_paces_at_the_rate() {
        let t0 = Instant::now();
        let mut p = Pacer::new();
        let rate = 1_000_000; // 1 MB/s: 1000 bytes per ms
        for _ in 0..3 {
            assert_eq!(p.try_send(t0, 1000, rate, 3000), Ok(()));
        }
        let next = p.try_send(t0, 1000, rate, 3000).unwrap_err();
        assert_eq!(next, t0 + Duration::from_millis(1));
        assert!(p
            .try_send(next - Duration::from_nanos(1), 1000, rate, 3000)
            .is_err());
        assert_eq!(p.try_send(next, 1000, rate, 3000), Ok(()));
        // Over a long run the average rate is exact.
        let mut now = next;
        let mut sent = 0u64;
        while now < t0 + Duration::from_secs(1) {
            match p.try_send(now, 1000, rate, 3000) {
                Ok(()) => sent += 1000,
                Err(at) => now = at,
            }
        }
        assert!((997_000..=1_001_000).contains(&sent), "{sent}");
    }

    #[test]
    fn idle_refills_only_to_one_quantum() {
        let t0 = Instant::now();
        let mut p = Pacer::new();
        assert_eq!(p.try_send(t0, 1000, 1000, 2000), Ok(()));
        let later = t0 + Duration::from_secs(3600);
        assert_eq!(p.try_send(later, 1000, 1000, 2000), Ok(()));
        assert_eq!(p.try_send(later, 1000, 1000, 2000), Ok(()));
        assert!(p.try_send(later, 1000, 1000, 2000).is_err());
    }

    #[test]
    fn extreme_inputs_do_not_overflow() {
        let t0 = Instant::now();
        let mut p = Pacer::new();
        assert_eq!(p.try_send(t0, u64::MAX, u64::MAX, u64::MAX), Ok(()));
        let later = t0 + Duration::from_secs(1 << 40);
        assert_eq!(p.try_send(later, 1, u64::MAX, u64::MAX), Ok(()));
        let at = p.try_send(t0, u64::MAX, 0, 0).unwrap_err();
        assert!(at > t0);
    }
}
