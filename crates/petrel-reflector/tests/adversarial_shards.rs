//! Adversarial findings against the sharded ingress (draarl-v1 §3.2, §4.1).
//! Reproduced live against `petrel reflector serve` on loopback (see the
//! review report); the tests here pin each finding at the API that owns it.
//! Each test pins a finding that has since been fixed, or a property that held.
#![allow(clippy::unwrap_used)]

use std::net::{IpAddr, Ipv4Addr, SocketAddr, UdpSocket};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::time::{Duration, Instant};

use petrel_reflector::codec::decode;
use petrel_reflector::core::{shard_of, Ingress};
use petrel_reflector::model::{ServerConfig, SessionConfig};
use petrel_reflector::policy::{BanCheck, BanLadder};
use petrel_reflector::runtime::server::ServerHandle;

mod support;

/// The default `session.ban_table_max`.
const BAN_TABLE_MAX: usize = 65_536;

/// Held by every test here that starts a server: the Argon2 thread count
/// below is read process-wide, so no other server's pool may start meanwhile.
static SERVERS: Mutex<()> = Mutex::new(());

fn one_server_at_a_time() -> MutexGuard<'static, ()> {
    SERVERS.lock().unwrap_or_else(PoisonError::into_inner)
}

fn ip(i: u32) -> IpAddr {
    IpAddr::V4(Ipv4Addr::from(0x7f00_0000 | (i & 0x00ff_ffff)))
}

/// Live: 200 addresses sending heartbeats for 500 made-up usernames for 3 s
/// (600 pps per address, under the rate limit) recorded ~96 000
/// `user_not_found` failures, filling the table; afterwards 9 wrong
/// passwords for a real user from a fresh address all got
/// `invalid_password` and the right one logged in — no `too_many_failures`.
/// Made-up names from one address now share one entry (core/login.rs), and
/// a full table evicts its least recent record still within its free
/// failures instead of leaving new keys untracked (policy/ban.rs), so 65 536
/// source addresses no longer switch the ladder off.
#[test]
fn ban_ladder_still_bans_after_the_table_is_filled_with_unknown_usernames() {
    let t0 = Instant::now();
    let mut ladder = BanLadder::new(BAN_TABLE_MAX);
    for i in 0..BAN_TABLE_MAX as u32 {
        ladder.record_failure(ip(i % 200 + 1), &format!("nobody{i}"), t0);
    }
    let attacker = ip(0x00ff_0001);
    for k in 0..6 {
        ladder.record_failure(attacker, "carol", t0 + Duration::from_millis(k));
    }
    assert!(
        matches!(
            ladder.check(attacker, "carol", t0 + Duration::from_millis(10)),
            BanCheck::Blocked(_)
        ),
        "6 wrong passwords for a real user were not banned"
    );
}

/// The ladder across SSIDs of one username held live while the table had
/// room (4 × `invalid_password`, then `too_many_failures` on SSIDs that
/// hash to both shards, and for the right password from that address).
#[test]
fn ban_ladder_is_per_username_not_per_ssid_while_the_table_has_room() {
    let t0 = Instant::now();
    let mut ladder = BanLadder::new(BAN_TABLE_MAX);
    let src = ip(9);
    for k in 0..4 {
        ladder.record_failure(src, "carol", t0 + Duration::from_millis(k));
    }
    assert!(matches!(
        ladder.check(src, "carol", t0 + Duration::from_millis(5)),
        BanCheck::Blocked(_)
    ));
    assert!(matches!(ladder.check(ip(10), "carol", t0), BanCheck::Clear));
}

/// Found live: with one Argon2 pool per shard of `(4 / 8).max(1)` threads,
/// `ingress_workers = 8` ran 8 Argon2 threads and RSS went 13 MB → 169 MB
/// under a 4 s wrong-password flood (64 shards: 1 048 MB), past the
/// documented bound of `password_checks_in_flight` × 19 MiB. Now one pool of
/// `password_checks_in_flight` threads serves every shard.
#[cfg(target_os = "linux")]
#[test]
fn argon2_threads_do_not_grow_with_the_shard_count() {
    fn argon2_threads() -> usize {
        std::fs::read_dir("/proc/self/task")
            .unwrap()
            .filter_map(|t| std::fs::read_to_string(t.ok()?.path().join("comm")).ok())
            .filter(|c| c.trim() == "refl-argon2")
            .count()
    }
    let _alone = one_server_at_a_time();
    let before = argon2_threads();
    let config = |db: &str| {
        let cfg = ServerConfig {
            ingress_workers: 8,
            ..support::udp_config(db)
        };
        assert_eq!(cfg.session.password_checks_in_flight, 4);
        cfg
    };
    support::with_sqlite_server("adv_argon2_threads", [], config, |_| {
        // A thread names itself once it runs, after `spawn` has returned: wait
        // for the pool to appear, then check that no more threads follow.
        let deadline = Instant::now() + Duration::from_secs(5);
        while argon2_threads().saturating_sub(before) < 4 && Instant::now() < deadline {
            std::thread::sleep(Duration::from_millis(10));
        }
        std::thread::sleep(Duration::from_millis(200));
        assert_eq!(argon2_threads().saturating_sub(before), 4);
    });
}

/// What held live: out-of-range shard settings are named errors (exit 1).
#[test]
fn shard_settings_out_of_range_are_named_errors() {
    for (workers, queue, field) in [
        (0, 4096, "ingress_workers"),
        (65, 4096, "ingress_workers"),
        (usize::MAX, 4096, "ingress_workers"),
        (2, 63, "ingress_queue"),
        (2, (1 << 20) + 1, "ingress_queue"),
    ] {
        let cfg = ServerConfig {
            ingress_workers: workers,
            ingress_queue: queue,
            session: SessionConfig {
                password_checks_in_flight: 64,
                ..SessionConfig::default()
            },
            ..ServerConfig::default()
        };
        let err = cfg.validate().unwrap_err().to_string();
        assert!(err.contains(field), "{workers}/{queue}: {err}");
    }
}

/// By design (reference §4.1) the shard follows the claimed username, so a
/// spoofer anywhere can aim at a real device's shard; the queue bound then
/// costs that shard's devices only, and every drop is counted.
#[test]
fn spoofed_usernames_reach_the_victims_shard_and_overflow_is_counted() {
    let mut h = vec![0u8; 90];
    h[..4].copy_from_slice(b"DraA");
    h[4..6].copy_from_slice(&90u16.to_be_bytes());
    h[6..11].copy_from_slice(b"alice");
    h[48] = 2;
    h[50] = 1;
    let victim: SocketAddr = "127.0.0.2:4000".parse().unwrap();
    let shard = shard_of(&h, victim, 2);
    for i in 1..=200u32 {
        let spoofer = SocketAddr::new(ip(0x0001_0000 + i), 5000);
        assert_eq!(shard_of(&h, spoofer, 2), shard);
    }
    let mut ingress = Ingress::new(&SessionConfig::default(), 2);
    assert_eq!(ingress.admit(Instant::now(), victim, &h), Some(shard));
    ingress.count_queue_full();
    assert_eq!(ingress.stats().queue_full_drops, 1);
    assert_eq!(ingress.stats().read, 1);
}

/// The accounts of the login-starvation test; frank's is the one checked.
const USERS: [&str; 5] = ["alice", "bob", "carol", "dave", "frank"];
const PW: &str = "Right123";

/// Live: 100 addresses, each well under the rate limits (50 pps), sending
/// wrong passwords for four real users spent the global Argon2 budget
/// (`password_checks_per_s`, 10/s) as fast as it refilled; a user whose
/// password was not cached yet got `server_busy` on every try for the 5 s
/// of the flood (6 of 6). The ban ladder did not help: each address gets
/// 4 free guesses per username and `server_busy` is not a failure.
/// Fixed by the per-prefix Argon2 budget (policy/password_budget.rs): the
/// flood's /24 may spend only a few checks per guessed user, and its total
/// is capped per prefix, so frank — another user, even in the same /24 —
/// finds tokens at every level.
#[test]
fn first_login_succeeds_during_a_wrong_password_flood() {
    let _alone = one_server_at_a_time();
    let users = USERS
        .iter()
        .enumerate()
        .map(|(i, u)| support::account(u, format!("AD{i:04}"), 9_100_000 + i as u32, PW));
    let name = "adv_login_starvation";
    let (replies, budget_drops) =
        support::with_sqlite_server(name, users, support::udp_config, starve_and_log_in);
    assert!(
        replies.iter().any(|(callsign, _)| !callsign.is_empty()),
        "frank never logged in: {replies:?}; {budget_drops} checks over budget"
    );
}

/// Floods wrong passwords for four of the users while frank logs in; his
/// replies (callsign, data) and the checks dropped over budget.
fn starve_and_log_in(srv: &ServerHandle) -> (Vec<(String, String)>, u64) {
    let at = srv.local_addr();
    let stop = Arc::new(AtomicBool::new(false));
    let flood = {
        let stop = Arc::clone(&stop);
        std::thread::spawn(move || {
            let socks: Vec<UdpSocket> = (1..=100u8)
                .map(|i| UdpSocket::bind(SocketAddr::from(([127, 0, 6, i], 0))).unwrap())
                .collect();
            let mut round = 0u32;
            while !stop.load(Ordering::Relaxed) {
                for (k, s) in socks.iter().enumerate() {
                    let ssid = (round as usize + k) % 90 + 1;
                    let guess = format!("Guess{:03}", round % 1000);
                    let p = support::heartbeat(USERS[k % 4], ssid as u8, &guess, &[]);
                    let _ = s.send_to(&p, at);
                }
                round += 1;
                std::thread::sleep(Duration::from_millis(20));
            }
        })
    };
    std::thread::sleep(Duration::from_secs(2));
    let frank = UdpSocket::bind("127.0.6.200:0").unwrap();
    frank
        .set_read_timeout(Some(Duration::from_millis(500)))
        .unwrap();
    let mut replies = Vec::new();
    let mut buf = [0u8; 2048];
    for _ in 0..6 {
        frank
            .send_to(&support::heartbeat("frank", 1, PW, &[]), at)
            .unwrap();
        if let Ok((n, _)) = frank.recv_from(&mut buf) {
            let p = decode(&buf[..n]).unwrap();
            replies.push((
                p.header.callsign_str().unwrap_or_default().to_owned(),
                String::from_utf8_lossy(p.data).into_owned(),
            ));
        }
        std::thread::sleep(Duration::from_millis(400));
    }
    let budget_drops = srv.stats().session.password_check_budget_drops;
    stop.store(true, Ordering::Relaxed);
    flood.join().unwrap();
    (replies, budget_drops)
}
