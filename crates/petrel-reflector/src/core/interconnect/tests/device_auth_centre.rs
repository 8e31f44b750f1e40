//! The centre's proxied device logins (draarl-interconnect §3.8): the
//! same decisions and the same reply bytes as a direct login of the same
//! datagram, the ban ladder keyed by the forwarded IP, and the route and
//! grant of an activation.

use std::net::IpAddr;
use std::time::{Duration, Instant};

use crate::codec::interconnect::messages::DeviceAuthRequest;
use crate::codec::{decode, encode, Header, PacketType};
use crate::core::tests::{dir, hb, reject_of, run_password_checks};
use crate::core::{LoginGuard, Reflector};
use crate::model::{Directory, SessionConfig, UNGROUPED};

use super::super::*;

fn request(ip: &str, packet: Vec<u8>) -> DeviceAuthRequest {
    DeviceAuthRequest {
        request_id: 7,
        source_ip: ip.to_owned(),
        packet,
    }
}

/// Runs a proxied login to the end inline (Argon2 in the test thread).
struct Centre {
    dir: Directory,
    logins: LoginGuard,
    counters: DeviceAuthCounters,
    now: Instant,
}

impl Centre {
    fn new() -> Self {
        let now = crate::test_clock::origin();
        Self {
            dir: dir(),
            logins: LoginGuard::new(&SessionConfig::default(), now),
            counters: DeviceAuthCounters::default(),
            now,
        }
    }

    fn login(&mut self, ip: &str, packet: Vec<u8>) -> Result<(ProxiedLogin, Vec<u8>), AuthFailure> {
        let login = ProxiedLogin::parse(&request(ip, packet))?;
        let max = SessionConfig::default().password_checks_in_flight;
        let start = start_auth(
            &self.dir,
            &mut self.logins,
            &mut self.counters,
            max,
            self.now,
            login,
            1,
        );
        let (login, user) = match start {
            AuthStart::Failed(f) => return Err(f),
            AuthStart::Verified(l, u) => (l, u),
            AuthStart::Check(p, check) => {
                let ok = check.run();
                finish_check(
                    &self.dir,
                    &mut self.logins,
                    &mut self.counters,
                    self.now,
                    p,
                    ok,
                )?
            }
            AuthStart::Queued(..) => panic!("the default budget never queues one login"),
        };
        let reply = success_reply(&login, &user);
        Ok((login, reply))
    }
}

/// What a single-node reflector answers `packet` from `src`.
fn direct_reply(packet: &[u8], src: &str) -> Vec<u8> {
    let now = crate::test_clock::origin();
    let mut r = Reflector::new(SessionConfig::default(), dir(), now);
    r.handle_datagram(now, src.parse().unwrap(), packet);
    run_password_checks(&mut r, now);
    r.poll_transmit().expect("a reply").payload
}

#[test]
fn success_reply_is_the_bytes_a_direct_login_gets() {
    let mut c = Centre::new();
    let packet = hb("alice", "Secret12", 7, Some("AABBCCDDEEFF"));
    let (login, reply) = c.login("192.0.2.5", packet.clone()).unwrap();
    assert_eq!(reply, direct_reply(&packet, "192.0.2.5:4000"));
    assert_eq!(decode(&reply).unwrap().header.callsign_str(), Some("CALL1"));
    assert_eq!(login.source_ip, "192.0.2.5".parse::<IpAddr>().unwrap());
    assert_eq!(c.counters.checks_started, 1);
    // The second login of the same password is served from the cache.
    c.login("192.0.2.5", packet).unwrap();
    assert_eq!(
        (c.counters.checks_started, c.counters.verified_cached),
        (1, 1)
    );
}

#[test]
fn refusals_carry_the_direct_logins_reply() {
    for (packet, reason) in [
        (hb("alice", "Wrong123", 7, None), "invalid_password"),
        (hb("nobody", "Secret12", 7, None), "user_not_found"),
        (hb("alice", "Secret12", 0, None), "reserved_ssid"),
        (hb("alice", "x", 7, None), "invalid_password"),
    ] {
        let f = Centre::new()
            .login("192.0.2.5", packet.clone())
            .unwrap_err();
        assert_eq!(f.error, reason);
        assert_eq!(f.reply, direct_reply(&packet, "192.0.2.5:1"), "{reason}");
        assert_eq!(reject_of(&f.reply).1, reason);
    }
}

#[test]
fn four_failures_ban_the_forwarded_ip_only() {
    let mut c = Centre::new();
    for _ in 0..4 {
        let f = c
            .login("198.51.100.1", hb("alice", "Wrong123", 7, None))
            .unwrap_err();
        assert_eq!(f.error, "invalid_password");
    }
    let f = c
        .login("198.51.100.1", hb("alice", "Secret12", 7, None))
        .unwrap_err();
    assert_eq!((f.error, reject_of(&f.reply).0), ("too_many_failures", 3));
    c.login("198.51.100.2", hb("alice", "Secret12", 7, None))
        .expect("another IP is not banned");
    c.now += Duration::from_secs(11);
    c.login("198.51.100.1", hb("alice", "Secret12", 7, None))
        .expect("the ban ends");
}

#[test]
fn only_type_2_from_a_real_ip_is_taken() {
    let mut voice = Header::new(PacketType::Voice);
    voice.set_username("alice");
    voice.ssid = 7;
    let voice = encode(&voice, &[1, 2, 3]).unwrap();
    let mut ghost = Header::new(PacketType::Heartbeat);
    ghost.set_username("alice");
    ghost.ssid = 101;
    ghost.reserved = 5;
    let ghost = encode(&ghost, &[]).unwrap();
    for (ip, packet, error) in [
        (
            "192.0.2.1",
            voice,
            device_auth_error::UNSUPPORTED_PACKET_TYPE,
        ),
        (
            "192.0.2.1",
            vec![1, 2, 3],
            device_auth_error::INVALID_PACKET,
        ),
        (
            "edge",
            hb("alice", "Secret12", 7, None),
            device_auth_error::INVALID_SOURCE_IP,
        ),
        (
            "192.0.2.1",
            ghost,
            device_auth_error::GHOST_SESSION_UNSUPPORTED,
        ),
    ] {
        let f = Centre::new().login(ip, packet).unwrap_err();
        assert_eq!((f.error, f.reply.len()), (error, 0));
    }
}

#[test]
fn a_changed_password_hash_fails_the_check_silently() {
    let mut c = Centre::new();
    let login =
        ProxiedLogin::parse(&request("192.0.2.1", hb("alice", "Secret12", 7, None))).unwrap();
    let AuthStart::Check(p, _) =
        start_auth(&c.dir, &mut c.logins, &mut c.counters, 4, c.now, login, 1)
    else {
        panic!("a check");
    };
    assert_eq!(c.logins.checks_in_flight(), 1);
    let mut users = vec![];
    for id in 1..=7 {
        let mut u = c.dir.user(id).unwrap().clone();
        if id == 1 {
            u.device_password_hash = Some("$argon2id$other".into());
        }
        users.push(u);
    }
    let changed = crate::core::tests::dir_of(users, vec![]);
    let f = finish_check(&changed, &mut c.logins, &mut c.counters, c.now, p, true).unwrap_err();
    assert_eq!(
        (f.error, f.reply.len()),
        (device_auth_error::PASSWORD_CHANGED, 0)
    );
    assert_eq!(c.logins.checks_in_flight(), 0, "the check ended");
}

#[test]
fn a_full_in_flight_bound_answers_server_busy() {
    let mut c = Centre::new();
    let login = |name| ProxiedLogin::parse(&request("192.0.2.1", hb(name, "Secret12", 7, None)));
    let first = start_auth(
        &c.dir,
        &mut c.logins,
        &mut c.counters,
        1,
        c.now,
        login("alice").unwrap(),
        1,
    );
    let AuthStart::Check(p, _) = first else {
        panic!("a check");
    };
    let second = start_auth(
        &c.dir,
        &mut c.logins,
        &mut c.counters,
        1,
        c.now,
        login("bob").unwrap(),
        2,
    );
    let AuthStart::Failed(f) = second else {
        panic!("refused");
    };
    assert_eq!(f.error, "server_busy");
    abandon_check(&mut c.logins, &p);
    assert_eq!(c.logins.checks_in_flight(), 0);
}

#[test]
fn route_and_grant_of_an_activation() {
    let d = dir();
    let user = d.user_by_name("erin").unwrap().clone();
    let h = decode(&hb("erin", "Secret12", 9, Some("AABBCCDDEEFF")))
        .unwrap()
        .header;
    let (rec, changed) = crate::core::device_record_after_login(&d, (user.id, 9), &user, &h, None);
    assert!(changed, "a new record");
    assert_eq!((rec.group_id, rec.dev_model, rec.dmrid), (2, 2, user.dmrid));
    let mut owners = DeviceOwners::new(10, 10);
    let mut ids = MessageIds::new();
    let control = ControlRef {
        node: crate::codec::interconnect::NodeId::new("edge-a").unwrap(),
        control_session: 5,
    };
    let session = owners
        .activate(
            &mut ids,
            1_000,
            control,
            DeviceIdentity {
                owner_id: user.id,
                ssid: 9,
            },
        )
        .unwrap()
        .session;
    // Groups 1 and 2 are linked by 50: the domain is the smallest id, 1.
    let domain = wire_domain(&d, rec.group_id);
    assert_eq!(domain, 1);
    let route = device_route(&user, &rec, domain, &session);
    assert_eq!(
        (route.session_id, route.session_epoch, route.device_id),
        (session.session_id, 1, 5 * 256 + 9)
    );
    assert_eq!(
        (route.username.as_str(), route.callsign.as_str(), route.ssid),
        ("erin", "CALL5", 9)
    );
    assert_eq!((route.group_id, route.domain_id), (2, 1));
    let grant = device_grant(route.clone(), &rec, &session);
    assert_eq!(
        (grant.owner_id, grant.dmrid, grant.expires_at_ms),
        (5, user.dmrid, 1_000 + GRANT_LIFETIME_MS)
    );
    assert_eq!(grant.route, route);
    // A device in no group names no domain.
    assert_eq!(wire_domain(&d, UNGROUPED), 0);
    let resp = granted(3, grant, vec![1]);
    let msg = response_message(&mut ids, &resp);
    assert_eq!(
        msg.subtype,
        crate::codec::interconnect::Subtype::DEVICE_AUTH
    );
    assert_eq!(
        msg.decode::<crate::codec::interconnect::messages::DeviceAuthResponse>()
            .unwrap(),
        resp
    );
}
