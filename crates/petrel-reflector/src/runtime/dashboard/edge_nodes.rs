//! The dashboard's "Edge nodes" list on a centre (draarl-interconnect §7
//! "Control server", §3.7): every edge node with a live control session,
//! with its projection version, then the nodes the store knows that are
//! offline.
//!
//! ```text
//! EdgeNodeView {
//!   "node_id": string,
//!   "online": bool,                     a live control session now
//!   "disabled": bool|null,              the store's flag (null: not in the store)
//!   "session_id": string|null,          decimal u64 (beyond JavaScript's exact integers)
//!   "remote": string|null,              the TLS peer, "ip:port"
//!   "connected_unix_ms": i64|null,      the session's start, Unix ms
//!   "last_heartbeat_unix_ms": i64|null, the last accepted heartbeat, Unix ms (null: none yet)
//!   "projection_version": u64|null      the route projection version last sent (§3.7)
//! }
//! ```
//!
//! Online nodes come first, by node id, then offline ones by node id. Both
//! the live sessions and the store's node table are bounded by
//! `[interconnect] max_nodes`.

use std::collections::{HashMap, HashSet};
use std::sync::{Arc, Mutex, PoisonError};

use serde::Serialize;

use crate::runtime::interconnect::{CentreRoutes, CentreSender};
use crate::runtime::store::Store;

/// One edge node in the dashboard's `nodes` (see the module docs).
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct EdgeNodeView {
    /// The node id.
    pub node_id: String,
    /// Whether it has a live control session.
    pub online: bool,
    /// The store's `disabled` flag; `None` when the store does not list it.
    pub disabled: Option<bool>,
    /// The live session's id, in decimal.
    pub session_id: Option<String>,
    /// The live session's TLS peer, `ip:port`.
    pub remote: Option<String>,
    /// The live session's start, Unix milliseconds.
    pub connected_unix_ms: Option<i64>,
    /// The last accepted heartbeat, Unix milliseconds; `None` before the
    /// first or when offline.
    pub last_heartbeat_unix_ms: Option<i64>,
    /// The projection version last sent to the live session (§3.7).
    pub projection_version: Option<u64>,
}

/// Where the list is read from: the control server's sessions, the route
/// sync's versions and the store's node table (cheap to clone).
#[derive(Clone)]
pub struct EdgeNodes {
    sessions: CentreSender,
    routes: Arc<Mutex<CentreRoutes>>,
    store: Store,
}

impl std::fmt::Debug for EdgeNodes {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("EdgeNodes").finish_non_exhaustive()
    }
}

impl EdgeNodes {
    /// Reads sessions from `sessions`, versions from `routes` and the
    /// offline nodes from `store`.
    pub fn new(sessions: CentreSender, routes: Arc<Mutex<CentreRoutes>>, store: Store) -> Self {
        Self {
            sessions,
            routes,
            store,
        }
    }

    /// The list (module docs). A store that cannot be read leaves the
    /// offline nodes out (logged) rather than failing the dashboard.
    pub async fn view(&self) -> Vec<EdgeNodeView> {
        let stored = match self.store.nodes().await {
            Ok(n) => n,
            Err(e) => {
                tracing::warn!(error = %e, "dashboard: cannot list the stored edge nodes");
                Vec::new()
            }
        };
        let disabled: HashMap<&str, bool> = stored
            .iter()
            .map(|s| (s.node_id.as_str(), s.disabled))
            .collect();
        let live = self.sessions.nodes();
        let mut out = {
            let routes = self.routes.lock().unwrap_or_else(PoisonError::into_inner);
            live.iter()
                .map(|n| {
                    let node_id = n.node_id.to_string();
                    EdgeNodeView {
                        disabled: disabled.get(node_id.as_str()).copied(),
                        node_id,
                        online: true,
                        session_id: Some(n.session_id.to_string()),
                        remote: Some(n.remote.to_string()),
                        connected_unix_ms: Some(n.connected_at_ms),
                        last_heartbeat_unix_ms: (n.last_heartbeat_ms > 0)
                            .then_some(n.last_heartbeat_ms),
                        projection_version: routes.version(n.node_id),
                    }
                })
                .collect::<Vec<_>>()
        };
        let online: HashSet<String> = out.iter().map(|n| n.node_id.clone()).collect();
        out.extend(
            stored
                .into_iter()
                .filter(|s| !online.contains(&s.node_id))
                .map(|s| EdgeNodeView {
                    node_id: s.node_id,
                    online: false,
                    disabled: Some(s.disabled),
                    session_id: None,
                    remote: None,
                    connected_unix_ms: None,
                    last_heartbeat_unix_ms: None,
                    projection_version: None,
                }),
        );
        out
    }
}
