//! The Petrel QUIC transport: quinn server and client endpoints (rustls with the
//! `ring` provider, a self-signed certificate) whose connections run a chosen
//! congestion controller, with flow-control windows sized for bulk transfer.
//!
//! quinn's defaults (research notes §3.4) are a 1.25 MB stream receive window and a
//! 10 MB send window, enough for 100 Mbit/s × 100 ms. Petrel's benchmarks run
//! 200 Mbit/s with 8 ms base RTT behind a 1000-packet queue, where a loss-based
//! controller that fills the queue sees ~66 ms RTT (a 1.65 MB BDP), so the defaults
//! here are 8 MiB per stream, 16 MiB per connection and a 16 MiB send window: a
//! window never limits a single flow below the link rate up to ~640 Mbit/s at 100 ms
//! RTT.

use std::io;
use std::net::SocketAddr;
use std::sync::Arc;

use petrel_proto::cc::CongestionKind;
use petrel_sys::range::{check_range_in, RangeError};
use petrel_sys::socket::{bind_udp, BufferRequest, OnRefusal, UdpOptions};
use quinn::congestion::{BbrConfig, ControllerFactory, CubicConfig, NewRenoConfig};
use quinn::VarInt;
use quinn::{ClientConfig, Endpoint, EndpointConfig, ServerConfig, TokioRuntime, TransportConfig};
use rustls::pki_types::{CertificateDer, PrivateKeyDer, PrivatePkcs8KeyDer};

use crate::PetrelControllerFactory;

/// Which congestion controller a QUIC connection runs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum QuicCongestion {
    /// A Petrel controller through [`PetrelControllerFactory`] (window only: quinn paces
    /// at 1.25·cwnd/srtt whatever the controller's pacing rate, see the crate docs).
    Petrel(CongestionKind),
    /// quinn's own NewReno (`quinn::congestion::NewReno`, RFC 9002 §7).
    QuinnNewReno,
    /// quinn's own CUBIC (`quinn::congestion::Cubic`, RFC 8312).
    QuinnCubic,
    /// quinn's own BBR (`quinn::congestion::Bbr`, a BBRv1 port marked experimental).
    QuinnBbr,
}

impl QuicCongestion {
    /// A stable name: the Petrel controller's (`reno`, `cubic`, `bbrv1`, ...) or
    /// `quinn-newreno`, `quinn-cubic`, `quinn-bbr`.
    pub fn name(self) -> &'static str {
        match self {
            Self::Petrel(kind) => kind.as_str(),
            Self::QuinnNewReno => "quinn-newreno",
            Self::QuinnCubic => "quinn-cubic",
            Self::QuinnBbr => "quinn-bbr",
        }
    }

    /// quinn's own controller closest to `kind`: reno → NewReno, cubic → Cubic,
    /// bbrv1 → Bbr; `None` for the others (quinn has no BBRv2/v3).
    pub fn quinn_own(kind: CongestionKind) -> Option<Self> {
        match kind {
            CongestionKind::NewReno => Some(Self::QuinnNewReno),
            CongestionKind::Cubic => Some(Self::QuinnCubic),
            CongestionKind::BbrV1 => Some(Self::QuinnBbr),
            _ => None,
        }
    }

    fn factory(self, seed: u64) -> Arc<dyn ControllerFactory + Send + Sync> {
        match self {
            Self::Petrel(kind) => Arc::new(PetrelControllerFactory::with_seed(kind, seed)),
            Self::QuinnNewReno => Arc::new(NewRenoConfig::default()),
            Self::QuinnCubic => Arc::new(CubicConfig::default()),
            Self::QuinnBbr => Arc::new(BbrConfig::default()),
        }
    }
}

/// Settings of both endpoints. `Default`: Petrel CUBIC, stream receive window 8 MiB,
/// connection receive window 16 MiB, send window 16 MiB, 4 MiB socket buffers
/// requested, seed 0.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct QuicTransportConfig {
    /// The congestion controller of every connection.
    pub congestion: QuicCongestion,
    /// Bytes a peer may send on one stream beyond what the application has read.
    /// Range 64 KiB..=1 GiB.
    pub stream_receive_window: u64,
    /// The same for all streams of a connection together. Range 64 KiB..=1 GiB.
    pub receive_window: u64,
    /// Most bytes of stream data buffered for sending, unacknowledged included.
    /// Range 64 KiB..=1 GiB.
    pub send_window: u64,
    /// `SO_SNDBUF` and `SO_RCVBUF` requested, bytes (the kernel caps it at
    /// `net.core.{w,r}mem_max`). Range 4 KiB..=1 GiB.
    pub socket_buffer: usize,
    /// Seed of a Petrel BBR's probe timing.
    pub seed: u64,
}

impl Default for QuicTransportConfig {
    fn default() -> Self {
        Self {
            congestion: QuicCongestion::Petrel(CongestionKind::Cubic),
            stream_receive_window: 8 << 20,
            receive_window: 16 << 20,
            send_window: 16 << 20,
            socket_buffer: 4 << 20,
            seed: 0,
        }
    }
}

/// A [`QuicTransportConfig`] field outside its range (the workspace's one
/// range-checked configuration error).
pub type ConfigError = RangeError;

/// Allowed stream, connection and send windows, bytes.
const WINDOW_RANGE: std::ops::RangeInclusive<u64> = (64 << 10)..=(1 << 30);
/// Allowed socket buffer request, bytes.
const SOCKET_BUFFER_RANGE: std::ops::RangeInclusive<usize> = 4096..=(1 << 30);

impl QuicTransportConfig {
    /// Checks every field's range.
    ///
    /// # Errors
    /// A [`ConfigError`] naming the first field out of range.
    pub fn validate(&self) -> Result<(), ConfigError> {
        for (field, value) in [
            ("stream_receive_window", self.stream_receive_window),
            ("receive_window", self.receive_window),
            ("send_window", self.send_window),
        ] {
            check_range_in(field, value, &WINDOW_RANGE, "bytes")?;
        }
        check_range_in(
            "socket_buffer",
            self.socket_buffer,
            &SOCKET_BUFFER_RANGE,
            "bytes",
        )
    }

    /// quinn's transport configuration for these settings; every other parameter
    /// keeps quinn's default.
    ///
    /// # Errors
    /// A [`ConfigError`] when a field is out of range.
    pub fn transport_config(&self) -> Result<TransportConfig, ConfigError> {
        self.validate()?;
        // Validated windows are at most 1 GiB, far below VarInt's 2^62 bound.
        let varint = |value| VarInt::from_u64(value).unwrap_or(VarInt::MAX);
        let mut transport = TransportConfig::default();
        transport
            .stream_receive_window(varint(self.stream_receive_window))
            .receive_window(varint(self.receive_window))
            .send_window(self.send_window)
            .congestion_controller_factory(self.congestion.factory(self.seed));
        Ok(transport)
    }
}

/// Why an endpoint could not be made.
#[derive(Debug, thiserror::Error)]
pub enum QuicError {
    /// A configuration field is out of range.
    #[error(transparent)]
    Config(#[from] ConfigError),
    /// `rcgen` could not make the key or certificate.
    #[error("cannot generate the self-signed certificate: {0}")]
    Certificate(#[from] rcgen::Error),
    /// rustls rejected the certificate or key.
    #[error("TLS configuration rejected: {0}")]
    Tls(#[from] rustls::Error),
    /// rustls could not build a verifier trusting the certificate.
    #[error("cannot build the certificate verifier: {0}")]
    Verifier(#[from] rustls::client::VerifierBuilderError),
    /// The UDP socket could not be made or bound.
    #[error("cannot bind the QUIC socket: {0}")]
    Io(#[from] io::Error),
}

/// A self-signed certificate and its key, for tests and benchmarks: the server
/// presents it, clients trust exactly it, so the full TLS 1.3 handshake and packet
/// protection run as in production.
#[derive(Debug, Clone)]
pub struct SelfSigned {
    server_name: String,
    cert: CertificateDer<'static>,
    key_pkcs8: Vec<u8>,
}

impl SelfSigned {
    /// A fresh certificate for `server_name` (e.g. `localhost`).
    ///
    /// # Errors
    /// [`QuicError::Certificate`] if `rcgen` fails.
    pub fn generate(server_name: &str) -> Result<Self, QuicError> {
        let certified = rcgen::generate_simple_self_signed(vec![server_name.to_owned()])?;
        Ok(Self {
            server_name: server_name.to_owned(),
            cert: certified.cert.der().clone(),
            key_pkcs8: certified.signing_key.serialize_der(),
        })
    }

    /// The name clients must connect to (`Endpoint::connect(addr, name)`).
    pub fn server_name(&self) -> &str {
        &self.server_name
    }

    /// The DER certificate.
    pub fn cert(&self) -> &CertificateDer<'static> {
        &self.cert
    }
}

/// An endpoint and the socket buffers the kernel granted, bytes.
#[derive(Debug)]
pub struct BoundEndpoint {
    /// The quinn endpoint (drive it from a tokio runtime).
    pub endpoint: Endpoint,
    /// `SO_SNDBUF` read back after setting.
    pub send_buffer: usize,
    /// `SO_RCVBUF` read back after setting.
    pub recv_buffer: usize,
}

/// A server endpoint on `addr` presenting `identity`, accepting connections with
/// `config`. Must be called inside a tokio runtime.
///
/// # Errors
/// [`QuicError`]: bad config, a certificate rustls rejects, or the bind failing.
pub fn server(
    addr: SocketAddr,
    identity: &SelfSigned,
    config: &QuicTransportConfig,
) -> Result<BoundEndpoint, QuicError> {
    let key = PrivateKeyDer::from(PrivatePkcs8KeyDer::from(identity.key_pkcs8.clone()));
    let mut server = ServerConfig::with_single_cert(vec![identity.cert.clone()], key)?;
    server.transport_config(Arc::new(config.transport_config()?));
    bind(addr, Some(server), config)
}

/// A client endpoint on `addr` trusting only `trusted`, whose connections use
/// `config`. Must be called inside a tokio runtime.
///
/// # Errors
/// [`QuicError`]: bad config, a verifier rustls cannot build, or the bind failing.
pub fn client(
    addr: SocketAddr,
    trusted: &SelfSigned,
    config: &QuicTransportConfig,
) -> Result<BoundEndpoint, QuicError> {
    let mut roots = rustls::RootCertStore::empty();
    roots.add(trusted.cert.clone())?;
    let mut client = ClientConfig::with_root_certificates(Arc::new(roots))?;
    client.transport_config(Arc::new(config.transport_config()?));
    let mut bound = bind(addr, None, config)?;
    bound.endpoint.set_default_client_config(client);
    Ok(bound)
}

fn bind(
    addr: SocketAddr,
    server: Option<ServerConfig>,
    config: &QuicTransportConfig,
) -> Result<BoundEndpoint, QuicError> {
    // A refused size is not fatal: the granted size is read back and reported.
    let (socket, buffers) = bind_udp(&UdpOptions {
        buffers: BufferRequest::both(config.socket_buffer),
        on_refusal: OnRefusal::Ignore,
        ..UdpOptions::new(addr)
    })?;
    let endpoint = Endpoint::new(
        EndpointConfig::default(),
        server,
        socket,
        Arc::new(TokioRuntime),
    )?;
    Ok(BoundEndpoint {
        endpoint,
        send_buffer: buffers.send_actual,
        recv_buffer: buffers.recv_actual,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn defaults_validate_and_out_of_range_names_the_field() {
        let config = QuicTransportConfig::default();
        config.validate().unwrap();
        config.transport_config().unwrap();
        let bad = QuicTransportConfig {
            send_window: 1024,
            ..config
        };
        assert_eq!(bad.validate().unwrap_err().field, "send_window");
        let bad = QuicTransportConfig {
            socket_buffer: 1,
            ..config
        };
        assert_eq!(bad.validate().unwrap_err().field, "socket_buffer");
    }

    #[test]
    fn quinn_has_no_bbrv2_or_bbrv3() {
        assert_eq!(
            QuicCongestion::quinn_own(CongestionKind::BbrV1),
            Some(QuicCongestion::QuinnBbr)
        );
        assert_eq!(QuicCongestion::quinn_own(CongestionKind::BbrV3), None);
        assert_eq!(QuicCongestion::QuinnCubic.name(), "quinn-cubic");
        assert_eq!(
            QuicCongestion::Petrel(CongestionKind::BbrV2).name(),
            "bbrv2"
        );
    }
}
