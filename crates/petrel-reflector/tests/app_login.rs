//! The app clients' HTTP API on real loopback TCP (`specs/draarl-apps.md`
//! §1, §1.5, §3.7, §3.8, §4.1, §5): login and its answer, wrong passwords,
//! disabled and unapproved users, refresh rotation with reuse detection and
//! every 401 of §1.4, logout, the cookies' attributes, the Bearer errors
//! (expired, foreign-key and edge-discovery tokens), the origin guard, the
//! token-in-query refusal, the captcha and login budgets, the start-up
//! routes and the app-auth metrics. Each test runs its own server on a
//! fresh store, once on SQLite and once on PostgreSQL
//! (`tests/support/backends.rs`).
#![allow(clippy::unwrap_used)]

use std::net::SocketAddr;

use jsonwebtoken::{Algorithm, EncodingKey, Header};
use petrel_reflector::model::{AppApiConfig, StoreEvent, TokenKeys};
use petrel_reflector::runtime::server::ServerHandle;
use petrel_reflector::runtime::store::{NewRefreshToken, Store};
use serde_json::{json, Value};
use sha2::{Digest, Sha256};
use tokio::runtime::Runtime;

#[macro_use]
mod support;
use support::app_client::{bearer, get, login, post, send, unix_s};
use support::app_server::{open_app_store, serve_app, PASSWORD, SECRET};
use support::Env;

on_every_backend!(
    login_answers_like_the_reference_and_refuses_bad_credentials,
    refresh_rotates_detects_reuse_and_answers_every_401,
    bearer_errors_follow_the_reference,
    startup_routes_list_groups_messages_and_the_access_point,
    origin_guard_and_token_queries,
    captcha_is_required_by_default_and_rate_limited,
);

/// The app server of [`support::app_server`] with `login_captcha`, over a
/// store holding alice, bob (disabled), carol (not approved), dave (admin,
/// not approved) and three text messages of alice in 999. `tune` adjusts
/// the `[apps]` section.
fn with_app_server(
    env: &Env,
    login_captcha: bool,
    tune: impl FnOnce(&mut AppApiConfig),
    body: impl FnOnce(&ServerHandle, SocketAddr, &Runtime, &Store),
) {
    let store = open_app_store(env, &["alice", "bob", "carol", "dave"]);
    env.rt.block_on(async {
        let alice = store.web_user_by_name("alice").await.unwrap().unwrap();
        for (k, text) in ["one", "two", "three"].iter().enumerate() {
            store
                .apply(&StoreEvent::Text {
                    device: (alice.id, 7),
                    group_id: 999,
                    unix_ms: 1_785_931_200_000 + k as i64,
                    text: text.as_bytes().to_vec(),
                })
                .await
                .unwrap();
        }
        store.set_user_enabled("bob", false).await.unwrap();
        store.set_user_approval("carol", 0).await.unwrap();
        store.set_user_approval("dave", 0).await.unwrap();
        store.set_user_roles("dave", "admin").await.unwrap();
    });
    let tune = |cfg: &mut petrel_reflector::model::ServerConfig| {
        cfg.login_captcha = login_captcha;
        tune(cfg.apps.as_mut().unwrap());
    };
    serve_app(env, store, tune, |srv, addr, store| {
        body(srv, addr, &env.rt, store)
    });
}

fn no_apps_tuning(_: &mut AppApiConfig) {}

fn login_answers_like_the_reference_and_refuses_bad_credentials(env: &Env) {
    with_app_server(env, false, no_apps_tuning, |srv, addr, _, _| {
        let a = login(addr, "alice", PASSWORD);
        assert_eq!(a.status, 200, "{}", a.body);
        assert_eq!(
            (a.body["code"].as_i64(), a.message()),
            (Some(200), "登录成功")
        );
        let d = &a.body["data"];
        let token = d["token"].as_str().unwrap();
        assert!(token.len() <= 572, "{}", token.len());
        assert_eq!(d["expires_in"], 10_800);
        assert_eq!(d["refresh_expires_in"], 1_209_600);
        assert_eq!(d["refresh_token"].as_str().unwrap().len(), 43);
        let u = &d["user"];
        assert_eq!(u["username"], "alice");
        assert!(u["id"].as_i64().unwrap() > 0);
        assert_eq!(u["callsign"], "BA1AA0");
        assert_eq!(
            (u["status"].as_i64(), u["approval_status"].as_i64()),
            (Some(1), Some(1))
        );
        assert_eq!(u["last_group_id"], 999);
        assert_eq!(
            (u["role"].as_str(), u["roles"].clone()),
            (Some("user"), json!(["user"]))
        );
        assert_eq!(u["isAdmin"], false);
        assert_eq!(u["last_login_ip"], "127.0.0.1");
        let cookies = a.cookies();
        assert_eq!(cookies.len(), 2, "{cookies:?}");
        assert!(cookies[0].starts_with("refresh_token="));
        assert!(cookies[0].ends_with("; Path=/api/auth; Max-Age=1209600; HttpOnly; SameSite=Lax"));
        assert_eq!(
            cookies[1],
            format!("ws_token={token}; Path=/; Max-Age=10800; HttpOnly; SameSite=Lax")
        );
        // Secure only behind TLS (X-Forwarded-Proto: https).
        let behind_tls = post(
            addr,
            "/api/auth/login",
            &["X-Forwarded-Proto: https"],
            &json!({"username": "alice", "password": PASSWORD}).to_string(),
        );
        assert!(behind_tls.cookies().iter().all(|c| c.ends_with("; Secure")));
        // /api/me: roles as a string, plus email and review_note.
        let me = get(addr, "/api/me", &[&bearer(token)]);
        assert_eq!(me.status, 200, "{}", me.body);
        assert_eq!(me.body["data"]["roles"], "user");
        assert_eq!(me.body["data"]["review_note"], "");

        for (name, pw) in [("alice", "wrong"), ("nobody", PASSWORD)] {
            let a = login(addr, name, pw);
            assert_eq!((a.status, a.message()), (401, "用户名或密码错误"));
            assert_eq!(a.body["code"], 401);
        }
        let a = login(addr, "bob", PASSWORD);
        assert_eq!((a.status, a.message()), (403, "用户已被禁用"));
        // Approval is not checked at login; the client refuses it locally.
        let a = login(addr, "carol", PASSWORD);
        assert_eq!(a.status, 200);
        assert_eq!(a.body["data"]["user"]["approval_status"], 0);
        for body in [
            "{",
            r#"{"username":"alice"}"#,
            r#"{"username":"","password":"x"}"#,
        ] {
            let a = post(addr, "/api/auth/login", &[], body);
            assert_eq!((a.status, a.message()), (400, "请求参数错误"), "{body}");
        }
        let s = srv.stats().app_auth;
        assert_eq!(s.login_ok, 3);
        assert_eq!(s.login_failed_wrong_password, 1);
        assert_eq!(s.login_failed_unknown_user, 1);
        assert_eq!(s.login_failed_disabled, 1);
        assert_eq!(s.login_failed_bad_request, 3);
        let metrics = get(addr, "/metrics", &[]);
        assert_eq!(metrics.status, 200);
    });
}

fn refresh_rotates_detects_reuse_and_answers_every_401(env: &Env) {
    with_app_server(env, false, no_apps_tuning, |srv, addr, rt, store| {
        let first = login(addr, "alice", PASSWORD);
        let r1 = first.body["data"]["refresh_token"]
            .as_str()
            .unwrap()
            .to_owned();
        let refresh = |token: &str| {
            post(
                addr,
                "/api/auth/refresh",
                &[],
                &json!({ "refresh_token": token }).to_string(),
            )
        };
        let a = refresh(&r1);
        assert_eq!(a.status, 200, "{}", a.body);
        let r2 = a.body["data"]["refresh_token"].as_str().unwrap().to_owned();
        assert_ne!(r1, r2);
        assert_eq!(a.body["data"]["refresh_expires_in"], 1_209_600);
        assert_eq!(a.cookies().len(), 2);
        // Reusing the rotated token revokes every token of the user.
        let a = refresh(&r1);
        assert_eq!((a.status, a.message()), (401, "refresh_token_revoked"));
        assert_eq!(a.cookies().len(), 3);
        assert!(a.cookies().iter().all(|c| c.contains("Max-Age=0")));
        assert_eq!(refresh(&r2).message(), "refresh_token_revoked");
        assert_eq!(srv.stats().app_auth.refresh_reuse_detected, 1);

        // From the cookie: the body carries no refresh token.
        let second = login(addr, "alice", PASSWORD);
        let r3 = second.body["data"]["refresh_token"]
            .as_str()
            .unwrap()
            .to_owned();
        let a = post(
            addr,
            "/api/auth/refresh",
            &[&format!("Cookie: refresh_token={r3}")],
            "{}",
        );
        assert_eq!(a.status, 200, "{}", a.body);
        assert!(a.body["data"].get("refresh_token").is_none());
        assert!(a.body["data"]["token"].is_string());

        let a = post(addr, "/api/auth/refresh", &[], "{}");
        assert_eq!((a.status, a.message()), (401, "refresh_token_required"));
        let a = post(addr, "/api/auth/refresh", &[], "");
        assert_eq!(a.message(), "refresh_token_required");
        assert_eq!(refresh("no-such-token").message(), "invalid_refresh_token");
        let a = post(addr, "/api/auth/refresh", &[], "{oops");
        assert_eq!((a.status, a.message()), (400, "请求参数错误"));

        // An expired token (stored with its expiry in the past).
        let uid = rt
            .block_on(store.web_user_by_name("alice"))
            .unwrap()
            .unwrap()
            .id;
        let hash: String = Sha256::digest(b"expired-token")
            .iter()
            .map(|b| format!("{b:02x}"))
            .collect();
        let now_ms = i64::try_from(
            std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .unwrap()
                .as_millis(),
        )
        .unwrap();
        rt.block_on(store.insert_refresh_token(
            &NewRefreshToken {
                hash,
                user_id: uid,
                created_at_ms: now_ms - 2000,
                expires_at_ms: now_ms - 1000,
                ip: "127.0.0.1".into(),
                user_agent: String::new(),
            },
            20,
        ))
        .unwrap();
        assert_eq!(refresh("expired-token").message(), "refresh_token_expired");

        // A user no longer approved: user_invalid, and the token is revoked.
        let third = login(addr, "alice", PASSWORD);
        let r4 = third.body["data"]["refresh_token"]
            .as_str()
            .unwrap()
            .to_owned();
        rt.block_on(store.set_user_approval("alice", 0)).unwrap();
        assert_eq!(refresh(&r4).message(), "user_invalid");
        rt.block_on(store.set_user_approval("alice", 1)).unwrap();
        assert_eq!(refresh(&r4).message(), "refresh_token_revoked");

        // Logout revokes the body's token, clears the cookies, always 200.
        let fourth = login(addr, "alice", PASSWORD);
        let r5 = fourth.body["data"]["refresh_token"]
            .as_str()
            .unwrap()
            .to_owned();
        let a = post(
            addr,
            "/api/auth/logout",
            &[],
            &json!({ "refresh_token": r5 }).to_string(),
        );
        assert_eq!((a.status, a.message()), (200, "登出成功"));
        assert_eq!(
            a.cookies(),
            vec![
                "refresh_token=; Path=/api/auth; Max-Age=0; Expires=Thu, 01 Jan 1970 00:00:01 GMT; HttpOnly; SameSite=Lax",
                "refresh_token=; Path=/; Max-Age=0; Expires=Thu, 01 Jan 1970 00:00:01 GMT; HttpOnly; SameSite=Lax",
                "ws_token=; Path=/; Max-Age=0; Expires=Thu, 01 Jan 1970 00:00:01 GMT; HttpOnly; SameSite=Lax",
            ]
        );
        assert_eq!(refresh(&r5).message(), "refresh_token_revoked");
        assert_eq!(post(addr, "/api/auth/logout", &[], "{}").status, 200);
        assert_eq!(
            post(addr, "/api/auth/ws-token/clear", &[], "")
                .cookies()
                .len(),
            3
        );
    });
}

fn bearer_errors_follow_the_reference(env: &Env) {
    with_app_server(env, false, no_apps_tuning, |_, addr, _, _| {
        let me = |h: &str| {
            let hs: Vec<&str> = if h.is_empty() { vec![] } else { vec![h] };
            get(addr, "/api/me", &hs)
        };
        let a = me("");
        assert_eq!((a.status, a.message()), (401, "未提供认证令牌"));
        for h in [
            "Authorization: Basic abc",
            "Authorization: bearer abc",
            "Authorization: Bearer ",
        ] {
            assert_eq!(me(h).message(), "认证令牌格式错误", "{h}");
        }
        let keys = TokenKeys::new(SECRET.as_bytes());
        let now = unix_s();
        let expired = keys.issue("alice", "", now - 10_801);
        let foreign = TokenKeys::new(b"another-secret-another-secret-xx").issue("alice", "", now);
        let edge = jsonwebtoken::encode(
            &Header::new(Algorithm::HS256),
            &json!({"sub":"alice","username":"alice","token_use":"edge-discovery",
                "aud":"draarl-edge-discovery","iss":"draarl","exp":now + 300}),
            &EncodingKey::from_secret(SECRET.as_bytes()),
        )
        .unwrap();
        for t in [expired.as_str(), foreign.as_str(), edge.as_str(), "x.y.z"] {
            let a = me(&bearer(t));
            assert_eq!(
                (a.status, a.message()),
                (401, "令牌错误，登录超时，请重新登录")
            );
        }
        let a = me(&bearer(&keys.issue("ghost", "", now)));
        assert_eq!((a.status, a.message()), (401, "用户不存在"));
        let a = me(&bearer(&keys.issue("bob", "", now)));
        assert_eq!((a.status, a.message()), (403, "用户已被禁用"));
        // A valid token still works for /api/me and ws-token/sync.
        let alice = keys.issue("alice", "", now);
        assert_eq!(me(&bearer(&alice)).status, 200);
        let a = post(addr, "/api/auth/ws-token/sync", &[&bearer(&alice)], "");
        assert_eq!((a.status, a.message()), (200, "成功"));
        assert_eq!(
            a.cookies(),
            vec![format!(
                "ws_token={alice}; Path=/; Max-Age=10800; HttpOnly; SameSite=Lax"
            )]
        );
        assert_eq!(post(addr, "/api/auth/ws-token/sync", &[], "").status, 401);
        // Approved routes: 403 with the approval state, admins exempt.
        let carol = keys.issue("carol", "", now);
        let a = get(addr, "/api/groups", &[&bearer(&carol)]);
        assert_eq!(a.status, 403);
        assert_eq!(
            a.message(),
            "您的账号正在审核中，请等待管理员审核通过后再操作"
        );
        assert_eq!(a.body["data"]["approval_status"], 0);
        assert_eq!(me(&bearer(&carol)).status, 200);
        let dave = keys.issue("dave", "admin", now);
        assert_eq!(get(addr, "/api/groups", &[&bearer(&dave)]).status, 200);
    });
}

fn startup_routes_list_groups_messages_and_the_access_point(env: &Env) {
    with_app_server(env, false, no_apps_tuning, |_, addr, _, _| {
        let token = login(addr, "alice", PASSWORD).body["data"]["token"]
            .as_str()
            .unwrap()
            .to_owned();
        let auth = bearer(&token);
        let a = get(addr, "/api/groups?page=1&page_size=2", &[&auth]);
        assert_eq!(a.status, 200, "{}", a.body);
        let d = &a.body["data"];
        // 999, 1001 and 1002 are public; 2001 is private without membership.
        assert_eq!(
            (d["total"].as_i64(), d["page_size"].as_i64()),
            (Some(3), Some(2))
        );
        let ids: Vec<i64> = d["items"]
            .as_array()
            .unwrap()
            .iter()
            .map(|g| g["id"].as_i64().unwrap())
            .collect();
        assert_eq!(ids, vec![999, 1001]);
        assert_eq!(d["items"][0]["type"], 1);
        assert_eq!(d["items"][0]["online_count"], 0);
        let a = get(addr, "/api/groups?page=2&page_size=2", &[&auth]);
        assert_eq!(a.body["data"]["items"][0]["id"], 1002);
        let a = get(addr, "/api/radio/groups/stats", &[&auth]);
        assert_eq!(a.body["data"].as_array().unwrap().len(), 3);
        assert_eq!(a.body["data"][0]["online_dev_number"], 0);

        let a = get(
            addr,
            "/api/groups/999/messages?limit=2&message_type=TEXT",
            &[&auth],
        );
        assert_eq!(a.status, 200, "{}", a.body);
        let d = &a.body["data"];
        assert_eq!(d["has_more"], true);
        let texts: Vec<&str> = d["messages"]
            .as_array()
            .unwrap()
            .iter()
            .map(|m| m["text_content"].as_str().unwrap())
            .collect();
        assert_eq!(texts, vec!["three", "two"]);
        assert_eq!(d["messages"][0]["sender"]["username"], "alice");
        let cursor = d["next_cursor"].as_str().unwrap();
        let a = get(
            addr,
            &format!("/api/groups/999/messages?limit=2&cursor={cursor}"),
            &[&auth],
        );
        assert_eq!(a.body["data"]["messages"][0]["text_content"], "one");
        assert_eq!(a.body["data"]["has_more"], false);
        assert_eq!(a.body["data"]["next_cursor"], "");
        let a = get(addr, "/api/groups/1001/messages", &[&auth]);
        assert_eq!(a.body["data"]["messages"], json!([]));
        assert_eq!(a.body["data"]["has_more"], false);
        for (path, status, message) in [
            ("/api/groups/abc/messages", 400, "无效的群组ID"),
            ("/api/groups/4242/messages", 404, "群组不存在"),
            ("/api/groups/2001/messages", 403, "无权访问该群组"),
            (
                "/api/groups/999/messages?message_type=image",
                400,
                "无效的消息类型",
            ),
            (
                "/api/groups/999/messages?cursor=not-base64!",
                400,
                "无效的消息游标",
            ),
        ] {
            let a = get(addr, path, &[&auth]);
            assert_eq!((a.status, a.message()), (status, message), "{path}");
        }
        let a = get(addr, "/api/groups/999/messages?limit=0", &[&auth]);
        assert_eq!(
            (a.status, a.body["error"].as_str()),
            (400, Some("invalid_message_limit"))
        );

        let a = get(
            addr,
            "/api/access-points",
            &[&format!("Authorization: bearer {token}")],
        );
        assert_eq!(a.status, 200, "{}", a.body);
        let item = &a.body["data"]["items"][0];
        assert_eq!(
            (
                item["id"].as_str(),
                item["udp_host"].as_str(),
                item["udp_port"].as_i64()
            ),
            (Some("center"), Some("radio.example.com"), Some(60050))
        );
        assert!(item.get("region").is_none());
        assert!(
            a.head.contains("cache-control: private, max-age=5"),
            "{}",
            a.head
        );
        assert!(a.head.contains("vary: Authorization"), "{}", a.head);
        let a = get(addr, "/api/access-points", &[]);
        assert_eq!((a.status, a.message()), (401, "发现凭证无效或已过期"));
        let a = get(addr, "/api/config/public", &[]);
        assert_eq!(
            a.body["data"]["registration"]["require_email_verification"],
            false
        );
    });
}

fn origin_guard_and_token_queries(env: &Env) {
    with_app_server(env, false, no_apps_tuning, |srv, addr, _, _| {
        let a = get(
            addr,
            "/api/config/public",
            &["Referer: http://localhost:5173/radio"],
        );
        assert_eq!((a.status, a.message()), (403, "origin_not_allowed"));
        let a = get(
            addr,
            "/api/config/public",
            &["Referer: http://localhost:9001/radio"],
        );
        assert_eq!(a.status, 200);
        let a = get(
            addr,
            "/api/config/public",
            &["Origin: HTTP://LOCALHOST:9001/"],
        );
        assert_eq!(a.status, 200);
        assert!(
            a.head.contains("access-control-allow-credentials: true"),
            "{}",
            a.head
        );
        let pre = send(
            addr,
            "OPTIONS",
            "/api/auth/login",
            &[
                "Origin: http://localhost:9001",
                "Access-Control-Request-Method: POST",
            ],
            "",
        );
        assert_eq!(pre.status, 204);
        assert!(pre
            .head
            .contains("access-control-allow-origin: http://localhost:9001"));
        assert!(pre.head.contains(
            "access-control-allow-headers: Content-Type, Authorization, X-Requested-With"
        ));
        let pre = send(
            addr,
            "OPTIONS",
            "/api/auth/login",
            &[
                "Origin: https://evil.example",
                "Access-Control-Request-Method: POST",
            ],
            "",
        );
        assert_eq!((pre.status, pre.body.clone()), (403, Value::Null));
        for path in [
            "/healthz?token=sensitive",
            "/api/captcha?ACCESS_TOKEN=1",
            "/api/me?jwt=x",
        ] {
            let a = get(addr, path, &[]);
            assert_eq!(
                (a.status, a.message()),
                (400, "token_query_not_allowed"),
                "{path}"
            );
        }
        assert_eq!(get(addr, "/healthz", &[]).status, 200);
        // Without an admin token the admin API stays off (404), apps or not.
        assert_eq!(get(addr, "/api/stats", &[]).status, 404);
        let s = srv.stats().app_auth;
        assert_eq!((s.origin_refused, s.token_query_refused), (2, 3));
    });
}

fn captcha_is_required_by_default_and_rate_limited(env: &Env) {
    let tune = |a: &mut AppApiConfig| {
        a.captcha_burst = 3;
        a.login_burst = 3;
    };
    with_app_server(env, true, tune, |srv, addr, _, _| {
        let a = get(addr, "/api/captcha", &[]);
        assert_eq!(a.status, 200, "{}", a.body);
        let d = &a.body["data"];
        assert_eq!(d["expire"], 300);
        assert!(d["captcha_image"]
            .as_str()
            .unwrap()
            .starts_with("data:image/png;base64,iVBORw0KGgo"));
        let id = d["captcha_id"].as_str().unwrap().to_owned();
        assert_eq!(id.len(), 20);
        let attempt = |id: &str, code: &str| {
            post(
                addr,
                "/api/auth/login",
                &[],
                &json!({"username":"alice","password":PASSWORD,"captcha_id":id,"captcha_code":code})
                    .to_string(),
            )
        };
        // Without a captcha, with a wrong answer, and with the same id again.
        let a = login(addr, "alice", PASSWORD);
        assert_eq!((a.status, a.message()), (400, "图片验证码错误或已过期"));
        assert_eq!(attempt(&id, "?????").message(), "图片验证码错误或已过期");
        assert_eq!(attempt(&id, "?????").message(), "图片验证码错误或已过期");
        // Login budget: 3 at once per source prefix, then 429.
        let a = attempt("x", "y");
        assert_eq!(a.status, 429);
        assert_eq!(a.message(), "请求过于频繁，请稍后重试");
        assert_eq!(a.body["data"]["retry_after"], 3);
        assert!(a.head.contains("retry-after: 3"), "{}", a.head);
        // Captcha budget: 3 at once per source prefix, then 429.
        assert_eq!(get(addr, "/api/captcha", &[]).status, 200);
        assert_eq!(get(addr, "/api/captcha", &[]).status, 200);
        assert_eq!(get(addr, "/api/captcha", &[]).status, 429);
        let s = srv.stats().app_auth;
        assert_eq!((s.captcha_issued, s.captcha_failed), (3, 3));
        assert_eq!((s.rate_limited_captcha, s.rate_limited_login), (1, 1));
        let metrics = support::http(
            addr,
            "GET /metrics HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n",
        )
        .1;
        for line in [
            "petrel_reflector_app_auth_captcha_issued_total 3",
            "petrel_reflector_app_auth_captcha_failed_total 3",
            "petrel_reflector_app_auth_rate_limited_login_total 1",
            "petrel_reflector_app_auth_bearer_missing_total 0",
            "petrel_reflector_app_auth_preference_evictions_total 0",
        ] {
            assert!(metrics.contains(line), "{line}");
        }
    });
}
