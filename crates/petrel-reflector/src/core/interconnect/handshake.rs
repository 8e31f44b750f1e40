//! The control-plane handshake and feature negotiation
//! (draarl-interconnect §3.2), sans-IO: no TLS and no socket here; the
//! runtime carries the frames over TLS 1.3, draws the random session id
//! and key, and checks credentials (§3.3) against its store.
//!
//! ```text
//!  edge                                   centre
//!  EdgeHandshake::hello ── node_enroll ─▶ CentreHandshake::handle_hello
//!                                           ├ malformed / node_id "center" ─▶ node_auth_error, close
//!                                           ├ negotiation fails ───────────▶ node_protocol_error, close
//!                                           └ CheckCredential ─(runtime: per-IP limit, credential, capacity)
//!                                               ├ accept(session id, key) ─▶ node_auth_ok
//!                                               └ reject(reason) ──────────▶ node_auth_error, close
//!  EdgeHandshake::handle_reply ◀─────────────┘  (10 s for hello + reply: poll_timeout)
//!    checks key ≥ 16 bytes, protocol in range, features ⊆ offered, required ⊆ features
//! ```

use std::fmt;
use std::time::{Duration, Instant};

use base64::engine::general_purpose::STANDARD_NO_PAD;
use base64::Engine as _;
use thiserror::Error;

use crate::codec::interconnect::{
    kind, negotiate, ControlMessage, Features, Negotiated, NodeId, NodeKey, Offer,
};

use super::node_session::NodeSessionParams;

/// Time the centre allows for the hello and its reply.
pub const HANDSHAKE_TIMEOUT: Duration = Duration::from_secs(10);
/// Shortest session key an edge accepts (§3.2 step 6).
pub const MIN_SESSION_KEY_LEN: usize = 16;
/// The error text of every authentication failure (the token is never
/// echoed).
pub const AUTH_FAILED: &str = "node authentication failed";
/// The error text when the centre holds `MaxNodes` sessions.
pub const CAPACITY_REACHED: &str = "node capacity reached";
/// The error text of a failed negotiation.
pub const NEGOTIATION_FAILED: &str = "node protocol negotiation failed";

/// A long-term credential issued on first registration (§3.3). `Debug`
/// hides it.
#[derive(Clone, PartialEq, Eq)]
pub struct IssuedCredential {
    /// `draarl-node.<node_id>.<secret>`.
    pub credential: String,
    /// Its epoch.
    pub epoch: u32,
}

impl fmt::Debug for IssuedCredential {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("IssuedCredential")
            .field("credential", &"<hidden>")
            .field("epoch", &self.epoch)
            .finish()
    }
}

/// A well-formed, negotiated hello whose credential the runtime checks.
/// `Debug` hides the token.
#[derive(Clone, PartialEq, Eq)]
pub struct PendingAuth {
    /// The node asking.
    pub node_id: NodeId,
    /// Its token or credential.
    pub token: String,
    /// The negotiated version and features.
    pub negotiated: Negotiated,
}

impl fmt::Debug for PendingAuth {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("PendingAuth")
            .field("node_id", &self.node_id)
            .field("token", &"<hidden>")
            .field("negotiated", &self.negotiated)
            .finish()
    }
}

/// What the centre does with a hello.
#[derive(Debug, Clone, PartialEq)]
pub enum HelloOutcome {
    /// Check the credential, then [`CentreHandshake::accept`] or
    /// [`CentreHandshake::reject`].
    CheckCredential(PendingAuth),
    /// Send this and close the connection.
    Refuse(ControlMessage),
}

/// Why the centre refuses after the credential check (§3.2 step 4).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum AuthRejection {
    /// Bad credential, disabled node, or the per-IP attempt limit.
    Failed,
    /// `MaxNodes` sessions already (a reconnecting id needs no slot).
    Capacity,
}

/// Misuse of a handshake, or a reply the edge refuses.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
pub enum HandshakeError {
    /// Called in the wrong state (e.g. accept before a hello).
    #[error("handshake is not in the state for this step")]
    WrongState,
    /// The centre refused the credential (its error text).
    #[error("authentication failed: {0}")]
    AuthFailed(String),
    /// The centre refused the negotiation (its error text).
    #[error("protocol error: {0}")]
    Protocol(String),
    /// A reply of another kind.
    #[error("unexpected reply kind {0:?}")]
    UnexpectedKind(String),
    /// The key is not unpadded base64 of at least 16 bytes.
    #[error("session key unusable")]
    BadKey,
    /// The session id is 0.
    #[error("session id 0")]
    ZeroSession,
    /// The protocol version is outside the edge's range.
    #[error("protocol {0} outside the offered range")]
    ProtocolOutOfRange(u8),
    /// Features the edge did not offer, or without its required ones.
    #[error("negotiated features {0:#x} unusable")]
    Features(u64),
}

#[derive(Debug, Clone, PartialEq, Eq)]
enum CentreState {
    AwaitHello,
    AwaitCredential(NodeId, Negotiated),
    Done,
}

/// The centre's side of one connection's handshake.
#[derive(Debug)]
pub struct CentreHandshake {
    offer: Offer,
    deadline: Instant,
    state: CentreState,
}

fn refuse(kind: &str, error: &str) -> ControlMessage {
    ControlMessage {
        error: error.to_owned(),
        ..ControlMessage::new(kind)
    }
}

impl CentreHandshake {
    /// A handshake for a connection accepted at `now`, offering `offer`.
    pub fn new(now: Instant, offer: Offer) -> Self {
        Self {
            offer,
            deadline: now + HANDSHAKE_TIMEOUT,
            state: CentreState::AwaitHello,
        }
    }

    /// Checks the hello's shape (kind, non-empty `node_id` ≤ 32 bytes, not
    /// `center`), then negotiates, before any credential check (§3.2 steps
    /// 2–3).
    pub fn handle_hello(&mut self, msg: &ControlMessage) -> HelloOutcome {
        if self.state != CentreState::AwaitHello {
            self.state = CentreState::Done;
            return HelloOutcome::Refuse(refuse(kind::NODE_AUTH_ERROR, AUTH_FAILED));
        }
        let node_id = NodeId::new(&msg.node_id).ok().filter(|n| !n.is_centre());
        let Some(node_id) = node_id.filter(|_| msg.kind == kind::NODE_ENROLL) else {
            self.state = CentreState::Done;
            return HelloOutcome::Refuse(refuse(kind::NODE_AUTH_ERROR, AUTH_FAILED));
        };
        let theirs = Offer {
            min_protocol: msg.min_protocol,
            max_protocol: msg.max_protocol,
            features: Features(msg.features),
            required: Features(msg.required_features),
        };
        match negotiate(&self.offer, &theirs) {
            Ok(negotiated) => {
                self.state = CentreState::AwaitCredential(node_id, negotiated);
                HelloOutcome::CheckCredential(PendingAuth {
                    node_id,
                    token: msg.token.clone(),
                    negotiated,
                })
            }
            Err(_) => {
                self.state = CentreState::Done;
                HelloOutcome::Refuse(refuse(kind::NODE_PROTOCOL_ERROR, NEGOTIATION_FAILED))
            }
        }
    }

    /// The `node_auth_ok` for an accepted credential, with the session id
    /// and 32 key bytes the runtime drew (key epoch 1), and the long-term
    /// credential when one was issued.
    ///
    /// # Errors
    /// [`HandshakeError::WrongState`] unless a hello awaits its check.
    pub fn accept(
        &mut self,
        session_id: u64,
        key: &[u8; 32],
        issued: Option<&IssuedCredential>,
    ) -> Result<ControlMessage, HandshakeError> {
        let CentreState::AwaitCredential(node_id, negotiated) = self.state.clone() else {
            return Err(HandshakeError::WrongState);
        };
        self.state = CentreState::Done;
        Ok(ControlMessage {
            node_id: node_id.to_string(),
            session_id,
            key_epoch: 1,
            key: STANDARD_NO_PAD.encode(key),
            protocol: negotiated.protocol,
            features: negotiated.features.0,
            credential: issued.map(|c| c.credential.clone()).unwrap_or_default(),
            credential_epoch: issued.map_or(0, |c| c.epoch),
            ..ControlMessage::new(kind::NODE_AUTH_OK)
        })
    }

    /// The refusal to send before closing.
    pub fn reject(&mut self, reason: AuthRejection) -> ControlMessage {
        self.state = CentreState::Done;
        refuse(
            kind::NODE_AUTH_ERROR,
            match reason {
                AuthRejection::Failed => AUTH_FAILED,
                AuthRejection::Capacity => CAPACITY_REACHED,
            },
        )
    }

    /// The handshake deadline while it is unfinished.
    pub fn poll_timeout(&self) -> Option<Instant> {
        (self.state != CentreState::Done).then_some(self.deadline)
    }

    /// Whether the handshake ran out of time by `now` (close the
    /// connection).
    pub fn handle_timeout(&mut self, now: Instant) -> bool {
        if self.state != CentreState::Done && now >= self.deadline {
            self.state = CentreState::Done;
            return true;
        }
        false
    }
}

/// What an edge gets from a successful handshake.
#[derive(Debug, Clone)]
pub struct EdgeSession {
    /// The centre's session, for [`super::DataPlane::attach`].
    pub session: NodeSessionParams,
    /// The chosen protocol version.
    pub protocol: u8,
    /// The session's features.
    pub features: Features,
    /// A long-term credential to persist before use (§3.3).
    pub issued: Option<IssuedCredential>,
}

/// The edge's side of the handshake.
#[derive(Debug, Clone)]
pub struct EdgeHandshake {
    node_id: NodeId,
    offer: Offer,
}

impl EdgeHandshake {
    /// A handshake of `node_id` offering `offer`.
    pub fn new(node_id: NodeId, offer: Offer) -> Self {
        Self { node_id, offer }
    }

    /// The hello carrying `token`.
    pub fn hello(&self, token: &str) -> ControlMessage {
        ControlMessage {
            node_id: self.node_id.to_string(),
            token: token.to_owned(),
            min_protocol: self.offer.min_protocol,
            max_protocol: self.offer.max_protocol,
            features: self.offer.features.0,
            required_features: self.offer.required.0,
            ..ControlMessage::new(kind::NODE_ENROLL)
        }
    }

    /// Checks the centre's reply (§3.2 step 6).
    ///
    /// # Errors
    /// [`HandshakeError`] for a refusal or an unusable `node_auth_ok`.
    pub fn handle_reply(&self, msg: &ControlMessage) -> Result<EdgeSession, HandshakeError> {
        match msg.kind.as_str() {
            kind::NODE_AUTH_OK => {}
            kind::NODE_AUTH_ERROR => return Err(HandshakeError::AuthFailed(msg.error.clone())),
            kind::NODE_PROTOCOL_ERROR => return Err(HandshakeError::Protocol(msg.error.clone())),
            other => return Err(HandshakeError::UnexpectedKind(other.to_owned())),
        }
        // The key is at most a few dozen characters; refuse long ones
        // before decoding.
        if msg.key.len() > 256 {
            return Err(HandshakeError::BadKey);
        }
        let raw = STANDARD_NO_PAD
            .decode(&msg.key)
            .map_err(|_| HandshakeError::BadKey)?;
        if raw.len() < MIN_SESSION_KEY_LEN {
            return Err(HandshakeError::BadKey);
        }
        let key = NodeKey::new(&raw).map_err(|_| HandshakeError::BadKey)?;
        if msg.session_id == 0 {
            return Err(HandshakeError::ZeroSession);
        }
        let ours = self.offer.with_defaults();
        if !(ours.min_protocol..=ours.max_protocol).contains(&msg.protocol) {
            return Err(HandshakeError::ProtocolOutOfRange(msg.protocol));
        }
        let features = Features(msg.features);
        if !ours.features.contains(features) || !features.contains(ours.required) {
            return Err(HandshakeError::Features(msg.features));
        }
        let issued = (!msg.credential.is_empty()).then(|| IssuedCredential {
            credential: msg.credential.clone(),
            epoch: msg.credential_epoch,
        });
        Ok(EdgeSession {
            session: NodeSessionParams {
                node_id: NodeId::CENTRE,
                session_id: msg.session_id,
                key,
                key_epoch: msg.key_epoch,
            },
            protocol: msg.protocol,
            features,
            issued,
        })
    }
}
