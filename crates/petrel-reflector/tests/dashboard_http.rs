//! The operator dashboard over real loopback HTTP, without a browser
//! (`dashboard_browser.rs` drives the page in Chromium): the page with its
//! Content-Security-Policy, the data endpoint behind the admin sign-in
//! (the admin token, or with `[apps]` an admin account's JWT from the real
//! login), and a device that talked in its "last heard". Every test runs
//! on SQLite and PostgreSQL.

#![allow(clippy::unwrap_used)]

#[macro_use]
mod support;

use std::net::{SocketAddr, UdpSocket};
use std::time::{Duration, Instant};

use petrel_reflector::codec::{encode, merge_frames, Header, PacketType};
use petrel_reflector::model::{ServerConfig, TokenKeys};
use serde_json::Value;

use support::app_client::{access_token, bearer, get as api_get, unix_s};
use support::app_server::{open_app_store, serve_app, SECRET};
use support::Env;

on_every_backend!(
    page_and_data_behind_the_admin_sign_in,
    without_an_admin_token_or_accounts_the_data_is_off,
    admin_accounts_sign_in_with_their_jwt_and_others_are_refused,
);

const TOKEN: &str = "0123456789abcdef";
const PW: &str = "Bench123";

fn config(db: &str, token: Option<&str>) -> ServerConfig {
    ServerConfig {
        http_listen: Some("127.0.0.1:0".parse().unwrap()),
        admin_token: token.map(str::to_owned),
        ..support::udp_config(db)
    }
}

fn get(addr: SocketAddr, path: &str, token: Option<&str>) -> (u16, String) {
    let auth = token.map_or(String::new(), |t| format!("Authorization: Bearer {t}\r\n"));
    support::http(
        addr,
        &format!("GET {path} HTTP/1.1\r\nHost: x\r\n{auth}Connection: close\r\n\r\n"),
    )
}

fn body(answer: &str) -> &str {
    answer.split_once("\r\n\r\n").map_or("", |(_, b)| b)
}

fn header<'a>(answer: &'a str, name: &str) -> Option<&'a str> {
    answer
        .split_once("\r\n\r\n")?
        .0
        .lines()
        .find_map(|l| {
            l.split_once(": ")
                .filter(|(k, _)| k.eq_ignore_ascii_case(name))
        })
        .map(|(_, v)| v)
}

fn page_and_data_behind_the_admin_sign_in(env: &Env) {
    let users = [support::account("alice", "BT00000".into(), 9_000_000, PW)];
    support::with_seeded_server(
        env,
        users,
        |db| config(db, Some(TOKEN)),
        |srv| {
            let http = srv.http_addr().unwrap();
            let (code, page) = get(http, "/dashboard", None);
            assert_eq!(code, 200);
            assert_eq!(
                header(&page, "content-type"),
                Some("text/html; charset=utf-8")
            );
            let csp = header(&page, "content-security-policy").unwrap();
            assert!(
                csp.starts_with("default-src 'none'; script-src 'sha256-"),
                "{csp}"
            );
            assert!(body(&page).contains(r#"<form id="signin""#));

            for token in [None, Some("0123456789abcdeX")] {
                assert_eq!(get(http, "/api/admin/dashboard", token).0, 401, "{token:?}");
            }

            // alice logs in and talks.
            let sock = UdpSocket::bind("127.0.0.1:0").unwrap();
            sock.set_read_timeout(Some(Duration::from_millis(500)))
                .unwrap();
            let mut data = vec![0u8; 24];
            data.extend_from_slice(b"02:42:7F:00:00:07");
            sock.send_to(&support::heartbeat("alice", 7, PW, &data), srv.local_addr())
                .unwrap();
            support::recv_type(&sock, PacketType::Heartbeat).expect("login reply");
            let mut h = Header::new(PacketType::Voice);
            h.set_username("alice");
            h.set_password(PW);
            h.ssid = 7;
            let voice = merge_frames([&[1u8; 40][..]]).unwrap();
            sock.send_to(&encode(&h, &voice).unwrap(), srv.local_addr())
                .unwrap();

            let deadline = Instant::now() + Duration::from_secs(5);
            let doc = loop {
                let (code, answer) = get(http, "/api/admin/dashboard", Some(TOKEN));
                assert_eq!(code, 200, "{answer}");
                assert_eq!(header(&answer, "cache-control"), Some("no-store"));
                let doc: Value = serde_json::from_str(body(&answer)).unwrap();
                // The counters are published every 10 ms, apart from
                // "last heard": wait for both datagrams in them too.
                if doc["last_heard"]["entries"]
                    .as_array()
                    .is_some_and(|e| !e.is_empty())
                    && doc["counters"]["ingress_read"].as_u64() >= Some(2)
                {
                    break doc;
                }
                assert!(Instant::now() < deadline, "no last-heard entry: {doc}");
                std::thread::sleep(Duration::from_millis(50));
            };
            let e = &doc["last_heard"]["entries"][0];
            assert_eq!(e["callsign"], "BT00000");
            assert_eq!(
                (e["user"].as_str(), e["ssid"].as_u64()),
                (Some("alice"), Some(7))
            );
            assert_eq!(e["kind"], "udp");
            assert_eq!(doc["online"], 1);
            let g = &doc["groups"][0];
            assert_eq!(
                (g["udp"].as_u64(), g["sessions"].as_u64()),
                (Some(1), Some(1))
            );
            assert_eq!(g["group_id"], e["group_id"]);
            // The first sample is taken at start.
            assert!(!doc["history"]["samples"].as_array().unwrap().is_empty());
            assert_eq!(doc["history"]["interval_ms"], 5_000);
            // The same counters as /metrics.
            let metrics = body(&get(http, "/metrics", None).1).to_owned();
            let read = doc["counters"]["ingress_read"].as_u64().unwrap();
            let exported: u64 = metrics
                .lines()
                .find_map(|l| l.strip_prefix("petrel_reflector_ingress_read_total "))
                .unwrap()
                .parse()
                .unwrap();
            assert!(read >= 2 && exported >= read, "{read} {exported}");
        },
    );
}

/// Neither an admin token nor the app API (the accounts): the data route
/// is off.
fn without_an_admin_token_or_accounts_the_data_is_off(env: &Env) {
    support::with_seeded_server(
        env,
        [],
        |db| ServerConfig {
            apps: None,
            ..config(db, None)
        },
        |srv| {
            let http = srv.http_addr().unwrap();
            assert_eq!(get(http, "/dashboard", None).0, 200);
            assert_eq!(get(http, "/api/admin/dashboard", Some(TOKEN)).0, 404);
        },
    );
}

/// With `[apps]` on: an admin account's access token from the real login
/// reads the data (200), as does the admin token; a signed-in account
/// without the admin role gets 403 `admin_required`; an expired token, one
/// signed with another secret, a disabled admin and no credential get the
/// §1.1 Bearer refusals. Without an admin token configured, accounts still
/// sign in.
fn admin_accounts_sign_in_with_their_jwt_and_others_are_refused(env: &Env) {
    let store = open_app_store(env, &["alice", "root", "oldroot"]);
    env.rt.block_on(async {
        store.set_user_roles("root", "user,admin").await.unwrap();
        store.set_user_roles("oldroot", "admin").await.unwrap();
        store.set_user_enabled("oldroot", false).await.unwrap();
    });
    let tune = |c: &mut ServerConfig| c.admin_token = Some(TOKEN.into());
    serve_app(env, store, tune, |srv, http, _| {
        let data = |credential: &str| api_get(http, "/api/admin/dashboard", &[&bearer(credential)]);
        let root = access_token(http, "root");
        let a = data(&root);
        assert_eq!(a.status, 200, "{}", a.body);
        assert!(a.body["last_heard"]["entries"].is_array());
        assert_eq!(data(TOKEN).status, 200);

        let alice = access_token(http, "alice");
        let a = data(&alice);
        assert_eq!(
            (a.status, a.message(), a.body["error"].as_str()),
            (403, "admin_required", Some("admin_required"))
        );
        assert_eq!(srv.stats().app_auth.admin_required, 1);

        let now = unix_s();
        let keys = TokenKeys::new(SECRET.as_bytes());
        let expired = keys.issue("root", "", now - 10_801);
        let foreign = TokenKeys::new(b"another-secret-another-secret-xx").issue("root", "", now);
        for t in [&expired, &foreign, &format!("{TOKEN}x")] {
            let a = data(t);
            assert_eq!(
                (a.status, a.message()),
                (401, "令牌错误，登录超时，请重新登录"),
                "{t:.20}"
            );
        }
        let a = data(&keys.issue("oldroot", "", now));
        assert_eq!((a.status, a.message()), (403, "用户已被禁用"));
        let a = api_get(http, "/api/admin/dashboard", &[]);
        assert_eq!((a.status, a.message()), (401, "未提供认证令牌"));
        // The rest of the admin API stays the admin token's.
        assert_eq!(api_get(http, "/api/stats", &[&bearer(&root)]).status, 401);
        assert_eq!(api_get(http, "/api/stats", &[&bearer(TOKEN)]).status, 200);
        // The counter reaches /metrics.
        let metrics = get(http, "/metrics", None).1;
        assert!(
            metrics.contains("petrel_reflector_app_auth_admin_required_total 1"),
            "{metrics}"
        );
    });
    // Without an admin token, admin accounts still sign in; the rest of
    // the admin API is off.
    let store = env.rt.block_on(support::open_cheap(&env.db));
    serve_app(
        env,
        store,
        |_| {},
        |_, http, _| {
            let root = access_token(http, "root");
            let data = api_get(http, "/api/admin/dashboard", &[&bearer(&root)]);
            assert_eq!(data.status, 200, "{}", data.body);
            assert_eq!(api_get(http, "/api/stats", &[&bearer(&root)]).status, 404);
        },
    );
}
