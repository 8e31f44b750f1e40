//! Assembling a route snapshot at the edge (draarl-interconnect §3.7):
//! Begin states the size, chunk count and checksum; chunks arrive in any
//! order; Commit checks the whole and decodes the projection.
//!
//! ```text
//!  Begin{id, epoch, PV, chunks, total, checksum}
//!    ├ total ≤ 64 MiB, chunks = ceil(total / 32 KiB) (min 1), checksum 64 hex, id/epoch ≠ 0
//!  Chunk{id, index, data}
//!    ├ index < chunks, len = exact size for the index
//!    ├ same bytes again → ignored; other bytes → rejected
//!  Commit
//!    └ all chunks, SHA-256 = checksum, projection decodes, its epoch/version = Begin's
//! ```
//!
//! Nothing is allocated for a chunk before its index and size are checked,
//! so the buffers never exceed the total the Begin declared (≤ 64 MiB).

use thiserror::Error;

use crate::codec::interconnect::messages::{RouteSnapshotBegin, RouteSnapshotChunk};

use super::route_projection::{
    chunk_count, sha256_hex, Projection, ProjectionError, MAX_SNAPSHOT_BYTES, SNAPSHOT_CHUNK_BYTES,
};

/// Why a Begin, Chunk or Commit was rejected.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Error)]
pub enum SnapshotError {
    /// Snapshot id or cluster epoch is 0.
    #[error("snapshot id or cluster epoch is zero")]
    ZeroId,
    /// `total_bytes` over 64 MiB.
    #[error("snapshot larger than 64 MiB")]
    TooLarge,
    /// `chunks` ≠ ceil(total / 32 KiB) (min 1).
    #[error("chunk count does not match the total")]
    ChunkCount,
    /// The checksum is not 64 hex characters.
    #[error("checksum is not 64 hex characters")]
    ChecksumFormat,
    /// A chunk of another snapshot.
    #[error("chunk of another snapshot")]
    OtherSnapshot,
    /// A chunk index at or beyond the chunk count (bytes beyond the total).
    #[error("chunk beyond the total")]
    BeyondTotal,
    /// A chunk whose size is not the size of its index.
    #[error("chunk has the wrong size")]
    ChunkSize,
    /// A chunk index seen before with other bytes.
    #[error("duplicate chunk with different bytes")]
    DifferingDuplicate,
    /// Commit before every chunk arrived.
    #[error("snapshot incomplete")]
    Incomplete,
    /// The bytes do not hash to the Begin's checksum.
    #[error("snapshot checksum mismatch")]
    ChecksumMismatch,
    /// The projection does not decode or is invalid.
    #[error("projection invalid: {0}")]
    Projection(ProjectionError),
    /// The projection's epoch or version differs from the Begin's.
    #[error("projection epoch or version differs from the begin")]
    VersionMismatch,
}

/// What [`SnapshotAssembly::add_chunk`] did with a valid chunk.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ChunkAdded {
    /// Stored.
    Stored,
    /// The same bytes were already stored; ignored.
    Duplicate,
}

/// One snapshot being received.
#[derive(Debug)]
pub struct SnapshotAssembly {
    begin: RouteSnapshotBegin,
    chunks: Vec<Option<Vec<u8>>>,
    received: usize,
}

impl SnapshotAssembly {
    /// Starts a snapshot from its Begin.
    ///
    /// # Errors
    /// [`SnapshotError::ZeroId`], [`SnapshotError::TooLarge`],
    /// [`SnapshotError::ChunkCount`], [`SnapshotError::ChecksumFormat`].
    pub fn begin(begin: RouteSnapshotBegin) -> Result<Self, SnapshotError> {
        if begin.snapshot_id == 0 || begin.cluster_epoch == 0 {
            return Err(SnapshotError::ZeroId);
        }
        if begin.total_bytes > MAX_SNAPSHOT_BYTES {
            return Err(SnapshotError::TooLarge);
        }
        if u64::from(begin.chunks) != chunk_count(begin.total_bytes) {
            return Err(SnapshotError::ChunkCount);
        }
        if begin.checksum.len() != 64 || !begin.checksum.bytes().all(|b| b.is_ascii_hexdigit()) {
            return Err(SnapshotError::ChecksumFormat);
        }
        let n = begin.chunks as usize;
        Ok(Self {
            begin,
            chunks: vec![None; n],
            received: 0,
        })
    }

    /// The Begin this snapshot started with.
    pub fn header(&self) -> &RouteSnapshotBegin {
        &self.begin
    }

    fn expected_len(&self, index: usize) -> usize {
        let n = self.chunks.len();
        if index + 1 < n {
            SNAPSHOT_CHUNK_BYTES
        } else {
            let before = (n - 1) * SNAPSHOT_CHUNK_BYTES;
            (self.begin.total_bytes as usize).saturating_sub(before)
        }
    }

    /// Adds a chunk.
    ///
    /// # Errors
    /// [`SnapshotError::OtherSnapshot`], [`SnapshotError::BeyondTotal`],
    /// [`SnapshotError::ChunkSize`], [`SnapshotError::DifferingDuplicate`];
    /// the assembly is then unchanged.
    pub fn add_chunk(&mut self, chunk: &RouteSnapshotChunk) -> Result<ChunkAdded, SnapshotError> {
        if chunk.snapshot_id != self.begin.snapshot_id {
            return Err(SnapshotError::OtherSnapshot);
        }
        let index = chunk.index as usize;
        if index >= self.chunks.len() {
            return Err(SnapshotError::BeyondTotal);
        }
        if chunk.data.len() != self.expected_len(index) {
            return Err(SnapshotError::ChunkSize);
        }
        match &self.chunks[index] {
            Some(have) if *have == chunk.data => Ok(ChunkAdded::Duplicate),
            Some(_) => Err(SnapshotError::DifferingDuplicate),
            None => {
                self.chunks[index] = Some(chunk.data.clone());
                self.received += 1;
                Ok(ChunkAdded::Stored)
            }
        }
    }

    /// Checks the whole snapshot and decodes its projection.
    ///
    /// # Errors
    /// [`SnapshotError::Incomplete`], [`SnapshotError::ChecksumMismatch`],
    /// [`SnapshotError::Projection`], [`SnapshotError::VersionMismatch`].
    pub fn commit(&self) -> Result<Projection, SnapshotError> {
        if self.received != self.chunks.len() {
            return Err(SnapshotError::Incomplete);
        }
        let mut bytes = Vec::with_capacity(self.begin.total_bytes as usize);
        for c in self.chunks.iter().flatten() {
            bytes.extend_from_slice(c);
        }
        if !sha256_hex(&bytes).eq_ignore_ascii_case(&self.begin.checksum) {
            return Err(SnapshotError::ChecksumMismatch);
        }
        let p = Projection::from_json(&bytes).map_err(SnapshotError::Projection)?;
        if p.cluster_epoch != self.begin.cluster_epoch || p.version != self.begin.projection_version
        {
            return Err(SnapshotError::VersionMismatch);
        }
        Ok(p)
    }
}
