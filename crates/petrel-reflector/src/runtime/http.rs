//! HTTP operations endpoint (axum): `GET /healthz`, `GET /metrics`
//! (Prometheus text format 0.0.4), and — only when an admin token is
//! configured, with `Authorization: Bearer <token>` — a small admin API:
//! `GET /api/stats` (JSON), `POST /api/reload`,
//! `PUT /api/devices/{user}/{ssid}/group` `{"group_id": n}` and
//! `PUT /api/devices/{user}/{ssid}/comm-control`
//! `{"disable_send": b, "disable_recv": b}` (after the reference's routes,
//! draarl-v1 §3.7). Admin writes go to the store and trigger an immediate
//! directory reload.

use std::sync::Arc;

use axum::extract::{Path, State};
use axum::http::{header, HeaderMap, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post, put};
use axum::{Json, Router};
use serde::Deserialize;
use subtle::ConstantTimeEq;
use tokio::sync::Notify;

use super::stats::{ServerStats, StatsSource};
use super::store::{Store, StoreError};

#[derive(Clone)]
pub(crate) struct AppState {
    pub(crate) stats: StatsSource,
    pub(crate) store: Store,
    pub(crate) reload: Arc<Notify>,
    pub(crate) admin_token: Option<Arc<str>>,
}

impl std::fmt::Debug for AppState {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("AppState").finish_non_exhaustive()
    }
}

pub(crate) fn router(state: AppState) -> Router {
    Router::new()
        .route("/healthz", get(|| async { "ok\n" }))
        .route("/metrics", get(metrics))
        .route("/api/stats", get(stats_json))
        .route("/api/reload", post(reload))
        .route("/api/devices/{user}/{ssid}/group", put(device_group))
        .route("/api/devices/{user}/{ssid}/comm-control", put(comm_control))
        .with_state(state)
}

/// Renders counters in the Prometheus text format.
pub fn render_metrics(s: &ServerStats) -> String {
    let mut out = String::with_capacity(4096);
    let mut put = |name: String, kind: &str, v: u64| {
        out.push_str(&format!("# TYPE {name} {kind}\n{name} {v}\n"));
    };
    for (n, v) in s.ingress.counters() {
        put(format!("petrel_reflector_ingress_{n}_total"), "counter", v);
    }
    put(
        "petrel_reflector_ingress_workers".into(),
        "gauge",
        s.ingress_workers as u64,
    );
    for (n, v) in s.session.counters() {
        put(format!("petrel_reflector_session_{n}_total"), "counter", v);
    }
    for (n, v) in s.password_checks.counters() {
        put(
            format!("petrel_reflector_password_checks_{n}_total"),
            "counter",
            v,
        );
    }
    for (n, v) in s.recording.counters() {
        put(
            format!("petrel_reflector_recording_{n}_total"),
            "counter",
            v,
        );
    }
    for (n, v) in [
        ("requested", s.socket.recv_requested.unwrap_or_default()),
        ("recv_actual", s.socket.recv_actual),
        ("send_actual", s.socket.send_actual),
    ] {
        put(
            format!("petrel_reflector_socket_buffer_{n}_bytes"),
            "gauge",
            v as u64,
        );
    }
    for (n, v) in s.icmp.counters() {
        put(format!("petrel_reflector_icmp_{n}_total"), "counter", v);
    }
    for (n, v) in s.fanout.counters() {
        let gauge = matches!(n, "queue_high_water" | "max_dispatch_ns");
        let name = if gauge {
            format!("petrel_reflector_fanout_{n}")
        } else {
            format!("petrel_reflector_fanout_{n}_total")
        };
        put(name, if gauge { "gauge" } else { "counter" }, v);
    }
    put(
        "petrel_reflector_online_devices".into(),
        "gauge",
        s.online as u64,
    );
    put(
        "petrel_reflector_reloads_skipped_total".into(),
        "counter",
        s.reloads_skipped,
    );
    put(
        "petrel_reflector_store_errors_total".into(),
        "counter",
        s.store_errors,
    );
    put(
        "petrel_reflector_store_events_dropped_total".into(),
        "counter",
        s.store_events_dropped,
    );
    out
}

async fn metrics(State(st): State<AppState>) -> Response {
    (
        [(header::CONTENT_TYPE, "text/plain; version=0.0.4")],
        render_metrics(&st.stats.read()),
    )
        .into_response()
}

/// `Ok` when the request carries the configured admin token.
fn authorize(st: &AppState, headers: &HeaderMap) -> Result<(), StatusCode> {
    let Some(token) = &st.admin_token else {
        return Err(StatusCode::NOT_FOUND);
    };
    let given = headers
        .get(header::AUTHORIZATION)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.strip_prefix("Bearer "))
        .unwrap_or("");
    if bool::from(given.as_bytes().ct_eq(token.as_bytes())) {
        Ok(())
    } else {
        Err(StatusCode::UNAUTHORIZED)
    }
}

async fn stats_json(State(st): State<AppState>, headers: HeaderMap) -> Response {
    if let Err(code) = authorize(&st, &headers) {
        return code.into_response();
    }
    let s = st.stats.read();
    let map = |c: Vec<(&'static str, u64)>| {
        c.into_iter()
            .map(|(k, v)| (k.to_owned(), v.into()))
            .collect()
    };
    let body = serde_json::json!({
        "ingress": serde_json::Value::Object(map(s.ingress.counters())),
        "ingress_workers": s.ingress_workers,
        "session": serde_json::Value::Object(map(s.session.counters())),
        "recording": serde_json::Value::Object(map(s.recording.counters())),
        "socket_buffer_bytes": {
            "requested": s.socket.recv_requested.unwrap_or_default(),
            "recv_actual": s.socket.recv_actual,
            "send_actual": s.socket.send_actual,
        },
        "fanout": serde_json::Value::Object(map(s.fanout.counters())),
        "icmp": serde_json::Value::Object(map(s.icmp.counters())),
        "online": s.online,
        "reloads_skipped": s.reloads_skipped,
        "store_errors": s.store_errors,
        "store_events_dropped": s.store_events_dropped,
    });
    Json(body).into_response()
}

async fn reload(State(st): State<AppState>, headers: HeaderMap) -> Response {
    if let Err(code) = authorize(&st, &headers) {
        return code.into_response();
    }
    st.reload.notify_one();
    StatusCode::ACCEPTED.into_response()
}

fn store_error(e: &StoreError) -> Response {
    let code = match e {
        StoreError::NotFound(_) => StatusCode::NOT_FOUND,
        StoreError::Invalid(_) | StoreError::Password(_) => StatusCode::BAD_REQUEST,
        StoreError::Db(_) | StoreError::Open { .. } => StatusCode::INTERNAL_SERVER_ERROR,
    };
    (code, format!("{e}\n")).into_response()
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct GroupBody {
    group_id: i64,
}

async fn device_group(
    State(st): State<AppState>,
    headers: HeaderMap,
    Path((user, ssid)): Path<(String, u8)>,
    Json(body): Json<GroupBody>,
) -> Response {
    if let Err(code) = authorize(&st, &headers) {
        return code.into_response();
    }
    match st.store.set_device_group(&user, ssid, body.group_id).await {
        Ok(()) => {
            st.reload.notify_one();
            StatusCode::NO_CONTENT.into_response()
        }
        Err(e) => store_error(&e),
    }
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct CommControl {
    disable_send: bool,
    disable_recv: bool,
}

async fn comm_control(
    State(st): State<AppState>,
    headers: HeaderMap,
    Path((user, ssid)): Path<(String, u8)>,
    Json(body): Json<CommControl>,
) -> Response {
    if let Err(code) = authorize(&st, &headers) {
        return code.into_response();
    }
    match st
        .store
        .set_device_bans(&user, ssid, body.disable_send, body.disable_recv)
        .await
    {
        Ok(()) => {
            st.reload.notify_one();
            StatusCode::NO_CONTENT.into_response()
        }
        Err(e) => store_error(&e),
    }
}
