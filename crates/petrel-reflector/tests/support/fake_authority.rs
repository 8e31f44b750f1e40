//! An in-memory account store for app sessions (`specs/draarl-apps.md`
//! §2.2, §4.2), so the Type 1 and `/ws` tests need no JWTs: token
//! `ok-<id>-<name>` is user `<id>` named `<name>` (callsign `CS<id>`) with
//! the configured routing; `notfound`, `disabled`, `unapproved` and `pref`
//! are those rejects; anything else is an invalid token.

use std::sync::Arc;

use petrel_reflector::model::{
    AppAuthRequest, AppGrant, AppReject, AppUser, Routing, RoutingChange, RoutingReject,
};
use petrel_reflector::runtime::app_authority::{AppAuthority, AppFuture};

/// See the module docs; every routing change is granted as requested.
#[derive(Debug)]
pub struct FakeAuthority {
    routing: Routing,
}

impl FakeAuthority {
    /// Grants TX `tx` and RX `rx` (plus `tx`) to every valid token.
    pub fn routed(tx: i64, rx: &[i64]) -> Arc<dyn AppAuthority> {
        Arc::new(Self {
            routing: Routing::new(tx, rx.to_vec()),
        })
    }

    /// Grants TX 999 and nothing else to receive.
    pub fn tx_999() -> Arc<dyn AppAuthority> {
        Self::routed(999, &[])
    }
}

impl AppAuthority for FakeAuthority {
    fn authorize(&self, req: AppAuthRequest) -> AppFuture<Result<AppGrant, AppReject>> {
        let routing = self.routing.clone();
        Box::pin(async move {
            let reject = match req.token.as_str() {
                "notfound" => Some(AppReject::UserNotFound),
                "disabled" => Some(AppReject::UserDisabled),
                "unapproved" => Some(AppReject::UserNotApproved),
                "pref" => Some(AppReject::PreferenceUnavailable),
                _ => None,
            };
            if let Some(r) = reject {
                return Err(r);
            }
            let mut parts = req.token.splitn(3, '-');
            match (parts.next(), parts.next(), parts.next()) {
                (Some("ok"), Some(id), Some(name)) => Ok(AppGrant {
                    user: AppUser {
                        user_id: id.parse().map_err(|_| AppReject::InvalidToken)?,
                        username: name.into(),
                        callsign: format!("CS{id}"),
                        is_admin: false,
                    },
                    routing,
                }),
                _ => Err(AppReject::InvalidToken),
            }
        })
    }

    fn change_routing(&self, change: RoutingChange) -> AppFuture<Result<Routing, RoutingReject>> {
        Box::pin(async move { Ok(change.requested) })
    }
}
