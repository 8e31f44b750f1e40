//! Sharded ingress: several cores sharing one [`SharedTables`], fed through
//! an [`Ingress`] front, behave as one reflector.

use std::sync::Arc;
use std::time::{Duration, Instant};

use super::*;
use crate::codec::{decode, PacketType};
use crate::core::tests::{addr, dir, hb, media, reject_of, run_password_checks};
use crate::core::{shard_of, Ingress, Reflector};
use crate::model::Transmit;

/// Shards behind one ingress front, on a simulated clock.
struct Cluster {
    ingress: Ingress,
    shards: Vec<Reflector>,
    now: Instant,
}

impl Cluster {
    fn new(n: usize, cfg: SessionConfig) -> Self {
        let now = Instant::now();
        let shared = Arc::new(SharedTables::new(&cfg, now));
        Self {
            ingress: Ingress::new(&cfg, n),
            shards: (0..n)
                .map(|_| Reflector::shard(cfg.clone(), dir(), now, Box::new(Arc::clone(&shared))))
                .collect(),
            now,
        }
    }

    /// Routes a datagram to its shard; returns (shard, first reply).
    fn send(&mut self, src: &str, bytes: &[u8]) -> (usize, Option<Vec<u8>>) {
        let i = self.ingress.admit(self.now, addr(src), bytes).unwrap();
        let r = &mut self.shards[i];
        r.handle_datagram(self.now, addr(src), bytes);
        run_password_checks(r, self.now);
        // Type 3 pushes that follow a login are consumed.
        let replies: Vec<Transmit> = std::iter::from_fn(|| r.poll_transmit()).collect();
        (i, replies.into_iter().next().map(|t| t.payload))
    }

    fn login(&mut self, src: &str, name: &str, ssid: u8) -> usize {
        let (i, reply) = self.send(src, &hb(name, "Secret12", ssid, None));
        let reply = reply.unwrap();
        let p = decode(&reply).unwrap();
        assert!(
            !p.header.callsign_str().unwrap().is_empty(),
            "{name} refused"
        );
        i
    }

    fn advance(&mut self, ms: u64) {
        self.now += Duration::from_millis(ms);
        for r in &mut self.shards {
            r.handle_timeout(self.now);
        }
    }
}

fn shard(name: &str, ssid: u8, n: usize) -> usize {
    shard_of(&hb(name, "", ssid, None), addr("127.0.0.1:1"), n)
}

/// An SSID of `name` that lands on shard `want` of `n`.
fn ssid_on(name: &str, want: usize, n: usize) -> u8 {
    (1..=99).find(|&s| shard(name, s, n) == want).unwrap()
}

#[test]
fn devices_on_different_shards_hear_each_other_and_share_the_floor() {
    let mut c = Cluster::new(2, SessionConfig::default());
    let (a, b) = (ssid_on("alice", 0, 2), ssid_on("bob", 1, 2));
    assert_eq!(c.login("127.0.0.1:1", "alice", a), 0);
    assert_eq!(c.login("127.0.0.2:1", "bob", b), 1);
    assert_eq!(c.shards[0].online() + c.shards[1].online(), 2);

    c.send("127.0.0.1:1", &media(PacketType::Voice, "alice", a, b"x"));
    let f = c.shards[0].poll_frame().unwrap();
    assert_eq!(f.snapshot.len(), 2);
    assert!(f
        .snapshot
        .partitions
        .iter()
        .flatten()
        .any(|t| *t == addr("127.0.0.2:1")));

    // Alice holds the domain's floor; bob's shard sees it.
    c.advance(100);
    c.send("127.0.0.2:1", &media(PacketType::Voice, "bob", b, b"y"));
    assert!(c.shards[1].poll_frame().is_none());
    assert_eq!(c.shards[1].stats().floor_busy_drops, 1);
    c.advance(901);
    c.send("127.0.0.2:1", &media(PacketType::Voice, "bob", b, b"y"));
    let g = c.shards[1].poll_frame().unwrap();
    assert!(
        Arc::ptr_eq(&f.snapshot, &g.snapshot),
        "one snapshot per domain"
    );
}

#[test]
fn ban_ladder_spans_the_ssids_of_a_username_on_every_shard() {
    let mut c = Cluster::new(2, SessionConfig::default());
    let on = [ssid_on("alice", 0, 2), ssid_on("alice", 1, 2)];
    for i in 0..4 {
        let (shard, reply) = c.send("127.0.0.1:1", &hb("alice", "Wrong123", on[i % 2], None));
        assert_eq!(shard, i % 2);
        assert_eq!(reject_of(&reply.unwrap()).1, "invalid_password");
    }
    for ssid in on {
        let (_, reply) = c.send("127.0.0.1:2", &hb("alice", "Secret12", ssid, None));
        assert_eq!(reject_of(&reply.unwrap()), (3, "too_many_failures".into()));
    }
}

#[test]
fn a_reload_seen_by_every_shard_applies_receive_bans_across_shards() {
    let mut c = Cluster::new(2, SessionConfig::default());
    let (a, b) = (ssid_on("alice", 0, 2), ssid_on("bob", 1, 2));
    c.login("127.0.0.1:1", "alice", a);
    c.login("127.0.0.2:1", "bob", b);
    c.login("127.0.0.4:1", "dave", 1);
    let mut d = c.shards[1].directory().clone();
    let mut bob = d.device(2, b).unwrap().clone();
    bob.disable_recv = true;
    d.put_device(bob);
    for r in &mut c.shards {
        r.replace_directory(d.clone());
    }
    c.send("127.0.0.1:1", &media(PacketType::Voice, "alice", a, b"x"));
    let f = c.shards[0].poll_frame().unwrap();
    assert_eq!(
        f.snapshot.len(),
        1,
        "bob is receive-banned: {:?}",
        f.snapshot
    );
}

#[test]
fn session_limit_counts_every_shard() {
    let cfg = SessionConfig {
        max_sessions: 2,
        ..SessionConfig::default()
    };
    let mut c = Cluster::new(2, cfg);
    c.login("127.0.0.1:1", "alice", ssid_on("alice", 0, 2));
    c.login("127.0.0.2:1", "bob", ssid_on("bob", 1, 2));
    for shard in [0, 1] {
        let ssid = ssid_on("carol", shard, 2);
        let (_, reply) = c.send("127.0.0.3:1", &hb("carol", "Secret12", ssid, None));
        assert_eq!(reject_of(&reply.unwrap()), (3, "server_full".into()));
    }
    // A device going offline on one shard frees a place for the other.
    c.advance(20_001);
    c.advance(5_000);
    c.login("127.0.0.3:1", "carol", ssid_on("carol", 1, 2));
}

#[test]
fn a_users_devices_on_every_shard_share_one_password_check() {
    let mut c = Cluster::new(2, SessionConfig::default());
    let on = [ssid_on("alice", 0, 2), ssid_on("alice", 1, 2)];
    let first = hb("alice", "Secret12", on[0], None);
    c.shards[0].handle_datagram(c.now, addr("127.0.0.1:1"), &first);
    let check = c.shards[0].poll_password_check().expect("a check");
    // While it runs, the device on the other shard is told to retry.
    let (_, reply) = c.send("127.0.0.2:1", &hb("alice", "Secret12", on[1], None));
    assert_eq!(reject_of(&reply.unwrap()), (3, "server_busy".into()));
    assert_eq!(c.shards[1].stats().password_checks_coalesced, 1);
    c.shards[0].handle_password_check(c.now, check.id(), check.run());
    // The retry finds the password verified: no second Argon2 check.
    let (shard, reply) = c.send("127.0.0.2:1", &hb("alice", "Secret12", on[1], None));
    assert_eq!(shard, 1);
    assert!(c.shards[1].poll_password_check().is_none());
    let reply = reply.unwrap();
    assert_eq!(decode(&reply).unwrap().header.callsign_str(), Some("CALL1"));
}
