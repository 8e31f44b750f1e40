//! Token buckets per source IP and per source IP:port.
//!
//! The reference server (draarl-v1 §3.4) uses fixed one-second windows of
//! 600 pps per IP and 150 pps per IP:port; §9 notes they allow double bursts
//! at window edges. Here each key has a token bucket with the same sustained
//! rate and a burst of one second's worth, refilled continuously.

use std::collections::HashMap;
use std::hash::Hash;
use std::net::{IpAddr, SocketAddr};
use std::time::{Duration, Instant};

/// Idle time after which a bucket is full again and can be forgotten.
const IDLE_FORGET: Duration = Duration::from_secs(5);

#[derive(Debug, Clone, Copy)]
struct Bucket {
    tokens: f64,
    last: Instant,
}

#[derive(Debug)]
struct Buckets<K> {
    rate_pps: f64,
    burst: f64,
    max_entries: usize,
    map: HashMap<K, Bucket>,
}

impl<K: Hash + Eq + Copy> Buckets<K> {
    fn new(rate_pps: u32, max_entries: usize) -> Self {
        Self {
            rate_pps: f64::from(rate_pps),
            burst: f64::from(rate_pps.max(1)),
            max_entries,
            map: HashMap::new(),
        }
    }

    /// `None` when the key is new and the table is full.
    fn take(&mut self, key: K, now: Instant) -> Option<bool> {
        if !self.map.contains_key(&key) && self.map.len() >= self.max_entries {
            return None;
        }
        let (rate, burst) = (self.rate_pps, self.burst);
        let b = self.map.entry(key).or_insert(Bucket {
            tokens: burst,
            last: now,
        });
        let dt = now.saturating_duration_since(b.last).as_secs_f64();
        b.tokens = (b.tokens + dt * rate).min(burst);
        b.last = now;
        if b.tokens >= 1.0 {
            b.tokens -= 1.0;
            Some(true)
        } else {
            Some(false)
        }
    }

    fn sweep(&mut self, now: Instant) {
        self.map
            .retain(|_, b| now.saturating_duration_since(b.last) < IDLE_FORGET);
    }
}

/// One token bucket: `rate` tokens per second, at most `burst` banked.
#[derive(Debug, Clone)]
pub struct TokenBucket {
    rate: f64,
    burst: f64,
    bucket: Bucket,
}

impl TokenBucket {
    /// A full bucket of `rate_per_s` tokens refilled at `rate_per_s` per second.
    pub fn new(rate_per_s: u32, now: Instant) -> Self {
        let rate = f64::from(rate_per_s.max(1));
        Self::with_burst(rate, rate_per_s.max(1), now)
    }

    /// A full bucket of `burst` (at least 1) tokens refilled at `rate_per_s`
    /// tokens per second (fractions allowed: 0.5 is one token every 2 s).
    pub fn with_burst(rate_per_s: f64, burst: u32, now: Instant) -> Self {
        let burst = f64::from(burst.max(1));
        Self {
            rate: rate_per_s.max(0.0),
            burst,
            bucket: Bucket {
                tokens: burst,
                last: now,
            },
        }
    }

    /// Takes one token if available.
    pub fn take(&mut self, now: Instant) -> bool {
        let b = &mut self.bucket;
        let dt = now.saturating_duration_since(b.last).as_secs_f64();
        b.tokens = (b.tokens + dt * self.rate).min(self.burst);
        b.last = now;
        if b.tokens >= 1.0 {
            b.tokens -= 1.0;
            true
        } else {
            false
        }
    }
}

/// Outcome of [`RateLimiter::check`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RateDecision {
    /// Within both limits.
    Allow,
    /// Over the per-IP or per-IP:port rate.
    Limited,
    /// A new source arrived while a table was full; dropped so the table stays bounded.
    TableFull,
}

/// Per-IP and per-IP:port token buckets, each table bounded to `max_entries`.
#[derive(Debug)]
pub struct RateLimiter {
    per_ip: Buckets<IpAddr>,
    per_endpoint: Buckets<SocketAddr>,
}

impl RateLimiter {
    /// `per_ip_pps` and `per_endpoint_pps` are sustained packets per second.
    pub fn new(per_ip_pps: u32, per_endpoint_pps: u32, max_entries: usize) -> Self {
        Self {
            per_ip: Buckets::new(per_ip_pps, max_entries),
            per_endpoint: Buckets::new(per_endpoint_pps, max_entries),
        }
    }

    /// Charges one packet from `src` at `now`.
    pub fn check(&mut self, src: SocketAddr, now: Instant) -> RateDecision {
        match (
            self.per_ip.take(src.ip(), now),
            self.per_endpoint.take(src, now),
        ) {
            (None, _) | (_, None) => RateDecision::TableFull,
            (Some(true), Some(true)) => RateDecision::Allow,
            _ => RateDecision::Limited,
        }
    }

    /// Forgets buckets idle for 5 s (they would be full again anyway).
    pub fn sweep(&mut self, now: Instant) {
        self.per_ip.sweep(now);
        self.per_endpoint.sweep(now);
    }

    /// Number of tracked (IP, IP:port) keys.
    pub fn tracked(&self) -> (usize, usize) {
        (self.per_ip.map.len(), self.per_endpoint.map.len())
    }
}

#[cfg(test)]
mod tests {
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
    fn single_bucket_refills() {
        let t0 = Instant::now();
        let mut b = TokenBucket::new(10, t0);
        assert_eq!((0..20).filter(|_| b.take(t0)).count(), 10);
        assert!(b.take(t0 + Duration::from_millis(100)));
        assert!(!b.take(t0 + Duration::from_millis(100)));
    }

    #[test]
    fn bucket_with_burst_and_fractional_rate() {
        let t0 = Instant::now();
        let mut b = TokenBucket::with_burst(0.5, 3, t0);
        assert_eq!((0..10).filter(|_| b.take(t0)).count(), 3);
        assert!(!b.take(t0 + Duration::from_millis(1900)));
        assert!(b.take(t0 + Duration::from_millis(2100)));
        // Idle for a minute: refilled to the burst, not beyond.
        let t1 = t0 + Duration::from_secs(60);
        assert_eq!((0..10).filter(|_| b.take(t1)).count(), 3);
    }

    #[test]
    fn tables_are_bounded_and_swept() {
        let t0 = Instant::now();
        let mut rl = RateLimiter::new(600, 150, 2);
        assert_eq!(rl.check(addr("10.0.0.1:1"), t0), RateDecision::Allow);
        assert_eq!(rl.check(addr("10.0.0.2:1"), t0), RateDecision::Allow);
        assert_eq!(rl.check(addr("10.0.0.3:1"), t0), RateDecision::TableFull);
        assert_eq!(rl.tracked(), (2, 2));
        rl.sweep(t0 + Duration::from_secs(6));
        assert_eq!(rl.tracked(), (0, 0));
        assert_eq!(rl.check(addr("10.0.0.3:1"), t0), RateDecision::Allow);
    }
}
