//! Token buckets per source IP in a bounded table that evicts instead of
//! refusing: the HTTP endpoint's budget for requests without a valid admin
//! token.
//!
//! A full table first forgets buckets idle long enough to be full again
//! (forgetting them loses nothing: a new bucket starts full), then, if
//! every entry is busy, the least recently seen one. So a flood from many
//! addresses can never lock a new address out; at worst an evicted address
//! gets a fresh burst, which the table size makes rare.

use std::collections::HashMap;
use std::net::IpAddr;
use std::time::{Duration, Instant};

use super::rate_limit::TokenBucket;

#[derive(Debug)]
struct Entry {
    bucket: TokenBucket,
    last: Instant,
}

/// Per-IP request budget: token buckets in a bounded table that evicts
/// idle, then least recently seen, entries to admit a new address.
#[derive(Debug)]
pub struct IpRateTable {
    rate_per_s: u32,
    burst: u32,
    max_entries: usize,
    /// After this long without a request a bucket is full again.
    refill: Duration,
    map: HashMap<IpAddr, Entry>,
    evictions: u64,
}

impl IpRateTable {
    /// `rate_per_s` sustained requests per IP, `burst` at once, at most
    /// `max_entries` (at least 1) addresses tracked.
    pub fn new(rate_per_s: u32, burst: u32, max_entries: usize) -> Self {
        let (rate_per_s, burst) = (rate_per_s.max(1), burst.max(1));
        Self {
            rate_per_s,
            burst,
            max_entries: max_entries.max(1),
            refill: Duration::from_secs_f64(f64::from(burst) / f64::from(rate_per_s)),
            map: HashMap::new(),
            evictions: 0,
        }
    }

    /// Charges one request from `ip` at `now`; `false` when over its budget.
    pub fn admit(&mut self, ip: IpAddr, now: Instant) -> bool {
        if !self.map.contains_key(&ip) && self.map.len() >= self.max_entries {
            self.make_room(now);
        }
        let (rate, burst) = (self.rate_per_s, self.burst);
        let e = self.map.entry(ip).or_insert_with(|| Entry {
            bucket: TokenBucket::with_burst(f64::from(rate), burst, now),
            last: now,
        });
        e.last = now;
        e.bucket.take(now)
    }

    fn make_room(&mut self, now: Instant) {
        let before = self.map.len();
        let refill = self.refill;
        self.map
            .retain(|_, e| now.saturating_duration_since(e.last) < refill);
        if self.map.len() >= self.max_entries {
            let oldest = self.map.iter().min_by_key(|(_, e)| e.last).map(|(k, _)| *k);
            if let Some(k) = oldest {
                self.map.remove(&k);
            }
        }
        self.evictions += (before - self.map.len()) as u64;
    }

    /// Addresses tracked.
    pub fn len(&self) -> usize {
        self.map.len()
    }

    /// Whether no address is tracked.
    pub fn is_empty(&self) -> bool {
        self.map.is_empty()
    }

    /// Entries evicted so far to make room for new addresses.
    pub fn evictions(&self) -> u64 {
        self.evictions
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ip(n: u32) -> IpAddr {
        IpAddr::from(n.to_be_bytes())
    }

    #[test]
    fn burst_then_rate_per_address() {
        let t0 = crate::test_clock::origin();
        let mut t = IpRateTable::new(10, 20, 16);
        assert_eq!((0..30).filter(|_| t.admit(ip(1), t0)).count(), 20);
        // Another address has its own budget.
        assert!(t.admit(ip(2), t0));
        let t1 = t0 + Duration::from_millis(500);
        assert_eq!((0..30).filter(|_| t.admit(ip(1), t1)).count(), 5);
    }

    #[test]
    fn full_table_evicts_instead_of_refusing() {
        let t0 = crate::test_clock::origin();
        let mut t = IpRateTable::new(1, 1, 16);
        // A flood from 16 busy addresses fills the table.
        for n in 0..16 {
            assert!(t.admit(ip(n), t0 + Duration::from_millis(u64::from(n))));
        }
        assert_eq!(t.len(), 16);
        // A new address is still admitted; the least recently seen goes.
        let t1 = t0 + Duration::from_millis(100);
        assert!(t.admit(ip(1000), t1));
        assert_eq!((t.len(), t.evictions()), (16, 1));
        // ip(0) was evicted and starts over with a full bucket (evicting
        // ip(1) in turn); ip(2) is still tracked with its bucket empty.
        assert!(t.admit(ip(0), t1));
        assert_eq!(t.evictions(), 2);
        assert!(!t.admit(ip(2), t1));
        // Once entries are idle long enough to be full, all go at once.
        let t2 = t1 + Duration::from_secs(2);
        assert!(t.admit(ip(2000), t2));
        assert_eq!(t.len(), 1);
    }
}
