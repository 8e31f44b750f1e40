//! The edge's side of the connection sequence and route sync
//! (draarl-interconnect §3.6 steps 2, 5, 6, §3.7, §6.1): drives the
//! [`EdgeControl`] events into the sans-IO link policy
//! ([`crate::core::interconnect::EdgeLink`]) and route sync
//! ([`EdgeRouteSync`]), so the edge becomes **ready** after the centre's
//! snapshot and keeps its local grace when the centre goes away.
//!
//! ```text
//!  Connected ─▶ EdgeLink::attached, EdgeRouteSync::reset ─▶ node_ready
//!  0x10/0x11/0x12 snapshot ─▶ EdgeRouteSync ─▶ Committed ─▶ RouteAck, EdgeLink::ready
//!  0x13 delta ─▶ Applied ─▶ RouteAck          resync ─▶ EdgeLink::not_ready, 0x15
//!  Disconnected ─▶ EdgeLink::detached (15 s local grace) ── timer ─▶ grace expiry
//! ```
//!
//! Not done here: the DataBind proof over UDP (§3.6 step 3; without a
//! `CenterUDP` the relay goes over the control connection), the session
//! reconfirmation (§3.6 step 4, §3.9) and the device path (§3.8, §5).

use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::time::{Duration, Instant};

use tokio::sync::{mpsc, watch};

use super::edge::{EdgeControl, EdgeEvent};
use crate::codec::interconnect::messages::{
    RouteDelta, RouteSnapshotBegin, RouteSnapshotChunk, RouteSnapshotCommit,
};
use crate::codec::interconnect::{EnvelopeHeader, Subtype};
use crate::core::interconnect::{
    EdgeLink as LinkPolicy, EdgeRouteSync, EdgeSyncEvent, LinkState, MessageIds,
    DISCONNECTED_LOCAL_GRACE,
};

/// How often the edge drives its timers (grace expiry).
pub const EDGE_TICK: Duration = Duration::from_millis(100);
/// Domains with an edge-local floor during the grace period, at most.
pub const MAX_LOCAL_FLOORS: usize = 4096;

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(PoisonError::into_inner)
}

/// The edge's control-side state shared with its UDP path.
#[derive(Debug)]
pub struct EdgeState {
    /// The link policy (§6.1).
    pub link: LinkPolicy,
    /// The route projection (§3.7).
    pub routes: EdgeRouteSync,
    /// Route payloads that did not decode.
    pub bad_payloads: u64,
    /// Route messages that could not be queued to the centre.
    pub send_failures: u64,
}

/// The running edge node; dropping it stops the task (and the control
/// client with it).
#[derive(Debug)]
pub struct EdgeNode {
    control: Arc<EdgeControl>,
    state: Arc<Mutex<EdgeState>>,
    link: watch::Receiver<LinkState>,
    task: tokio::task::JoinHandle<()>,
}

impl EdgeNode {
    /// Starts driving `control` (inside a tokio runtime), with the local
    /// grace `grace` ([`DISCONNECTED_LOCAL_GRACE`] by default). `None`
    /// when the control client's events were taken already.
    pub fn spawn(control: EdgeControl, grace: Duration) -> Option<Self> {
        let events = control.take_events()?;
        let control = Arc::new(control);
        let state = Arc::new(Mutex::new(EdgeState {
            link: LinkPolicy::new(grace, MAX_LOCAL_FLOORS),
            routes: EdgeRouteSync::new(),
            bad_payloads: 0,
            send_failures: 0,
        }));
        let (tx, link) = watch::channel(LinkState::Starting);
        let task = tokio::spawn(run(Arc::clone(&control), Arc::clone(&state), events, tx));
        Some(Self {
            control,
            state,
            link,
            task,
        })
    }

    /// [`EdgeNode::spawn`] with the default 15 s grace.
    pub fn spawn_default(control: EdgeControl) -> Option<Self> {
        Self::spawn(control, DISCONNECTED_LOCAL_GRACE)
    }

    /// The control client.
    pub fn control(&self) -> &Arc<EdgeControl> {
        &self.control
    }

    /// The shared state (link policy, route sync).
    pub fn state(&self) -> Arc<Mutex<EdgeState>> {
        Arc::clone(&self.state)
    }

    /// The link state as last published.
    pub fn link_state(&self) -> LinkState {
        *self.link.borrow()
    }

    /// Waits up to `within` for a link state satisfying `pred`.
    pub async fn wait_for_state(
        &self,
        within: Duration,
        pred: impl Fn(LinkState) -> bool,
    ) -> Option<LinkState> {
        let mut rx = self.link.clone();
        let waited = tokio::time::timeout(within, rx.wait_for(|s| pred(*s))).await;
        match waited {
            Ok(Ok(s)) => Some(*s),
            _ => None,
        }
    }
}

impl Drop for EdgeNode {
    fn drop(&mut self) {
        self.task.abort();
    }
}

async fn run(
    control: Arc<EdgeControl>,
    state: Arc<Mutex<EdgeState>>,
    mut events: mpsc::Receiver<EdgeEvent>,
    link_tx: watch::Sender<LinkState>,
) {
    let ids = control.message_ids();
    let mut tick = tokio::time::interval(EDGE_TICK);
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        tokio::select! {
            _ = tick.tick() => {
                let mut s = lock(&state);
                s.link.handle_timeout(Instant::now());
            }
            event = events.recv() => {
                let Some(event) = event else { return };
                let mut s = lock(&state);
                match event {
                    EdgeEvent::Connected(_) => {
                        s.link.attached();
                        s.routes.reset();
                        if control.send_node_ready().is_err() {
                            s.send_failures += 1;
                        }
                    }
                    EdgeEvent::Envelope { header, payload, duplicate } => {
                        handle_route(&control, &ids, &mut s, &header, &payload, duplicate);
                    }
                    EdgeEvent::Disconnected { .. } => s.link.detached(Instant::now()),
                }
            }
        }
        let now_state = lock(&state).link.state();
        link_tx.send_if_modified(|old| {
            let changed = *old != now_state;
            *old = now_state;
            changed
        });
    }
}

fn handle_route(
    control: &EdgeControl,
    ids: &Mutex<MessageIds>,
    s: &mut EdgeState,
    header: &EnvelopeHeader,
    payload: &[u8],
    duplicate: bool,
) {
    fn decode<'a, T: serde::Deserialize<'a>>(s: &mut EdgeState, payload: &'a [u8]) -> Option<T> {
        let v = serde_json::from_slice(payload).ok();
        if v.is_none() {
            s.bad_payloads += 1;
        }
        v
    }
    let event = {
        match header.subtype {
            Subtype::ROUTE_SNAPSHOT_BEGIN => {
                let Some(begin) = decode::<RouteSnapshotBegin>(s, payload) else {
                    return;
                };
                s.routes.handle_begin(&mut lock(ids), begin)
            }
            Subtype::ROUTE_SNAPSHOT_CHUNK => {
                let Some(chunk) = decode::<RouteSnapshotChunk>(s, payload) else {
                    return;
                };
                s.routes.handle_chunk(&mut lock(ids), &chunk)
            }
            Subtype::ROUTE_SNAPSHOT_COMMIT => {
                let Some(commit) = decode::<RouteSnapshotCommit>(s, payload) else {
                    return;
                };
                s.routes.handle_commit(
                    &mut lock(ids),
                    header.message_id,
                    header.cluster_epoch,
                    header.projection_version,
                    &commit,
                    duplicate,
                )
            }
            Subtype::ROUTE_DELTA => {
                let Some(delta) = decode::<RouteDelta>(s, payload) else {
                    return;
                };
                s.routes
                    .handle_delta(&mut lock(ids), header.message_id, delta, duplicate)
            }
            _ => return,
        }
    };
    let send = match event {
        EdgeSyncEvent::Stored | EdgeSyncEvent::Ignored => None,
        EdgeSyncEvent::Committed { ack } => {
            if s.link.state() != LinkState::Ready {
                let (epoch, version) = s.routes.position();
                tracing::info!(
                    epoch,
                    version,
                    "edge ready: the centre's projection is committed"
                );
            }
            s.link.ready();
            Some(ack)
        }
        EdgeSyncEvent::Applied { ack, .. } | EdgeSyncEvent::ReAcked { ack } => Some(ack),
        EdgeSyncEvent::Resync { request, .. } => {
            s.link.not_ready();
            Some(request)
        }
    };
    if let Some(send) = send {
        if control.send_control(&send).is_err() {
            s.send_failures += 1;
        }
    }
}
