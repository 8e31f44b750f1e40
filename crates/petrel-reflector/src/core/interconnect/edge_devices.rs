//! The edge's device side, sans-IO (draarl-interconnect §3.6 step 6, §3.8,
//! §3.10, §4.7, §5.1, §5.3, §6.1): the local device sessions
//! ([`EdgeSessions`]), the speaker state for Type 5 ([`EdgeSpeaker`]), the
//! downstream wait ([`ProjectionWait`]) and the local receivers per domain
//! ([`EdgeReceivers`]), driven by device datagrams
//! (`edge_device_ingest.rs`), the centre's answers and downstream relays
//! (`edge_device_control.rs`), route sync and link changes (here), and
//! time. What to do comes out as [`EdgeAction`]s.
//!
//! ```text
//!  device datagram ─▶ handle_device ─┬─ Reply (heartbeat answer, auth reply)        ─▶ the device
//!                                    ├─ Control (DeviceAuth, renew, report)         ─▶ EdgeControl
//!                                    ├─ Claim (0x28 speaker lease)                  ─▶ EdgeControl
//!                                    ├─ Fanout (rewritten frame + domain snapshot)  ─▶ FanoutEngine
//!                                    └─ Upstream (one RelayUpstream per frame)      ─▶ DataPlane
//!  centre answer / 0x31 ─▶ handle_control / handle_downstream ─▶ ProjectionWait ─▶ Fanout
//!  route sync ─▶ ready / apply_delta / not_ready;  link ─▶ attached / detached / expire_all
//!  time ─▶ handle_timeout (speaker claims, parked downstream, session sweep every `sweep`)
//! ```
//!
//! The runtime takes the actions after every call
//! ([`EdgeDevices::take_actions`]), so the action list holds at most what
//! one call produced.

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::{Duration, Instant};

use crate::codec::interconnect::messages::RouteOperation;
use crate::codec::interconnect::RelayHeader;
use crate::model::{Frame, FrameKind, Snapshot, Transmit};

use super::control_send::ControlSend;
use super::device_sessions_edge::{EdgeSessionCounters, EdgeSessions, EdgeSessionsConfig, Removal};
use super::edge_receivers::{EdgeReceivers, ReceiverCounters};
use super::outbound::MessageIds;
use super::projection_wait::{ProjectionWait, ProjectionWaitConfig, WaitCounters};
use super::route_projection::Projection;
use super::speaker_lease_edge::{EdgeLeaseCounters, EdgeSpeaker};

/// How often silent sessions and expired grants are swept (§3.8 timers
/// are 20 s and the 2-min grant: one second is fine-grained enough).
pub const SESSION_SWEEP: Duration = Duration::from_secs(1);
/// Domains with a speaker state at most (claims, leases, blocks).
pub const MAX_LEASE_DOMAINS: usize = 65_536;

/// Limits and timers of the edge's device side.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct EdgeDevicesConfig {
    /// The session table (25 000 sessions, 20 s device timeout, 30 s
    /// renew-before).
    pub sessions: EdgeSessionsConfig,
    /// The downstream wait rule (1024 frames, 200 ms, 20 ms re-check).
    pub wait: ProjectionWaitConfig,
    /// Domains with a speaker state at most ([`MAX_LEASE_DOMAINS`]).
    pub lease_domains: usize,
    /// Send paths of the fan-out engine its snapshots are split for.
    pub partitions: usize,
    /// Session sweep period ([`SESSION_SWEEP`]).
    pub sweep: Duration,
}

impl Default for EdgeDevicesConfig {
    fn default() -> Self {
        Self {
            sessions: EdgeSessionsConfig::default(),
            wait: ProjectionWaitConfig::default(),
            lease_domains: MAX_LEASE_DOMAINS,
            partitions: 2,
            sweep: SESSION_SWEEP,
        }
    }
}

/// A RelayUpstream to seal and send (`DataPlane::relay_upstream`, §4.6):
/// the relay header (RequiredProjectionVersion = the edge's own version)
/// and the rewritten inner packet.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Upstream {
    /// Session, epoch, domain, the edge's projection version, lease id.
    pub header: RelayHeader,
    /// The inner DraARLv1 packet (forwarding rewrite applied).
    pub inner: Arc<[u8]>,
}

/// What the runtime does for the device side.
#[derive(Debug, Clone)]
pub enum EdgeAction {
    /// A datagram to one device (heartbeat answer, the centre's reply).
    Reply(Transmit),
    /// A control message to the centre.
    Control(ControlSend),
    /// A speaker-lease claim for `domain` (§3.10); when it cannot be
    /// queued, call [`EdgeDevices::claim_send_failed`].
    Claim {
        /// The domain claimed.
        domain: u64,
        /// The 0x28 claim.
        send: ControlSend,
    },
    /// A frame for the local fan-out engine.
    Fanout(Frame),
    /// A RelayUpstream to the centre.
    Upstream(Upstream),
}

/// Counters of the edge's device side (the session table, speaker state,
/// wait rule and receiver lists have their own).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct EdgeDeviceCounters {
    /// Device datagrams handled.
    pub packets: u64,
    /// Datagrams that are no valid DraARLv1 packet (§2.2).
    pub invalid_packets: u64,
    /// Type 1 app logins refused (`node_ghost_multi_session_unsupported`).
    pub app_logins_refused: u64,
    /// Replies not sent because they were larger than the request.
    pub replies_withheld: u64,
    /// Non-heartbeat packets from an identity without a live session at
    /// that address.
    pub unknown_device_drops: u64,
    /// Heartbeats of unknown devices while the edge may not authenticate
    /// (link not ready, §3.6).
    pub auth_unavailable_drops: u64,
    /// Heartbeats answered locally.
    pub heartbeats_answered: u64,
    /// Type 3 packets dropped (configuration is not proxied).
    pub config_drops: u64,
    /// Types 4/5 of a send-banned route.
    pub send_ban_drops: u64,
    /// Types 4/5 of a route without a domain.
    pub no_domain_drops: u64,
    /// Type 5 frames from live sessions.
    pub voice_frames: u64,
    /// Type 4 frames from live sessions.
    pub text_frames: u64,
    /// Frames handed to the local fan-out.
    pub local_frames: u64,
    /// Frames with no local receiver in their domain (but the sender).
    pub no_receiver_frames: u64,
    /// RelayUpstream frames produced.
    pub upstream_frames: u64,
    /// Downstream frames delivered to the local fan-out.
    pub downstream_frames: u64,
    /// Downstream frames whose inner packet broke §4.6.
    pub downstream_invalid: u64,
    /// Centre payloads that did not decode.
    pub bad_payloads: u64,
    /// Sessions installed from grants.
    pub installed: u64,
    /// Sessions removed (timeouts, grant expiry, revoke, route removal,
    /// eviction, control unavailable).
    pub removed: u64,
}

impl EdgeDeviceCounters {
    /// Every counter with its name, for metrics export.
    pub fn counters(&self) -> Vec<(&'static str, u64)> {
        vec![
            ("packets", self.packets),
            ("invalid_packets", self.invalid_packets),
            ("app_logins_refused", self.app_logins_refused),
            ("replies_withheld", self.replies_withheld),
            ("unknown_device_drops", self.unknown_device_drops),
            ("auth_unavailable_drops", self.auth_unavailable_drops),
            ("heartbeats_answered", self.heartbeats_answered),
            ("config_drops", self.config_drops),
            ("send_ban_drops", self.send_ban_drops),
            ("no_domain_drops", self.no_domain_drops),
            ("voice_frames", self.voice_frames),
            ("text_frames", self.text_frames),
            ("local_frames", self.local_frames),
            ("no_receiver_frames", self.no_receiver_frames),
            ("upstream_frames", self.upstream_frames),
            ("downstream_frames", self.downstream_frames),
            ("downstream_invalid", self.downstream_invalid),
            ("bad_payloads", self.bad_payloads),
            ("installed", self.installed),
            ("removed", self.removed),
        ]
    }
}

/// A rewritten Type 4/5 frame of a local session, held by the speaker
/// state while its lease is claimed (§3.10) or delivered at once.
#[derive(Debug, Clone)]
pub(super) struct HeldFrame {
    pub(super) session_id: u64,
    pub(super) session_epoch: u64,
    pub(super) domain: u64,
    pub(super) packet: Arc<[u8]>,
    pub(super) from: SocketAddr,
    pub(super) created: Instant,
}

/// The edge's device side; see the module docs.
#[derive(Debug)]
pub struct EdgeDevices {
    pub(super) cfg: EdgeDevicesConfig,
    pub(super) sessions: EdgeSessions,
    pub(super) speaker: EdgeSpeaker<HeldFrame>,
    pub(super) wait: ProjectionWait,
    pub(super) receivers: EdgeReceivers,
    /// (cluster epoch, version) of the applied projection.
    pub(super) projection: (u64, u64),
    next_sweep: Option<Instant>,
    pub(super) actions: Vec<EdgeAction>,
    pub(super) counters: EdgeDeviceCounters,
}

/// The "no sender" address of downstream frames (no source exclusion,
/// §5.3).
pub(super) const NO_SENDER: SocketAddr = SocketAddr::V4(std::net::SocketAddrV4::new(
    std::net::Ipv4Addr::UNSPECIFIED,
    0,
));

impl EdgeDevices {
    /// An empty device side.
    pub fn new(cfg: EdgeDevicesConfig) -> Self {
        Self {
            cfg,
            sessions: EdgeSessions::new(cfg.sessions),
            speaker: EdgeSpeaker::new(cfg.lease_domains),
            wait: ProjectionWait::new(cfg.wait),
            receivers: EdgeReceivers::new(cfg.partitions),
            projection: (0, 0),
            next_sweep: None,
            actions: Vec::new(),
            counters: EdgeDeviceCounters::default(),
        }
    }

    /// The session table.
    pub fn sessions(&self) -> &EdgeSessions {
        &self.sessions
    }

    /// The device-side counters.
    pub fn counters(&self) -> &EdgeDeviceCounters {
        &self.counters
    }

    /// The session table's counters.
    pub fn session_counters(&self) -> &EdgeSessionCounters {
        self.sessions.counters()
    }

    /// The speaker state's counters.
    pub fn lease_counters(&self) -> &EdgeLeaseCounters {
        self.speaker.counters()
    }

    /// The downstream wait's counters.
    pub fn wait_counters(&self) -> &WaitCounters {
        self.wait.counters()
    }

    /// Downstream frames parked now.
    pub fn parked(&self) -> usize {
        self.wait.parked()
    }

    /// The receiver lists' counters.
    pub fn receiver_counters(&self) -> &ReceiverCounters {
        self.receivers.counters()
    }

    /// Domains with at least one local receiver.
    pub fn receiver_domains(&self) -> usize {
        self.receivers.domain_count()
    }

    /// (cluster epoch, version) of the projection last applied.
    pub fn projection(&self) -> (u64, u64) {
        self.projection
    }

    /// Moves the pending actions to the end of `out`.
    pub fn take_actions(&mut self, out: &mut Vec<EdgeAction>) {
        out.append(&mut self.actions);
    }

    /// The claim for `domain` could not be queued (§3.10: drop its buffer,
    /// block 50 ms).
    pub fn claim_send_failed(&mut self, now: Instant, domain: u64) {
        self.speaker.claim_send_failed(now, domain);
    }

    /// A control connection attached (§3.6 step 2), or the link was lost
    /// (§6.1): pending requests and renewals are forgotten, speaker states
    /// cleared, parked downstream dropped; sessions stay.
    pub fn link_changed(&mut self) {
        self.sessions.detach();
        self.speaker.clear();
        self.wait.set_ready(false);
    }

    /// The link became ready with the committed `projection` (§3.6 step 6):
    /// sessions absent from it are removed (and reported), the others take
    /// its routes; downstream is accepted from now on.
    pub fn ready(&mut self, ids: &mut MessageIds, now: Instant, wall_ms: i64, p: &Projection) {
        for r in self.sessions.apply_projection(ids, wall_ms, p) {
            self.removed(r);
        }
        self.receivers.clear();
        let listed: Vec<(u64, SocketAddr, _)> = self
            .sessions
            .iter()
            .filter(|s| s.receiving())
            .map(|s| (s.session_id(), s.addr, s.grant.route.clone()))
            .collect();
        for (id, addr, route) in listed {
            self.receivers.set(id, addr, &route);
        }
        self.wait.set_ready(true);
        self.set_projection(now, p.cluster_epoch, p.version);
    }

    /// The projection stopped fitting (a resync, §3.7): downstream is
    /// dropped until the next snapshot.
    pub fn not_ready(&mut self) {
        self.wait.set_ready(false);
    }

    /// A delta applied to the projection, now at (`epoch`, `version`):
    /// upserts refresh their session's route (a changed domain or a send
    /// ban ends its speaker state, §3.8), removes end the session
    /// (`route_removed`, reported); parked downstream is re-checked.
    pub fn apply_delta(
        &mut self,
        ids: &mut MessageIds,
        now: Instant,
        wall_ms: i64,
        operations: &[RouteOperation],
        epoch: u64,
        version: u64,
    ) {
        for op in operations {
            match op {
                RouteOperation::Upsert { route } => {
                    let Some(lease_ends) = self.sessions.apply_route(route) else {
                        continue;
                    };
                    if lease_ends {
                        self.speaker.release_session(route.session_id);
                    }
                    if let Some(s) = self
                        .sessions
                        .by_session_id(route.session_id)
                        .filter(|s| s.receiving())
                    {
                        self.receivers.set(route.session_id, s.addr, &s.grant.route);
                    }
                }
                RouteOperation::Remove { session_id } => {
                    if let Some(r) = self.sessions.remove_route(ids, wall_ms, *session_id) {
                        self.removed(r);
                    }
                }
            }
        }
        self.set_projection(now, epoch, version);
    }

    /// Removes every session with `reason` and reports it (e.g.
    /// `control_unavailable` when the grace period ends, §6.1).
    pub fn expire_all(&mut self, ids: &mut MessageIds, wall_ms: i64, reason: &'static str) {
        for r in self.sessions.remove_all(ids, wall_ms, reason) {
            self.removed(r);
        }
    }

    fn set_projection(&mut self, now: Instant, epoch: u64, version: u64) {
        self.projection = (epoch, version);
        self.wait.set_projection(now, epoch, version);
        self.release_parked();
    }

    pub(super) fn release_parked(&mut self) {
        while let Some(a) = self.wait.poll_release() {
            self.deliver_downstream(a);
        }
    }

    /// An ICMP destination unreachable read at `now` for a datagram sent
    /// to `addr`: the session there ends and is reported
    /// ([`EdgeSessions::handle_unreachable`]).
    pub fn handle_unreachable(
        &mut self,
        ids: &mut MessageIds,
        now: Instant,
        wall_ms: i64,
        addr: SocketAddr,
    ) {
        if let Some(r) = self.sessions.handle_unreachable(ids, now, wall_ms, addr) {
            self.removed(r);
        }
    }

    /// Cleans up after a removed session and queues its report.
    pub(super) fn removed(&mut self, r: Removal) {
        let id = r.session.session_id();
        self.receivers.remove(id);
        self.speaker.release_session(id);
        self.counters.removed += 1;
        if let Some(report) = r.report {
            self.actions.push(EdgeAction::Control(report));
        }
    }

    /// Hands `packet` of `domain` to the local fan-out, leaving out
    /// `exclude` (the sender; [`NO_SENDER`] for downstream).
    pub(super) fn fan_out(
        &mut self,
        domain: u64,
        packet: Arc<[u8]>,
        kind: FrameKind,
        exclude: SocketAddr,
        created: Instant,
    ) {
        let only_sender =
            |s: &Snapshot| s.len() == 1 && s.partitions.iter().any(|p| p.first() == Some(&exclude));
        let Some(snapshot) = self.receivers.snapshot(domain).filter(|s| !only_sender(s)) else {
            self.counters.no_receiver_frames += 1;
            return;
        };
        self.push_frame(snapshot, packet, kind, exclude, created);
    }

    fn push_frame(
        &mut self,
        snapshot: Arc<Snapshot>,
        packet: Arc<[u8]>,
        kind: FrameKind,
        exclude: SocketAddr,
        created: Instant,
    ) {
        self.counters.local_frames += 1;
        self.actions.push(EdgeAction::Fanout(Frame {
            kind,
            created,
            packet,
            session_packet: None,
            snapshot,
            exclude,
            exclude_connection: None,
        }));
    }

    /// Local fan-out and the one RelayUpstream of a frame (§5.1).
    pub(super) fn deliver(&mut self, f: HeldFrame, lease_id: u64, kind: FrameKind) {
        self.fan_out(f.domain, Arc::clone(&f.packet), kind, f.from, f.created);
        self.counters.upstream_frames += 1;
        self.actions.push(EdgeAction::Upstream(Upstream {
            header: RelayHeader {
                session_id: f.session_id,
                session_epoch: f.session_epoch,
                domain_id: f.domain,
                required_projection_version: self.projection.1,
                speaker_lease_id: lease_id,
            },
            inner: f.packet,
        }));
    }

    /// Drives the timers at `now` / `wall_ms`: speaker claims and blocks,
    /// parked downstream (released or dropped), and every `sweep` the
    /// session timeouts (reported).
    pub fn handle_timeout(&mut self, ids: &mut MessageIds, now: Instant, wall_ms: i64) {
        self.wait.handle_timeout(now);
        self.release_parked();
        self.speaker.handle_timeout(now);
        if self.next_sweep.is_none_or(|t| now >= t) {
            self.next_sweep = Some(now + self.cfg.sweep);
            for r in self.sessions.handle_timeout(ids, now, wall_ms) {
                self.removed(r);
            }
        }
    }

    /// The earliest instant [`EdgeDevices::handle_timeout`] has work.
    pub fn poll_timeout(&self) -> Option<Instant> {
        [
            self.wait.poll_timeout(),
            self.speaker.poll_timeout(),
            self.next_sweep,
        ]
        .into_iter()
        .flatten()
        .min()
    }
}
