//! Ending an edge's device session from the centre (draarl-interconnect
//! §3.8): the 0x23 DeviceSessionRevoke with its reason to the owning edge,
//! and the session's route, target entry and speaker leases removed, with
//! a RouteDelta `remove` to that edge.
//!
//! ```text
//!  ownership already dropped ─▶ CentreDevices::forget ─▶ 0x23 revoke(reason) ─▶ CentreRoutes::remove (RouteDelta)
//! ```
//!
//! Used when a device roams to another edge or logs in at the centre
//! (`session_migrated`) and when a reload takes an account's rights away.

use std::sync::atomic::Ordering::Relaxed;
use std::sync::{Mutex, MutexGuard, PoisonError};
use std::time::Instant;

use super::centre_devices::CentreDevices;
use super::centre_routes::CentreRoutes;
use super::centre_tables::CentreTables;
use super::centre_voice_stats::CentreVoiceStats;
use crate::core::interconnect::{device_id, DeviceOwners, OwnedSession};

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(PoisonError::into_inner)
}

/// Revokes `session`, whose ownership the caller already dropped, with
/// `reason`, holding the `routes` and `devices` locks of `tables` (in that
/// order); a session of `center` itself only loses its tables' entries.
pub(super) fn revoke_dropped(
    tables: &CentreTables,
    stats: &CentreVoiceStats,
    routes: &mut CentreRoutes,
    devices: &mut CentreDevices,
    now: Instant,
    session: &OwnedSession,
    reason: &str,
) {
    devices.forget(session);
    let node = session.control.node;
    if node.is_centre() {
        return;
    }
    let key = (session.identity.owner_id, session.identity.ssid);
    let revoke = DeviceOwners::revoke_with_reason(
        &mut lock(&tables.sender.message_ids()),
        routes.cluster_epoch(),
        session,
        device_id(key),
        reason,
    );
    if tables.sender.send_control(node, &revoke).is_err() {
        stats.dispatch.device_send_failures.fetch_add(1, Relaxed);
    }
    routes.remove(&tables.sender, now, node, session.session_id);
}
