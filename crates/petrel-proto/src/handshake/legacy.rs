//! Encoder and decoder for legacy (arknet/ARK) control datagrams,
//! `specs/kcp.md` §3. Told apart from KCP data (≥ 24 bytes) by exact length.

use super::wire::{exact, Reader, WireError};

/// Legacy SYN length, bytes.
pub const LEGACY_SYN_LEN: usize = 5;
/// Legacy SYN-ACK and FIN length, bytes.
pub const LEGACY_SYN_ACK_LEN: usize = 9;

/// A legacy (arknet/ARK) control datagram, `specs/kcp.md` §3.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum LegacyMessage {
    /// `flag=1 u8, sync_id u32` (5 bytes).
    Syn {
        /// Client's low 32 bits of wall-clock ms.
        sync_id: u32,
    },
    /// `flag=2 u8, sync_id u32, conv u32` (9 bytes).
    SynAck {
        /// Echo of the SYN's sync_id.
        sync_id: u32,
        /// Server-chosen conv.
        conv: u32,
    },
    /// `flag=3 u8, sync_id u32, conv u32` (9 bytes).
    Fin {
        /// The connection's sync_id.
        sync_id: u32,
        /// The connection's conv.
        conv: u32,
    },
}

impl LegacyMessage {
    /// Appends the encoding to `out`.
    pub fn encode(&self, out: &mut Vec<u8>) {
        let (flag, sync_id, conv) = match *self {
            Self::Syn { sync_id } => (1u8, sync_id, None),
            Self::SynAck { sync_id, conv } => (2, sync_id, Some(conv)),
            Self::Fin { sync_id, conv } => (3, sync_id, Some(conv)),
        };
        out.push(flag);
        out.extend_from_slice(&sync_id.to_le_bytes());
        if let Some(conv) = conv {
            out.extend_from_slice(&conv.to_le_bytes());
        }
    }

    /// Decodes a legacy control datagram; the length must be exactly 5 (SYN) or 9.
    ///
    /// # Errors
    /// [`WireError::BadLength`] or [`WireError::UnknownType`] for a wrong flag.
    pub fn decode(datagram: &[u8]) -> Result<Self, WireError> {
        let mut r = Reader::new(datagram, 0);
        let flag = r.u8()?;
        let (name, expected) = match flag {
            1 => ("SYN", LEGACY_SYN_LEN),
            2 => ("SYN-ACK", LEGACY_SYN_ACK_LEN),
            3 => ("FIN", LEGACY_SYN_ACK_LEN),
            other => return Err(WireError::UnknownType(other)),
        };
        exact(name, expected, datagram.len())?;
        let sync_id = r.u32()?;
        Ok(match flag {
            1 => Self::Syn { sync_id },
            2 => Self::SynAck {
                sync_id,
                conv: r.u32()?,
            },
            _ => Self::Fin {
                sync_id,
                conv: r.u32()?,
            },
        })
    }
}
