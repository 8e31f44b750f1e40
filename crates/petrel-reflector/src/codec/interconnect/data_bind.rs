//! The DataBind payload, subtype 0x06 (draarl-interconnect §3.5, §4.5):
//! JSON `{"action":"request"}` (edge → centre over TLS),
//! `{"action":"challenge","challenge":…}` (centre → edge over TLS) and
//! `{"action":"proof","challenge":…}` (edge → centre over UDP), the
//! challenge being 32 bytes in padded standard base64 (§3.1, Go's default
//! for byte slices).

use std::fmt;

use base64::engine::general_purpose::STANDARD;
use base64::Engine as _;
use serde::{Deserialize, Serialize};
use thiserror::Error;

/// Bytes of a binding challenge.
pub const CHALLENGE_LEN: usize = 32;

/// A binding challenge: 32 random bytes the runtime draws and the centre
/// issues over TLS. `Debug` hides it (it proves the edge's address).
#[derive(Clone, Copy, PartialEq, Eq)]
pub struct Challenge(pub [u8; CHALLENGE_LEN]);

impl fmt::Debug for Challenge {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("Challenge(<hidden>)")
    }
}

/// One DataBind message.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum DataBind {
    /// The edge asks for a challenge (carries none; one that does is
    /// refused, §4.5).
    Request,
    /// The centre's challenge.
    Challenge(Challenge),
    /// The edge's proof, echoing the challenge. `None` when the proof's
    /// challenge is missing or not 32 bytes: it parses, consumes the
    /// outstanding challenge, and cannot match (§4.5).
    Proof(Option<Challenge>),
}

/// Why a DataBind payload was refused.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
pub enum DataBindError {
    /// Not a JSON object of the expected shape (or bad base64).
    #[error("malformed DataBind JSON: {0}")]
    Json(String),
    /// An action other than `request`, `challenge` or `proof`.
    #[error("unknown DataBind action")]
    UnknownAction,
    /// A `request` that carries a challenge.
    #[error("DataBind request carries a challenge")]
    RequestWithChallenge,
    /// A `challenge` without exactly 32 bytes of challenge.
    #[error("DataBind challenge is not 32 bytes")]
    BadChallenge,
}

#[derive(Serialize, Deserialize)]
struct Wire {
    action: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    challenge: Option<String>,
}

fn decode_challenge(text: &str) -> Result<Option<Challenge>, DataBindError> {
    // The text is bounded by the envelope (≤ 65 360 payload bytes).
    let raw = STANDARD
        .decode(text)
        .map_err(|e| DataBindError::Json(e.to_string()))?;
    Ok(<[u8; CHALLENGE_LEN]>::try_from(raw.as_slice())
        .ok()
        .map(Challenge))
}

impl DataBind {
    /// Decodes a DataBind payload.
    ///
    /// # Errors
    /// [`DataBindError`] for malformed JSON or base64, an unknown action, a
    /// request with a challenge, or a challenge message without 32 bytes.
    pub fn parse(payload: &[u8]) -> Result<Self, DataBindError> {
        let wire: Wire =
            serde_json::from_slice(payload).map_err(|e| DataBindError::Json(e.to_string()))?;
        let challenge = match &wire.challenge {
            Some(text) => decode_challenge(text)?,
            None => None,
        };
        match wire.action.as_str() {
            "request" if wire.challenge.is_some() => Err(DataBindError::RequestWithChallenge),
            "request" => Ok(DataBind::Request),
            "challenge" => challenge
                .map(DataBind::Challenge)
                .ok_or(DataBindError::BadChallenge),
            "proof" => Ok(DataBind::Proof(challenge)),
            _ => Err(DataBindError::UnknownAction),
        }
    }

    /// The JSON payload.
    pub fn to_vec(&self) -> Vec<u8> {
        let (action, challenge) = match self {
            DataBind::Request => ("request", None),
            DataBind::Challenge(c) => ("challenge", Some(c)),
            DataBind::Proof(c) => ("proof", c.as_ref()),
        };
        let wire = Wire {
            action: action.to_owned(),
            challenge: challenge.map(|c| STANDARD.encode(c.0)),
        };
        // Serialising a struct of two strings cannot fail.
        serde_json::to_vec(&wire).unwrap_or_default()
    }
}
