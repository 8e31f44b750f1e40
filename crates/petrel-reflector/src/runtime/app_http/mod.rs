//! The HTTP API of the app clients (`specs/draarl-apps.md` §1, §1.5,
//! §3.6–3.8, §4.1, minimum subset §5): captcha and login, refresh and
//! logout, the `ws_token` cookie, and the start-up routes that need no live
//! session registry (`/api/me`, `/api/groups`, `/api/radio/groups/stats`,
//! `/api/groups/:id/messages`, `/api/access-points`,
//! `/api/config/public`).
//!
//! Every answer uses the envelope `{"code","message","data"}` with `code`
//! equal to the HTTP status (correction 7). [`app_router`] gives the
//! routes; [`with_app_guards`] adds the guards of §1.1 (token-like query keys,
//! origin), applied by the server around its whole router. The server's
//! per-prefix request budget, timeouts and body limit (`http.rs`) apply
//! first; captcha and login have their own per-prefix budgets on top, and
//! password checks (bcrypt) run at most half the cores at once over every
//! source, later logins waiting their turn within the request timeout.
//!
//! The operator dashboard's data route takes admin accounts too, through
//! [`with_admin_account`] (`admin_account.rs`).
//!
//! What the ghost-session side adds (`/api/radio/sessions*`, `/ws`)
//! merges into the same router; per-group online counts of its sessions
//! come in through [`GroupPresence`].

mod admin_account;
mod auth_routes;
mod captcha;
mod cookies;
mod guards;
mod startup_routes;
#[cfg(test)]
mod tests;
mod user_json;

use std::collections::HashMap;
use std::net::IpAddr;
use std::sync::atomic::Ordering::Relaxed;
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};

use axum::http::{header, HeaderMap, HeaderValue, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use axum::{Json, Router};

use super::app_accounts::{unix_s, AppAccounts, BearerReject};
use super::app_auth_stats::AppAuthStats;
use super::authenticated_user::AuthenticatedUser;
use super::store::WebUser;
use crate::model::{normalise_origin, AppApiConfig, AppUser};
use crate::policy::IpRateTable;
pub use admin_account::{with_admin_account, ADMIN_REQUIRED};
use captcha::CaptchaBook;

/// Online counts per group from one source of sessions: physical devices
/// (the shared tables), and, once wired, ghost and WebSocket sessions.
/// `/api/groups` and `/api/radio/groups/stats` add up every source.
pub trait GroupPresence: Send + Sync + std::fmt::Debug + 'static {
    /// Sessions online per group id (groups with none may be absent).
    fn online_per_group(&self) -> HashMap<i64, u64>;
}

/// Everything the app routes share.
#[derive(Debug, Clone)]
pub struct AppApi {
    inner: Arc<ApiInner>,
}

#[derive(Debug)]
struct ApiInner {
    accounts: AppAccounts,
    config: AppApiConfig,
    login_captcha: bool,
    captchas: Mutex<CaptchaBook>,
    captcha_limit: Mutex<IpRateTable>,
    login_limit: Mutex<IpRateTable>,
    /// Password checks (bcrypt) running at once, over every source: the
    /// per-prefix login budget bounds one network, this bounds them all.
    /// Its waiters are requests, so at most `http.max_connections`, each
    /// until its request timeout.
    password_checks: Arc<tokio::sync::Semaphore>,
    presence: Vec<Arc<dyn GroupPresence>>,
}

/// Password checks that may run at once: half the cores, at least one, so
/// a login flood from many networks leaves the rest of the CPU to the
/// voice path.
fn password_check_permits() -> usize {
    std::thread::available_parallelism()
        .map_or(1, |n| n.get() / 2)
        .max(1)
}

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(PoisonError::into_inner)
}

impl AppApi {
    /// The app API over `accounts` with the `[apps]` settings `config`,
    /// captcha required at login when `login_captcha`, and online counts
    /// from `presence` (summed).
    pub fn new(
        accounts: AppAccounts,
        config: AppApiConfig,
        login_captcha: bool,
        presence: Vec<Arc<dyn GroupPresence>>,
    ) -> Self {
        let table = |per_min: u32, burst: u32| {
            Mutex::new(IpRateTable::per_minute(
                per_min,
                burst,
                config.limit_table_max,
            ))
        };
        Self {
            inner: Arc::new(ApiInner {
                captchas: Mutex::new(CaptchaBook::new(config.captcha_max)),
                captcha_limit: table(config.captcha_per_minute, config.captcha_burst),
                login_limit: table(config.login_per_minute, config.login_burst),
                password_checks: Arc::new(tokio::sync::Semaphore::new(password_check_permits())),
                accounts,
                login_captcha,
                presence,
                config,
            }),
        }
    }

    /// The account store behind the API.
    pub fn accounts(&self) -> &AppAccounts {
        &self.inner.accounts
    }

    fn stats(&self) -> &AppAuthStats {
        self.inner.accounts.stats()
    }

    /// Online sessions per group over every presence source.
    fn online_per_group(&self) -> HashMap<i64, u64> {
        let mut out: HashMap<i64, u64> = HashMap::new();
        for p in &self.inner.presence {
            for (g, n) in p.online_per_group() {
                *out.entry(g).or_default() += n;
            }
        }
        out
    }

    /// Charges one request from `ip` to the `which` budget; the 429
    /// envelope to answer (`retry_after` and `Retry-After` of one token's
    /// refill time) when over it.
    fn refused_by_limit(&self, which: Limit, ip: IpAddr) -> Option<Response> {
        let (table, per_min, counter) = match which {
            Limit::Captcha => (
                &self.inner.captcha_limit,
                self.inner.config.captcha_per_minute,
                &self.stats().rate_limited_captcha,
            ),
            Limit::Login => (
                &self.inner.login_limit,
                self.inner.config.login_per_minute,
                &self.stats().rate_limited_login,
            ),
        };
        let mut t = lock(table);
        let before = t.evictions();
        let admitted = t.admit(ip, std::time::Instant::now());
        let evicted = t.evictions() - before;
        drop(t);
        self.stats()
            .limit_table_evictions
            .fetch_add(evicted, Relaxed);
        if admitted {
            return None;
        }
        counter.fetch_add(1, Relaxed);
        let retry_after = 60u32.div_ceil(per_min.max(1)).max(1);
        let mut resp = envelope(
            StatusCode::TOO_MANY_REQUESTS,
            "请求过于频繁，请稍后重试",
            Some(serde_json::json!({ "retry_after": retry_after })),
        );
        resp.headers_mut()
            .insert(header::RETRY_AFTER, HeaderValue::from(retry_after));
        Some(resp)
    }

    /// The §1.1 Bearer check: the enabled user of the request's token, or
    /// the refusal to send.
    async fn bearer(&self, headers: &HeaderMap) -> Result<(WebUser, String), Response> {
        let reject = |r: BearerReject| {
            let s = self.stats();
            let (status, message, counter) = match r {
                BearerReject::Missing => (
                    StatusCode::UNAUTHORIZED,
                    "未提供认证令牌",
                    &s.bearer_missing,
                ),
                BearerReject::Malformed => (
                    StatusCode::UNAUTHORIZED,
                    "认证令牌格式错误",
                    &s.bearer_malformed,
                ),
                BearerReject::InvalidToken => (
                    StatusCode::UNAUTHORIZED,
                    "令牌错误，登录超时，请重新登录",
                    &s.bearer_invalid_token,
                ),
                BearerReject::UserNotFound => (
                    StatusCode::UNAUTHORIZED,
                    "用户不存在",
                    &s.bearer_user_not_found,
                ),
                BearerReject::UserDisabled => (
                    StatusCode::FORBIDDEN,
                    "用户已被禁用",
                    &s.bearer_user_disabled,
                ),
                BearerReject::Store => {
                    return envelope(StatusCode::INTERNAL_SERVER_ERROR, "服务器内部错误", None)
                }
            };
            counter.fetch_add(1, Relaxed);
            envelope(status, message, None)
        };
        let token = bearer_token(headers).map_err(reject)?;
        let user = self
            .inner
            .accounts
            .bearer_user(token, unix_s())
            .await
            .map_err(reject)?;
        Ok((user, token.to_owned()))
    }

    /// The Bearer check plus approval, for "approved" routes (§1.1):
    /// admins are exempt; others need `approval_status = 1`.
    async fn approved(&self, headers: &HeaderMap) -> Result<WebUser, Response> {
        let (user, _) = self.bearer(headers).await?;
        if user.approval_status != 1 && !user.is_admin() {
            self.stats().bearer_not_approved.fetch_add(1, Relaxed);
            return Err(envelope(
                StatusCode::FORBIDDEN,
                "您的账号正在审核中，请等待管理员审核通过后再操作",
                Some(serde_json::json!({
                    "approval_status": user.approval_status,
                    "review_note": user.review_note,
                })),
            ));
        }
        Ok(user)
    }
}

/// Which per-prefix budget a request is charged to.
#[derive(Debug, Clone, Copy)]
enum Limit {
    Captcha,
    Login,
}

/// The token of `Authorization: Bearer <token>` (§1.1): the scheme spelled
/// exactly `Bearer`, one space, a non-empty token without spaces.
pub fn bearer_token(headers: &HeaderMap) -> Result<&str, BearerReject> {
    let value = headers
        .get(header::AUTHORIZATION)
        .ok_or(BearerReject::Missing)?;
    let value = value.to_str().map_err(|_| BearerReject::Malformed)?;
    match value.strip_prefix("Bearer ") {
        Some(t) if !t.is_empty() && !t.contains(' ') => Ok(t),
        _ => Err(BearerReject::Malformed),
    }
}

/// The §1.1 envelope: `{"code": status, "message": message, "data": data}`,
/// `data` omitted when `None`.
pub(crate) fn envelope(
    status: StatusCode,
    message: &str,
    data: Option<serde_json::Value>,
) -> Response {
    let mut body = serde_json::json!({ "code": status.as_u16(), "message": message });
    if let Some(d) = data {
        body["data"] = d;
    }
    (status, Json(body)).into_response()
}

/// An envelope with a stable `error` code (§1.1: routing, message-API and
/// session errors): `{"code","error","message"}`.
pub(crate) fn error_envelope(status: StatusCode, error: &str, message: &str) -> Response {
    let body = serde_json::json!({ "code": status.as_u16(), "error": error, "message": message });
    (status, Json(body)).into_response()
}

/// Paths the app API serves (every other path under `/api/` is the admin
/// API, `http.rs`).
pub fn is_app_path(path: &str) -> bool {
    const EXACT: [&str; 5] = [
        "/api/captcha",
        "/api/me",
        "/api/groups",
        "/api/access-points",
        "/api/config/public",
    ];
    const PREFIXES: [&str; 3] = ["/api/auth/", "/api/groups/", "/api/radio/"];
    EXACT.contains(&path) || PREFIXES.iter().any(|p| path.starts_with(p)) || path == "/ws"
}

/// Whether `path` is the admin API's while the app API is on: under
/// `/api/` and not one of the app paths ([`is_app_path`]).
pub fn is_admin_api(path: &str) -> bool {
    (path == "/api" || path.starts_with("/api/")) && !is_app_path(path)
}

/// The app routes over `api`.
pub fn app_router(api: AppApi) -> Router {
    Router::new()
        .route("/api/captcha", get(auth_routes::captcha))
        .route("/api/auth/login", post(auth_routes::login))
        .route("/api/auth/refresh", post(auth_routes::refresh))
        .route("/api/auth/logout", post(auth_routes::logout))
        .route("/api/auth/ws-token/sync", post(auth_routes::ws_token_sync))
        .route(
            "/api/auth/ws-token/clear",
            post(auth_routes::ws_token_clear),
        )
        .route("/api/me", get(startup_routes::me))
        .route("/api/groups", get(startup_routes::groups))
        .route("/api/radio/groups/stats", get(startup_routes::group_stats))
        .route(
            "/api/groups/{id}/messages",
            get(startup_routes::group_messages),
        )
        .route("/api/access-points", get(startup_routes::access_points))
        .route("/api/config/public", get(startup_routes::public_config))
        .with_state(api)
}

/// `router` (the radio session routes, `radio_routes.rs`) behind the
/// Bearer and approval check of §1.1: a caller that passes reaches them
/// with an [`AuthenticatedUser`] extension; every failure is answered here
/// with its §1.1 status and message.
pub fn with_bearer_identity<S: Clone + Send + Sync + 'static>(
    router: Router<S>,
    api: AppApi,
) -> Router<S> {
    router.route_layer(axum::middleware::from_fn_with_state(api, identify))
}

async fn identify(
    axum::extract::State(api): axum::extract::State<AppApi>,
    mut req: axum::extract::Request,
    next: axum::middleware::Next,
) -> Response {
    match api.approved(req.headers()).await {
        Ok(u) => {
            let is_admin = u.is_admin();
            req.extensions_mut().insert(AuthenticatedUser(AppUser {
                user_id: u.id,
                username: u.name,
                callsign: u.callsign,
                is_admin,
            }));
            next.run(req).await
        }
        Err(refused) => refused,
    }
}

/// `router` with the §1.1 guards (token-like query keys, origin) around
/// every non-admin route; the server applies it to its whole router.
pub fn with_app_guards(router: Router, config: &AppApiConfig, stats: Arc<AppAuthStats>) -> Router {
    let g = guards::Guards {
        allowed_origins: config
            .allowed_origins
            .iter()
            .filter_map(|o| normalise_origin(o))
            .collect(),
        stats,
    };
    router.layer(axum::middleware::from_fn_with_state(g, guards::guard))
}
