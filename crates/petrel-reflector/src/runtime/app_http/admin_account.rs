//! The admin-account gate of the operator dashboard's data route
//! (`GET /api/admin/dashboard`, `dashboard/`): a request passes with the
//! configured admin token (marked [`AdminTokenCaller`] by the HTTP guard)
//! or with the §1.1 Bearer access token of an enabled user who has the
//! `admin` role (`users.roles`, §1.3; `reflector user add … --admin`).
//!
//! Refusals: the §1.1 Bearer failures with their statuses and messages
//! (401 missing, malformed, invalid or expired token, unknown user; 403
//! disabled user), and 403 `{"code":403,"message":"admin_required",
//! "error":"admin_required"}` for an account without the admin role. The
//! reference has no dashboard, so `admin_required` is Petrel's stable code.

use std::sync::atomic::Ordering::Relaxed;

use axum::extract::{Request, State};
use axum::http::StatusCode;
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use axum::{Json, Router};

use super::AppApi;
use crate::runtime::authenticated_user::AdminTokenCaller;

/// The `message` and `error` of the refusal of a non-admin account.
pub const ADMIN_REQUIRED: &str = "admin_required";

/// `router` behind the admin-account gate of the module docs.
pub fn with_admin_account<S: Clone + Send + Sync + 'static>(
    router: Router<S>,
    api: AppApi,
) -> Router<S> {
    router.route_layer(axum::middleware::from_fn_with_state(api, gate))
}

async fn gate(State(api): State<AppApi>, req: Request, next: Next) -> Response {
    if req.extensions().get::<AdminTokenCaller>().is_some() {
        return next.run(req).await;
    }
    match api.bearer(req.headers()).await {
        Ok((user, _)) if user.is_admin() => next.run(req).await,
        Ok(_) => {
            api.stats().admin_required.fetch_add(1, Relaxed);
            (
                StatusCode::FORBIDDEN,
                Json(serde_json::json!({
                    "code": 403,
                    "message": ADMIN_REQUIRED,
                    "error": ADMIN_REQUIRED,
                })),
            )
                .into_response()
        }
        Err(refused) => refused,
    }
}
