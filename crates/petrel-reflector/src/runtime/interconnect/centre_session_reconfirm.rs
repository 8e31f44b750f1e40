//! The centre's answer to 0x25 DeviceSessionConfirm (draarl-interconnect
//! §3.9, §6.3): an edge that reconnected, to this process or to a restarted
//! one, asks to keep its live device sessions; each item that passes the
//! checks gets a fresh activation exactly as a 0x20 grant does.
//!
//! ```text
//!  payload ─▶ ConfirmRequest (bad JSON: counted) ─▶ batch rules (≤ 128 items, §3.9)
//!    broken ─▶ every item refused (invalid_batch)
//!    else, per item (directory read first, then routes + devices locked, node session still live?):
//!      SessionEntries::check_item ─▶ refused (cause counted, error string to the edge)
//!      ─▶ owners.activate (new session id, next epoch, 2-min grant)
//!         ─▶ previous owner elsewhere: revoke + route removed
//!         ─▶ route from the directory ─▶ put_route + CentreRoutes::upsert (RouteDelta to this edge)
//!         ─▶ entries.record (this control session)
//!  ─▶ ConfirmResponse {results: one per item, grant on success} over control
//! ```
//!
//! Ghost items (device id 0) are refused (`ghost_reconfirm_unsupported`):
//! ghost sessions do not go through edges here.

use std::sync::atomic::Ordering::Relaxed;
use std::sync::{Mutex, MutexGuard, PoisonError};
use std::time::Instant;

use super::super::wall_clock::unix_ms;
use super::centre_device_auth::CentreServices;
use super::centre_tables::CentreTables;
use super::centre_voice_stats::CentreVoiceStats;
use crate::codec::interconnect::messages::{
    ConfirmItem, ConfirmRequest, ConfirmResponse, ConfirmResult, MAX_CONFIRM_BATCH,
};
use crate::codec::interconnect::{Flags, NodeId, Subtype};
use crate::core::interconnect::{
    device_grant, device_id, device_route, wire_domain, ActivateError, ControlRef, ControlSend,
    DeviceOwners, ReconfirmReject,
};
use crate::model::{DeviceRecord, UserRecord};

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(PoisonError::into_inner)
}

/// What the directory says about one item, read before the tables are
/// locked.
struct Looked {
    device: Option<DeviceRecord>,
    user: Option<UserRecord>,
    domain: u64,
}

fn refused(item: &ConfirmItem, cause: ReconfirmReject) -> ConfirmResult {
    ConfirmResult {
        session_id: item.session_id,
        session_epoch: item.session_epoch,
        success: false,
        error: cause.error().to_owned(),
        grant: None,
    }
}

/// Handles one 0x25 payload of `node`'s session `control_session`: the
/// answer is sent, or counted as undeliverable (`device_send_failures`);
/// nothing is answered when that session is no longer live.
pub(super) fn handle(
    tables: &CentreTables,
    services: &CentreServices,
    stats: &CentreVoiceStats,
    node: NodeId,
    control_session: u64,
    payload: &[u8],
) {
    let Ok(req) = serde_json::from_slice::<ConfirmRequest>(payload) else {
        stats.dispatch.device_payload_errors.fetch_add(1, Relaxed);
        return;
    };
    let results = match req.validate() {
        Err(_) => {
            let mut d = lock(&tables.devices);
            d.entries.count_batch();
            req.sessions
                .iter()
                .take(MAX_CONFIRM_BATCH)
                .map(|item| {
                    d.entries.count(Err(ReconfirmReject::InvalidBatch));
                    refused(item, ReconfirmReject::InvalidBatch)
                })
                .collect()
        }
        Ok(()) => {
            let looked: Vec<Looked> = services.directory.with(|dir| {
                req.sessions
                    .iter()
                    .map(|item| {
                        let device = dir.device(item.owner_id, item.ssid).cloned();
                        let domain = device.as_ref().map_or(0, |d| wire_domain(dir, d.group_id));
                        Looked {
                            device,
                            user: dir.user(item.owner_id).cloned(),
                            domain,
                        }
                    })
                    .collect()
            });
            match confirm(tables, stats, node, control_session, &req.sessions, looked) {
                Some(r) => r,
                None => {
                    stats.dispatch.device_auth_node_gone.fetch_add(1, Relaxed);
                    return;
                }
            }
        }
    };
    let resp = ConfirmResponse {
        request_id: req.request_id,
        results,
    };
    let send = ControlSend::json(
        Subtype::DEVICE_SESSION_CONFIRM,
        Flags::CONTROL.with(Flags::ACK).with(Flags::CRITICAL),
        lock(&tables.sender.message_ids()).next_id(),
        0,
        0,
        &resp,
    );
    if tables.sender.send_control(node, &send).is_err() {
        stats.dispatch.device_send_failures.fetch_add(1, Relaxed);
    }
}

/// Checks and activates every item under the tables' locks; `None` when
/// `node`'s session `control_session` is no longer live (nothing changed).
fn confirm(
    tables: &CentreTables,
    stats: &CentreVoiceStats,
    node: NodeId,
    control_session: u64,
    items: &[ConfirmItem],
    looked: Vec<Looked>,
) -> Option<Vec<ConfirmResult>> {
    let now = Instant::now();
    let wall = unix_ms();
    let sender = &tables.sender;
    let ids = sender.message_ids();
    let mut routes = lock(&tables.routes);
    if routes.session_id(node) != Some(control_session) {
        return None;
    }
    let mut devices = lock(&tables.devices);
    devices.entries.count_batch();
    let control = ControlRef {
        node,
        control_session,
    };
    let mut results = Vec::with_capacity(items.len());
    for (item, l) in items.iter().zip(looked) {
        let checked = devices
            .entries
            .check_item(node, item, l.device.as_ref(), l.user.as_ref());
        let (identity, rec, user) = match (checked, l.device, l.user) {
            (Ok(identity), Some(rec), Some(user)) => (identity, rec, user),
            (Err(cause), _, _) => {
                devices.entries.count(Err(cause));
                results.push(refused(item, cause));
                continue;
            }
            _ => {
                devices
                    .entries
                    .count(Err(ReconfirmReject::IdentityMismatch));
                results.push(refused(item, ReconfirmReject::IdentityMismatch));
                continue;
            }
        };
        let activation = match devices
            .owners
            .activate(&mut lock(&ids), wall, control, identity)
        {
            Ok(a) => a,
            Err(ActivateError::NodeFull) => {
                stats.node(node, |c| c.session_limit_rejects += 1);
                devices.entries.count(Err(ReconfirmReject::NodeFull));
                results.push(refused(item, ReconfirmReject::NodeFull));
                continue;
            }
        };
        let session = activation.session;
        let route = device_route(&user, &rec, l.domain, &session);
        if let Some(prev) = activation.previous {
            devices.forget(&prev);
            if !prev.control.node.is_centre() {
                let revoke = DeviceOwners::revoke_message(
                    &mut lock(&ids),
                    routes.cluster_epoch(),
                    &prev,
                    item.device_id,
                );
                if sender.send_control(prev.control.node, &revoke).is_err() {
                    stats.dispatch.device_send_failures.fetch_add(1, Relaxed);
                }
                routes.remove(sender, now, prev.control.node, prev.session_id);
            }
        }
        let published = devices.put_route(node, route.clone()).is_ok()
            && matches!(routes.upsert(sender, now, node, route.clone()), Ok(true));
        if !published {
            if let Some(s) = devices.owners.remove(session.session_id) {
                devices.forget(&s);
            }
            routes.remove(sender, now, node, session.session_id);
            stats.node(node, |c| c.session_limit_rejects += 1);
            devices.entries.count(Err(ReconfirmReject::NodeFull));
            results.push(refused(item, ReconfirmReject::NodeFull));
            continue;
        }
        devices
            .entries
            .record(identity, device_id((rec.owner_id, rec.ssid)), control);
        devices.entries.count(Ok(()));
        results.push(ConfirmResult {
            session_id: item.session_id,
            session_epoch: item.session_epoch,
            success: true,
            error: String::new(),
            grant: Some(device_grant(route, &rec, &session)),
        });
    }
    Some(results)
}
