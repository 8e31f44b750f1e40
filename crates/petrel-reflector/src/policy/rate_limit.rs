//! Token buckets per source IP and per source IP:port.
//!
//! The reference server (draarl-v1 §3.4) uses fixed one-second windows of
//! 600 pps per IP and 150 pps per IP:port; §9 notes they allow double bursts
//! at window edges. Here each key has a token bucket with the same sustained
//! rate and a burst of one second's worth, refilled continuously.
//!
//! The per-IP bucket is charged first, and the IP:port bucket only for a
//! datagram the per-IP bucket admitted: rotating source ports behind one
//! address costs that address's own budget, never a table entry per port
//! beyond what it is allowed to send. Both tables are bounded and evict
//! their least-recently-used entry for a new source
//! ([`BucketTable`](super::bucket_table)), so filling them cannot lock a
//! newcomer out.

use std::net::{IpAddr, SocketAddr};
use std::time::Instant;

use super::bucket_table::BucketTable;

/// Outcome of [`RateLimiter::check`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RateDecision {
    /// Within both limits.
    Allow,
    /// Over the per-IP or per-IP:port rate.
    Limited,
}

/// Per-IP and per-IP:port token buckets, each table bounded to `max_entries`.
#[derive(Debug)]
pub struct RateLimiter {
    per_ip: BucketTable<IpAddr>,
    per_endpoint: BucketTable<SocketAddr>,
}

impl RateLimiter {
    /// `per_ip_pps` and `per_endpoint_pps` are sustained packets per second.
    pub fn new(per_ip_pps: u32, per_endpoint_pps: u32, max_entries: usize) -> Self {
        Self {
            per_ip: BucketTable::per_s(per_ip_pps, max_entries),
            per_endpoint: BucketTable::per_s(per_endpoint_pps, max_entries),
        }
    }

    /// Charges one packet from `src` at `now`.
    pub fn check(&mut self, src: SocketAddr, now: Instant) -> RateDecision {
        if self.per_ip.take(src.ip(), now) && self.per_endpoint.take(src, now) {
            RateDecision::Allow
        } else {
            RateDecision::Limited
        }
    }

    /// Forgets buckets idle for 5 s (they would be full again anyway).
    pub fn sweep(&mut self, now: Instant) {
        self.per_ip.sweep(now);
        self.per_endpoint.sweep(now);
    }

    /// Number of tracked (IP, IP:port) keys.
    pub fn tracked(&self) -> (usize, usize) {
        (self.per_ip.len(), self.per_endpoint.len())
    }

    /// Entries evicted from both tables to make room for new sources.
    pub fn evictions(&self) -> u64 {
        self.per_ip.evictions() + self.per_endpoint.evictions()
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;

    fn addr(s: &str) -> SocketAddr {
        s.parse().unwrap()
    }

    #[test]
    fn endpoint_bucket_allows_burst_then_refills_at_rate() {
        let t0 = Instant::now();
        let mut rl = RateLimiter::new(600, 150, 16);
        let a = addr("10.0.0.1:5000");
        let allowed = (0..200)
            .filter(|_| rl.check(a, t0) == RateDecision::Allow)
            .count();
        assert_eq!(allowed, 150);
        // 100 ms later, 15 more tokens.
        let t1 = t0 + Duration::from_millis(100);
        let allowed = (0..50)
            .filter(|_| rl.check(a, t1) == RateDecision::Allow)
            .count();
        assert_eq!(allowed, 15);
    }

    #[test]
    fn per_ip_limit_spans_ports() {
        let t0 = Instant::now();
        let mut rl = RateLimiter::new(600, 150, 64);
        let mut allowed = 0;
        for port in 0..8u16 {
            let a = SocketAddr::new("10.0.0.2".parse().unwrap(), 4000 + port);
            allowed += (0..150)
                .filter(|_| rl.check(a, t0) == RateDecision::Allow)
                .count();
        }
        assert_eq!(allowed, 600);
    }

    #[test]
    fn tables_are_bounded_and_swept() {
        let t0 = Instant::now();
        let mut rl = RateLimiter::new(600, 150, 2);
        assert_eq!(rl.check(addr("10.0.0.1:1"), t0), RateDecision::Allow);
        assert_eq!(rl.check(addr("10.0.0.2:1"), t0), RateDecision::Allow);
        // A third source evicts the least recent instead of being refused.
        assert_eq!(rl.check(addr("10.0.0.3:1"), t0), RateDecision::Allow);
        assert_eq!((rl.tracked(), rl.evictions()), ((2, 2), 2));
        rl.sweep(t0 + Duration::from_secs(6));
        assert_eq!(rl.tracked(), (0, 0));
        assert_eq!(rl.check(addr("10.0.0.3:1"), t0), RateDecision::Allow);
    }

    /// Issue 14: 100,000 datagrams from rotating ports of 5 addresses within
    /// one second filled the IP:port table (each was inserted even when its
    /// address was over its rate), and a fresh address was then refused.
    #[test]
    fn rotating_ports_of_five_addresses_do_not_lock_out_a_fresh_address() {
        let t0 = Instant::now();
        let mut rl = RateLimiter::new(600, 150, 65_536);
        let mut allowed = 0;
        for i in 0..100_000u32 {
            let ip = IpAddr::from([10, 0, 0, (i % 5) as u8 + 1]);
            let port = 1024 + (i / 5) as u16;
            let at = t0 + Duration::from_micros(u64::from(i) * 10);
            allowed += usize::from(rl.check(SocketAddr::new(ip, port), at) == RateDecision::Allow);
        }
        // Each address within its per-IP budget (600 burst + 600/s for 1 s),
        // and only admitted datagrams made IP:port entries.
        assert!(allowed <= 5 * 1_200, "{allowed}");
        assert_eq!(rl.tracked(), (5, allowed));
        let now = t0 + Duration::from_secs(1);
        assert_eq!(rl.check(addr("10.9.9.9:4000"), now), RateDecision::Allow);
    }

    /// 65,536 distinct addresses fill both tables; a fresh honest address
    /// still gets in, evicting the least recent one.
    #[test]
    fn distinct_addresses_filling_the_tables_do_not_lock_out_a_fresh_one() {
        let t0 = Instant::now();
        let mut rl = RateLimiter::new(600, 150, 65_536);
        for i in 0..65_536u32 {
            let src = SocketAddr::new(IpAddr::from((0x0a00_0000 | i).to_be_bytes()), 9);
            assert_eq!(rl.check(src, t0), RateDecision::Allow);
        }
        assert_eq!((rl.tracked(), rl.evictions()), ((65_536, 65_536), 0));
        let honest = addr("192.0.2.7:4000");
        let now = t0 + Duration::from_millis(1);
        assert_eq!(rl.check(honest, now), RateDecision::Allow);
        assert_eq!((rl.tracked(), rl.evictions()), ((65_536, 65_536), 2));
        // Its buckets are the most recent: a further flood of 65,535 new
        // sources does not evict them, so its rate is still enforced.
        for i in 0..65_535u32 {
            let src = SocketAddr::new(IpAddr::from((0x0b00_0000 | i).to_be_bytes()), 9);
            rl.check(src, now);
        }
        let over = (0..200)
            .filter(|_| rl.check(honest, now) == RateDecision::Allow)
            .count();
        assert_eq!(over, 149);
    }
}
