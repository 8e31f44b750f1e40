//! The centre's table of edge device sessions (draarl-interconnect §3.8,
//! §3.10, §5.2, §6.2), shared by the control dispatcher (which activates,
//! renews and drops sessions and answers lease messages) and the UDP reader
//! (which checks every RelayUpstream against it and picks the
//! RelayDownstream targets).
//!
//! ```text
//!  0x20 DeviceAuth ─▶ owners.activate ─▶ routes[session] = route ─▶ edge_routes.upsert (+ RouteDelta)
//!  0x22 report / node down ─▶ owners drop ─▶ routes, edge_routes, leases removed
//!  activation ─▶ entries.record; report ─▶ entries.clear; node down ─▶ entries offline (§3.9, §6.2)
//!  RelayUpstream (UDP reader) ─▶ owners.owns? routes[session]? leases.voice? ─▶ edge_routes.targets
//! ```
//!
//! One lock over the four tables keeps them consistent: a session is in
//! `routes` and `edge_routes` exactly when `owners` holds it.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, PoisonError};

use crate::codec::interconnect::messages::DeviceRoute;
use crate::codec::interconnect::NodeId;
use crate::core::interconnect::{
    ControlRef, DeviceIdentity, DeviceOwners, EdgeRoutes, LeaseTable, OwnedSession,
    RouteLimitError, SessionEntries, MAX_DEVICE_SESSIONS_PER_NODE, MAX_SESSION_ENTRIES,
    SESSION_RECOVERY_WINDOW,
};
use crate::model::DeviceKey;
use crate::runtime::shared_tables::EndpointsElsewhere;

/// Receive domains kept per route (§7 `MaxRxDomainsPerRoute`).
pub const MAX_RX_DOMAINS_PER_ROUTE: usize = 64;
/// Domains with a speaker lease entry, at most.
pub const MAX_LEASE_DOMAINS: usize = 65_536;
/// Identities whose epoch counter is remembered (least recently activated
/// forgotten first).
pub const MAX_EPOCH_IDENTITIES: usize = 262_144;

/// The tables; see the module docs.
#[derive(Debug)]
pub struct CentreDevices {
    /// Who owns each device session (§3.8).
    pub owners: DeviceOwners,
    /// The current route of each owned session, by session id.
    pub routes: HashMap<u64, DeviceRoute>,
    /// Which edges receive each domain (§5.2 targets).
    pub edge_routes: EdgeRoutes,
    /// Speaker leases per domain (§3.10).
    pub leases: LeaseTable,
    /// The device-session entries kept across a restart (§3.9, §6.2).
    pub entries: SessionEntries,
}

/// The edge sessions of each account, as the account cap of a direct
/// login on the centre counts them (the cap holds over the centre and its
/// edges, as it does for a login through an edge: `centre_device_auth`).
#[derive(Debug)]
pub struct EdgeEndpoints(pub Arc<Mutex<CentreDevices>>);

impl EndpointsElsewhere for EdgeEndpoints {
    fn of_account_except(&self, key: DeviceKey) -> usize {
        let devices = self.0.lock().unwrap_or_else(PoisonError::into_inner);
        devices.owners.of_account_except(DeviceIdentity {
            owner_id: key.0,
            ssid: key.1,
        })
    }
}

impl Default for CentreDevices {
    fn default() -> Self {
        Self::new()
    }
}

impl CentreDevices {
    /// Empty tables with the §7 default limits.
    pub fn new() -> Self {
        Self {
            owners: DeviceOwners::new(MAX_DEVICE_SESSIONS_PER_NODE, MAX_EPOCH_IDENTITIES),
            routes: HashMap::new(),
            edge_routes: EdgeRoutes::new(MAX_DEVICE_SESSIONS_PER_NODE, MAX_RX_DOMAINS_PER_ROUTE),
            leases: LeaseTable::new(MAX_LEASE_DOMAINS),
            entries: SessionEntries::new(SESSION_RECOVERY_WINDOW, MAX_SESSION_ENTRIES),
        }
    }

    /// Records `route` as the route of the owned session `route.session_id`
    /// on `node`.
    ///
    /// # Errors
    /// [`RouteLimitError`] when the node holds its maximum of routes or the
    /// route lists too many receive domains; nothing changed.
    pub fn put_route(&mut self, node: NodeId, route: DeviceRoute) -> Result<(), RouteLimitError> {
        self.edge_routes.upsert(
            node,
            route.session_id,
            route.domain_id,
            &route.rx_domain_ids,
            route.disable_recv,
        )?;
        self.routes.insert(route.session_id, route);
        Ok(())
    }

    /// Forgets `session` (its ownership already dropped): its route, its
    /// place in the target index and its leases; the route it had.
    pub fn forget(&mut self, session: &OwnedSession) -> Option<DeviceRoute> {
        self.edge_routes
            .remove(session.control.node, session.session_id);
        self.leases
            .release_session(session.control.node, session.session_id);
        self.routes.remove(&session.session_id)
    }

    /// A control session ended (§6.2): drops its sessions, routes and
    /// leases; the dropped sessions.
    pub fn drop_control(&mut self, control: ControlRef) -> Vec<OwnedSession> {
        let dropped = self.owners.drop_control(control);
        for s in &dropped {
            self.forget(s);
        }
        self.leases
            .release_node(control.node, control.control_session);
        dropped
    }
}
