//! The relay payload of subtypes 0x30 RelayUpstream and 0x31
//! RelayDownstream (draarl-interconnect §4.6): a 42-byte header, all
//! big-endian, then the inner DraARLv1 packet.
//!
//! ```text
//!  0          8            16        24                 32              40  42
//!  SessionID  SessionEpoch DomainID  RequiredProjVer    SpeakerLeaseID  L   inner (L bytes, 90..=800)
//! ```
//!
//! The codec checks the frame's own structure; the inner packet's rules
//! are in [`check_inner`](super::check_inner).

use thiserror::Error;

use crate::codec::{HEADER_LEN, MAX_DATAGRAM_LEN};

/// Bytes of the relay header before the inner packet.
pub const RELAY_HEADER_LEN: usize = 42;
/// Smallest inner packet (a bare 90-byte DraARLv1 header).
pub const MIN_INNER_LEN: usize = HEADER_LEN;
/// Largest inner packet (draarl-v1 §2.1).
pub const MAX_INNER_LEN: usize = MAX_DATAGRAM_LEN;

/// The relay header fields.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct RelayHeader {
    /// Device session id (non-zero).
    pub session_id: u64,
    /// Device session epoch (non-zero).
    pub session_epoch: u64,
    /// Communication domain (non-zero; downstream: the route's domain).
    pub domain_id: u64,
    /// Upstream: the edge's projection version; downstream: the target
    /// edge's version at send time (§4.6, §4.7).
    pub required_projection_version: u64,
    /// Speaker lease id (§3.10; 0 for text).
    pub speaker_lease_id: u64,
}

/// A decoded relay payload borrowing its inner packet.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RelayFrame<'a> {
    /// The 42-byte header's fields.
    pub header: RelayHeader,
    /// The inner DraARLv1 packet (Type 4 or 5).
    pub inner: &'a [u8],
}

/// Why a relay payload was refused (decoding or encoding).
#[derive(Debug, Clone, PartialEq, Eq, Error)]
pub enum RelayError {
    /// Shorter than the 42-byte header.
    #[error("relay payload of {0} bytes is shorter than 42 bytes")]
    TooShort(usize),
    /// SessionID is 0.
    #[error("relay session id is 0")]
    ZeroSessionId,
    /// SessionEpoch is 0.
    #[error("relay session epoch is 0")]
    ZeroSessionEpoch,
    /// DomainID is 0.
    #[error("relay domain id is 0")]
    ZeroDomainId,
    /// Inner length outside 90..=800.
    #[error("inner packet of {0} bytes is outside 90..=800")]
    InnerLength(usize),
    /// 42 + L differs from the payload length.
    #[error("inner length {declared} does not fit a payload of {actual} bytes")]
    LengthMismatch {
        /// The L field.
        declared: u16,
        /// Payload bytes.
        actual: usize,
    },
}

fn be_u64(b: &[u8], off: usize) -> u64 {
    let mut a = [0u8; 8];
    a.copy_from_slice(&b[off..off + 8]);
    u64::from_be_bytes(a)
}

fn check_ids(h: &RelayHeader) -> Result<(), RelayError> {
    if h.session_id == 0 {
        return Err(RelayError::ZeroSessionId);
    }
    if h.session_epoch == 0 {
        return Err(RelayError::ZeroSessionEpoch);
    }
    if h.domain_id == 0 {
        return Err(RelayError::ZeroDomainId);
    }
    Ok(())
}

impl<'a> RelayFrame<'a> {
    /// Decodes a relay payload.
    ///
    /// # Errors
    /// [`RelayError`] for a short payload, a zero session, epoch or domain,
    /// an inner length outside 90..=800 or not matching the payload.
    pub fn parse(payload: &'a [u8]) -> Result<Self, RelayError> {
        if payload.len() < RELAY_HEADER_LEN {
            return Err(RelayError::TooShort(payload.len()));
        }
        let header = RelayHeader {
            session_id: be_u64(payload, 0),
            session_epoch: be_u64(payload, 8),
            domain_id: be_u64(payload, 16),
            required_projection_version: be_u64(payload, 24),
            speaker_lease_id: be_u64(payload, 32),
        };
        check_ids(&header)?;
        let declared = u16::from_be_bytes([payload[40], payload[41]]);
        let l = usize::from(declared);
        if !(MIN_INNER_LEN..=MAX_INNER_LEN).contains(&l) {
            return Err(RelayError::InnerLength(l));
        }
        if RELAY_HEADER_LEN + l != payload.len() {
            return Err(RelayError::LengthMismatch {
                declared,
                actual: payload.len(),
            });
        }
        Ok(Self {
            header,
            inner: &payload[RELAY_HEADER_LEN..],
        })
    }

    /// Appends the encoded payload to `out`.
    ///
    /// # Errors
    /// [`RelayError`] for a zero session, epoch or domain, or an inner
    /// packet outside 90..=800 bytes; `out` is then unchanged.
    pub fn write(&self, out: &mut Vec<u8>) -> Result<(), RelayError> {
        check_ids(&self.header)?;
        let l = self.inner.len();
        if !(MIN_INNER_LEN..=MAX_INNER_LEN).contains(&l) {
            return Err(RelayError::InnerLength(l));
        }
        let h = &self.header;
        out.reserve(RELAY_HEADER_LEN + l);
        out.extend_from_slice(&h.session_id.to_be_bytes());
        out.extend_from_slice(&h.session_epoch.to_be_bytes());
        out.extend_from_slice(&h.domain_id.to_be_bytes());
        out.extend_from_slice(&h.required_projection_version.to_be_bytes());
        out.extend_from_slice(&h.speaker_lease_id.to_be_bytes());
        out.extend_from_slice(&(l as u16).to_be_bytes());
        out.extend_from_slice(self.inner);
        Ok(())
    }

    /// The encoded payload as a new vector.
    ///
    /// # Errors
    /// See [`RelayFrame::write`].
    pub fn to_vec(&self) -> Result<Vec<u8>, RelayError> {
        let mut out = Vec::new();
        self.write(&mut out)?;
        Ok(out)
    }
}
