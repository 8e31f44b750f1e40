//! Token buckets: one on its own, and a bounded table of them keyed by
//! source that evicts its least-recently-used entry instead of refusing a
//! new key.
//!
//! Why evict rather than refuse: a table that refuses new keys when full
//! lets whoever fills it (65,536 source ports cost a few seconds of
//! datagrams) shut out every newcomer. Evicting the entry touched longest
//! ago keeps every recently active source and forgets only one that has been
//! quiet the longest; the cost is that an evicted source starts again from a
//! full bucket, which gives back at most one burst to a source that was
//! itself quiet while the table turned over. Evictions are counted.
//!
//! The table is a hash map threaded by a recency list (`hashlink`'s
//! `LinkedHashMap`): a lookup moves its entry to the back in O(1), eviction
//! and the idle sweep pop from the front in O(1) each, so no operation
//! scans the table. Keys are source addresses an attacker chooses, so the
//! map uses the standard library's keyed SipHash.

use std::collections::hash_map::RandomState;
use std::hash::Hash;
use std::time::{Duration, Instant};

use hashlink::LinkedHashMap;

/// Idle time after which a bucket is forgotten, at least: the reference
/// sweeps rate-limit entries older than 5 s (draarl-v1 §3.4).
const MIN_IDLE_FORGET: Duration = Duration::from_secs(5);

#[derive(Debug, Clone, Copy)]
struct Bucket {
    tokens: f64,
    last: Instant,
}

impl Bucket {
    fn refill(&mut self, rate: f64, burst: f64, now: Instant) {
        let dt = now.saturating_duration_since(self.last).as_secs_f64();
        self.tokens = (self.tokens + dt * rate).min(burst);
        self.last = now;
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
        let rate_per_s = rate_per_s.max(1);
        Self::with_burst(f64::from(rate_per_s), rate_per_s, now)
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

    /// Refills to `now`; whether at least one token is banked.
    pub fn has_token(&mut self, now: Instant) -> bool {
        self.bucket.refill(self.rate, self.burst, now);
        self.bucket.tokens >= 1.0
    }

    /// Takes one token if available.
    pub fn take(&mut self, now: Instant) -> bool {
        let ok = self.has_token(now);
        if ok {
            self.bucket.tokens -= 1.0;
        }
        ok
    }
}

/// Token buckets per key, at most `max_entries` of them; a new key in a full
/// table evicts the least-recently-used one (see the module docs).
#[derive(Debug)]
pub(crate) struct BucketTable<K: Hash + Eq> {
    /// Tokens per second.
    rate: f64,
    burst: f64,
    max_entries: usize,
    /// A bucket idle this long is full again and is forgotten.
    idle_forget: Duration,
    map: LinkedHashMap<K, Bucket, RandomState>,
    evictions: u64,
}

impl<K: Hash + Eq> BucketTable<K> {
    /// `rate_per_min` tokens per minute, `burst` banked at most (both at
    /// least 1), `max_entries` keys at most (at least 1).
    pub(crate) fn per_min(rate_per_min: u32, burst: u32, max_entries: usize) -> Self {
        let rate = f64::from(rate_per_min.max(1)) / 60.0;
        let burst = f64::from(burst.max(1));
        Self {
            rate,
            burst,
            max_entries: max_entries.max(1),
            idle_forget: Duration::from_secs_f64(burst / rate).max(MIN_IDLE_FORGET),
            map: LinkedHashMap::with_hasher(RandomState::new()),
            evictions: 0,
        }
    }

    /// `rate_per_s` tokens per second with a burst of one second's worth.
    pub(crate) fn per_s(rate_per_s: u32, max_entries: usize) -> Self {
        let rate_per_s = rate_per_s.max(1);
        Self::per_min(rate_per_s.saturating_mul(60), rate_per_s, max_entries)
    }

    /// Whether `key` has a token at `now`, without taking it or creating
    /// the entry (an unknown key has a full bucket).
    pub(crate) fn has_token(&self, key: &K, now: Instant) -> bool {
        self.map.get(key).is_none_or(|b| {
            let mut b = *b;
            b.refill(self.rate, self.burst, now);
            b.tokens >= 1.0
        })
    }

    /// Charges one token to `key` at `now` (creating its bucket, full, if
    /// new) and marks it most recently used; whether a token was there.
    pub(crate) fn take(&mut self, key: K, now: Instant) -> bool {
        let (rate, burst) = (self.rate, self.burst);
        let b = match self.map.to_back(&key) {
            Some(b) => b,
            None => {
                if self.map.len() >= self.max_entries && self.map.pop_front().is_some() {
                    self.evictions += 1;
                }
                self.map.entry(key).or_insert(Bucket {
                    tokens: burst,
                    last: now,
                })
            }
        };
        b.refill(rate, burst, now);
        if b.tokens >= 1.0 {
            b.tokens -= 1.0;
            true
        } else {
            false
        }
    }

    /// Forgets buckets idle long enough to be full again, oldest first; stops
    /// at the first that is not (the list is in order of last use).
    pub(crate) fn sweep(&mut self, now: Instant) {
        while self
            .map
            .front()
            .is_some_and(|(_, b)| now.saturating_duration_since(b.last) >= self.idle_forget)
        {
            self.map.pop_front();
        }
    }

    /// Keys tracked.
    pub(crate) fn len(&self) -> usize {
        self.map.len()
    }

    /// Entries evicted to make room for a new key, so far.
    pub(crate) fn evictions(&self) -> u64 {
        self.evictions
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bucket_with_burst_and_fractional_rate() {
        let t0 = crate::test_clock::origin();
        let mut b = TokenBucket::with_burst(0.5, 3, t0);
        assert_eq!((0..10).filter(|_| b.take(t0)).count(), 3);
        assert!(!b.take(t0 + Duration::from_millis(1900)));
        assert!(b.take(t0 + Duration::from_millis(2100)));
        // Idle for a minute: refilled to the burst, not beyond.
        let t1 = t0 + Duration::from_secs(60);
        assert_eq!((0..10).filter(|_| b.take(t1)).count(), 3);
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
    fn a_full_table_evicts_the_least_recently_used_key() {
        let t0 = Instant::now();
        let mut t = BucketTable::per_s(1, 3);
        for k in [1, 2, 3] {
            assert!(t.take(k, t0));
        }
        // 1 is used again, so 2 is now the least recent and goes first.
        assert!(!t.take(1, t0));
        assert!(t.take(4, t0));
        assert_eq!((t.len(), t.evictions()), (3, 1));
        assert!(t.has_token(&2, t0), "2 was forgotten: a full bucket again");
        assert!(!t.has_token(&1, t0) && !t.has_token(&3, t0));
    }

    #[test]
    fn per_minute_rates_refill_slowly_and_are_swept_once_full() {
        let t0 = Instant::now();
        let mut t = BucketTable::per_min(6, 2, 8);
        assert!(t.take("a", t0) && t.take("a", t0));
        assert!(!t.take("a", t0));
        // 6 per minute: one token every 10 s.
        assert!(!t.has_token(&"a", t0 + Duration::from_secs(9)));
        assert!(t.has_token(&"a", t0 + Duration::from_secs(10)));
        t.sweep(t0 + Duration::from_secs(19));
        assert_eq!(t.len(), 1, "not full yet");
        t.sweep(t0 + Duration::from_secs(20));
        assert_eq!(t.len(), 0);
    }
}
