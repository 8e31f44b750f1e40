//! Counters of the app login API and the account store behind it
//! (`app_accounts.rs`, `app_http/`), exported under
//! `petrel_reflector_app_auth_*` in `/metrics`.

use std::sync::atomic::{AtomicU64, Ordering::Relaxed};

macro_rules! app_auth_counters {
    ($($(#[$doc:meta])* $name:ident,)*) => {
        /// Counters of the app login API, shared between its tasks.
        #[derive(Debug, Default)]
        pub struct AppAuthStats {
            $(pub(crate) $name: AtomicU64,)*
        }

        /// A copy of [`AppAuthStats`] at one moment.
        #[derive(Debug, Clone, Default, PartialEq, Eq)]
        pub struct AppAuthStatsSnapshot {
            $($(#[$doc])* pub $name: u64,)*
        }

        impl AppAuthStats {
            /// Reads every counter.
            pub fn snapshot(&self) -> AppAuthStatsSnapshot {
                AppAuthStatsSnapshot { $($name: self.$name.load(Relaxed),)* }
            }
        }

        impl AppAuthStatsSnapshot {
            /// Every counter with its name, for metrics export.
            pub fn counters(&self) -> Vec<(&'static str, u64)> {
                vec![$((stringify!($name), self.$name),)*]
            }
        }
    };
}

app_auth_counters! {
    /// Captchas issued (`GET /api/captcha`).
    captcha_issued,
    /// Logins refused for a missing, wrong, expired or reused captcha.
    captcha_failed,
    /// Pending captchas dropped unsolved to make room (oldest first).
    captcha_evicted,
    /// Successful logins.
    login_ok,
    /// Logins refused: body unreadable or without username/password (400).
    login_failed_bad_request,
    /// Logins refused: no account with that name or e-mail.
    login_failed_unknown_user,
    /// Logins refused: wrong password, or no web password set.
    login_failed_wrong_password,
    /// Logins refused: account disabled (403).
    login_failed_disabled,
    /// Logins that failed on a store error (500).
    login_failed_store,
    /// Logins whose password check waited for one of the global permits
    /// (every permit busy: a login flood, or many users at once).
    password_checks_queued,
    /// Access tokens renewed with a refresh token.
    refreshes_ok,
    /// Refreshes refused (any §1.4 401).
    refreshes_failed,
    /// Rotated refresh tokens presented again: every token of the user revoked.
    refresh_reuse_detected,
    /// Expired refresh-token rows deleted.
    refresh_tokens_pruned,
    /// Refresh-token rows evicted over the per-user cap (oldest first).
    refresh_tokens_evicted,
    /// Logouts.
    logouts,
    /// Captcha requests over their source prefix's budget (429).
    rate_limited_captcha,
    /// Login requests over their source prefix's budget (429).
    rate_limited_login,
    /// Source prefixes evicted from the captcha and login limit tables.
    limit_table_evictions,
    /// Bearer refusals: no `Authorization` header.
    bearer_missing,
    /// Bearer refusals: not `Bearer <token>`.
    bearer_malformed,
    /// Bearer refusals: token invalid or expired.
    bearer_invalid_token,
    /// Bearer refusals: the token's user does not exist.
    bearer_user_not_found,
    /// Bearer refusals: the user is disabled.
    bearer_user_disabled,
    /// Approval refusals on approved-only routes.
    bearer_not_approved,
    /// Dashboard data refused to a signed-in account without the admin
    /// role (403 `admin_required`, `app_http/admin_account.rs`).
    admin_required,
    /// Requests refused by the origin guard.
    origin_refused,
    /// Requests refused for a token-like query key.
    token_query_refused,
    /// App logins authorised (UDP or WebSocket).
    app_logins_authorised,
    /// App logins refused.
    app_logins_refused,
    /// Routing preferences evicted over the per-user cap (least recently used).
    preference_evictions,
    /// Ghost and WebSocket sessions ended at a directory reload because
    /// their user was disabled or deleted or changed the web password
    /// (`session_revocation.rs`).
    ghost_sessions_revoked,
}
