//! The edge's side of route sync (draarl-interconnect §3.6, §3.7): it
//! assembles snapshots, applies deltas under the apply rules,
//! re-acknowledges duplicates, acknowledges what it applied, and asks for
//! a resync when anything does not fit.
//!
//! ```text
//!  Begin ─▶ SnapshotAssembly ◀─ Chunk × n            (any failure ─▶ Resync)
//!  Commit ─▶ checks ─▶ projection replaced ─▶ Committed{ACK}   (synced)
//!  Delta ─▶ same epoch ∧ base = version ∧ new > base ∧ ops valid ∧ checksum
//!          ├ yes ─▶ Applied{ACK, operations}
//!          └ no  ─▶ Resync{0x15 (epoch, version, reason)}  (not synced: link not ready,
//!                                                           drop queued downstream)
//!  duplicate Delta:  epoch = ∧ version ≥ new ─▶ ReAcked, else Resync
//!  duplicate Commit: epoch = ∧ version =      ─▶ ReAcked, else Resync
//! ```
//!
//! The resync reasons are our own words; §3.7 does not name them.

use crate::codec::interconnect::messages::{
    RouteAck, RouteDelta, RouteOperation, RouteResyncRequest, RouteSnapshotBegin,
    RouteSnapshotChunk, RouteSnapshotCommit,
};
use crate::codec::interconnect::Subtype;

use super::control_send::{reliable, ControlSend};
use super::outbound::MessageIds;
use super::route_projection::{delta_checksum, Projection};
use super::snapshot_assembly::{SnapshotAssembly, SnapshotError};

/// Resync reasons (not named by §3.7).
pub mod resync_reason {
    /// A delta arrived before any snapshot.
    pub const NO_PROJECTION: &str = "no_projection";
    /// A delta or commit of another cluster epoch (or epoch 0).
    pub const EPOCH_MISMATCH: &str = "epoch_mismatch";
    /// A delta whose base is not the current version, or new ≤ base.
    pub const VERSION_GAP: &str = "version_gap";
    /// A delta with no operation or an invalid one.
    pub const INVALID_DELTA: &str = "invalid_delta";
    /// A delta whose checksum does not match.
    pub const CHECKSUM_MISMATCH: &str = "checksum_mismatch";
    /// A Begin, Chunk or Commit failed its checks.
    pub const SNAPSHOT_INVALID: &str = "snapshot_invalid";
    /// A re-delivered delta or commit that does not match the projection.
    pub const DUPLICATE_MISMATCH: &str = "duplicate_mismatch";
}

/// What the edge does after a route sync message.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum EdgeSyncEvent {
    /// A Begin or Chunk stored; nothing to send.
    Stored,
    /// Ignored and counted (a chunk of no snapshot in progress, an
    /// identical duplicate chunk).
    Ignored,
    /// A delta applied: send `ack`, apply `operations` to the live
    /// sessions (an upsert refreshes a grant's route, a remove ends the
    /// session).
    Applied {
        /// The RouteAck.
        ack: ControlSend,
        /// The applied operations.
        operations: Vec<RouteOperation>,
    },
    /// A snapshot committed: send `ack`; the projection was replaced, so
    /// re-apply it to the sessions (sessions absent from it are removed,
    /// §3.6 step 6).
    Committed {
        /// The RouteAck.
        ack: ControlSend,
    },
    /// A re-delivered delta or commit that is already applied: send `ack`.
    ReAcked {
        /// The RouteAck.
        ack: ControlSend,
    },
    /// The projection does not fit: mark the link not ready, drop queued
    /// downstream, send `request`; the centre answers with a snapshot.
    Resync {
        /// The RouteResyncRequest.
        request: ControlSend,
        /// Why.
        reason: &'static str,
    },
}

/// Counters of the edge's route sync.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct EdgeSyncCounters {
    /// Deltas applied.
    pub deltas_applied: u64,
    /// Snapshots committed.
    pub snapshots_committed: u64,
    /// Duplicates re-acknowledged.
    pub reacks: u64,
    /// Resync requests sent.
    pub resyncs: u64,
    /// Chunks ignored (no matching snapshot in progress, or identical
    /// duplicates).
    pub ignored_chunks: u64,
}

/// The edge's route sync state for its link to the centre.
#[derive(Debug, Default)]
pub struct EdgeRouteSync {
    projection: Option<Projection>,
    assembly: Option<SnapshotAssembly>,
    synced: bool,
    counters: EdgeSyncCounters,
}

impl EdgeRouteSync {
    /// No projection yet.
    pub fn new() -> Self {
        Self::default()
    }

    /// The projection last committed or updated, if any.
    pub fn projection(&self) -> Option<&Projection> {
        self.projection.as_ref()
    }

    /// (epoch, version) of the projection; (0, 0) without one.
    pub fn position(&self) -> (u64, u64) {
        self.projection
            .as_ref()
            .map_or((0, 0), |p| (p.cluster_epoch, p.version))
    }

    /// Whether a snapshot was committed since the last reset or resync
    /// (the route part of "ready", §3.6 step 6).
    pub fn is_synced(&self) -> bool {
        self.synced
    }

    /// The counters.
    pub fn counters(&self) -> &EdgeSyncCounters {
        &self.counters
    }

    /// A new connection attached (§3.6 step 2): the snapshot in progress
    /// is dropped and the link is not synced until the next commit; the
    /// old projection is kept (deltas of the new connection will not fit
    /// it and lead to a resync, §3.6).
    pub fn reset(&mut self) {
        self.assembly = None;
        self.synced = false;
    }

    fn ack(ids: &mut MessageIds, epoch: u64, version: u64, for_id: u64) -> ControlSend {
        let ack = RouteAck {
            cluster_epoch: epoch,
            projection_version: version,
            ack_for_message_id: for_id,
            error: String::new(),
        };
        ControlSend::json(Subtype::ROUTE_ACK, reliable(), ids.next_id(), 0, 0, &ack)
    }

    fn resync(&mut self, ids: &mut MessageIds, reason: &'static str) -> EdgeSyncEvent {
        self.synced = false;
        self.assembly = None;
        self.counters.resyncs += 1;
        let (cluster_epoch, projection_version) = self.position();
        let req = RouteResyncRequest {
            cluster_epoch,
            projection_version,
            reason: reason.to_owned(),
        };
        EdgeSyncEvent::Resync {
            request: ControlSend::json(
                Subtype::ROUTE_RESYNC_REQUEST,
                reliable(),
                ids.next_id(),
                0,
                0,
                &req,
            ),
            reason,
        }
    }

    /// A RouteSnapshotBegin: starts a new snapshot (replacing one in
    /// progress); an invalid Begin leads to a resync.
    pub fn handle_begin(
        &mut self,
        ids: &mut MessageIds,
        begin: RouteSnapshotBegin,
    ) -> EdgeSyncEvent {
        match SnapshotAssembly::begin(begin) {
            Ok(a) => {
                self.assembly = Some(a);
                EdgeSyncEvent::Stored
            }
            Err(_) => self.resync(ids, resync_reason::SNAPSHOT_INVALID),
        }
    }

    /// A RouteSnapshotChunk: stored; identical duplicates and chunks of no
    /// snapshot in progress are ignored; any other failure leads to a
    /// resync.
    pub fn handle_chunk(
        &mut self,
        ids: &mut MessageIds,
        chunk: &RouteSnapshotChunk,
    ) -> EdgeSyncEvent {
        let Some(a) = self.assembly.as_mut() else {
            self.counters.ignored_chunks += 1;
            return EdgeSyncEvent::Ignored;
        };
        match a.add_chunk(chunk) {
            Ok(super::snapshot_assembly::ChunkAdded::Stored) => EdgeSyncEvent::Stored,
            Ok(super::snapshot_assembly::ChunkAdded::Duplicate)
            | Err(SnapshotError::OtherSnapshot) => {
                self.counters.ignored_chunks += 1;
                EdgeSyncEvent::Ignored
            }
            Err(_) => self.resync(ids, resync_reason::SNAPSHOT_INVALID),
        }
    }

    /// A RouteSnapshotCommit with MessageID `message_id` and the envelope's
    /// epoch and PV; `duplicate` as [`super::ControlVerdict::Deliver`]
    /// marks it. A new commit needs its snapshot complete and valid.
    pub fn handle_commit(
        &mut self,
        ids: &mut MessageIds,
        message_id: u64,
        envelope_epoch: u64,
        envelope_version: u64,
        commit: &RouteSnapshotCommit,
        duplicate: bool,
    ) -> EdgeSyncEvent {
        if duplicate {
            return match &self.projection {
                Some(p) if p.cluster_epoch == envelope_epoch && p.version == envelope_version => {
                    self.counters.reacks += 1;
                    EdgeSyncEvent::ReAcked {
                        ack: Self::ack(ids, p.cluster_epoch, p.version, message_id),
                    }
                }
                _ => self.resync(ids, resync_reason::DUPLICATE_MISMATCH),
            };
        }
        let Some(a) = self.assembly.take() else {
            return self.resync(ids, resync_reason::SNAPSHOT_INVALID);
        };
        if a.header().snapshot_id != commit.snapshot_id {
            return self.resync(ids, resync_reason::SNAPSHOT_INVALID);
        }
        match a.commit() {
            Ok(p) => {
                let ack = Self::ack(ids, p.cluster_epoch, p.version, message_id);
                self.projection = Some(p);
                self.synced = true;
                self.counters.snapshots_committed += 1;
                EdgeSyncEvent::Committed { ack }
            }
            Err(_) => self.resync(ids, resync_reason::SNAPSHOT_INVALID),
        }
    }

    /// A RouteDelta with MessageID `message_id`; `duplicate` as
    /// [`super::ControlVerdict::Deliver`] marks it. Applies it only if it
    /// is for the same non-zero epoch, `base_version` = the current
    /// version, `new_version` > base, every operation is valid and the
    /// checksum matches; a failure leaves the projection unchanged and
    /// leads to a resync.
    pub fn handle_delta(
        &mut self,
        ids: &mut MessageIds,
        message_id: u64,
        delta: RouteDelta,
        duplicate: bool,
    ) -> EdgeSyncEvent {
        let Some(p) = &self.projection else {
            return self.resync(ids, resync_reason::NO_PROJECTION);
        };
        if duplicate {
            if p.cluster_epoch == delta.cluster_epoch && p.version >= delta.new_version {
                self.counters.reacks += 1;
                return EdgeSyncEvent::ReAcked {
                    ack: Self::ack(ids, delta.cluster_epoch, delta.new_version, message_id),
                };
            }
            return self.resync(ids, resync_reason::DUPLICATE_MISMATCH);
        }
        if delta.cluster_epoch == 0 || delta.cluster_epoch != p.cluster_epoch {
            return self.resync(ids, resync_reason::EPOCH_MISMATCH);
        }
        if delta.base_version != p.version || delta.new_version <= delta.base_version {
            return self.resync(ids, resync_reason::VERSION_GAP);
        }
        if delta.operations.is_empty() {
            return self.resync(ids, resync_reason::INVALID_DELTA);
        }
        if delta_checksum(&delta) != delta.checksum.to_ascii_lowercase() {
            return self.resync(ids, resync_reason::CHECKSUM_MISMATCH);
        }
        if !p.accepts(&delta.operations) {
            return self.resync(ids, resync_reason::INVALID_DELTA);
        }
        if let Some(p) = self.projection.as_mut() {
            for op in &delta.operations {
                // Checked by `accepts`; cannot fail.
                let _ = p.apply(op);
            }
            p.version = delta.new_version;
        }
        self.counters.deltas_applied += 1;
        EdgeSyncEvent::Applied {
            ack: Self::ack(ids, delta.cluster_epoch, delta.new_version, message_id),
            operations: delta.operations,
        }
    }
}
