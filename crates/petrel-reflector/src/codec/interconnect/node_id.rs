//! Node identifiers as carried in the Type 0 envelope's SourceNodeID field
//! (draarl-interconnect §4.1: 32 bytes at offset 6, NUL-padded, read up to
//! the first NUL; `center` names the centre, §1).

use std::fmt;

use thiserror::Error;

/// Bytes of the SourceNodeID field.
pub const NODE_ID_LEN: usize = 32;

/// A node id: 1..=32 bytes without NUL, stored inline (no allocation), so it
/// can key tables on the datagram path.
#[derive(Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct NodeId {
    len: u8,
    bytes: [u8; NODE_ID_LEN],
}

/// Why a node id was refused.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
pub enum NodeIdError {
    /// Empty id (§4.1: "empty source id" is rejected).
    #[error("empty node id")]
    Empty,
    /// More than 32 bytes.
    #[error("node id of {0} bytes exceeds 32 bytes")]
    TooLong(usize),
    /// Contains a NUL byte, which would end the field early.
    #[error("node id contains a NUL byte")]
    ContainsNul,
}

impl NodeId {
    /// The centre's reserved id, `center` (§1).
    pub const CENTRE: NodeId = {
        let mut bytes = [0u8; NODE_ID_LEN];
        let src = *b"center";
        let mut i = 0;
        while i < src.len() {
            bytes[i] = src[i];
            i += 1;
        }
        NodeId { len: 6, bytes }
    };

    /// An id from raw bytes.
    ///
    /// # Errors
    /// [`NodeIdError`] for an empty id, more than 32 bytes or a NUL byte.
    pub fn from_bytes(b: &[u8]) -> Result<Self, NodeIdError> {
        if b.is_empty() {
            return Err(NodeIdError::Empty);
        }
        if b.len() > NODE_ID_LEN {
            return Err(NodeIdError::TooLong(b.len()));
        }
        if b.contains(&0) {
            return Err(NodeIdError::ContainsNul);
        }
        let mut bytes = [0u8; NODE_ID_LEN];
        bytes[..b.len()].copy_from_slice(b);
        Ok(Self {
            len: b.len() as u8,
            bytes,
        })
    }

    /// An id from text (same rules as [`NodeId::from_bytes`]).
    ///
    /// # Errors
    /// See [`NodeId::from_bytes`].
    pub fn new(s: &str) -> Result<Self, NodeIdError> {
        Self::from_bytes(s.as_bytes())
    }

    /// Reads a NUL-padded field (the first 32 bytes of `field`) up to its
    /// first NUL (§4.1).
    ///
    /// # Errors
    /// [`NodeIdError::Empty`] when the field starts with NUL.
    pub fn from_field(field: &[u8]) -> Result<Self, NodeIdError> {
        let field = &field[..field.len().min(NODE_ID_LEN)];
        let end = field.iter().position(|&b| b == 0).unwrap_or(field.len());
        Self::from_bytes(&field[..end])
    }

    /// The id's bytes (no padding).
    pub fn as_bytes(&self) -> &[u8] {
        &self.bytes[..usize::from(self.len)]
    }

    /// The NUL-padded 32-byte field.
    pub fn field(&self) -> &[u8; NODE_ID_LEN] {
        &self.bytes
    }

    /// Whether this is the centre's id, `center`.
    pub fn is_centre(&self) -> bool {
        *self == Self::CENTRE
    }
}

impl std::str::FromStr for NodeId {
    type Err = NodeIdError;

    fn from_str(s: &str) -> Result<Self, NodeIdError> {
        Self::new(s)
    }
}

impl fmt::Display for NodeId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}", String::from_utf8_lossy(self.as_bytes()))
    }
}

impl fmt::Debug for NodeId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "NodeId({:?})", String::from_utf8_lossy(self.as_bytes()))
    }
}
