//! Which edges receive a domain (draarl-interconnect §5.2 step 4): the
//! edges that currently have at least one route, not disable-recv, whose
//! receive domains (`rx_domain_ids` if non-empty, else `[domain_id]`,
//! §3.7) include the domain — minus the source edge and minus `center`.
//!
//! ```text
//!  upsert/remove route (node, session) ─▶ per domain: edge → receiving routes
//!  targets(domain, source) ─▶ [edges with ≥ 1 receiving route] − source − center
//! ```

use std::collections::{BTreeMap, HashMap};

use thiserror::Error;

use crate::codec::interconnect::NodeId;

/// Why a route was not recorded.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Error)]
pub enum RouteLimitError {
    /// The node already has `max_routes_per_node` routes
    /// (`MaxDeviceSessionsPerNode`, §7; counted as `session_limit_rejects`).
    #[error("node has the maximum number of routes")]
    NodeFull,
    /// More receive domains than `max_rx_domains`.
    #[error("route has too many receive domains")]
    TooManyDomains,
}

#[derive(Debug, Clone)]
struct Route {
    rx_domains: Vec<u64>,
    receives: bool,
}

/// The centre's index of routes per edge and domain.
#[derive(Debug)]
pub struct EdgeRoutes {
    routes: HashMap<(NodeId, u64), Route>,
    per_node: HashMap<NodeId, usize>,
    receivers: HashMap<u64, BTreeMap<NodeId, u32>>,
    max_routes_per_node: usize,
    max_rx_domains: usize,
    session_limit_rejects: u64,
}

impl EdgeRoutes {
    /// An empty index: at most `max_routes_per_node` routes per node
    /// (25 000 by §7) and `max_rx_domains` receive domains per route.
    pub fn new(max_routes_per_node: usize, max_rx_domains: usize) -> Self {
        Self {
            routes: HashMap::new(),
            per_node: HashMap::new(),
            receivers: HashMap::new(),
            max_routes_per_node,
            max_rx_domains,
            session_limit_rejects: 0,
        }
    }

    /// Routes refused because their node was full.
    pub fn session_limit_rejects(&self) -> u64 {
        self.session_limit_rejects
    }

    /// Routes recorded.
    pub fn len(&self) -> usize {
        self.routes.len()
    }

    /// Whether no route is recorded.
    pub fn is_empty(&self) -> bool {
        self.routes.is_empty()
    }

    fn count(&mut self, node: NodeId, route: &Route, add: bool) {
        if !route.receives {
            return;
        }
        for d in &route.rx_domains {
            let edges = self.receivers.entry(*d).or_default();
            let n = edges.entry(node).or_insert(0);
            if add {
                *n += 1;
            } else {
                *n = n.saturating_sub(1);
                if *n == 0 {
                    edges.remove(&node);
                }
            }
            if edges.is_empty() {
                self.receivers.remove(d);
            }
        }
    }

    /// Records or replaces the route of `session_id` owned by `node`.
    ///
    /// # Errors
    /// [`RouteLimitError`]; the index is then unchanged.
    pub fn upsert(
        &mut self,
        node: NodeId,
        session_id: u64,
        domain_id: u64,
        rx_domain_ids: &[u64],
        disable_recv: bool,
    ) -> Result<(), RouteLimitError> {
        if rx_domain_ids.len() > self.max_rx_domains {
            return Err(RouteLimitError::TooManyDomains);
        }
        let key = (node, session_id);
        if !self.routes.contains_key(&key)
            && self.per_node.get(&node).copied().unwrap_or(0) >= self.max_routes_per_node
        {
            self.session_limit_rejects += 1;
            return Err(RouteLimitError::NodeFull);
        }
        let mut rx_domains = if rx_domain_ids.is_empty() {
            vec![domain_id]
        } else {
            rx_domain_ids.to_vec()
        };
        rx_domains.sort_unstable();
        rx_domains.dedup();
        let route = Route {
            rx_domains,
            receives: !disable_recv,
        };
        match self.routes.insert(key, route.clone()) {
            Some(old) => self.count(node, &old, false),
            None => *self.per_node.entry(node).or_insert(0) += 1,
        }
        self.count(node, &route, true);
        Ok(())
    }

    /// Removes the route of `session_id` owned by `node`; whether it was there.
    pub fn remove(&mut self, node: NodeId, session_id: u64) -> bool {
        let Some(old) = self.routes.remove(&(node, session_id)) else {
            return false;
        };
        self.count(node, &old, false);
        if let Some(n) = self.per_node.get_mut(&node) {
            *n -= 1;
            if *n == 0 {
                self.per_node.remove(&node);
            }
        }
        true
    }

    /// Removes every route of `node` (its session ended, §6.2); how many.
    pub fn remove_node(&mut self, node: NodeId) -> usize {
        let sessions: Vec<u64> = self
            .routes
            .keys()
            .filter(|(n, _)| *n == node)
            .map(|(_, s)| *s)
            .collect();
        for s in &sessions {
            self.remove(node, *s);
        }
        sessions.len()
    }

    /// The target edges of a relay in `domain` from `source`, in node-id
    /// order: each edge once, never `source`, never `center`.
    pub fn targets(&self, domain: u64, source: NodeId) -> Vec<NodeId> {
        self.receivers
            .get(&domain)
            .map(|edges| {
                edges
                    .keys()
                    .filter(|n| **n != source && !n.is_centre())
                    .copied()
                    .collect()
            })
            .unwrap_or_default()
    }
}
