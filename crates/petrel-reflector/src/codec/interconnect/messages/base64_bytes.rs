//! Byte arrays inside payload JSON are padded standard base64, Go's
//! encoding of `[]byte` (draarl-interconnect §3.1). `null` and a missing
//! key read as empty.

use base64::engine::general_purpose::STANDARD;
use base64::Engine as _;
use serde::{Deserialize, Deserializer, Serializer};

/// Serialises bytes as padded standard base64.
pub(super) fn serialize<S: Serializer>(bytes: &[u8], s: S) -> Result<S::Ok, S::Error> {
    s.serialize_str(&STANDARD.encode(bytes))
}

/// Reads padded standard base64 (or `null`) into bytes.
pub(super) fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<Vec<u8>, D::Error> {
    let text: Option<String> = Option::deserialize(d)?;
    match text {
        None => Ok(Vec::new()),
        Some(t) => STANDARD.decode(t).map_err(serde::de::Error::custom),
    }
}
