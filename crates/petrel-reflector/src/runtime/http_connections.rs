//! The HTTP endpoint's table of open connections and its admission rule.
//!
//! A new connection is refused (the caller answers `503`) when its source
//! address already has `max_connections_per_ip` open or its source prefix
//! (/24 for IPv4, /64 for IPv6, [`SourcePrefix`]) has
//! `max_connections_per_prefix` open: rotating addresses within one network
//! gains nothing. When all `max_connections` are open, the newcomer evicts
//! the oldest connection that has not yet sent its complete request
//! headers, rather than being refused: an idle or slow connection holds a
//! slot only until newer clients need it, so half-sent requests cannot
//! lock the admin (or anyone) out. Only when every open connection has sent
//! its headers is the newcomer refused. A connection that sent its headers
//! is being served and ends within the request timeout.
//!
//! Pure bookkeeping (no lock, no socket): the accept loop in
//! `http_server.rs` holds it under a mutex and closes what it evicts. Every
//! map holds only open connections, so all are bounded by
//! `max_connections`.

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::hash::Hash;
use std::net::IpAddr;

use crate::model::SourcePrefix;

/// Caps of a [`ConnectionTable`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct ConnectionCaps {
    /// Connections open at once.
    pub(crate) total: usize,
    /// Connections open at once from one source address.
    pub(crate) per_address: usize,
    /// Connections open at once from one source prefix.
    pub(crate) per_prefix: usize,
}

/// What [`ConnectionTable::admit`] decided.
#[derive(Debug, PartialEq, Eq)]
pub(crate) enum Admission<H> {
    /// Admitted as connection `id`; `evicted` is the handle of the
    /// connection it displaced (the caller closes it).
    Admitted { id: u64, evicted: Option<H> },
    /// Every slot is held by a connection that sent its headers.
    Full,
    /// The source address has `per_address` connections open.
    AddressFull,
    /// The source prefix has `per_prefix` connections open.
    PrefixFull,
}

#[derive(Debug)]
struct Open<H> {
    ip: IpAddr,
    handle: H,
}

/// Open connections by id (ids grow, so the smallest is the oldest), with
/// counts per source address and prefix.
#[derive(Debug)]
pub(crate) struct ConnectionTable<H> {
    caps: ConnectionCaps,
    next_id: u64,
    open: BTreeMap<u64, Open<H>>,
    awaiting_headers: BTreeSet<u64>,
    per_address: HashMap<IpAddr, usize>,
    per_prefix: HashMap<SourcePrefix, usize>,
}

impl<H> ConnectionTable<H> {
    /// An empty table; every cap at least 1.
    pub(crate) fn new(caps: ConnectionCaps) -> Self {
        Self {
            caps: ConnectionCaps {
                total: caps.total.max(1),
                per_address: caps.per_address.max(1),
                per_prefix: caps.per_prefix.max(1),
            },
            next_id: 0,
            open: BTreeMap::new(),
            awaiting_headers: BTreeSet::new(),
            per_address: HashMap::new(),
            per_prefix: HashMap::new(),
        }
    }

    /// Admits a connection from `ip` (closed by `handle` if it is evicted
    /// later), evicting the oldest connection still awaiting its headers
    /// when every slot is taken. The source caps are checked first, so a
    /// source at its cap cannot evict anyone.
    pub(crate) fn admit(&mut self, ip: IpAddr, handle: H) -> Admission<H> {
        let ip = ip.to_canonical();
        let prefix = SourcePrefix::of(ip);
        if count(&self.per_address, &ip) >= self.caps.per_address {
            return Admission::AddressFull;
        }
        if count(&self.per_prefix, &prefix) >= self.caps.per_prefix {
            return Admission::PrefixFull;
        }
        let evicted = if self.open.len() >= self.caps.total {
            let Some(oldest) = self.awaiting_headers.first().copied() else {
                return Admission::Full;
            };
            self.remove(oldest)
        } else {
            None
        };
        let id = self.next_id;
        self.next_id += 1;
        self.open.insert(id, Open { ip, handle });
        self.awaiting_headers.insert(id);
        *self.per_address.entry(ip).or_insert(0) += 1;
        *self.per_prefix.entry(prefix).or_insert(0) += 1;
        Admission::Admitted { id, evicted }
    }

    /// Connection `id` has sent its request headers: it is no longer
    /// evictable. Nothing if it was evicted already.
    pub(crate) fn headers_complete(&mut self, id: u64) {
        self.awaiting_headers.remove(&id);
    }

    /// Connection `id` has closed; its handle, or `None` if it was evicted
    /// (and so already uncounted).
    pub(crate) fn remove(&mut self, id: u64) -> Option<H> {
        let Open { ip, handle } = self.open.remove(&id)?;
        self.awaiting_headers.remove(&id);
        uncount(&mut self.per_address, ip);
        uncount(&mut self.per_prefix, SourcePrefix::of(ip));
        Some(handle)
    }

    /// Connections open.
    #[cfg(test)]
    fn len(&self) -> usize {
        self.open.len()
    }
}

fn count<K: Hash + Eq>(map: &HashMap<K, usize>, key: &K) -> usize {
    map.get(key).copied().unwrap_or(0)
}

fn uncount<K: Hash + Eq>(map: &mut HashMap<K, usize>, key: K) {
    if let Some(n) = map.get_mut(&key) {
        *n = n.saturating_sub(1);
        if *n == 0 {
            map.remove(&key);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ip(s: &str) -> IpAddr {
        s.parse().unwrap()
    }

    fn caps(total: usize, per_address: usize, per_prefix: usize) -> ConnectionCaps {
        ConnectionCaps {
            total,
            per_address,
            per_prefix,
        }
    }

    fn admitted<H: std::fmt::Debug>(a: Admission<H>) -> (u64, Option<H>) {
        match a {
            Admission::Admitted { id, evicted } => (id, evicted),
            other => panic!("refused: {other:?}"),
        }
    }

    #[test]
    fn a_full_table_evicts_the_oldest_connection_without_headers() {
        let mut t = ConnectionTable::new(caps(3, 8, 8));
        let (a, _) = admitted(t.admit(ip("192.0.2.1"), "a"));
        let (b, _) = admitted(t.admit(ip("198.51.100.1"), "b"));
        let (_c, _) = admitted(t.admit(ip("203.0.113.1"), "c"));
        // `a` is being served; `b` is the oldest still idle.
        t.headers_complete(a);
        assert_eq!(admitted(t.admit(ip("10.0.0.1"), "d")).1, Some("b"));
        assert_eq!(t.len(), 3);
        // The evicted connection's own close finds nothing to uncount.
        assert_eq!(t.remove(b), None);
        assert_eq!(admitted(t.admit(ip("10.0.1.1"), "e")).1, Some("c"));
        // Once every connection has sent its headers, newcomers are refused.
        for id in 0..10 {
            t.headers_complete(id);
        }
        assert_eq!(t.admit(ip("10.0.2.1"), "f"), Admission::Full);
        assert_eq!(t.remove(a), Some("a"));
        assert!(matches!(
            t.admit(ip("10.0.2.1"), "f"),
            Admission::Admitted { evicted: None, .. }
        ));
    }

    #[test]
    fn sources_are_capped_per_address_and_per_prefix() {
        let mut t = ConnectionTable::new(caps(100, 2, 3));
        admitted(t.admit(ip("192.0.2.1"), 1));
        admitted(t.admit(ip("::ffff:192.0.2.1"), 2));
        // The mapped form is the same address.
        assert_eq!(t.admit(ip("192.0.2.1"), 3), Admission::AddressFull);
        // Another address of the /24 fills the prefix.
        let (id, _) = admitted(t.admit(ip("192.0.2.200"), 4));
        assert_eq!(t.admit(ip("192.0.2.99"), 5), Admission::PrefixFull);
        assert!(matches!(
            t.admit(ip("192.0.3.1"), 6),
            Admission::Admitted { .. }
        ));
        // IPv6 addresses of one /64 share the prefix cap.
        for n in 1..=3 {
            admitted(t.admit(ip(&format!("2001:db8:1:2::{n}")), 7));
        }
        assert_eq!(
            t.admit(ip("2001:db8:1:2:ffff::1"), 8),
            Admission::PrefixFull
        );
        // Closing frees the source's count.
        assert_eq!(t.remove(id), Some(4));
        admitted(t.admit(ip("192.0.2.99"), 9));
    }

    #[test]
    fn a_source_at_its_cap_cannot_evict_anyone() {
        let mut t = ConnectionTable::new(caps(2, 1, 8));
        admitted(t.admit(ip("192.0.2.1"), 1));
        admitted(t.admit(ip("198.51.100.1"), 2));
        assert_eq!(t.admit(ip("192.0.2.1"), 3), Admission::AddressFull);
        assert_eq!(t.len(), 2);
        // A new source evicts the oldest idle connection.
        assert_eq!(admitted(t.admit(ip("203.0.113.1"), 4)).1, Some(1));
        // The evicted source may come back (evicting the next oldest).
        assert_eq!(admitted(t.admit(ip("192.0.2.1"), 5)).1, Some(2));
    }
}
