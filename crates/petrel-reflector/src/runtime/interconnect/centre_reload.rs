//! A directory reload at the centre (draarl-interconnect §3.8 last
//! paragraph): the centre's directory is replaced, and the device sessions
//! its edges own follow it — a changed route (group and domain, bans,
//! callsign) is upserted to the owning edge, releasing the speaker lease
//! when the domain changed or sending was disabled, and the session of an
//! account that was deleted, disabled or is no longer approved is revoked
//! (0x23 with the reason; the edge removes it).
//!
//! ```text
//!  reload task ─▶ CentreDirectory::replace
//!     ─▶ devices locked: (session, route) of every edge session (copied)
//!     ─▶ directory locked: refresh_routes (core, pure)
//!     ─▶ routes + devices locked: each change, if the session is still the same owner and epoch
//!          Upsert ─▶ lease released? ─▶ put_route + CentreRoutes::upsert (RouteDelta)
//!          Revoke ─▶ ownership dropped ─▶ revoke_dropped (0x23 + RouteDelta remove)
//! ```
//!
//! The three steps take their locks one after another, never the
//! directory's inside the tables'; a session that logged in again,
//! renewed into another epoch or went away meanwhile is left alone (its
//! new route was computed from the new directory already).
//! Counters: `reload_route_upserts`, `reload_revokes`,
//! `reload_route_failures` in `/metrics`.

use std::sync::atomic::Ordering::Relaxed;
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::time::Instant;

use super::centre_directory::CentreDirectory;
use super::centre_revoke::revoke_dropped;
use super::centre_tables::CentreTables;
use super::centre_voice_stats::CentreVoiceStats;
use crate::codec::interconnect::messages::DeviceRoute;
use crate::core::interconnect::{refresh_routes, OwnedSession, RouteRefresh};
use crate::model::Directory;

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(PoisonError::into_inner)
}

/// The centre's side of each directory reload; see the module docs.
#[derive(Debug, Clone)]
pub struct CentreReload {
    directory: Arc<CentreDirectory>,
    tables: CentreTables,
    stats: Arc<CentreVoiceStats>,
}

impl CentreReload {
    /// The reload of `directory` for the sessions in `tables`, counting
    /// into `stats`.
    pub fn new(
        directory: Arc<CentreDirectory>,
        tables: CentreTables,
        stats: Arc<CentreVoiceStats>,
    ) -> Self {
        Self {
            directory,
            tables,
            stats,
        }
    }

    /// Replaces the centre's directory with `fresh` and brings the edge
    /// sessions in line with it.
    pub fn apply(&self, fresh: Directory) {
        self.directory.replace(fresh);
        let sessions: Vec<(OwnedSession, DeviceRoute)> = {
            let d = lock(&self.tables.devices);
            d.owners
                .sessions()
                .filter(|s| !s.control.node.is_centre())
                .filter_map(|s| d.routes.get(&s.session_id).map(|r| (*s, r.clone())))
                .collect()
        };
        if sessions.is_empty() {
            return;
        }
        let changes = self.directory.with(|dir| refresh_routes(dir, &sessions));
        if changes.is_empty() {
            return;
        }
        let now = Instant::now();
        let sender = &self.tables.sender;
        let counters = &self.stats.dispatch;
        let mut routes = lock(&self.tables.routes);
        let mut devices = lock(&self.tables.devices);
        for change in changes {
            match change {
                RouteRefresh::Upsert {
                    session,
                    route,
                    lease_ends,
                } => {
                    let node = session.control.node;
                    if !devices.owners.owns(
                        session.control,
                        session.session_id,
                        session.session_epoch,
                    ) {
                        continue;
                    }
                    if lease_ends {
                        devices.leases.release_session(node, session.session_id);
                    }
                    let published = devices.put_route(node, (*route).clone()).is_ok()
                        && matches!(routes.upsert(sender, now, node, *route), Ok(true));
                    if published {
                        counters.reload_route_upserts.fetch_add(1, Relaxed);
                    } else {
                        counters.reload_route_failures.fetch_add(1, Relaxed);
                    }
                }
                RouteRefresh::Revoke {
                    session, reason, ..
                } => {
                    if !devices.owners.owns(
                        session.control,
                        session.session_id,
                        session.session_epoch,
                    ) {
                        continue;
                    }
                    if let Some(s) = devices.owners.remove(session.session_id) {
                        revoke_dropped(
                            &self.tables,
                            &self.stats,
                            &mut routes,
                            &mut devices,
                            now,
                            &s,
                            reason,
                        );
                        counters.reload_revokes.fetch_add(1, Relaxed);
                    }
                }
            }
        }
    }
}
