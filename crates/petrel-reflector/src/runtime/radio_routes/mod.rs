//! The radio session routes of the HTTP port (`specs/draarl-apps.md`
//! §3.1–§3.5): `GET /api/radio/config`, `GET /api/radio/status`,
//! `GET /api/radio/sessions`, `PUT /api/radio/sessions/{id}/routing` and
//! `DELETE /api/radio/sessions/{id}`.
//!
//! Every route needs the caller as an [`AuthenticatedUser`] extension,
//! which the account side's Bearer middleware inserts (see
//! `authenticated_user.rs`); without it the answer is 401 `未提供认证令牌`.
//! A caller sees and changes only its own sessions, over every transport.
//!
//! A routing change is checked in the order of §3.4: the body (400), the
//! session (404 `session_not_found`), the groups' ids and count (400
//! `invalid_routing`, 422 `subscription_limit`), the PTT window (409
//! `ptt_active`: the TX changes less than the floor hold after the
//! session's last accepted voice frame), then the account store's group
//! checks and save ([`AppAuthority::change_routing`]: 404 / 403 / 500). The
//! saved routing is then applied to the live session; if the session ended
//! meanwhile, the old routing is saved back and the answer is 500. Changes
//! made here invalidate every cached receiver snapshot (they are rebuilt
//! lazily): the routes have no directory to map groups to domains, and a
//! routing change is a human action, not a per-frame one.

use std::sync::Arc;
use std::time::{Duration, Instant};

use axum::body::Bytes;
use axum::extract::{Path, Query, State};
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use axum::routing::{delete, get, put};
use axum::{Extension, Json, Router};
use serde::Deserialize;
use serde_json::{json, Value};

use super::app_authority::AppAuthority;
use super::authenticated_user::AuthenticatedUser;
use super::shared_tables::SharedTables;
use super::websocket::routing_updated;
use super::websocket_hub::{Outbound, WebSocketHub};
use crate::core::{GhostSession, RoutingError};
use crate::model::{
    legacy_datetime, rfc3339_utc, AppUser, Endpoint, Routing, RoutingChange, RoutingReject,
    DEV_MODEL_WEB, FALLBACK_GROUP_ID,
};

/// What the radio routes need from the server.
#[derive(Clone)]
pub(crate) struct RadioState {
    /// The tables holding the app-session registry.
    pub(crate) shared: Arc<SharedTables>,
    /// The account store; without one, routing changes fail with 500.
    pub(crate) authority: Option<Arc<dyn AppAuthority>>,
    /// The PTT window of §3.4 row 4 (the floor hold, 900 ms by default).
    pub(crate) ptt_hold: Duration,
    /// The WebSocket connections: `routing_updated` after a change, and
    /// closing on a delete.
    pub(crate) hub: Arc<WebSocketHub>,
}

impl std::fmt::Debug for RadioState {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RadioState")
            .field("authority", &self.authority.is_some())
            .finish_non_exhaustive()
    }
}

/// The radio routes over `radio`, to merge into the server's router.
pub(crate) fn routes<S: Clone + Send + Sync + 'static>(radio: RadioState) -> Router<S> {
    Router::new()
        .route("/api/radio/config", get(config))
        .route("/api/radio/status", get(status))
        .route("/api/radio/sessions", get(sessions))
        .route("/api/radio/sessions/{id}/routing", put(routing))
        .route("/api/radio/sessions/{id}", delete(disconnect))
        .with_state(radio)
}

/// Whether `path` is one of these routes' (they authenticate the caller
/// themselves, not with the admin token).
pub(crate) fn is_radio_path(path: &str) -> bool {
    path.starts_with("/api/radio/")
}

type Caller = Option<Extension<AuthenticatedUser>>;

fn unauthenticated() -> Response {
    (
        StatusCode::UNAUTHORIZED,
        Json(json!({"code": 401, "message": "未提供认证令牌"})),
    )
        .into_response()
}

/// `{"code":s,"error":error,"message":message}` with status `s`.
fn error(status: StatusCode, error: &str, message: &str) -> Response {
    let body = json!({"code": status.as_u16(), "error": error, "message": message});
    (status, Json(body)).into_response()
}

/// A session as `GET /api/radio/sessions` lists it (§3.3): never the tag
/// or the endpoint.
pub(crate) fn session_json(s: &GhostSession) -> Value {
    json!({
        "session_id": s.session_id,
        "client_instance_id": s.client_instance_id,
        "dev_model": s.dev_model,
        "ssid": s.ssid,
        "transport": s.transport.transport_name(),
        "protocol_version": 1,
        "capabilities": s.capabilities,
        "online_since": rfc3339_utc(s.created_unix_ms),
        "last_activity": rfc3339_utc(s.unix_ms_at(s.last_seen)),
        "tx_group_id": s.routing.tx_group_id,
        "rx_group_ids": s.routing.rx_group_ids,
        "disable_send": false,
        "disable_recv": false,
    })
}

fn web_sessions(st: &RadioState, user: &AppUser) -> Vec<GhostSession> {
    let mut v = st.shared.ghosts().sessions_of(user.user_id);
    v.retain(|s| s.dev_model == DEV_MODEL_WEB);
    v
}

/// §3.1. `default_group` is the TX of the caller's only web session, else
/// the fallback group (the stored last web group is the account side's).
async fn config(State(st): State<RadioState>, caller: Caller) -> Response {
    let Some(Extension(AuthenticatedUser(user))) = caller else {
        return unauthenticated();
    };
    let web = web_sessions(&st, &user);
    let default_group = match web.as_slice() {
        [only] => only.routing.tx_group_id,
        _ => FALLBACK_GROUP_ID,
    };
    Json(json!({
        "code": 200,
        "data": {"ssid": DEV_MODEL_WEB, "default_group": default_group, "enabled": true},
        "connected": !web.is_empty(),
    }))
    .into_response()
}

#[derive(Debug, Deserialize)]
struct StatusQuery {
    session_id: Option<String>,
}

/// §3.2: the legacy view of the caller's web sessions.
async fn status(
    State(st): State<RadioState>,
    caller: Caller,
    Query(q): Query<StatusQuery>,
) -> Response {
    let Some(Extension(AuthenticatedUser(user))) = caller else {
        return unauthenticated();
    };
    let web = web_sessions(&st, &user);
    let chosen = match (&q.session_id, web.as_slice()) {
        (Some(id), _) => match web.iter().find(|s| &s.session_id == id) {
            Some(s) => s,
            None => {
                return error(
                    StatusCode::NOT_FOUND,
                    "session_not_found",
                    "ghost session not found",
                )
            }
        },
        (None, []) => {
            return Json(json!({"code": 200, "data": {
                "connected": false, "group_id": 0, "callsign": "", "ssid": 0,
                "is_speaking": false, "voice_sending": false,
            }}))
            .into_response()
        }
        (None, [only]) => only,
        (None, _) => {
            return error(
                StatusCode::CONFLICT,
                "ambiguous_session",
                "more than one web session: pass session_id",
            )
        }
    };
    Json(json!({"code": 200, "data": {
        "connected": true,
        "session_id": chosen.session_id,
        "group_id": chosen.routing.tx_group_id,
        "online_since": legacy_datetime(chosen.created_unix_ms),
        "callsign": chosen.user.callsign,
        "ssid": DEV_MODEL_WEB,
        "is_speaking": false,
        "voice_sending": false,
    }}))
    .into_response()
}

/// §3.3: every session of the caller, by creation.
async fn sessions(State(st): State<RadioState>, caller: Caller) -> Response {
    let Some(Extension(AuthenticatedUser(user))) = caller else {
        return unauthenticated();
    };
    let list: Vec<Value> = st
        .shared
        .ghosts()
        .sessions_of(user.user_id)
        .iter()
        .map(session_json)
        .collect();
    Json(json!({"code": 200, "message": "成功", "data": list})).into_response()
}

/// The body of `PUT …/routing` (§3.4): both keys required, unknown keys
/// ignored. A missing or null `rx_group_ids` fails to bind.
#[derive(Debug, Deserialize)]
pub struct RoutingBody {
    /// Required, non-zero.
    pub tx_group_id: i64,
    /// Required, not null; `[]` means `[tx]`.
    pub rx_group_ids: Option<Vec<i64>>,
}

impl RoutingBody {
    /// Binds a body as §3.4 row 1 does: `None` for anything that does not.
    pub fn bind(body: &[u8]) -> Option<(i64, Vec<i64>)> {
        let b: RoutingBody = serde_json::from_slice(body).ok()?;
        match (b.tx_group_id, b.rx_group_ids) {
            (0, _) | (_, None) => None,
            (tx, Some(rx)) => Some((tx, rx)),
        }
    }
}

/// §3.4.
async fn routing(
    State(st): State<RadioState>,
    caller: Caller,
    Path(id): Path<String>,
    body: Bytes,
) -> Response {
    let Some(Extension(AuthenticatedUser(user))) = caller else {
        return unauthenticated();
    };
    let Some((tx, rx)) = RoutingBody::bind(&body) else {
        return (
            StatusCode::BAD_REQUEST,
            Json(json!({"code": 400, "message": "无效的会话路由"})),
        )
            .into_response();
    };
    let radio = &st;
    let checked = {
        let ghosts = radio.shared.ghosts();
        ghosts
            .check_routing(&id, user.user_id, tx, &rx, Instant::now(), radio.ptt_hold)
            .map(|routing| {
                let s = ghosts
                    .get(&id)
                    .map(|s| (s.dev_model, s.client_instance_id.clone(), s.routing.clone()));
                (routing, s)
            })
    };
    let (requested, (dev_model, client_instance_id, old)) = match checked {
        Ok((routing, Some(s))) => (routing, s),
        Ok((_, None)) | Err(RoutingError::NotFound) => {
            return error(
                StatusCode::NOT_FOUND,
                "session_not_found",
                "ghost session not found",
            )
        }
        Err(RoutingError::InvalidTx) => {
            return error(
                StatusCode::BAD_REQUEST,
                "invalid_routing",
                "invalid ghost routing: transmit group is required",
            )
        }
        Err(RoutingError::InvalidRx) => {
            return error(
                StatusCode::BAD_REQUEST,
                "invalid_routing",
                "invalid ghost routing: receive group must be positive",
            )
        }
        Err(RoutingError::SubscriptionLimit { requested, limit }) => {
            return error(
                StatusCode::UNPROCESSABLE_ENTITY,
                "subscription_limit",
                &format!("ghost subscription limit reached: requested={requested} limit={limit}"),
            )
        }
        Err(RoutingError::PttActive) => {
            return error(
                StatusCode::CONFLICT,
                "ptt_active",
                "ghost session PTT is active",
            )
        }
    };
    let Some(authority) = radio.authority.as_ref() else {
        return update_failed();
    };
    let change = |requested: Routing| RoutingChange {
        user: user.clone(),
        dev_model,
        client_instance_id: client_instance_id.clone(),
        requested,
    };
    let saved = match authority.change_routing(change(requested)).await {
        Ok(r) => r,
        Err(RoutingReject::GroupNotFound) => {
            return error(
                StatusCode::NOT_FOUND,
                "group_not_found",
                "one or more groups do not exist",
            )
        }
        Err(RoutingReject::GroupForbidden) => {
            return error(
                StatusCode::FORBIDDEN,
                "group_forbidden",
                "one or more groups are not accessible",
            )
        }
        Err(RoutingReject::UpdateFailed) => return update_failed(),
    };
    let applied = {
        let mut ghosts = radio.shared.ghosts();
        ghosts.set_routing(&id, saved).and_then(|_| {
            ghosts
                .get(&id)
                .map(|s| (session_json(s), s.transport, s.routing.clone()))
        })
    };
    match applied {
        Some((session, transport, routing)) => {
            radio.shared.invalidate_every_domain();
            if let Endpoint::WebSocket(conn) = transport {
                radio
                    .hub
                    .send(conn, Outbound::Text(routing_updated(&id, &routing)));
            }
            Json(json!({"code": 200, "message": "会话路由已更新", "data": session})).into_response()
        }
        None => {
            // The session ended meanwhile: keep the old preference.
            let _ = authority.change_routing(change(old)).await;
            update_failed()
        }
    }
}

fn update_failed() -> Response {
    error(
        StatusCode::INTERNAL_SERVER_ERROR,
        "routing_update_failed",
        "更新会话路由失败",
    )
}

/// §3.5: ends one of the caller's sessions (a UDP client is not told; a
/// WebSocket connection is closed).
async fn disconnect(
    State(st): State<RadioState>,
    caller: Caller,
    Path(id): Path<String>,
) -> Response {
    let Some(Extension(AuthenticatedUser(user))) = caller else {
        return unauthenticated();
    };
    let removed = {
        let mut ghosts = st.shared.ghosts();
        let owned = ghosts
            .get(&id)
            .is_some_and(|s| s.user.user_id == user.user_id);
        if owned {
            ghosts.remove(&id)
        } else {
            None
        }
    };
    match removed {
        Some(s) => {
            st.shared.invalidate_every_domain();
            if let Endpoint::WebSocket(conn) = s.transport {
                st.hub.close(conn);
            }
            Json(json!({"code": 200, "message": "会话已断开"})).into_response()
        }
        None => error(StatusCode::NOT_FOUND, "session_not_found", "会话不存在"),
    }
}

#[cfg(test)]
mod tests;
