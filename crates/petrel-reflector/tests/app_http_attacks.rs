//! An Internet attacker against the app clients' HTTP and WebSocket side
//! (`specs/draarl-apps.md` §1.1, §1.3, §2.4, §3.4–§3.5, §4.2–§4.5, §5.3),
//! on real loopback sockets with the real account store: the `/ws`
//! upgrade with the token in the query, a foreign `Origin` or no cookie;
//! frames and messages over 64 KiB; ping and text floods; many WebSocket
//! sessions from one address against the HTTP connection caps; a second
//! session under the same instance id; another owner's session, forbidden
//! groups, 17 groups, bad ids and a transmit change during PTT on the
//! radio routes; hostile login bodies; a login flood against the global
//! bound on password checks; one refresh token raced from eight
//! connections; and secrets in logs, error bodies and
//! `/metrics`. Each attack asserts the observable outcome (status, body,
//! close, counters). The real account store
//! (`tests/support/app_server.rs`); every test runs on SQLite and
//! PostgreSQL (`tests/support/backends.rs`).
#![allow(clippy::unwrap_used)]

use std::io::Read;
use std::net::{SocketAddr, TcpStream};
use std::sync::OnceLock;
use std::time::Duration;

use futures_util::{SinkExt, StreamExt};
use petrel_reflector::codec::{decode, encode, Header, PacketType};
use petrel_reflector::model::ServerConfig;
use petrel_reflector::runtime::server::ServerHandle;
use petrel_reflector::runtime::stats::ServerStats;
use serde_json::{json, Value};
use tokio::io::AsyncWriteExt;
use tokio::runtime::Runtime;
use tokio_tungstenite::tungstenite::client::IntoClientRequest;
use tokio_tungstenite::tungstenite::Message;
use tokio_tungstenite::MaybeTlsStream;

#[macro_use]
mod support;
use support::app_client::{access_token, bearer, login, post, raw, send};
use support::app_server::{open_app_store, serve_app, ORIGIN, PASSWORD, SECRET};
use support::ghost_client::instance;
use support::ws_client::{next_message, open_authed, Client, CAPS};
use support::Env;

on_every_backend!(
    ws_upgrades_with_query_tokens_foreign_origins_or_no_cookie_are_refused,
    frames_and_messages_over_64_kib_are_refused_before_they_are_buffered,
    ping_and_text_floods_leave_the_session_serving,
    live_websocket_sessions_hold_no_http_slot_and_are_never_evicted,
    a_full_server_evicts_the_idlest_websocket_session,
    a_disabled_user_or_new_password_ends_app_sessions_and_refresh_tokens,
    a_second_session_with_the_same_instance_closes_the_first,
    radio_routes_refuse_other_owners_forbidden_groups_and_bad_ids,
    no_secret_reaches_the_logs_error_bodies_or_metrics,
    hostile_login_bodies_get_clear_refusals,
    a_login_flood_queues_password_checks_behind_a_global_bound,
    a_refresh_token_raced_from_eight_connections_rotates_once,
);

/// Alice and bob with web passwords ([`support::app_server`]), a login
/// budget no test reaches; `tune` adjusts the settings further (HTTP
/// limits, `[apps]`).
fn with_app_server(
    env: &Env,
    tune: impl FnOnce(&mut ServerConfig),
    body: impl FnOnce(&ServerHandle, SocketAddr, &Runtime),
) {
    let store = open_app_store(env, &["alice", "bob"]);
    let tune = |cfg: &mut ServerConfig| {
        if let Some(apps) = cfg.apps.as_mut() {
            apps.login_per_minute = 1000;
            apps.login_burst = 1000;
        }
        tune(cfg);
    };
    serve_app(env, store, tune, |srv, addr, _| body(srv, addr, &env.rt));
}

/// A `/ws` session for `token` under instance `n`, from the allowed origin,
/// past its `auth_success`.
async fn open(addr: SocketAddr, token: &str, n: u32) -> Client {
    open_authed(addr, token, &instance(n), Some(ORIGIN)).await
}

/// Sends a heartbeat carrying `data` and returns the reply's data.
async fn heartbeat(ws: &mut Client, data: &[u8]) -> Vec<u8> {
    let mut hb = Header::new(PacketType::Heartbeat);
    hb.set_username("alice");
    ws.send(Message::Binary(encode(&hb, data).unwrap().into()))
        .await
        .unwrap();
    loop {
        match next_message(ws).await {
            Some(Message::Binary(b)) => {
                let reply = decode(&b).unwrap();
                assert_eq!(reply.header.packet_type, PacketType::Heartbeat);
                return reply.data.to_vec();
            }
            Some(_) => {}
            None => panic!("the session ended"),
        }
    }
}

fn ws_counter(st: &ServerStats, name: &str) -> u64 {
    st.websocket
        .iter()
        .find(|(n, _)| *n == name)
        .map_or(0, |(_, v)| *v)
}

fn upgrade_request(path: &str, headers: &str) -> String {
    format!(
        "GET {path} HTTP/1.1\r\nHost: x\r\nConnection: Upgrade\r\nUpgrade: websocket\r\n\
         Sec-WebSocket-Version: 13\r\nSec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\n{headers}\r\n"
    )
}

fn ws_upgrades_with_query_tokens_foreign_origins_or_no_cookie_are_refused(env: &Env) {
    with_app_server(
        env,
        |_| {},
        |srv, addr, _| {
            let alice = access_token(addr, "alice");
            let q = format!(
                "client_instance_id={}&protocol_version=1&capabilities={CAPS}",
                instance(1)
            );
            let cookie = format!("Cookie: ws_token={alice}\r\n");
            // The token in the query, even next to a valid cookie: 400.
            for key in ["token", "access_token", "JWT", "%74oken"] {
                let (status, body) = raw(
                    addr,
                    &upgrade_request(&format!("/ws?{q}&{key}={alice}"), &cookie),
                );
                let v: Value = serde_json::from_str(&body).unwrap();
                assert_eq!(
                    (status, v["message"].as_str()),
                    (400, Some("token_query_not_allowed"))
                );
                assert!(!body.contains(&alice), "the token is echoed: {body}");
            }
            // Cross-site WebSocket hijacking: a foreign page's origin, with the
            // victim's cookie, and a look-alike of the allowed origin.
            for origin in [
                "https://evil.example",
                "http://localhost:9001.evil.example",
                "http://localhost:90011",
                "null",
            ] {
                let (status, body) = raw(
                    addr,
                    &upgrade_request(
                        &format!("/ws?{q}"),
                        &format!("{cookie}Origin: {origin}\r\n"),
                    ),
                );
                let v: Value = serde_json::from_str(&body).unwrap_or(Value::Null);
                assert_eq!(
                    (status, v["message"].as_str()),
                    (403, Some("origin_not_allowed")),
                    "{origin}"
                );
            }
            // `ws_token` is not a token-like key (§1.1): without the cookie it
            // is ignored, and the upgrade still lacks its token.
            let (status, body) = raw(
                addr,
                &upgrade_request(&format!("/ws?{q}&ws_token={alice}"), ""),
            );
            assert_eq!((status, body.as_str()), (401, "token_required\n"));
            // No cookie, an empty one, a forged one: 401 before the upgrade.
            for (cookie, code) in [
                ("", "token_required"),
                ("Cookie: ws_token=\r\n", "token_required"),
                (
                    "Cookie: ws_token=eyJhbGciOiJub25lIn0.eyJ1c2VybmFtZSI6ImFsaWNlIn0.\r\n",
                    "invalid_token",
                ),
            ] {
                let (status, body) = raw(addr, &upgrade_request(&format!("/ws?{q}"), cookie));
                assert_eq!((status, body.as_str()), (401, format!("{code}\n").as_str()));
            }
            let st = srv.stats();
            assert_eq!(
                (st.app_auth.token_query_refused, st.app_auth.origin_refused),
                (4, 4)
            );
            assert_eq!((ws_counter(&st, "upgrades"), st.app_sessions), (0, 0));
        },
    );
}

/// A masked frame header (key 0, so the payload goes as is) with the
/// first byte `b0` (FIN and opcode) declaring `len` payload bytes.
fn frame_header(b0: u8, len: u64) -> Vec<u8> {
    let mut h = vec![b0];
    match len {
        0..=125 => h.push(0x80 | len as u8),
        126..=0xffff => {
            h.push(0x80 | 126);
            h.extend_from_slice(&(len as u16).to_be_bytes());
        }
        _ => {
            h.push(0x80 | 127);
            h.extend_from_slice(&len.to_be_bytes());
        }
    }
    h.extend_from_slice(&[0, 0, 0, 0]);
    h
}

/// Writes `bytes` raw on `ws`'s socket and waits for the server to end
/// the connection; false if it is still open after 3 s.
async fn raw_write_is_refused(ws: &mut Client, bytes: &[u8]) -> bool {
    let MaybeTlsStream::Plain(tcp) = ws.get_mut() else {
        panic!("plain TCP expected");
    };
    tcp.write_all(bytes).await.unwrap();
    tokio::time::timeout(Duration::from_secs(3), async {
        while let Some(Ok(m)) = ws.next().await {
            if matches!(m, Message::Close(_)) {
                return;
            }
        }
    })
    .await
    .is_ok()
}

fn frames_and_messages_over_64_kib_are_refused_before_they_are_buffered(env: &Env) {
    with_app_server(
        env,
        |_| {},
        |srv, addr, rt| {
            let alice = access_token(addr, "alice");
            rt.block_on(async {
                // Just under 64 KiB, the limit §5.3 calls safe, still passes.
                let mut ws = open(addr, &alice, 1).await;
                // (A heartbeat padded past its length field: §4.4 checks
                // magic and Type, not length; too long to answer.)
                let mut hb = Header::new(PacketType::Heartbeat);
                hb.set_username("alice");
                let mut padded = encode(&hb, b"pad").unwrap();
                padded.resize(64 << 10, 0x5a);
                ws.send(Message::Binary(padded.into())).await.unwrap();
                assert_eq!(heartbeat(&mut ws, b"small").await, b"small");
                // A header declaring 16 MiB (the library's default frame limit)
                // then 1 KiB of it: the server ends the connection at once
                // rather than waiting for, and buffering, the rest.
                let mut header = frame_header(0x82, 16 << 20);
                header.extend_from_slice(&[0x5a; 1024]);
                let mut attacker = open(addr, &alice, 2).await;
                assert!(
                    raw_write_is_refused(&mut attacker, &header).await,
                    "the server waits for a 16 MiB frame"
                );
                // Two 40 KiB fragments of one 80 KiB message.
                let mut hb = Header::new(PacketType::Heartbeat);
                hb.set_username("alice");
                let mut packet = encode(&hb, b"pad").unwrap();
                packet.resize(40 << 10, 0x5a);
                let mut fragments = frame_header(0x02, packet.len() as u64);
                fragments.extend_from_slice(&packet);
                fragments.extend_from_slice(&frame_header(0x80, 40 << 10));
                fragments.extend_from_slice(&[0x5a; 40 << 10]);
                let mut attacker = open(addr, &alice, 3).await;
                assert!(
                    raw_write_is_refused(&mut attacker, &fragments).await,
                    "the server buffered an 80 KiB message"
                );
                let deadline = std::time::Instant::now() + Duration::from_secs(3);
                while srv.stats().websockets_open != 1 && std::time::Instant::now() < deadline {
                    tokio::time::sleep(Duration::from_millis(20)).await;
                }
                let st = srv.stats();
                assert_eq!((st.websockets_open, st.app_sessions), (1, 1));
                assert_eq!(
                    (
                        ws_counter(&st, "frames_received"),
                        ws_counter(&st, "frames_malformed")
                    ),
                    (2, 0)
                );
                // The honest session is untouched.
                assert_eq!(heartbeat(&mut ws, b"still here").await, b"still here");
            });
        },
    );
}

fn ping_and_text_floods_leave_the_session_serving(env: &Env) {
    with_app_server(
        env,
        |_| {},
        |srv, addr, rt| {
            let alice = access_token(addr, "alice");
            rt.block_on(async {
                let mut ws = open(addr, &alice, 1).await;
                // 5000 pings (never reading the pongs) and 500 text frames.
                for i in 0..5000u32 {
                    ws.feed(Message::Ping(i.to_be_bytes().to_vec().into()))
                        .await
                        .unwrap();
                }
                for _ in 0..500 {
                    ws.feed(Message::Text("{\"type\":\"auth\"}".into()))
                        .await
                        .unwrap();
                }
                ws.flush().await.unwrap();
                assert_eq!(
                    heartbeat(&mut ws, b"after the flood").await,
                    b"after the flood"
                );
                let st = srv.stats();
                assert_eq!(
                    (
                        ws_counter(&st, "frames_received"),
                        ws_counter(&st, "frames_malformed")
                    ),
                    (1, 0)
                );
                assert_eq!((st.websockets_open, st.app_sessions), (1, 1));
            });
        },
    );
}

fn live_websocket_sessions_hold_no_http_slot_and_are_never_evicted(env: &Env) {
    let caps = |c: &mut ServerConfig| {
        c.http.max_connections = 6;
        c.http.max_connections_per_ip = 4;
        c.http.max_connections_per_prefix = 6;
    };
    with_app_server(env, caps, |srv, addr, rt| {
        let alice = access_token(addr, "alice");
        rt.block_on(async {
            // Seven sessions from one address: more than the address's and
            // the server's HTTP connection caps.
            let mut sessions = Vec::new();
            for n in 1..=7 {
                sessions.push(open(addr, &alice, n).await);
            }
            // Idle sockets now fill the table: four from this address, the
            // fifth refused by the per-address cap.
            let mut idle = Vec::new();
            for _ in 0..4 {
                idle.push(TcpStream::connect(addr).unwrap());
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
            let mut fifth = TcpStream::connect(addr).unwrap();
            fifth
                .set_read_timeout(Some(Duration::from_secs(2)))
                .unwrap();
            let mut head = String::new();
            let _ = fifth.read_to_string(&mut head);
            assert!(head.starts_with("HTTP/1.1 503"), "{head}");
            // Every live session still answers: none was taken as idle.
            for ws in &mut sessions {
                assert_eq!(heartbeat(ws, b"alive").await, b"alive");
            }
            let st = srv.stats();
            assert_eq!(st.http.connections_refused_per_ip, 1);
            assert_eq!(st.http.idle_evictions, 0);
            assert_eq!((st.websockets_open, st.app_sessions), (7, 7));
            // The eighth is the owner's last (limit 8); the ninth gets the
            // stable close of §4.2.
            drop(idle);
            tokio::time::sleep(Duration::from_millis(100)).await;
            sessions.push(open(addr, &alice, 8).await);
            let url = format!(
                "ws://{addr}/ws?client_instance_id={}&protocol_version=1&capabilities={CAPS}",
                instance(9)
            );
            let mut req = url.into_client_request().unwrap();
            req.headers_mut()
                .insert("cookie", format!("ws_token={alice}").parse().unwrap());
            let (mut ninth, _) = tokio_tungstenite::connect_async(req).await.unwrap();
            let close = tokio::time::timeout(Duration::from_secs(3), ninth.next())
                .await
                .unwrap();
            match close {
                Some(Ok(Message::Close(Some(f)))) => {
                    assert_eq!(
                        (u16::from(f.code), f.reason.as_str()),
                        (1008, "ghost_session_limit")
                    );
                }
                other => panic!("expected close 1008, got {other:?}"),
            }
            assert_eq!(srv.stats().app_sessions, 8);
        });
    });
}

/// With `[apps] max_websocket_sessions = 3`, a fourth session evicts the
/// idlest of three (the one whose client sent nothing since it opened)
/// with the close frame 1008 `websocket_sessions_full`, counted and
/// exported; the others keep serving and the evicted session is gone from
/// the registry.
fn a_full_server_evicts_the_idlest_websocket_session(env: &Env) {
    let cap = |c: &mut ServerConfig| {
        if let Some(apps) = c.apps.as_mut() {
            apps.max_websocket_sessions = 3;
        }
    };
    with_app_server(env, cap, |srv, addr, rt| {
        let alice = access_token(addr, "alice");
        let bob = access_token(addr, "bob");
        rt.block_on(async {
            let mut first = open(addr, &alice, 1).await;
            let mut idle = open(addr, &bob, 2).await;
            let mut third = open(addr, &alice, 3).await;
            // The first and third talk after the second opened.
            assert_eq!(heartbeat(&mut first, b"one").await, b"one");
            assert_eq!(heartbeat(&mut third, b"three").await, b"three");
            let mut fourth = open(addr, &alice, 4).await;
            let close = tokio::time::timeout(Duration::from_secs(3), async {
                loop {
                    match idle.next().await {
                        Some(Ok(Message::Close(f))) => return f,
                        Some(Ok(_)) => {}
                        other => panic!("expected a close frame, got {other:?}"),
                    }
                }
            })
            .await
            .expect("no close frame within 3 s")
            .expect("a close frame with a code");
            assert_eq!(
                (u16::from(close.code), close.reason.as_str()),
                (1008, "websocket_sessions_full")
            );
            for (ws, data) in [
                (&mut first, &b"still"[..]),
                (&mut third, b"here"),
                (&mut fourth, b"new"),
            ] {
                assert_eq!(heartbeat(ws, data).await, data);
            }
            for _ in 0..50 {
                if srv.stats().app_sessions == 3 {
                    break;
                }
                tokio::time::sleep(Duration::from_millis(20)).await;
            }
            let st = srv.stats();
            assert_eq!((st.websockets_open, st.app_sessions), (3, 3));
            assert_eq!(ws_counter(&st, "sessions_evicted"), 1);
            assert_eq!(ws_counter(&st, "closed"), 0);
        });
        let (_, metrics) = raw(
            addr,
            "GET /metrics HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n",
        );
        assert!(
            metrics.contains("petrel_reflector_websocket_sessions_evicted_total 1"),
            "{metrics}"
        );
    });
}

/// `specs/draarl-apps.md` §2.4 "Other removals" (permission revocation)
/// and §1.4: a new web password revokes alice's refresh tokens at once and
/// ends her WebSocket session at the next directory reload; disabling bob
/// ends his. Both are counted; the new password logs in, bob does not.
fn a_disabled_user_or_new_password_ends_app_sessions_and_refresh_tokens(env: &Env) {
    with_app_server(
        env,
        |_| {},
        |srv, addr, rt| {
            let first = post(
                addr,
                "/api/auth/login",
                &[],
                &json!({"username": "alice", "password": PASSWORD}).to_string(),
            );
            assert_eq!(first.status, 200, "{}", first.body);
            let alice = first.body["data"]["token"].as_str().unwrap().to_owned();
            let refresh = first.body["data"]["refresh_token"]
                .as_str()
                .unwrap()
                .to_owned();
            let bob = access_token(addr, "bob");
            let (mut alices, mut bobs) =
                rt.block_on(async { (open(addr, &alice, 1).await, open(addr, &bob, 2).await) });
            assert_eq!(srv.stats().app_sessions, 2);

            // Another process (the CLI) changes the store.
            rt.block_on(async {
                let store = support::open_cheap(&env.db).await;
                store.set_web_password("alice", "new-pass-2").await.unwrap();
                store.set_user_enabled("bob", false).await.unwrap();
                store.close().await;
            });
            let again = post(
                addr,
                "/api/auth/refresh",
                &[],
                &json!({"refresh_token": refresh}).to_string(),
            );
            assert_eq!(
                (again.status, again.message()),
                (401, "refresh_token_revoked")
            );

            srv.reload_now();
            rt.block_on(async {
                for ws in [&mut alices, &mut bobs] {
                    let end = tokio::time::timeout(Duration::from_secs(5), async {
                        while let Some(Ok(_)) = ws.next().await {}
                    })
                    .await;
                    assert!(end.is_ok(), "the session was not ended");
                }
            });
            let st = srv.stats();
            assert_eq!((st.app_sessions, st.websockets_open), (0, 0));
            assert_eq!(st.app_auth.ghost_sessions_revoked, 2);
            assert_eq!(login(addr, "alice", PASSWORD).status, 401);
            assert_eq!(login(addr, "alice", "new-pass-2").status, 200);
            assert_eq!(login(addr, "bob", PASSWORD).status, 403);
        },
    );
}

fn a_second_session_with_the_same_instance_closes_the_first(env: &Env) {
    with_app_server(
        env,
        |_| {},
        |srv, addr, rt| {
            let alice = access_token(addr, "alice");
            let bob = access_token(addr, "bob");
            rt.block_on(async {
                let mut first = open(addr, &alice, 1).await;
                let mut bobs = open(addr, &bob, 1).await;
                let mut second = open(addr, &alice, 1).await;
                // The old connection ends (TCP close, no close frame, §4.5).
                let ended = tokio::time::timeout(Duration::from_secs(3), async {
                    loop {
                        match first.next().await {
                            Some(Ok(Message::Ping(_) | Message::Pong(_))) => {}
                            Some(Ok(Message::Close(_))) | Some(Err(_)) | None => return,
                            Some(Ok(m)) => panic!("unexpected {m:?}"),
                        }
                    }
                })
                .await;
                assert!(ended.is_ok(), "the replaced connection stays open");
                assert_eq!(heartbeat(&mut second, b"new").await, b"new");
                // Same instance id under another owner: a separate session.
                assert_eq!(heartbeat(&mut bobs, b"bob").await, b"bob");
                let st = srv.stats();
                assert_eq!((st.websockets_open, st.app_sessions), (2, 2));
                assert_eq!(ws_counter(&st, "closed"), 1);
            });
        },
    );
}

/// `method path` with `token` as Bearer and `body` (JSON): status and
/// parsed body (`Null` if not JSON).
fn api(addr: SocketAddr, method: &str, path: &str, token: &str, body: &str) -> (u16, Value) {
    let a = send(addr, method, path, &[&bearer(token)], body);
    (a.status, a.body)
}

fn routing_body(tx: i64, rx: &[i64]) -> String {
    json!({"tx_group_id": tx, "rx_group_ids": rx}).to_string()
}

fn radio_routes_refuse_other_owners_forbidden_groups_and_bad_ids(env: &Env) {
    with_app_server(
        env,
        |_| {},
        |srv, addr, rt| {
            let alice = access_token(addr, "alice");
            let bob = access_token(addr, "bob");
            let mut ws = rt.block_on(open(addr, &alice, 1));
            let (_, list) = api(addr, "GET", "/api/radio/sessions", &alice, "");
            let sid = list["data"][0]["session_id"].as_str().unwrap().to_owned();
            let put = |token: &str, path: &str, body: &str| {
                let (status, v) = api(addr, "PUT", path, token, body);
                (
                    status,
                    v["error"].as_str().map(str::to_owned),
                    v["message"].clone(),
                )
            };
            let routing = format!("/api/radio/sessions/{sid}/routing");
            // Bob cannot see, route or end alice's session.
            let (_, bobs) = api(addr, "GET", "/api/radio/sessions", &bob, "");
            assert_eq!(bobs["data"], json!([]));
            assert_eq!(put(&bob, &routing, &routing_body(1001, &[])).0, 404);
            let (status, v) = api(
                addr,
                "DELETE",
                &format!("/api/radio/sessions/{sid}"),
                &bob,
                "",
            );
            assert_eq!(
                (status, v["error"].as_str()),
                (404, Some("session_not_found"))
            );
            // Alice: a private group she may not use, 17 groups, bad ids.
            assert_eq!(
                put(&alice, &routing, &routing_body(2001, &[])).1.as_deref(),
                Some("group_forbidden")
            );
            let seventeen: Vec<i64> = (1..=16).collect();
            let (status, code, message) = put(&alice, &routing, &routing_body(1001, &seventeen));
            assert_eq!(
                (status, code.as_deref(), message.as_str()),
                (
                    422,
                    Some("subscription_limit"),
                    Some("ghost subscription limit reached: requested=17 limit=16")
                )
            );
            for (body, want) in [
                (routing_body(0, &[]), (400, None)),
                (routing_body(-5, &[]), (400, Some("invalid_routing"))),
                (routing_body(1001, &[-1]), (400, Some("invalid_routing"))),
                (routing_body(1001, &[0]), (400, Some("invalid_routing"))),
                (routing_body(i64::MAX, &[]), (404, Some("group_not_found"))),
                (
                    routing_body(1001, &[i64::MAX]),
                    (404, Some("group_not_found")),
                ),
                (
                    "{\"tx_group_id\": 1e300, \"rx_group_ids\": []}".into(),
                    (400, None),
                ),
                (
                    "{\"tx_group_id\": 18446744073709551616, \"rx_group_ids\": []}".into(),
                    (400, None),
                ),
                ("{\"tx_group_id\": 1001}".into(), (400, None)),
                ("not json".into(), (400, None)),
            ] {
                let (status, code, _) = put(&alice, &routing, &body);
                assert_eq!((status, code.as_deref()), want, "{body}");
            }
            // Unknown, path-like and huge session ids.
            for id in ["nope", "..%2F..%2Fstats", &"9".repeat(4000)] {
                let (status, code, _) = put(
                    &alice,
                    &format!("/api/radio/sessions/{id}/routing"),
                    &routing_body(1001, &[]),
                );
                assert_eq!(
                    (status, code.as_deref()),
                    (404, Some("session_not_found")),
                    "{id:.20}"
                );
            }
            // Still routed to 999 after all that; a valid change works.
            assert_eq!(list["data"][0]["tx_group_id"], 999);
            // While she talks, the transmit group cannot change (409); the
            // receive groups can.
            rt.block_on(async {
                let mut v = Header::new(PacketType::Voice);
                v.set_username("alice");
                for _ in 0..3 {
                    ws.send(Message::Binary(encode(&v, &[1; 40]).unwrap().into()))
                        .await
                        .unwrap();
                }
                tokio::time::sleep(Duration::from_millis(200)).await;
            });
            let (status, code, _) = put(&alice, &routing, &routing_body(1001, &[]));
            assert_eq!((status, code.as_deref()), (409, Some("ptt_active")));
            assert_eq!(put(&alice, &routing, &routing_body(999, &[1002])).0, 200);
            // Her own delete closes her connection.
            let (status, _) = api(
                addr,
                "DELETE",
                &format!("/api/radio/sessions/{sid}"),
                &alice,
                "",
            );
            assert_eq!(status, 200);
            rt.block_on(async {
                let ended = tokio::time::timeout(Duration::from_secs(3), async {
                    loop {
                        match ws.next().await {
                            Some(Ok(Message::Close(_))) | Some(Err(_)) | None => return,
                            Some(Ok(_)) => {}
                        }
                    }
                })
                .await;
                assert!(ended.is_ok(), "the deleted session's connection stays open");
            });
            assert_eq!(srv.stats().app_sessions, 0);
        },
    );
}

/// A `tracing` writer into a shared buffer.
#[derive(Clone, Default)]
struct Captured(std::sync::Arc<std::sync::Mutex<Vec<u8>>>);

/// Every event of every level, from every thread of this test binary
/// (both backends' runs share it: one subscriber per process).
fn captured_logs() -> &'static Captured {
    static LOGS: OnceLock<Captured> = OnceLock::new();
    LOGS.get_or_init(|| {
        let logs = Captured::default();
        let writer = logs.clone();
        tracing_subscriber::fmt()
            .with_max_level(tracing::Level::TRACE)
            .with_ansi(false)
            .with_writer(move || writer.clone())
            .init();
        logs
    })
}

impl std::io::Write for Captured {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        self.0.lock().unwrap().extend_from_slice(buf);
        Ok(buf.len())
    }

    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

fn no_secret_reaches_the_logs_error_bodies_or_metrics(env: &Env) {
    let logs = captured_logs();
    let wrong = "wrong-guess-Zq9";
    let mut answers = String::new();
    let mut secrets = vec![SECRET.to_owned(), PASSWORD.to_owned(), wrong.to_owned()];
    with_app_server(
        env,
        |_| {},
        |_, addr, rt| {
            let body = json!({"username": "alice", "password": PASSWORD}).to_string();
            let (_, login) = raw(
                addr,
                &format!(
                    "POST /api/auth/login HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\
                 Content-Type: application/json\r\nContent-Length: {}\r\n\r\n{body}",
                    body.len()
                ),
            );
            let v: Value = serde_json::from_str(&login).unwrap();
            let access = v["data"]["token"].as_str().unwrap().to_owned();
            let refresh = v["data"]["refresh_token"].as_str().unwrap().to_owned();
            secrets.extend([access.clone(), refresh.clone()]);
            let mut ask = |method: &str, path: &str, headers: &str, body: &str| {
                let (status, text) = support::http(
                    addr,
                    &format!(
                        "{method} {path} HTTP/1.1\r\nHost: x\r\nConnection: close\r\n{headers}\
                     Content-Type: application/json\r\nContent-Length: {}\r\n\r\n{body}",
                        body.len()
                    ),
                );
                // Error bodies and the metrics; a successful refresh answers
                // a token by design (the same one within one second).
                if status >= 400 || path == "/metrics" {
                    answers.push_str(&text);
                }
                status
            };
            // Failures that carry a secret in: wrong password, unknown user,
            // tampered and foreign tokens, a used refresh token, the token in
            // the query, a bad WebSocket cookie.
            let wrong_login = json!({"username": "alice", "password": wrong}).to_string();
            assert_eq!(ask("POST", "/api/auth/login", "", &wrong_login), 401);
            let unknown = json!({"username": "nobody", "password": PASSWORD}).to_string();
            assert_eq!(ask("POST", "/api/auth/login", "", &unknown), 401);
            let tampered = format!("{access}x");
            let bearer = format!("Authorization: Bearer {tampered}\r\n");
            assert_eq!(ask("GET", "/api/me", &bearer, ""), 401);
            let refresh_body = json!({"refresh_token": refresh}).to_string();
            assert_eq!(ask("POST", "/api/auth/refresh", "", &refresh_body), 200);
            assert_eq!(ask("POST", "/api/auth/refresh", "", &refresh_body), 401);
            assert_eq!(ask("GET", &format!("/api/me?token={access}"), "", ""), 400);
            let cookie = format!("Cookie: ws_token={tampered}\r\nUpgrade: websocket\r\n");
            assert_eq!(ask("GET", "/ws?protocol_version=1", &cookie, ""), 401);
            let q = format!(
                "/ws?client_instance_id={}&protocol_version=1&capabilities={CAPS}",
                instance(1)
            );
            assert_eq!(ask("GET", &q, &cookie, ""), 401);
            // A real session, then the metrics.
            drop(rt.block_on(open(addr, &access, 1)));
            assert_eq!(ask("GET", "/metrics", "", ""), 200);
        },
    );
    let logs = String::from_utf8_lossy(&logs.0.lock().unwrap()).into_owned();
    for s in &secrets {
        // (The test's own WebSocket client traces its request, cookie
        // included; only the server's events count.)
        let line = logs
            .lines()
            .filter(|l| !l.contains("tungstenite::handshake::client"))
            .find(|l| l.contains(s.as_str()));
        assert_eq!(line, None, "a secret is logged");
        assert!(
            !answers.contains(s.as_str()),
            "a secret is answered: {s:.12}…"
        );
    }
}

/// `POST /api/auth/login` with `body` as is: status and parsed body.
fn login_raw(addr: SocketAddr, body: &str) -> (u16, Value) {
    let a = post(addr, "/api/auth/login", &[], body);
    (a.status, a.body)
}

fn hostile_login_bodies_get_clear_refusals(env: &Env) {
    let budget = |c: &mut ServerConfig| c.http.max_body_bytes = 16 << 10;
    with_app_server(env, budget, |srv, addr, _| {
        let named = |name: &str| {
            let (status, v) = login_raw(
                addr,
                &json!({"username": name, "password": PASSWORD}).to_string(),
            );
            (status, v["code"].as_i64())
        };
        // Look-alikes of alice and SQL: unknown users, never alice.
        for name in [
            "alice' OR '1'='1",
            "alice'--",
            "\" OR 1=1 --",
            "ALICE",
            "alice ",
            "\u{ff41}lice",
            "a\u{200b}lice",
            "alice\u{0}",
            "%",
            "_lice",
        ] {
            assert_eq!(named(name), (401, Some(401)), "{name:?}");
        }
        // A username just under the body limit: an unknown user.
        assert_eq!(named(&"a".repeat(15 << 10)), (401, Some(401)));
        // Over the body limit: 413 before any parsing.
        let (status, _) = login_raw(
            addr,
            &json!({"username": "a".repeat(17 << 10), "password": "x"}).to_string(),
        );
        assert_eq!(status, 413);
        // Malformed or mistyped JSON: 400.
        for body in [
            "{",
            "null",
            "[]",
            "{\"username\": 5, \"password\": \"x\"}",
            "{\"username\": \"alice\"}",
            "{\"username\": \"alice\", \"password\": \"\"}",
            "{\"username\": \"alice\", \"password\": \"x\"\u{0}}",
            &format!("{}1{}", "[".repeat(5000), "]".repeat(5000)),
        ] {
            let (status, v) = login_raw(addr, body);
            assert_eq!((status, v["code"].as_i64()), (400, Some(400)), "{body:.40}");
        }
        let s = srv.stats().app_auth;
        assert_eq!(s.login_failed_unknown_user, 11);
        assert_eq!(s.login_failed_bad_request, 8);
        // Alice herself is untouched.
        assert_eq!(named("alice"), (200, Some(200)));
    });
}

fn a_login_flood_queues_password_checks_behind_a_global_bound(env: &Env) {
    let open_caps = |c: &mut ServerConfig| {
        c.http.max_connections_per_ip = 64;
        c.http.max_connections_per_prefix = 64;
    };
    with_app_server(env, open_caps, |srv, addr, _| {
        let permits = std::thread::available_parallelism()
            .map_or(1, |n| n.get() / 2)
            .max(1);
        let flood = 2 * permits + 4;
        // Unknown names: each costs a check of the decoy hash (bcrypt at
        // the production cost), all sent at once.
        let start = std::sync::Arc::new(std::sync::Barrier::new(flood));
        let threads: Vec<_> = (0..flood)
            .map(|i| {
                let start = std::sync::Arc::clone(&start);
                std::thread::spawn(move || {
                    start.wait();
                    let body = json!({"username": format!("nobody{i}"), "password": "guess"});
                    login_raw(addr, &body.to_string()).0
                })
            })
            .collect();
        let statuses: Vec<u16> = threads.into_iter().map(|t| t.join().unwrap()).collect();
        assert_eq!(statuses, vec![401; flood]);
        let s = srv.stats().app_auth;
        assert_eq!(s.login_failed_unknown_user, flood as u64);
        assert!(
            s.password_checks_queued >= 1,
            "{flood} checks at once, none queued"
        );
    });
}

fn a_refresh_token_raced_from_eight_connections_rotates_once(env: &Env) {
    with_app_server(
        env,
        |_| {},
        |srv, addr, _| {
            let body = json!({"username": "alice", "password": PASSWORD}).to_string();
            let (_, login) = login_raw(addr, &body);
            let refresh = login["data"]["refresh_token"].as_str().unwrap().to_owned();
            let start = std::sync::Arc::new(std::sync::Barrier::new(8));
            let threads: Vec<_> = (0..8)
                .map(|_| {
                    let (start, refresh) = (std::sync::Arc::clone(&start), refresh.clone());
                    std::thread::spawn(move || {
                        start.wait();
                        let body = json!({ "refresh_token": refresh }).to_string();
                        raw(
                            addr,
                            &format!(
                            "POST /api/auth/refresh HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\
                             Content-Type: application/json\r\nContent-Length: {}\r\n\r\n{body}",
                            body.len()
                        ),
                        )
                        .0
                    })
                })
                .collect();
            let mut statuses: Vec<u16> = threads.into_iter().map(|t| t.join().unwrap()).collect();
            statuses.sort_unstable();
            // One rotation; every other presentation is a reuse (401).
            assert_eq!(statuses, [200, 401, 401, 401, 401, 401, 401, 401]);
            let s = srv.stats().app_auth;
            assert_eq!((s.refreshes_ok, s.refreshes_failed), (1, 7));
        },
    );
}
