//! The centre's dispatcher of control events (draarl-interconnect §3.6,
//! §3.7, §3.8, §3.10, §6.2): one task takes the control server's
//! [`CentreEvent`]s in order and hands them to the centre's control logic
//! — the route sync ([`CentreRoutes`]), the device sessions and speaker
//! leases ([`CentreDevices`]) — and drives their timers every 250 ms (§3.7
//! scan, dead leases).
//!
//! ```text
//!  ControlServer ─CentreEvent─▶ dispatcher task ─▶ CentreRoutes (node up/down, node_ready, 0x14 ACK, 0x15 resync)
//!                                   ├ 0x20 DeviceAuth ─▶ AuthGate ─▶ task (centre_device_auth.rs)
//!                                   ├ 0x21 renew, 0x22 report, 0x28 lease ─▶ centre_device_sessions.rs
//!                                   ├ 0x25 DeviceSessionConfirm ─▶ centre_session_reconfirm.rs (§3.9)
//!                                   ├ node down ─▶ CentreDevices::drop_control (sessions, routes, leases),
//!                                   │              its session entries offline (§6.2)
//!                                   └ every 250 ms ─▶ CentreRoutes::handle_timeout, LeaseTable::sweep,
//!                                                     entries past the recovery window cleared, entry changes to the store
//! ```
//!
//! Without [`CentreServices`] (a control server run on its own, as in
//! tests) DeviceAuth envelopes are counted as unhandled.

use std::sync::atomic::{AtomicU64, Ordering::Relaxed};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::time::{Duration, Instant};

use tokio::sync::mpsc;
use tokio::task::JoinSet;

use super::super::wall_clock::unix_ms;
use super::centre::{CentreEvent, CentreSender};
use super::centre_device_auth::{AuthGate, CentreServices, DeviceAuthService, GateDrop};
use super::centre_device_sessions;
use super::centre_devices::CentreDevices;
use super::centre_routes::{CentreRouteStats, CentreRoutes};
use super::centre_session_reconfirm;
use super::centre_tables::CentreTables;
use super::centre_voice_stats::CentreVoiceStats;
use crate::codec::interconnect::Subtype;
use crate::core::interconnect::{ControlRef, SessionEntries, MAX_SESSION_ENTRIES};
use crate::model::StoreEvent;

/// Control events held for the dispatcher; beyond it the server drops
/// and counts them (`events_dropped`).
pub const CENTRE_EVENT_QUEUE: usize = 4096;
/// How often the dispatcher drives the timers (§3.7 scans every 250 ms).
pub const DISPATCH_TICK: Duration = Duration::from_millis(250);

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(PoisonError::into_inner)
}

/// The running dispatcher; dropping it stops the task and the logins in
/// progress.
#[derive(Debug)]
pub struct CentreDispatch {
    tables: CentreTables,
    stats: Arc<CentreVoiceStats>,
    unhandled: Arc<AtomicU64>,
    task: tokio::task::JoinHandle<()>,
}

impl CentreDispatch {
    /// Starts the task (inside a tokio runtime) on the server's event
    /// receiver, in `cluster_epoch` (non-zero, new per centre start),
    /// without device authentication (0x20 is counted as unhandled).
    pub fn spawn(
        sender: CentreSender,
        events: mpsc::Receiver<CentreEvent>,
        cluster_epoch: u64,
    ) -> Self {
        Self::start(sender, events, cluster_epoch, None)
    }

    /// [`CentreDispatch::spawn`] with the server's directory, login
    /// tables, Argon2 pool and store writer, for 0x20 DeviceAuth.
    ///
    /// # Errors
    /// The thread handing out password-check answers could not start.
    pub(crate) fn spawn_with(
        sender: CentreSender,
        events: mpsc::Receiver<CentreEvent>,
        cluster_epoch: u64,
        mut services: CentreServices,
    ) -> std::io::Result<Self> {
        let stats = Arc::new(CentreVoiceStats::default());
        let mut devices = CentreDevices::new();
        devices.entries = SessionEntries::new(services.recovery_window, MAX_SESSION_ENTRIES);
        devices
            .entries
            .load(unix_ms(), &std::mem::take(&mut services.recovered));
        let auth = DeviceAuthService::start(services, Arc::clone(&stats))?;
        Ok(Self::start_with_stats(
            sender,
            events,
            cluster_epoch,
            Some(Arc::new(auth)),
            stats,
            devices,
        ))
    }

    fn start(
        sender: CentreSender,
        events: mpsc::Receiver<CentreEvent>,
        cluster_epoch: u64,
        auth: Option<Arc<DeviceAuthService>>,
    ) -> Self {
        Self::start_with_stats(
            sender,
            events,
            cluster_epoch,
            auth,
            Arc::default(),
            CentreDevices::new(),
        )
    }

    fn start_with_stats(
        sender: CentreSender,
        events: mpsc::Receiver<CentreEvent>,
        cluster_epoch: u64,
        auth: Option<Arc<DeviceAuthService>>,
        stats: Arc<CentreVoiceStats>,
        devices: CentreDevices,
    ) -> Self {
        let tables = CentreTables {
            sender,
            routes: Arc::new(Mutex::new(CentreRoutes::new(cluster_epoch))),
            devices: Arc::new(Mutex::new(devices)),
        };
        let unhandled = Arc::new(AtomicU64::new(0));
        let task = tokio::spawn(run(
            tables.clone(),
            events,
            auth,
            Arc::clone(&stats),
            Arc::clone(&unhandled),
        ));
        Self {
            tables,
            stats,
            unhandled,
            task,
        }
    }

    /// The route sync counters.
    pub fn route_stats(&self) -> CentreRouteStats {
        lock(&self.tables.routes).stats()
    }

    /// The route table, for the other centre logic to add routes to.
    pub fn routes(&self) -> Arc<Mutex<CentreRoutes>> {
        Arc::clone(&self.tables.routes)
    }

    /// The edge device sessions, their routes, targets and leases.
    pub fn devices(&self) -> Arc<Mutex<CentreDevices>> {
        Arc::clone(&self.tables.devices)
    }

    /// The tables and the sender, as the relay shares them.
    pub fn tables(&self) -> CentreTables {
        self.tables.clone()
    }

    /// The counters of device sessions and the relay.
    pub fn voice_stats(&self) -> Arc<CentreVoiceStats> {
        Arc::clone(&self.stats)
    }

    /// Envelopes of subtypes nothing here handles.
    pub fn unhandled(&self) -> u64 {
        self.unhandled.load(Relaxed)
    }
}

impl Drop for CentreDispatch {
    fn drop(&mut self) {
        self.task.abort();
    }
}

async fn run(
    tables: CentreTables,
    mut events: mpsc::Receiver<CentreEvent>,
    auth: Option<Arc<DeviceAuthService>>,
    stats: Arc<CentreVoiceStats>,
    unhandled: Arc<AtomicU64>,
) {
    let mut tick = tokio::time::interval(DISPATCH_TICK);
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    let mut gate = AuthGate::default();
    let mut writes = Vec::new();
    // Dropping the set (the task aborted) aborts the logins in progress.
    let mut logins: JoinSet<()> = JoinSet::new();
    loop {
        tokio::select! {
            _ = tick.tick() => {
                let now = Instant::now();
                lock(&tables.routes).handle_timeout(&tables.sender, now);
                lock(&tables.devices).leases.sweep(now);
                persist_entries(&tables, auth.as_deref(), &stats, &mut writes);
            }
            Some(_) = logins.join_next(), if !logins.is_empty() => {}
            event = events.recv() => {
                let Some(event) = event else { return };
                let now = Instant::now();
                match event {
                    CentreEvent::NodeUp { node_id, session_id, .. } => {
                        lock(&tables.routes).node_up(node_id, session_id);
                        gate.node_up(node_id, session_id);
                        stats.node_up(node_id);
                    }
                    CentreEvent::NodeReady { node_id, session_id } => {
                        lock(&tables.routes).node_ready(&tables.sender, now, node_id, session_id);
                    }
                    CentreEvent::Envelope { node_id, session_id, header, payload, .. } => {
                        let handled = match header.subtype {
                            Subtype::ROUTE_ACK | Subtype::ROUTE_RESYNC_REQUEST => lock(&tables.routes)
                                .handle_envelope(&tables.sender, now, node_id, session_id, &header, &payload),
                            Subtype::DEVICE_AUTH => match &auth {
                                Some(auth) => {
                                    stats.dispatch.device_auth_requests.fetch_add(1, Relaxed);
                                    match gate.admit(node_id, session_id, unix_ms()) {
                                        Ok(held) => {
                                            logins.spawn(Arc::clone(auth).handle(
                                                tables.clone(),
                                                node_id,
                                                session_id,
                                                payload,
                                                held,
                                            ));
                                        }
                                        Err(GateDrop::Rate) => {
                                            stats.dispatch.device_auth_limit_drops.fetch_add(1, Relaxed);
                                            stats.node(node_id, |c| c.device_auth_limit_drops += 1);
                                        }
                                        Err(GateDrop::InProgress) => {
                                            stats.dispatch.device_auth_in_flight_drops.fetch_add(1, Relaxed);
                                            stats.node(node_id, |c| c.device_auth_in_flight_drops += 1);
                                        }
                                        Err(GateDrop::Replaced) => {
                                            stats.dispatch.device_auth_node_gone.fetch_add(1, Relaxed);
                                        }
                                    }
                                    true
                                }
                                None => false,
                            },
                            Subtype::DEVICE_SESSION_CONFIRM => match &auth {
                                Some(auth) => {
                                    centre_session_reconfirm::handle(
                                        &tables,
                                        auth.services(),
                                        &stats,
                                        node_id,
                                        session_id,
                                        &payload,
                                    );
                                    true
                                }
                                None => false,
                            },
                            other => centre_device_sessions::handle(
                                &tables, &stats, node_id, session_id, other, &payload,
                            ),
                        };
                        if !handled {
                            unhandled.fetch_add(1, Relaxed);
                        }
                    }
                    CentreEvent::NodeDown { node_id, session_id } => {
                        let mut routes = lock(&tables.routes);
                        routes.node_down(node_id, session_id);
                        let control = ControlRef { node: node_id, control_session: session_id };
                        let mut devices = lock(&tables.devices);
                        devices.drop_control(control);
                        devices.entries.node_offline(control, unix_ms());
                        drop(devices);
                        let replaced = routes.session_id(node_id).is_some();
                        drop(routes);
                        gate.node_down(node_id, session_id);
                        if !replaced {
                            stats.node_down(node_id);
                        }
                    }
                }
            }
        }
    }
}

/// Clears the device-session entries past the recovery window and hands
/// the entry changes to the store writer (§3.9, §6.2), off the datagram
/// path; without a store (no services) they are discarded.
fn persist_entries(
    tables: &CentreTables,
    auth: Option<&DeviceAuthService>,
    stats: &CentreVoiceStats,
    writes: &mut Vec<crate::model::SessionEntryWrite>,
) {
    {
        let mut d = lock(&tables.devices);
        d.entries.sweep(unix_ms());
        d.entries.take_writes(writes);
    }
    let Some(auth) = auth else {
        writes.clear();
        return;
    };
    for w in writes.drain(..) {
        if !auth.services().store.event(StoreEvent::SessionEntry(w)) {
            stats
                .dispatch
                .device_store_events_dropped
                .fetch_add(1, Relaxed);
        }
    }
}
