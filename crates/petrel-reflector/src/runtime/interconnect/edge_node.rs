//! The edge's side of the connection sequence, route sync and the
//! centre's device messages (draarl-interconnect §3.6 steps 2–6, §3.7,
//! §3.8, §3.9, §3.10, §4.5, §6.1): drives the [`EdgeControl`] events into
//! the sans-IO link policy ([`crate::core::interconnect::EdgeLink`]),
//! route sync ([`EdgeRouteSync`]), session reconfirmation
//! ([`EdgeReconfirm`]) and device side ([`EdgeDevices`]), so the edge
//! keeps its devices' sessions across a centre restart or reconnect,
//! becomes **ready** after the centre's snapshot, keeps its local grace
//! when the centre goes away, and binds its UDP address.
//!
//! ```text
//!  Connected ─▶ EdgeLink::attached, EdgeRouteSync::reset, devices: link changed
//!               ─▶ CenterUDP set, DataBind request
//!               ─▶ centre offers bit 7? ─no─▶ every session removed (devices log in again)
//!               ─▶ live sessions (fresh, grant unexpired) in batches of ≤ 128 (0x25), one at a time
//!  0x25 answer ─▶ old → new session ids swapped, refused ones removed (session_reconfirm_rejected)
//!               ─▶ next batch │ done: node_ready
//!  bad answer, a grant that does not fit, 5 s without an answer ─▶ close the session (reconnect, backoff)
//!  0x06 challenge ─▶ DataPlane::send_proof ─▶ proof over UDP from the device socket (§4.5)
//!  0x10/0x11/0x12 snapshot ─▶ Committed ─▶ RouteAck, EdgeLink::ready, devices: ready(projection)
//!  0x13 delta ─▶ Applied ─▶ RouteAck, devices: apply_delta     resync ─▶ not ready, 0x15
//!    (while confirming: stored and ACKed only, not applied to the sessions)
//!  0x20/0x21/0x23/0x28/0x31 ─▶ EdgeDevices::handle_control ─▶ actions (EdgeOutput)
//!  Disconnected ─▶ EdgeLink::detached (local grace), devices: link changed
//!  every 100 ms: grace expiry ─▶ every session removed (control_unavailable);
//!                reconfirmation answer overdue ─▶ close the session
//!  every 5 s while connected: DataBind request (§3.6 step 3)
//! ```
//!
//! While confirming, the link is attached but not ready, so device packets
//! are dropped (fail closed, §6.1). The device datagrams themselves are the
//! edge server's reader's (`edge_reader.rs`); without an [`EdgeOutput`] (a
//! control-only edge) the device actions are discarded.

use std::net::SocketAddr;
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::time::{Duration, Instant};

use tokio::sync::{mpsc, watch};

use super::super::wall_clock::unix_ms;
use super::control_send::ControlEnvelope;
use super::edge::{EdgeControl, EdgeEvent};
use super::edge_output::EdgeOutput;
use crate::codec::interconnect::messages::{
    ConfirmResponse, RouteDelta, RouteSnapshotBegin, RouteSnapshotChunk, RouteSnapshotCommit,
};
use crate::codec::interconnect::{DataBind, EnvelopeHeader, Features, Flags, Subtype};
use crate::core::interconnect::{
    drop_unconfirmable, removal_reason, ConfirmStep, EdgeAction, EdgeConfirmCounters, EdgeDevices,
    EdgeDevicesConfig, EdgeLink as LinkPolicy, EdgeReconfirm, EdgeRouteSync, EdgeSyncEvent,
    LinkState, MessageIds, DISCONNECTED_LOCAL_GRACE,
};

/// How often the edge drives its timers (grace expiry, DataBind).
pub const EDGE_TICK: Duration = Duration::from_millis(100);
/// Domains with an edge-local floor during the grace period, at most.
pub const MAX_LOCAL_FLOORS: usize = 4096;
/// The DataBind request is repeated this often while connected (§3.6
/// step 3, §4.5: NAT rebinding heals within ~5 s).
pub const DATA_BIND_INTERVAL: Duration = Duration::from_secs(5);

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(PoisonError::into_inner)
}

/// How the edge node runs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct EdgeNodeConfig {
    /// `DisconnectedLocalGraceSeconds` ([`DISCONNECTED_LOCAL_GRACE`]).
    pub grace: Duration,
    /// The device side's limits and timers.
    pub devices: EdgeDevicesConfig,
    /// The centre's UDP address (`CenterUDP`); `None` sends upstream over
    /// the control connection and binds nothing.
    pub centre_udp: Option<SocketAddr>,
    /// DataBind request period ([`DATA_BIND_INTERVAL`]).
    pub bind_interval: Duration,
}

impl Default for EdgeNodeConfig {
    fn default() -> Self {
        Self {
            grace: DISCONNECTED_LOCAL_GRACE,
            devices: EdgeDevicesConfig::default(),
            centre_udp: None,
            bind_interval: DATA_BIND_INTERVAL,
        }
    }
}

/// The edge's control-side state shared with its UDP path. One mutex
/// guards it; the device reader holds it for the decision about one
/// datagram, this node's task for one control event.
#[derive(Debug)]
pub struct EdgeState {
    /// The link policy (§6.1).
    pub link: LinkPolicy,
    /// The route projection (§3.7).
    pub routes: EdgeRouteSync,
    /// The device side: sessions, speaker state, downstream wait,
    /// receivers (§3.8, §3.10, §4.7, §5).
    pub devices: EdgeDevices,
    /// Route and DataBind payloads that did not decode.
    pub bad_payloads: u64,
    /// Control messages that could not be queued to the centre.
    pub send_failures: u64,
    /// Envelopes of subtypes the edge does not handle (credential
    /// rotation, device configuration, heartbeats), and session
    /// confirmation answers outside an attempt.
    pub unhandled: u64,
    /// DataBind requests sent (§3.6 step 3).
    pub bind_requests: u64,
    /// DataBind proofs queued for UDP.
    pub bind_proofs: u64,
    /// The reconfirmation in progress (§3.9), between connect and
    /// `node_ready`.
    pub reconfirm: Option<EdgeReconfirm>,
    /// Reconfirmation counters.
    pub confirm_counters: EdgeConfirmCounters,
}

/// The running edge node; dropping it stops the task (and the control
/// client with it, once the last handle is gone).
#[derive(Debug)]
pub struct EdgeNode {
    control: Arc<EdgeControl>,
    state: Arc<Mutex<EdgeState>>,
    link: watch::Receiver<LinkState>,
    task: tokio::task::JoinHandle<()>,
}

impl EdgeNode {
    /// Starts driving `control` (inside a tokio runtime), with the local
    /// grace `grace` ([`DISCONNECTED_LOCAL_GRACE`] by default) and no
    /// device side (the device actions are discarded). `None` when the
    /// control client's events were taken already.
    pub fn spawn(control: EdgeControl, grace: Duration) -> Option<Self> {
        let cfg = EdgeNodeConfig {
            grace,
            ..EdgeNodeConfig::default()
        };
        Self::spawn_with(Arc::new(control), cfg, None)
    }

    /// [`EdgeNode::spawn`] with the default 15 s grace.
    pub fn spawn_default(control: EdgeControl) -> Option<Self> {
        Self::spawn(control, DISCONNECTED_LOCAL_GRACE)
    }

    /// Starts driving `control` with `cfg`; the device side's actions go
    /// to `output` (the edge server's socket, fan-out engine and data
    /// plane). `None` when the control client's events were taken already.
    pub(crate) fn spawn_with(
        control: Arc<EdgeControl>,
        cfg: EdgeNodeConfig,
        output: Option<Arc<EdgeOutput>>,
    ) -> Option<Self> {
        let events = control.take_events()?;
        let state = Arc::new(Mutex::new(EdgeState {
            link: LinkPolicy::new(cfg.grace, MAX_LOCAL_FLOORS),
            routes: EdgeRouteSync::new(),
            devices: EdgeDevices::new(cfg.devices),
            bad_payloads: 0,
            send_failures: 0,
            unhandled: 0,
            bind_requests: 0,
            bind_proofs: 0,
            reconfirm: None,
            confirm_counters: EdgeConfirmCounters::default(),
        }));
        let (tx, link) = watch::channel(LinkState::Starting);
        let driver = Driver {
            control: Arc::clone(&control),
            state: Arc::clone(&state),
            ids: control.message_ids(),
            cfg,
            output,
            actions: Vec::new(),
        };
        let task = tokio::spawn(run(driver, events, tx));
        Some(Self {
            control,
            state,
            link,
            task,
        })
    }

    /// The control client.
    pub fn control(&self) -> &Arc<EdgeControl> {
        &self.control
    }

    /// The shared state (link policy, route sync, device side).
    pub fn state(&self) -> Arc<Mutex<EdgeState>> {
        Arc::clone(&self.state)
    }

    /// The link state as last published.
    pub fn link_state(&self) -> LinkState {
        *self.link.borrow()
    }

    /// Stops the task and waits until it has ended (its handles on the
    /// control client and the device output are gone then).
    pub async fn shutdown(mut self) {
        self.task.abort();
        let _ = (&mut self.task).await;
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

/// What the task works with.
struct Driver {
    control: Arc<EdgeControl>,
    state: Arc<Mutex<EdgeState>>,
    ids: Arc<Mutex<MessageIds>>,
    cfg: EdgeNodeConfig,
    output: Option<Arc<EdgeOutput>>,
    actions: Vec<EdgeAction>,
}

async fn run(
    mut d: Driver,
    mut events: mpsc::Receiver<EdgeEvent>,
    link_tx: watch::Sender<LinkState>,
) {
    let mut tick = tokio::time::interval(EDGE_TICK);
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    let mut next_bind: Option<Instant> = None;
    loop {
        tokio::select! {
            _ = tick.tick() => {
                let now = Instant::now();
                d.on_tick(now);
                if next_bind.is_some_and(|t| now >= t) {
                    next_bind = Some(now + d.cfg.bind_interval);
                    d.request_bind();
                }
            }
            event = events.recv() => {
                let Some(event) = event else { return };
                if matches!(event, EdgeEvent::Connected(_)) {
                    next_bind = d.cfg.centre_udp.map(|_| Instant::now() + d.cfg.bind_interval);
                }
                if matches!(event, EdgeEvent::Disconnected { .. }) {
                    next_bind = None;
                }
                d.on_event(event);
            }
        }
        d.flush();
        let now_state = lock(&d.state).link.state();
        link_tx.send_if_modified(|old| {
            let changed = *old != now_state;
            *old = now_state;
            changed
        });
    }
}

impl Driver {
    fn on_tick(&mut self, now: Instant) {
        let mut s = lock(&self.state);
        let s = &mut *s;
        let late = s
            .reconfirm
            .as_ref()
            .is_some_and(|r| r.timed_out(now, &mut s.confirm_counters));
        if late {
            s.reconfirm = None;
            if let Some(link) = self.control.link() {
                tracing::warn!("edge: no reconfirmation answer within 5 s; reconnecting");
                self.control.close_session(link.session_id);
            }
        }
        if s.link.handle_timeout(now) {
            tracing::warn!("edge grace period over: every device session is removed");
            s.devices.expire_all(
                &mut lock(&self.ids),
                unix_ms(),
                removal_reason::CONTROL_UNAVAILABLE,
            );
        }
        s.devices.take_actions(&mut self.actions);
    }

    fn on_event(&mut self, event: EdgeEvent) {
        match event {
            EdgeEvent::Connected(link) => {
                if let Some(addr) = self.cfg.centre_udp {
                    lock(&self.control.data_plane()).set_centre_address(Some(addr));
                }
                {
                    let mut s = lock(&self.state);
                    s.link.attached();
                    s.routes.reset();
                    s.devices.link_changed();
                }
                if self.cfg.centre_udp.is_some() {
                    self.request_bind();
                }
                self.start_reconfirm(link.session_id, link.features);
            }
            EdgeEvent::Envelope {
                header,
                payload,
                duplicate,
            } => self.on_envelope(&header, &payload, duplicate),
            EdgeEvent::Disconnected { .. } => {
                let mut s = lock(&self.state);
                s.reconfirm = None;
                s.link.detached(Instant::now());
                s.devices.link_changed();
            }
        }
    }

    fn on_envelope(&mut self, header: &EnvelopeHeader, payload: &[u8], duplicate: bool) {
        match header.subtype {
            Subtype::ROUTE_SNAPSHOT_BEGIN
            | Subtype::ROUTE_SNAPSHOT_CHUNK
            | Subtype::ROUTE_SNAPSHOT_COMMIT
            | Subtype::ROUTE_DELTA => self.on_route(header, payload, duplicate),
            Subtype::DATA_BIND => self.on_challenge(payload),
            Subtype::DEVICE_SESSION_CONFIRM => self.on_confirm(payload),
            _ => {
                let mut s = lock(&self.state);
                let handled = s.devices.handle_control(
                    &mut lock(&self.ids),
                    Instant::now(),
                    unix_ms(),
                    header,
                    payload,
                );
                if !handled {
                    s.unhandled += 1;
                }
                s.devices.take_actions(&mut self.actions);
            }
        }
    }

    /// §3.6 step 4: confirms the live sessions through the new control
    /// session `session_id` (if the centre offers bit 7; else they are
    /// dropped), then `node_ready`.
    fn start_reconfirm(&mut self, session_id: u64, features: Features) {
        let step = {
            let mut s = lock(&self.state);
            let s = &mut *s;
            let mut ids = lock(&self.ids);
            if features.contains(Features::SESSION_RECONFIRM) {
                let (attempt, step) = EdgeReconfirm::start(
                    &mut s.devices,
                    &mut ids,
                    Instant::now(),
                    unix_ms(),
                    session_id,
                    &mut s.confirm_counters,
                );
                s.reconfirm = attempt;
                step
            } else {
                if !s.devices.sessions().is_empty() {
                    tracing::warn!(
                        sessions = s.devices.sessions().len(),
                        "the centre cannot reconfirm sessions: every device logs in again"
                    );
                }
                drop_unconfirmable(
                    &mut s.devices,
                    &mut ids,
                    unix_ms(),
                    session_id,
                    &mut s.confirm_counters,
                );
                ConfirmStep::Done
            }
        };
        self.confirm_step(session_id, step);
    }

    /// The centre's answer to a reconfirmation batch (§3.9).
    fn on_confirm(&mut self, payload: &[u8]) {
        let Ok(resp) = serde_json::from_slice::<ConfirmResponse>(payload) else {
            lock(&self.state).bad_payloads += 1;
            return;
        };
        let step = {
            let mut s = lock(&self.state);
            let s = &mut *s;
            let Some(attempt) = s.reconfirm.as_mut() else {
                s.unhandled += 1;
                return;
            };
            let step = attempt.handle_response(
                &mut s.devices,
                &mut lock(&self.ids),
                Instant::now(),
                resp,
                &mut s.confirm_counters,
            );
            s.devices.take_actions(&mut self.actions);
            match step {
                Some(step) => step,
                None => {
                    s.unhandled += 1;
                    return;
                }
            }
        };
        if let Some(link) = self.control.link() {
            self.confirm_step(link.session_id, step);
        }
    }

    /// Carries out one reconfirmation step of the session `session_id`.
    fn confirm_step(&mut self, session_id: u64, step: ConfirmStep) {
        match step {
            ConfirmStep::Send(batch) => {
                if self.control.send_control(&batch).is_err() {
                    let mut s = lock(&self.state);
                    s.send_failures += 1;
                    s.reconfirm = None;
                    drop(s);
                    self.control.close_session(session_id);
                }
            }
            ConfirmStep::Done => {
                {
                    let mut s = lock(&self.state);
                    s.reconfirm = None;
                    // Whatever was stored while confirming is replaced by
                    // the snapshot node_ready brings.
                    s.routes.reset();
                    s.devices.take_actions(&mut self.actions);
                }
                if self.control.send_node_ready().is_err() {
                    lock(&self.state).send_failures += 1;
                }
            }
            ConfirmStep::Failed(why) => {
                tracing::warn!(why, "edge session reconfirmation failed; reconnecting");
                lock(&self.state).reconfirm = None;
                self.control.close_session(session_id);
            }
        }
    }

    /// Sends a DataBind `request` over the control connection (§4.5).
    fn request_bind(&self) {
        let env = ControlEnvelope {
            subtype: Subtype::DATA_BIND,
            flags: Flags::CONTROL,
            cluster_epoch: 0,
            projection_version: 0,
        };
        let sent = self
            .control
            .send_envelope(&env, &DataBind::Request.to_vec())
            .is_ok();
        let mut s = lock(&self.state);
        if sent {
            s.bind_requests += 1;
        } else {
            s.send_failures += 1;
        }
    }

    /// The centre's `challenge`: the proof goes over UDP from the device
    /// socket, whose address the centre then binds (§4.5).
    fn on_challenge(&mut self, payload: &[u8]) {
        let Ok(DataBind::Challenge(challenge)) = DataBind::parse(payload) else {
            lock(&self.state).bad_payloads += 1;
            return;
        };
        let Some(output) = &self.output else {
            return;
        };
        let queued = {
            let mut ids = lock(&self.ids);
            lock(&self.control.data_plane())
                .send_proof(&mut ids, unix_ms(), challenge)
                .is_ok()
        };
        if queued {
            lock(&self.state).bind_proofs += 1;
        }
        output.send_outbound();
    }

    fn on_route(&mut self, header: &EnvelopeHeader, payload: &[u8], duplicate: bool) {
        let mut s = lock(&self.state);
        let s = &mut *s;
        let mut ids = lock(&self.ids);
        let Some(event) = route_event(s, &mut ids, header, payload, duplicate) else {
            s.bad_payloads += 1;
            return;
        };
        let now = Instant::now();
        // While confirming (§3.9), snapshots and deltas are stored and
        // ACKed but not applied to the sessions; node_ready follows.
        let confirming = s.reconfirm.is_some();
        let send = match event {
            EdgeSyncEvent::Stored | EdgeSyncEvent::Ignored => None,
            EdgeSyncEvent::Committed { ack } | EdgeSyncEvent::Applied { ack, .. } if confirming => {
                Some(ack)
            }
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
                if let Some(p) = s.routes.projection() {
                    s.devices.ready(&mut ids, now, unix_ms(), p);
                }
                Some(ack)
            }
            EdgeSyncEvent::Applied { ack, operations } => {
                let (epoch, version) = s.routes.position();
                s.devices
                    .apply_delta(&mut ids, now, unix_ms(), &operations, epoch, version);
                Some(ack)
            }
            EdgeSyncEvent::ReAcked { ack } => Some(ack),
            EdgeSyncEvent::Resync { request, .. } => {
                if !confirming {
                    s.link.not_ready();
                    s.devices.not_ready();
                }
                Some(request)
            }
        };
        drop(ids);
        if let Some(send) = send {
            if self.control.send_control(&send).is_err() {
                s.send_failures += 1;
            }
        }
        s.devices.take_actions(&mut self.actions);
    }

    /// Carries out the device actions gathered (without holding the state).
    fn flush(&mut self) {
        if self.actions.is_empty() {
            return;
        }
        let Some(output) = &self.output else {
            self.actions.clear();
            return;
        };
        let failed = output.run(&mut self.actions);
        if !failed.is_empty() {
            let now = Instant::now();
            let mut s = lock(&self.state);
            for domain in failed {
                s.devices.claim_send_failed(now, domain);
            }
        }
    }
}

/// Feeds one route sync message to the projection; `None` when its payload
/// does not decode.
fn route_event(
    s: &mut EdgeState,
    ids: &mut MessageIds,
    header: &EnvelopeHeader,
    payload: &[u8],
    duplicate: bool,
) -> Option<EdgeSyncEvent> {
    Some(match header.subtype {
        Subtype::ROUTE_SNAPSHOT_BEGIN => {
            let begin: RouteSnapshotBegin = serde_json::from_slice(payload).ok()?;
            s.routes.handle_begin(ids, begin)
        }
        Subtype::ROUTE_SNAPSHOT_CHUNK => {
            let chunk: RouteSnapshotChunk = serde_json::from_slice(payload).ok()?;
            s.routes.handle_chunk(ids, &chunk)
        }
        Subtype::ROUTE_SNAPSHOT_COMMIT => {
            let commit: RouteSnapshotCommit = serde_json::from_slice(payload).ok()?;
            s.routes.handle_commit(
                ids,
                header.message_id,
                header.cluster_epoch,
                header.projection_version,
                &commit,
                duplicate,
            )
        }
        _ => {
            let delta: RouteDelta = serde_json::from_slice(payload).ok()?;
            s.routes
                .handle_delta(ids, header.message_id, delta, duplicate)
        }
    })
}
