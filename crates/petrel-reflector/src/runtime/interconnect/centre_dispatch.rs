//! The centre's dispatcher of control events (draarl-interconnect §3.6,
//! §3.7): one task takes the control server's [`CentreEvent`]s in order
//! and hands them to the centre's control logic — today the route sync
//! ([`CentreRoutes`]) — and drives its timers every 250 ms (§3.7 scan).
//!
//! ```text
//!  ControlServer ─CentreEvent─▶ dispatcher task ─▶ CentreRoutes (node up/down, node_ready, ACK, resync)
//!                                   └ every 250 ms ─▶ CentreRoutes::handle_timeout
//! ```
//!
//! Not handled here yet: device authentication (0x20), renew/report
//! (0x21, 0x22), speaker leases (0x28) and relay (0x30): those envelopes
//! are counted as unhandled.

use std::sync::atomic::{AtomicU64, Ordering::Relaxed};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::time::{Duration, Instant};

use tokio::sync::mpsc;

use crate::core::interconnect::ControlRef;

use super::centre::{CentreEvent, CentreSender};
use super::centre_devices::CentreDevices;
use super::centre_routes::{CentreRouteStats, CentreRoutes};

/// Control events held for the dispatcher; beyond it the server drops
/// and counts them (`events_dropped`).
pub const CENTRE_EVENT_QUEUE: usize = 4096;
/// How often the dispatcher drives the timers (§3.7 scans every 250 ms).
pub const DISPATCH_TICK: Duration = Duration::from_millis(250);

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(PoisonError::into_inner)
}

/// The running dispatcher; dropping it stops the task.
#[derive(Debug)]
pub struct CentreDispatch {
    routes: Arc<Mutex<CentreRoutes>>,
    devices: Arc<Mutex<CentreDevices>>,
    unhandled: Arc<AtomicU64>,
    task: tokio::task::JoinHandle<()>,
}

impl CentreDispatch {
    /// Starts the task (inside a tokio runtime) on the server's event
    /// receiver, in `cluster_epoch` (non-zero, new per centre start).
    pub fn spawn(
        sender: CentreSender,
        events: mpsc::Receiver<CentreEvent>,
        cluster_epoch: u64,
    ) -> Self {
        let routes = Arc::new(Mutex::new(CentreRoutes::new(cluster_epoch)));
        let devices = Arc::new(Mutex::new(CentreDevices::new()));
        let unhandled = Arc::new(AtomicU64::new(0));
        let task = tokio::spawn(run(
            sender,
            events,
            Arc::clone(&routes),
            Arc::clone(&devices),
            Arc::clone(&unhandled),
        ));
        Self {
            routes,
            devices,
            unhandled,
            task,
        }
    }

    /// The route sync counters.
    pub fn route_stats(&self) -> CentreRouteStats {
        lock(&self.routes).stats()
    }

    /// The route table, for the other centre logic to add routes to.
    pub fn routes(&self) -> Arc<Mutex<CentreRoutes>> {
        Arc::clone(&self.routes)
    }

    /// The edge device sessions, their routes, targets and leases.
    pub fn devices(&self) -> Arc<Mutex<CentreDevices>> {
        Arc::clone(&self.devices)
    }

    /// Envelopes of subtypes nothing here handles yet.
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
    sender: CentreSender,
    mut events: mpsc::Receiver<CentreEvent>,
    routes: Arc<Mutex<CentreRoutes>>,
    devices: Arc<Mutex<CentreDevices>>,
    unhandled: Arc<AtomicU64>,
) {
    let mut tick = tokio::time::interval(DISPATCH_TICK);
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        tokio::select! {
            _ = tick.tick() => lock(&routes).handle_timeout(&sender, Instant::now()),
            event = events.recv() => {
                let Some(event) = event else { return };
                let now = Instant::now();
                let mut r = lock(&routes);
                match event {
                    CentreEvent::NodeUp { node_id, session_id, .. } => r.node_up(node_id, session_id),
                    CentreEvent::NodeReady { node_id, session_id } => {
                        r.node_ready(&sender, now, node_id, session_id);
                    }
                    CentreEvent::Envelope { node_id, session_id, header, payload, .. } => {
                        if !r.handle_envelope(&sender, now, node_id, session_id, &header, &payload) {
                            unhandled.fetch_add(1, Relaxed);
                        }
                    }
                    CentreEvent::NodeDown { node_id, session_id } => {
                        r.node_down(node_id, session_id);
                        lock(&devices).drop_control(ControlRef { node: node_id, control_session: session_id });
                    }
                }
            }
        }
    }
}
