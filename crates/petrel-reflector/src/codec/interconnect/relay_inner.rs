//! Rules for the DraARLv1 packet inside a relay payload
//! (draarl-interconnect §4.6, checked at the centre on upstream and again
//! at centre-local delivery): `DraA`, its length field equal to the inner
//! length, Type 4 (text) or 5 (voice) only, password bytes 38..48 all zero;
//! and its identity equal to the sending route's (SSID byte 50, username
//! bytes 6..38 exactly, callsign bytes 54..86 all zero or exact).

use thiserror::Error;

use crate::codec::header::{OFF_CALLSIGN, OFF_PASSWORD, OFF_RESERVED, OFF_TYPE};
use crate::codec::{
    PacketType, CALLSIGN_LEN, HEADER_LEN, MAGIC, OFF_SSID, OFF_USERNAME, USERNAME_LEN,
};

/// What the inner packet carries.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum InnerKind {
    /// Type 4 text (carries speaker lease 0, §3.10).
    Text,
    /// Type 5 voice (carries the current speaker lease).
    Voice,
}

/// Why an inner packet was refused.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
pub enum InnerError {
    /// Shorter than the 90-byte header.
    #[error("inner packet of {0} bytes is shorter than 90 bytes")]
    TooShort(usize),
    /// Not `DraA`.
    #[error("inner packet has a bad magic")]
    BadMagic,
    /// Its length field differs from the inner length.
    #[error("inner length field {declared} != inner length {actual}")]
    LengthMismatch {
        /// The inner length field.
        declared: u16,
        /// Inner bytes.
        actual: usize,
    },
    /// A type other than 4 or 5.
    #[error("inner packet type {0} is not 4 or 5")]
    BadType(u8),
    /// A password byte is not zero.
    #[error("inner packet carries a password")]
    PasswordNotZero,
}

/// Checks the structural rules of §4.6 and says whether it is text or voice.
///
/// # Errors
/// The first [`InnerError`] found.
pub fn check_inner(inner: &[u8]) -> Result<InnerKind, InnerError> {
    if inner.len() < HEADER_LEN {
        return Err(InnerError::TooShort(inner.len()));
    }
    if inner[..4] != MAGIC {
        return Err(InnerError::BadMagic);
    }
    let declared = u16::from_be_bytes([inner[4], inner[5]]);
    if usize::from(declared) != inner.len() {
        return Err(InnerError::LengthMismatch {
            declared,
            actual: inner.len(),
        });
    }
    let kind = match PacketType::from_u8(inner[OFF_TYPE]) {
        Some(PacketType::Text) => InnerKind::Text,
        Some(PacketType::Voice) => InnerKind::Voice,
        _ => return Err(InnerError::BadType(inner[OFF_TYPE])),
    };
    if inner[OFF_PASSWORD..OFF_TYPE].iter().any(|&b| b != 0) {
        return Err(InnerError::PasswordNotZero);
    }
    Ok(kind)
}

/// The identity of the route a relay claims to come from (§4.6).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RouteIdentity<'a> {
    /// The account name.
    pub username: &'a str,
    /// The device SSID.
    pub ssid: u8,
    /// The route's callsign.
    pub callsign: &'a str,
}

fn padded<const N: usize>(s: &str) -> Option<[u8; N]> {
    let b = s.as_bytes();
    if b.len() > N {
        return None;
    }
    let mut out = [0u8; N];
    out[..b.len()].copy_from_slice(b);
    Some(out)
}

/// Whether the inner packet's identity equals `route`: SSID equal, the
/// username field exactly the NUL-padded username, and the callsign field
/// either all zero or exactly the NUL-padded callsign. A packet shorter
/// than the header never matches.
pub fn inner_matches_route(inner: &[u8], route: &RouteIdentity<'_>) -> bool {
    if inner.len() < HEADER_LEN || inner[OFF_SSID] != route.ssid {
        return false;
    }
    let Some(username) = padded::<USERNAME_LEN>(route.username) else {
        return false;
    };
    if inner[OFF_USERNAME..OFF_USERNAME + USERNAME_LEN] != username {
        return false;
    }
    let callsign_field = &inner[OFF_CALLSIGN..OFF_RESERVED];
    debug_assert_eq!(callsign_field.len(), CALLSIGN_LEN);
    callsign_field.iter().all(|&b| b == 0)
        || padded::<CALLSIGN_LEN>(route.callsign).is_some_and(|c| callsign_field == c)
}
