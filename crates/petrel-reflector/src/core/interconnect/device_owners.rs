//! The centre's device-session owner table (draarl-interconnect §3.8,
//! §6.2): which control session of which node owns each device session,
//! with the session id, the per-identity epoch and the grant expiry.
//!
//! ```text
//!  DeviceAuth ok ─▶ activate(control, identity)
//!     ├ same identity, same control session ─▶ same id + epoch, expiry refreshed
//!     ├ control session owns 25 000 already ─▶ NodeFull
//!     └ new id (global MessageID counter), epoch + 1 (from 1), expiry now + 2 min
//!        └ previous owner elsewhere ─▶ Revoke(session_migrated) to it, its route removed
//!  Renew(id, epoch) ─▶ owned via this control session? ─no─▶ session_not_owned
//!                      route exists? ─no─▶ session_route_missing ─▶ else expiry now + 2 min
//!  Report(online:false) from the owning control session, same epoch ─▶ ownership dropped
//!  control session gone ─▶ drop_control: all its sessions dropped (§6.2)
//! ```
//!
//! Identities are physical devices (owner account + SSID); ghost identities
//! (with a client instance, §3.12) are not handled here.

use std::collections::HashMap;

use hashlink::LinkedHashMap;
use thiserror::Error;

use crate::codec::interconnect::messages::{
    DeviceSessionRenew, DeviceSessionReport, DeviceSessionRevoke,
};
use crate::codec::interconnect::{Flags, NodeId, Subtype};

use super::control_send::{reliable, ControlSend};
use super::outbound::MessageIds;

/// Lifetime of a device grant and of each renewal, ms (§3.8: 2 min).
pub const GRANT_LIFETIME_MS: i64 = 120_000;

/// Error and reason strings of §3.8.
pub mod session_error {
    /// Renew: the session is not owned through this control session with
    /// that epoch.
    pub const SESSION_NOT_OWNED: &str = "session_not_owned";
    /// Renew: the session has no route.
    pub const SESSION_ROUTE_MISSING: &str = "session_route_missing";
    /// Revoke: the device authenticated elsewhere (roaming, or directly
    /// at the centre).
    pub const SESSION_MIGRATED: &str = "session_migrated";
    /// Revoke: the owner account was disabled.
    pub const USER_DISABLED: &str = "user_disabled";
    /// Revoke: the owner account was deleted.
    pub const USER_DELETED: &str = "user_deleted";
    /// Revoke: the owner account is no longer approved.
    pub const USER_UNAPPROVED: &str = "user_unapproved";
}

/// A physical device's identity at the centre: owner account and SSID.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct DeviceIdentity {
    /// Owner account id.
    pub owner_id: i64,
    /// SSID.
    pub ssid: u8,
}

/// A control session: the node and its node session id (`center` for
/// centre-direct devices).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct ControlRef {
    /// The node.
    pub node: NodeId,
    /// Its control (node) session id.
    pub control_session: u64,
}

/// One owned device session.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct OwnedSession {
    /// The device identity.
    pub identity: DeviceIdentity,
    /// The owning control session.
    pub control: ControlRef,
    /// Device session id.
    pub session_id: u64,
    /// Its epoch.
    pub session_epoch: u64,
    /// Grant expiry, Unix ms.
    pub expires_at_ms: i64,
}

/// The result of an activation.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Activation {
    /// The active session (put its id, epoch and expiry in the grant).
    pub session: OwnedSession,
    /// Re-authentication through the same control session: id and epoch
    /// kept, only the expiry (and the route) refreshed.
    pub reused: bool,
    /// The identity's previous owner, already dropped: if its control
    /// session differs (roaming), send it [`DeviceOwners::revoke_message`]
    /// and remove its route from that node's projection.
    pub previous: Option<OwnedSession>,
}

/// Why an activation was refused.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Error)]
pub enum ActivateError {
    /// The control session owns `MaxDeviceSessionsPerNode` sessions (§7).
    #[error("node owns the maximum number of device sessions")]
    NodeFull,
}

/// What [`DeviceOwners::handle_report`] did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ReportOutcome {
    /// Ownership dropped: remove the session's route.
    Removed(OwnedSession),
    /// An `online:true` report from the owner: nothing to do.
    Online,
    /// Not from the owning control session or another epoch: ignored.
    NotOwner,
}

/// Counters of the owner table.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct OwnerCounters {
    /// New activations.
    pub activations: u64,
    /// Re-authentications that kept id and epoch.
    pub reactivations: u64,
    /// Activations that displaced another control session's session.
    pub migrations: u64,
    /// Activations refused with [`ActivateError::NodeFull`]
    /// (`session_limit_rejects`, §7).
    pub session_limit_rejects: u64,
    /// Renewals granted.
    pub renewals: u64,
    /// Renewals refused.
    pub renew_rejects: u64,
    /// Reports that dropped ownership.
    pub reports_removed: u64,
    /// Reports ignored (not the owner).
    pub reports_ignored: u64,
    /// Identity epoch counters forgotten (oldest first) to stay bounded.
    pub epoch_evictions: u64,
}

/// The centre's device-session owner table.
#[derive(Debug)]
pub struct DeviceOwners {
    sessions: HashMap<u64, OwnedSession>,
    by_identity: HashMap<DeviceIdentity, u64>,
    per_control: HashMap<ControlRef, usize>,
    /// Sessions owned per owner account (for the account's endpoint cap).
    per_owner: HashMap<i64, usize>,
    epochs: LinkedHashMap<DeviceIdentity, u64>,
    max_per_control: usize,
    max_identities: usize,
    counters: OwnerCounters,
}

impl DeviceOwners {
    /// An empty table: at most `max_per_control` sessions per control
    /// session (`MaxDeviceSessionsPerNode`, 25 000) and epoch counters for
    /// at most `max_identities` identities (least recently activated
    /// forgotten first; a forgotten identity starts again above the epoch
    /// of its live session, if any).
    pub fn new(max_per_control: usize, max_identities: usize) -> Self {
        Self {
            sessions: HashMap::new(),
            by_identity: HashMap::new(),
            per_control: HashMap::new(),
            per_owner: HashMap::new(),
            epochs: LinkedHashMap::new(),
            max_per_control,
            max_identities: max_identities.max(1),
            counters: OwnerCounters::default(),
        }
    }

    /// The counters.
    pub fn counters(&self) -> &OwnerCounters {
        &self.counters
    }

    /// Sessions owned.
    pub fn len(&self) -> usize {
        self.sessions.len()
    }

    /// Whether no session is owned.
    pub fn is_empty(&self) -> bool {
        self.sessions.is_empty()
    }

    /// The owned session `session_id`.
    pub fn get(&self, session_id: u64) -> Option<&OwnedSession> {
        self.sessions.get(&session_id)
    }

    /// The session `identity` owns now, if any.
    pub fn session_of(&self, identity: DeviceIdentity) -> Option<&OwnedSession> {
        self.by_identity
            .get(&identity)
            .and_then(|id| self.sessions.get(id))
    }

    /// Every owned session, in no particular order.
    pub fn sessions(&self) -> impl Iterator<Item = &OwnedSession> {
        self.sessions.values()
    }

    /// Sessions owned through `control`.
    pub fn count(&self, control: ControlRef) -> usize {
        self.per_control.get(&control).copied().unwrap_or(0)
    }

    /// Sessions of `identity`'s owner account, over every control
    /// session, leaving out `identity`'s own (a re-authentication
    /// replaces it).
    pub fn of_account_except(&self, identity: DeviceIdentity) -> usize {
        let all = self.per_owner.get(&identity.owner_id).copied().unwrap_or(0);
        all.saturating_sub(usize::from(self.by_identity.contains_key(&identity)))
    }

    /// Whether `control` owns `session_id` with `epoch` (the §5.2 upstream
    /// and §3.10 claim check).
    pub fn owns(&self, control: ControlRef, session_id: u64, epoch: u64) -> bool {
        self.sessions
            .get(&session_id)
            .is_some_and(|s| s.control == control && s.session_epoch == epoch)
    }

    fn take(&mut self, session_id: u64) -> Option<OwnedSession> {
        let s = self.sessions.remove(&session_id)?;
        self.by_identity.remove(&s.identity);
        if let Some(n) = self.per_control.get_mut(&s.control) {
            *n -= 1;
            if *n == 0 {
                self.per_control.remove(&s.control);
            }
        }
        if let Some(n) = self.per_owner.get_mut(&s.identity.owner_id) {
            *n -= 1;
            if *n == 0 {
                self.per_owner.remove(&s.identity.owner_id);
            }
        }
        Some(s)
    }

    fn next_epoch(&mut self, identity: DeviceIdentity, live: u64) -> u64 {
        let prev = self.epochs.remove(&identity).unwrap_or(0);
        let epoch = prev.max(live) + 1;
        self.epochs.insert(identity, epoch);
        while self.epochs.len() > self.max_identities {
            self.epochs.pop_front();
            self.counters.epoch_evictions += 1;
        }
        epoch
    }

    /// Activates `identity` for `control` after a successful device
    /// authentication at the wall clock `wall_ms` (§3.8).
    ///
    /// # Errors
    /// [`ActivateError::NodeFull`]; nothing changed.
    pub fn activate(
        &mut self,
        ids: &mut MessageIds,
        wall_ms: i64,
        control: ControlRef,
        identity: DeviceIdentity,
    ) -> Result<Activation, ActivateError> {
        let expires_at_ms = wall_ms.saturating_add(GRANT_LIFETIME_MS);
        if let Some(id) = self.by_identity.get(&identity).copied() {
            if let Some(s) = self.sessions.get_mut(&id) {
                if s.control == control {
                    s.expires_at_ms = expires_at_ms;
                    self.counters.reactivations += 1;
                    return Ok(Activation {
                        session: *s,
                        reused: true,
                        previous: None,
                    });
                }
            }
        }
        if self.count(control) >= self.max_per_control {
            self.counters.session_limit_rejects += 1;
            return Err(ActivateError::NodeFull);
        }
        let previous = self
            .by_identity
            .get(&identity)
            .copied()
            .and_then(|id| self.take(id));
        if previous.is_some() {
            self.counters.migrations += 1;
        }
        let live = previous.map_or(0, |p| p.session_epoch);
        let session = OwnedSession {
            identity,
            control,
            session_id: ids.next_id(),
            session_epoch: self.next_epoch(identity, live),
            expires_at_ms,
        };
        self.sessions.insert(session.session_id, session);
        self.by_identity.insert(identity, session.session_id);
        *self.per_control.entry(control).or_insert(0) += 1;
        *self.per_owner.entry(identity.owner_id).or_insert(0) += 1;
        self.counters.activations += 1;
        Ok(Activation {
            session,
            reused: false,
            previous,
        })
    }

    /// The 0x23 DeviceSessionRevoke telling `previous`'s edge that the
    /// device moved (reason `session_migrated`; envelope epoch =
    /// `cluster_epoch`).
    pub fn revoke_message(
        ids: &mut MessageIds,
        cluster_epoch: u64,
        previous: &OwnedSession,
        device_id: i64,
    ) -> ControlSend {
        Self::revoke_with_reason(
            ids,
            cluster_epoch,
            previous,
            device_id,
            session_error::SESSION_MIGRATED,
        )
    }

    /// The 0x23 DeviceSessionRevoke of `session` with `reason` (one of
    /// [`session_error`]'s revoke reasons; envelope epoch =
    /// `cluster_epoch`). The edge removes the session if the epoch matches.
    pub fn revoke_with_reason(
        ids: &mut MessageIds,
        cluster_epoch: u64,
        session: &OwnedSession,
        device_id: i64,
        reason: &str,
    ) -> ControlSend {
        let revoke = DeviceSessionRevoke {
            session_id: session.session_id,
            session_epoch: session.session_epoch,
            device_id,
            reason: reason.to_owned(),
        };
        ControlSend::json(
            Subtype::DEVICE_SESSION_REVOKE,
            Flags::CONTROL,
            ids.next_id(),
            cluster_epoch,
            0,
            &revoke,
        )
    }

    /// Answers a DeviceSessionRenew from `control` at `wall_ms`: extends
    /// the grant by 2 min if `control` owns the session with that epoch
    /// and `route_exists` (the runtime's look-up in that edge's
    /// projection); otherwise `session_not_owned` or
    /// `session_route_missing`.
    pub fn handle_renew(
        &mut self,
        ids: &mut MessageIds,
        wall_ms: i64,
        control: ControlRef,
        req: &DeviceSessionRenew,
        route_exists: bool,
    ) -> ControlSend {
        let mut resp = DeviceSessionRenew {
            request_id: req.request_id,
            session_id: req.session_id,
            session_epoch: req.session_epoch,
            ..DeviceSessionRenew::default()
        };
        if !self.owns(control, req.session_id, req.session_epoch) {
            resp.error = session_error::SESSION_NOT_OWNED.to_owned();
        } else if !route_exists {
            resp.error = session_error::SESSION_ROUTE_MISSING.to_owned();
        } else if let Some(s) = self.sessions.get_mut(&req.session_id) {
            s.expires_at_ms = wall_ms.saturating_add(GRANT_LIFETIME_MS);
            resp.success = true;
            resp.expires_at_ms = s.expires_at_ms;
        }
        if resp.success {
            self.counters.renewals += 1;
        } else {
            self.counters.renew_rejects += 1;
        }
        ControlSend::json(
            Subtype::DEVICE_SESSION_RENEW,
            reliable(),
            ids.next_id(),
            0,
            0,
            &resp,
        )
    }

    /// Applies a DeviceSessionReport from `control`: only the owning
    /// control session with the matching epoch is heard; `online:false`
    /// drops the ownership.
    pub fn handle_report(
        &mut self,
        control: ControlRef,
        report: &DeviceSessionReport,
    ) -> ReportOutcome {
        if !self.owns(control, report.session_id, report.session_epoch) {
            self.counters.reports_ignored += 1;
            return ReportOutcome::NotOwner;
        }
        if report.online {
            return ReportOutcome::Online;
        }
        match self.take(report.session_id) {
            Some(s) => {
                self.counters.reports_removed += 1;
                ReportOutcome::Removed(s)
            }
            None => ReportOutcome::NotOwner,
        }
    }

    /// Drops the session `session_id` (admin removal); the dropped entry.
    pub fn remove(&mut self, session_id: u64) -> Option<OwnedSession> {
        self.take(session_id)
    }

    /// Drops every session owned through `control` (its connection ended,
    /// §6.2); the dropped sessions, so their routes and leases go too.
    pub fn drop_control(&mut self, control: ControlRef) -> Vec<OwnedSession> {
        let ids: Vec<u64> = self
            .sessions
            .values()
            .filter(|s| s.control == control)
            .map(|s| s.session_id)
            .collect();
        ids.into_iter().filter_map(|id| self.take(id)).collect()
    }
}
