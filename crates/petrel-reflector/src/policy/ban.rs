//! Failed-auth ban ladder per (source IP, username), after draarl-v1 §3.2:
//! the 4th consecutive failure blocks the key for 10 s, later failures for
//! 30 s, 60 s, then 300 s each; a success clears the record; records are
//! forgotten 5 min after their block (or last failure) expired.
//!
//! The table is bounded, and a failure for a new key in a full table evicts
//! a record instead of going untracked (an untracked key would never be
//! banned, so filling the table from 65,536 addresses used to switch the
//! ladder off for everyone else). Records still counting their free
//! failures are evicted first, least recently failed first; a record that
//! has reached a block goes only when no such record is left, again the
//! least recently failed. So an attacker filling the table from fresh
//! addresses evicts other fresh addresses' first failures, not the blocks
//! already earned. Each record sits in one of two recency lists
//! (`hashlink`'s `LinkedHashMap`), so a failure, an eviction or a lookup is
//! O(1); only the periodic sweep walks the table.

use std::collections::hash_map::RandomState;
use std::net::IpAddr;
use std::time::{Duration, Instant};

use hashlink::LinkedHashMap;

/// Failures tolerated before the first block.
const FREE_FAILURES: u32 = 3;
const LADDER: [Duration; 4] = [
    Duration::from_secs(10),
    Duration::from_secs(30),
    Duration::from_secs(60),
    Duration::from_secs(300),
];
const FORGET_AFTER: Duration = Duration::from_secs(300);

type Key = (IpAddr, String);
type Records = LinkedHashMap<Key, Record, RandomState>;

#[derive(Debug, Clone)]
struct Record {
    failures: u32,
    blocked_until: Option<Instant>,
    last_failure: Instant,
}

impl Record {
    fn forgettable(&self, now: Instant) -> bool {
        let since = self
            .blocked_until
            .unwrap_or(self.last_failure)
            .max(self.last_failure);
        now.saturating_duration_since(since) >= FORGET_AFTER
    }
}

/// Result of [`BanLadder::check`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum BanCheck {
    /// Authentication may proceed.
    Clear,
    /// The key is blocked until the given instant.
    Blocked(Instant),
}

/// Bounded table of failure records that evicts rather than stops tracking
/// when full (see the module docs; evictions are counted in
/// [`BanLadder::evictions`]).
#[derive(Debug)]
pub struct BanLadder {
    max_entries: usize,
    /// Keys with at most [`FREE_FAILURES`] failures, least recent first.
    counting: Records,
    /// Keys that have reached a block, least recent failure first.
    laddered: Records,
    evictions: u64,
}

impl BanLadder {
    /// A ladder holding at most `max_entries` keys (at least 1).
    pub fn new(max_entries: usize) -> Self {
        Self {
            max_entries: max_entries.max(1),
            counting: LinkedHashMap::with_hasher(RandomState::new()),
            laddered: LinkedHashMap::with_hasher(RandomState::new()),
            evictions: 0,
        }
    }

    /// Whether `(ip, username)` is blocked at `now`.
    pub fn check(&self, ip: IpAddr, username: &str, now: Instant) -> BanCheck {
        match self
            .laddered
            .get(&(ip, username.to_owned()))
            .and_then(|r| r.blocked_until)
        {
            Some(until) if until > now => BanCheck::Blocked(until),
            _ => BanCheck::Clear,
        }
    }

    /// Records a counted failure (`user_not_found`, a wrong password);
    /// returns whether a record was evicted to make room for it.
    pub fn record_failure(&mut self, ip: IpAddr, username: &str, now: Instant) -> bool {
        let key = (ip, username.to_owned());
        let mut evicted = false;
        let mut record = if let Some(r) = self.laddered.remove(&key) {
            r
        } else if let Some(r) = self.counting.remove(&key) {
            r
        } else {
            if self.len() >= self.max_entries
                && (self.counting.pop_front().is_some() || self.laddered.pop_front().is_some())
            {
                self.evictions += 1;
                evicted = true;
            }
            Record {
                failures: 0,
                blocked_until: None,
                last_failure: now,
            }
        };
        record.failures += 1;
        record.last_failure = now;
        if record.failures > FREE_FAILURES {
            let level = (record.failures - FREE_FAILURES - 1) as usize;
            let step = LADDER[level.min(LADDER.len() - 1)];
            record.blocked_until = Some(now + step);
            self.laddered.insert(key, record);
        } else {
            self.counting.insert(key, record);
        }
        evicted
    }

    /// Clears the record after a successful login.
    pub fn record_success(&mut self, ip: IpAddr, username: &str) {
        let key = (ip, username.to_owned());
        if self.laddered.remove(&key).is_none() {
            self.counting.remove(&key);
        }
    }

    /// Drops records whose block (or last failure) ended 5 min ago. Walks
    /// the table; run it every few seconds, not per packet.
    pub fn sweep(&mut self, now: Instant) {
        self.counting.retain(|_, r| !r.forgettable(now));
        self.laddered.retain(|_, r| !r.forgettable(now));
    }

    /// Keys currently tracked.
    pub fn len(&self) -> usize {
        self.counting.len() + self.laddered.len()
    }

    /// Whether no key is tracked.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Records evicted to make room for a new key, so far.
    pub fn evictions(&self) -> u64 {
        self.evictions
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
        assert_eq!((l.len(), l.evictions()), (2, 3));
        l.sweep(t0 + Duration::from_secs(301));
        assert!(l.is_empty());
    }

    /// 100,000 failures from 5 addresses (on any ports: the key has none)
    /// take 5 records; a fresh address is tracked and banned as usual.
    #[test]
    fn a_flood_from_five_addresses_takes_five_records() {
        let t0 = Instant::now();
        let mut l = BanLadder::new(65_536);
        for i in 0..100_000u32 {
            let at = t0 + Duration::from_micros(u64::from(i) * 10);
            l.record_failure(IpAddr::from([10, 0, 0, (i % 5) as u8 + 1]), "\0unknown", at);
        }
        assert_eq!((l.len(), l.evictions()), (5, 0));
        let fresh: IpAddr = "198.51.100.9".parse().unwrap();
        let now = t0 + Duration::from_secs(1);
        assert_eq!(l.check(fresh, "dave", now), BanCheck::Clear);
        for _ in 0..4 {
            l.record_failure(fresh, "dave", now);
        }
        assert!(matches!(l.check(fresh, "dave", now), BanCheck::Blocked(_)));
    }

    /// 65,536 addresses with one failure each fill the table; a key that
    /// then fails 4 times is still banned, and a banned key survives a
    /// further flood of first failures.
    #[test]
    fn a_full_table_evicts_first_failures_and_keeps_earned_blocks() {
        let t0 = Instant::now();
        let mut l = BanLadder::new(65_536);
        for i in 0..65_536u32 {
            assert!(!l.record_failure(IpAddr::from((0x0a00_0000 | i).to_be_bytes()), "x", t0));
        }
        let attacker: IpAddr = "192.0.2.1".parse().unwrap();
        for _ in 0..4 {
            l.record_failure(attacker, "carol", t0);
        }
        assert_eq!(l.evictions(), 1);
        assert!(matches!(
            l.check(attacker, "carol", t0),
            BanCheck::Blocked(_)
        ));
        for i in 0..65_536u32 {
            assert!(l.record_failure(IpAddr::from((0x0b00_0000 | i).to_be_bytes()), "x", t0));
        }
        assert_eq!((l.len(), l.evictions()), (65_536, 65_537));
        assert!(matches!(
            l.check(attacker, "carol", t0),
            BanCheck::Blocked(_)
        ));
        // A fresh honest address is tracked (and banned) like any other.
        let fresh: IpAddr = "198.51.100.9".parse().unwrap();
        for _ in 0..4 {
            l.record_failure(fresh, "dave", t0);
        }
        assert!(matches!(l.check(fresh, "dave", t0), BanCheck::Blocked(_)));
    }
}
