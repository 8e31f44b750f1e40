//! Endpoint configuration.

use std::time::Duration;

use petrel_proto::handshake::ControlConfig;
use petrel_proto::kcp::KcpConfig;

/// How connections are set up (see `specs/kcp.md` §3–§4).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Mode {
    /// Petrel's native handshake: stateless cookie, random `conv`, keepalive, graceful close.
    Native,
    /// The legacy SYN/SYN-ACK/FIN handshake spoken by arknet/ARK servers.
    Legacy,
    /// Raw KCP: no handshake, both sides use this fixed `conv`. A server accepts any peer
    /// whose datagrams carry it, so use this only to talk to plain KCP peers.
    Raw {
        /// The conversation id both peers agreed on out of band.
        conv: u32,
    },
}

/// Configuration of an [`Endpoint`](crate::Endpoint). `Default` is the documented default.
#[derive(Debug, Clone)]
pub struct EndpointConfig {
    /// Handshake mode. Default: [`Mode::Native`].
    pub mode: Mode,
    /// ARQ parameters of every connection (MTU, windows, RTO floor, interval, …).
    pub kcp: KcpConfig,
    /// Keepalive, idle timeout and close timing of every connection.
    pub control: ControlConfig,
    /// Give up `connect` after this long without a handshake reply. Default 5 s.
    pub connect_timeout: Duration,
    /// Whether this endpoint accepts incoming connections. Default false (client only).
    pub accept_incoming: bool,
    /// Most connections the endpoint holds at once; handshakes beyond it are refused and
    /// counted. Default 65 536.
    pub max_connections: usize,
    /// Accepted connections waiting for `accept()`; beyond it new ones are refused and
    /// counted. Default 1024.
    pub accept_queue: usize,
    /// Requested `SO_SNDBUF` in bytes; `None` keeps the system default.
    pub send_buffer: Option<usize>,
    /// Requested `SO_RCVBUF` in bytes; `None` keeps the system default.
    pub recv_buffer: Option<usize>,
    /// Seed for `conv` and cookie-secret generation. `None` draws from the OS; set it only
    /// for reproducible tests.
    pub seed: Option<u64>,
}

impl Default for EndpointConfig {
    fn default() -> Self {
        Self {
            mode: Mode::Native,
            kcp: KcpConfig::default(),
            control: ControlConfig::default(),
            connect_timeout: Duration::from_secs(5),
            accept_incoming: false,
            max_connections: 65_536,
            accept_queue: 1024,
            send_buffer: None,
            recv_buffer: None,
            seed: None,
        }
    }
}

impl EndpointConfig {
    /// A server configuration: [`Default`] with `accept_incoming` on.
    pub fn server() -> Self {
        Self {
            accept_incoming: true,
            ..Self::default()
        }
    }

    /// Checks every field; the error names the field and its allowed range.
    pub fn validate(&self) -> Result<(), ConfigError> {
        self.kcp
            .validate()
            .map_err(|e| ConfigError(format!("kcp: {e}")))?;
        if self.max_connections == 0 {
            return Err(ConfigError("max_connections must be ≥ 1".into()));
        }
        if self.accept_queue == 0 {
            return Err(ConfigError("accept_queue must be ≥ 1".into()));
        }
        if self.connect_timeout.is_zero() {
            return Err(ConfigError("connect_timeout must be > 0".into()));
        }
        Ok(())
    }
}

/// An invalid [`EndpointConfig`] field.
#[derive(Debug, Clone, thiserror::Error, PartialEq, Eq)]
#[error("invalid endpoint configuration: {0}")]
pub struct ConfigError(pub String);
