//! The port through which app sessions reach the account store
//! ([`crate::model::AppAuthRequest`] and its answers).
//!
//! The Type 1 handshake, the WebSocket upgrade and the routing API call it;
//! the account store with its JWT keys implements it. Both methods may
//! touch the database, so they are asynchronous and run on the runtime's
//! tokio tasks, never on an ingress shard thread.

use std::future::Future;
use std::pin::Pin;

use crate::model::{AppAuthRequest, AppGrant, AppReject, Routing, RoutingChange, RoutingReject};

/// A boxed future, as the methods of [`AppAuthority`] return it.
pub type AppFuture<T> = Pin<Box<dyn Future<Output = T> + Send + 'static>>;

/// Authorises app logins and routing changes (`specs/draarl-apps.md`
/// §2.2 steps 4–6, §3.4 rows 5–7, §4.2 rows 5–9).
pub trait AppAuthority: Send + Sync + std::fmt::Debug + 'static {
    /// Checks the access token, the user's status and approval, and loads
    /// (creating if missing) and sanitises the routing preference of
    /// (user, DevModel, instance).
    fn authorize(&self, req: AppAuthRequest) -> AppFuture<Result<AppGrant, AppReject>>;

    /// Checks that every group of `change.requested` exists and is
    /// accessible to the user (§3.4 rows 5–6), then saves it as the
    /// preference of (user, DevModel, instance). Returns the routing saved.
    fn change_routing(&self, change: RoutingChange) -> AppFuture<Result<Routing, RoutingReject>>;
}
