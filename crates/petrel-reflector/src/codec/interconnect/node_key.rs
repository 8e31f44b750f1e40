//! The node session key and the envelope tag (draarl-interconnect §4.2):
//! HMAC-SHA256 keyed with the raw bytes of `node_auth_ok.key` (no
//! derivation), over every byte before the 32-byte tag, compared in
//! constant time.

use std::fmt;

use hmac::{Hmac, Mac};
use sha2::Sha256;
use thiserror::Error;

/// Bytes of the HMAC-SHA256 tag at the end of every envelope.
pub const TAG_LEN: usize = 32;
/// Shortest key the codec accepts (§4.2; the centre issues 32 bytes, the
/// edge checks ≥ 16 when it receives one, §3.2 step 6).
pub const MIN_KEY_LEN: usize = 8;

/// A node session key, kept as a keyed HMAC state so each datagram only
/// clones it. `Debug` never shows the key.
#[derive(Clone)]
pub struct NodeKey {
    mac: Hmac<Sha256>,
}

/// Why a key was refused.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
pub enum KeyError {
    /// Shorter than [`MIN_KEY_LEN`] bytes.
    #[error("node key of {0} bytes is shorter than 8 bytes")]
    TooShort(usize),
}

impl NodeKey {
    /// A key from its raw bytes (≥ 8).
    ///
    /// # Errors
    /// [`KeyError::TooShort`].
    pub fn new(raw: &[u8]) -> Result<Self, KeyError> {
        if raw.len() < MIN_KEY_LEN {
            return Err(KeyError::TooShort(raw.len()));
        }
        let mac = <Hmac<Sha256> as Mac>::new_from_slice(raw)
            .map_err(|_| KeyError::TooShort(raw.len()))?;
        Ok(Self { mac })
    }

    /// HMAC-SHA256 of `signed` (every byte before the tag).
    pub fn tag(&self, signed: &[u8]) -> [u8; TAG_LEN] {
        let mut mac = self.mac.clone();
        mac.update(signed);
        mac.finalize().into_bytes().into()
    }

    /// Whether `tag` is the HMAC of `signed`, compared in constant time.
    pub fn verify(&self, signed: &[u8], tag: &[u8]) -> bool {
        let mut mac = self.mac.clone();
        mac.update(signed);
        mac.verify_slice(tag).is_ok()
    }
}

impl fmt::Debug for NodeKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("NodeKey(<hidden>)")
    }
}
