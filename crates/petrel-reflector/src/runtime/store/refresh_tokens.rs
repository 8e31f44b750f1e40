//! Refresh tokens (`specs/draarl-apps.md` §1.4), stored only as the SHA-256
//! hex of the token, with user, expiry, source address and user agent.
//! Rotation revokes the old row and links it to its replacement, so a
//! rotated token presented again is recognised (reuse detection). The
//! table is bounded: expired rows are deleted whenever a token is issued,
//! and each user keeps at most a configured number of rows, the oldest
//! evicted first.

use sqlx::Row;

use super::{Store, StoreError};

/// A refresh token to store.
#[derive(Clone, PartialEq, Eq)]
pub struct NewRefreshToken {
    /// SHA-256 hex of the token.
    pub hash: String,
    /// The owner.
    pub user_id: i64,
    /// Issued, Unix ms.
    pub created_at_ms: i64,
    /// Expires, Unix ms.
    pub expires_at_ms: i64,
    /// Source address of the request that got it.
    pub ip: String,
    /// User agent of that request (at most 512 characters).
    pub user_agent: String,
}

impl std::fmt::Debug for NewRefreshToken {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("NewRefreshToken")
            .field("user_id", &self.user_id)
            .field("expires_at_ms", &self.expires_at_ms)
            .finish_non_exhaustive()
    }
}

/// What a presented refresh token is (§1.4 failures, in order).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RefreshTokenState {
    /// No such token.
    Unknown,
    /// Revoked; `rotated` when it had been replaced (a reuse).
    Revoked { user_id: i64, rotated: bool },
    /// Past its expiry.
    Expired { user_id: i64 },
    /// Usable.
    Valid { user_id: i64 },
}

/// Rows removed while issuing a token.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct IssueCleanup {
    /// Expired rows deleted (all users).
    pub pruned: u64,
    /// The user's oldest rows evicted over the per-user cap.
    pub evicted: u64,
}

impl Store {
    /// The state of the token whose hash is `hash` at `now_ms`.
    pub async fn refresh_token_state(
        &self,
        hash: &str,
        now_ms: i64,
    ) -> Result<RefreshTokenState, StoreError> {
        let row = sqlx::query(
            "SELECT user_id, expires_at_ms, revoked_at_ms, replaced_by FROM refresh_tokens
             WHERE token_hash = $1",
        )
        .bind(hash)
        .fetch_optional(&self.pool)
        .await?;
        let Some(r) = row else {
            return Ok(RefreshTokenState::Unknown);
        };
        let user_id: i64 = r.try_get(0)?;
        let expires: i64 = r.try_get(1)?;
        let revoked: Option<i64> = r.try_get(2)?;
        let replaced: Option<String> = r.try_get(3)?;
        Ok(if revoked.is_some() {
            RefreshTokenState::Revoked {
                user_id,
                rotated: replaced.is_some(),
            }
        } else if now_ms >= expires {
            RefreshTokenState::Expired { user_id }
        } else {
            RefreshTokenState::Valid { user_id }
        })
    }

    /// Stores `new` (first deleting expired rows, then evicting the user's
    /// oldest rows beyond `per_user`).
    pub async fn insert_refresh_token(
        &self,
        new: &NewRefreshToken,
        per_user: u32,
    ) -> Result<IssueCleanup, StoreError> {
        let pruned = self.prune_expired_refresh_tokens(new.created_at_ms).await?;
        insert(&self.pool, new).await?;
        let evicted = self.cap_refresh_tokens(new.user_id, per_user).await?;
        Ok(IssueCleanup { pruned, evicted })
    }

    /// Revokes `old_hash` and links it to `new` (stored in the same
    /// transaction). `Ok(None)` when `old_hash` was no longer usable (a
    /// concurrent rotation won): nothing is stored then.
    pub async fn rotate_refresh_token(
        &self,
        old_hash: &str,
        new: &NewRefreshToken,
        per_user: u32,
    ) -> Result<Option<IssueCleanup>, StoreError> {
        let pruned = self.prune_expired_refresh_tokens(new.created_at_ms).await?;
        let mut tx = self.pool.begin().await?;
        let r = sqlx::query(
            "UPDATE refresh_tokens SET revoked_at_ms = $1, replaced_by = $2
             WHERE token_hash = $3 AND revoked_at_ms IS NULL",
        )
        .bind(new.created_at_ms)
        .bind(&new.hash)
        .bind(old_hash)
        .execute(&mut *tx)
        .await?;
        if r.rows_affected() == 0 {
            tx.rollback().await?;
            return Ok(None);
        }
        insert(&mut *tx, new).await?;
        tx.commit().await?;
        let evicted = self.cap_refresh_tokens(new.user_id, per_user).await?;
        Ok(Some(IssueCleanup { pruned, evicted }))
    }

    /// Revokes the token whose hash is `hash`, if usable; whether it was.
    pub async fn revoke_refresh_token(&self, hash: &str, now_ms: i64) -> Result<bool, StoreError> {
        let r = sqlx::query(
            "UPDATE refresh_tokens SET revoked_at_ms = $1 WHERE token_hash = $2 AND revoked_at_ms IS NULL",
        )
        .bind(now_ms)
        .bind(hash)
        .execute(&self.pool)
        .await?;
        Ok(r.rows_affected() > 0)
    }

    /// Revokes every usable refresh token of `user_id`; how many.
    pub async fn revoke_user_refresh_tokens(
        &self,
        user_id: i64,
        now_ms: i64,
    ) -> Result<u64, StoreError> {
        let r = sqlx::query(
            "UPDATE refresh_tokens SET revoked_at_ms = $1 WHERE user_id = $2 AND revoked_at_ms IS NULL",
        )
        .bind(now_ms)
        .bind(user_id)
        .execute(&self.pool)
        .await?;
        Ok(r.rows_affected())
    }

    /// Refresh-token rows of `user_id`, revoked ones included.
    pub async fn refresh_token_count(&self, user_id: i64) -> Result<i64, StoreError> {
        Ok(
            sqlx::query("SELECT COUNT(*) FROM refresh_tokens WHERE user_id = $1")
                .bind(user_id)
                .fetch_one(&self.pool)
                .await?
                .try_get(0)?,
        )
    }

    async fn prune_expired_refresh_tokens(&self, now_ms: i64) -> Result<u64, StoreError> {
        let r = sqlx::query("DELETE FROM refresh_tokens WHERE expires_at_ms <= $1")
            .bind(now_ms)
            .execute(&self.pool)
            .await?;
        Ok(r.rows_affected())
    }

    async fn cap_refresh_tokens(&self, user_id: i64, per_user: u32) -> Result<u64, StoreError> {
        let r = sqlx::query(
            "DELETE FROM refresh_tokens WHERE user_id = $1 AND token_hash NOT IN (
                 SELECT token_hash FROM refresh_tokens WHERE user_id = $1
                 ORDER BY created_at_ms DESC, token_hash DESC LIMIT $2)",
        )
        .bind(user_id)
        .bind(i64::from(per_user))
        .execute(&self.pool)
        .await?;
        Ok(r.rows_affected())
    }
}

async fn insert<'e>(
    ex: impl sqlx::Executor<'e, Database = sqlx::Any>,
    new: &NewRefreshToken,
) -> Result<(), StoreError> {
    sqlx::query(
        "INSERT INTO refresh_tokens
         (token_hash, user_id, created_at_ms, expires_at_ms, ip, user_agent)
         VALUES ($1, $2, $3, $4, $5, $6)",
    )
    .bind(&new.hash)
    .bind(new.user_id)
    .bind(new.created_at_ms)
    .bind(new.expires_at_ms)
    .bind(&new.ip)
    .bind(&new.user_agent)
    .execute(ex)
    .await?;
    Ok(())
}
