//! What a directory reload changes for the device sessions the centre's
//! edges own (draarl-interconnect §3.8 last paragraph, §3.9 eligibility):
//! each owned session's route is computed again from the reloaded
//! directory; a changed route is an upsert to the owning edge, and a
//! session whose owner account is gone, disabled or not approved is
//! revoked.
//!
//! ```text
//!  (OwnedSession, route it has) ─▶ owner account in the directory?
//!     ├ deleted ─▶ Revoke(user_deleted)      ├ disabled ─▶ Revoke(user_disabled)
//!     ├ not approved ─▶ Revoke(user_unapproved)
//!     └ route from the account + device record (group → domain, bans, callsign)
//!          same ─▶ nothing │ changed ─▶ Upsert (lease ends: domain changed or sending newly disabled)
//! ```
//!
//! A single node keeps the sessions of a disabled account but drops their
//! packets (draarl-v1 §3.1: only enabled accounts are heard); an edge
//! forwards without asking the centre, so the centre ends the session
//! instead, and the device's next heartbeat is a proxied login that the
//! centre refuses. Send and receive bans are route fields (`disable_send`,
//! `disable_recv`) and travel as upserts. A session whose device record is
//! missing (the centre keeps the records its logins created until a reload
//! holds them, so this means no record was ever made) keeps its route.
//!
//! Pure: the runtime takes the sessions and their routes from its tables,
//! calls [`refresh_routes`] with the directory, and applies the answer to
//! the sessions that are still the same.

use crate::codec::interconnect::messages::DeviceRoute;
use crate::model::Directory;

use super::device_auth_centre::{device_id, device_route, wire_domain};
use super::device_owners::{session_error, OwnedSession};

/// What one owned session needs after a reload.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum RouteRefresh {
    /// Its route changed: publish `route` to the owning edge.
    Upsert {
        /// The session.
        session: OwnedSession,
        /// Its new route (boxed: a route is far larger than a revoke).
        route: Box<DeviceRoute>,
        /// The change ends the session's speaker lease (§3.8: domain
        /// changed or sending newly disabled).
        lease_ends: bool,
    },
    /// Its owner may no longer be on the network: revoke it.
    Revoke {
        /// The session.
        session: OwnedSession,
        /// Its device id (§3.7).
        device_id: i64,
        /// The revoke reason (`user_deleted`, `user_disabled`,
        /// `user_unapproved`).
        reason: &'static str,
    },
}

/// The changes `dir` makes to `sessions` (each with the route it has
/// now), in the order given; sessions whose route is unchanged are left
/// out.
pub fn refresh_routes(
    dir: &Directory,
    sessions: &[(OwnedSession, DeviceRoute)],
) -> Vec<RouteRefresh> {
    sessions
        .iter()
        .filter_map(|(session, old)| refresh_one(dir, session, old))
        .collect()
}

fn refresh_one(dir: &Directory, session: &OwnedSession, old: &DeviceRoute) -> Option<RouteRefresh> {
    let key = (session.identity.owner_id, session.identity.ssid);
    let revoke = |reason| {
        Some(RouteRefresh::Revoke {
            session: *session,
            device_id: device_id(key),
            reason,
        })
    };
    let Some(user) = dir.user(key.0) else {
        return revoke(session_error::USER_DELETED);
    };
    if !user.enabled {
        return revoke(session_error::USER_DISABLED);
    }
    if !user.approved {
        return revoke(session_error::USER_UNAPPROVED);
    }
    let rec = dir.device(key.0, key.1)?;
    let mut route = device_route(user, rec, wire_domain(dir, rec.group_id), session);
    // Fields the directory does not hold stay as they were granted.
    route.nickname.clone_from(&old.nickname);
    route.rx_group_ids.clone_from(&old.rx_group_ids);
    route.rx_domain_ids.clone_from(&old.rx_domain_ids);
    if route == *old {
        return None;
    }
    let lease_ends = route.domain_id != old.domain_id || (route.disable_send && !old.disable_send);
    Some(RouteRefresh::Upsert {
        session: *session,
        route: Box::new(route),
        lease_ends,
    })
}
