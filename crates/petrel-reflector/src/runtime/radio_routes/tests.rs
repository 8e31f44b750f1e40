//! The radio routes over a real loopback HTTP connection, with a test
//! layer standing in for the account side's Bearer middleware (header
//! `x-test-user: <id>` becomes the [`AuthenticatedUser`]) and a fake
//! account store.

use std::net::SocketAddr;
use std::sync::atomic::{AtomicUsize, Ordering::Relaxed};
use std::sync::Mutex;

use axum::extract::Request;
use axum::middleware::Next;
use rand::SeedableRng;
use tokio::io::{AsyncReadExt, AsyncWriteExt};

use super::*;
use crate::core::NewGhost;
use crate::model::{AppAuthRequest, AppGrant, AppReject, Endpoint, SessionConfig};
use crate::runtime::app_authority::AppFuture;

/// Test-only account store: `change_routing` answers from a script
/// (default: saves what was asked) and records every call.
#[derive(Debug, Default)]
struct FakeAuthority {
    next: Mutex<Option<RoutingReject>>,
    saved: Mutex<Vec<Routing>>,
    calls: AtomicUsize,
}

impl AppAuthority for FakeAuthority {
    fn authorize(&self, _: AppAuthRequest) -> AppFuture<Result<AppGrant, AppReject>> {
        Box::pin(async { Err(AppReject::InvalidToken) })
    }

    fn change_routing(&self, change: RoutingChange) -> AppFuture<Result<Routing, RoutingReject>> {
        self.calls.fetch_add(1, Relaxed);
        let verdict = match self.next.lock().unwrap().take() {
            Some(r) => Err(r),
            None => {
                self.saved.lock().unwrap().push(change.requested.clone());
                Ok(change.requested)
            }
        };
        Box::pin(async move { verdict })
    }
}

fn user(id: i64) -> AppUser {
    AppUser {
        user_id: id,
        username: format!("user{id}"),
        callsign: format!("BG{id}"),
        is_admin: false,
    }
}

async fn as_test_user(mut req: Request, next: Next) -> Response {
    let id = req
        .headers()
        .get("x-test-user")
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.parse().ok());
    if let Some(id) = id {
        req.extensions_mut().insert(AuthenticatedUser(user(id)));
    }
    next.run(req).await
}

struct Fixture {
    addr: SocketAddr,
    shared: Arc<SharedTables>,
    hub: Arc<WebSocketHub>,
    authority: Arc<FakeAuthority>,
    rng: rand_chacha::ChaCha8Rng,
    port: u16,
}

impl Fixture {
    async fn start(subscriptions: usize) -> Self {
        let cfg = SessionConfig {
            ghost_subscriptions: subscriptions,
            ..SessionConfig::default()
        };
        let shared = Arc::new(SharedTables::new(&cfg, Instant::now()));
        let authority = Arc::new(FakeAuthority::default());
        let hub = Arc::new(WebSocketHub::new(16));
        let radio = RadioState {
            shared: Arc::clone(&shared),
            authority: Some(authority.clone() as Arc<dyn AppAuthority>),
            ptt_hold: Duration::from_millis(900),
            hub: Arc::clone(&hub),
        };
        let app = routes::<()>(radio).layer(axum::middleware::from_fn(as_test_user));
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        tokio::spawn(async move { axum::serve(listener, app).await });
        Self {
            addr,
            shared,
            hub,
            authority,
            rng: rand_chacha::ChaCha8Rng::seed_from_u64(1),
            port: 40_000,
        }
    }

    /// Registers a session of `owner` with DevModel `dev_model`.
    fn session(&mut self, owner: i64, dev_model: u8, tx: i64, rx: &[i64]) -> String {
        self.port += 1;
        let transport = if dev_model == DEV_MODEL_WEB {
            Endpoint::WebSocket(u64::from(self.port))
        } else {
            Endpoint::Udp(SocketAddr::from(([127, 0, 0, 1], self.port)))
        };
        let new = NewGhost {
            user: Arc::new(user(owner)),
            dev_model,
            client_instance_id: format!("11111111-1111-4111-8111-{:012}", self.port),
            capabilities: vec!["multi_receive_v1".into(), "source_group_v1".into()],
            transport,
            routing: Routing::new(tx, rx.to_vec()),
        };
        self.shared
            .ghosts()
            .register(new, Instant::now(), 1_785_931_200_123, &mut self.rng)
            .unwrap()
            .session
            .session_id
    }

    /// Sends a request as user `as_user` (none: unauthenticated); returns
    /// the status and the JSON body.
    async fn call(
        &self,
        method: &str,
        path: &str,
        as_user: Option<i64>,
        body: &str,
    ) -> (u16, Value) {
        let mut s = tokio::net::TcpStream::connect(self.addr).await.unwrap();
        let who = as_user.map_or(String::new(), |id| format!("x-test-user: {id}\r\n"));
        let req = format!(
            "{method} {path} HTTP/1.1\r\nhost: x\r\nconnection: close\r\n{who}content-type: application/json\r\ncontent-length: {}\r\n\r\n{body}",
            body.len()
        );
        s.write_all(req.as_bytes()).await.unwrap();
        let mut out = Vec::new();
        s.read_to_end(&mut out).await.unwrap();
        let text = String::from_utf8(out).unwrap();
        let status = text.split_whitespace().nth(1).unwrap().parse().unwrap();
        let json = text
            .split_once("\r\n\r\n")
            .map(|(_, b)| serde_json::from_str(b).unwrap_or(Value::Null))
            .unwrap();
        (status, json)
    }
}

#[tokio::test]
async fn without_a_caller_every_route_is_401() {
    let f = Fixture::start(16).await;
    for (m, p) in [
        ("GET", "/api/radio/config"),
        ("GET", "/api/radio/status"),
        ("GET", "/api/radio/sessions"),
        ("PUT", "/api/radio/sessions/x/routing"),
        ("DELETE", "/api/radio/sessions/x"),
    ] {
        let (status, body) = f.call(m, p, None, "{}").await;
        assert_eq!(status, 401, "{m} {p}");
        assert_eq!(body, json!({"code": 401, "message": "未提供认证令牌"}));
    }
}

#[tokio::test]
async fn sessions_list_only_the_callers_and_delete_only_its_own() {
    let mut f = Fixture::start(16).await;
    let mine = f.session(1, 101, 1001, &[1002]);
    let web = f.session(1, 105, 1001, &[]);
    let theirs = f.session(2, 101, 999, &[]);
    let (status, body) = f.call("GET", "/api/radio/sessions", Some(1), "").await;
    assert_eq!(status, 200);
    assert_eq!(body["message"], "成功");
    let list = body["data"].as_array().unwrap();
    assert_eq!(list.len(), 2);
    let first = &list[0];
    assert_eq!(first["session_id"], mine.as_str());
    assert_eq!(first["transport"], "udp");
    assert_eq!(list[1]["transport"], "websocket");
    assert_eq!(first["rx_group_ids"], json!([1001, 1002]));
    assert_eq!(first["online_since"], "2026-08-05T12:00:00.123Z");
    assert_eq!(first["protocol_version"], 1);
    assert!(first.get("session_tag").is_none() && first.get("endpoint").is_none());
    // Another user's session: 404, and it survives.
    let (status, body) = f
        .call(
            "DELETE",
            &format!("/api/radio/sessions/{theirs}"),
            Some(1),
            "",
        )
        .await;
    assert_eq!(status, 404);
    assert_eq!(
        body,
        json!({"code": 404, "error": "session_not_found", "message": "会话不存在"})
    );
    assert!(f.shared.ghosts().get(&theirs).is_some());
    let (status, body) = f
        .call("DELETE", &format!("/api/radio/sessions/{web}"), Some(1), "")
        .await;
    assert_eq!(
        (status, body),
        (200, json!({"code": 200, "message": "会话已断开"}))
    );
    assert!(f.shared.ghosts().get(&web).is_none());
    // The WebSocket connection is queued for closing.
    assert!(f.shared.ghosts().poll_closed().is_some());
}

#[tokio::test]
async fn routing_changes_follow_the_evaluation_order() {
    let mut f = Fixture::start(3).await;
    let id = f.session(1, 101, 1001, &[1002]);
    let path = format!("/api/radio/sessions/{id}/routing");
    // Row 1: the body does not bind.
    for bad in [
        r#"{"tx_group_id":1002}"#,
        r#"{"tx_group_id":1002,"rx_group_ids":null}"#,
        r#"{"tx_group_id":0,"rx_group_ids":[]}"#,
        r#"{"tx_group_id":"1","rx_group_ids":[]}"#,
        "not json",
    ] {
        let (status, body) = f.call("PUT", &path, Some(1), bad).await;
        assert_eq!(
            (status, body),
            (400, json!({"code": 400, "message": "无效的会话路由"})),
            "{bad}"
        );
    }
    // Row 2: unknown, or another user's.
    for (who, p) in [(1, "/api/radio/sessions/nope/routing"), (2, path.as_str())] {
        let (status, body) = f
            .call(
                "PUT",
                p,
                Some(who),
                r#"{"tx_group_id":1,"rx_group_ids":[]}"#,
            )
            .await;
        assert_eq!(status, 404);
        assert_eq!(body["error"], "session_not_found");
    }
    // Row 3.
    let (status, body) = f
        .call(
            "PUT",
            &path,
            Some(1),
            r#"{"tx_group_id":-1,"rx_group_ids":[]}"#,
        )
        .await;
    assert_eq!(
        (status, body["error"].as_str()),
        (400, Some("invalid_routing"))
    );
    let (status, body) = f
        .call(
            "PUT",
            &path,
            Some(1),
            r#"{"tx_group_id":1,"rx_group_ids":[2,3,4,2]}"#,
        )
        .await;
    assert_eq!(status, 422);
    assert_eq!(
        body,
        json!({"code": 422, "error": "subscription_limit",
               "message": "ghost subscription limit reached: requested=4 limit=3"})
    );
    assert_eq!(f.authority.calls.load(Relaxed), 0);
    // A valid change: saved by the account store and applied live.
    let (status, body) = f
        .call(
            "PUT",
            &path,
            Some(1),
            r#"{"tx_group_id":1003,"rx_group_ids":[1004],"x":1}"#,
        )
        .await;
    assert_eq!(status, 200, "{body}");
    assert_eq!(body["message"], "会话路由已更新");
    assert_eq!(body["data"]["session_id"], id.as_str());
    assert_eq!(body["data"]["rx_group_ids"], json!([1003, 1004]));
    assert_eq!(f.shared.ghosts().group_counts(1002), (0, 0));
    assert_eq!(f.shared.ghosts().group_counts(1004), (1, 0));
    // Row 4: after a voice frame, TX may not change, RX may.
    f.shared.ghosts().mark_voice(&id, Instant::now());
    let (status, body) = f
        .call(
            "PUT",
            &path,
            Some(1),
            r#"{"tx_group_id":1005,"rx_group_ids":[]}"#,
        )
        .await;
    assert_eq!(status, 409);
    assert_eq!(
        body,
        json!({"code": 409, "error": "ptt_active", "message": "ghost session PTT is active"})
    );
    let (status, _) = f
        .call(
            "PUT",
            &path,
            Some(1),
            r#"{"tx_group_id":1003,"rx_group_ids":[]}"#,
        )
        .await;
    assert_eq!(status, 200);
    // Rows 5–7 come from the account store; the live routing stays.
    for (reject, want, error) in [
        (RoutingReject::GroupNotFound, 404, "group_not_found"),
        (RoutingReject::GroupForbidden, 403, "group_forbidden"),
        (RoutingReject::UpdateFailed, 500, "routing_update_failed"),
    ] {
        *f.authority.next.lock().unwrap() = Some(reject);
        let (status, body) = f
            .call(
                "PUT",
                &path,
                Some(1),
                r#"{"tx_group_id":1003,"rx_group_ids":[7]}"#,
            )
            .await;
        assert_eq!((status, body["error"].as_str()), (want, Some(error)));
    }
    assert_eq!(
        f.shared.ghosts().get(&id).unwrap().routing,
        Routing::new(1003, vec![])
    );
    assert_eq!(f.authority.saved.lock().unwrap().len(), 2);
}

#[tokio::test]
async fn config_and_status_look_at_web_sessions_only() {
    let mut f = Fixture::start(16).await;
    f.session(1, 101, 5, &[]);
    let (status, body) = f.call("GET", "/api/radio/config", Some(1), "").await;
    assert_eq!(status, 200);
    assert_eq!(
        body,
        json!({"code": 200, "data": {"ssid": 105, "default_group": 999, "enabled": true},
               "connected": false})
    );
    let (_, body) = f.call("GET", "/api/radio/status", Some(1), "").await;
    assert_eq!(body["data"]["connected"], false);
    assert_eq!(body["data"]["group_id"], 0);
    let a = f.session(1, 105, 1001, &[]);
    let (_, body) = f.call("GET", "/api/radio/config", Some(1), "").await;
    assert_eq!(body["data"]["default_group"], 1001);
    assert_eq!(body["connected"], true);
    let (_, body) = f.call("GET", "/api/radio/status", Some(1), "").await;
    assert_eq!(body["data"]["session_id"], a.as_str());
    assert_eq!(body["data"]["online_since"], "2026-08-05 12:00:00");
    assert_eq!(body["data"]["ssid"], 105);
    let b = f.session(1, 105, 1002, &[]);
    let (status, body) = f.call("GET", "/api/radio/status", Some(1), "").await;
    assert_eq!(
        (status, body["error"].as_str()),
        (409, Some("ambiguous_session"))
    );
    let (status, body) = f
        .call(
            "GET",
            &format!("/api/radio/status?session_id={b}"),
            Some(1),
            "",
        )
        .await;
    assert_eq!(
        (status, body["data"]["group_id"].as_i64()),
        (200, Some(1002))
    );
    let (status, body) = f
        .call("GET", "/api/radio/status?session_id=other", Some(1), "")
        .await;
    assert_eq!(
        (status, body["error"].as_str()),
        (404, Some("session_not_found"))
    );
}

#[tokio::test]
async fn a_web_session_is_told_of_its_new_routing_and_closed_on_delete() {
    let mut f = Fixture::start(16).await;
    let id = f.session(1, DEV_MODEL_WEB, 1001, &[]);
    let conn = u64::from(f.port);
    let (queue, mut outbound) = tokio::sync::mpsc::channel(8);
    let (close, mut closed) = tokio::sync::oneshot::channel();
    f.hub.insert(
        conn,
        queue,
        close,
        crate::runtime::websocket_hub::LastFrame::default(),
        std::time::Instant::now(),
    );
    let (status, _) = f
        .call(
            "PUT",
            &format!("/api/radio/sessions/{id}/routing"),
            Some(1),
            r#"{"tx_group_id":1002,"rx_group_ids":[1001,1003]}"#,
        )
        .await;
    assert_eq!(status, 200);
    let Some(Outbound::Text(event)) = outbound.recv().await else {
        panic!("no routing_updated");
    };
    let event: Value = serde_json::from_str(&event).unwrap();
    assert_eq!(
        event,
        json!({"type": "routing_updated", "data": {
            "session_id": id, "tx_group_id": 1002, "rx_group_ids": [1001, 1002, 1003]}})
    );
    assert!(closed.try_recv().is_err());
    let (status, _) = f
        .call("DELETE", &format!("/api/radio/sessions/{id}"), Some(1), "")
        .await;
    assert_eq!(status, 200);
    assert_eq!(
        closed.try_recv(),
        Ok(crate::runtime::websocket_hub::Closing::Silently)
    );
}
