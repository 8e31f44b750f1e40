//! Server settings kept in the store (`settings`, key → text): the
//! generated JWT secret (`specs/draarl-apps.md` §1.4) and the centre's
//! generated TLS identity (draarl-interconnect §3.1).

use sqlx::Row;

use super::{Store, StoreError};

/// The key of the generated JWT secret.
const JWT_SECRET: &str = "jwt_secret";
/// The key of the centre's generated TLS certificate and private key.
const INTERCONNECT_TLS_IDENTITY: &str = "interconnect_tls_identity";

impl Store {
    /// The stored JWT secret, storing `generated` first if there is none.
    /// Concurrent first starts agree: the first insert wins and every
    /// caller reads it back.
    pub async fn jwt_secret_or_insert(&self, generated: &str) -> Result<String, StoreError> {
        self.setting_or_insert(JWT_SECRET, generated).await
    }

    /// The stored TLS identity of the centre's control plane (one text
    /// holding certificate and key, see `runtime::interconnect::tls`),
    /// storing `generated` first if there is none; concurrent first starts
    /// agree as for [`Store::jwt_secret_or_insert`].
    pub async fn tls_identity_or_insert(&self, generated: &str) -> Result<String, StoreError> {
        self.setting_or_insert(INTERCONNECT_TLS_IDENTITY, generated)
            .await
    }

    /// The stored TLS identity, if one was generated.
    pub async fn tls_identity(&self) -> Result<Option<String>, StoreError> {
        Ok(sqlx::query("SELECT value FROM settings WHERE key = $1")
            .bind(INTERCONNECT_TLS_IDENTITY)
            .fetch_optional(&self.pool)
            .await?
            .map(|r| r.try_get(0))
            .transpose()?)
    }

    async fn setting_or_insert(&self, key: &str, generated: &str) -> Result<String, StoreError> {
        sqlx::query("INSERT INTO settings (key, value) VALUES ($1, $2) ON CONFLICT DO NOTHING")
            .bind(key)
            .bind(generated)
            .execute(&self.pool)
            .await?;
        Ok(sqlx::query("SELECT value FROM settings WHERE key = $1")
            .bind(key)
            .fetch_one(&self.pool)
            .await?
            .try_get(0)?)
    }
}
