//! Deterministic tests of the session core on a simulated clock.

use std::net::SocketAddr;
use std::sync::{Arc, OnceLock};
use std::time::{Duration, Instant};

use super::*;
use crate::codec::{self, decode, encode, ConfigCommand, Header, PacketType};
use crate::model::{
    hash_device_password, DeviceRecord, Directory, GroupRecord, HashCost, SessionConfig,
    StoreEvent, Transmit, UserRecord,
};

mod auth;
mod endpoints;
mod floor;
mod ghosts;
mod lockout;
mod talk_spurts;
mod text_rate;

pub(crate) const CHEAP: HashCost = HashCost {
    m_cost_kib: 64,
    t_cost: 1,
    p_cost: 1,
};

pub(crate) fn phc() -> &'static str {
    static H: OnceLock<String> = OnceLock::new();
    H.get_or_init(|| hash_device_password("Secret12", CHEAP).unwrap())
}

pub(crate) fn user(id: i64, name: &str, default_group_id: i64) -> UserRecord {
    UserRecord {
        id,
        name: name.into(),
        callsign: format!("CALL{id}"),
        dmrid: 4_600_000 + id as u32,
        enabled: true,
        approved: true,
        device_password_hash: Some(phc().to_owned()),
        default_group_id,
    }
}

pub(crate) fn group(id: i64, is_virtual: bool) -> GroupRecord {
    GroupRecord {
        id,
        name: format!("g{id}"),
        enabled: true,
        is_virtual,
    }
}

/// alice/bob/carol default to 999; dave defaults to 1, erin to 2 (1 and 2
/// linked by virtual 50); frank to 3; gina has no usable default group.
pub(crate) fn dir() -> Directory {
    dir_of(
        vec![
            user(1, "alice", 999),
            user(2, "bob", 999),
            user(3, "carol", 999),
            user(4, "dave", 1),
            user(5, "erin", 2),
            user(6, "frank", 3),
            user(7, "gina", 50),
        ],
        vec![],
    )
}

/// The groups and links of [`dir`] with `users` and `devices`.
pub(crate) fn dir_of(users: Vec<UserRecord>, devices: Vec<DeviceRecord>) -> Directory {
    Directory::new(
        users,
        vec![
            group(999, false),
            group(1, false),
            group(2, false),
            group(3, false),
            group(50, true),
        ],
        vec![(50, 1), (50, 2)],
        devices,
    )
}

pub(crate) fn addr(s: &str) -> SocketAddr {
    s.parse().unwrap()
}

pub(crate) fn header(t: PacketType, name: &str, pw: &str, ssid: u8) -> Header {
    let mut h = Header::new(t);
    h.set_username(name);
    h.set_password(pw);
    h.ssid = ssid;
    h.dev_model = 2;
    h
}

pub(crate) fn hb(name: &str, pw: &str, ssid: u8, mac: Option<&str>) -> Vec<u8> {
    let mut data = vec![0u8; 24];
    if let Some(m) = mac {
        data.extend_from_slice(m.as_bytes());
    }
    encode(&header(PacketType::Heartbeat, name, pw, ssid), &data).unwrap()
}

pub(crate) fn media(t: PacketType, name: &str, ssid: u8, payload: &[u8]) -> Vec<u8> {
    let mut h = header(t, name, "Secret12", ssid);
    h.set_callsign("FORGED");
    h.reserved = 77;
    encode(&h, payload).unwrap()
}

struct Sim {
    r: Reflector,
    now: Instant,
}

impl Sim {
    fn new() -> Self {
        Self::with(SessionConfig::default())
    }

    fn with(cfg: SessionConfig) -> Self {
        let now = crate::test_clock::origin();
        Self {
            r: Reflector::new(cfg, dir(), now),
            now,
        }
    }

    fn advance(&mut self, ms: u64) {
        self.now += Duration::from_millis(ms);
        self.r.handle_timeout(self.now);
    }

    /// Sends a datagram and returns the first reply, if any; Type 3 pushes
    /// that follow a login are consumed.
    fn send(&mut self, src: &str, bytes: &[u8]) -> Option<Vec<u8>> {
        self.r.handle_datagram(self.now, addr(src), bytes);
        run_password_checks(&mut self.r, self.now);
        let all: Vec<Transmit> = std::iter::from_fn(|| self.r.poll_transmit()).collect();
        assert!(all.iter().all(|t| t.dst == addr(src)));
        all.into_iter().next().map(|t| t.payload)
    }

    fn login(&mut self, src: &str, name: &str, ssid: u8) {
        let reply = self.send(src, &hb(name, "Secret12", ssid, None)).unwrap();
        let p = decode(&reply).unwrap();
        assert!(
            !p.header.callsign_str().unwrap().is_empty(),
            "login of {name} failed: {:?}",
            p.data
        );
    }

    /// Sends a heartbeat without a MAC and returns the rejection it got.
    fn reject(&mut self, src: &str, name: &str, pw: &str, ssid: u8) -> (u8, String) {
        reject_of(&self.send(src, &hb(name, pw, ssid, None)).unwrap())
    }

    /// Four wrong passwords for alice-7 from `src` are refused as wrong;
    /// then even the right one from `then` (same IP) is refused: banned.
    fn ban_alice(&mut self, src: &str, then: &str) {
        for _ in 0..4 {
            assert_eq!(
                self.reject(src, "alice", "Wrong123", 7).1,
                "invalid_password"
            );
        }
        assert_eq!(
            self.reject(then, "alice", "Secret12", 7),
            (3, "too_many_failures".into())
        );
    }

    fn targets(&mut self) -> Vec<SocketAddr> {
        let f = self.r.poll_frame().expect("a frame");
        let mut t: Vec<SocketAddr> = f
            .snapshot
            .partitions
            .iter()
            .flatten()
            .copied()
            .filter(|a| *a != f.exclude)
            .collect();
        t.sort();
        t
    }
}

/// What the runtime does with password checks, inline.
pub(crate) fn run_password_checks(r: &mut Reflector, now: Instant) {
    while let Some(c) = r.poll_password_check() {
        let ok = c.run();
        r.handle_password_check(now, c.id(), ok);
    }
}

pub(crate) fn reject_of(reply: &[u8]) -> (u8, String) {
    let p = decode(reply).unwrap();
    assert_eq!(p.header.callsign_str(), Some(""));
    assert_eq!(p.header.password_bytes(), b"");
    (p.data[0], String::from_utf8(p.data[1..].to_vec()).unwrap())
}

#[test]
fn login_reply_fills_callsign_zeroes_password_and_echoes_data() {
    let mut s = Sim::new();
    let req = hb("alice", "Secret12", 7, Some("02:42:00:00:00:01"));
    let reply = s.send("127.0.0.1:4000", &req).unwrap();
    let p = decode(&reply).unwrap();
    assert_eq!(p.header.callsign_str(), Some("CALL1"));
    assert_eq!(p.header.device_password, [0; 10]);
    assert_eq!(p.header.reserved, 0);
    assert_eq!((p.header.ssid, p.header.dev_model), (7, 2));
    assert_eq!(p.data, decode(&req).unwrap().data);
    match s.r.poll_event() {
        Some(StoreEvent::DeviceUpsert(rec)) => {
            assert_eq!((rec.owner_id, rec.ssid, rec.group_id), (1, 7, 999));
            assert_eq!(rec.mac.unwrap().to_string(), "02:42:00:00:00:01");
        }
        other => panic!("expected a device upsert, got {other:?}"),
    }
    assert_eq!(s.r.stats().logins, 1);
    // A later heartbeat from the same endpoint is answered without re-auth.
    assert!(s
        .send("127.0.0.1:4000", &hb("alice", "", 7, None))
        .is_some());
    assert_eq!(s.r.stats().logins, 1);
}

#[test]
fn rejects_carry_code_and_reason() {
    let mut s = Sim::new();
    assert_eq!(
        s.reject("127.0.0.1:1", "alice", "Wrong123", 7),
        (3, "invalid_password".into())
    );
    assert_eq!(
        s.reject("127.0.0.1:1", "nobody", "Secret12", 7),
        (3, "user_not_found".into())
    );
    for ssid in [0, 100, 105, 255] {
        assert_eq!(
            s.reject("127.0.0.1:1", "alice", "Secret12", ssid),
            (2, "reserved_ssid".into())
        );
    }
    // A reserved SSID with a session tag is dropped silently.
    let mut h = header(PacketType::Heartbeat, "alice", "Secret12", 101);
    h.reserved = 5;
    assert!(s.send("127.0.0.1:1", &encode(&h, &[]).unwrap()).is_none());
    assert_eq!(s.r.stats().ghost_invalid_tags, 1);
}

#[test]
fn disabled_unapproved_and_passwordless_users() {
    let mut users = vec![
        user(1, "alice", 999),
        user(2, "bob", 999),
        user(3, "carol", 999),
    ];
    users[0].enabled = false;
    users[1].approved = false;
    users[2].device_password_hash = None;
    let now = crate::test_clock::origin();
    let mut r = Reflector::new(
        SessionConfig::default(),
        Directory::new(users, vec![group(999, false)], vec![], vec![]),
        now,
    );
    for (name, want) in [
        ("alice", "user_disabled"),
        ("bob", "invalid_password"),
        ("carol", "device_password_not_set"),
    ] {
        r.handle_datagram(now, addr("127.0.0.1:9"), &hb(name, "Secret12", 1, None));
        assert_eq!(reject_of(&r.poll_transmit().unwrap().payload).1, want);
    }
}

#[test]
fn fourth_failure_bans_ip_and_username() {
    let mut s = Sim::new();
    s.ban_alice("127.0.0.1:1", "127.0.0.1:2");
    // Another IP is not affected.
    s.login("127.0.0.9:2", "alice", 8);
    s.advance(10_001);
    s.login("127.0.0.1:2", "alice", 7);
}

/// Made-up usernames from one address share one ladder entry, so they can
/// neither fill the failed-auth table (which would leave later wrong
/// passwords for real users untracked) nor get four free guesses per name.
#[test]
fn unknown_usernames_share_one_ladder_entry_per_address() {
    let mut s = Sim::with(SessionConfig {
        ban_table_max: 8,
        ..SessionConfig::default()
    });
    let mut reasons = Vec::new();
    for i in 0..100 {
        reasons.push(
            s.reject("127.0.0.5:1", &format!("nobody{i}"), "Secret12", 7)
                .1,
        );
    }
    assert!(reasons[..4].iter().all(|r| r == "user_not_found"));
    assert!(reasons[4..].iter().all(|r| r == "too_many_failures"));
    s.ban_alice("127.0.0.6:1", "127.0.0.6:1");
    s.login("127.0.0.7:1", "alice", 7);
}

#[test]
fn conflicting_address_is_refused_unless_mac_matches_or_silent_20s() {
    let mut s = Sim::new();
    let mac = Some("02:42:00:00:00:01");
    assert!(s
        .send("127.0.0.1:1000", &hb("alice", "Secret12", 7, mac))
        .is_some());
    assert_eq!(
        s.reject("127.0.0.2:1000", "alice", "Secret12", 7),
        (1, "device_conflict_online".into())
    );
    let r = s
        .send(
            "127.0.0.2:1000",
            &hb("alice", "Secret12", 7, Some("02:42:00:00:00:02")),
        )
        .unwrap();
    assert_eq!(reject_of(&r).0, 1);
    assert_eq!(s.r.session_addr((1, 7)), Some(addr("127.0.0.1:1000")));
    // Same MAC: takeover.
    s.send("127.0.0.2:1000", &hb("alice", "Secret12", 7, mac))
        .unwrap();
    assert_eq!(s.r.session_addr((1, 7)), Some(addr("127.0.0.2:1000")));
    // No MAC, but the old binding has been silent for 20 s: takeover.
    s.advance(20_001);
    s.login("127.0.0.3:1000", "alice", 7);
    assert_eq!(s.r.session_addr((1, 7)), Some(addr("127.0.0.3:1000")));
}

#[test]
fn voice_fans_out_with_store_identity_and_spoofs_are_dropped() {
    let mut s = Sim::new();
    s.login("127.0.0.1:1", "alice", 7);
    s.login("127.0.0.2:1", "bob", 1);
    s.login("127.0.0.3:1", "carol", 1);
    assert!(s
        .send(
            "127.0.0.1:1",
            &media(PacketType::Voice, "alice", 7, b"opus")
        )
        .is_none());
    let f = s.r.poll_frame().unwrap();
    let p = decode(&f.packet).unwrap();
    assert_eq!(p.header.callsign_str(), Some("CALL1"));
    assert_eq!(p.header.device_password, [0; 10]);
    assert_eq!((p.header.reserved, p.header.dmrid), (0, 4_600_001));
    assert_eq!(p.data, b"opus");
    assert_eq!(f.exclude, addr("127.0.0.1:1"));
    assert_eq!(f.snapshot.len(), 3);
    // Same identity from another address: dropped, nothing planned.
    s.send(
        "127.0.0.66:1",
        &media(PacketType::Voice, "alice", 7, b"evil"),
    );
    assert!(s.r.poll_frame().is_none());
    assert_eq!(s.r.stats().endpoint_mismatch_drops, 1);
    // A device that never logged in: dropped.
    s.send("127.0.0.66:1", &media(PacketType::Text, "carol", 9, b"hi"));
    assert_eq!(s.r.stats().unknown_device_drops, 1);
}

#[test]
fn half_duplex_floor_and_text_bypass() {
    let mut s = Sim::new();
    s.login("127.0.0.1:1", "alice", 7);
    s.login("127.0.0.2:1", "bob", 1);
    s.send("127.0.0.1:1", &media(PacketType::Voice, "alice", 7, b"a"));
    assert_eq!(s.targets(), vec![addr("127.0.0.2:1")]);
    s.advance(500);
    s.send("127.0.0.2:1", &media(PacketType::Voice, "bob", 1, b"b"));
    assert!(s.r.poll_frame().is_none());
    assert_eq!(s.r.stats().floor_busy_drops, 1);
    s.send(
        "127.0.0.2:1",
        &media(PacketType::Text, "bob", 1, "héllo".as_bytes()),
    );
    assert_eq!(s.targets(), vec![addr("127.0.0.1:1")]);
    s.advance(901);
    s.send("127.0.0.2:1", &media(PacketType::Voice, "bob", 1, b"b"));
    assert_eq!(s.targets(), vec![addr("127.0.0.1:1")]);
}

#[test]
fn linked_groups_share_a_domain_others_do_not() {
    let mut s = Sim::new();
    s.login("127.0.0.4:1", "dave", 1); // group 1
    s.login("127.0.0.5:1", "erin", 1); // group 2, linked to 1 via 50
    s.login("127.0.0.6:1", "frank", 1); // group 3
    s.login("127.0.0.1:1", "alice", 1); // group 999
    s.send("127.0.0.4:1", &media(PacketType::Voice, "dave", 1, b"x"));
    assert_eq!(s.targets(), vec![addr("127.0.0.5:1")]);
    // Domains 3 and 999 talk at the same time.
    s.send("127.0.0.6:1", &media(PacketType::Voice, "frank", 1, b"x"));
    assert_eq!(s.targets(), vec![]);
    s.send("127.0.0.1:1", &media(PacketType::Voice, "alice", 1, b"x"));
    assert_eq!(s.targets(), vec![]);
    assert_eq!(s.r.stats().floor_busy_drops, 0);
}

#[test]
fn ungrouped_and_banned_devices() {
    let mut s = Sim::new();
    s.login("127.0.0.7:1", "gina", 1); // default group 50 is virtual: ungrouped
    s.login("127.0.0.1:1", "alice", 1);
    s.login("127.0.0.2:1", "bob", 1);
    s.send("127.0.0.7:1", &media(PacketType::Voice, "gina", 1, b"x"));
    assert_eq!(s.r.stats().non_forwarding_drops, 1);
    // Heartbeats still work while ungrouped.
    assert!(s.send("127.0.0.7:1", &hb("gina", "", 1, None)).is_some());

    let mut d = s.r.directory().clone();
    let mut bob = d.device(2, 1).unwrap().clone();
    bob.disable_recv = true;
    d.put_device(bob);
    let mut alice = d.device(1, 1).unwrap().clone();
    alice.disable_send = true;
    d.put_device(alice);
    s.r.replace_directory(dir_of(
        (1..=7).map(|i| d.user(i).unwrap().clone()).collect(),
        [(1, 1), (2, 1), (7, 1)]
            .iter()
            .map(|(o, s)| d.device(*o, *s).unwrap().clone())
            .collect(),
    ));
    s.send("127.0.0.1:1", &media(PacketType::Voice, "alice", 1, b"x"));
    assert_eq!(s.r.stats().send_ban_drops, 1);
    s.login("127.0.0.3:1", "carol", 1);
    s.send("127.0.0.3:1", &media(PacketType::Voice, "carol", 1, b"x"));
    assert_eq!(s.targets(), vec![addr("127.0.0.1:1")]); // bob is receive-banned
}

#[test]
fn silent_devices_go_offline_after_20s() {
    let mut s = Sim::new();
    s.login("127.0.0.1:1", "alice", 1);
    s.login("127.0.0.2:1", "bob", 1);
    // Sweeps run every 5 s, so bob is noticed at the first sweep after 20 s.
    for _ in 0..6 {
        s.advance(4_000);
        s.send("127.0.0.1:1", &hb("alice", "", 1, None));
    }
    assert_eq!(s.r.online(), 1);
    assert_eq!(s.r.stats().sessions_expired, 1);
    s.send("127.0.0.1:1", &media(PacketType::Voice, "alice", 1, b"x"));
    assert_eq!(s.targets(), vec![]);
    // Bob's data after expiry is refused until he logs in again.
    s.send("127.0.0.2:1", &media(PacketType::Text, "bob", 1, b"x"));
    assert_eq!(s.r.stats().unknown_device_drops, 1);
}

#[test]
fn membership_change_invalidates_only_its_domain() {
    let mut s = Sim::new();
    s.login("127.0.0.4:1", "dave", 1); // domain 1
    s.login("127.0.0.5:1", "erin", 1); // domain 1
    s.login("127.0.0.1:1", "alice", 1); // domain 999
    s.login("127.0.0.2:1", "bob", 1); // domain 999
    s.send("127.0.0.4:1", &media(PacketType::Voice, "dave", 1, b"x"));
    let f1 = s.r.poll_frame().unwrap();
    s.send("127.0.0.1:1", &media(PacketType::Voice, "alice", 1, b"x"));
    let f999 = s.r.poll_frame().unwrap();
    // Carol joins 999 and bob moves to group 3.
    s.login("127.0.0.3:1", "carol", 1);
    assert!(s.r.set_device_group((2, 1), 3));
    s.send("127.0.0.4:1", &media(PacketType::Voice, "dave", 1, b"y"));
    let g1 = s.r.poll_frame().unwrap();
    assert!(
        Arc::ptr_eq(&f1.snapshot, &g1.snapshot),
        "domain 1 snapshot was rebuilt"
    );
    s.send("127.0.0.1:1", &media(PacketType::Voice, "alice", 1, b"y"));
    let g999 = s.r.poll_frame().unwrap();
    assert!(!Arc::ptr_eq(&f999.snapshot, &g999.snapshot));
    assert_eq!(g999.snapshot.len(), 2); // alice + carol
}

#[test]
fn garbage_is_counted_never_answered() {
    let mut s = Sim::new();
    for junk in [&b""[..], b"DraA", &[0u8; 100], &[0xff; 801]] {
        assert!(s.send("127.0.0.1:1", junk).is_none());
    }
    assert_eq!(s.r.stats().decode_errors, 4);
}

#[test]
fn link_boxes_get_query_and_time_sync_on_login_and_ack_on_report() {
    let mut s = Sim::new();
    s.r.set_wall_clock(s.now, 1_700_000_000_000);
    s.advance(250);
    let src = addr("127.0.0.1:1");
    s.r.handle_datagram(s.now, src, &hb("alice", "Secret12", 7, None));
    run_password_checks(&mut s.r, s.now);
    let replies: Vec<Vec<u8>> = std::iter::from_fn(|| s.r.poll_transmit())
        .map(|t| t.payload)
        .collect();
    assert_eq!(replies.len(), 3);
    let q = decode(&replies[1]).unwrap();
    assert_eq!(q.header.packet_type, PacketType::Config);
    assert_eq!(
        (q.header.dev_model, q.header.dmrid, q.header.ssid),
        (0, 0, 7)
    );
    assert_eq!(q.header.callsign_str(), Some("CALL1"));
    assert_eq!(ConfigCommand::parse(q.data).unwrap(), ConfigCommand::Query);
    let t = decode(&replies[2]).unwrap();
    assert_eq!(
        ConfigCommand::parse(t.data).unwrap(),
        ConfigCommand::TimeSync(1_700_000_000_250)
    );
    // Later heartbeats do not repeat it.
    assert!(s.send("127.0.0.1:1", &hb("alice", "", 7, None)).is_some());
    assert!(s.r.poll_transmit().is_none());

    let report = ConfigCommand::Set(vec![codec::Tlv {
        tag: 0x05,
        value: vec![4],
    }]);
    let pkt = encode(
        &header(PacketType::Config, "alice", "", 7),
        &report.encode().unwrap(),
    )
    .unwrap();
    let ack = s.send("127.0.0.1:1", &pkt).unwrap();
    assert!(matches!(
        ConfigCommand::parse(decode(&ack).unwrap().data),
        Ok(ConfigCommand::TimeSync(_))
    ));
    let events: Vec<StoreEvent> = std::iter::from_fn(|| s.r.poll_event()).collect();
    assert!(events.contains(&StoreEvent::DeviceConfig {
        device: (1, 7),
        items: vec![codec::Tlv {
            tag: 0x05,
            value: vec![4]
        }]
    }));
    // The same report from another address is refused.
    s.r.handle_datagram(s.now, addr("127.0.0.9:1"), &pkt);
    assert!(s.r.poll_transmit().is_none());
}

#[test]
fn disabled_account_is_refused_mid_session() {
    let mut s = Sim::new();
    s.login("127.0.0.1:1", "alice", 1);
    let d = s.r.directory().clone();
    let mut users: Vec<UserRecord> = (1..=7).map(|i| d.user(i).unwrap().clone()).collect();
    users[0].enabled = false;
    s.r.replace_directory(dir_of(users, vec![]));
    assert_eq!(
        s.reject("127.0.0.1:1", "alice", "", 1),
        (3, "user_disabled".into())
    );
}
