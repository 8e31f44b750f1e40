//! Attacks on Type 1 app ("ghost") sessions and the operator dashboard, as
//! an Internet attacker would make them, over real loopback sockets and
//! HTTP (`specs/draarl-apps.md` §2; the dashboard of `runtime/dashboard/`).
//! Every flood is bounded in count and time; each test asserts what the
//! attacker sees (bytes back, replies) and the counters the server keeps.
//! The account store is a fake (`tests/support/fake_authority.rs`); every
//! test runs on SQLite and PostgreSQL (`tests/support/backends.rs`).
#![allow(clippy::unwrap_used)]

use std::net::{SocketAddr, UdpSocket};
use std::sync::atomic::{AtomicUsize, Ordering::SeqCst};
use std::sync::Arc;
use std::time::{Duration, Instant};

use petrel_reflector::codec::{decode, encode, Header, PacketType};
use petrel_reflector::model::{
    AppAuthRequest, AppGrant, AppReject, EndpointPolicy, Routing, RoutingChange, RoutingReject,
    ServerConfig, SessionConfig,
};
use petrel_reflector::runtime::app_authority::{AppAuthority, AppFuture};
use petrel_reflector::runtime::server::ServerHandle;
use petrel_reflector::runtime::stats::ServerStats;
use tokio::runtime::Runtime;

#[macro_use]
mod support;
use support::fake_authority::FakeAuthority;
use support::ghost_client::{
    drain, ghost_packet, instance, login, login_json, physical, recv_login, type1, type1_data,
    udp_client, IID, PW,
};
use support::{account, heartbeat, recv_type, seed_users, udp_config, Env};

on_every_backend!(
    a_type1_flood_never_amplifies_and_a_ghost_still_gets_in,
    a_stalled_account_store_holds_a_bounded_number_of_checks,
    tag_guessing_and_stolen_tags_are_dropped_and_counted,
    a_ghost_in_every_group_of_a_domain_gets_one_copy_per_frame,
    a_full_registry_evicts_the_least_recently_heard,
    session_limit_and_replacement_games,
    malformed_type1_json_gets_its_exact_reject,
    unproven_sessions_do_not_squat_an_address_and_silence_expires,
    dashboard_sign_in_and_hostile_callsigns,
);

/// An account store that never answers; counts the checks still waiting.
#[derive(Debug, Default)]
struct HangingAuthority {
    waiting: Arc<AtomicUsize>,
}

/// Counts one waiting check while it lives.
struct Waiting(Arc<AtomicUsize>);

impl Drop for Waiting {
    fn drop(&mut self) {
        self.0.fetch_sub(1, SeqCst);
    }
}

impl AppAuthority for HangingAuthority {
    fn authorize(&self, _req: AppAuthRequest) -> AppFuture<Result<AppGrant, AppReject>> {
        self.waiting.fetch_add(1, SeqCst);
        let guard = Waiting(Arc::clone(&self.waiting));
        Box::pin(async move {
            let _guard = guard;
            std::future::pending::<()>().await;
            Err(AppReject::InvalidToken)
        })
    }

    fn change_routing(&self, change: RoutingChange) -> AppFuture<Result<Routing, RoutingReject>> {
        Box::pin(async move { Ok(change.requested) })
    }
}

fn with_server(
    env: &Env,
    authority: Arc<dyn AppAuthority>,
    config: impl FnOnce(ServerConfig) -> ServerConfig,
    body: impl FnOnce(&ServerHandle),
) {
    with_seeded_server(env, authority, |_, _| {}, config, body);
}

/// [`with_server`] with `seed(runtime, db)` run on the store after alice
/// is added.
fn with_seeded_server(
    env: &Env,
    authority: Arc<dyn AppAuthority>,
    seed: impl FnOnce(&Runtime, &str),
    config: impl FnOnce(ServerConfig) -> ServerConfig,
    body: impl FnOnce(&ServerHandle),
) {
    seed_users(&env.rt, &env.db, [account("alice", "BG7AAA".into(), 1, PW)]);
    seed(&env.rt, &env.db);
    support::serve(env, config(udp_config(&env.db)), Some(authority), body);
}

fn client(ip: &str) -> UdpSocket {
    udp_client(ip, Duration::from_millis(300))
}

/// The server's counters once `done` holds (published every 10 ms), or
/// after 3 s.
fn stats_when(srv: &ServerHandle, done: impl Fn(&ServerStats) -> bool) -> ServerStats {
    let deadline = Instant::now() + Duration::from_secs(3);
    loop {
        let s = srv.stats();
        if done(&s) || Instant::now() > deadline {
            return s;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// Many sources send Type 1 logins (and untagged app packets) of every
/// size: none gets more bytes back than it sent, every reject is counted,
/// the rate limits hold per source, and a real ghost logs in meanwhile.
fn a_type1_flood_never_amplifies_and_a_ghost_still_gets_in(env: &Env) {
    with_server(
        env,
        FakeAuthority::routed(999, &[]),
        |c| c,
        |srv| {
            let server = srv.local_addr();
            let sources: Vec<UdpSocket> =
                (1..=64).map(|i| client(&format!("127.1.0.{i}"))).collect();
            let attempts: Vec<Vec<u8>> = vec![
                // Empty DATA: a 90-byte request; its reject would be 122 bytes.
                type1_data(b"", 101),
                type1_data(b"{}", 101),
                type1_data(b"legacy", 101),
                // Full requests: answered, each smaller than the request.
                type1("stolen-or-forged", IID),
                type1("t", "hardware-id"),
                // Untagged reserved SSID: 1 byte of DATA (withheld), 24 (answered).
                ghost_packet(PacketType::Voice, "x", 101, 101, 0, b"v"),
                ghost_packet(PacketType::Heartbeat, "x", 101, 101, 0, &[0; 24]),
            ];
            let flood = std::thread::scope(|scope| {
                let flood = scope.spawn(|| {
                    for s in &sources {
                        for a in &attempts {
                            s.send_to(a, server).unwrap();
                        }
                    }
                });
                // A real ghost during the flood.
                let phone = client("127.0.0.3");
                let ok = login(&phone, server, "ok-1000-ghostbob", IID).unwrap();
                assert_eq!(ok.tx_group_id, 999);
                flood.join()
            });
            flood.unwrap();
            let sent: usize = attempts.iter().map(Vec::len).sum();
            for s in &sources {
                let got = drain(s);
                let bytes: usize = got.iter().map(Vec::len).sum();
                assert!(bytes <= sent, "{bytes} bytes back for {sent}");
                let mut texts: Vec<Vec<u8>> = got
                    .iter()
                    .map(|d| decode(d).unwrap().data.to_vec())
                    .collect();
                texts.sort();
                assert_eq!(
                    texts,
                    vec![
                        b"\x01Invalid or expired token".to_vec(),
                        b"\x01invalid_client_instance_id".to_vec(),
                        b"\x02reserved_ssid".to_vec(),
                    ]
                );
                for d in &got {
                    assert!(d.len() <= attempts.iter().map(Vec::len).max().unwrap());
                }
            }
            let st = stats_when(srv, |s| {
                s.session.app_login_rejects >= 64 * 5 && s.session.app_replies_withheld >= 64 * 4
            })
            .session;
            assert_eq!(st.app_logins, 64 * 5 + 1);
            assert_eq!(st.app_login_rejects, 64 * 5);
            assert_eq!(st.app_logins_accepted, 1);
            assert_eq!(st.rejects_reserved_ssid, 64 * 2);
            // Three Type 1 rejects and one reserved_ssid per source withheld.
            assert_eq!(st.app_replies_withheld, 64 * 4);

            // One source at full speed: its rate limit holds.
            let hammer = client("127.1.1.1");
            let bad = type1("bad", IID);
            for _ in 0..1_000 {
                hammer.send_to(&bad, server).unwrap();
            }
            let replies = drain(&hammer).len();
            let st = stats_when(srv, |s| s.ingress.rate_limit_drops > 0);
            assert!(st.ingress.rate_limit_drops >= 500, "{:?}", st.ingress);
            assert!(replies <= 1_000 - 500, "{replies} replies");
        },
    );
}

/// An account store that never answers while logins pour in: the
/// checks waiting stay within `app_logins_in_flight` per shard.
fn a_stalled_account_store_holds_a_bounded_number_of_checks(env: &Env) {
    let authority = Arc::new(HangingAuthority::default());
    let waiting = Arc::clone(&authority.waiting);
    const IN_FLIGHT: usize = 8;
    with_server(
        env,
        authority,
        |c| ServerConfig {
            session: SessionConfig {
                app_logins_in_flight: IN_FLIGHT,
                ..c.session
            },
            ..c
        },
        |srv| {
            let server = srv.local_addr();
            let logins = 300;
            for i in 0..logins {
                let s = client(&format!("127.2.{}.{}", i / 200, i % 200 + 1));
                s.send_to(&type1("ok-1-bob", &instance(i)), server).unwrap();
            }
            let st = stats_when(srv, |s| s.session.app_logins >= u64::from(logins));
            assert_eq!(st.session.app_logins, u64::from(logins));
            std::thread::sleep(Duration::from_millis(200));
            let bound = IN_FLIGHT * st.ingress_workers;
            let live = waiting.load(SeqCst);
            assert!(live <= bound, "{live} checks waiting, bound {bound}");
            assert!(
                st.session.app_login_checks_evicted >= u64::from(logins) - bound as u64,
                "{:?}",
                st.session
            );
        },
    );
}

/// Tags sprayed from other addresses, the right tag with the wrong
/// identity or from elsewhere, a replaced session's old tag: each dropped
/// silently in its step of §2.5 and counted; nothing is forwarded. The
/// ghost subscribed to several groups gets one copy per frame, at its own
/// address only.
fn tag_guessing_and_stolen_tags_are_dropped_and_counted(env: &Env) {
    with_server(
        env,
        FakeAuthority::routed(999, &[1, 2, 3]),
        |c| c,
        |srv| {
            let server = srv.local_addr();
            let alice = physical("127.0.0.2", "alice", 7, srv);
            let phone = client("127.0.0.3");
            let ok = login(&phone, server, "ok-1000-ghostbob", IID).unwrap();
            assert_eq!(ok.rx_group_ids, vec![1, 2, 3, 999]);
            let tag = ok.session_tag;
            phone
                .send_to(
                    &ghost_packet(PacketType::Heartbeat, "ghostbob", 101, 101, tag, &[0; 24]),
                    server,
                )
                .unwrap();
            assert!(recv_type(&phone, PacketType::Heartbeat).is_some());

            // 500 random tags from another address, Types 2, 4 and 5.
            // (Five sockets of one address, each within its per-endpoint burst.)
            let sprayers: Vec<UdpSocket> = (0..5).map(|_| client("127.0.0.9")).collect();
            let mallory = &sprayers[0];
            let mut x: u32 = 0x9e37_79b9;
            let mut sprayed = 0u64;
            for i in 0..500 {
                x ^= x << 13;
                x ^= x >> 17;
                x ^= x << 5;
                if x == tag || x == 0 {
                    continue;
                }
                let t = [PacketType::Heartbeat, PacketType::Voice, PacketType::Text][i % 3];
                sprayers[i / 100]
                    .send_to(&ghost_packet(t, "ghostbob", 101, 101, x, b"spray"), server)
                    .unwrap();
                sprayed += 1;
            }
            // The right tag from mallory's address; the right tag from the
            // phone with another username, SSID, DevModel; SSID 255.
            for t in [PacketType::Voice, PacketType::Heartbeat] {
                mallory
                    .send_to(
                        &ghost_packet(t, "ghostbob", 101, 101, tag, &[0; 24]),
                        server,
                    )
                    .unwrap();
            }
            for (name, ssid, model) in [
                ("alice", 101, 101),
                ("ghostbob", 102, 101),
                ("ghostbob", 101, 102),
            ] {
                phone
                    .send_to(
                        &ghost_packet(PacketType::Voice, name, ssid, model, tag, b"x"),
                        server,
                    )
                    .unwrap();
            }
            phone
                .send_to(
                    &ghost_packet(PacketType::Voice, "ghostbob", 255, 101, tag, b"x"),
                    server,
                )
                .unwrap();
            for s in &sprayers {
                assert!(drain(s).is_empty(), "mallory was answered");
            }
            assert!(drain(&alice).is_empty(), "something was forwarded");
            let st = stats_when(srv, |s| {
                s.session.ghost_invalid_tags >= sprayed
                    && s.session.ghost_endpoint_rejects >= 2
                    && s.session.ghost_identity_rejects >= 3
                    && s.session.reserved_tag_drops >= 1
            })
            .session;
            assert_eq!(
                (
                    st.ghost_invalid_tags,
                    st.ghost_endpoint_rejects,
                    st.ghost_identity_rejects,
                    st.reserved_tag_drops,
                    st.ghost_registry_rejects,
                ),
                (sprayed, 2, 3, 1, 0)
            );

            // Downlink: alice talks in 999; the ghost (RX 1, 2, 3, 999) gets
            // one copy with Reserved 999, mallory nothing.
            let mut v = Header::new(PacketType::Voice);
            v.set_username("alice");
            v.ssid = 7;
            alice.send_to(&encode(&v, b"vv").unwrap(), server).unwrap();
            let copies: Vec<Vec<u8>> = drain(&phone)
                .into_iter()
                .filter(|d| decode(d).unwrap().header.packet_type == PacketType::Voice)
                .collect();
            assert_eq!(copies.len(), 1);
            assert_eq!(decode(&copies[0]).unwrap().header.reserved, 999);
            assert!(drain(mallory).is_empty());

            // The same instance logs in again: the old tag stops resolving.
            let again = login(&phone, server, "ok-1000-ghostbob", IID).unwrap();
            assert_ne!(again.session_tag, tag);
            let before = srv.stats().session.ghost_invalid_tags;
            phone
                .send_to(
                    &ghost_packet(PacketType::Heartbeat, "ghostbob", 101, 101, tag, &[0; 24]),
                    server,
                )
                .unwrap();
            assert!(recv_type(&phone, PacketType::Heartbeat).is_none());
            let st = stats_when(srv, |s| s.session.ghost_invalid_tags > before).session;
            assert_eq!(st.ghost_invalid_tags, before + 1);
            assert_eq!(st.ghost_replacements, 1);
        },
    );
}

/// A ghost subscribed to every group of a forwarding domain (a virtual
/// group linking 999 and 51) gets one copy of each frame, with Reserved
/// the sender's group; the physical sender's copy elsewhere has Reserved 0.
fn a_ghost_in_every_group_of_a_domain_gets_one_copy_per_frame(env: &Env) {
    with_seeded_server(
        env,
        FakeAuthority::routed(999, &[50, 51]),
        |rt, db| {
            rt.block_on(async {
                let store = support::open_cheap(db).await;
                // Taken if the store created the default group itself.
                let _ = store.add_group("main", false, Some(999)).await;
                store.add_group("net", true, Some(50)).await.unwrap();
                store.add_group("side", false, Some(51)).await.unwrap();
                store.link_groups(50, 999).await.unwrap();
                store.link_groups(50, 51).await.unwrap();
                store.close().await;
            });
            seed_users(rt, db, [account("bob", "BG7BBB".into(), 2, PW)]);
        },
        |c| c,
        |srv| {
            let server = srv.local_addr();
            let alice = client("127.0.0.2");
            let bob = client("127.0.0.12");
            for (s, name) in [(&alice, "alice"), (&bob, "bob")] {
                s.send_to(&heartbeat(name, 7, PW, &[]), server).unwrap();
                assert!(recv_type(s, PacketType::Heartbeat).is_some());
            }
            let phone = client("127.0.0.3");
            let ok = login(&phone, server, "ok-1000-ghostbob", IID).unwrap();
            assert_eq!(ok.rx_group_ids, vec![50, 51, 999]);
            phone
                .send_to(
                    &ghost_packet(
                        PacketType::Heartbeat,
                        "ghostbob",
                        101,
                        101,
                        ok.session_tag,
                        &[0; 24],
                    ),
                    server,
                )
                .unwrap();
            assert!(recv_type(&phone, PacketType::Heartbeat).is_some());
            let mut v = Header::new(PacketType::Voice);
            v.set_username("alice");
            v.ssid = 7;
            for _ in 0..3 {
                alice.send_to(&encode(&v, b"vv").unwrap(), server).unwrap();
            }
            let copies: Vec<u32> = drain(&phone)
                .iter()
                .map(|d| decode(d).unwrap().header)
                .filter(|h| h.packet_type == PacketType::Voice)
                .map(|h| h.reserved)
                .collect();
            assert_eq!(copies, vec![999; 3]);
            let heard: Vec<u32> = drain(&bob)
                .iter()
                .map(|d| decode(d).unwrap().header)
                .filter(|h| h.packet_type == PacketType::Voice)
                .map(|h| h.reserved)
                .collect();
            assert_eq!(heard, vec![0; 3]);
        },
    );
}

/// More accounts log in than the registry holds: the least recently heard
/// sessions are evicted and counted, their tags stop resolving, and the
/// session heard last stays.
fn a_full_registry_evicts_the_least_recently_heard(env: &Env) {
    with_server(
        env,
        FakeAuthority::routed(999, &[]),
        |c| ServerConfig {
            session: SessionConfig {
                ghost_sessions_max: 4,
                ..c.session
            },
            ..c
        },
        |srv| {
            let server = srv.local_addr();
            let heartbeat_of = |i: u32, tag: u32| {
                ghost_packet(
                    PacketType::Heartbeat,
                    &format!("u{i}"),
                    101,
                    101,
                    tag,
                    &[0; 24],
                )
            };
            let mut ghosts = Vec::new();
            for i in 1..=10u32 {
                let s = client("127.0.0.11");
                let ok = login(&s, server, &format!("ok-{i}-u{i}"), IID).unwrap();
                // The first one keeps talking, so it is never the least recent.
                let first = ghosts.first().map(|(s, tag): &(UdpSocket, u32)| (s, *tag));
                if let Some((s, tag)) = first {
                    s.send_to(&heartbeat_of(1, tag), server).unwrap();
                    assert!(
                        recv_type(s, PacketType::Heartbeat).is_some(),
                        "u1 evicted at {i}"
                    );
                }
                ghosts.push((s, ok.session_tag));
            }
            let st = stats_when(srv, |s| s.session.ghost_sessions_evicted >= 6).session;
            assert_eq!(st.ghost_sessions_evicted, 6);
            let alive: Vec<u32> = ghosts
                .iter()
                .zip(1u32..)
                .filter(|((s, tag), i)| {
                    s.send_to(&heartbeat_of(*i, *tag), server).unwrap();
                    recv_type(s, PacketType::Heartbeat).is_some()
                })
                .map(|(_, i)| i)
                .collect();
            assert_eq!(alive, vec![1, 8, 9, 10]);
        },
    );
}

/// The ninth session, two addresses racing with one instance, and a
/// client that logs in again and again: the limit text is exact, one of
/// the racers holds the session, and re-logins never add sessions.
fn session_limit_and_replacement_games(env: &Env) {
    with_server(
        env,
        FakeAuthority::routed(999, &[]),
        |c| c,
        |srv| {
            let server = srv.local_addr();
            let token = "ok-7-eve";
            let phones: Vec<UdpSocket> = (0..8).map(|_| client("127.0.0.4")).collect();
            for (i, p) in phones.iter().enumerate() {
                assert!(login(p, server, token, &instance(i as u32 + 1)).is_ok());
            }
            let ninth = client("127.0.0.4");
            assert_eq!(
                login(&ninth, server, token, &instance(9)).unwrap_err(),
                b"\x01ghost_session_limit active=8 limit=8"
            );

            // Instance 1 from two new addresses at once.
            let a = client("127.0.0.5");
            let b = client("127.0.0.6");
            a.send_to(&type1(token, &instance(1)), server).unwrap();
            b.send_to(&type1(token, &instance(1)), server).unwrap();
            let tags: Vec<(UdpSocket, u32)> = [a, b]
                .into_iter()
                .map(|s| {
                    let (p, _) = recv_login(&s).unwrap();
                    let tag = decode(&p).unwrap().header.reserved;
                    assert_ne!(tag, 0);
                    (s, tag)
                })
                .collect();
            let alive: usize = tags
                .iter()
                .filter(|(s, tag)| {
                    s.send_to(
                        &ghost_packet(PacketType::Heartbeat, "eve", 101, 101, *tag, &[0; 24]),
                        server,
                    )
                    .unwrap();
                    recv_type(s, PacketType::Heartbeat).is_some()
                })
                .count();
            assert_eq!(alive, 1);

            // Fifty re-logins of one instance: still eight sessions.
            let looper = &phones[1];
            for _ in 0..50 {
                assert!(login(looper, server, token, &instance(2)).is_ok());
            }
            assert_eq!(
                login(&ninth, server, token, &instance(9)).unwrap_err(),
                b"\x01ghost_session_limit active=8 limit=8"
            );
            let st = stats_when(srv, |s| {
                s.session.ghost_replacements >= 52 && s.session.ghost_session_limit_rejects >= 2
            })
            .session;
            assert_eq!(st.ghost_replacements, 52);
            assert_eq!(st.ghost_session_limit_rejects, 2);
        },
    );
}

/// Malformed Type 1 JSON of every kind: the exact reject, or a counted
/// drop; the server keeps answering.
fn malformed_type1_json_gets_its_exact_reject(env: &Env) {
    with_server(
        env,
        FakeAuthority::routed(999, &[]),
        |c| c,
        |srv| {
            let server = srv.local_addr();
            let sock = client("127.0.0.7");
            let pad = " ".repeat(64);
            let up = b"\x01ghost_protocol_upgrade_required".to_vec();
            let deep = format!(
                r#"{{"version":1,"token":"t","client_instance_id":"{IID}","capabilities":{}{}}}"#,
                "[".repeat(300),
                "]".repeat(300)
            );
            let many_keys = format!(
                "{pad}{{{}}}",
                (0..60)
                    .map(|i| format!("\"k{i}\":1"))
                    .collect::<Vec<_>>()
                    .join(",")
            );
            let mut bad_utf8 = login_json("tok", IID).into_bytes();
            let at = bad_utf8.windows(3).position(|w| w == b"tok").unwrap();
            bad_utf8[at] = 0xff;
            let mut nul_padded = login_json("tok", IID).into_bytes();
            nul_padded.extend_from_slice(&[0; 40]);
            let dup = format!(
                r#"{pad}{{"version":1,"token":"a","token":"b","client_instance_id":"{IID}","capabilities":["multi_receive_v1","source_group_v1"]}}"#
            );
            let huge_token = "a".repeat(560);
            let cases: Vec<(Vec<u8>, Option<Vec<u8>>)> = vec![
            (deep.into_bytes(), Some(up.clone())),
            (many_keys.into_bytes(), Some(up.clone())),
            (bad_utf8, Some(up.clone())),
            (nul_padded, Some(up.clone())),
            (dup.into_bytes(), Some(up.clone())),
            (
                format!(r#"{pad}{{"version":1e400,"token":"t","client_instance_id":"{IID}"}}"#).into_bytes(),
                Some(up.clone()),
            ),
            (
                format!(r#"{pad}{{"version":18446744073709551617,"token":"t","client_instance_id":"{IID}"}}"#)
                    .into_bytes(),
                Some(up.clone()),
            ),
            (
                format!(r#"{pad}{{"version":1,"token":1e400,"client_instance_id":"{IID}"}}"#).into_bytes(),
                Some(up.clone()),
            ),
            (
                format!(r#"{pad}{{"version":1,"token":"t","client_instance_id":"{IID}","capabilities":["multi_receive_v1","source_group_v1\u0000"]}}"#)
                    .into_bytes(),
                Some(b"\x01ghost_capabilities_required".to_vec()),
            ),
            // A token filling the datagram up to the 800-byte cap.
            (
                login_json(&huge_token, IID).into_bytes(),
                Some(b"\x01Invalid or expired token".to_vec()),
            ),
        ];
            for (data, want) in &cases {
                let req = type1_data(data, 101);
                assert!(req.len() <= 800, "{}", req.len());
                sock.send_to(&req, server).unwrap();
                let got = recv_login(&sock).map(|(r, _)| decode(&r).unwrap().data.to_vec());
                assert_eq!(
                    got.as_ref(),
                    want.as_ref(),
                    "{}",
                    String::from_utf8_lossy(data)
                );
                assert!(got.map_or(0, |g| g.len() + 90) <= req.len());
            }
            // 801 bytes: refused by the envelope (draarl-v1 §2.2), no reply.
            let mut over = type1(&huge_token, IID);
            over.resize(801, b' ');
            sock.send_to(&over, server).unwrap();
            assert!(recv_login(&sock).is_none());
            let st = stats_when(srv, |s| {
                s.session.decode_errors >= 1 && s.session.app_login_rejects >= cases.len() as u64
            })
            .session;
            assert_eq!(st.decode_errors, 1);
            assert_eq!(st.app_login_rejects, cases.len() as u64);
            // Still serving.
            assert!(login(&sock, server, "ok-5-zed", IID).is_ok());
        },
    );
}

/// A login that never proves its address (as one sent from a forged
/// source) does not keep the real client at that IP:port out; a proven
/// session does, until it has been silent past the liveness timeout.
fn unproven_sessions_do_not_squat_an_address_and_silence_expires(env: &Env) {
    with_server(
        env,
        FakeAuthority::routed(999, &[]),
        |c| ServerConfig {
            session: SessionConfig {
                offline_timeout_ms: 1_000,
                sweep_interval_ms: 100,
                endpoints: EndpointPolicy {
                    receive_after_ms: 0,
                    ..c.session.endpoints
                },
                ..c.session
            },
            ..c
        },
        |srv| {
            let server = srv.local_addr();
            // Mallory's own account logs in "from" the phone's address and
            // never sends a tagged packet.
            let squatter = client("127.0.0.10");
            let at = squatter.local_addr().unwrap();
            assert!(login(&squatter, server, "ok-66-mallory", &instance(66)).is_ok());
            drop(squatter);
            let phone = UdpSocket::bind(at).unwrap();
            phone
                .set_read_timeout(Some(Duration::from_millis(300)))
                .unwrap();
            let ok = login(&phone, server, "ok-1000-ghostbob", IID).unwrap();
            let tag = ok.session_tag;
            let hb = ghost_packet(PacketType::Heartbeat, "ghostbob", 101, 101, tag, &[0; 24]);
            phone.send_to(&hb, server).unwrap();
            assert!(recv_type(&phone, PacketType::Heartbeat).is_some());
            let st = stats_when(srv, |s| s.session.ghost_sessions_displaced >= 1).session;
            assert_eq!(
                (st.ghost_sessions_displaced, st.ghost_registration_failures),
                (1, 0)
            );

            // A proven session keeps its address against another login.
            assert_eq!(
                login(&phone, server, "ok-66-mallory", &instance(67)).unwrap_err(),
                b"\x01ghost_session_registration_failed"
            );

            // Silence past the timeout: the session ends, its tag stops
            // resolving and it hears nothing more.
            std::thread::sleep(Duration::from_millis(1_500));
            let st = stats_when(srv, |s| s.session.ghost_sessions_expired >= 1).session;
            assert_eq!(st.ghost_sessions_expired, 1);
            let alice = physical("127.0.0.2", "alice", 7, srv);
            let mut v = Header::new(PacketType::Voice);
            v.set_username("alice");
            v.ssid = 7;
            alice.send_to(&encode(&v, b"vv").unwrap(), server).unwrap();
            phone.send_to(&hb, server).unwrap();
            assert!(drain(&phone).is_empty());
            let st = stats_when(srv, |s| s.session.ghost_invalid_tags >= 1).session;
            assert_eq!(st.ghost_invalid_tags, 1);
            // The address is free again.
            assert!(login(&phone, server, "ok-1000-ghostbob", IID).is_ok());
        },
    );
}

const ADMIN_TOKEN: &str = "0123456789abcdef-admin";

fn http_get(addr: SocketAddr, path: &str, auth: Option<&str>) -> (u16, String) {
    let auth = auth.map_or(String::new(), |a| format!("Authorization: {a}\r\n"));
    support::http(
        addr,
        &format!("GET {path} HTTP/1.1\r\nHost: x\r\n{auth}Connection: close\r\n\r\n"),
    )
}

/// The dashboard's data route: the token in the query string or a wrong
/// one never signs in and is never echoed; a callsign with markup and
/// control characters is served as inert JSON text.
fn dashboard_sign_in_and_hostile_callsigns(env: &Env) {
    // The store takes at most 32 bytes; the markup and controls fit.
    let callsign = "<img src=x onerror=alert(1)>\u{7}\u{1b}".to_owned();
    let users = [account("mallory", callsign.clone(), 9_000_001, PW)];
    support::with_seeded_server(
        env,
        users,
        |db| ServerConfig {
            http_listen: Some("127.0.0.1:0".parse().unwrap()),
            admin_token: Some(ADMIN_TOKEN.to_owned()),
            ..udp_config(db)
        },
        |srv| {
            let http = srv.http_addr().unwrap();
            let path = "/api/admin/dashboard";
            let wrong = format!("{ADMIN_TOKEN}x");
            for (p, auth) in [
                (format!("{path}?token={ADMIN_TOKEN}"), None),
                (format!("{path}?access_token={ADMIN_TOKEN}"), None),
                (path.to_owned(), Some(format!("Bearer {wrong}"))),
                (path.to_owned(), Some(format!("Basic {ADMIN_TOKEN}"))),
                (path.to_owned(), Some(format!("Bearer  {ADMIN_TOKEN}"))),
            ] {
                let (code, answer) = http_get(http, &p, auth.as_deref());
                assert_eq!(code, 401, "{p} {auth:?}: {answer}");
                assert!(!answer.contains(ADMIN_TOKEN), "token echoed: {answer}");
            }

            let sock = client("127.0.0.8");
            sock.send_to(&heartbeat("mallory", 7, PW, &[0; 24]), srv.local_addr())
                .unwrap();
            assert!(recv_type(&sock, PacketType::Heartbeat).is_some());
            let mut h = Header::new(PacketType::Voice);
            h.set_username("mallory");
            h.ssid = 7;
            let voice = petrel_reflector::codec::merge_frames([&[1u8; 40][..]]).unwrap();
            sock.send_to(&encode(&h, &voice).unwrap(), srv.local_addr())
                .unwrap();
            let bearer = format!("Bearer {ADMIN_TOKEN}");
            let deadline = Instant::now() + Duration::from_secs(5);
            let (answer, doc) = loop {
                let (code, answer) = http_get(http, path, Some(&bearer));
                assert_eq!(code, 200, "{answer}");
                let body = answer.split_once("\r\n\r\n").unwrap().1.to_owned();
                let doc: serde_json::Value = serde_json::from_str(&body).unwrap();
                if doc["last_heard"]["entries"]
                    .as_array()
                    .is_some_and(|e| !e.is_empty())
                {
                    break (answer, doc);
                }
                assert!(Instant::now() < deadline, "no last-heard entry: {doc}");
                std::thread::sleep(Duration::from_millis(50));
            };
            assert!(answer
                .to_ascii_lowercase()
                .contains("content-type: application/json"));
            let shown = doc["last_heard"]["entries"][0]["callsign"]
                .as_str()
                .unwrap();
            assert_eq!(shown, callsign);
            // Control characters travel escaped, never raw.
            assert!(!answer.contains('\u{7}') && !answer.contains('\u{1b}'));
        },
    );
}
