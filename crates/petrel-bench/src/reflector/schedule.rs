//! The speakers' absolute send schedule and the devices' staggered heartbeats.

use std::sync::atomic::{AtomicBool, Ordering::Relaxed};
use std::time::{Duration, Instant};

use super::device::{login_all_marking, Device};

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
/// the reflector never sees every heartbeat of a stage in one burst. With
/// `accepted`, only the devices whose flag is set heartbeat (those logged
/// in so far).
pub(super) fn heartbeat_loop(
    devices: &[Device],
    stop: &AtomicBool,
    accepted: Option<&[AtomicBool]>,
) {
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
            let live = accepted.is_none_or(|a| a.get(next).is_some_and(|f| f.load(Relaxed)));
            if live {
                let _ = devices[next].sock.send(&devices[next].heartbeat);
            }
            next += 1;
            if next == devices.len() {
                next = 0;
                round += 1;
            }
        }
        std::thread::sleep(TICK);
    }
}

/// Logs every device in (as [`login_all`](super::device::login_all)) while
/// the devices already logged in keep heartbeating, as real devices do: a
/// login phase longer than the reflector's 20 s session timeout (logins
/// proxied through edges are slower) must not time out the first devices
/// before the stage's own heartbeats start. At most `per_s` logins start a
/// second when given. How many failed to log in.
pub(super) fn login_keeping_alive(devices: &[Device], per_s: Option<u32>) -> usize {
    let accepted: Vec<AtomicBool> = devices.iter().map(|_| AtomicBool::new(false)).collect();
    let done = AtomicBool::new(false);
    std::thread::scope(|s| {
        let (accepted, done) = (&accepted, &done);
        s.spawn(move || heartbeat_loop(devices, done, Some(accepted)));
        let failed = login_all_marking(devices, accepted, per_s);
        done.store(true, Relaxed);
        failed
    })
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

    #[test]
    fn only_accepted_devices_heartbeat() {
        use std::net::UdpSocket;

        use super::super::device::{device_ip, make_device};

        let server = UdpSocket::bind("127.0.0.1:0").unwrap();
        let devices: Vec<Device> = (0..3)
            .map(|i| make_device(i, server.local_addr().unwrap()).unwrap())
            .collect();
        let accepted = [true, false, true].map(AtomicBool::new);
        let stop = AtomicBool::new(false);
        std::thread::scope(|s| {
            s.spawn(|| heartbeat_loop(&devices, &stop, Some(&accepted)));
            // Device i's first heartbeat is due 2 s + i × 2/3 s after the start.
            std::thread::sleep(Duration::from_millis(3_600));
            stop.store(true, Relaxed);
        });
        server.set_nonblocking(true).unwrap();
        let mut from = Vec::new();
        let mut buf = [0u8; 1500];
        while let Ok((n, addr)) = server.recv_from(&mut buf) {
            let i = (0..3).find(|&i| addr.ip() == device_ip(i)).unwrap();
            assert_eq!(&buf[..n], devices[i].heartbeat.as_slice());
            from.push(addr.ip());
        }
        assert!(from.contains(&device_ip(0).into()), "{from:?}");
        assert!(from.contains(&device_ip(2).into()), "{from:?}");
        assert!(!from.contains(&device_ip(1).into()), "{from:?}");
    }
}
