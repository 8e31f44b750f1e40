//! The reflector's ingress front (draarl-v1 §3.4, §4.1): `core::Ingress`
//! (per-IP and per-IP:port token buckets, then the shard key) and the
//! `policy::RateLimiter` under it, fed datagrams from fuzz-chosen sources at
//! fuzz-chosen times. Asserted:
//!
//! - the front admits exactly what its rate limiter admits, and counts every
//!   datagram as read, and every refusal as a drop;
//! - with room for every source, no IP and no IP:port is admitted more than
//!   its bucket allows over any window (burst + rate × length);
//! - with a table smaller than the sources, both tables stay within their
//!   size and every eviction is counted;
//! - the shard is below the shard count, the same for a device's datagrams
//!   from any source, and the source's for datagrams naming no device.
#![no_main]

use std::net::{IpAddr, SocketAddr};
use std::time::{Duration, Instant};

use libfuzzer_sys::arbitrary::{self, Arbitrary};
use libfuzzer_sys::fuzz_target;
use petrel_fuzz::WindowBound;
use petrel_reflector::codec::{self, Header, PacketType};
use petrel_reflector::core::{shard_of, Ingress};
use petrel_reflector::model::{endpoint_hash, SessionConfig};
use petrel_reflector::policy::{RateDecision, RateLimiter};

#[derive(Arbitrary, Debug)]
struct Input {
    per_ip_pps: u16,
    per_endpoint_pps: u16,
    small_table: bool,
    shards: u8,
    steps: Vec<Step>,
}

#[derive(Arbitrary, Debug)]
struct Step {
    /// Microseconds since the previous step.
    advance_us: u32,
    ip: u8,
    port: u8,
    datagram: Datagram,
    sweep: bool,
}

#[derive(Arbitrary, Debug)]
enum Datagram {
    Device { name: u8, ssid: u8 },
    Bytes(Vec<u8>),
}

/// 8 IPv4 hosts (two /24s), 4 IPv6 hosts of one /64, and the IPv4-mapped
/// form of the first host (a separate key: the rate limit is per address).
fn ip(i: u8) -> IpAddr {
    match i % 13 {
        n @ 0..=7 => IpAddr::from([10, 0, n / 4, n % 4 + 1]),
        n @ 8..=11 => IpAddr::from([0x2001, 0xdb8, 0, 0, 0, 0, 0, u16::from(n)]),
        _ => "::ffff:10.0.0.1".parse().expect("an IPv6 address"),
    }
}

fn bytes(d: &Datagram) -> Vec<u8> {
    match d {
        Datagram::Device { name, ssid } => {
            let mut h = Header::new(PacketType::Voice);
            h.set_username(["alice", "bob", "carol", ""][usize::from(name % 4)]);
            h.ssid = *ssid;
            codec::encode(&h, b"voice").expect("a short packet encodes")
        }
        Datagram::Bytes(b) => b.clone(),
    }
}

fuzz_target!(|input: Input| {
    let per_ip = 1 + u32::from(input.per_ip_pps % 2_000);
    let per_endpoint = 1 + u32::from(input.per_endpoint_pps % 2_000);
    // 13 addresses × 4 ports: 52 endpoints, so a table of 64 never evicts.
    let table_max = if input.small_table { 16 } else { 64 };
    let cfg = SessionConfig {
        per_ip_pps: per_ip,
        per_endpoint_pps: per_endpoint,
        rate_table_max: table_max,
        ..SessionConfig::default()
    };
    cfg.validate().expect("the fuzzed config is in range");
    let shards = 1 + usize::from(input.shards % 8);
    let mut ingress = Ingress::new(&cfg, shards);
    let mut limiter = RateLimiter::new(per_ip, per_endpoint, table_max);
    let mut ip_bound = WindowBound::new(f64::from(per_ip), f64::from(per_ip));
    let mut endpoint_bound = WindowBound::new(f64::from(per_endpoint), f64::from(per_endpoint));
    let t0 = Instant::now();
    let mut elapsed = Duration::ZERO;
    let (mut admitted, mut dropped) = (0u64, 0u64);
    for step in &input.steps {
        elapsed += Duration::from_micros(u64::from(step.advance_us % 2_000_000));
        let now = t0 + elapsed;
        let src = SocketAddr::new(ip(step.ip), 4000 + u16::from(step.port % 4));
        let datagram = bytes(&step.datagram);
        if step.sweep {
            ingress.sweep(now);
            limiter.sweep(now);
        }
        let shard = ingress.admit(now, src, &datagram);
        let decision = limiter.check(src, now);
        assert_eq!(shard.is_some(), decision == RateDecision::Allow);
        match shard {
            Some(s) => {
                admitted += 1;
                assert_eq!(s, shard_of(&datagram, src, shards));
                if !input.small_table {
                    let t = elapsed.as_secs_f64();
                    ip_bound.admit(src.ip(), t);
                    endpoint_bound.admit(src, t);
                }
            }
            None => dropped += 1,
        }
        let (ips, endpoints) = limiter.tracked();
        assert!(
            ips <= table_max && endpoints <= table_max,
            "{ips} / {endpoints}"
        );
        if !input.small_table {
            assert_eq!(limiter.evictions(), 0);
        }
        let stats = ingress.stats();
        assert_eq!(
            (stats.read, stats.rate_limit_drops),
            (admitted + dropped, dropped)
        );
        assert_eq!(stats.rate_table_evictions, limiter.evictions());
        check_shard_key(&datagram, src, shards);
    }
});

/// Username at bytes 6..38 and SSID at byte 50 (draarl-v1 §2.1).
fn check_shard_key(datagram: &[u8], src: SocketAddr, shards: usize) {
    let s = shard_of(datagram, src, shards);
    assert!(s < shards);
    let elsewhere = SocketAddr::new(IpAddr::from([192, 0, 2, 1]), 9);
    let names_device = datagram.len() > 50
        && datagram.starts_with(&codec::MAGIC)
        && datagram[6..38].iter().any(|&b| b != 0);
    if names_device {
        assert_eq!(s, shard_of(datagram, elsewhere, shards));
    } else {
        assert_eq!(s as u64, endpoint_hash(src) % shards as u64);
    }
}
