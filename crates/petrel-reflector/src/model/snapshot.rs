//! Receiver snapshots: the deduplicated target endpoints of one forwarding
//! domain, pre-partitioned by endpoint hash so a target always goes through
//! the same send path (per-target order, draarl-v1 §4.2).
//!
//! Session-aware receivers (app sessions, `specs/draarl-apps.md` §2.7) are
//! kept apart: they get the copy of a frame whose Reserved holds the
//! sender's group. A UDP address gets one copy per frame whichever way it
//! is listed (a session-aware listing wins), a WebSocket connection one.

use std::net::{IpAddr, SocketAddr};

use super::endpoint::{ConnectionId, Endpoint};

use petrel_sys::hash::{fnv1a64, fnv1a64_from};

/// The receivers of one domain at one moment.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Snapshot {
    /// Domain the snapshot belongs to.
    pub domain_id: i64,
    /// Physical-device targets (Reserved 0), one list per send path.
    pub partitions: Vec<Vec<SocketAddr>>,
    /// Session-aware UDP targets (Reserved = source group), one list per
    /// send path; never also in `partitions`.
    pub aware: Vec<Vec<SocketAddr>>,
    /// Session-aware WebSocket targets, ascending.
    pub websockets: Vec<ConnectionId>,
}

impl Snapshot {
    /// Builds a snapshot from (possibly repeated) endpoints.
    pub fn build(
        domain_id: i64,
        endpoints: impl IntoIterator<Item = SocketAddr>,
        partitions: usize,
    ) -> Self {
        Self::build_with_sessions(domain_id, endpoints, [], partitions)
    }

    /// Builds a snapshot from physical-device endpoints and app-session
    /// endpoints (either possibly repeated).
    pub fn build_with_sessions(
        domain_id: i64,
        endpoints: impl IntoIterator<Item = SocketAddr>,
        sessions: impl IntoIterator<Item = Endpoint>,
        partitions: usize,
    ) -> Self {
        let n = partitions.max(1);
        let mut aware_all = Vec::new();
        let mut websockets = Vec::new();
        for e in sessions {
            match e {
                Endpoint::Udp(a) => aware_all.push(a),
                Endpoint::WebSocket(c) => websockets.push(c),
            }
        }
        aware_all.sort_unstable();
        aware_all.dedup();
        websockets.sort_unstable();
        websockets.dedup();
        let mut all: Vec<SocketAddr> = endpoints.into_iter().collect();
        all.sort_unstable();
        all.dedup();
        all.retain(|a| aware_all.binary_search(a).is_err());
        let split = |list: Vec<SocketAddr>| {
            let mut parts = vec![Vec::new(); n];
            for a in list {
                parts[partition_of(a, n)].push(a);
            }
            parts
        };
        Self {
            domain_id,
            partitions: split(all),
            aware: split(aware_all),
            websockets,
        }
    }

    /// Total targets.
    pub fn len(&self) -> usize {
        self.partitions
            .iter()
            .chain(&self.aware)
            .map(Vec::len)
            .sum::<usize>()
            + self.websockets.len()
    }

    /// Whether the snapshot has no target.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Whether some target is session-aware (needs the source-group copy).
    pub fn has_sessions(&self) -> bool {
        !self.websockets.is_empty() || self.aware.iter().any(|p| !p.is_empty())
    }
}

/// The send path of `a` among `n`: [`endpoint_hash`] modulo `n`.
pub fn partition_of(a: SocketAddr, n: usize) -> usize {
    (endpoint_hash(a) % n.max(1) as u64) as usize
}

/// FNV-1a-64 over the address bytes (4 or 16) and the big-endian port;
/// stable across runs and processes.
pub fn endpoint_hash(a: SocketAddr) -> u64 {
    let h = match a.ip() {
        IpAddr::V4(v) => fnv1a64(v.octets()),
        IpAddr::V6(v) => fnv1a64(v.octets()),
    };
    fnv1a64_from(h, a.port().to_be_bytes())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn dedups_and_partitions_stably() {
        let a: SocketAddr = "127.0.0.1:1000".parse().unwrap();
        let b: SocketAddr = "127.0.0.2:1000".parse().unwrap();
        let s = Snapshot::build(1, [a, b, a], 4);
        assert_eq!(s.len(), 2);
        assert!(s.partitions[partition_of(a, 4)].contains(&a));
        assert!(s.partitions[partition_of(b, 4)].contains(&b));
        assert!(!s.has_sessions());
    }

    #[test]
    fn a_session_aware_address_gets_one_copy() {
        let a: SocketAddr = "127.0.0.1:1000".parse().unwrap();
        let b: SocketAddr = "127.0.0.2:1000".parse().unwrap();
        let s = Snapshot::build_with_sessions(
            1,
            [a, b],
            [
                Endpoint::Udp(a),
                Endpoint::Udp(a),
                Endpoint::WebSocket(3),
                Endpoint::WebSocket(3),
            ],
            2,
        );
        assert_eq!(s.len(), 3);
        assert_eq!(s.partitions.concat(), vec![b]);
        assert_eq!(s.aware.concat(), vec![a]);
        assert_eq!(s.websockets, vec![3]);
        assert!(s.has_sessions());
    }
}
