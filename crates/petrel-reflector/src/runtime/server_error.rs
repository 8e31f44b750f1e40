//! Why a reflector could not start: a single node or a centre
//! ([`super::server::ServerHandle::start`]) or an edge
//! ([`super::interconnect::EdgeServer::start`]). The interconnect's own
//! start-up errors (the centre's TLS identity, the edge's control client)
//! convert into it where they are defined.

use std::net::SocketAddr;

use petrel_sys::range::RangeError;
use thiserror::Error;

use super::store::StoreError;

/// A start-up error's source from the interconnect.
pub type InterconnectSource = Box<dyn std::error::Error + Send + Sync>;

/// Why the reflector could not start.
#[derive(Debug, Error)]
pub enum ServerError {
    /// A configuration value is out of range.
    #[error("config: {0}")]
    Config(#[from] RangeError),
    /// Opening or loading the store failed.
    #[error("store: {0}")]
    Store(#[from] StoreError),
    /// A socket could not be bound: `what` names its use (`UDP listen
    /// socket`, `HTTP server`), `addr` the address asked for.
    #[error("binding the {what} to {addr}: {cause}")]
    Bind {
        /// What the socket was for.
        what: &'static str,
        /// The address it was to be bound to.
        addr: SocketAddr,
        /// What `bind` reported (in the message, not repeated as a source).
        cause: std::io::Error,
    },
    /// Socket or thread setup failed.
    #[error("io: {0}")]
    Io(#[from] std::io::Error),
    /// The centre's interconnect TLS certificate could not be read or made
    /// (an `IdentityError`).
    #[error("interconnect TLS: {0}")]
    Tls(InterconnectSource),
    /// The edge's control client could not start (an `EdgeStartError`).
    #[error("{0}")]
    Control(InterconnectSource),
}
