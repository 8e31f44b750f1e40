//! The centre's answers to the device-session messages of an edge that
//! need no password check (draarl-interconnect §3.8, §3.10): 0x21
//! DeviceSessionRenew, 0x22 DeviceSessionReport and 0x28 SpeakerLease.
//!
//! ```text
//!  0x21 renew ─▶ owners.handle_renew (owned via this control session? route?) ─▶ answer over control
//!  0x22 report ─▶ owners.handle_report ─▶ removed: CentreDevices::forget + CentreRoutes::remove (RouteDelta)
//!  0x28 claim ─▶ authorised: owned via this control session ∧ route in that domain ∧ sending allowed
//!             ─▶ LeaseTable::handle_message ─▶ grant | deny over control   (release: applied, no answer)
//! ```

use std::sync::atomic::Ordering::Relaxed;
use std::sync::{Mutex, MutexGuard, PoisonError};
use std::time::Instant;

use super::super::wall_clock::unix_ms;
use super::centre_tables::CentreTables;
use super::centre_voice_stats::CentreVoiceStats;
use crate::codec::interconnect::messages::{DeviceSessionRenew, DeviceSessionReport, SpeakerLease};
use crate::codec::interconnect::{NodeId, Subtype};
use crate::core::interconnect::{ControlRef, ControlSend, ReportOutcome};

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(PoisonError::into_inner)
}

fn send(tables: &CentreTables, stats: &CentreVoiceStats, node: NodeId, msg: &ControlSend) {
    if tables.sender.send_control(node, msg).is_err() {
        stats.dispatch.device_send_failures.fetch_add(1, Relaxed);
    }
}

/// Handles a 0x21, 0x22 or 0x28 payload of `node`'s session
/// `control_session`; false for any other subtype.
pub(super) fn handle(
    tables: &CentreTables,
    stats: &CentreVoiceStats,
    node: NodeId,
    control_session: u64,
    subtype: Subtype,
    payload: &[u8],
) -> bool {
    let control = ControlRef {
        node,
        control_session,
    };
    let bad_payload = || {
        stats.dispatch.device_payload_errors.fetch_add(1, Relaxed);
    };
    match subtype {
        Subtype::DEVICE_SESSION_RENEW => {
            let Ok(req) = serde_json::from_slice::<DeviceSessionRenew>(payload) else {
                bad_payload();
                return true;
            };
            let answer = {
                let mut d = lock(&tables.devices);
                let route_exists = d.routes.contains_key(&req.session_id);
                d.owners.handle_renew(
                    &mut lock(&tables.sender.message_ids()),
                    unix_ms(),
                    control,
                    &req,
                    route_exists,
                )
            };
            send(tables, stats, node, &answer);
        }
        Subtype::DEVICE_SESSION_REPORT => {
            let Ok(report) = serde_json::from_slice::<DeviceSessionReport>(payload) else {
                bad_payload();
                return true;
            };
            let mut routes = lock(&tables.routes);
            let mut d = lock(&tables.devices);
            if let ReportOutcome::Removed(s) = d.owners.handle_report(control, &report) {
                d.forget(&s);
                d.entries.clear(s.identity, s.control);
                drop(d);
                routes.remove(&tables.sender, Instant::now(), node, s.session_id);
            }
        }
        Subtype::SPEAKER_LEASE => {
            let Ok(msg) = serde_json::from_slice::<SpeakerLease>(payload) else {
                bad_payload();
                return true;
            };
            let answer = {
                let mut d = lock(&tables.devices);
                let authorised = d.owners.owns(control, msg.session_id, msg.session_epoch)
                    && d.routes.get(&msg.session_id).is_some_and(|r| {
                        r.domain_id != 0 && r.domain_id == msg.domain_id && !r.disable_send
                    });
                d.leases.handle_message(
                    &mut lock(&tables.sender.message_ids()),
                    Instant::now(),
                    node,
                    control_session,
                    &msg,
                    authorised,
                )
            };
            if let Some(answer) = answer {
                send(tables, stats, node, &answer);
            }
        }
        _ => return false,
    }
    true
}
