//! TLS for the control plane (draarl-interconnect §3.1): TLS 1.3 only on
//! both sides (`rustls` with the `ring` provider, built without TLS 1.2),
//! server authentication only.
//!
//! The centre's identity comes from `[interconnect] tls_cert_file` /
//! `tls_key_file`, or is a self-signed certificate for `localhost`
//! generated on the first start (`rcgen`, ECDSA P-256) and kept in the
//! store's `settings` table. The store rather than a file next to a SQLite
//! database: it is the one place both the server and `petrel reflector edge
//! add` (which prints the certificate's pin before the centre may ever have
//! run) reach, for PostgreSQL deployments too, and its insert-once
//! semantics make concurrent first starts agree on one certificate. The
//! private key is then as secret as the store (like the generated JWT
//! secret).
//!
//! The edge trusts the centre either by the pin of a node token
//! ([`CentreTrust::Pin`]: the SHA-256 of the end-entity certificate's DER,
//! compared in constant time; the TLS 1.3 handshake signature is still
//! verified with the provider's algorithms) or by CA roots and the server
//! name ([`CentreTrust::Roots`], for configured certificates).

use std::fmt;
use std::sync::Arc;

use base64::engine::general_purpose::STANDARD;
use base64::Engine as _;
use rustls::client::danger::{HandshakeSignatureValid, ServerCertVerified, ServerCertVerifier};
use rustls::crypto::{verify_tls12_signature, verify_tls13_signature, CryptoProvider};
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer, PrivatePkcs8KeyDer, ServerName, UnixTime};
use rustls::{CertificateError, ClientConfig, DigitallySignedStruct, RootCertStore, ServerConfig};
use sha2::{Digest, Sha256};
use subtle::ConstantTimeEq;
use thiserror::Error;

use crate::model::pin_hex;

/// The name in a generated certificate, and the server name an edge asks
/// for by default (§2 `TLSServerName`).
pub const DEFAULT_SERVER_NAME: &str = "localhost";

/// Why a TLS identity or configuration could not be made.
#[derive(Debug, Error)]
pub enum TlsSetupError {
    /// A certificate or key file could not be read (the path is named).
    #[error("reading {path}: {cause}")]
    Read {
        /// The file.
        path: String,
        /// The I/O error.
        cause: std::io::Error,
    },
    /// A file holds no usable PEM certificate or key.
    #[error("{0}")]
    Pem(String),
    /// `rcgen` could not generate the certificate.
    #[error("generating the TLS certificate: {0}")]
    Generate(#[from] rcgen::Error),
    /// The stored identity does not decode.
    #[error("the stored TLS identity is malformed")]
    Stored,
    /// `rustls` refused the configuration.
    #[error("configuring TLS: {0}")]
    Rustls(#[from] rustls::Error),
    /// The server name is not a DNS name or IP address.
    #[error("invalid TLS server name {0:?}")]
    ServerName(String),
}

/// The centre's certificate chain and private key. `Debug` shows the
/// fingerprint only.
pub struct TlsIdentity {
    chain: Vec<CertificateDer<'static>>,
    key: PrivateKeyDer<'static>,
}

impl fmt::Debug for TlsIdentity {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("TlsIdentity")
            .field("certificates", &self.chain.len())
            .field("fingerprint", &pin_hex(&self.fingerprint()))
            .finish_non_exhaustive()
    }
}

impl Clone for TlsIdentity {
    fn clone(&self) -> Self {
        Self {
            chain: self.chain.clone(),
            key: self.key.clone_key(),
        }
    }
}

/// SHA-256 of a certificate's DER: what a node token pins.
pub fn fingerprint(cert: &CertificateDer<'_>) -> [u8; 32] {
    Sha256::digest(cert.as_ref()).into()
}

fn provider() -> Arc<CryptoProvider> {
    Arc::new(rustls::crypto::ring::default_provider())
}

impl TlsIdentity {
    /// A new self-signed certificate for [`DEFAULT_SERVER_NAME`].
    ///
    /// # Errors
    /// [`TlsSetupError::Generate`].
    pub fn generate() -> Result<Self, TlsSetupError> {
        let certified = rcgen::generate_simple_self_signed(vec![DEFAULT_SERVER_NAME.to_owned()])?;
        Ok(Self {
            chain: vec![certified.cert.der().clone()],
            key: PrivateKeyDer::from(PrivatePkcs8KeyDer::from(
                certified.signing_key.serialize_der(),
            )),
        })
    }

    /// Reads a PEM chain (end-entity first) and its PEM private key.
    ///
    /// # Errors
    /// [`TlsSetupError::Read`] or [`TlsSetupError::Pem`].
    pub fn from_pem_files(cert_file: &str, key_file: &str) -> Result<Self, TlsSetupError> {
        let read = |path: &str| {
            std::fs::read(path).map_err(|cause| TlsSetupError::Read {
                path: path.to_owned(),
                cause,
            })
        };
        let chain = CertificateDer::pem_slice_iter(&read(cert_file)?)
            .collect::<Result<Vec<_>, _>>()
            .map_err(|e| TlsSetupError::Pem(format!("{cert_file}: {e}")))?;
        if chain.is_empty() {
            return Err(TlsSetupError::Pem(format!(
                "{cert_file}: no PEM certificate"
            )));
        }
        // The key's PEM error could echo key material: name the file only.
        let key = PrivateKeyDer::from_pem_slice(&read(key_file)?)
            .map_err(|_| TlsSetupError::Pem(format!("{key_file}: no usable PEM private key")))?;
        Ok(Self { chain, key })
    }

    /// The identity as one line of text for the store: base64 of the
    /// certificate DER, `.`, base64 of the PKCS#8 key DER (generated
    /// identities only; configured ones are read from their files).
    pub fn to_stored(&self) -> String {
        let cert = self.chain.first().map(|c| c.as_ref()).unwrap_or_default();
        format!(
            "{}.{}",
            STANDARD.encode(cert),
            STANDARD.encode(self.key.secret_der())
        )
    }

    /// Decodes [`TlsIdentity::to_stored`].
    ///
    /// # Errors
    /// [`TlsSetupError::Stored`].
    pub fn from_stored(text: &str) -> Result<Self, TlsSetupError> {
        let (cert, key) = text.split_once('.').ok_or(TlsSetupError::Stored)?;
        let cert = STANDARD.decode(cert).map_err(|_| TlsSetupError::Stored)?;
        let key = STANDARD.decode(key).map_err(|_| TlsSetupError::Stored)?;
        if cert.is_empty() || key.is_empty() {
            return Err(TlsSetupError::Stored);
        }
        Ok(Self {
            chain: vec![CertificateDer::from(cert)],
            key: PrivateKeyDer::from(PrivatePkcs8KeyDer::from(key)),
        })
    }

    /// SHA-256 of the end-entity certificate, the pin of node tokens.
    pub fn fingerprint(&self) -> [u8; 32] {
        self.chain.first().map(fingerprint).unwrap_or_default()
    }

    /// The centre's rustls configuration: TLS 1.3, no client certificates.
    ///
    /// # Errors
    /// [`TlsSetupError::Rustls`] when the key does not fit the certificate.
    pub fn server_config(&self) -> Result<Arc<ServerConfig>, TlsSetupError> {
        let cfg = ServerConfig::builder_with_provider(provider())
            .with_protocol_versions(&[&rustls::version::TLS13])?
            .with_no_client_auth()
            .with_single_cert(self.chain.clone(), self.key.clone_key())?;
        Ok(Arc::new(cfg))
    }
}

/// How an edge verifies the centre's certificate.
#[derive(Clone)]
pub enum CentreTrust {
    /// Exactly the end-entity certificate with this SHA-256 (a node
    /// token's pin); names and dates are not checked.
    Pin([u8; 32]),
    /// A chain to one of these roots, valid for the server name.
    Roots(Arc<RootCertStore>),
}

impl fmt::Debug for CentreTrust {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            CentreTrust::Pin(p) => write!(f, "Pin({})", pin_hex(p)),
            CentreTrust::Roots(r) => write!(f, "Roots({} roots)", r.len()),
        }
    }
}

impl CentreTrust {
    /// Roots from a PEM file of CA certificates.
    ///
    /// # Errors
    /// [`TlsSetupError::Read`], [`TlsSetupError::Pem`], or
    /// [`TlsSetupError::Rustls`] for a certificate rustls refuses.
    pub fn from_ca_file(path: &str) -> Result<Self, TlsSetupError> {
        let pem = std::fs::read(path).map_err(|cause| TlsSetupError::Read {
            path: path.to_owned(),
            cause,
        })?;
        let mut roots = RootCertStore::empty();
        for cert in CertificateDer::pem_slice_iter(&pem) {
            let cert = cert.map_err(|e| TlsSetupError::Pem(format!("{path}: {e}")))?;
            roots.add(cert)?;
        }
        if roots.is_empty() {
            return Err(TlsSetupError::Pem(format!("{path}: no PEM certificate")));
        }
        Ok(Self::Roots(Arc::new(roots)))
    }

    /// The edge's rustls configuration: TLS 1.3, this trust.
    ///
    /// # Errors
    /// [`TlsSetupError::Rustls`].
    pub fn client_config(&self) -> Result<Arc<ClientConfig>, TlsSetupError> {
        let provider = provider();
        let builder = ClientConfig::builder_with_provider(Arc::clone(&provider))
            .with_protocol_versions(&[&rustls::version::TLS13])?;
        let cfg = match self {
            CentreTrust::Pin(pin) => builder
                .dangerous()
                .with_custom_certificate_verifier(Arc::new(PinnedCentre {
                    pin: *pin,
                    provider,
                }))
                .with_no_client_auth(),
            CentreTrust::Roots(roots) => builder
                .with_root_certificates(Arc::clone(roots))
                .with_no_client_auth(),
        };
        Ok(Arc::new(cfg))
    }
}

/// The server name to ask for.
///
/// # Errors
/// [`TlsSetupError::ServerName`].
pub fn server_name(name: &str) -> Result<ServerName<'static>, TlsSetupError> {
    ServerName::try_from(name.to_owned()).map_err(|_| TlsSetupError::ServerName(name.to_owned()))
}

/// Accepts exactly the end-entity certificate whose SHA-256 is `pin`, and
/// verifies the handshake signature with that certificate's key.
#[derive(Debug)]
struct PinnedCentre {
    pin: [u8; 32],
    provider: Arc<CryptoProvider>,
}

impl ServerCertVerifier for PinnedCentre {
    fn verify_server_cert(
        &self,
        end_entity: &CertificateDer<'_>,
        _intermediates: &[CertificateDer<'_>],
        _server_name: &ServerName<'_>,
        _ocsp_response: &[u8],
        _now: UnixTime,
    ) -> Result<ServerCertVerified, rustls::Error> {
        if bool::from(fingerprint(end_entity).ct_eq(&self.pin)) {
            Ok(ServerCertVerified::assertion())
        } else {
            Err(rustls::Error::InvalidCertificate(
                CertificateError::ApplicationVerificationFailure,
            ))
        }
    }

    fn verify_tls12_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        verify_tls12_signature(
            message,
            cert,
            dss,
            &self.provider.signature_verification_algorithms,
        )
    }

    fn verify_tls13_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        verify_tls13_signature(
            message,
            cert,
            dss,
            &self.provider.signature_verification_algorithms,
        )
    }

    fn supported_verify_schemes(&self) -> Vec<rustls::SignatureScheme> {
        self.provider
            .signature_verification_algorithms
            .supported_schemes()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_generated_identity_round_trips_through_the_store_text() {
        let id = TlsIdentity::generate().unwrap();
        let text = id.to_stored();
        let back = TlsIdentity::from_stored(&text).unwrap();
        assert_eq!(back.fingerprint(), id.fingerprint());
        assert!(back.server_config().is_ok());
        assert!(!format!("{id:?}").contains(&text[text.len() - 20..]));
        for bad in ["", "abc", "!!.!!", ".AAAA"] {
            assert!(TlsIdentity::from_stored(bad).is_err(), "{bad}");
        }
        assert!(CentreTrust::Pin(id.fingerprint()).client_config().is_ok());
    }
}
