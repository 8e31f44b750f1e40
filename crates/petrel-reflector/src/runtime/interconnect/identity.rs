//! Where the centre's TLS identity comes from (draarl-interconnect §2,
//! §3.1): `[interconnect] tls_cert_file` / `tls_key_file` when set, else
//! the self-signed certificate kept in the store, generated on first use
//! (by the first server start or the first `edge add`, whichever comes
//! first; see `tls.rs` for why the store).

use super::super::store::{Store, StoreError};
use super::tls::{TlsIdentity, TlsSetupError};
use crate::model::InterconnectConfig;

/// Why the centre's identity could not be had.
#[derive(Debug, thiserror::Error)]
pub enum IdentityError {
    /// Reading, generating or decoding it.
    #[error(transparent)]
    Tls(#[from] TlsSetupError),
    /// The store.
    #[error(transparent)]
    Store(#[from] StoreError),
}

/// The centre's identity for `cfg`: from its files, or the store's
/// generated one (generating and storing it if there is none).
///
/// # Errors
/// [`IdentityError`].
pub async fn centre_identity(
    cfg: &InterconnectConfig,
    store: &Store,
) -> Result<TlsIdentity, IdentityError> {
    if let (Some(cert), Some(key)) = (&cfg.tls_cert_file, &cfg.tls_key_file) {
        return Ok(TlsIdentity::from_pem_files(cert, key)?);
    }
    if let Some(text) = store.tls_identity().await? {
        return Ok(TlsIdentity::from_stored(&text)?);
    }
    let generated = TlsIdentity::generate()?.to_stored();
    let kept = store.tls_identity_or_insert(&generated).await?;
    Ok(TlsIdentity::from_stored(&kept)?)
}

impl From<IdentityError> for super::super::server_error::ServerError {
    fn from(e: IdentityError) -> Self {
        Self::Tls(Box::new(e))
    }
}

#[cfg(test)]
mod tests {
    use super::super::super::store::harness::on_every_backend;
    use super::super::super::store::StoreOptions;
    use super::*;

    on_every_backend!(the_generated_identity_is_made_once_and_files_take_precedence);

    async fn the_generated_identity_is_made_once_and_files_take_precedence(db: String) {
        let store = Store::open(&db, StoreOptions::default()).await.unwrap();
        let cfg = InterconnectConfig::default();
        let first = centre_identity(&cfg, &store).await.unwrap();
        let again = centre_identity(&cfg, &store).await.unwrap();
        assert_eq!(first.fingerprint(), again.fingerprint());
        let files = InterconnectConfig {
            tls_cert_file: Some("/nonexistent/centre.pem".into()),
            tls_key_file: Some("/nonexistent/centre.key".into()),
            ..cfg
        };
        let e = centre_identity(&files, &store).await.unwrap_err();
        assert!(e.to_string().contains("/nonexistent/centre.pem"), "{e}");
        store.close().await;
    }
}
