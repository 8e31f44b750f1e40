//! The centre's limit on node authentication attempts
//! (draarl-interconnect §7 `AuthAttemptsPerMinutePerIP`, §3.2 step 4):
//! well-formed hellos per remote IP per wall-clock minute, at most 4096
//! addresses tracked. A new address in a full table evicts the least
//! recently seen one (counted) rather than being refused, so a flood from
//! many addresses cannot lock a newcomer out.

use std::net::IpAddr;

use hashlink::LinkedHashMap;

/// Addresses tracked at most (§7).
pub const AUTH_ATTEMPT_ADDRESSES: usize = 4096;

#[derive(Debug, Clone, Copy)]
struct Window {
    minute: i64,
    attempts: u32,
}

/// Per-IP attempt counts in windows aligned to whole wall-clock minutes.
#[derive(Debug)]
pub struct AuthAttempts {
    per_minute: u32,
    capacity: usize,
    table: LinkedHashMap<IpAddr, Window>,
    evictions: u64,
}

impl AuthAttempts {
    /// `per_minute` attempts per address per minute, at most `capacity`
    /// (at least 1) addresses tracked.
    pub fn new(per_minute: u32, capacity: usize) -> Self {
        Self {
            per_minute,
            capacity: capacity.max(1),
            table: LinkedHashMap::new(),
            evictions: 0,
        }
    }

    /// Charges one attempt from `ip` at the wall clock `wall_ms` (Unix ms);
    /// `false` when `ip` already made `per_minute` in this minute.
    pub fn admit(&mut self, ip: IpAddr, wall_ms: i64) -> bool {
        let minute = wall_ms.div_euclid(60_000);
        let w = match self.table.remove(&ip) {
            Some(w) if w.minute == minute => w,
            _ => {
                if self.table.len() >= self.capacity {
                    self.table.pop_front();
                    self.evictions += 1;
                }
                Window {
                    minute,
                    attempts: 0,
                }
            }
        };
        let allowed = w.attempts < self.per_minute;
        let attempts = if allowed { w.attempts + 1 } else { w.attempts };
        self.table.insert(ip, Window { minute, attempts });
        allowed
    }

    /// Addresses tracked.
    pub fn len(&self) -> usize {
        self.table.len()
    }

    /// Whether no address is tracked.
    pub fn is_empty(&self) -> bool {
        self.table.is_empty()
    }

    /// Addresses evicted to make room so far.
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
    fn attempts_per_minute_then_refused_until_the_next_minute() {
        let mut a = AuthAttempts::new(3, 16);
        let t = 120_000;
        assert!((0..3).all(|i| a.admit(ip(1), t + i)));
        assert!(!a.admit(ip(1), t + 59_999));
        assert!(a.admit(ip(2), t + 10), "other addresses are not affected");
        assert!(a.admit(ip(1), t + 60_000), "a new minute starts afresh");
    }

    #[test]
    fn a_full_table_evicts_the_least_recent_address() {
        let mut a = AuthAttempts::new(1, 2);
        assert!(a.admit(ip(1), 0));
        assert!(a.admit(ip(2), 0));
        assert!(!a.admit(ip(1), 1), "ip 1 is now the most recent");
        assert!(a.admit(ip(3), 2), "a newcomer is admitted");
        assert_eq!((a.len(), a.evictions()), (2, 1));
        // ip 2 was evicted and starts afresh, evicting ip 1 in turn.
        assert!(a.admit(ip(2), 3));
        assert_eq!(a.evictions(), 2);
        assert!(!a.admit(ip(3), 4), "ip 3 is still tracked");
    }
}
