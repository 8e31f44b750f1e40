//! The edge's local receivers per communication domain
//! (draarl-interconnect §5.1, §5.3; draarl-v1 §4.2): which local device
//! sessions a frame of a domain goes to, kept as one member list per
//! domain and turned into a partitioned [`Snapshot`] for the fan-out
//! engine when a frame needs it after a change, not per frame.
//!
//! ```text
//!  session installed / route changed ─▶ set(session, addr, route)   ┐ members per domain,
//!  session removed ───────────────────▶ remove(session)             ┘ that domain's snapshot dropped
//!  frame of domain d ─▶ snapshot(d): cached Arc<Snapshot> │ rebuilt from d's members (hit / rebuild counted)
//! ```
//!
//! A route's receive domains are `rx_domain_ids` when non-empty, else
//! `[domain_id]` (§3.7); a `disable_recv` route receives nothing; domain 0
//! is never a receive domain. Targets are de-duplicated per address (one
//! session per address at the edge, §3.8), so every session gets a frame
//! once.

use std::collections::HashMap;
use std::net::SocketAddr;
use std::sync::Arc;

use crate::codec::interconnect::messages::DeviceRoute;
use crate::model::Snapshot;

/// Receive domains kept per session (the centre's `MaxRxDomainsPerRoute`);
/// a route listing more is cut to its first ones.
pub const MAX_RX_DOMAINS_PER_SESSION: usize = 64;

/// Counters of the receiver lists.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct ReceiverCounters {
    /// Snapshots served from the cache.
    pub hits: u64,
    /// Snapshots rebuilt after a change.
    pub rebuilds: u64,
    /// Receive domains cut from routes listing more than
    /// [`MAX_RX_DOMAINS_PER_SESSION`].
    pub rx_domains_cut: u64,
}

#[derive(Debug, Default)]
struct Domain {
    members: HashMap<u64, SocketAddr>,
    snapshot: Option<Arc<Snapshot>>,
}

/// The receiver lists of every domain with a local receiver.
#[derive(Debug)]
pub struct EdgeReceivers {
    partitions: usize,
    sessions: HashMap<u64, Vec<u64>>,
    domains: HashMap<u64, Domain>,
    counters: ReceiverCounters,
}

/// The receive domains of `route` (none for a `disable_recv` route).
pub fn receive_domains(route: &DeviceRoute) -> Vec<u64> {
    if route.disable_recv {
        return Vec::new();
    }
    let mut out: Vec<u64> = if route.rx_domain_ids.is_empty() {
        vec![route.domain_id]
    } else {
        route.rx_domain_ids.clone()
    };
    out.retain(|d| *d != 0);
    out.sort_unstable();
    out.dedup();
    out
}

impl EdgeReceivers {
    /// Empty lists whose snapshots are split into `partitions` send paths
    /// (the fan-out engine's writers).
    pub fn new(partitions: usize) -> Self {
        Self {
            partitions: partitions.max(1),
            sessions: HashMap::new(),
            domains: HashMap::new(),
            counters: ReceiverCounters::default(),
        }
    }

    /// The counters.
    pub fn counters(&self) -> &ReceiverCounters {
        &self.counters
    }

    /// Domains with at least one receiver.
    pub fn domain_count(&self) -> usize {
        self.domains.len()
    }

    /// Lists (or re-lists) session `session_id` at `addr` in the receive
    /// domains of `route`.
    pub fn set(&mut self, session_id: u64, addr: SocketAddr, route: &DeviceRoute) {
        self.remove(session_id);
        let mut domains = receive_domains(route);
        if domains.len() > MAX_RX_DOMAINS_PER_SESSION {
            self.counters.rx_domains_cut += (domains.len() - MAX_RX_DOMAINS_PER_SESSION) as u64;
            domains.truncate(MAX_RX_DOMAINS_PER_SESSION);
        }
        for d in &domains {
            let entry = self.domains.entry(*d).or_default();
            entry.members.insert(session_id, addr);
            entry.snapshot = None;
        }
        if !domains.is_empty() {
            self.sessions.insert(session_id, domains);
        }
    }

    /// Removes session `session_id` from every list.
    pub fn remove(&mut self, session_id: u64) {
        let Some(domains) = self.sessions.remove(&session_id) else {
            return;
        };
        for d in domains {
            if let Some(entry) = self.domains.get_mut(&d) {
                entry.members.remove(&session_id);
                entry.snapshot = None;
                if entry.members.is_empty() {
                    self.domains.remove(&d);
                }
            }
        }
    }

    /// Forgets every list.
    pub fn clear(&mut self) {
        self.sessions.clear();
        self.domains.clear();
    }

    /// The receivers of `domain`, partitioned for the fan-out engine;
    /// `None` when the domain has no local receiver. Cached until the
    /// domain's members change.
    pub fn snapshot(&mut self, domain: u64) -> Option<Arc<Snapshot>> {
        let entry = self.domains.get_mut(&domain)?;
        if let Some(s) = &entry.snapshot {
            self.counters.hits += 1;
            return Some(Arc::clone(s));
        }
        let id = i64::try_from(domain).unwrap_or(i64::MAX);
        let s = Arc::new(Snapshot::build(
            id,
            entry.members.values().copied(),
            self.partitions,
        ));
        entry.snapshot = Some(Arc::clone(&s));
        self.counters.rebuilds += 1;
        Some(s)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn route(domain: u64, rx: &[u64], disable_recv: bool) -> DeviceRoute {
        DeviceRoute {
            session_id: 1,
            domain_id: domain,
            rx_domain_ids: rx.to_vec(),
            disable_recv,
            ..DeviceRoute::default()
        }
    }

    fn addr(n: u8) -> SocketAddr {
        SocketAddr::from(([127, 0, 0, n], 4000))
    }

    #[test]
    fn receive_domains_follow_the_route() {
        assert_eq!(receive_domains(&route(7, &[], false)), vec![7]);
        assert_eq!(receive_domains(&route(7, &[9, 0, 8, 9], false)), vec![8, 9]);
        assert!(receive_domains(&route(7, &[], true)).is_empty());
        assert!(receive_domains(&route(0, &[], false)).is_empty());
    }

    #[test]
    fn snapshots_are_cached_until_the_domain_changes() {
        let mut r = EdgeReceivers::new(2);
        r.set(1, addr(1), &route(7, &[], false));
        r.set(2, addr(2), &route(7, &[7, 8], false));
        r.set(3, addr(3), &route(8, &[], true));
        let a = r.snapshot(7).unwrap();
        assert_eq!(a.len(), 2);
        let b = r.snapshot(7).unwrap();
        assert!(Arc::ptr_eq(&a, &b));
        assert_eq!((r.counters().rebuilds, r.counters().hits), (1, 1));
        assert_eq!(r.snapshot(8).unwrap().partitions.concat(), vec![addr(2)]);
        // A change in domain 8 leaves domain 7's snapshot alone.
        r.set(4, addr(4), &route(8, &[], false));
        assert!(Arc::ptr_eq(&a, &r.snapshot(7).unwrap()));
        // Session 2 moves to domain 9 only: gone from 7 and 8.
        r.set(2, addr(2), &route(9, &[], false));
        assert_eq!(r.snapshot(7).unwrap().partitions.concat(), vec![addr(1)]);
        assert_eq!(r.snapshot(8).unwrap().partitions.concat(), vec![addr(4)]);
        r.remove(1);
        assert!(r.snapshot(7).is_none());
        assert_eq!(r.domain_count(), 2);
    }

    #[test]
    fn long_receive_lists_are_cut() {
        let mut r = EdgeReceivers::new(1);
        let rx: Vec<u64> = (1..=100).collect();
        r.set(1, addr(1), &route(1, &rx, false));
        assert_eq!(r.domain_count(), MAX_RX_DOMAINS_PER_SESSION);
        assert_eq!(r.counters().rx_domains_cut, 36);
        r.remove(1);
        assert_eq!(r.domain_count(), 0);
    }
}
