//! WebSocket ghost sessions on real loopback sockets
//! (`specs/draarl-apps.md` §4): every pre-upgrade 401, `auth_success`
//! first, voice UDP → WebSocket and WebSocket → UDP through the shared
//! floor, heartbeat replies, and a client that stops
//! reading while a UDP receiver keeps getting every frame. A fake account
//! store; every test runs on SQLite and PostgreSQL
//! (`tests/support/backends.rs`).
#![allow(clippy::unwrap_used)]

use std::time::Duration;

use futures_util::{SinkExt, StreamExt};
use petrel_reflector::codec::{decode, encode, Header, PacketType};
use petrel_reflector::model::ServerConfig;
use petrel_reflector::runtime::server::ServerHandle;
use tokio::runtime::Runtime;
use tokio_tungstenite::tungstenite::Message;

#[macro_use]
mod support;
use support::fake_authority::FakeAuthority;
use support::ghost_client::{physical, voice, IID, PW};
use support::ws_client::{next_binary, next_text, open, CAPS};
use support::{account, http, recv_type, seed_users, udp_config, Env};

const IID2: &str = "22222222-2222-4222-8222-222222222222";

on_every_backend!(
    every_pre_upgrade_refusal_is_a_plain_401,
    web_and_udp_clients_talk_both_ways_through_one_floor,
    a_web_client_that_stops_reading_does_not_delay_udp_receivers,
);

/// Alice and bob (physical devices) in the store, HTTP on, the fake
/// account store behind the app sessions.
fn with_server(env: &Env, body: impl FnOnce(&Runtime, &ServerHandle)) {
    seed_users(
        &env.rt,
        &env.db,
        [
            account("alice", "BG7AAA".into(), 1, PW),
            account("bob", "BG7BBB".into(), 2, PW),
        ],
    );
    let cfg = ServerConfig {
        http_listen: Some("127.0.0.1:0".parse().unwrap()),
        ..udp_config(&env.db)
    };
    support::serve(env, cfg, Some(FakeAuthority::tx_999()), |srv| {
        body(&env.rt, srv)
    });
}

fn every_pre_upgrade_refusal_is_a_plain_401(env: &Env) {
    with_server(env, |_, srv| {
        let addr = srv.http_addr().unwrap();
        let ok_q = format!("client_instance_id={IID}&protocol_version=1&capabilities={CAPS}");
        let cases = [
            (ok_q.clone(), None, "token_required"),
            (
                format!("client_instance_id={IID}&capabilities={CAPS}"),
                Some("ok-1-web"),
                "ghost_protocol_upgrade_required",
            ),
            (
                format!("protocol_version=1&capabilities={CAPS}"),
                Some("ok-1-web"),
                "ghost_protocol_upgrade_required",
            ),
            (
                format!("client_instance_id=device-id&protocol_version=1&capabilities={CAPS}"),
                Some("ok-1-web"),
                "invalid_client_instance_id",
            ),
            (
                format!(
                    "client_instance_id={IID}&protocol_version=1&capabilities=multi_receive_v1"
                ),
                Some("ok-1-web"),
                "ghost_capabilities_required",
            ),
            (ok_q.clone(), Some("garbage"), "invalid_token"),
            (ok_q.clone(), Some("notfound"), "user_not_found"),
            (ok_q.clone(), Some("disabled"), "user_disabled"),
            (ok_q.clone(), Some("unapproved"), "user_not_approved"),
            (ok_q.clone(), Some("pref"), "client_preference_unavailable"),
        ];
        for (query, token, want) in cases {
            let cookie = token.map_or(String::new(), |t| format!("cookie: a=b; ws_token={t}\r\n"));
            let (code, answer) = http(
                addr,
                &format!(
                    "GET /ws?{query} HTTP/1.1\r\nhost: x\r\nconnection: upgrade\r\nupgrade: websocket\r\n\
                     sec-websocket-version: 13\r\nsec-websocket-key: dGhlIHNhbXBsZSBub25jZQ==\r\n{cookie}\r\n"
                ),
            );
            assert_eq!(code, 401, "{want}: {answer}");
            assert!(answer.ends_with(&format!("\r\n\r\n{want}\n")), "{answer}");
        }
        assert_eq!(srv.stats().websockets_open, 0);
    });
}

fn web_and_udp_clients_talk_both_ways_through_one_floor(env: &Env) {
    with_server(env, |rt, srv| {
        let alice = physical("127.0.0.2", "alice", 7, srv);
        let server = srv.local_addr();
        rt.block_on(async {
            let mut web = open(srv.http_addr().unwrap(), "ok-1000-webcarol", IID, None).await;
            let auth = next_text(&mut web).await;
            assert_eq!(auth["type"], "auth_success");
            assert_eq!(auth["data"]["client_instance_id"], IID);
            assert_eq!(auth["data"]["protocol_version"], 1);
            assert_eq!(auth["data"]["tx_group_id"], 999);
            assert_eq!(auth["data"]["rx_group_ids"], serde_json::json!([999]));
            let session_id = auth["data"]["session_id"].as_str().unwrap().to_owned();

            // Heartbeat: one binary reply with the callsign and Reserved 0.
            let mut hb = Header::new(PacketType::Heartbeat);
            hb.set_username("webcarol");
            hb.ssid = 105;
            hb.dev_model = 105;
            web.send(Message::Binary(encode(&hb, &[0; 24]).unwrap().into()))
                .await
                .unwrap();
            let reply_bytes = next_binary(&mut web).await;
            let reply = decode(&reply_bytes).unwrap();
            assert_eq!(reply.header.packet_type, PacketType::Heartbeat);
            assert_eq!(reply.header.callsign_str(), Some("CS1000"));
            assert_eq!(reply.header.reserved, 0);

            // UDP → WebSocket: Reserved = alice's group.
            alice
                .send_to(&voice("alice", 7, b"from-udp"), server)
                .unwrap();
            let got = next_binary(&mut web).await;
            let p = decode(&got).unwrap();
            assert_eq!(p.header.username_str(), Some("alice"));
            assert_eq!((p.header.reserved, p.data), (999, &b"from-udp"[..]));

            // WebSocket → UDP after the floor frees; the header's identity
            // is the session's, whatever the client wrote.
            tokio::time::sleep(Duration::from_millis(1_000)).await;
            let mut forged = voice("mallory", 9, b"from-web");
            forged[4] = 0xff; // a wrong length field is not checked on WS
            web.send(Message::Binary(forged.into())).await.unwrap();
            let heard = tokio::task::spawn_blocking(move || {
                let got = recv_type(&alice, PacketType::Voice);
                (alice, got)
            })
            .await
            .unwrap();
            let alice = heard.0;
            let p = decode(heard.1.as_ref().unwrap()).unwrap();
            assert_eq!(p.header.username_str(), Some("webcarol"));
            assert_eq!(
                (p.header.ssid, p.header.dev_model, p.header.dmrid),
                (105, 105, 0)
            );
            assert_eq!((p.header.reserved, p.data), (0, &b"from-web"[..]));
            // The web sender does not hear itself.
            assert!(tokio::time::timeout(Duration::from_millis(300), web.next())
                .await
                .is_err());
            assert_eq!(srv.stats().app_sessions, 1);
            // Closing the socket ends the session.
            web.close(None).await.unwrap();
            drop(alice);
            for _ in 0..50 {
                if srv.stats().app_sessions == 0 {
                    break;
                }
                tokio::time::sleep(Duration::from_millis(20)).await;
            }
            assert_eq!(srv.stats().app_sessions, 0);
            assert!(!session_id.is_empty());
        });
    });
}

fn a_web_client_that_stops_reading_does_not_delay_udp_receivers(env: &Env) {
    with_server(env, |rt, srv| {
        let alice = physical("127.0.0.2", "alice", 7, srv);
        let bob = physical("127.0.0.3", "bob", 7, srv);
        let server = srv.local_addr();
        // Two web sessions that never read after the handshake.
        let _clients = rt.block_on(async {
            let slow = open(srv.http_addr().unwrap(), "ok-1000-slow", IID, None).await;
            let slower = open(srv.http_addr().unwrap(), "ok-1001-slower", IID2, None).await;
            tokio::time::sleep(Duration::from_millis(200)).await;
            (slow, slower)
        });
        bob.set_read_timeout(Some(Duration::from_millis(200)))
            .unwrap();
        let mut received = 0;
        for i in 0..100u32 {
            alice
                .send_to(&voice("alice", 7, &i.to_be_bytes()), server)
                .unwrap();
            if recv_type(&bob, PacketType::Voice).is_some() {
                received += 1;
            }
        }
        assert_eq!(received, 100);
        // Every frame was offered to both connections, and each copy was either
        // queued or, when the writer had not yet drained that connection's bounded
        // queue (a loaded machine can starve it), dropped and counted: nothing is
        // lost uncounted, and neither outcome held up the UDP copies above. (The
        // counters may trail the UDP copies by a moment.)
        let offered = || {
            let st = srv.stats();
            let count = |name: &str| {
                st.websocket
                    .iter()
                    .find(|(n, _)| *n == name)
                    .map_or(0, |n| n.1)
            };
            let (sent, dropped) = (count("fanout_sent"), count("writes_dropped"));
            (st.websockets_open, st.app_sessions, sent + dropped, sent)
        };
        let deadline = std::time::Instant::now() + Duration::from_secs(5);
        while offered().2 < 200 && std::time::Instant::now() < deadline {
            std::thread::sleep(Duration::from_millis(20));
        }
        let (open, sessions, total, sent) = offered();
        assert_eq!((open, sessions, total), (2, 2, 200));
        assert!(
            sent >= 2 * 64,
            "each queue takes at least its 64 frames: {sent}"
        );
    });
}
