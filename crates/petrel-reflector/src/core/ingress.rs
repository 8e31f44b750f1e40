//! The ingress front (draarl-v1 §3.4, §4.1): rate limits every datagram,
//! then picks the shard that owns its device, before any per-packet
//! allocation or queueing happens.
//!
//! The shard key is the reference's: FNV-1a-64 over the 32 raw username
//! bytes (NULs included) and the SSID byte; a datagram without the `DraA`
//! magic or with an all-zero username hashes its source address and port
//! instead. A device's packets therefore always reach the same shard and
//! stay in order, wherever they come from.

use std::net::SocketAddr;

use petrel_sys::hash::fnv1a64;
use std::time::Instant;

use crate::codec::{MAGIC, OFF_SSID, OFF_USERNAME, USERNAME_LEN};
use crate::policy::{RateDecision, RateLimiter};

use crate::model::{endpoint_hash, SessionConfig};

/// Counters of the ingress front (spec §4.5 `ingress`).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct IngressStats {
    /// Datagrams read from the socket.
    pub read: u64,
    /// Dropped by the per-IP / per-IP:port token buckets.
    pub rate_limit_drops: u64,
    /// Rate-limit entries evicted (least recently seen first) to make room
    /// for a new source; nothing is dropped for a full table.
    pub rate_table_evictions: u64,
    /// Dropped because the owning shard's queue was full.
    pub queue_full_drops: u64,
}

impl IngressStats {
    /// Every counter with its name, for metrics export.
    pub fn counters(&self) -> Vec<(&'static str, u64)> {
        vec![
            ("read", self.read),
            ("rate_limit_drops", self.rate_limit_drops),
            ("rate_table_evictions", self.rate_table_evictions),
            ("queue_full_drops", self.queue_full_drops),
        ]
    }
}

/// Rate limiter and shard picker; owned by the socket's reader.
#[derive(Debug)]
pub struct Ingress {
    shards: usize,
    rate: RateLimiter,
    stats: IngressStats,
}

impl Ingress {
    /// A front for `shards` shards (at least 1) under `cfg` (validated).
    pub fn new(cfg: &SessionConfig, shards: usize) -> Self {
        Self {
            shards: shards.max(1),
            rate: RateLimiter::new(cfg.per_ip_pps, cfg.per_endpoint_pps, cfg.rate_table_max),
            stats: IngressStats::default(),
        }
    }

    /// Charges `datagram` from `src` at `now` to the rate limits; returns
    /// its shard, or `None` if it was dropped (and counted).
    pub fn admit(&mut self, now: Instant, src: SocketAddr, datagram: &[u8]) -> Option<usize> {
        self.stats.read += 1;
        let decision = self.rate.check(src, now);
        self.stats.rate_table_evictions = self.rate.evictions();
        match decision {
            RateDecision::Allow => Some(shard_of(datagram, src, self.shards)),
            RateDecision::Limited => {
                self.stats.rate_limit_drops += 1;
                None
            }
        }
    }

    /// Counts a datagram admitted here that the runtime could not queue.
    pub fn count_queue_full(&mut self) {
        self.stats.queue_full_drops += 1;
    }

    /// Forgets idle rate-limit buckets; call every few seconds.
    pub fn sweep(&mut self, now: Instant) {
        self.rate.sweep(now);
    }

    /// Counters so far.
    pub fn stats(&self) -> &IngressStats {
        &self.stats
    }
}

/// The shard (of `shards`) that owns the device `datagram` names; see the
/// module docs for the key.
pub fn shard_of(datagram: &[u8], src: SocketAddr, shards: usize) -> usize {
    let n = shards.max(1) as u64;
    let username = datagram.get(OFF_USERNAME..OFF_USERNAME + USERNAME_LEN);
    let ssid = datagram.get(OFF_SSID);
    let h = match (datagram.get(..4), username, ssid) {
        (Some(magic), Some(name), Some(&ssid))
            if magic == MAGIC.as_slice() && name.iter().any(|&b| b != 0) =>
        {
            fnv1a64(name.iter().copied().chain([ssid]))
        }
        _ => endpoint_hash(src),
    };
    (h % n) as usize
}

#[cfg(test)]
mod tests {
    use petrel_sys::hash::{fnv1a64_from as fnv1a_from, FNV1A64_OFFSET as FNV_OFFSET};

    use super::*;
    use crate::codec::{encode, Header, PacketType};

    fn packet(name: &str, ssid: u8) -> Vec<u8> {
        let mut h = Header::new(PacketType::Voice);
        h.set_username(name);
        h.ssid = ssid;
        encode(&h, b"voice").unwrap()
    }

    #[test]
    fn a_device_keeps_its_shard_from_any_address() {
        let a: SocketAddr = "127.0.0.1:1".parse().unwrap();
        let b: SocketAddr = "10.9.8.7:65000".parse().unwrap();
        for ssid in [1, 7, 200] {
            let p = packet("alice", ssid);
            assert_eq!(shard_of(&p, a, 4), shard_of(&p, b, 4));
        }
    }

    #[test]
    fn username_and_ssid_both_spread_devices() {
        let src: SocketAddr = "127.0.0.1:1".parse().unwrap();
        let mut per_shard = [0usize; 4];
        for i in 0..400 {
            per_shard[shard_of(&packet(&format!("u{i}"), 1), src, 4)] += 1;
        }
        assert!(per_shard.iter().all(|&c| c > 60), "{per_shard:?}");
        let by_ssid: std::collections::HashSet<usize> = (1..=40)
            .map(|s| shard_of(&packet("alice", s), src, 4))
            .collect();
        assert_eq!(by_ssid.len(), 4);
    }

    #[test]
    fn known_fnv1a_vector_and_address_fallback() {
        // FNV-1a-64 of "a" (the published test vector).
        assert_eq!(fnv1a_from(FNV_OFFSET, *b"a"), 0xaf63_dc4c_8601_ec8c);
        let src: SocketAddr = "127.0.0.1:1".parse().unwrap();
        let other: SocketAddr = "127.0.0.2:1".parse().unwrap();
        let garbage = b"not a DraA packet at all";
        assert_eq!(shard_of(garbage, src, 1), 0);
        let spread: std::collections::HashSet<usize> = (1..=64u16)
            .map(|p| shard_of(garbage, SocketAddr::new(src.ip(), p), 8))
            .collect();
        assert!(spread.len() > 4);
        let anonymous = packet("", 1);
        assert_eq!(
            shard_of(&anonymous, src, 1_000_003),
            (fnv1a_from(FNV_OFFSET, [127, 0, 0, 1, 0, 1]) % 1_000_003) as usize
        );
        assert_ne!(
            shard_of(&anonymous, src, 1_000_003),
            shard_of(&anonymous, other, 1_000_003)
        );
    }

    #[test]
    fn per_endpoint_rate_limit_drops_excess() {
        let mut ing = Ingress::new(&SessionConfig::default(), 2);
        let now = crate::test_clock::origin();
        let src: SocketAddr = "127.0.0.1:1".parse().unwrap();
        let admitted = (0..300)
            .filter(|_| ing.admit(now, src, &packet("alice", 1)).is_some())
            .count();
        assert_eq!(admitted, 150);
        assert_eq!(ing.stats().rate_limit_drops, 150);
        assert_eq!(ing.stats().read, 300);
    }
}
