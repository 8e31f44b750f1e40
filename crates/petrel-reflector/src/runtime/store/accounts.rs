//! Admin writes: accounts, talkgroups, links and device placement.

use sqlx::Row;

use super::{text_field_ok, NewUser, Store, StoreError};
use crate::model::{hash_device_password, is_reserved_ssid};

impl Store {
    /// Creates an account; returns its id.
    pub async fn add_user(&self, u: &NewUser) -> Result<i64, StoreError> {
        if !text_field_ok(&u.name) {
            return Err(StoreError::Invalid("name: 1-32 bytes, no NUL".into()));
        }
        if !text_field_ok(&u.callsign) {
            return Err(StoreError::Invalid("callsign: 1-32 bytes, no NUL".into()));
        }
        if u.dmrid >= 1 << 24 {
            return Err(StoreError::Invalid("dmrid: 0..=16777215".into()));
        }
        let hash = hash_device_password(&u.device_password, self.opts.hash_cost)?;
        let group = u.default_group_id.unwrap_or(self.opts.default_group_id);
        let row = sqlx::query(
            "INSERT INTO users
             (name, callsign, dmrid, device_password_hash, default_group_id, created_at_ms, updated_at_ms)
             VALUES ($1, $2, $3, $4, $5, $6, $6) RETURNING id",
        )
        .bind(&u.name)
        .bind(&u.callsign)
        .bind(i64::from(u.dmrid))
        .bind(hash)
        .bind(group)
        .bind(super::now_ms())
        .fetch_one(&self.pool)
        .await;
        let row = match row {
            Err(e) if unique_column(&e, "users").is_some() => {
                // SQLite names one violated column, not necessarily the
                // name when both clash; a taken name is the likelier mistake.
                let name_taken = sqlx::query("SELECT 1 FROM users WHERE name = $1")
                    .bind(&u.name)
                    .fetch_optional(&self.pool)
                    .await?
                    .is_some();
                return Err(StoreError::Duplicate(match unique_column(&e, "users") {
                    _ if name_taken => format!("a user named {:?} already exists", u.name),
                    Some("callsign") => format!("callsign {:?} is taken", u.callsign),
                    _ => return Err(e.into()),
                }));
            }
            other => other?,
        };
        Ok(row.try_get(0)?)
    }

    /// Replaces a user's device password.
    pub async fn set_device_password(&self, name: &str, pw: &str) -> Result<(), StoreError> {
        let hash = hash_device_password(pw, self.opts.hash_cost)?;
        let r = sqlx::query("UPDATE users SET device_password_hash = $1 WHERE name = $2")
            .bind(hash)
            .bind(name)
            .execute(&self.pool)
            .await?;
        updated(r.rows_affected(), || format!("user {name}"))
    }

    /// Enables or disables an account.
    pub async fn set_user_enabled(&self, name: &str, enabled: bool) -> Result<(), StoreError> {
        let r = sqlx::query("UPDATE users SET status = $1 WHERE name = $2")
            .bind(i64::from(enabled))
            .bind(name)
            .execute(&self.pool)
            .await?;
        updated(r.rows_affected(), || format!("user {name}"))
    }

    /// Creates a talkgroup (enabled); returns its id. `id` picks a fixed id;
    /// otherwise the next id above the highest in use.
    pub async fn add_group(
        &self,
        name: &str,
        is_virtual: bool,
        id: Option<i64>,
    ) -> Result<i64, StoreError> {
        if name.is_empty() || id.is_some_and(|i| i <= 0) {
            return Err(StoreError::Invalid("group: non-empty name, id > 0".into()));
        }
        let row = sqlx::query(
            "INSERT INTO talkgroups (id, name, is_virtual)
             VALUES (COALESCE($1, (SELECT COALESCE(MAX(id), 0) + 1 FROM talkgroups)), $2, $3)
             RETURNING id",
        )
        .bind(id)
        .bind(name)
        .bind(i64::from(is_virtual))
        .fetch_one(&self.pool)
        .await;
        let row = match row {
            Err(e) => {
                return Err(match unique_column(&e, "talkgroups") {
                    Some("name") => {
                        StoreError::Duplicate(format!("a group named {name:?} already exists"))
                    }
                    Some("id") => StoreError::Duplicate(format!(
                        "group id {} is taken",
                        id.map_or_else(|| "(next free)".to_owned(), |i| i.to_string())
                    )),
                    _ => e.into(),
                })
            }
            Ok(row) => row,
        };
        Ok(row.try_get(0)?)
    }

    /// Enables or disables a talkgroup.
    pub async fn set_group_enabled(&self, id: i64, enabled: bool) -> Result<(), StoreError> {
        let r = sqlx::query("UPDATE talkgroups SET status = $1 WHERE id = $2")
            .bind(i64::from(enabled))
            .bind(id)
            .execute(&self.pool)
            .await?;
        updated(r.rows_affected(), || format!("group {id}"))
    }

    /// Links `target` into the virtual group `link` (their domains merge).
    pub async fn link_groups(&self, link: i64, target: i64) -> Result<(), StoreError> {
        let is_virtual: Option<i64> =
            sqlx::query("SELECT is_virtual FROM talkgroups WHERE id = $1")
                .bind(link)
                .fetch_optional(&self.pool)
                .await?
                .map(|r| r.try_get(0))
                .transpose()?;
        match is_virtual {
            None => return Err(StoreError::NotFound(format!("group {link}"))),
            Some(0) => {
                return Err(StoreError::Invalid(format!(
                    "link group {link}: not virtual"
                )))
            }
            Some(_) => {}
        }
        sqlx::query(
            "INSERT INTO group_links (link_group_id, target_group_id) VALUES ($1, $2)
             ON CONFLICT DO NOTHING",
        )
        .bind(link)
        .bind(target)
        .execute(&self.pool)
        .await?;
        Ok(())
    }

    async fn user_id(&self, name: &str) -> Result<(i64, u32), StoreError> {
        let row = sqlx::query("SELECT id, dmrid FROM users WHERE name = $1")
            .bind(name)
            .fetch_optional(&self.pool)
            .await?
            .ok_or_else(|| StoreError::NotFound(format!("user {name}")))?;
        let dmrid: i64 = row.try_get(1)?;
        Ok((row.try_get(0)?, u32::try_from(dmrid).unwrap_or(0)))
    }

    /// Puts device (user, SSID) into `group_id` (0 = ungrouped), creating the
    /// device row if the device never logged in. A `group_id` that is not a
    /// talkgroup is [`StoreError::NotFound`] (`group <id>`) and changes
    /// nothing; the check and the write are one statement.
    pub async fn set_device_group(
        &self,
        user: &str,
        ssid: u8,
        group_id: i64,
    ) -> Result<(), StoreError> {
        if is_reserved_ssid(ssid) {
            return Err(StoreError::Invalid("ssid: 1-99 or 106-254".into()));
        }
        let (owner, dmrid) = self.user_id(user).await?;
        let r = sqlx::query(
            "INSERT INTO devices (owner_id, ssid, dmrid, group_id)
             SELECT $1, $2, $3, $4
             WHERE $4 = 0 OR EXISTS (SELECT 1 FROM talkgroups WHERE id = $4)
             ON CONFLICT (owner_id, ssid) DO UPDATE SET group_id = excluded.group_id",
        )
        .bind(owner)
        .bind(i64::from(ssid))
        .bind(i64::from(dmrid))
        .bind(group_id)
        .execute(&self.pool)
        .await?;
        updated(r.rows_affected(), || format!("group {group_id}"))
    }

    /// Sets a device's send and receive bans.
    pub async fn set_device_bans(
        &self,
        user: &str,
        ssid: u8,
        disable_send: bool,
        disable_recv: bool,
    ) -> Result<(), StoreError> {
        let (owner, _) = self.user_id(user).await?;
        let r = sqlx::query(
            "UPDATE devices SET disable_send = $1, disable_recv = $2 WHERE owner_id = $3 AND ssid = $4",
        )
        .bind(i64::from(disable_send))
        .bind(i64::from(disable_recv))
        .bind(owner)
        .bind(i64::from(ssid))
        .execute(&self.pool)
        .await?;
        updated(r.rows_affected(), || format!("device {user}-{ssid}"))
    }
}

/// `Ok` when an update changed a row; `NotFound(what())` when it matched none.
/// The column of `table` whose uniqueness `e` violated, if it is such a
/// violation: SQLite's message reads `UNIQUE constraint failed:
/// users.callsign`; PostgreSQL names the constraint (`users_callsign_key`,
/// `talkgroups_pkey` for the id).
pub(super) fn unique_column<'e>(e: &'e sqlx::Error, table: &str) -> Option<&'e str> {
    let sqlx::Error::Database(db) = e else {
        return None;
    };
    if db.kind() != sqlx::error::ErrorKind::UniqueViolation {
        return None;
    }
    match db.constraint() {
        Some(constraint) => match constraint.strip_prefix(table)?.strip_prefix('_')? {
            "pkey" => Some("id"),
            rest => rest.strip_suffix("_key"),
        },
        None => db
            .message()
            .strip_prefix("UNIQUE constraint failed: ")?
            .strip_prefix(table)?
            .strip_prefix('.'),
    }
}

pub(super) fn updated(rows_affected: u64, what: impl FnOnce() -> String) -> Result<(), StoreError> {
    if rows_affected == 0 {
        return Err(StoreError::NotFound(what()));
    }
    Ok(())
}
