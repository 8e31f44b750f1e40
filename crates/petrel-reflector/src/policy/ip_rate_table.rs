//! Token buckets per source address in a bounded table that evicts instead
//! of refusing: the HTTP endpoint's budget for requests without a valid
//! admin token. An IPv4 address is one key; IPv6 addresses are keyed by
//! their /64, the block one subscriber gets, so a host cannot multiply its
//! budget by rotating addresses (IPv4-mapped IPv6 counts as IPv4).
//!
//! A full table first forgets buckets idle long enough to be full again
//! (forgetting them loses nothing: a new bucket starts full), then, if
//! still full, the least recently seen sixteenth of the entries (found in
//! one linear pass, so the cost per new address stays constant on
//! average). So a flood from many addresses can never lock a new address
//! out; at worst an evicted address gets a fresh burst, which the table
//! size makes rare.

use std::collections::HashMap;
use std::net::{IpAddr, Ipv6Addr};
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
        let ip = source_key(ip);
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
            let batch = (self.max_entries / 16).max(1);
            let mut seen: Vec<Instant> = self.map.values().map(|e| e.last).collect();
            let (_, cutoff, _) = seen.select_nth_unstable(batch - 1);
            let cutoff = *cutoff;
            self.map.retain(|_, e| e.last > cutoff);
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

/// The key a source address is limited under: itself for IPv4 (also when
/// IPv4-mapped), its /64 for IPv6.
pub fn source_key(ip: IpAddr) -> IpAddr {
    match ip.to_canonical() {
        IpAddr::V6(v6) => {
            let prefix = u128::from(v6) & !((1u128 << 64) - 1);
            IpAddr::V6(Ipv6Addr::from(prefix))
        }
        v4 => v4,
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

    #[test]
    fn a_busy_full_table_evicts_its_least_recent_sixteenth() {
        let t0 = crate::test_clock::origin();
        let mut t = IpRateTable::new(1, 1, 64);
        for n in 0..64 {
            t.admit(ip(n), t0 + Duration::from_millis(u64::from(n)));
        }
        let t1 = t0 + Duration::from_millis(100);
        assert!(t.admit(ip(1000), t1));
        assert_eq!((t.len(), t.evictions()), (61, 4));
        // The next three new addresses fit without evicting.
        for n in 1001..1004 {
            assert!(t.admit(ip(n), t1));
        }
        assert_eq!((t.len(), t.evictions()), (64, 4));
        // ip(3) was among the four evicted, ip(4) was not.
        assert!(t.admit(ip(3), t1));
        assert!(!t.admit(ip(40), t1));
    }

    #[test]
    fn ipv6_hosts_share_their_64_and_mapped_ipv4_is_ipv4() {
        let t0 = crate::test_clock::origin();
        let mut t = IpRateTable::new(1, 2, 16);
        let a: IpAddr = "2001:db8:1:2::1".parse().unwrap();
        let b: IpAddr = "2001:db8:1:2:ffff::9".parse().unwrap();
        let other: IpAddr = "2001:db8:1:3::1".parse().unwrap();
        assert!(t.admit(a, t0) && t.admit(b, t0));
        assert!(!t.admit(a, t0));
        assert!(t.admit(other, t0));
        let v4: IpAddr = "192.0.2.7".parse().unwrap();
        let mapped: IpAddr = "::ffff:192.0.2.7".parse().unwrap();
        assert!(t.admit(v4, t0) && t.admit(mapped, t0));
        assert!(!t.admit(v4, t0));
        assert_eq!(t.len(), 3);
    }
}
