//! Captcha, login, refresh, logout and the `ws_token` cookie
//! (`specs/draarl-apps.md` §1.2–§1.4, §4.1).

use std::net::SocketAddr;
use std::sync::atomic::Ordering::Relaxed;
use std::sync::{Arc, OnceLock};
use std::time::Instant;

use axum::body::Bytes;
use axum::extract::{ConnectInfo, State};
use axum::http::{header, HeaderMap, StatusCode};
use axum::response::Response;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use base64::Engine;
use rand::RngCore;
use serde::Deserialize;
use serde_json::json;
use sha2::{Digest, Sha256};

use super::captcha::{self, CAPTCHA_TTL};
use super::cookies::{self, REFRESH_TOKEN_SECS};
use super::user_json::login_user;
use super::{envelope, lock, AppApi, Limit};
use crate::model::{verify_web_password, ACCESS_TOKEN_SECS, DEV_MODEL_WEB, FALLBACK_GROUP_ID};
use crate::runtime::app_accounts::unix_s;
use crate::runtime::store::{NewRefreshToken, RefreshTokenState, StoreError, WebUser};

/// Longest user agent stored with a refresh token, characters (§1.4).
const MAX_USER_AGENT_CHARS: usize = 512;
/// Bytes of a refresh token before encoding (§1.4: 32 → 43 characters).
const REFRESH_TOKEN_BYTES: usize = 32;

const BAD_REQUEST: &str = "请求参数错误";
const BAD_CAPTCHA: &str = "图片验证码错误或已过期";
const BAD_CREDENTIALS: &str = "用户名或密码错误";
const DISABLED: &str = "用户已被禁用";
const INTERNAL: &str = "服务器内部错误";

/// `GET /api/captcha` (§1.2).
pub(super) async fn captcha(
    State(api): State<AppApi>,
    ConnectInfo(peer): ConnectInfo<SocketAddr>,
) -> Response {
    if let Some(r) = api.refused_by_limit(Limit::Captcha, peer.ip()) {
        return r;
    }
    let Ok(Some(drawn)) = tokio::task::spawn_blocking(captcha::draw).await else {
        return envelope(StatusCode::INTERNAL_SERVER_ERROR, INTERNAL, None);
    };
    let id = captcha::new_id();
    let mut book = lock(&api.inner.captchas);
    let before = book.evicted();
    book.insert(id.clone(), drawn.answer, Instant::now());
    let evicted = book.evicted() - before;
    drop(book);
    let stats = api.stats();
    stats.captcha_evicted.fetch_add(evicted, Relaxed);
    stats.captcha_issued.fetch_add(1, Relaxed);
    envelope(
        StatusCode::OK,
        "成功",
        Some(json!({
            "captcha_id": id,
            "captcha_image": drawn.data_url,
            "expire": CAPTCHA_TTL.as_secs(),
        })),
    )
}

/// The login body (§1.3); unknown keys are ignored.
#[derive(Deserialize)]
struct LoginBody {
    #[serde(default)]
    username: String,
    #[serde(default)]
    password: String,
    #[serde(default)]
    captcha_id: String,
    #[serde(default)]
    captcha_code: String,
}

/// A bcrypt hash of a random password, checked when the account does not
/// exist so that an unknown name takes as long as a wrong password.
fn decoy_hash() -> &'static str {
    static DECOY: OnceLock<String> = OnceLock::new();
    DECOY.get_or_init(|| {
        let mut pw = [0u8; 16];
        rand::rngs::OsRng.fill_bytes(&mut pw);
        let pw: String = pw.iter().map(|b| format!("{b:02x}")).collect();
        crate::model::hash_web_password(&pw, crate::model::WEB_PASSWORD_COST).unwrap_or_default()
    })
}

/// `POST /api/auth/login` (§1.3).
pub(super) async fn login(
    State(api): State<AppApi>,
    ConnectInfo(peer): ConnectInfo<SocketAddr>,
    headers: HeaderMap,
    body: Bytes,
) -> Response {
    if let Some(r) = api.refused_by_limit(Limit::Login, peer.ip()) {
        return r;
    }
    let stats = api.stats();
    let Ok(b) = serde_json::from_slice::<LoginBody>(&body) else {
        stats.login_failed_bad_request.fetch_add(1, Relaxed);
        return envelope(StatusCode::BAD_REQUEST, BAD_REQUEST, None);
    };
    if b.username.is_empty() || b.password.is_empty() {
        stats.login_failed_bad_request.fetch_add(1, Relaxed);
        return envelope(StatusCode::BAD_REQUEST, BAD_REQUEST, None);
    }
    if api.inner.login_captcha {
        let solved = !b.captcha_id.is_empty()
            && !b.captcha_code.is_empty()
            && lock(&api.inner.captchas).verify(&b.captcha_id, &b.captcha_code, Instant::now());
        if !solved {
            stats.captcha_failed.fetch_add(1, Relaxed);
            return envelope(StatusCode::BAD_REQUEST, BAD_CAPTCHA, None);
        }
    }
    let store = api.inner.accounts.store();
    let user = match store.web_user_by_login(&b.username).await {
        Ok(u) => u,
        Err(_) => return store_failure(&api),
    };
    let hash = user.as_ref().and_then(|u| u.password_hash.clone());
    let password = b.password;
    let checks = Arc::clone(&api.inner.password_checks);
    let permit = match Arc::clone(&checks).try_acquire_owned() {
        Ok(p) => p,
        Err(_) => {
            stats.password_checks_queued.fetch_add(1, Relaxed);
            match checks.acquire_owned().await {
                Ok(p) => p,
                Err(_) => return store_failure(&api),
            }
        }
    };
    // The permit goes with the check, so a request that times out does
    // not free it before the hash is done.
    let verified = tokio::task::spawn_blocking(move || {
        let verified =
            verify_web_password(&password, hash.as_deref().unwrap_or_else(|| decoy_hash()));
        drop(permit);
        verified
    })
    .await
    .unwrap_or(false);
    let Some(user) = user else {
        stats.login_failed_unknown_user.fetch_add(1, Relaxed);
        return envelope(StatusCode::UNAUTHORIZED, BAD_CREDENTIALS, None);
    };
    if !verified || user.password_hash.is_none() {
        stats.login_failed_wrong_password.fetch_add(1, Relaxed);
        if store.record_web_login_failure(user.id).await.is_err() {
            return store_failure(&api);
        }
        return envelope(StatusCode::UNAUTHORIZED, BAD_CREDENTIALS, None);
    }
    if user.status != 1 {
        stats.login_failed_disabled.fetch_add(1, Relaxed);
        return envelope(StatusCode::FORBIDDEN, DISABLED, None);
    }
    let now = unix_s();
    let ip = peer.ip().to_string();
    if store
        .record_web_login(user.id, &ip, now.saturating_mul(1000))
        .await
        .is_err()
    {
        return store_failure(&api);
    }
    let (access, refresh) = match issue(&api, &user, None, &ip, &headers, now).await {
        Ok(Some(pair)) => pair,
        _ => return store_failure(&api),
    };
    let last_group = store
        .app_last_group(user.id, DEV_MODEL_WEB)
        .await
        .ok()
        .flatten()
        .unwrap_or(FALLBACK_GROUP_ID);
    // Read back for the last-login fields just written.
    let user = match store.web_user_by_id(user.id).await {
        Ok(Some(u)) => u,
        _ => return store_failure(&api),
    };
    stats.login_ok.fetch_add(1, Relaxed);
    let mut resp = envelope(
        StatusCode::OK,
        "登录成功",
        Some(json!({
            "token": access,
            "refresh_token": refresh,
            "expires_in": ACCESS_TOKEN_SECS,
            "refresh_expires_in": REFRESH_TOKEN_SECS,
            "user": login_user(&user, last_group),
        })),
    );
    let secure = cookies::secure(&headers);
    cookies::append(
        resp.headers_mut(),
        cookies::set_both(&access, &refresh, secure),
    );
    resp
}

fn store_failure(api: &AppApi) -> Response {
    api.stats().login_failed_store.fetch_add(1, Relaxed);
    envelope(StatusCode::INTERNAL_SERVER_ERROR, INTERNAL, None)
}

/// SHA-256 hex of the trimmed refresh token: the only form stored (§1.4).
fn refresh_hash(token: &str) -> String {
    Sha256::digest(token.trim().as_bytes())
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect()
}

/// Issues an access token and a new refresh token for `user` at `now`
/// (s); with `rotate`, the refresh token replaces that hash's row.
/// `Ok(None)` when the rotation lost to a concurrent one.
async fn issue(
    api: &AppApi,
    user: &WebUser,
    rotate: Option<&str>,
    ip: &str,
    headers: &HeaderMap,
    now: i64,
) -> Result<Option<(String, String)>, StoreError> {
    let mut raw = [0u8; REFRESH_TOKEN_BYTES];
    rand::rngs::OsRng.fill_bytes(&mut raw);
    let refresh = URL_SAFE_NO_PAD.encode(raw);
    let user_agent: String = headers
        .get(header::USER_AGENT)
        .and_then(|v| v.to_str().ok())
        .unwrap_or_default()
        .chars()
        .take(MAX_USER_AGENT_CHARS)
        .collect();
    let now_ms = now.saturating_mul(1000);
    let new = NewRefreshToken {
        hash: refresh_hash(&refresh),
        user_id: user.id,
        created_at_ms: now_ms,
        expires_at_ms: now_ms + REFRESH_TOKEN_SECS * 1000,
        ip: ip.to_owned(),
        user_agent,
    };
    let accounts = &api.inner.accounts;
    let cap = accounts.limits().refresh_tokens_per_user;
    let cleanup = match rotate {
        None => accounts.store().insert_refresh_token(&new, cap).await?,
        Some(old) => match accounts
            .store()
            .rotate_refresh_token(old, &new, cap)
            .await?
        {
            Some(c) => c,
            None => return Ok(None),
        },
    };
    let stats = api.stats();
    stats
        .refresh_tokens_pruned
        .fetch_add(cleanup.pruned, Relaxed);
    stats
        .refresh_tokens_evicted
        .fetch_add(cleanup.evicted, Relaxed);
    let access = accounts.keys().issue(&user.name, &user.roles, now);
    Ok(Some((access, refresh)))
}

/// A body carrying a refresh token (refresh, logout); unknown keys ignored.
#[derive(Deserialize)]
struct RefreshBody {
    #[serde(default)]
    refresh_token: String,
}

/// Where a refresh token came from (§1.4): the body only when there is no
/// cookie. `Err` for a non-empty body that does not parse.
fn refresh_token_of(headers: &HeaderMap, body: &[u8]) -> Result<(Option<String>, bool), ()> {
    if let Some(c) = cookies::read(headers, "refresh_token") {
        return Ok((Some(c.to_owned()), false));
    }
    if body.iter().all(u8::is_ascii_whitespace) {
        return Ok((None, false));
    }
    let b: RefreshBody = serde_json::from_slice(body).map_err(|_| ())?;
    let t = b.refresh_token.trim().to_owned();
    Ok(if t.is_empty() {
        (None, false)
    } else {
        (Some(t), true)
    })
}

/// A 401 refresh failure; clears both cookies (§1.4).
fn refresh_refused(api: &AppApi, headers: &HeaderMap, message: &str) -> Response {
    api.stats().refreshes_failed.fetch_add(1, Relaxed);
    let mut resp = envelope(StatusCode::UNAUTHORIZED, message, None);
    cookies::append(
        resp.headers_mut(),
        cookies::clear_all(cookies::secure(headers)),
    );
    resp
}

/// `POST /api/auth/refresh` (§1.4).
pub(super) async fn refresh(
    State(api): State<AppApi>,
    ConnectInfo(peer): ConnectInfo<SocketAddr>,
    headers: HeaderMap,
    body: Bytes,
) -> Response {
    let Ok((token, from_body)) = refresh_token_of(&headers, &body) else {
        return envelope(StatusCode::BAD_REQUEST, BAD_REQUEST, None);
    };
    let Some(token) = token else {
        return refresh_refused(&api, &headers, "refresh_token_required");
    };
    let store = api.inner.accounts.store();
    let now = unix_s();
    let now_ms = now.saturating_mul(1000);
    let hash = refresh_hash(&token);
    let user_id = match store.refresh_token_state(&hash, now_ms).await {
        Err(_) => return envelope(StatusCode::INTERNAL_SERVER_ERROR, INTERNAL, None),
        Ok(RefreshTokenState::Unknown) => {
            return refresh_refused(&api, &headers, "invalid_refresh_token")
        }
        Ok(RefreshTokenState::Revoked { user_id, rotated }) => {
            if rotated {
                api.stats().refresh_reuse_detected.fetch_add(1, Relaxed);
                if store
                    .revoke_user_refresh_tokens(user_id, now_ms)
                    .await
                    .is_err()
                {
                    return envelope(StatusCode::INTERNAL_SERVER_ERROR, INTERNAL, None);
                }
            }
            return refresh_refused(&api, &headers, "refresh_token_revoked");
        }
        Ok(RefreshTokenState::Expired { .. }) => {
            return refresh_refused(&api, &headers, "refresh_token_expired")
        }
        Ok(RefreshTokenState::Valid { user_id }) => user_id,
    };
    let user = match store.web_user_by_id(user_id).await {
        Err(_) => return envelope(StatusCode::INTERNAL_SERVER_ERROR, INTERNAL, None),
        Ok(u) => u.filter(|u| u.status == 1 && u.approval_status == 1),
    };
    let Some(user) = user else {
        if store
            .revoke_user_refresh_tokens(user_id, now_ms)
            .await
            .is_err()
        {
            return envelope(StatusCode::INTERNAL_SERVER_ERROR, INTERNAL, None);
        }
        return refresh_refused(&api, &headers, "user_invalid");
    };
    let ip = peer.ip().to_string();
    let (access, refresh) = match issue(&api, &user, Some(&hash), &ip, &headers, now).await {
        Err(_) => return envelope(StatusCode::INTERNAL_SERVER_ERROR, INTERNAL, None),
        Ok(Some(pair)) => pair,
        Ok(None) => {
            // Another request rotated this token first: a reuse.
            api.stats().refresh_reuse_detected.fetch_add(1, Relaxed);
            if store
                .revoke_user_refresh_tokens(user_id, now_ms)
                .await
                .is_err()
            {
                return envelope(StatusCode::INTERNAL_SERVER_ERROR, INTERNAL, None);
            }
            return refresh_refused(&api, &headers, "refresh_token_revoked");
        }
    };
    api.stats().refreshes_ok.fetch_add(1, Relaxed);
    let mut data = json!({ "token": access, "expires_in": ACCESS_TOKEN_SECS });
    if from_body {
        data["refresh_token"] = json!(refresh);
        data["refresh_expires_in"] = json!(REFRESH_TOKEN_SECS);
    }
    let mut resp = envelope(StatusCode::OK, "成功", Some(data));
    let secure = cookies::secure(&headers);
    cookies::append(
        resp.headers_mut(),
        cookies::set_both(&access, &refresh, secure),
    );
    resp
}

/// `POST /api/auth/logout` (§1.4): revokes the refresh token of the cookie
/// or body if any, clears the cookies, always 200.
pub(super) async fn logout(State(api): State<AppApi>, headers: HeaderMap, body: Bytes) -> Response {
    if let Ok((Some(token), _)) = refresh_token_of(&headers, &body) {
        let now_ms = unix_s().saturating_mul(1000);
        // Best effort: logout answers 200 whatever the store says.
        let _ = api
            .inner
            .accounts
            .store()
            .revoke_refresh_token(&refresh_hash(&token), now_ms)
            .await;
    }
    api.stats().logouts.fetch_add(1, Relaxed);
    let mut resp = envelope(StatusCode::OK, "登出成功", None);
    cookies::append(
        resp.headers_mut(),
        cookies::clear_all(cookies::secure(&headers)),
    );
    resp
}

/// `POST /api/auth/ws-token/sync` (§4.1): Bearer (approval not needed);
/// sets `ws_token` to the same bearer string.
pub(super) async fn ws_token_sync(State(api): State<AppApi>, headers: HeaderMap) -> Response {
    let token = match api.bearer(&headers).await {
        Ok((_, token)) => token,
        Err(r) => return r,
    };
    let mut resp = envelope(StatusCode::OK, "成功", None);
    cookies::append(
        resp.headers_mut(),
        vec![cookies::ws_token(&token, cookies::secure(&headers))],
    );
    resp
}

/// `POST /api/auth/ws-token/clear` (§4.1): public; expires both cookies.
pub(super) async fn ws_token_clear(headers: HeaderMap) -> Response {
    let mut resp = envelope(StatusCode::OK, "成功", None);
    cookies::append(
        resp.headers_mut(),
        cookies::clear_all(cookies::secure(&headers)),
    );
    resp
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn refresh_tokens_come_from_the_cookie_first_then_the_body() {
        let mut h = HeaderMap::new();
        assert_eq!(refresh_token_of(&h, b""), Ok((None, false)));
        assert_eq!(refresh_token_of(&h, b"{}"), Ok((None, false)));
        assert_eq!(
            refresh_token_of(&h, br#"{"refresh_token":" abc ","x":1}"#),
            Ok((Some("abc".into()), true))
        );
        assert_eq!(refresh_token_of(&h, b"{not json"), Err(()));
        h.insert(header::COOKIE, "refresh_token=fromcookie".parse().unwrap());
        assert_eq!(
            refresh_token_of(&h, br#"{"refresh_token":"abc"}"#),
            Ok((Some("fromcookie".into()), false))
        );
    }

    #[test]
    fn the_stored_hash_is_sha256_hex_of_the_trimmed_token() {
        assert_eq!(refresh_hash(" abc\n"), refresh_hash("abc"));
        assert_eq!(
            refresh_hash("abc"),
            "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad"
        );
    }
}
