//! App ("ghost") sessions on real loopback sockets (`specs/draarl-apps.md`
//! §2): an Android-style client logs in with Type 1 through a fake account
//! store, heartbeats, talks to and hears a physical device; rejects reach
//! it from the address it targeted. Every test runs on SQLite and
//! PostgreSQL (`tests/support/backends.rs`).
#![allow(clippy::unwrap_used)]

use std::net::UdpSocket;
use std::sync::Arc;
use std::time::Duration;

use petrel_reflector::codec::{decode, encode, AppLoginSuccess, Header, PacketType};
use petrel_reflector::model::ServerConfig;
use petrel_reflector::runtime::app_authority::AppAuthority;
use petrel_reflector::runtime::server::ServerHandle;

#[macro_use]
mod support;
use support::fake_authority::FakeAuthority;
use support::ghost_client::{ghost_packet, physical, recv_login, type1, udp_client, IID, PW};
use support::{account, recv_type, seed_users, udp_config, Env};

on_every_backend!(
    an_android_ghost_talks_and_listens_with_a_physical_device,
    without_an_authority_every_token_is_invalid,
    radio_routes_are_served_and_ask_for_the_caller_not_the_admin_token,
);

/// Alice (a physical device) in the store; four ingress shards, so a Type
/// 1 (no username) lands on the shard of its source address and the
/// session's later packets on that of their username.
fn with_server(
    env: &Env,
    authority: Option<Arc<dyn AppAuthority>>,
    body: impl FnOnce(&ServerHandle),
) {
    seed_users(&env.rt, &env.db, [account("alice", "BG7AAA".into(), 1, PW)]);
    let cfg = ServerConfig {
        ingress_workers: 4,
        ..udp_config(&env.db)
    };
    support::serve(env, cfg, authority, body);
}

fn client(ip: &str) -> UdpSocket {
    udp_client(ip, Duration::from_millis(500))
}

fn an_android_ghost_talks_and_listens_with_a_physical_device(env: &Env) {
    with_server(env, Some(FakeAuthority::tx_999()), |srv| {
        let server = srv.local_addr();
        let alice = physical("127.0.0.2", "alice", 7, srv);

        let phone = client("127.0.0.3");
        phone
            .send_to(&type1("ok-1000-ghostbob", IID), server)
            .unwrap();
        let (reply, from) = recv_login(&phone).unwrap();
        assert_eq!(from, server);
        let p = decode(&reply).unwrap();
        assert_eq!(p.data[0], 0, "{}", String::from_utf8_lossy(p.data));
        let ok: AppLoginSuccess = serde_json::from_slice(&p.data[1..]).unwrap();
        assert_eq!(ok.session_tag, p.header.reserved);
        assert_eq!(p.header.username_str(), Some("ghostbob"));
        assert_eq!(p.header.ssid, 101);
        let tag = ok.session_tag;

        // Heartbeat: one reply, Reserved 0; it also proves the address.
        phone
            .send_to(
                &ghost_packet(PacketType::Heartbeat, "ghostbob", 101, 101, tag, &[0; 24]),
                server,
            )
            .unwrap();
        let hb = recv_type(&phone, PacketType::Heartbeat).unwrap();
        assert_eq!(decode(&hb).unwrap().header.reserved, 0);

        // The ghost talks; alice hears it with Reserved 0.
        phone
            .send_to(
                &ghost_packet(PacketType::Voice, "ghostbob", 101, 101, tag, b"opus"),
                server,
            )
            .unwrap();
        let heard = recv_type(&alice, PacketType::Voice).unwrap();
        let h = decode(&heard).unwrap();
        assert_eq!(h.header.username_str(), Some("ghostbob"));
        assert_eq!((h.header.reserved, h.data), (0, &b"opus"[..]));
        assert!(recv_type(&phone, PacketType::Voice).is_none());

        // Alice talks after the floor frees; the ghost hears group 999.
        std::thread::sleep(Duration::from_millis(1_000));
        let mut v = Header::new(PacketType::Voice);
        v.set_username("alice");
        v.ssid = 7;
        alice.send_to(&encode(&v, b"vv").unwrap(), server).unwrap();
        let got = recv_type(&phone, PacketType::Voice).unwrap();
        let g = decode(&got).unwrap();
        assert_eq!(g.header.username_str(), Some("alice"));
        assert_eq!((g.header.reserved, g.data), (999, &b"vv"[..]));

        // A wrong tag from the phone, and the right tag from elsewhere: dropped.
        let thief = client("127.0.0.4");
        thief
            .send_to(
                &ghost_packet(PacketType::Voice, "ghostbob", 101, 101, tag, b"x"),
                server,
            )
            .unwrap();
        phone
            .send_to(
                &ghost_packet(PacketType::Voice, "ghostbob", 101, 101, tag ^ 1, b"x"),
                server,
            )
            .unwrap();
        assert!(recv_type(&alice, PacketType::Voice).is_none());
        assert_eq!(srv.app_session_counts(999), (1, 0));
        let st = srv.stats().session;
        assert_eq!(
            (
                st.ghost_endpoint_rejects,
                st.ghost_invalid_tags,
                st.app_logins_accepted
            ),
            (1, 1, 1)
        );

        // A bad token is refused with code 1.
        let other = client("127.0.0.5");
        other.send_to(&type1("nope", IID), server).unwrap();
        let (reply, from) = recv_login(&other).unwrap();
        assert_eq!(from, server);
        assert_eq!(
            decode(&reply).unwrap().data,
            b"\x01Invalid or expired token"
        );
    });
}

fn without_an_authority_every_token_is_invalid(env: &Env) {
    with_server(env, None, |srv| {
        let phone = client("127.0.0.3");
        phone
            .send_to(&type1("ok-1000-ghostbob", IID), srv.local_addr())
            .unwrap();
        let (reply, _) = recv_login(&phone).unwrap();
        assert_eq!(
            decode(&reply).unwrap().data,
            b"\x01Invalid or expired token"
        );
    });
}

fn radio_routes_are_served_and_ask_for_the_caller_not_the_admin_token(env: &Env) {
    let cfg = ServerConfig {
        http_listen: Some("127.0.0.1:0".parse().unwrap()),
        ..udp_config(&env.db)
    };
    support::serve(env, cfg, Some(FakeAuthority::tx_999()), |srv| {
        let http_addr = srv.http_addr().unwrap();
        let (code, answer) = support::http(
            http_addr,
            "GET /api/radio/sessions HTTP/1.1\r\nhost: x\r\n\r\n",
        );
        assert_eq!(code, 401);
        assert!(answer.contains("未提供认证令牌"), "{answer}");
        // The admin API stays off without an admin token.
        let (code, _) = support::http(http_addr, "GET /api/stats HTTP/1.1\r\nhost: x\r\n\r\n");
        assert_eq!(code, 404);
    });
}
