//! The per-account and per-network caps on online endpoints (see
//! [`EndpointPolicy`]): which endpoint each online device holds, and how
//! many each account and each /24 or /64 hold. Part of the cross-shard
//! [`Membership`](super::Membership), so that a check and the entry it
//! admits happen under one lock even when shards log devices in at once.

use std::collections::HashMap;
use std::net::SocketAddr;

use crate::model::{DeviceKey, EndpointPolicy, SourcePrefix};

/// Which cap refused a login.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum EndpointLimit {
    /// The account already has `max_per_account` endpoints online.
    Account,
    /// The source's /24 or /64 already has `max_per_prefix` endpoints online.
    Prefix,
}

/// Online endpoints by device, with counts per account and per prefix.
/// Bounded by the devices online; counts are removed when they reach 0.
#[derive(Debug, Default)]
pub struct EndpointCaps {
    /// Each online device's endpoint, and whether it is counted (exempt
    /// sources are not).
    held: HashMap<DeviceKey, (SocketAddr, bool)>,
    per_account: HashMap<i64, usize>,
    per_prefix: HashMap<SourcePrefix, usize>,
}

impl EndpointCaps {
    /// Admits device `key` at `addr` under `policy`, or says which cap is
    /// full. The device's own current entry does not count against it (a
    /// device logging in again from a new port replaces its entry), and an
    /// admitted device replaces that entry.
    pub fn claim(
        &mut self,
        key: DeviceKey,
        addr: SocketAddr,
        policy: &EndpointPolicy,
    ) -> Result<(), EndpointLimit> {
        if self.held.get(&key).is_some_and(|(a, _)| *a == addr) {
            return Ok(());
        }
        let counted = !policy.exempt(addr);
        if counted {
            let prefix = SourcePrefix::of(addr.ip());
            let (own_account, own_prefix) = match self.held.get(&key) {
                Some((a, true)) => (1, usize::from(SourcePrefix::of(a.ip()) == prefix)),
                _ => (0, 0),
            };
            let account = self.per_account.get(&key.0).copied().unwrap_or(0) - own_account;
            if account >= policy.max_per_account {
                return Err(EndpointLimit::Account);
            }
            let in_prefix = self.per_prefix.get(&prefix).copied().unwrap_or(0) - own_prefix;
            if in_prefix >= policy.max_per_prefix {
                return Err(EndpointLimit::Prefix);
            }
        }
        self.release(key);
        self.held.insert(key, (addr, counted));
        if counted {
            *self.per_account.entry(key.0).or_default() += 1;
            *self
                .per_prefix
                .entry(SourcePrefix::of(addr.ip()))
                .or_default() += 1;
        }
        Ok(())
    }

    /// Forgets device `key`'s endpoint (it went offline).
    pub fn release(&mut self, key: DeviceKey) {
        let Some((addr, counted)) = self.held.remove(&key) else {
            return;
        };
        if counted {
            decrement(&mut self.per_account, key.0);
            decrement(&mut self.per_prefix, SourcePrefix::of(addr.ip()));
        }
    }

    /// Counted endpoints of account `user_id` online.
    pub fn of_account(&self, user_id: i64) -> usize {
        self.per_account.get(&user_id).copied().unwrap_or(0)
    }
}

fn decrement<K: std::hash::Hash + Eq>(m: &mut HashMap<K, usize>, k: K) {
    if let Some(n) = m.get_mut(&k) {
        *n -= 1;
        if *n == 0 {
            m.remove(&k);
        }
    }
}

#[cfg(test)]
mod tests {
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

    #[test]
    fn account_cap_counts_other_devices_not_the_same_one() {
        let p = policy(2, 100);
        let mut c = EndpointCaps::default();
        assert_eq!(c.claim((1, 1), a("192.0.2.1:1000"), &p), Ok(()));
        assert_eq!(c.claim((1, 2), a("198.51.100.1:1000"), &p), Ok(()));
        assert_eq!(
            c.claim((1, 3), a("203.0.113.1:1000"), &p),
            Err(EndpointLimit::Account)
        );
        // Device (1, 1) logs in again from a new port and a new network.
        assert_eq!(c.claim((1, 1), a("203.0.113.9:2000"), &p), Ok(()));
        assert_eq!(c.of_account(1), 2);
        // Another account is not affected; a device that left frees its entry.
        assert_eq!(c.claim((2, 1), a("203.0.113.2:1000"), &p), Ok(()));
        c.release((1, 2));
        assert_eq!(c.claim((1, 3), a("203.0.113.1:1000"), &p), Ok(()));
    }

    #[test]
    fn prefix_cap_spans_accounts_and_loopback_is_exempt() {
        let p = policy(8, 2);
        let mut c = EndpointCaps::default();
        assert_eq!(c.claim((1, 1), a("192.0.2.1:1"), &p), Ok(()));
        assert_eq!(c.claim((2, 1), a("192.0.2.200:1"), &p), Ok(()));
        assert_eq!(
            c.claim((3, 1), a("192.0.2.7:1"), &p),
            Err(EndpointLimit::Prefix)
        );
        assert_eq!(c.claim((3, 1), a("192.0.3.7:1"), &p), Ok(()));
        // Moving within the prefix is not a new endpoint of the prefix.
        assert_eq!(c.claim((1, 1), a("192.0.2.1:2"), &p), Ok(()));
        for ssid in 1..=20 {
            assert_eq!(c.claim((4, ssid), a("127.0.0.1:5"), &p), Ok(()));
        }
        let strict = EndpointPolicy {
            exempt_loopback: false,
            ..p
        };
        assert_eq!(
            c.claim((5, 1), a("127.0.0.2:1"), &strict),
            Ok(()),
            "exempt entries are not counted"
        );
        assert_eq!(c.claim((5, 2), a("127.0.0.3:1"), &strict), Ok(()));
        assert_eq!(
            c.claim((5, 3), a("127.0.0.4:1"), &strict),
            Err(EndpointLimit::Prefix)
        );
    }
}
