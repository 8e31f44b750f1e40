//! A budget that caps busy-polling before deadlines at a share of wall time.
//!
//! Spinning buys precision (no wake-up overshoot) but at high packet rates deadlines
//! are closer together than the spin window, and an uncapped spin would hold a whole
//! core — which on a machine with few, shared cores (or under real-time throttling,
//! which stops a thread at 95 % of a core) turns into multi-ms stalls, far worse than
//! the tens-of-µs overshoot of a plain sleep. Credit accrues at 1/[`SHARE`] of the time spent
//! not spinning and is spent by spinning, so spinning stays near 1/(SHARE+1) of a
//! core; dense traffic falls back to sleeping, sparse traffic keeps exact timing.

use std::time::{Duration, Instant};

/// Credit accrues at 1/SHARE of non-spinning time.
pub(crate) const SHARE: u32 = 10;
/// Most credit kept, so a long idle period does not buy a long spin.
const MAX_CREDIT: Duration = Duration::from_millis(10);

#[derive(Debug)]
pub(crate) struct SpinBudget {
    credit: Duration,
    last: Option<Instant>,
    spinning: bool,
}

impl SpinBudget {
    pub(crate) fn new() -> Self {
        Self {
            credit: MAX_CREDIT,
            last: None,
            spinning: false,
        }
    }

    /// Accounts the time since the previous call as spinning or not, as last declared.
    pub(crate) fn advance(&mut self, now: Instant) {
        if let Some(last) = self.last {
            let dt = now.saturating_duration_since(last);
            self.credit = if self.spinning {
                self.credit.saturating_sub(dt)
            } else {
                (self.credit + dt / SHARE).min(MAX_CREDIT)
            };
        }
        self.last = Some(now);
    }

    /// How long to sleep when the next deadline is `left` away (`None`: no deadline)
    /// and the spin window is `spin`; records whether the time until the next
    /// [`SpinBudget::advance`] is spin.
    pub(crate) fn sleep_for(&mut self, left: Option<Duration>, spin: Duration) -> Option<Duration> {
        let spin = if self.credit.is_zero() {
            Duration::ZERO
        } else {
            spin
        };
        let sleep = left.map(|l| l.saturating_sub(spin));
        self.spinning = sleep.is_some_and(|s| s.is_zero()) && left.is_some_and(|l| !l.is_zero());
        sleep
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Simulates deadlines every `gap` with a `spin` window and an ideal sleep; returns
    /// the share of time spent spinning.
    fn spin_share(gap: Duration, spin: Duration) -> f64 {
        let mut b = SpinBudget::new();
        let mut now = Instant::now();
        let (mut spun, mut total) = (Duration::ZERO, Duration::ZERO);
        let mut deadline = now + gap;
        while total < Duration::from_secs(10) {
            b.advance(now);
            let left = deadline.saturating_duration_since(now);
            if left.is_zero() {
                deadline += gap;
                continue;
            }
            let sleep = b.sleep_for(Some(left), spin).unwrap_or_default();
            let step = if sleep.is_zero() {
                spun += Duration::from_micros(1);
                Duration::from_micros(1)
            } else {
                sleep
            };
            now += step;
            total += step;
        }
        spun.as_secs_f64() / total.as_secs_f64()
    }

    #[test]
    fn dense_deadlines_cap_spinning_near_one_eleventh() {
        let share = spin_share(Duration::from_micros(10), Duration::from_micros(100));
        // 1/11 plus at most one polling step of overdraft per credit refill.
        assert!((0.05..=0.11).contains(&share), "{share}");
    }

    #[test]
    fn sparse_deadlines_spin_fully_within_budget() {
        // 100 µs of spin every 2 ms is 5 %: under the cap, so every window spins.
        let share = spin_share(Duration::from_millis(2), Duration::from_micros(100));
        assert!((share - 0.05).abs() < 0.002, "{share}");
    }
}
