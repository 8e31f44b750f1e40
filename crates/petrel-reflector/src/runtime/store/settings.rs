//! Server settings kept in the store (`settings`, key → text), such as the
//! generated JWT secret (`specs/draarl-apps.md` §1.4).

use sqlx::Row;

use super::{Store, StoreError};

/// The key of the generated JWT secret.
const JWT_SECRET: &str = "jwt_secret";

impl Store {
    /// The stored JWT secret, storing `generated` first if there is none.
    /// Concurrent first starts agree: the first insert wins and every
    /// caller reads it back.
    pub async fn jwt_secret_or_insert(&self, generated: &str) -> Result<String, StoreError> {
        sqlx::query("INSERT INTO settings (key, value) VALUES ($1, $2) ON CONFLICT DO NOTHING")
            .bind(JWT_SECRET)
            .bind(generated)
            .execute(&self.pool)
            .await?;
        Ok(sqlx::query("SELECT value FROM settings WHERE key = $1")
            .bind(JWT_SECRET)
            .fetch_one(&self.pool)
            .await?
            .try_get(0)?)
    }
}
