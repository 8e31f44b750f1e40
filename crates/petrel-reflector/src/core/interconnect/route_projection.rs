//! An edge's route projection and its byte encodings
//! (draarl-interconnect §3.7): the projection JSON
//! `{"cluster_epoch":E,"version":V,"devices":{"<session_id>":DeviceRoute}}`,
//! its split into 32 KiB snapshot chunks with a SHA-256 checksum, and the
//! delta checksum.
//!
//! ```text
//!  Projection ─to_json─▶ bytes ─┬─ split 32 KiB (≥ 1 chunk) ─▶ RouteSnapshotChunk × n
//!                               └─ SHA-256 hex ─────────────▶ RouteSnapshotBegin.checksum
//!  RouteDelta{checksum: ""} ─go_json─▶ bytes ─SHA-256 hex─▶ RouteDelta.checksum
//! ```
//!
//! The delta checksum is computed over an encoding meant to be
//! byte-identical to Go's `encoding/json` for these types: fields in
//! declaration (wire) order, no spaces, the omit-empty rules of
//! [`DeviceRoute`], `checksum` always present, and `<`, `>`, `&`, U+2028,
//! U+2029 escaped as `\u003c`, `\u003e`, `\u0026`, `\u2028`, `\u2029`.
//! Control characters are escaped as serde_json does (`\b \f \n \r \t`,
//! others `\u00XX`), which matches Go 1.22 and later. Not verified against
//! a Go build.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};
use thiserror::Error;

use crate::codec::interconnect::messages::{DeviceRoute, RouteDelta, RouteOperation};

/// Raw bytes per snapshot chunk (§3.7).
pub const SNAPSHOT_CHUNK_BYTES: usize = 32 * 1024;
/// Largest projection JSON a snapshot may carry (§3.7: 64 MiB).
pub const MAX_SNAPSHOT_BYTES: u64 = 64 * 1024 * 1024;
/// Most device sessions one node may own (`MaxDeviceSessionsPerNode`, §7);
/// also the most routes of one projection.
pub const MAX_DEVICE_SESSIONS_PER_NODE: usize = 25_000;

/// One edge's route projection (§3.7).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Projection {
    /// ClusterEpoch of the centre that built it (non-zero).
    pub cluster_epoch: u64,
    /// Version in that epoch (from 0 per connection).
    pub version: u64,
    /// Routes by device session id (decimal-string keys on the wire).
    pub devices: BTreeMap<u64, DeviceRoute>,
}

/// Why a projection or a delta operation is not valid.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Error)]
pub enum ProjectionError {
    /// `cluster_epoch` is 0.
    #[error("cluster epoch is zero")]
    ZeroEpoch,
    /// A route with session id 0, or filed under another session id.
    #[error("route session id is zero or differs from its key")]
    BadRoute,
    /// More routes than [`MAX_DEVICE_SESSIONS_PER_NODE`].
    #[error("too many routes")]
    TooManyRoutes,
    /// The JSON does not decode (or `devices` is missing).
    #[error("projection JSON does not decode")]
    Decode,
}

impl Projection {
    /// An empty projection at version 0 of `cluster_epoch`.
    pub fn new(cluster_epoch: u64) -> Self {
        Self {
            cluster_epoch,
            version: 0,
            devices: BTreeMap::new(),
        }
    }

    /// The projection JSON (§3.7).
    pub fn to_json(&self) -> Vec<u8> {
        serde_json::to_vec(self).unwrap_or_default()
    }

    /// Decodes and validates projection JSON: non-zero epoch, `devices`
    /// present, every route filed under its own non-zero session id, at
    /// most [`MAX_DEVICE_SESSIONS_PER_NODE`] routes.
    ///
    /// # Errors
    /// [`ProjectionError`].
    pub fn from_json(bytes: &[u8]) -> Result<Self, ProjectionError> {
        let p: Projection = serde_json::from_slice(bytes).map_err(|_| ProjectionError::Decode)?;
        if p.cluster_epoch == 0 {
            return Err(ProjectionError::ZeroEpoch);
        }
        if p.devices.len() > MAX_DEVICE_SESSIONS_PER_NODE {
            return Err(ProjectionError::TooManyRoutes);
        }
        if p.devices.iter().any(|(k, r)| *k == 0 || r.session_id != *k) {
            return Err(ProjectionError::BadRoute);
        }
        Ok(p)
    }

    /// Whether every operation of a delta would apply: no session id 0,
    /// and the routes it adds stay within [`MAX_DEVICE_SESSIONS_PER_NODE`]
    /// (counted without the removals, conservatively).
    pub fn accepts(&self, ops: &[RouteOperation]) -> bool {
        let mut added = std::collections::BTreeSet::new();
        for op in ops {
            match op {
                RouteOperation::Upsert { route } => {
                    if route.session_id == 0 {
                        return false;
                    }
                    if !self.devices.contains_key(&route.session_id) {
                        added.insert(route.session_id);
                    }
                }
                RouteOperation::Remove { session_id } => {
                    if *session_id == 0 {
                        return false;
                    }
                }
            }
        }
        self.devices.len() + added.len() <= MAX_DEVICE_SESSIONS_PER_NODE
    }

    /// Applies one delta operation (no version change).
    ///
    /// # Errors
    /// [`ProjectionError::BadRoute`] for session id 0,
    /// [`ProjectionError::TooManyRoutes`] when an upsert would exceed the
    /// limit; the projection is then unchanged.
    pub fn apply(&mut self, op: &RouteOperation) -> Result<(), ProjectionError> {
        match op {
            RouteOperation::Upsert { route } => {
                if route.session_id == 0 {
                    return Err(ProjectionError::BadRoute);
                }
                if !self.devices.contains_key(&route.session_id)
                    && self.devices.len() >= MAX_DEVICE_SESSIONS_PER_NODE
                {
                    return Err(ProjectionError::TooManyRoutes);
                }
                self.devices.insert(route.session_id, (**route).clone());
            }
            RouteOperation::Remove { session_id } => {
                if *session_id == 0 {
                    return Err(ProjectionError::BadRoute);
                }
                self.devices.remove(session_id);
            }
        }
        Ok(())
    }
}

/// Lower-case hex of a SHA-256 digest of `bytes` (64 characters).
pub fn sha256_hex(bytes: &[u8]) -> String {
    let digest = Sha256::digest(bytes);
    let mut s = String::with_capacity(64);
    for b in digest {
        s.push(char::from(b"0123456789abcdef"[usize::from(b >> 4)]));
        s.push(char::from(b"0123456789abcdef"[usize::from(b & 0x0f)]));
    }
    s
}

/// The chunk count of a snapshot of `total` bytes: ceil(total / 32 KiB),
/// at least 1 (§3.7).
pub fn chunk_count(total: u64) -> u64 {
    total.div_ceil(SNAPSHOT_CHUNK_BYTES as u64).max(1)
}

/// `value` as compact JSON with Go's HTML-safe string escapes applied
/// (see the module docs).
pub fn go_json<T: Serialize>(value: &T) -> Vec<u8> {
    let plain = serde_json::to_string(value).unwrap_or_default();
    // These characters are never JSON syntax, so they only occur inside
    // strings, where Go writes them escaped.
    let mut out = String::with_capacity(plain.len());
    for c in plain.chars() {
        match c {
            '<' => out.push_str("\\u003c"),
            '>' => out.push_str("\\u003e"),
            '&' => out.push_str("\\u0026"),
            '\u{2028}' => out.push_str("\\u2028"),
            '\u{2029}' => out.push_str("\\u2029"),
            c => out.push(c),
        }
    }
    out.into_bytes()
}

/// The §3.7 delta checksum: SHA-256 hex of the delta's [`go_json`] with
/// `checksum` set to `""` (whatever `delta.checksum` holds is ignored).
pub fn delta_checksum(delta: &RouteDelta) -> String {
    let mut blank = delta.clone();
    blank.checksum.clear();
    sha256_hex(&go_json(&blank))
}
