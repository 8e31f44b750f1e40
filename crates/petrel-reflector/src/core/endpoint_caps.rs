//! The per-account and per-network caps on online endpoints (see
//! [`EndpointPolicy`]): which endpoint each online device holds, when it
//! was last heard, and how many each account and each /24 or /64 hold.
//! Part of the cross-shard [`Membership`](super::Membership), so that a
//! check and the entry it admits happen under one lock even when shards
//! log devices in at once.
//!
//! A full account refuses one more endpoint. A full network evicts rather
//! than refuse a newcomer, so accounts that fill a /24 with forged
//! endpoints cannot keep that network's real users out: the newcomer takes
//! the place of the least recently heard endpoint among the accounts that
//! hold the most endpoints in that network, unless its own account already
//! holds that many (then it is refused as before). An account within its
//! fair share is thus never evicted by one that holds more, and whoever
//! fills a network only churns its own endpoints. Finding the victim scans
//! the network's entries (at most `max_per_prefix`), only when it is full.

use std::collections::{HashMap, HashSet};
use std::net::SocketAddr;
use std::time::Instant;

use crate::model::{DeviceKey, EndpointPolicy, SourcePrefix};

/// Which cap refused a login.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum EndpointLimit {
    /// The account already has `max_per_account` endpoints online.
    Account,
    /// The source's /24 or /64 already has `max_per_prefix` endpoints
    /// online and the account already holds as many of them as any other.
    Prefix,
}

/// An online device's endpoint entry.
#[derive(Debug, Clone, Copy)]
struct Held {
    addr: SocketAddr,
    /// Whether it counts against the caps (exempt sources do not).
    counted: bool,
    /// When its device was last heard there (login or heartbeat).
    heard: Instant,
}

/// Online endpoints by device, with counts per account and per prefix.
/// Bounded by the devices online; counts are removed when they reach 0.
#[derive(Debug, Default)]
pub struct EndpointCaps {
    held: HashMap<DeviceKey, Held>,
    per_account: HashMap<i64, usize>,
    /// Counted devices in each prefix.
    per_prefix: HashMap<SourcePrefix, HashSet<DeviceKey>>,
    evictions: u64,
}

impl EndpointCaps {
    /// Admits device `key` at `addr` under `policy`, heard at `now`, or says
    /// which cap is full. The device's own current entry does not count
    /// against it (a device logging in again from a new port replaces its
    /// entry), and an admitted device replaces that entry. In a full prefix
    /// the admitted device may evict another (see the module docs), which
    /// is returned: it no longer holds an endpoint.
    pub fn claim(
        &mut self,
        key: DeviceKey,
        addr: SocketAddr,
        policy: &EndpointPolicy,
        now: Instant,
    ) -> Result<Option<DeviceKey>, EndpointLimit> {
        self.claim_counting(key, addr, policy, now, 0)
    }

    /// [`claim`](Self::claim), with `elsewhere` counted endpoints of the
    /// account held on other nodes (a centre's edges; draarl-interconnect
    /// §3.8), so that the account cap holds over the whole cluster. The
    /// prefix cap stays local: a prefix's endpoints on another node are that
    /// node's to bound.
    pub fn claim_counting(
        &mut self,
        key: DeviceKey,
        addr: SocketAddr,
        policy: &EndpointPolicy,
        now: Instant,
        elsewhere: usize,
    ) -> Result<Option<DeviceKey>, EndpointLimit> {
        if let Some(h) = self.held.get_mut(&key).filter(|h| h.addr == addr) {
            h.heard = now;
            return Ok(None);
        }
        let counted = !policy.exempt(addr);
        let mut evicted = None;
        if counted {
            let prefix = SourcePrefix::of(addr.ip());
            let (own_account, own_prefix) = match self.held.get(&key) {
                Some(h) if h.counted => (1, SourcePrefix::of(h.addr.ip()) == prefix),
                _ => (0, false),
            };
            let account =
                self.per_account.get(&key.0).copied().unwrap_or(0) - own_account + elsewhere;
            if account >= policy.max_per_account {
                return Err(EndpointLimit::Account);
            }
            let in_prefix = self.per_prefix.get(&prefix).map_or(0, HashSet::len);
            if in_prefix - usize::from(own_prefix) >= policy.max_per_prefix {
                let victim = self.victim(prefix, key).ok_or(EndpointLimit::Prefix)?;
                self.release(victim);
                self.evictions += 1;
                evicted = Some(victim);
            }
        }
        self.release(key);
        self.held.insert(
            key,
            Held {
                addr,
                counted,
                heard: now,
            },
        );
        if counted {
            *self.per_account.entry(key.0).or_default() += 1;
            self.per_prefix
                .entry(SourcePrefix::of(addr.ip()))
                .or_default()
                .insert(key);
        }
        Ok(evicted)
    }

    /// The device of full `prefix` that a device of `key`'s account
    /// displaces: the least recently heard of the accounts holding the most
    /// there, if `key`'s account holds fewer (its own entry not counted).
    fn victim(&self, prefix: SourcePrefix, key: DeviceKey) -> Option<DeviceKey> {
        let keys = self.per_prefix.get(&prefix)?;
        let mut counts: HashMap<i64, usize> = HashMap::new();
        for k in keys.iter().filter(|k| **k != key) {
            *counts.entry(k.0).or_default() += 1;
        }
        let mine = counts.get(&key.0).copied().unwrap_or(0);
        let most = counts.values().copied().max()?;
        if mine >= most {
            return None;
        }
        keys.iter()
            .filter(|k| counts.get(&k.0) == Some(&most))
            .filter_map(|k| Some((self.held.get(k)?.heard, *k)))
            .min()
            .map(|(_, k)| k)
    }

    /// Records that device `key` was heard at `addr` at `now`; false if it
    /// holds no entry there (it was evicted, or never admitted there).
    pub fn renew(&mut self, key: DeviceKey, addr: SocketAddr, now: Instant) -> bool {
        match self.held.get_mut(&key) {
            Some(h) if h.addr == addr => {
                h.heard = now;
                true
            }
            _ => false,
        }
    }

    /// Whether device `key` holds an entry at `addr`.
    pub fn holds(&self, key: DeviceKey, addr: SocketAddr) -> bool {
        self.held.get(&key).is_some_and(|h| h.addr == addr)
    }

    /// Forgets device `key`'s endpoint (it went offline or was evicted).
    pub fn release(&mut self, key: DeviceKey) {
        let Some(h) = self.held.remove(&key) else {
            return;
        };
        if !h.counted {
            return;
        }
        if let Some(n) = self.per_account.get_mut(&key.0) {
            *n -= 1;
            if *n == 0 {
                self.per_account.remove(&key.0);
            }
        }
        let prefix = SourcePrefix::of(h.addr.ip());
        if let Some(keys) = self.per_prefix.get_mut(&prefix) {
            keys.remove(&key);
            if keys.is_empty() {
                self.per_prefix.remove(&prefix);
            }
        }
    }

    /// Counted endpoints of account `user_id` online.
    pub fn of_account(&self, user_id: i64) -> usize {
        self.per_account.get(&user_id).copied().unwrap_or(0)
    }

    /// Counted endpoints of `key`'s account online, leaving out `key`'s
    /// own (a login of that device replaces it).
    pub fn of_account_except(&self, key: DeviceKey) -> usize {
        let own = self.held.get(&key).is_some_and(|h| h.counted);
        self.of_account(key.0) - usize::from(own)
    }

    /// Endpoints evicted from full prefixes so far.
    pub fn evictions(&self) -> u64 {
        self.evictions
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;

    fn a(s: &str) -> SocketAddr {
        s.parse().unwrap()
    }

    fn policy(account: usize, prefix: usize) -> EndpointPolicy {
        EndpointPolicy {
            max_per_account: account,
            max_per_prefix: prefix,
            ..EndpointPolicy::default()
        }
    }

    fn at(s: u64) -> Instant {
        crate::test_clock::origin() + Duration::from_secs(s)
    }

    #[test]
    fn account_cap_counts_other_devices_not_the_same_one() {
        let p = policy(2, 100);
        let mut c = EndpointCaps::default();
        let t = at(0);
        assert_eq!(c.claim((1, 1), a("192.0.2.1:1000"), &p, t), Ok(None));
        assert_eq!(c.claim((1, 2), a("198.51.100.1:1000"), &p, t), Ok(None));
        assert_eq!(
            c.claim((1, 3), a("203.0.113.1:1000"), &p, t),
            Err(EndpointLimit::Account)
        );
        // Device (1, 1) logs in again from a new port and a new network.
        assert_eq!(c.claim((1, 1), a("203.0.113.9:2000"), &p, t), Ok(None));
        assert_eq!(c.of_account(1), 2);
        // Another account is not affected; a device that left frees its entry.
        assert_eq!(c.claim((2, 1), a("203.0.113.2:1000"), &p, t), Ok(None));
        c.release((1, 2));
        assert_eq!(c.claim((1, 3), a("203.0.113.1:1000"), &p, t), Ok(None));
    }

    #[test]
    fn endpoints_held_elsewhere_count_against_the_account_cap() {
        let p = policy(3, 100);
        let mut c = EndpointCaps::default();
        let t = at(0);
        // Two of the account's endpoints are on an edge: one fits here.
        assert_eq!(
            c.claim_counting((1, 1), a("192.0.2.1:1"), &p, t, 2),
            Ok(None)
        );
        assert_eq!(
            c.claim_counting((1, 2), a("192.0.2.2:1"), &p, t, 2),
            Err(EndpointLimit::Account)
        );
        // The device already held here moves without counting itself.
        assert_eq!(
            c.claim_counting((1, 1), a("192.0.2.3:1"), &p, t, 2),
            Ok(None)
        );
        // With the edge sessions gone, the account has room again.
        assert_eq!(
            c.claim_counting((1, 2), a("192.0.2.2:1"), &p, t, 0),
            Ok(None)
        );
    }

    #[test]
    fn prefix_cap_spans_accounts_and_loopback_is_exempt() {
        let p = policy(8, 2);
        let mut c = EndpointCaps::default();
        assert_eq!(c.claim((1, 1), a("192.0.2.1:1"), &p, at(0)), Ok(None));
        assert_eq!(c.claim((2, 1), a("192.0.2.200:1"), &p, at(1)), Ok(None));
        // Full: account 3 holds fewer than accounts 1 and 2 (one each), so
        // it takes the place of the least recently heard of them.
        assert_eq!(
            c.claim((3, 1), a("192.0.2.7:1"), &p, at(2)),
            Ok(Some((1, 1)))
        );
        assert!(!c.holds((1, 1), a("192.0.2.1:1")));
        assert_eq!(c.evictions(), 1);
        assert_eq!(c.claim((4, 1), a("192.0.3.7:1"), &p, at(3)), Ok(None));
        // Moving within the prefix is not a new endpoint of the prefix.
        assert_eq!(c.claim((2, 1), a("192.0.2.200:2"), &p, at(4)), Ok(None));
        assert_eq!(c.evictions(), 1);
        for ssid in 1..=20 {
            assert_eq!(c.claim((4, ssid), a("127.0.0.1:5"), &p, at(5)), Ok(None));
        }
        let strict = EndpointPolicy {
            exempt_loopback: false,
            ..p
        };
        assert_eq!(
            c.claim((5, 1), a("127.0.0.2:1"), &strict, at(6)),
            Ok(None),
            "exempt entries are not counted"
        );
        assert_eq!(c.claim((5, 2), a("127.0.0.3:1"), &strict, at(6)), Ok(None));
        // Account 5 holds the whole prefix: one more is refused.
        assert_eq!(
            c.claim((5, 3), a("127.0.0.4:1"), &strict, at(7)),
            Err(EndpointLimit::Prefix)
        );
    }

    /// Four accounts fill a /24's 32 endpoints (8 each); a newcomer takes
    /// the place of the least recently heard endpoint of the accounts
    /// holding the most; the evicted account, back with one fewer, displaces
    /// another of the largest holders, never the newcomer; an account at the
    /// largest share asking for more is refused (the per-account cap is 9
    /// here, so that it is the prefix rule that refuses).
    #[test]
    fn a_full_prefix_evicts_from_the_largest_holder_not_the_newcomer() {
        let p = policy(9, 32);
        let mut c = EndpointCaps::default();
        let mut s = 0;
        for user in 1..=4 {
            for ssid in 1..=8u8 {
                let src = a(&format!("198.51.100.{}:1", user * 8 + i64::from(ssid)));
                assert_eq!(c.claim((user, ssid), src, &p, at(s)), Ok(None));
                s += 1;
            }
        }
        // Every forged endpoint heard again except (2, 3).
        for user in 1..=4 {
            for ssid in 1..=8u8 {
                if (user, ssid) != (2, 3) {
                    let src = a(&format!("198.51.100.{}:1", user * 8 + i64::from(ssid)));
                    assert!(c.renew((user, ssid), src, at(100)));
                }
            }
        }
        let newcomer = a("198.51.100.250:1");
        assert_eq!(c.claim((9, 1), newcomer, &p, at(101)), Ok(Some((2, 3))));
        // (2, 3) comes back: account 2 holds 7 < 8, so it displaces the least
        // recently heard endpoint of accounts 1, 3 and 4: (1, 1), heard at 100
        // like the others but first by key.
        let back = a("198.51.100.19:1");
        assert!(!c.renew((2, 3), back, at(102)));
        assert_eq!(c.claim((2, 3), back, &p, at(102)), Ok(Some((1, 1))));
        assert!(c.holds((9, 1), newcomer));
        // Account 3 is at the largest share (8): one more is refused.
        assert_eq!(
            c.claim((3, 9), a("198.51.100.251:1"), &p, at(103)),
            Err(EndpointLimit::Prefix)
        );
        assert_eq!(c.evictions(), 2);
        assert_eq!(c.of_account(1), 7);
    }
}
