//! The HTTP endpoint's budget for requests without a valid admin token:
//! token buckets per source prefix, the /24 of an IPv4 address or the /64
//! of an IPv6 one ([`SourcePrefix`]; IPv4-mapped IPv6 counts as IPv4), so
//! a host cannot multiply its budget by rotating addresses within its
//! network.
//!
//! The buckets live in the same bounded [`BucketTable`] as the packet rate
//! limits: a full table evicts its least-recently-used address rather than
//! refuse a new one, so a flood from many addresses never locks a new
//! address out; at worst an evicted address gets a fresh burst.

use std::net::IpAddr;
use std::time::Instant;

use super::bucket_table::BucketTable;
use super::password_budget::SourcePrefix;

/// Per-source-prefix request budget in a bounded, evicting table.
#[derive(Debug)]
pub struct IpRateTable {
    table: BucketTable<IpAddr>,
}

impl IpRateTable {
    /// `rate_per_s` sustained requests per source prefix, `burst` at once,
    /// at most `max_entries` (at least 1) prefixes tracked.
    pub fn new(rate_per_s: u32, burst: u32, max_entries: usize) -> Self {
        Self {
            table: BucketTable::per_min(rate_per_s.max(1).saturating_mul(60), burst, max_entries),
        }
    }

    /// `rate_per_min` sustained requests per source prefix per minute,
    /// `burst` at once, at most `max_entries` (at least 1) prefixes tracked.
    pub fn per_minute(rate_per_min: u32, burst: u32, max_entries: usize) -> Self {
        Self {
            table: BucketTable::per_min(rate_per_min.max(1), burst, max_entries),
        }
    }

    /// Charges one request from `ip` to its prefix at `now`; `false` when
    /// over its budget. First forgets prefixes idle long enough for their bucket to be full
    /// again (amortised O(1): the oldest are at the front).
    pub fn admit(&mut self, ip: IpAddr, now: Instant) -> bool {
        self.table.sweep(now);
        self.table.take(source_key(ip), now)
    }

    /// Prefixes tracked.
    pub fn len(&self) -> usize {
        self.table.len()
    }

    /// Whether no prefix is tracked.
    pub fn is_empty(&self) -> bool {
        self.table.len() == 0
    }

    /// Entries evicted so far to make room for new prefixes.
    pub fn evictions(&self) -> u64 {
        self.table.evictions()
    }
}

/// The key a source address is limited under: the network address of its
/// /24 (IPv4, also when IPv4-mapped) or /64 (IPv6).
pub fn source_key(ip: IpAddr) -> IpAddr {
    SourcePrefix::of(ip).network()
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;

    /// An address of the `n`th /24.
    fn ip(n: u32) -> IpAddr {
        IpAddr::from((n << 8 | 7).to_be_bytes())
    }

    #[test]
    fn burst_then_rate_per_prefix() {
        let t0 = crate::test_clock::origin();
        let mut t = IpRateTable::new(10, 20, 16);
        assert_eq!((0..30).filter(|_| t.admit(ip(1), t0)).count(), 20);
        // Another prefix has its own budget.
        assert!(t.admit(ip(2), t0));
        let t1 = t0 + Duration::from_millis(500);
        assert_eq!((0..30).filter(|_| t.admit(ip(1), t1)).count(), 5);
    }

    #[test]
    fn full_table_evicts_the_least_recent_instead_of_refusing() {
        let t0 = crate::test_clock::origin();
        let mut t = IpRateTable::new(1, 1, 16);
        // A flood from 16 busy prefixes fills the table.
        for n in 0..16 {
            assert!(t.admit(ip(n), t0 + Duration::from_millis(u64::from(n))));
        }
        assert_eq!(t.len(), 16);
        // A new prefix is still admitted; the least recently seen goes.
        let t1 = t0 + Duration::from_millis(100);
        assert!(t.admit(ip(1000), t1));
        assert_eq!((t.len(), t.evictions()), (16, 1));
        // ip(0) was evicted and starts over with a full bucket (evicting
        // ip(1) in turn); ip(2) is still tracked with its bucket empty.
        assert!(t.admit(ip(0), t1));
        assert_eq!(t.evictions(), 2);
        assert!(!t.admit(ip(2), t1));
        // Once entries are idle long enough to be full, they are forgotten.
        let t2 = t1 + Duration::from_secs(10);
        assert!(t.admit(ip(2000), t2));
        assert_eq!(t.len(), 1);
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

    #[test]
    fn ipv4_hosts_share_their_24() {
        let t0 = crate::test_clock::origin();
        let mut t = IpRateTable::new(1, 3, 16);
        // Three addresses of 192.0.2.0/24 spend one budget.
        for host in ["192.0.2.1", "192.0.2.200", "::ffff:192.0.2.9"] {
            assert!(t.admit(host.parse().unwrap(), t0), "{host}");
        }
        assert!(!t.admit("192.0.2.77".parse().unwrap(), t0));
        assert!(t.admit("192.0.3.1".parse().unwrap(), t0));
        assert_eq!(t.len(), 2);
        assert_eq!(
            source_key("192.0.2.77".parse().unwrap()),
            "192.0.2.0".parse::<IpAddr>().unwrap()
        );
    }
}
