//! Failed-auth ban ladder per (source IP, username), after draarl-v1 §3.2:
//! the 4th consecutive failure blocks the key for 10 s, later failures for
//! 30 s, 60 s, then 300 s each; a success clears the record; records are
//! forgotten 5 min after their block (or last failure) expired.

use std::collections::HashMap;
use std::net::IpAddr;
use std::time::{Duration, Instant};

/// Failures tolerated before the first block.
const FREE_FAILURES: u32 = 3;
const LADDER: [Duration; 4] = [
    Duration::from_secs(10),
    Duration::from_secs(30),
    Duration::from_secs(60),
    Duration::from_secs(300),
];
const FORGET_AFTER: Duration = Duration::from_secs(300);

#[derive(Debug, Clone)]
struct Record {
    failures: u32,
    blocked_until: Option<Instant>,
    last_failure: Instant,
}

/// Result of [`BanLadder::check`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum BanCheck {
    /// Authentication may proceed.
    Clear,
    /// The key is blocked until the given instant.
    Blocked(Instant),
}

/// Bounded table of failure records. When full, new keys are not tracked
/// (counted in [`BanLadder::untracked`]) rather than evicting a live block.
#[derive(Debug)]
pub struct BanLadder {
    max_entries: usize,
    map: HashMap<(IpAddr, String), Record>,
    untracked: u64,
}

impl BanLadder {
    /// A ladder holding at most `max_entries` keys.
    pub fn new(max_entries: usize) -> Self {
        Self {
            max_entries,
            map: HashMap::new(),
            untracked: 0,
        }
    }

    /// Whether `(ip, username)` is blocked at `now`.
    pub fn check(&self, ip: IpAddr, username: &str, now: Instant) -> BanCheck {
        match self
            .map
            .get(&(ip, username.to_owned()))
            .and_then(|r| r.blocked_until)
        {
            Some(until) if until > now => BanCheck::Blocked(until),
            _ => BanCheck::Clear,
        }
    }

    /// Records a counted failure (`user_not_found`, `invalid_password`).
    pub fn record_failure(&mut self, ip: IpAddr, username: &str, now: Instant) {
        let key = (ip, username.to_owned());
        if !self.map.contains_key(&key) && self.map.len() >= self.max_entries {
            self.untracked += 1;
            return;
        }
        let r = self.map.entry(key).or_insert(Record {
            failures: 0,
            blocked_until: None,
            last_failure: now,
        });
        r.failures += 1;
        r.last_failure = now;
        if r.failures > FREE_FAILURES {
            let level = (r.failures - FREE_FAILURES - 1) as usize;
            let step = LADDER[level.min(LADDER.len() - 1)];
            r.blocked_until = Some(now + step);
        }
    }

    /// Clears the record after a successful login.
    pub fn record_success(&mut self, ip: IpAddr, username: &str) {
        self.map.remove(&(ip, username.to_owned()));
    }

    /// Drops records whose block (or last failure) ended 5 min ago.
    pub fn sweep(&mut self, now: Instant) {
        self.map.retain(|_, r| {
            let since = r
                .blocked_until
                .unwrap_or(r.last_failure)
                .max(r.last_failure);
            now.saturating_duration_since(since) < FORGET_AFTER
        });
    }

    /// Keys currently tracked.
    pub fn len(&self) -> usize {
        self.map.len()
    }

    /// Whether no key is tracked.
    pub fn is_empty(&self) -> bool {
        self.map.is_empty()
    }

    /// Failures not tracked because the table was full.
    pub fn untracked(&self) -> u64 {
        self.untracked
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fourth_failure_blocks_and_ladder_climbs() {
        let ip: IpAddr = "10.1.1.1".parse().unwrap();
        let t0 = Instant::now();
        let mut l = BanLadder::new(8);
        for _ in 0..3 {
            l.record_failure(ip, "bob", t0);
            assert_eq!(l.check(ip, "bob", t0), BanCheck::Clear);
        }
        l.record_failure(ip, "bob", t0);
        assert_eq!(l.check(ip, "bob", t0), BanCheck::Blocked(t0 + LADDER[0]));
        // Other usernames and IPs are unaffected.
        assert_eq!(l.check(ip, "carol", t0), BanCheck::Clear);
        let t1 = t0 + Duration::from_secs(11);
        assert_eq!(l.check(ip, "bob", t1), BanCheck::Clear);
        l.record_failure(ip, "bob", t1);
        assert_eq!(l.check(ip, "bob", t1), BanCheck::Blocked(t1 + LADDER[1]));
        let mut t = t1;
        for _ in 0..5 {
            t += Duration::from_secs(400);
            l.record_failure(ip, "bob", t);
        }
        assert_eq!(l.check(ip, "bob", t), BanCheck::Blocked(t + LADDER[3]));
        l.record_success(ip, "bob");
        assert_eq!(l.check(ip, "bob", t), BanCheck::Clear);
    }

    #[test]
    fn bounded_and_swept() {
        let t0 = Instant::now();
        let mut l = BanLadder::new(2);
        for i in 0..5u8 {
            l.record_failure(IpAddr::from([10, 0, 0, i]), "x", t0);
        }
        assert_eq!((l.len(), l.untracked()), (2, 3));
        l.sweep(t0 + Duration::from_secs(301));
        assert!(l.is_empty());
    }
}
