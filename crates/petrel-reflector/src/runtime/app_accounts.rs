//! The account store as the app clients reach it: access-token checks,
//! users, and routing preferences (`specs/draarl-apps.md` §1.4, §2.2 steps
//! 4–6, §2.3 "Initial routing", §3.4 rows 5–6, correction 5).
//! [`AppAccounts`] implements [`AppAuthority`] for the ghost and WebSocket
//! sessions and serves the HTTP API's Bearer checks.

use std::collections::HashMap;
use std::sync::atomic::Ordering::Relaxed;
use std::sync::Arc;

use rand::RngCore;

use super::app_auth_stats::AppAuthStats;
use super::app_authority::{AppAuthority, AppFuture};
use super::store::{AppGroup, PreferenceKey, Store, StoreError, WebUser};
use super::wall_clock::unix_ms;
use crate::model::{
    sanitise, AppApiConfig, AppAuthRequest, AppGrant, AppReject, AppUser, Routing, RoutingChange,
    RoutingReject, ServerConfig, TokenError, TokenKeys, FALLBACK_GROUP_ID,
};

/// Bytes of a generated JWT secret (encoded as 64 hex characters).
const GENERATED_SECRET_BYTES: usize = 32;

/// Why a Bearer-protected request was refused (§1.1).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum BearerReject {
    /// 401 `未提供认证令牌`: no `Authorization` header.
    Missing,
    /// 401 `认证令牌格式错误`: not `Bearer <token>`.
    Malformed,
    /// 401 `令牌错误，登录超时，请重新登录`: invalid or expired token.
    InvalidToken,
    /// 401 `用户不存在`.
    UserNotFound,
    /// 403 `用户已被禁用`: `status ≠ 1`.
    UserDisabled,
    /// 500: the store failed.
    Store,
}

/// The per-user bounds of the tables behind the app API.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct AccountLimits {
    /// Refresh-token rows per user.
    pub refresh_tokens_per_user: u32,
    /// Routing preferences per user.
    pub preferences_per_user: u32,
    /// Groups per routing, TX included.
    pub max_subscriptions: u32,
}

impl From<&AppApiConfig> for AccountLimits {
    fn from(c: &AppApiConfig) -> Self {
        Self {
            refresh_tokens_per_user: c.refresh_tokens_per_user,
            preferences_per_user: c.preferences_per_user,
            max_subscriptions: c.max_subscriptions,
        }
    }
}

/// Users, tokens and routing preferences for the app clients.
#[derive(Debug, Clone)]
pub struct AppAccounts {
    inner: Arc<Inner>,
}

#[derive(Debug)]
struct Inner {
    store: Store,
    keys: TokenKeys,
    limits: AccountLimits,
    stats: Arc<AppAuthStats>,
}

/// The current Unix time, s.
pub(crate) fn unix_s() -> i64 {
    unix_ms() / 1000
}

impl AppAccounts {
    /// The accounts of `store` with token keys from `secret`.
    pub fn new(
        store: Store,
        secret: &[u8],
        limits: AccountLimits,
        stats: Arc<AppAuthStats>,
    ) -> Self {
        Self {
            inner: Arc::new(Inner {
                store,
                keys: TokenKeys::new(secret),
                limits,
                stats,
            }),
        }
    }

    /// As [`AppAccounts::new`] with the secret of `cfg.jwt_secret`, or the
    /// one kept in the store (generated from the OS's CSPRNG and stored on
    /// first use), and the limits of `cfg.apps` (defaults without it).
    pub async fn from_config(
        cfg: &ServerConfig,
        store: Store,
        stats: Arc<AppAuthStats>,
    ) -> Result<Self, StoreError> {
        let secret = match &cfg.jwt_secret {
            Some(s) => s.clone(),
            None => {
                let mut bytes = [0u8; GENERATED_SECRET_BYTES];
                rand::rngs::OsRng.fill_bytes(&mut bytes);
                let hex: String = bytes.iter().map(|b| format!("{b:02x}")).collect();
                store.jwt_secret_or_insert(&hex).await?
            }
        };
        let limits = AccountLimits::from(&cfg.apps.clone().unwrap_or_default());
        Ok(Self::new(store, secret.as_bytes(), limits, stats))
    }

    /// The store.
    pub fn store(&self) -> &Store {
        &self.inner.store
    }

    /// The token keys.
    pub fn keys(&self) -> &TokenKeys {
        &self.inner.keys
    }

    /// The table bounds.
    pub fn limits(&self) -> AccountLimits {
        self.inner.limits
    }

    /// The counters.
    pub fn stats(&self) -> &Arc<AppAuthStats> {
        &self.inner.stats
    }

    /// The enabled user named by a valid access token (§1.1 Bearer rows
    /// 3–5), at Unix time `now` (s).
    pub async fn bearer_user(&self, token: &str, now: i64) -> Result<WebUser, BearerReject> {
        let claims = self
            .inner
            .keys
            .verify(token, now)
            .map_err(|_| BearerReject::InvalidToken)?;
        let user = self
            .inner
            .store
            .web_user_by_name(&claims.username)
            .await
            .map_err(|_| BearerReject::Store)?
            .ok_or(BearerReject::UserNotFound)?;
        if user.status != 1 {
            return Err(BearerReject::UserDisabled);
        }
        Ok(user)
    }

    async fn authorize_at(&self, req: AppAuthRequest, now: i64) -> Result<AppGrant, AppReject> {
        let claims = self
            .inner
            .keys
            .verify(&req.token, now)
            .map_err(|e| match e {
                TokenError::Invalid | TokenError::WrongUse | TokenError::Expired => {
                    AppReject::InvalidToken
                }
            })?;
        let store = &self.inner.store;
        let unavailable = |_: StoreError| AppReject::PreferenceUnavailable;
        let user = store
            .web_user_by_name(&claims.username)
            .await
            .map_err(unavailable)?
            .ok_or(AppReject::UserNotFound)?;
        if user.status != 1 {
            return Err(AppReject::UserDisabled);
        }
        if user.approval_status != 1 {
            return Err(AppReject::UserNotApproved);
        }
        let key = PreferenceKey {
            user_id: user.id,
            dev_model: req.dev_model,
            client_instance_id: &req.client_instance_id,
        };
        let fallback = self.fallback_group(user.id, req.dev_model).await?;
        let (stored, is_new) = match store.app_preference(&key).await.map_err(unavailable)? {
            None => (Routing::new(fallback, Vec::new()), true),
            Some(s) => {
                let rx = s.rx_group_ids.ok_or(AppReject::PreferenceUnavailable)?;
                (
                    Routing {
                        tx_group_id: s.tx_group_id,
                        rx_group_ids: rx,
                    },
                    false,
                )
            }
        };
        let max = self.inner.limits.max_subscriptions as usize;
        if stored.rx_group_ids.len() > max {
            return Err(AppReject::PreferenceUnavailable);
        }
        let mut ids = stored.rx_group_ids.clone();
        ids.push(stored.tx_group_id);
        let groups = store.app_groups(user.id, &ids).await.map_err(unavailable)?;
        let admin = user.is_admin();
        let (routing, changed) = sanitise(&stored, fallback, max, |g| usable(&groups, g, admin))
            .map_err(|_| AppReject::PreferenceUnavailable)?;
        if routing.rx_group_ids.len() > max {
            return Err(AppReject::PreferenceUnavailable);
        }
        let now_ms = now.saturating_mul(1000);
        if changed || is_new {
            let evicted = store
                .save_app_preference(
                    &key,
                    &routing,
                    now_ms,
                    self.inner.limits.preferences_per_user,
                )
                .await
                .map_err(unavailable)?;
            self.inner
                .stats
                .preference_evictions
                .fetch_add(evicted, Relaxed);
        } else {
            store
                .touch_app_preference(&key, now_ms)
                .await
                .map_err(unavailable)?;
        }
        Ok(AppGrant {
            user: app_user(&user),
            routing,
        })
    }

    /// Correction 5: the user's last group for `dev_model` if it exists
    /// with `status = 1`, else 999.
    async fn fallback_group(&self, user_id: i64, dev_model: u8) -> Result<i64, AppReject> {
        let store = &self.inner.store;
        let unavailable = |_: StoreError| AppReject::PreferenceUnavailable;
        let Some(last) = store
            .app_last_group(user_id, dev_model)
            .await
            .map_err(unavailable)?
        else {
            return Ok(FALLBACK_GROUP_ID);
        };
        let groups = store
            .app_groups(user_id, &[last])
            .await
            .map_err(unavailable)?;
        Ok(match groups.get(&last) {
            Some(g) if g.status == 1 => last,
            _ => FALLBACK_GROUP_ID,
        })
    }

    async fn change_routing_at(
        &self,
        change: RoutingChange,
        now: i64,
    ) -> Result<Routing, RoutingReject> {
        let store = &self.inner.store;
        let failed = |_: StoreError| RoutingReject::UpdateFailed;
        let routing = change.requested;
        let groups = store
            .app_groups(change.user.user_id, &routing.rx_group_ids)
            .await
            .map_err(failed)?;
        if routing.rx_group_ids.iter().any(|g| !groups.contains_key(g)) {
            return Err(RoutingReject::GroupNotFound);
        }
        let admin = change.user.is_admin;
        if routing
            .rx_group_ids
            .iter()
            .any(|g| !usable(&groups, *g, admin))
        {
            return Err(RoutingReject::GroupForbidden);
        }
        let key = PreferenceKey {
            user_id: change.user.user_id,
            dev_model: change.dev_model,
            client_instance_id: &change.client_instance_id,
        };
        let evicted = store
            .save_app_preference(
                &key,
                &routing,
                now.saturating_mul(1000),
                self.inner.limits.preferences_per_user,
            )
            .await
            .map_err(failed)?;
        self.inner
            .stats
            .preference_evictions
            .fetch_add(evicted, Relaxed);
        store
            .set_app_last_group(change.user.user_id, change.dev_model, routing.tx_group_id)
            .await
            .map_err(failed)?;
        Ok(routing)
    }
}

/// The group rule for one group of `groups` (absent = not usable).
fn usable(groups: &HashMap<i64, AppGroup>, id: i64, is_admin: bool) -> bool {
    groups
        .get(&id)
        .is_some_and(|g| g.facts().usable_by(is_admin))
}

/// The session side's view of an account.
pub fn app_user(u: &WebUser) -> AppUser {
    AppUser {
        user_id: u.id,
        username: u.name.clone(),
        callsign: u.callsign.clone(),
        is_admin: u.is_admin(),
    }
}

impl AppAuthority for AppAccounts {
    fn authorize(&self, req: AppAuthRequest) -> AppFuture<Result<AppGrant, AppReject>> {
        let this = self.clone();
        Box::pin(async move {
            let r = this.authorize_at(req, unix_s()).await;
            let counter = match &r {
                Ok(_) => &this.inner.stats.app_logins_authorised,
                Err(_) => &this.inner.stats.app_logins_refused,
            };
            counter.fetch_add(1, Relaxed);
            r
        })
    }

    fn change_routing(&self, change: RoutingChange) -> AppFuture<Result<Routing, RoutingReject>> {
        let this = self.clone();
        Box::pin(async move { this.change_routing_at(change, unix_s()).await })
    }
}

#[cfg(test)]
mod tests;
