//! The centre's voice relay between its edges and its own devices
//! (draarl-interconnect §2, §4.3, §4.5, §5.2, §5.4): Type 0 on the device
//! UDP port, the checks of each RelayUpstream, recording once,
//! centre-local delivery, and one RelayDownstream per target edge; and
//! the relay of centre-direct voice to the edges with source `center`.
//!
//! ```text
//!  UDP reader: Type 0 shape? ─no─▶ device ingress (unchanged)
//!     └─ DataPlane::handle_datagram (§4.3: session, HMAC, identity, ±2 s, replay, budget,
//!          DataBind proof binds the address, bound source, 0x30 only, queues 512 / 4096)
//!          not consumed ─▶ device ingress (which rejects Type 0)   consumed ─▶ doorbell
//!  relay worker (`refl-relay`): poll_accepted (≤ 200 ms old)
//!     ─▶ check_upstream (§5.2) ─▶ record once (Recorder / text event) ─▶ local delivery
//!        (domain snapshot, the local floor, FanoutEngine) ─▶ downstream per target edge
//!  shard: a centre-direct frame ─▶ from_centre: edges in its domain? ─▶ lease as `center`
//!        ─▶ downstream per target edge (no local delivery again, no recording)
//!  downstream: DataPlane::relay_downstream (target's version, cluster epoch, hop + 1)
//!        ─▶ bound ─▶ UDP from the device socket │ unbound ─▶ `type0` control frame
//! ```
//!
//! Without `[interconnect]` none of this exists (the reader and the shards
//! hold no relay); with it and no edge connected, a centre-direct frame
//! costs one atomic load.

use std::net::{SocketAddr, UdpSocket};
use std::sync::atomic::{AtomicBool, Ordering::Relaxed};
use std::sync::mpsc::{self, Receiver, SyncSender};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use super::super::fanout::FanoutEngine;
use super::super::shared_tables::SharedTables;
use super::super::wall_clock::unix_ms;
use super::centre_device_auth::CentreStore;
use super::centre_devices::{CentreDevices, EdgeEndpoints};
use super::centre_directory::CentreDirectory;
use super::centre_stats::ControlServerStats;
use super::centre_tables::CentreTables;
use super::centre_voice_stats::CentreVoiceStats;
use crate::codec::interconnect::{
    is_truncated_envelope, peek, InnerKind, NodeId, RelayFrame, RelayHeader,
};
use crate::codec::{self, HEADER_LEN};
use crate::core::interconnect::{
    centre_relay_header, centre_talker_lease, check_upstream, tag_reserved, talker_of, Accepted,
    ControlRef, DataPlane, DownstreamTarget, Outbound, Path, Rejection, Verdict,
};
use crate::core::{CrossShard, Recorder};
use crate::model::{DeviceKey, Directory, Frame, FrameKind, RecordingConfig, StoreEvent};

/// How long the relay worker waits for the reader's doorbell before it
/// drives its timers (stale queued frames, recordings).
pub const RELAY_TICK: Duration = Duration::from_millis(20);

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(PoisonError::into_inner)
}

/// What the relay is built from.
pub(crate) struct RelayParts {
    /// The centre's Type 0 data plane (the control server's).
    pub(crate) data: Arc<Mutex<DataPlane>>,
    /// The control server's counters (`active_nodes`).
    pub(crate) control_stats: Arc<ControlServerStats>,
    /// The dispatcher's tables.
    pub(crate) tables: CentreTables,
    /// Its counters.
    pub(crate) stats: Arc<CentreVoiceStats>,
    /// The centre's directory.
    pub(crate) directory: Arc<CentreDirectory>,
    /// The shards' shared tables (domain snapshots, floors).
    pub(crate) shared: Arc<SharedTables>,
    /// The fan-out engine.
    pub(crate) engine: Arc<FanoutEngine>,
    /// A clone of the device UDP socket.
    pub(crate) sock: UdpSocket,
    /// The store writer.
    pub(crate) store: Arc<dyn CentreStore>,
    /// `[recording]`, when on.
    pub(crate) recording: Option<RecordingConfig>,
}

/// The relay shared by the UDP reader, its worker and the shards.
pub struct CentreRelay {
    data: Arc<Mutex<DataPlane>>,
    control_stats: Arc<ControlServerStats>,
    tables: CentreTables,
    stats: Arc<CentreVoiceStats>,
    directory: Arc<CentreDirectory>,
    shared: Arc<SharedTables>,
    engine: Arc<FanoutEngine>,
    sock: UdpSocket,
    store: Arc<dyn CentreStore>,
    recorder: Option<Mutex<Recorder>>,
    doorbell: SyncSender<()>,
}

impl std::fmt::Debug for CentreRelay {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("CentreRelay").finish_non_exhaustive()
    }
}

impl CentreRelay {
    /// Builds the relay and starts its worker thread, which runs until
    /// `stop` is set.
    ///
    /// # Errors
    /// The thread could not be spawned.
    pub(crate) fn start(
        parts: RelayParts,
        stop: Arc<AtomicBool>,
    ) -> std::io::Result<(Arc<Self>, JoinHandle<()>)> {
        let (doorbell, rung) = mpsc::sync_channel(1);
        parts
            .shared
            .count_endpoints_elsewhere(Arc::new(EdgeEndpoints(Arc::clone(&parts.tables.devices))));
        let relay = Arc::new(Self {
            data: parts.data,
            control_stats: parts.control_stats,
            tables: parts.tables,
            stats: parts.stats,
            directory: parts.directory,
            shared: parts.shared,
            engine: parts.engine,
            sock: parts.sock,
            store: parts.store,
            recorder: parts.recording.map(|c| Mutex::new(Recorder::new(c))),
            doorbell,
        });
        let worker = Arc::clone(&relay);
        let thread = std::thread::Builder::new()
            .name("refl-relay".into())
            .spawn(move || worker.run(&rung, &stop))?;
        Ok((relay, thread))
    }

    /// The reader's Type 0 hook (§4.3): whether the datagram read from
    /// `src` at `at` was consumed; a datagram not shaped like Type 0, or
    /// refused in steps 2–6, is left to the device path.
    pub fn handle_datagram(&self, at: Instant, src: SocketAddr, datagram: &[u8]) -> bool {
        if peek(datagram).is_none() && !is_truncated_envelope(datagram) {
            return false;
        }
        let verdict = lock(&self.data).handle_datagram(at, unix_ms(), src, datagram);
        match verdict {
            Verdict::NotType0 => false,
            Verdict::Queued => {
                let _ = self.doorbell.try_send(());
                true
            }
            Verdict::Bound(_) => true,
            Verdict::Rejected(r) => Rejection::is_consumed(&r),
        }
    }

    fn run(&self, rung: &Receiver<()>, stop: &AtomicBool) {
        while !stop.load(Relaxed) {
            let _ = rung.recv_timeout(RELAY_TICK);
            let now = Instant::now();
            loop {
                let next = lock(&self.data).poll_accepted(now);
                match next {
                    Some(a) => self.upstream(now, &a),
                    None => break,
                }
            }
            lock(&self.data).handle_timeout(now);
            self.tick_recorder(now);
        }
    }

    fn tick_recorder(&self, now: Instant) {
        let Some(rec) = &self.recorder else {
            return;
        };
        let mut rec = lock(rec);
        rec.tick(now);
        while let Some(r) = rec.poll() {
            if !self.store.recording(r) {
                self.stats
                    .dispatch
                    .relay_store_events_dropped
                    .fetch_add(1, Relaxed);
            }
        }
        *lock(&self.stats.recording) = rec.stats().clone();
    }

    /// One accepted RelayUpstream (§5.2).
    fn upstream(&self, now: Instant, a: &Accepted) {
        let control = ControlRef {
            node: a.node_id,
            control_session: a.header.node_session_id,
        };
        let checked = {
            let mut d = lock(&self.tables.devices);
            let CentreDevices {
                owners,
                routes,
                leases,
                edge_routes,
                ..
            } = &mut *d;
            check_upstream(
                owners,
                routes,
                leases,
                &mut lock(&self.stats.relay),
                now,
                control,
                &a.payload,
            )
            .map(|r| {
                let targets = edge_routes.targets(r.header.domain_id, a.node_id);
                (r, targets)
            })
        };
        let Ok((relay, targets)) = checked else {
            self.stats.node(a.node_id, |c| c.relay_rejects += 1);
            return;
        };
        let wall = unix_ms();
        let data = relay.inner.get(HEADER_LEN..).unwrap_or_default();
        match relay.kind {
            InnerKind::Voice => {
                if let Some(rec) = &self.recorder {
                    lock(rec).push(now, wall, relay.talker, relay.group_id, data);
                }
            }
            InnerKind::Text => {
                let text = StoreEvent::Text {
                    device: relay.talker,
                    group_id: relay.group_id,
                    unix_ms: wall,
                    text: data.to_vec(),
                };
                if !self.store.event(text) {
                    self.stats
                        .dispatch
                        .relay_store_events_dropped
                        .fetch_add(1, Relaxed);
                }
            }
        }
        self.deliver_locally(
            now,
            relay.talker,
            relay.group_id,
            relay.header.domain_id,
            relay.kind,
            relay.inner,
        );
        let to_edges = tag_reserved(relay.inner, 0);
        self.downstream(
            wall,
            a.node_id,
            a.header.hop_count,
            relay.header,
            &to_edges,
            targets,
        );
    }

    /// Centre-local delivery of an edge's frame (§5.2 step 3): the
    /// centre-direct receivers of `domain` through the fan-out engine,
    /// voice through the domain's local floor; no recording, no relay.
    fn deliver_locally(
        &self,
        now: Instant,
        talker: DeviceKey,
        group_id: i64,
        domain: u64,
        kind: InnerKind,
        inner: &[u8],
    ) {
        let Ok(domain) = i64::try_from(domain) else {
            return;
        };
        let voice = kind == InnerKind::Voice;
        let targets = self.directory.with(|dir| {
            let mut shared = Arc::clone(&self.shared);
            if voice {
                shared.voice_targets(dir, domain, talker, now)
            } else {
                Ok(shared.targets(dir, domain))
            }
        });
        let Ok((snapshot, _)) = targets else {
            self.stats
                .dispatch
                .relay_local_floor_drops
                .fetch_add(1, Relaxed);
            return;
        };
        if snapshot.is_empty() {
            return;
        }
        let session_packet = snapshot.has_sessions().then(|| {
            let group = u32::try_from(group_id).unwrap_or(0);
            Arc::from(tag_reserved(inner, group))
        });
        self.engine.submit(Frame {
            kind: if voice {
                FrameKind::Voice
            } else {
                FrameKind::Text
            },
            created: now,
            packet: Arc::from(tag_reserved(inner, 0)),
            session_packet,
            snapshot,
            exclude: SocketAddr::from(([0, 0, 0, 0], 0)),
            exclude_connection: None,
        });
        self.stats
            .dispatch
            .relay_local_deliveries
            .fetch_add(1, Relaxed);
    }

    /// One RelayDownstream per target edge (§5.2 step 4) of a relay from
    /// `origin` (hop `hop`) with `header` and `inner`; never to `origin`
    /// nor `center`.
    fn downstream(
        &self,
        wall: i64,
        origin: NodeId,
        hop: u8,
        header: RelayHeader,
        inner: &[u8],
        targets: Vec<NodeId>,
    ) {
        if targets.is_empty() {
            return;
        }
        let (epoch, targets): (u64, Vec<DownstreamTarget>) = {
            let routes = lock(&self.tables.routes);
            let targets = targets
                .into_iter()
                .filter_map(|node_id| {
                    routes.version(node_id).map(|v| DownstreamTarget {
                        node_id,
                        projection_version: v,
                    })
                })
                .collect();
            (routes.cluster_epoch(), targets)
        };
        let frame = RelayFrame { header, inner };
        let ids = self.tables.sender.message_ids();
        let out: Vec<Outbound> = {
            let mut data = lock(&self.data);
            let built =
                data.relay_downstream(&mut lock(&ids), wall, epoch, origin, hop, &frame, targets);
            if built.is_err() {
                self.stats
                    .dispatch
                    .relay_downstream_send_failures
                    .fetch_add(1, Relaxed);
            }
            std::iter::from_fn(|| data.poll_transmit()).collect()
        };
        let counters = &self.stats.dispatch;
        for o in out {
            let sent = match o.path {
                Path::Udp(addr) => {
                    counters.relay_downstream_udp.fetch_add(1, Relaxed);
                    self.sock.send_to(&o.datagram, addr).is_ok()
                }
                Path::Control => {
                    counters.relay_downstream_control.fetch_add(1, Relaxed);
                    self.tables
                        .sender
                        .send_type0(o.node_id, o.session_id, &o.datagram)
                        .is_ok()
                }
            };
            if !sent {
                counters
                    .relay_downstream_send_failures
                    .fetch_add(1, Relaxed);
            }
        }
    }

    /// A shard's new session of `key` (a login directly at the centre):
    /// the session an edge holds for the same device is revoked
    /// (`session_migrated`, `centre_direct_sessions.rs`); nothing when no
    /// edge is connected.
    pub fn direct_login(&self, key: DeviceKey) {
        if self.control_stats.active_nodes.load(Relaxed) == 0 {
            return;
        }
        super::centre_direct_sessions::revoke_edge_session(&self.tables, &self.stats, key);
    }

    /// A shard's frame of a centre-direct talker (§5.2 last paragraph):
    /// relayed with source `center` to every edge with receivers in its
    /// domain, voice under the domain's speaker lease; nothing when no
    /// edge is connected. `dir` is the shard's directory.
    pub fn from_centre(&self, dir: &Directory, frame: &Frame, now: Instant) {
        if self.control_stats.active_nodes.load(Relaxed) == 0 {
            return;
        }
        let Ok(domain) = u64::try_from(frame.snapshot.domain_id) else {
            return;
        };
        let targets = lock(&self.tables.devices)
            .edge_routes
            .targets(domain, NodeId::CENTRE);
        if targets.is_empty() {
            return;
        }
        let counters = &self.stats.dispatch;
        let talker = codec::decode(&frame.packet)
            .ok()
            .and_then(|p| talker_of(&p.header, |n| dir.user_by_name(n).map(|u| u.id)));
        let Some(talker) = talker else {
            counters.relay_centre_invalid_drops.fetch_add(1, Relaxed);
            return;
        };
        let lease_id = match frame.kind {
            FrameKind::Text => 0,
            FrameKind::Voice => {
                let ids = self.tables.sender.message_ids();
                let granted = {
                    let mut d = lock(&self.tables.devices);
                    let mut ids = lock(&ids);
                    centre_talker_lease(&mut d.leases, &mut ids, now, talker, domain)
                };
                match granted {
                    Some(id) => id,
                    None => {
                        counters.relay_centre_lease_denied.fetch_add(1, Relaxed);
                        return;
                    }
                }
            }
        };
        counters.relay_centre_frames.fetch_add(1, Relaxed);
        let header = centre_relay_header(talker, domain, lease_id);
        self.downstream(unix_ms(), NodeId::CENTRE, 0, header, &frame.packet, targets);
    }
}
