//! Carrying out churn actions against the reflector child, each recorded in
//! the [`Ledger`] as it starts and ends.
//!
//! - Logout: the device's socket is taken out of its slot (no more
//!   heartbeats) and out of its receive thread, which drains and drops it;
//!   the socket closes, and the reflector learns it from the ICMP port
//!   unreachable its next datagram there draws (or from the silence).
//! - Login and reconnect: a new socket on the device's own address (so a
//!   new source port) logs in with heartbeats like at the start; for a
//!   reconnect the old socket stops heartbeating first and is let go only
//!   once the new one is answered.
//! - Group switch, bans and unbans: the admin API
//!   (`PUT /api/devices/{user}/{ssid}/group`, `…/comm-control`), which
//!   writes the store and reloads the reflector's directory — what a
//!   running reflector honours for a device's group and bans.

use std::net::SocketAddr;
use std::sync::mpsc::SyncSender;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Instant;

use super::super::child::ServerChild;
use super::super::device::{login, make_device, ssid_of, user_of, Device};
use super::ledger::{DeviceState, Ledger, Presence, WindowKind};
use super::plan::Action;
use super::receivers::Swap;
use crate::record::reflector_soak::SoakChurn;

/// A device's current socket; `None` while logged out.
pub(super) type Slot = Mutex<Option<Arc<Device>>>;

/// What the actions act on.
pub(super) struct Actor<'a> {
    pub child: &'a ServerChild,
    pub server: SocketAddr,
    /// Store ids of the groups, by group index.
    pub group_ids: &'a [i64],
    pub slots: &'a [Slot],
    /// One per receive thread; device `d` belongs to `swaps[d % len]`.
    pub swaps: &'a [SyncSender<Swap>],
    pub ledger: &'a Mutex<Ledger>,
    pub t0: Instant,
    pub churn: SoakChurn,
}

impl Actor<'_> {
    /// ms since the soak started.
    pub(super) fn now_ms(&self) -> u64 {
        u64::try_from(self.t0.elapsed().as_millis()).unwrap_or(u64::MAX)
    }

    fn ledger(&self) -> std::sync::MutexGuard<'_, Ledger> {
        self.ledger.lock().unwrap_or_else(PoisonError::into_inner)
    }

    fn slot(&self, d: usize) -> std::sync::MutexGuard<'_, Option<Arc<Device>>> {
        self.slots[d].lock().unwrap_or_else(PoisonError::into_inner)
    }

    fn swap(&self, device: usize, socket: Option<Arc<Device>>) {
        let _ = self.swaps[device % self.swaps.len()].send(Swap { device, socket });
    }

    /// Carries out `a`. Returns `false` only for a login that was not answered.
    pub(super) fn act(&mut self, a: Action) -> bool {
        match a {
            Action::Logout(d) => {
                let after = DeviceState {
                    presence: Presence::LoggedOut,
                    ..self.ledger().current(d)
                };
                self.ledger()
                    .begin(d, self.now_ms(), WindowKind::Churn, after);
                let old = self.slot(d).take();
                self.swap(d, None);
                drop(old);
                self.ledger().end(d, self.now_ms(), after);
                self.churn.logouts += 1;
                true
            }
            Action::Login(d) => {
                let before = self.ledger().current(d);
                let after = DeviceState {
                    presence: Presence::Online,
                    ..before
                };
                self.ledger()
                    .begin(d, self.now_ms(), WindowKind::Login, after);
                let ok = match self.connect(d) {
                    Some(dev) => {
                        *self.slot(d) = Some(Arc::clone(&dev));
                        self.swap(d, Some(dev));
                        self.churn.logins += 1;
                        true
                    }
                    None => {
                        self.churn.login_failures += 1;
                        false
                    }
                };
                self.ledger()
                    .end(d, self.now_ms(), if ok { after } else { before });
                ok
            }
            Action::Reconnect(d) => {
                let state = self.ledger().current(d);
                self.ledger()
                    .begin(d, self.now_ms(), WindowKind::Churn, state);
                let old = self.slot(d).take();
                match self.connect(d) {
                    Some(dev) => {
                        *self.slot(d) = Some(Arc::clone(&dev));
                        self.swap(d, Some(dev));
                        self.churn.reconnects += 1;
                    }
                    None => {
                        *self.slot(d) = old;
                        self.churn.login_failures += 1;
                    }
                }
                self.ledger().end(d, self.now_ms(), state);
                true
            }
            Action::SwitchGroup { device, to } => {
                let body = format!("{{\"group_id\":{}}}", self.group_ids[to]);
                let after = DeviceState {
                    group: to,
                    ..self.ledger().current(device)
                };
                if self.admin(device, "group", &body, after) {
                    self.churn.group_switches += 1;
                }
                true
            }
            Action::RecvBan(d) => {
                if self.comm_control(d, false, true) {
                    self.churn.recv_bans += 1;
                }
                true
            }
            Action::SendBan(d) => {
                if self.comm_control(d, true, false) {
                    self.churn.send_bans += 1;
                }
                true
            }
            Action::Unban(d) => {
                if self.comm_control(d, false, false) {
                    self.churn.unbans += 1;
                }
                true
            }
        }
    }

    /// A new socket for device `d`, logged in and non-blocking.
    fn connect(&self, d: usize) -> Option<Arc<Device>> {
        let dev = make_device(d, self.server).ok()?;
        if !login(&dev) {
            return None;
        }
        dev.sock.set_nonblocking(true).ok()?;
        Some(Arc::new(dev))
    }

    fn comm_control(&mut self, d: usize, send: bool, recv: bool) -> bool {
        let body = format!("{{\"disable_send\":{send},\"disable_recv\":{recv}}}");
        let after = DeviceState {
            send_banned: send,
            recv_banned: recv,
            ..self.ledger().current(d)
        };
        self.admin(d, "comm-control", &body, after)
    }

    /// `PUT /api/devices/{user}/{ssid}/{route}` with `body`, moving `d` to
    /// `after` in the ledger; on failure it stays as it was.
    fn admin(&mut self, d: usize, route: &str, body: &str, after: DeviceState) -> bool {
        let before = self.ledger().current(d);
        self.ledger()
            .begin(d, self.now_ms(), WindowKind::Churn, after);
        let path = format!("/api/devices/{}/{}/{route}", user_of(d), ssid_of(d));
        let ok = self.child.admin_put(&path, body).is_ok();
        if !ok {
            self.churn.admin_errors += 1;
        }
        self.ledger()
            .end(d, self.now_ms(), if ok { after } else { before });
        ok
    }
}
