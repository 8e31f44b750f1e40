//! The centre's control tables as the dispatcher, its login tasks and the
//! relay share them (draarl-interconnect §3.7, §3.8, §3.10, §5.2): the
//! route projections of the edges, the edge device sessions, and the way
//! to the node sessions.

use std::sync::{Arc, Mutex};

use super::centre::CentreSender;
use super::centre_devices::CentreDevices;
use super::centre_routes::CentreRoutes;

/// The centre's control tables and the way to the nodes, as the
/// dispatcher and its tasks share them. Lock order: `routes`, then
/// `devices`, then the MessageID counter.
#[derive(Debug, Clone)]
pub struct CentreTables {
    /// Sends to node sessions.
    pub sender: CentreSender,
    /// The route projection of every edge.
    pub routes: Arc<Mutex<CentreRoutes>>,
    /// The edge device sessions, routes, targets and leases.
    pub devices: Arc<Mutex<CentreDevices>>,
}
