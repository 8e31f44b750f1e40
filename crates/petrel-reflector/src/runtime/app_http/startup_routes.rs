//! The start-up routes the apps call after login that need no live
//! session registry (`specs/draarl-apps.md` §1.5, §3.6–§3.8): `/api/me`,
//! `/api/groups`, `/api/radio/groups/stats`, `/api/groups/:id/messages`,
//! `/api/access-points` and `/api/config/public`.
//!
//! What is modelled: group lists and counts follow the group rule (§3.4);
//! `online_count` / `online_dev_number` add up every [`GroupPresence`]
//! source and `total_count` / `total_dev_number` count the physical devices
//! placed in the group. The message history holds the text messages sent in
//! the group (the store records each in the sender's group, not in every
//! group of its domain); voice is not listed, so `message_type=voice`
//! answers an empty page.
//!
//! [`GroupPresence`]: super::GroupPresence

use std::collections::HashMap;

use axum::extract::{Path, Query, State};
use axum::http::{header, HeaderMap, HeaderValue, StatusCode};
use axum::response::Response;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use base64::Engine;
use serde::Deserialize;
use serde_json::{json, Value};

use super::user_json::{me_user, rfc3339_nano};
use super::{envelope, error_envelope, AppApi};
use crate::model::{DEV_MODEL_WEB, FALLBACK_GROUP_ID};
use crate::runtime::app_accounts::unix_s;
use crate::runtime::store::AppGroup;

const INTERNAL: &str = "服务器内部错误";
const BAD_REQUEST: &str = "请求参数错误";
/// Largest `page_size` of `/api/groups`.
const MAX_PAGE_SIZE: u32 = 100;
/// Groups listed by `/api/radio/groups/stats` at most.
const MAX_STATS_GROUPS: u32 = 1000;
/// Largest and default `limit` of the message history (reference
/// `MessageAPI.MaxPageSize`, `DefaultPageSize`).
const MAX_MESSAGES: u32 = 100;
const DEFAULT_MESSAGES: u32 = 50;
/// `cache_max_age` of the access-point list, s.
const ACCESS_POINTS_MAX_AGE: u32 = 5;

fn internal() -> Response {
    envelope(StatusCode::INTERNAL_SERVER_ERROR, INTERNAL, None)
}

/// `GET /api/me` (§1.5): the login user object with `roles` as a string,
/// plus `email`, `email_verified` and `review_note`.
pub(super) async fn me(State(api): State<AppApi>, headers: HeaderMap) -> Response {
    let user = match api.bearer(&headers).await {
        Ok((u, _)) => u,
        Err(r) => return r,
    };
    let store = api.inner.accounts.store();
    let Ok(last) = store.app_last_group(user.id, DEV_MODEL_WEB).await else {
        return internal();
    };
    let data = me_user(&user, last.unwrap_or(FALLBACK_GROUP_ID));
    envelope(StatusCode::OK, "成功", Some(data))
}

/// Query of `/api/groups`.
#[derive(Deserialize)]
pub(super) struct PageQuery {
    page: Option<u32>,
    page_size: Option<u32>,
}

/// `GET /api/groups?page=N&page_size=M` (§1.5): the groups the caller may
/// use, by id, `page_size` 1–100 (default 20).
pub(super) async fn groups(
    State(api): State<AppApi>,
    headers: HeaderMap,
    query: Result<Query<PageQuery>, axum::extract::rejection::QueryRejection>,
) -> Response {
    let user = match api.approved(&headers).await {
        Ok(u) => u,
        Err(r) => return r,
    };
    let Ok(Query(q)) = query else {
        return envelope(StatusCode::BAD_REQUEST, BAD_REQUEST, None);
    };
    let page = q.page.unwrap_or(1).max(1);
    let page_size = q.page_size.unwrap_or(20).clamp(1, MAX_PAGE_SIZE);
    let offset = u64::from(page - 1) * u64::from(page_size);
    let store = api.inner.accounts.store();
    let (Ok((groups, total)), Ok(totals)) = (
        store
            .usable_groups(user.id, user.is_admin(), offset, page_size)
            .await,
        store.group_device_totals().await,
    ) else {
        return internal();
    };
    let online = api.online_per_group();
    let items: Vec<Value> = groups
        .iter()
        .map(|g| group_item(g, &online, &totals))
        .collect();
    envelope(
        StatusCode::OK,
        "成功",
        Some(json!({"items": items, "total": total, "page": page, "page_size": page_size})),
    )
}

fn group_item(g: &AppGroup, online: &HashMap<i64, u64>, totals: &HashMap<i64, i64>) -> Value {
    json!({
        "id": g.id,
        "name": g.name,
        "type": g.group_type,
        "ower_id": g.owner_id.unwrap_or(0),
        "ower_callsign": g.owner_callsign,
        "master_server": "",
        "slave_server": "",
        "status": g.status,
        "note": g.note,
        "is_joined": g.is_joined,
        "is_owner": g.is_owner,
        "online_count": online.get(&g.id).copied().unwrap_or(0),
        "total_count": totals.get(&g.id).copied().unwrap_or(0),
        "create_time": "",
        "update_time": "",
    })
}

/// `GET /api/radio/groups/stats` (§1.5): per usable group, online and total
/// devices.
pub(super) async fn group_stats(State(api): State<AppApi>, headers: HeaderMap) -> Response {
    let user = match api.approved(&headers).await {
        Ok(u) => u,
        Err(r) => return r,
    };
    let store = api.inner.accounts.store();
    let (Ok((groups, _)), Ok(totals)) = (
        store
            .usable_groups(user.id, user.is_admin(), 0, MAX_STATS_GROUPS)
            .await,
        store.group_device_totals().await,
    ) else {
        return internal();
    };
    let online = api.online_per_group();
    let data: Vec<Value> = groups
        .iter()
        .map(|g| {
            json!({
                "id": g.id,
                "name": g.name,
                "type": g.group_type,
                "online_dev_number": online.get(&g.id).copied().unwrap_or(0),
                "total_dev_number": totals.get(&g.id).copied().unwrap_or(0),
            })
        })
        .collect();
    envelope(StatusCode::OK, "成功", Some(Value::Array(data)))
}

/// Query of the message history (§3.7).
#[derive(Deserialize)]
pub(super) struct MessagesQuery {
    limit: Option<String>,
    cursor: Option<String>,
    message_type: Option<String>,
}

/// The decoded cursor: base64url (no padding) of
/// `{"start_time":"<RFC3339Nano UTC>","id":<n>}`.
#[derive(Deserialize)]
struct Cursor {
    start_time: String,
    id: i64,
}

/// (Unix ms, id) of a cursor, or `None` if it is not one.
pub(super) fn decode_cursor(s: &str) -> Option<(i64, i64)> {
    let bytes = URL_SAFE_NO_PAD.decode(s).ok()?;
    let c: Cursor = serde_json::from_slice(&bytes).ok()?;
    if c.id <= 0 {
        return None;
    }
    let t = humantime::parse_rfc3339(&c.start_time).ok()?;
    let ms = t.duration_since(std::time::UNIX_EPOCH).ok()?.as_millis();
    Some((i64::try_from(ms).ok()?, c.id))
}

/// The cursor after a message sent at `unix_ms` with `id`.
pub(super) fn encode_cursor(unix_ms: i64, id: i64) -> String {
    let json = json!({"start_time": rfc3339_nano(unix_ms), "id": id});
    URL_SAFE_NO_PAD.encode(json.to_string())
}

/// `GET /api/groups/:id/messages` (§3.7).
pub(super) async fn group_messages(
    State(api): State<AppApi>,
    headers: HeaderMap,
    Path(id): Path<String>,
    query: Result<Query<MessagesQuery>, axum::extract::rejection::QueryRejection>,
) -> Response {
    let user = match api.approved(&headers).await {
        Ok(u) => u,
        Err(r) => return r,
    };
    let Some(group_id) = id.parse::<i64>().ok().filter(|g| *g > 0) else {
        return envelope(StatusCode::BAD_REQUEST, "无效的群组ID", None);
    };
    let store = api.inner.accounts.store();
    let Ok(groups) = store.app_groups(user.id, &[group_id]).await else {
        return internal();
    };
    let Some(group) = groups.get(&group_id) else {
        return envelope(StatusCode::NOT_FOUND, "群组不存在", None);
    };
    if !group.facts().usable_by(user.is_admin()) {
        return envelope(StatusCode::FORBIDDEN, "无权访问该群组", None);
    }
    let Ok(Query(q)) = query else {
        return envelope(StatusCode::BAD_REQUEST, BAD_REQUEST, None);
    };
    let kind = q
        .message_type
        .unwrap_or_else(|| "all".into())
        .to_ascii_lowercase();
    if !matches!(kind.as_str(), "all" | "voice" | "text") {
        return envelope(StatusCode::BAD_REQUEST, "无效的消息类型", None);
    }
    let limit = match q.limit.as_deref().map(str::parse::<u32>) {
        None => DEFAULT_MESSAGES,
        Some(Ok(n)) if (1..=MAX_MESSAGES).contains(&n) => n,
        Some(_) => {
            return error_envelope(
                StatusCode::BAD_REQUEST,
                "invalid_message_limit",
                &format!("limit必须在1到{MAX_MESSAGES}之间"),
            );
        }
    };
    let before = match q.cursor.as_deref().filter(|c| !c.is_empty()) {
        None => None,
        Some(c) => match decode_cursor(c) {
            Some(pos) => Some(pos),
            None => return envelope(StatusCode::BAD_REQUEST, "无效的消息游标", None),
        },
    };
    let rows = if kind == "voice" {
        Vec::new()
    } else {
        match store.group_messages(group_id, before, limit + 1).await {
            Ok(rows) => rows,
            Err(_) => return internal(),
        }
    };
    let has_more = rows.len() > limit as usize;
    let page = &rows[..rows.len().min(limit as usize)];
    let next_cursor = match page.last() {
        Some(m) if has_more => encode_cursor(m.sent_at_ms, m.id),
        _ => String::new(),
    };
    let messages: Vec<Value> = page
        .iter()
        .map(|m| {
            json!({
                "id": m.id,
                "message_type": "text",
                "source_group_id": group_id,
                "source_group_name": group.name,
                "requested_group_id": group_id,
                "sender": {
                    "user_id": m.user_id,
                    "username": m.username,
                    "callsign": m.callsign,
                    "nickname": m.nickname,
                    "ssid": m.ssid,
                    "dev_model": 0,
                    "is_ghost": false,
                },
                "sent_at": rfc3339_nano(m.sent_at_ms),
                "duration_ms": 0,
                "text_content": String::from_utf8_lossy(&m.text),
                "status": 2,
                "is_auto_broadcast": false,
            })
        })
        .collect();
    envelope(
        StatusCode::OK,
        "成功",
        Some(json!({
            "messages": messages,
            "next_cursor": next_cursor,
            "has_more": has_more,
            "server_time": rfc3339_nano(unix_s().saturating_mul(1000)),
        })),
    )
}

/// `GET /api/access-points` (§3.8): Bearer with any-case scheme and an
/// access token; the one access point of `[apps]`.
/// The UDP host to publish: `configured`, or when it is empty the host part
/// of the request's `Host` header (the name the client reached this API
/// at), if that is a well-formed host name or IP literal.
fn published_host(configured: &str, headers: &HeaderMap) -> Option<String> {
    if !configured.is_empty() {
        return Some(configured.to_owned());
    }
    let host = headers.get(header::HOST)?.to_str().ok()?;
    let name = match host.strip_prefix('[') {
        // `[v6]:port` or `[v6]`.
        Some(rest) => rest.split_once(']')?.0,
        None => host.rsplit_once(':').map_or(host, |(h, _)| h),
    };
    crate::model::is_host(name).then(|| name.to_owned())
}

pub(super) async fn access_points(State(api): State<AppApi>, headers: HeaderMap) -> Response {
    const BAD_TOKEN: &str = "发现凭证无效或已过期";
    let token = headers
        .get(header::AUTHORIZATION)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.split_once(' '))
        .filter(|(scheme, t)| scheme.eq_ignore_ascii_case("bearer") && !t.is_empty())
        .map(|(_, t)| t.trim());
    let Some(token) = token else {
        return envelope(StatusCode::UNAUTHORIZED, BAD_TOKEN, None);
    };
    let accounts = &api.inner.accounts;
    let Ok(claims) = accounts.keys().verify(token, unix_s()) else {
        return envelope(StatusCode::UNAUTHORIZED, BAD_TOKEN, None);
    };
    let user = match accounts.store().web_user_by_name(&claims.username).await {
        Err(_) => return internal(),
        Ok(None) => return envelope(StatusCode::UNAUTHORIZED, BAD_TOKEN, None),
        Ok(Some(u)) => u,
    };
    if user.status != 1 || (user.approval_status != 1 && !user.is_admin()) {
        return envelope(StatusCode::FORBIDDEN, "当前账号不可使用设备接入服务", None);
    }
    let c = &api.inner.config;
    let Some(udp_host) = published_host(&c.public_host, &headers) else {
        // Android then falls back to `<API host>:60050` (§3.8); an empty
        // list would stop it from connecting at all.
        return envelope(
            StatusCode::SERVICE_UNAVAILABLE,
            "access_point_host_unknown",
            None,
        );
    };
    let now = rfc3339_nano(unix_s().saturating_mul(1000));
    let mut item = json!({
        "id": c.access_point_id,
        "display_name": c.display_name,
        "udp_host": udp_host,
        "udp_port": c.public_port,
        "priority": 100,
        "healthy_sample_at": now,
    });
    if !c.region.is_empty() {
        item["region"] = json!(c.region);
    }
    if !c.network.is_empty() {
        item["network"] = json!(c.network);
    }
    let mut resp = envelope(
        StatusCode::OK,
        "成功",
        Some(json!({"items": [item], "server_time": now, "cache_max_age": ACCESS_POINTS_MAX_AGE})),
    );
    let h = resp.headers_mut();
    h.insert(
        header::CACHE_CONTROL,
        HeaderValue::from_str(&format!("private, max-age={ACCESS_POINTS_MAX_AGE}"))
            .unwrap_or(HeaderValue::from_static("private")),
    );
    h.insert(header::VARY, HeaderValue::from_static("Authorization"));
    resp
}

/// `GET /api/config/public` (§1.5): public; registration is closed (accounts
/// come from the operator's CLI), so no e-mail verification is asked for.
pub(super) async fn public_config(State(api): State<AppApi>) -> Response {
    envelope(
        StatusCode::OK,
        "成功",
        Some(json!({
            "registration": {"enabled": false, "require_email_verification": false},
            "login_captcha": api.inner.login_captcha,
        })),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cursors_round_trip_and_bad_ones_are_refused() {
        let c = encode_cursor(1_785_931_200_123, 12345);
        assert_eq!(decode_cursor(&c), Some((1_785_931_200_123, 12345)));
        for bad in [
            "not-base64!".to_owned(),
            URL_SAFE_NO_PAD.encode("{}"),
            URL_SAFE_NO_PAD.encode(r#"{"start_time":"2026-08-05T12:00:00Z","id":0}"#),
            URL_SAFE_NO_PAD.encode(r#"{"start_time":"yesterday","id":3}"#),
        ] {
            assert_eq!(decode_cursor(&bad), None, "{bad}");
        }
    }

    fn host(h: &str) -> HeaderMap {
        let mut m = HeaderMap::new();
        m.insert(header::HOST, h.parse().unwrap());
        m
    }

    #[test]
    fn an_unset_public_host_is_the_host_the_client_reached() {
        assert_eq!(
            published_host("radio.example.com", &host("10.0.0.1:9000")).as_deref(),
            Some("radio.example.com")
        );
        assert_eq!(
            published_host("", &host("radio.example.org:9000")).as_deref(),
            Some("radio.example.org")
        );
        assert_eq!(
            published_host("", &host("[::1]:9000")).as_deref(),
            Some("::1")
        );
        assert_eq!(
            published_host("", &host("127.0.0.1")).as_deref(),
            Some("127.0.0.1")
        );
        // Not a host name: nothing is published (503, Android falls back).
        assert_eq!(published_host("", &host("a b:1")), None);
        assert_eq!(published_host("", &HeaderMap::new()), None);
    }
}
