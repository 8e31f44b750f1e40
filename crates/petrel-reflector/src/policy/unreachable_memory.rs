//! Endpoints whose session an ICMP destination-unreachable ended, kept for a
//! while so that the core can tell a real closed port from a forged report.
//!
//! An ICMP error carries no proof of origin beyond its source address, which
//! anyone who can forge UDP sources can forge too. A port that really closed
//! stays silent; a device whose session a forged report ended comes back with
//! its next heartbeat. So an endpoint that logs in again while remembered
//! here has contradicted the report, and the core stops trusting further
//! reports for it while it keeps talking (see
//! [`Reflector::handle_unreachable`](crate::core::Reflector::handle_unreachable)).
//!
//! Bounded: at most `capacity` endpoints; when full, the least recently
//! ended is forgotten (counted). Entries older than `ttl` are ignored and
//! dropped when met.

use std::collections::hash_map::RandomState;
use std::net::SocketAddr;
use std::time::{Duration, Instant};

use hashlink::LinkedHashMap;

/// Recently unreachable endpoints, oldest first.
#[derive(Debug)]
pub struct UnreachableMemory {
    /// When a report ended sessions there, and whether one of them was
    /// receiving fan-out.
    ended: LinkedHashMap<SocketAddr, (Instant, bool), RandomState>,
    capacity: usize,
    ttl: Duration,
    evictions: u64,
}

impl UnreachableMemory {
    /// Remembers at most `capacity` endpoints (at least 1) for `ttl` each.
    pub fn new(capacity: usize, ttl: Duration) -> Self {
        Self {
            ended: LinkedHashMap::with_hasher(RandomState::new()),
            capacity: capacity.max(1),
            ttl,
            evictions: 0,
        }
    }

    /// Records that a report ended a session at `addr` at `now`, and
    /// whether that session was receiving fan-out.
    pub fn remember(&mut self, addr: SocketAddr, now: Instant, receiving: bool) {
        let receiving = receiving || self.ended.remove(&addr).is_some_and(|(_, r)| r);
        if self.ended.len() >= self.capacity {
            self.ended.pop_front();
            self.evictions += 1;
        }
        self.ended.insert(addr, (now, receiving));
    }

    /// If a report ended a session at `addr` within `ttl` before `now`:
    /// whether one ended there was receiving. Forgets the entry either way:
    /// one contradiction per report.
    pub fn take(&mut self, addr: SocketAddr, now: Instant) -> Option<bool> {
        self.ended
            .remove(&addr)
            .filter(|(at, _)| now.saturating_duration_since(*at) <= self.ttl)
            .map(|(_, receiving)| receiving)
    }

    /// Endpoints forgotten because the memory was full.
    pub fn evictions(&self) -> u64 {
        self.evictions
    }

    /// Endpoints remembered now (stale ones included until met).
    pub fn len(&self) -> usize {
        self.ended.len()
    }

    /// Whether nothing is remembered.
    pub fn is_empty(&self) -> bool {
        self.ended.is_empty()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn addr(port: u16) -> SocketAddr {
        SocketAddr::from(([192, 0, 2, 1], port))
    }

    #[test]
    fn recalls_once_within_ttl() {
        let t0 = Instant::now();
        let mut m = UnreachableMemory::new(4, Duration::from_secs(60));
        m.remember(addr(1), t0, true);
        assert_eq!(m.take(addr(2), t0), None);
        assert_eq!(m.take(addr(1), t0 + Duration::from_secs(60)), Some(true));
        assert_eq!(
            m.take(addr(1), t0 + Duration::from_secs(61)),
            None,
            "taken once"
        );
        m.remember(addr(1), t0, false);
        assert_eq!(m.take(addr(1), t0 + Duration::from_secs(61)), None, "stale");
        m.remember(addr(1), t0, false);
        m.remember(addr(1), t0, true);
        m.remember(addr(1), t0, false);
        assert_eq!(m.take(addr(1), t0), Some(true), "any session ended there");
        assert!(m.is_empty());
    }

    #[test]
    fn full_memory_forgets_the_oldest() {
        let t0 = Instant::now();
        let mut m = UnreachableMemory::new(2, Duration::from_secs(60));
        m.remember(addr(1), t0, false);
        m.remember(addr(2), t0, false);
        m.remember(addr(1), t0, false); // refreshed: now the newest
        m.remember(addr(3), t0, false);
        assert_eq!((m.len(), m.evictions()), (2, 1));
        assert_eq!(m.take(addr(2), t0), None, "the oldest went");
        assert!(m.take(addr(1), t0).is_some() && m.take(addr(3), t0).is_some());
    }
}
