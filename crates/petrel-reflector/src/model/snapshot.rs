//! Receiver snapshots: the deduplicated target endpoints of one forwarding
//! domain, pre-partitioned by endpoint hash so a target always goes through
//! the same send path (per-target order, draarl-v1 §4.2).

use std::net::{IpAddr, SocketAddr};

use petrel_sys::hash::{fnv1a64, fnv1a64_from};

/// The receivers of one domain at one moment.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Snapshot {
    /// Domain the snapshot belongs to.
    pub domain_id: i64,
    /// Targets, one list per send path.
    pub partitions: Vec<Vec<SocketAddr>>,
}

impl Snapshot {
    /// Builds a snapshot from (possibly repeated) endpoints.
    pub fn build(
        domain_id: i64,
        endpoints: impl IntoIterator<Item = SocketAddr>,
        partitions: usize,
    ) -> Self {
        let n = partitions.max(1);
        let mut all: Vec<SocketAddr> = endpoints.into_iter().collect();
        all.sort_unstable();
        all.dedup();
        let mut parts = vec![Vec::new(); n];
        for a in all {
            parts[partition_of(a, n)].push(a);
        }
        Self {
            domain_id,
            partitions: parts,
        }
    }

    /// Total targets.
    pub fn len(&self) -> usize {
        self.partitions.iter().map(Vec::len).sum()
    }

    /// Whether the snapshot has no target.
    pub fn is_empty(&self) -> bool {
        self.partitions.iter().all(Vec::is_empty)
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
    }
}
