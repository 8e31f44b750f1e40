//! The web/app side of accounts (`specs/draarl-apps.md` §1.3–§1.5): the
//! bcrypt account password, roles, e-mail and profile fields, and the
//! last-login record. Device passwords are in `accounts.rs`.

use std::collections::HashMap;

use sha2::{Digest, Sha256};
use sqlx::any::AnyRow;
use sqlx::Row;

use super::{Store, StoreError};
use crate::model::hash_web_password;

/// An account as the app API reads it. `Debug` hides the password hash.
#[derive(Clone, PartialEq, Eq)]
pub struct WebUser {
    /// `users.id`.
    pub id: i64,
    /// `users.name`, the account and wire username.
    pub name: String,
    /// Callsign.
    pub callsign: String,
    /// E-mail address, if any (a login name too).
    pub email: Option<String>,
    /// The role string (`user`, `admin`, or several separated by `,`).
    pub roles: String,
    /// 1 = enabled.
    pub status: i64,
    /// 0 pending, 1 approved, 2 rejected.
    pub approval_status: i64,
    /// Display name.
    pub nickname: String,
    /// The reviewer's note on the approval.
    pub review_note: String,
    /// DMR ID.
    pub dmrid: i64,
    /// bcrypt hash of the web password; `None` until one is set (no web login).
    pub password_hash: Option<String>,
    /// Failed web logins since the last success.
    pub login_err_times: i64,
    /// Last successful web login, Unix ms.
    pub last_login_ms: Option<i64>,
    /// Source address of that login.
    pub last_login_ip: String,
    /// Created, Unix ms (0 for accounts older than schema 5).
    pub created_at_ms: i64,
    /// Last changed, Unix ms.
    pub updated_at_ms: i64,
}

impl std::fmt::Debug for WebUser {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("WebUser")
            .field("id", &self.id)
            .field("name", &self.name)
            .field("roles", &self.roles)
            .field("status", &self.status)
            .field("approval_status", &self.approval_status)
            .field("password_hash", &self.password_hash.as_ref().map(|_| "***"))
            .finish_non_exhaustive()
    }
}

impl WebUser {
    /// Whether any of the roles is `admin` (§1.3: `role` is then `admin`).
    pub fn is_admin(&self) -> bool {
        self.roles.split(',').any(|r| r.trim() == "admin")
    }
}

const COLUMNS: &str = "id, name, callsign, email, roles, status, approval_status, nickname, \
     review_note, dmrid, password_hash, login_err_times, last_login_ms, last_login_ip, \
     created_at_ms, updated_at_ms";

fn web_user(r: &AnyRow) -> Result<WebUser, sqlx::Error> {
    Ok(WebUser {
        id: r.try_get(0)?,
        name: r.try_get(1)?,
        callsign: r.try_get(2)?,
        email: r.try_get(3)?,
        roles: r.try_get(4)?,
        status: r.try_get(5)?,
        approval_status: r.try_get(6)?,
        nickname: r.try_get(7)?,
        review_note: r.try_get(8)?,
        dmrid: r.try_get(9)?,
        password_hash: r.try_get(10)?,
        login_err_times: r.try_get(11)?,
        last_login_ms: r.try_get(12)?,
        last_login_ip: r.try_get(13)?,
        created_at_ms: r.try_get(14)?,
        updated_at_ms: r.try_get(15)?,
    })
}

/// Longest role string, e-mail address or profile text stored, bytes.
const MAX_FIELD_BYTES: usize = 254;

impl Store {
    /// Sets the web/app password of `name` (bcrypt at the store's
    /// `web_password_cost`; the hash runs on a blocking thread) and revokes
    /// every usable refresh token of the account.
    pub async fn set_web_password(&self, name: &str, password: &str) -> Result<(), StoreError> {
        let (pw, cost) = (password.to_owned(), self.opts.web_password_cost);
        let hash = tokio::task::spawn_blocking(move || hash_web_password(&pw, cost))
            .await
            .map_err(|e| StoreError::Invalid(format!("web password hashing: {e}")))?
            .map_err(|e| StoreError::Invalid(e.to_string()))?;
        self.update_user(name, "password_hash", hash).await?;
        // A new password ends the sessions the old one opened: every usable
        // refresh token of the account is revoked (Petrel's choice; §1.4 is
        // silent on password changes).
        sqlx::query(
            "UPDATE refresh_tokens SET revoked_at_ms = $1 \
             WHERE revoked_at_ms IS NULL AND user_id = (SELECT id FROM users WHERE name = $2)",
        )
        .bind(super::now_ms())
        .bind(name)
        .execute(&self.pool)
        .await?;
        Ok(())
    }

    /// A fingerprint of each account's web password hash by `users.id`
    /// (the first 8 bytes of its SHA-256; 0 without a web password): it
    /// changes whenever the password is set again. The hashes themselves
    /// stay in the store.
    pub async fn web_password_stamps(&self) -> Result<HashMap<i64, u64>, StoreError> {
        let rows = sqlx::query("SELECT id, password_hash FROM users")
            .fetch_all(&self.pool)
            .await?;
        let mut out = HashMap::with_capacity(rows.len());
        for r in &rows {
            let id: i64 = r.try_get(0)?;
            let hash: Option<String> = r.try_get(1)?;
            let stamp = hash.map_or(0, |h| {
                let d = Sha256::digest(h.as_bytes());
                u64::from_be_bytes([d[0], d[1], d[2], d[3], d[4], d[5], d[6], d[7]])
            });
            out.insert(id, stamp);
        }
        Ok(out)
    }

    /// Sets the role string of `name` (e.g. `user`, `admin`; 1–254 bytes
    /// of `[a-z0-9_,-]`).
    pub async fn set_user_roles(&self, name: &str, roles: &str) -> Result<(), StoreError> {
        let ok = roles
            .bytes()
            .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b"_,-".contains(&b));
        if roles.is_empty() || roles.len() > MAX_FIELD_BYTES || !ok {
            return Err(StoreError::Invalid("roles: 1-254 of [a-z0-9_,-]".into()));
        }
        self.update_user(name, "roles", roles.to_owned()).await
    }

    /// Sets the e-mail address of `name` (a second login name).
    pub async fn set_user_email(&self, name: &str, email: &str) -> Result<(), StoreError> {
        if email.is_empty() || email.len() > MAX_FIELD_BYTES || !email.contains('@') {
            return Err(StoreError::Invalid("email".into()));
        }
        self.update_user(name, "email", email.to_owned()).await
    }

    /// Sets the approval status of `name` (0 pending, 1 approved, 2 rejected).
    pub async fn set_user_approval(&self, name: &str, approval: i64) -> Result<(), StoreError> {
        if !(0..=2).contains(&approval) {
            return Err(StoreError::Invalid("approval_status: 0-2".into()));
        }
        let r = sqlx::query("UPDATE users SET approval_status = $1 WHERE name = $2")
            .bind(approval)
            .bind(name)
            .execute(&self.pool)
            .await?;
        super::accounts::updated(r.rows_affected(), || format!("user {name}"))
    }

    async fn update_user(&self, name: &str, column: &str, value: String) -> Result<(), StoreError> {
        // `column` is one of this file's constants, never input.
        let r = sqlx::query(&format!(
            "UPDATE users SET {column} = $1, updated_at_ms = $2 WHERE name = $3"
        ))
        .bind(value)
        .bind(super::now_ms())
        .bind(name)
        .execute(&self.pool)
        .await;
        match r {
            Err(e) if super::accounts::unique_column(&e, "users").is_some() => {
                Err(StoreError::Duplicate(format!("that {column} is taken")))
            }
            r => super::accounts::updated(r?.rows_affected(), || format!("user {name}")),
        }
    }

    /// The account whose name or e-mail is `login` (§1.3 step 3). `None`
    /// for a `login` with a NUL: no stored name holds one, and PostgreSQL
    /// refuses it as a parameter.
    pub async fn web_user_by_login(&self, login: &str) -> Result<Option<WebUser>, StoreError> {
        if login.contains('\0') {
            return Ok(None);
        }
        let row = sqlx::query(&format!(
            "SELECT {COLUMNS} FROM users WHERE name = $1 OR email = $1 ORDER BY id LIMIT 1"
        ))
        .bind(login)
        .fetch_optional(&self.pool)
        .await?;
        Ok(row.as_ref().map(web_user).transpose()?)
    }

    /// The account named `name` (a token's `username`); `None` for a name
    /// with a NUL, as [`Store::web_user_by_login`].
    pub async fn web_user_by_name(&self, name: &str) -> Result<Option<WebUser>, StoreError> {
        if name.contains('\0') {
            return Ok(None);
        }
        let row = sqlx::query(&format!("SELECT {COLUMNS} FROM users WHERE name = $1"))
            .bind(name)
            .fetch_optional(&self.pool)
            .await?;
        Ok(row.as_ref().map(web_user).transpose()?)
    }

    /// The account with id `id`.
    pub async fn web_user_by_id(&self, id: i64) -> Result<Option<WebUser>, StoreError> {
        let row = sqlx::query(&format!("SELECT {COLUMNS} FROM users WHERE id = $1"))
            .bind(id)
            .fetch_optional(&self.pool)
            .await?;
        Ok(row.as_ref().map(web_user).transpose()?)
    }

    /// Records a successful web login at `now_ms` from `ip` (clears the
    /// failure count).
    pub async fn record_web_login(&self, id: i64, ip: &str, now_ms: i64) -> Result<(), StoreError> {
        sqlx::query(
            "UPDATE users SET last_login_ms = $1, last_login_ip = $2, login_err_times = 0 WHERE id = $3",
        )
        .bind(now_ms)
        .bind(ip)
        .bind(id)
        .execute(&self.pool)
        .await?;
        Ok(())
    }

    /// Counts a wrong web password (§1.3 step 4: `login_err_times`).
    pub async fn record_web_login_failure(&self, id: i64) -> Result<(), StoreError> {
        sqlx::query("UPDATE users SET login_err_times = login_err_times + 1 WHERE id = $1")
            .bind(id)
            .execute(&self.pool)
            .await?;
        Ok(())
    }
}
