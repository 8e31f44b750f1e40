//! The speakers' absolute send schedule and the devices' staggered heartbeats.

use std::sync::atomic::{AtomicBool, Ordering::Relaxed};
use std::time::{Duration, Instant};

use super::device::Device;

/// The speakers' absolute schedule: round `k` is due at a fixed offset from
/// a start, so a late round does not delay the next ones. After the pause
/// between warm-up and measurement the schedule restarts; otherwise every
/// round due during the pause would go out at once, a burst of frames the
/// reflector must queue (and would age out) that no real talker sends.
#[derive(Debug, Clone, Copy)]
pub(super) struct Schedule {
    start: Instant,
    first_round: u64,
    interval: Duration,
}

impl Schedule {
    pub(super) fn new(start: Instant, interval: Duration) -> Self {
        Self {
            start,
            first_round: 0,
            interval,
        }
    }

    /// Round `k` is due at `now`, the later rounds one interval apart.
    pub(super) fn restart(&mut self, now: Instant, k: u64) {
        self.start = now;
        self.first_round = k;
    }

    pub(super) fn due(&self, k: u64) -> Instant {
        let n = u32::try_from(k.saturating_sub(self.first_round)).unwrap_or(u32::MAX);
        self.start + self.interval * n
    }
}

/// Keeps every device online (the reflector drops devices after 20 s): each
/// device heartbeats every 2 s, the devices spread evenly over that period
/// (like real devices, whose phases differ; §7.2 staggers them by SSID), so
/// the reflector never sees every heartbeat of a stage in one burst.
pub(super) fn heartbeat_loop(devices: &[Device], stop: &AtomicBool) {
    const PERIOD: Duration = Duration::from_secs(2);
    const TICK: Duration = Duration::from_millis(10);
    if devices.is_empty() {
        return;
    }
    let start = Instant::now();
    let n = devices.len().max(1);
    // Device i is due at start + (k + 1) × PERIOD + i × PERIOD / n.
    let mut next = 0usize;
    let mut round = 1u32;
    while !stop.load(Relaxed) {
        let elapsed = start.elapsed();
        loop {
            let due = PERIOD * round + PERIOD.mul_f64(next as f64 / n as f64);
            if due > elapsed {
                break;
            }
            let _ = devices[next].sock.send(&devices[next].heartbeat);
            next += 1;
            if next == devices.len() {
                next = 0;
                round += 1;
            }
        }
        std::thread::sleep(TICK);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn schedule_restarts_without_a_catch_up_burst() {
        let t0 = Instant::now();
        let ms = Duration::from_millis;
        let mut s = Schedule::new(t0, ms(30));
        assert_eq!(s.due(0), t0);
        assert_eq!(s.due(7), t0 + ms(210));
        // One second of pause after round 7: round 8 is due at the restart,
        // not 1 s in the past with 33 overdue rounds behind it.
        let resume = t0 + ms(1_210);
        s.restart(resume, 8);
        assert_eq!(s.due(8), resume);
        assert_eq!(s.due(9), resume + ms(30));
        assert!((8..50).all(|k| s.due(k) >= resume));
    }
}
