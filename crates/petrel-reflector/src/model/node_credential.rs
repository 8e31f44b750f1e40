//! Edge node credentials and the node token an operator hands an edge
//! (draarl-interconnect §3.3, §3.1).
//!
//! - **Node id** of an edge created by `petrel reflector edge add`: the
//!   given name, or `edge-` + 24 lowercase hex characters (12 random bytes,
//!   §3.3). A given name is 1–32 bytes of `[A-Za-z0-9_-]` and not `center`:
//!   the spec allows any 1–32 bytes without NUL (§4.1); the subset keeps the
//!   credential's three dot-separated parts unambiguous and the token safe
//!   on a command line.
//! - **Long-term credential**: `draarl-node.<node_id>.<secret>`, the secret
//!   being 32 random bytes in unpadded base64url (43 characters). The centre
//!   stores only its SHA-256 in lowercase hex ([`NodeCredential::hash_hex`])
//!   and compares hashes in constant time. It is what goes on the wire, in
//!   `node_enroll.token` (Go edges send the same).
//! - **Node token** (what `edge add` prints, Petrel's own): the credential,
//!   then `@`, then the SHA-256 of the centre's end-entity certificate
//!   (DER) in 64 lowercase hex characters, e.g.
//!   `draarl-node.edge-0123456789abcdef01234567.AbC…xyz@9f86d0…0a08`. The
//!   edge trusts exactly the certificate with that fingerprint (a pinned
//!   self-signed certificate needs no CA). A token without `@…` is a bare
//!   credential; the edge then verifies the centre against CA roots and a
//!   server name.
//!
//! `Debug` never shows a secret.

use std::fmt;

use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use base64::Engine as _;
use sha2::{Digest, Sha256};
use subtle::ConstantTimeEq;
use thiserror::Error;

/// The long-term credential's prefix (§3.3).
pub const CREDENTIAL_PREFIX: &str = "draarl-node";
/// Random bytes of a credential's secret.
pub const CREDENTIAL_SECRET_LEN: usize = 32;
/// Longest node id, bytes (§4.1).
pub const MAX_NODE_NAME_LEN: usize = 32;
/// Separator between the credential and the certificate pin in a node
/// token.
pub const PIN_SEPARATOR: char = '@';

/// Why a node name, credential or token was refused. The messages never
/// quote the secret.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
pub enum NodeCredentialError {
    /// Not 1–32 bytes of `[A-Za-z0-9_-]`, or `center`.
    #[error("node name must be 1-32 characters of A-Z a-z 0-9 _ - and not \"center\"")]
    BadName,
    /// Not `draarl-node.<node_id>.<43 base64url characters of 32 bytes>`.
    #[error("not a node credential (draarl-node.<node id>.<secret>)")]
    BadCredential,
    /// The part after `@` is not 64 hex characters.
    #[error("the certificate pin after '@' is not 64 hex characters")]
    BadPin,
}

/// Whether `name` is a node id `edge add` accepts (see the module docs).
pub fn is_node_name(name: &str) -> bool {
    !name.is_empty()
        && name.len() <= MAX_NODE_NAME_LEN
        && name
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b'-')
        && name != "center"
}

/// The generated node id for 12 random bytes: `edge-` + 24 hex.
pub fn generated_node_name(random: &[u8; 12]) -> String {
    format!("edge-{}", hex(random))
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

/// SHA-256 of `text` in lowercase hex (64 characters): how the centre
/// stores a credential.
pub fn sha256_hex(text: &str) -> String {
    hex(&Sha256::digest(text.as_bytes()))
}

/// Whether two stored-form hashes are equal, compared in constant time.
pub fn hashes_match(a: &str, b: &str) -> bool {
    a.len() == b.len() && bool::from(a.as_bytes().ct_eq(b.as_bytes()))
}

/// A long-term node credential. `Debug` hides the secret.
#[derive(Clone, PartialEq, Eq)]
pub struct NodeCredential {
    node_id: String,
    text: String,
}

impl NodeCredential {
    /// The credential of `node_id` (checked with [`is_node_name`]) with
    /// `secret` (32 random bytes the caller draws).
    ///
    /// # Errors
    /// [`NodeCredentialError::BadName`].
    pub fn new(
        node_id: &str,
        secret: &[u8; CREDENTIAL_SECRET_LEN],
    ) -> Result<Self, NodeCredentialError> {
        if !is_node_name(node_id) {
            return Err(NodeCredentialError::BadName);
        }
        Ok(Self {
            node_id: node_id.to_owned(),
            text: format!(
                "{CREDENTIAL_PREFIX}.{node_id}.{}",
                URL_SAFE_NO_PAD.encode(secret)
            ),
        })
    }

    /// Parses a credential that embeds its node id (§3.3: three
    /// dot-separated parts, the known prefix, a 1–32-byte id, a 32-byte
    /// secret).
    ///
    /// # Errors
    /// [`NodeCredentialError::BadCredential`].
    pub fn parse(text: &str) -> Result<Self, NodeCredentialError> {
        // Longest: prefix, two dots, 32-byte id, 43 characters of secret.
        if text.len() > CREDENTIAL_PREFIX.len() + 2 + MAX_NODE_NAME_LEN + 43 {
            return Err(NodeCredentialError::BadCredential);
        }
        let mut parts = text.split('.');
        let (Some(prefix), Some(id), Some(secret), None) =
            (parts.next(), parts.next(), parts.next(), parts.next())
        else {
            return Err(NodeCredentialError::BadCredential);
        };
        let secret_ok = URL_SAFE_NO_PAD
            .decode(secret)
            .is_ok_and(|s| s.len() == CREDENTIAL_SECRET_LEN);
        if prefix != CREDENTIAL_PREFIX
            || id.is_empty()
            || id.len() > MAX_NODE_NAME_LEN
            || !secret_ok
        {
            return Err(NodeCredentialError::BadCredential);
        }
        Ok(Self {
            node_id: id.to_owned(),
            text: text.to_owned(),
        })
    }

    /// The node id it embeds.
    pub fn node_id(&self) -> &str {
        &self.node_id
    }

    /// The credential text, as sent in `node_enroll.token`.
    pub fn expose(&self) -> &str {
        &self.text
    }

    /// Its SHA-256 in lowercase hex, the stored form.
    pub fn hash_hex(&self) -> String {
        sha256_hex(&self.text)
    }
}

impl fmt::Debug for NodeCredential {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("NodeCredential")
            .field("node_id", &self.node_id)
            .field("secret", &"<hidden>")
            .finish()
    }
}

/// A node token: a credential and, optionally, the pin of the centre's
/// certificate (see the module docs). `Debug` hides the secret.
#[derive(Clone, PartialEq, Eq)]
pub struct NodeToken {
    /// The credential sent in the hello.
    pub credential: NodeCredential,
    /// SHA-256 of the centre's end-entity certificate (DER), if pinned.
    pub pin: Option<[u8; 32]>,
}

impl NodeToken {
    /// Parses `<credential>[@<64 hex>]`.
    ///
    /// # Errors
    /// [`NodeCredentialError::BadCredential`] or
    /// [`NodeCredentialError::BadPin`].
    pub fn parse(text: &str) -> Result<Self, NodeCredentialError> {
        let (cred, pin) = match text.split_once(PIN_SEPARATOR) {
            Some((c, p)) => (c, Some(parse_pin(p)?)),
            None => (text, None),
        };
        Ok(Self {
            credential: NodeCredential::parse(cred)?,
            pin,
        })
    }

    /// The token text: the credential, and `@` + the pin in hex if pinned.
    pub fn expose(&self) -> String {
        match &self.pin {
            Some(pin) => format!("{}{PIN_SEPARATOR}{}", self.credential.expose(), hex(pin)),
            None => self.credential.expose().to_owned(),
        }
    }
}

impl fmt::Debug for NodeToken {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("NodeToken")
            .field("credential", &self.credential)
            .field("pin", &self.pin.map(|p| hex(&p)))
            .finish()
    }
}

/// Parses 64 hex characters (either case) into 32 bytes.
///
/// # Errors
/// [`NodeCredentialError::BadPin`].
pub fn parse_pin(text: &str) -> Result<[u8; 32], NodeCredentialError> {
    if text.len() != 64 || !text.is_ascii() {
        return Err(NodeCredentialError::BadPin);
    }
    let mut out = [0u8; 32];
    for (i, o) in out.iter_mut().enumerate() {
        *o = u8::from_str_radix(&text[2 * i..2 * i + 2], 16)
            .map_err(|_| NodeCredentialError::BadPin)?;
    }
    Ok(out)
}

/// The pin text of a certificate fingerprint: 64 lowercase hex characters.
pub fn pin_hex(pin: &[u8; 32]) -> String {
    hex(pin)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_follow_the_node_id_rules() {
        for ok in ["a", "edge-1", "EDGE_2", &"x".repeat(32)] {
            assert!(is_node_name(ok), "{ok}");
        }
        for bad in ["", "center", "a.b", "a b", "é", &"x".repeat(33), "a@b"] {
            assert!(!is_node_name(bad), "{bad}");
        }
        assert_eq!(
            generated_node_name(&[0xab; 12]),
            format!("edge-{}", "ab".repeat(12))
        );
        assert!(is_node_name(&generated_node_name(&[0xff; 12])));
    }

    #[test]
    fn credential_round_trips_and_hashes_to_sha256_hex() {
        let c = NodeCredential::new("edge-a", &[7; 32]).unwrap();
        assert!(c.expose().starts_with("draarl-node.edge-a."));
        assert_eq!(c.expose().len(), "draarl-node.edge-a.".len() + 43);
        let p = NodeCredential::parse(c.expose()).unwrap();
        assert_eq!(p, c);
        assert_eq!(p.node_id(), "edge-a");
        let h = c.hash_hex();
        assert_eq!(h.len(), 64);
        assert_eq!(h, sha256_hex(c.expose()));
        assert!(hashes_match(&h, &p.hash_hex()));
        assert!(!hashes_match(
            &h,
            &NodeCredential::new("edge-a", &[8; 32]).unwrap().hash_hex()
        ));
        assert!(!hashes_match(&h, &h[..63]));
        assert!(!format!("{c:?}").contains(&c.expose()[19..]));
    }

    #[test]
    fn malformed_credentials_and_pins_are_refused() {
        let good = NodeCredential::new("n1", &[1; 32]).unwrap();
        let secret = &good.expose()["draarl-node.n1.".len()..];
        for bad in [
            String::new(),
            format!("draarl-enroll.n1.{secret}"),
            format!("draarl-node..{secret}"),
            format!("draarl-node.n1.{secret}.x"),
            format!("draarl-node.n1.{}", &secret[..40]),
            format!("draarl-node.{}.{secret}", "x".repeat(33)),
        ] {
            assert_eq!(
                NodeCredential::parse(&bad),
                Err(NodeCredentialError::BadCredential),
                "{bad}"
            );
        }
        let pinned = NodeToken {
            credential: good.clone(),
            pin: Some([0xa5; 32]),
        };
        let text = pinned.expose();
        assert_eq!(text, format!("{}@{}", good.expose(), "a5".repeat(32)));
        assert_eq!(NodeToken::parse(&text).unwrap(), pinned);
        assert_eq!(NodeToken::parse(good.expose()).unwrap().pin, None);
        assert_eq!(
            NodeToken::parse(&format!("{}@abc", good.expose())),
            Err(NodeCredentialError::BadPin)
        );
        assert_eq!(
            NodeToken::parse(&format!("{}@{}", good.expose(), "zz".repeat(32))),
            Err(NodeCredentialError::BadPin)
        );
        let debug = format!("{pinned:?}");
        assert!(!debug.contains(secret), "{debug}");
    }
}
