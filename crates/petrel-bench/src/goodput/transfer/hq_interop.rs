//! The Petrel QUIC side of a peer pair, speaking hq-interop (ALPN `hq-interop`,
//! the QUIC interop runner's HTTP/0.9 profile: `GET /payload\r\n` on a
//! bidirectional stream, the body back, FIN): a self-signed identity the peers
//! can read as PEM files, and quinn configurations with that ALPN and the Petrel
//! transport settings ([`QuicTransportConfig`]).

use std::path::Path;
use std::sync::Arc;

use petrel_quic::transport::QuicTransportConfig;
use quinn::crypto::rustls::{QuicClientConfig, QuicServerConfig};
use rustls::pki_types::{CertificateDer, PrivatePkcs8KeyDer};

use super::{setup, TransferError};

/// The application protocol.
pub(crate) const ALPN: &str = "hq-interop";
/// The request for the payload.
pub(crate) const REQUEST: &[u8] = b"GET /payload\r\n";
/// The name the certificate is for.
pub(crate) const SERVER_NAME: &str = "localhost";

/// A self-signed certificate and key, in DER for rustls and written as PEM
/// (`cert.pem`, `key.pem`) for the peers.
pub(crate) struct Identity {
    cert: CertificateDer<'static>,
    key: PrivatePkcs8KeyDer<'static>,
}

impl Identity {
    /// A fresh identity for [`SERVER_NAME`], its PEM files written into `dir`.
    pub(crate) fn generate(dir: &Path) -> Result<Self, TransferError> {
        let generated =
            rcgen::generate_simple_self_signed(vec![SERVER_NAME.to_owned()]).map_err(setup)?;
        std::fs::write(dir.join("cert.pem"), generated.cert.pem()).map_err(setup)?;
        std::fs::write(dir.join("key.pem"), generated.signing_key.serialize_pem())
            .map_err(setup)?;
        Ok(Self {
            cert: generated.cert.der().clone(),
            key: PrivatePkcs8KeyDer::from(generated.signing_key.serialize_der()),
        })
    }

    pub(crate) fn cert_pem(dir: &Path) -> std::path::PathBuf {
        dir.join("cert.pem")
    }

    pub(crate) fn key_pem(dir: &Path) -> std::path::PathBuf {
        dir.join("key.pem")
    }
}

fn provider() -> Arc<rustls::crypto::CryptoProvider> {
    Arc::new(rustls::crypto::ring::default_provider())
}

/// A quinn server configuration presenting `identity` with ALPN `hq-interop`.
pub(crate) fn server_config(
    identity: &Identity,
    transport: &QuicTransportConfig,
) -> Result<quinn::ServerConfig, TransferError> {
    let mut tls = rustls::ServerConfig::builder_with_provider(provider())
        .with_protocol_versions(&[&rustls::version::TLS13])
        .map_err(setup)?
        .with_no_client_auth()
        .with_single_cert(vec![identity.cert.clone()], identity.key.clone_key().into())
        .map_err(setup)?;
    tls.alpn_protocols = vec![ALPN.as_bytes().to_vec()];
    let crypto = QuicServerConfig::try_from(tls).map_err(setup)?;
    let mut config = quinn::ServerConfig::with_crypto(Arc::new(crypto));
    config.transport_config(Arc::new(transport.transport_config().map_err(setup)?));
    Ok(config)
}

/// A quinn client configuration trusting only `identity`, with ALPN `hq-interop`.
pub(crate) fn client_config(
    identity: &Identity,
    transport: &QuicTransportConfig,
) -> Result<quinn::ClientConfig, TransferError> {
    let mut roots = rustls::RootCertStore::empty();
    roots.add(identity.cert.clone()).map_err(setup)?;
    let mut tls = rustls::ClientConfig::builder_with_provider(provider())
        .with_protocol_versions(&[&rustls::version::TLS13])
        .map_err(setup)?
        .with_root_certificates(roots)
        .with_no_client_auth();
    tls.alpn_protocols = vec![ALPN.as_bytes().to_vec()];
    let crypto = QuicClientConfig::try_from(tls).map_err(setup)?;
    let mut config = quinn::ClientConfig::new(Arc::new(crypto));
    config.transport_config(Arc::new(transport.transport_config().map_err(setup)?));
    Ok(config)
}
