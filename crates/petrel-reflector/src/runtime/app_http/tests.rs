//! A captcha solved, reused and expired over loopback HTTP (§1.2–§1.3):
//! the answer is read from the book the image was drawn for, which only
//! the crate can see. The rest of the API is tested from outside in
//! `tests/app_login.rs`.

use std::sync::Arc;

use serde_json::Value;
use tokio::io::{AsyncReadExt, AsyncWriteExt};

use super::*;
use crate::model::{Backend, HttpConfig};
use crate::runtime::app_accounts::AccountLimits;
use crate::runtime::store::scratch_store::ScratchStore;
use crate::runtime::store::{NewUser, Store, StoreOptions};

async fn request(addr: std::net::SocketAddr, method: &str, path: &str, body: &str) -> Value {
    let mut s = tokio::net::TcpStream::connect(addr).await.unwrap();
    let req = format!(
        "{method} {path} HTTP/1.1\r\nHost: x\r\nConnection: close\r\nContent-Type: application/json\r\nContent-Length: {}\r\n\r\n{body}",
        body.len()
    );
    s.write_all(req.as_bytes()).await.unwrap();
    let mut out = String::new();
    s.read_to_string(&mut out).await.unwrap();
    let body = out.split_once("\r\n\r\n").unwrap().1;
    serde_json::from_str(body).unwrap()
}

#[tokio::test]
async fn a_solved_captcha_logs_in_once_and_an_expired_one_never() {
    let scratch = ScratchStore::create(Backend::Sqlite, "captcha_solved")
        .await
        .unwrap()
        .unwrap();
    let store = Store::open(
        scratch.location(),
        StoreOptions {
            web_password_cost: 4,
            ..StoreOptions::default()
        },
    )
    .await
    .unwrap();
    store
        .add_user(&NewUser {
            name: "alice".into(),
            callsign: "BA1AAA".into(),
            dmrid: 0,
            device_password: "Secret12".into(),
            default_group_id: None,
        })
        .await
        .unwrap();
    store.set_web_password("alice", "pw-1").await.unwrap();
    let config = AppApiConfig {
        public_host: "radio.example.com".into(),
        ..AppApiConfig::default()
    };
    let accounts = AppAccounts::new(
        store.clone(),
        b"0123456789abcdef0123456789abcdef",
        AccountLimits::from(&config),
        Arc::default(),
    );
    let api = AppApi::new(accounts, config, true, Vec::new());
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let server = tokio::spawn(crate::runtime::http_server::serve(
        listener,
        app_router(api.clone()),
        HttpConfig::default(),
        Arc::default(),
    ));

    let c = request(addr, "GET", "/api/captcha", "").await;
    let id = c["data"]["captcha_id"].as_str().unwrap().to_owned();
    let answer = lock(&api.inner.captchas).peek(&id).unwrap().to_owned();
    let login = |code: String| {
        serde_json::json!({"username":"alice","password":"pw-1","captcha_id":id,"captcha_code":code})
            .to_string()
    };
    let ok = request(addr, "POST", "/api/auth/login", &login(answer.clone())).await;
    assert_eq!(ok["code"], 200, "{ok}");
    assert_eq!(ok["data"]["user"]["username"], "alice");
    // Single use: the same id and answer again fail.
    let again = request(addr, "POST", "/api/auth/login", &login(answer)).await;
    assert_eq!(again["code"], 400);
    assert_eq!(again["message"], "图片验证码错误或已过期");
    // Expired: an answer issued 300 s ago is refused even when right.
    let mut failures = 1;
    if let Some(then) = std::time::Instant::now().checked_sub(captcha::CAPTCHA_TTL) {
        lock(&api.inner.captchas).insert("old".into(), "abcde".into(), then);
        let old = serde_json::json!({"username":"alice","password":"pw-1","captcha_id":"old","captcha_code":"abcde"});
        let late = request(addr, "POST", "/api/auth/login", &old.to_string()).await;
        assert_eq!(late["code"], 400);
        assert_eq!(late["message"], "图片验证码错误或已过期");
        failures += 1;
    }
    let s = api.stats().snapshot();
    assert_eq!(
        (s.captcha_issued, s.captcha_failed, s.login_ok),
        (1, failures, 1)
    );
    server.abort();
    store.close().await;
    scratch.remove().await.unwrap();
}
