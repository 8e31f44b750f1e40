//! The centre's route sync toward one edge (draarl-interconnect §3.6,
//! §3.7): the edge's projection with its own version counter, single-op
//! deltas, full snapshots, and the reliable delivery of Commit and Delta
//! (resend with the same MessageID every ≥ 1 s, at most 5 attempts, then
//! `route_ack_timeout` and the session is closed).
//!
//! ```text
//!  connect ─▶ new(epoch): empty projection, version 0
//!  node_ready / resync ─▶ snapshot(): Begin, Chunk × n, Commit ──┐  (pending deltas superseded)
//!  route change ─▶ upsert()/remove(): Delta base → base+1 ───────┤
//!                                                                ▼
//!                                      pending {id, version, attempts, last sent}
//!  handle_ack: epoch current ∧ id pending ∧ version = pending ─▶ cleared
//!  handle_timeout: ≥ 1 s since sent ─▶ resend (same id) … 5 attempts ─▶ Close(route_ack_timeout)
//! ```
//!
//! One instance per connected edge, created on (re)connect; changes of
//! other edges never touch it. MessageIDs and snapshot ids come from the
//! centre's process-wide [`MessageIds`].

use std::collections::VecDeque;
use std::time::{Duration, Instant};

use crate::codec::interconnect::messages::{
    DeviceRoute, RouteAck, RouteDelta, RouteOperation, RouteResyncRequest, RouteSnapshotBegin,
    RouteSnapshotChunk, RouteSnapshotCommit,
};
use crate::codec::interconnect::{Flags, Subtype};

use super::control_send::{reliable, ControlSend};
use super::outbound::MessageIds;
use super::route_projection::{
    chunk_count, delta_checksum, sha256_hex, Projection, ProjectionError, SNAPSHOT_CHUNK_BYTES,
};

/// Least time between two sends of a pending reliable message (§3.7).
pub const ROUTE_RESEND_INTERVAL: Duration = Duration::from_secs(1);
/// Sends of a reliable route message in total before giving up (§3.7).
pub const ROUTE_MAX_ATTEMPTS: u32 = 5;
/// The sync error when a reliable route message was never acknowledged
/// (§3.7); the session is then closed.
pub const ROUTE_ACK_TIMEOUT: &str = "route_ack_timeout";
/// Pending reliable messages kept per edge; beyond it the oldest is
/// forgotten (counted in [`CentreSyncCounters::pending_evictions`]). Not a
/// spec value: with one delta per route change and ACKs within a round
/// trip, an edge this far behind will fail its next delta and resync.
pub const MAX_PENDING_ROUTE_MESSAGES: usize = 1024;

/// Counters of one edge's route sync.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct CentreSyncCounters {
    /// Deltas sent (first sends).
    pub deltas: u64,
    /// Snapshots sent.
    pub snapshots: u64,
    /// Resends of pending messages.
    pub resends: u64,
    /// ACKs accepted.
    pub acks_accepted: u64,
    /// ACKs refused (epoch, unknown id or version).
    pub acks_refused: u64,
    /// ACKs carrying an error.
    pub ack_errors: u64,
    /// Resync requests answered.
    pub resyncs: u64,
    /// Pending messages dropped because a snapshot superseded them.
    pub superseded: u64,
    /// Pending messages forgotten because the pending list was full.
    pub pending_evictions: u64,
}

/// Why an ACK was refused (§3.7).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum AckRefusal {
    /// Not the current cluster epoch.
    EpochMismatch,
    /// No pending message with that id.
    UnknownMessage,
    /// The version differs from the pending message's.
    VersionMismatch,
}

/// What [`CentreRouteSync::handle_ack`] decided.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum AckOutcome {
    /// The pending message (and any older one) is acknowledged.
    Accepted,
    /// The ACK carries an error: recorded as the sync error.
    SyncError(String),
    /// Refused; nothing changed.
    Refused(AckRefusal),
}

/// What [`CentreRouteSync::handle_timeout`] wants done.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum RetryOutcome {
    /// Resend these (possibly none).
    Resend(Vec<ControlSend>),
    /// A message ran out of attempts: the sync error is
    /// [`ROUTE_ACK_TIMEOUT`]; close the control session.
    Close,
}

#[derive(Debug)]
struct Pending {
    version: u64,
    send: ControlSend,
    attempts: u32,
    last_sent: Instant,
}

/// The centre's route sync state for one edge connection.
#[derive(Debug)]
pub struct CentreRouteSync {
    projection: Projection,
    pending: VecDeque<Pending>,
    acked: Option<(u64, u64)>,
    sync_error: Option<String>,
    counters: CentreSyncCounters,
}

impl CentreRouteSync {
    /// The state of a freshly connected edge: an empty projection at
    /// version 0 in `cluster_epoch` (§3.6).
    pub fn new(cluster_epoch: u64) -> Self {
        Self {
            projection: Projection::new(cluster_epoch),
            pending: VecDeque::new(),
            acked: None,
            sync_error: None,
            counters: CentreSyncCounters::default(),
        }
    }

    /// The projection as the centre holds it.
    pub fn projection(&self) -> &Projection {
        &self.projection
    }

    /// The current version (the edge's RequiredProjectionVersion for relays).
    pub fn version(&self) -> u64 {
        self.projection.version
    }

    /// The last accepted ACK as (version, message id).
    pub fn acked(&self) -> Option<(u64, u64)> {
        self.acked
    }

    /// The last sync error (an ACK's error or [`ROUTE_ACK_TIMEOUT`]).
    pub fn sync_error(&self) -> Option<&str> {
        self.sync_error.as_deref()
    }

    /// The counters.
    pub fn counters(&self) -> &CentreSyncCounters {
        &self.counters
    }

    /// Reliable messages awaiting an ACK.
    pub fn pending(&self) -> usize {
        self.pending.len()
    }

    fn push_pending(&mut self, now: Instant, version: u64, send: ControlSend) {
        if self.pending.len() >= MAX_PENDING_ROUTE_MESSAGES {
            self.pending.pop_front();
            self.counters.pending_evictions += 1;
        }
        self.pending.push_back(Pending {
            version,
            send,
            attempts: 1,
            last_sent: now,
        });
    }

    fn delta(&mut self, ids: &mut MessageIds, now: Instant, op: RouteOperation) -> ControlSend {
        let base = self.projection.version;
        self.projection.version += 1;
        let mut delta = RouteDelta {
            cluster_epoch: self.projection.cluster_epoch,
            base_version: base,
            new_version: base + 1,
            operations: vec![op],
            checksum: String::new(),
        };
        delta.checksum = delta_checksum(&delta);
        let send = ControlSend::json(
            Subtype::ROUTE_DELTA,
            reliable(),
            ids.next_id(),
            self.projection.cluster_epoch,
            base + 1,
            &delta,
        );
        self.push_pending(now, base + 1, send.clone());
        self.counters.deltas += 1;
        send
    }

    /// Records a new or changed route of a device this edge owns and
    /// returns its delta (one `upsert`, base → base + 1).
    ///
    /// # Errors
    /// [`ProjectionError::BadRoute`] (session id 0) or
    /// [`ProjectionError::TooManyRoutes`] (the edge owns 25 000 routes);
    /// nothing changed.
    pub fn upsert(
        &mut self,
        ids: &mut MessageIds,
        now: Instant,
        route: DeviceRoute,
    ) -> Result<ControlSend, ProjectionError> {
        let op = RouteOperation::Upsert {
            route: Box::new(route),
        };
        self.projection.apply(&op)?;
        Ok(self.delta(ids, now, op))
    }

    /// Removes the route of `session_id` and returns its delta (one
    /// `remove`); `None` when the projection has no such route.
    pub fn remove(
        &mut self,
        ids: &mut MessageIds,
        now: Instant,
        session_id: u64,
    ) -> Option<ControlSend> {
        self.projection.devices.remove(&session_id)?;
        Some(self.delta(ids, now, RouteOperation::Remove { session_id }))
    }

    /// The full snapshot (after `node_ready`, §3.6 step 5): Begin, the
    /// chunks and the reliable Commit, in sending order. Pending messages
    /// are superseded by it and no longer resent.
    pub fn snapshot(&mut self, ids: &mut MessageIds, now: Instant) -> Vec<ControlSend> {
        self.counters.superseded += self.pending.len() as u64;
        self.pending.clear();
        let epoch = self.projection.cluster_epoch;
        let version = self.projection.version;
        let json = self.projection.to_json();
        let chunks = chunk_count(json.len() as u64);
        let snapshot_id = ids.next_id();
        let chunked = Flags::CONTROL.with(Flags::CHUNKED);
        let mut out = Vec::with_capacity(chunks as usize + 2);
        let begin = RouteSnapshotBegin {
            snapshot_id,
            cluster_epoch: epoch,
            projection_version: version,
            chunks: u32::try_from(chunks).unwrap_or(u32::MAX),
            total_bytes: json.len() as u64,
            checksum: sha256_hex(&json),
        };
        out.push(ControlSend::json(
            Subtype::ROUTE_SNAPSHOT_BEGIN,
            chunked,
            ids.next_id(),
            epoch,
            version,
            &begin,
        ));
        let mut pieces: Vec<&[u8]> = json.chunks(SNAPSHOT_CHUNK_BYTES).collect();
        if pieces.is_empty() {
            pieces.push(&[]);
        }
        for (index, data) in pieces.into_iter().enumerate() {
            let chunk = RouteSnapshotChunk {
                snapshot_id,
                index: u32::try_from(index).unwrap_or(u32::MAX),
                data: data.to_vec(),
            };
            out.push(ControlSend::json(
                Subtype::ROUTE_SNAPSHOT_CHUNK,
                chunked,
                ids.next_id(),
                0,
                0,
                &chunk,
            ));
        }
        let commit = ControlSend::json(
            Subtype::ROUTE_SNAPSHOT_COMMIT,
            reliable(),
            ids.next_id(),
            epoch,
            version,
            &RouteSnapshotCommit { snapshot_id },
        );
        self.push_pending(now, version, commit.clone());
        out.push(commit);
        self.counters.snapshots += 1;
        out
    }

    /// Answers a RouteResyncRequest with a full snapshot (§3.7).
    pub fn handle_resync(
        &mut self,
        ids: &mut MessageIds,
        now: Instant,
        _request: &RouteResyncRequest,
    ) -> Vec<ControlSend> {
        self.counters.resyncs += 1;
        self.snapshot(ids, now)
    }

    /// Applies the §3.7 ACK rules. An ACK with `error` records the sync
    /// error and changes nothing else. Otherwise it is accepted only if its
    /// epoch is current, a pending message has its `ack_for_message_id`,
    /// and its version equals that message's; then that message and every
    /// older pending one are cleared (the edge applies in order).
    pub fn handle_ack(&mut self, ack: &RouteAck) -> AckOutcome {
        if !ack.error.is_empty() {
            self.counters.ack_errors += 1;
            self.sync_error = Some(ack.error.clone());
            return AckOutcome::SyncError(ack.error.clone());
        }
        let refuse = |s: &mut Self, r| {
            s.counters.acks_refused += 1;
            AckOutcome::Refused(r)
        };
        if ack.cluster_epoch != self.projection.cluster_epoch {
            return refuse(self, AckRefusal::EpochMismatch);
        }
        let Some(pos) = self
            .pending
            .iter()
            .position(|p| p.send.message_id == ack.ack_for_message_id)
        else {
            return refuse(self, AckRefusal::UnknownMessage);
        };
        if self.pending[pos].version != ack.projection_version {
            return refuse(self, AckRefusal::VersionMismatch);
        }
        self.pending.drain(..=pos);
        self.acked = Some((ack.projection_version, ack.ack_for_message_id));
        self.counters.acks_accepted += 1;
        AckOutcome::Accepted
    }

    /// Resends every pending message last sent ≥ 1 s before `now` (same
    /// MessageID); a message already sent 5 times instead ends the sync
    /// with [`ROUTE_ACK_TIMEOUT`].
    pub fn handle_timeout(&mut self, now: Instant) -> RetryOutcome {
        let mut resend = Vec::new();
        for p in &mut self.pending {
            if now.saturating_duration_since(p.last_sent) < ROUTE_RESEND_INTERVAL {
                continue;
            }
            if p.attempts >= ROUTE_MAX_ATTEMPTS {
                self.sync_error = Some(ROUTE_ACK_TIMEOUT.to_owned());
                return RetryOutcome::Close;
            }
            p.attempts += 1;
            p.last_sent = now;
            resend.push(p.send.clone());
        }
        self.counters.resends += resend.len() as u64;
        RetryOutcome::Resend(resend)
    }

    /// When [`CentreRouteSync::handle_timeout`] next has work (§3.7 scans
    /// every 250 ms; calling at this instant is the same, sooner); `None`
    /// with nothing pending.
    pub fn poll_timeout(&self) -> Option<Instant> {
        self.pending
            .iter()
            .map(|p| p.last_sent + ROUTE_RESEND_INTERVAL)
            .min()
    }
}
