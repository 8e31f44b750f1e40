//! Persistent store on embedded SQLite through `sqlx` (runtime queries, no
//! compile-time database). Created on first open with versioned migrations;
//! a fresh store gets the public default talkgroup (999, like the reference).
//!
//! The hot path never touches it: the server loads a [`Directory`] at start
//! and every reload interval, and persists [`StoreEvent`]s in the background.

mod history;
mod migrations;

#[cfg(test)]
mod tests;

use sqlx::sqlite::{SqliteConnectOptions, SqliteJournalMode, SqlitePoolOptions};
use sqlx::{Row, SqlitePool};
use thiserror::Error;

use crate::codec::{Mac, Tlv};
use crate::directory::{DeviceRecord, Directory, GroupRecord, UserRecord};
use crate::session::{hash_device_password, is_reserved_ssid, HashCost, PasswordError, StoreEvent};

/// Store failures.
#[derive(Debug, Error)]
pub enum StoreError {
    /// The database reported an error.
    #[error("database: {0}")]
    Db(#[from] sqlx::Error),
    /// The device password was rejected.
    #[error(transparent)]
    Password(#[from] PasswordError),
    /// A named row does not exist.
    #[error("{0} not found")]
    NotFound(String),
    /// An argument is outside its allowed values.
    #[error("invalid {0}")]
    Invalid(String),
}

/// Options for opening a store.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StoreOptions {
    /// Id of the public talkgroup created on a fresh store. Default 999.
    pub default_group_id: i64,
    /// Name of that talkgroup. Default `Public`.
    pub default_group_name: String,
    /// Argon2id cost for new device passwords.
    pub hash_cost: HashCost,
}

impl Default for StoreOptions {
    fn default() -> Self {
        Self {
            default_group_id: 999,
            default_group_name: "Public".into(),
            hash_cost: HashCost::default(),
        }
    }
}

/// A new account.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NewUser {
    /// Account name (1–32 bytes UTF-8; the wire username).
    pub name: String,
    /// Callsign (1–32 bytes).
    pub callsign: String,
    /// DMR ID (24 bits).
    pub dmrid: u32,
    /// Device password, 6–10 `[A-Za-z0-9]`.
    pub device_password: String,
    /// Group a new device joins; `None` = the store's default group.
    pub default_group_id: Option<i64>,
}

/// Handle to the database.
#[derive(Debug, Clone)]
pub struct Store {
    pool: SqlitePool,
    opts: StoreOptions,
}

fn text_field_ok(s: &str) -> bool {
    !s.is_empty() && s.len() <= 32 && !s.contains('\0')
}

impl Store {
    /// Opens (creating if missing) the SQLite file at `path` and migrates it.
    pub async fn open(path: &str, opts: StoreOptions) -> Result<Self, StoreError> {
        // A plain file name, never parsed as a URL, so any path works.
        let connect = SqliteConnectOptions::new()
            .filename(path)
            .create_if_missing(true)
            .journal_mode(SqliteJournalMode::Wal)
            .foreign_keys(true);
        let pool = SqlitePoolOptions::new()
            .max_connections(4)
            .connect_with(connect)
            .await?;
        let store = Self { pool, opts };
        store.migrate().await?;
        Ok(store)
    }

    async fn migrate(&self) -> Result<(), StoreError> {
        sqlx::query("CREATE TABLE IF NOT EXISTS schema_migrations (version INTEGER PRIMARY KEY)")
            .execute(&self.pool)
            .await?;
        let current: i64 = sqlx::query("SELECT COALESCE(MAX(version), 0) FROM schema_migrations")
            .fetch_one(&self.pool)
            .await?
            .try_get(0)?;
        for (version, sql) in migrations::MIGRATIONS.iter().filter(|(v, _)| *v > current) {
            let mut tx = self.pool.begin().await?;
            sqlx::raw_sql(sql).execute(&mut *tx).await?;
            sqlx::query("INSERT INTO schema_migrations (version) VALUES (?)")
                .bind(version)
                .execute(&mut *tx)
                .await?;
            if *version == 1 {
                sqlx::query(
                    "INSERT INTO talkgroups (id, name, status, is_virtual) VALUES (?, ?, 1, 0)",
                )
                .bind(self.opts.default_group_id)
                .bind(&self.opts.default_group_name)
                .execute(&mut *tx)
                .await?;
            }
            tx.commit().await?;
        }
        Ok(())
    }

    /// Schema version after migration.
    pub async fn schema_version(&self) -> Result<i64, StoreError> {
        Ok(sqlx::query("SELECT MAX(version) FROM schema_migrations")
            .fetch_one(&self.pool)
            .await?
            .try_get(0)?)
    }

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
            "INSERT INTO users (name, callsign, dmrid, device_password_hash, default_group_id)
             VALUES (?, ?, ?, ?, ?) RETURNING id",
        )
        .bind(&u.name)
        .bind(&u.callsign)
        .bind(i64::from(u.dmrid))
        .bind(hash)
        .bind(group)
        .fetch_one(&self.pool)
        .await?;
        Ok(row.try_get(0)?)
    }

    /// Replaces a user's device password.
    pub async fn set_device_password(&self, name: &str, pw: &str) -> Result<(), StoreError> {
        let hash = hash_device_password(pw, self.opts.hash_cost)?;
        let r = sqlx::query("UPDATE users SET device_password_hash = ? WHERE name = ?")
            .bind(hash)
            .bind(name)
            .execute(&self.pool)
            .await?;
        if r.rows_affected() == 0 {
            return Err(StoreError::NotFound(format!("user {name}")));
        }
        Ok(())
    }

    /// Enables or disables an account.
    pub async fn set_user_enabled(&self, name: &str, enabled: bool) -> Result<(), StoreError> {
        let r = sqlx::query("UPDATE users SET status = ? WHERE name = ?")
            .bind(i64::from(enabled))
            .bind(name)
            .execute(&self.pool)
            .await?;
        if r.rows_affected() == 0 {
            return Err(StoreError::NotFound(format!("user {name}")));
        }
        Ok(())
    }

    /// Creates a talkgroup (enabled); returns its id. `id` picks a fixed id.
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
            "INSERT INTO talkgroups (id, name, is_virtual) VALUES (?, ?, ?) RETURNING id",
        )
        .bind(id)
        .bind(name)
        .bind(i64::from(is_virtual))
        .fetch_one(&self.pool)
        .await?;
        Ok(row.try_get(0)?)
    }

    /// Enables or disables a talkgroup.
    pub async fn set_group_enabled(&self, id: i64, enabled: bool) -> Result<(), StoreError> {
        let r = sqlx::query("UPDATE talkgroups SET status = ? WHERE id = ?")
            .bind(i64::from(enabled))
            .bind(id)
            .execute(&self.pool)
            .await?;
        if r.rows_affected() == 0 {
            return Err(StoreError::NotFound(format!("group {id}")));
        }
        Ok(())
    }

    /// Links `target` into the virtual group `link` (their domains merge).
    pub async fn link_groups(&self, link: i64, target: i64) -> Result<(), StoreError> {
        let is_virtual: Option<i64> = sqlx::query("SELECT is_virtual FROM talkgroups WHERE id = ?")
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
            "INSERT OR IGNORE INTO group_links (link_group_id, target_group_id) VALUES (?, ?)",
        )
        .bind(link)
        .bind(target)
        .execute(&self.pool)
        .await?;
        Ok(())
    }

    async fn user_id(&self, name: &str) -> Result<(i64, u32), StoreError> {
        let row = sqlx::query("SELECT id, dmrid FROM users WHERE name = ?")
            .bind(name)
            .fetch_optional(&self.pool)
            .await?
            .ok_or_else(|| StoreError::NotFound(format!("user {name}")))?;
        let dmrid: i64 = row.try_get(1)?;
        Ok((row.try_get(0)?, u32::try_from(dmrid).unwrap_or(0)))
    }

    /// Puts device (user, SSID) into `group_id` (0 = ungrouped), creating the
    /// device row if the device never logged in.
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
        sqlx::query(
            "INSERT INTO devices (owner_id, ssid, dmrid, group_id) VALUES (?, ?, ?, ?)
             ON CONFLICT (owner_id, ssid) DO UPDATE SET group_id = excluded.group_id",
        )
        .bind(owner)
        .bind(i64::from(ssid))
        .bind(i64::from(dmrid))
        .bind(group_id)
        .execute(&self.pool)
        .await?;
        Ok(())
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
            "UPDATE devices SET disable_send = ?, disable_recv = ? WHERE owner_id = ? AND ssid = ?",
        )
        .bind(i64::from(disable_send))
        .bind(i64::from(disable_recv))
        .bind(owner)
        .bind(i64::from(ssid))
        .execute(&self.pool)
        .await?;
        if r.rows_affected() == 0 {
            return Err(StoreError::NotFound(format!("device {user}-{ssid}")));
        }
        Ok(())
    }

    /// Applies one event from the session core.
    pub async fn apply(&self, e: &StoreEvent) -> Result<(), StoreError> {
        match e {
            StoreEvent::DeviceUpsert(d) => {
                sqlx::query(
                    "INSERT INTO devices (owner_id, ssid, dev_model, dmrid, group_id, disable_send, disable_recv, mac)
                     VALUES (?, ?, ?, ?, ?, ?, ?, ?)
                     ON CONFLICT (owner_id, ssid) DO UPDATE SET
                       dev_model = excluded.dev_model, mac = excluded.mac",
                )
                .bind(d.owner_id)
                .bind(i64::from(d.ssid))
                .bind(i64::from(d.dev_model))
                .bind(i64::from(d.dmrid))
                .bind(d.group_id)
                .bind(i64::from(d.disable_send))
                .bind(i64::from(d.disable_recv))
                .bind(d.mac.map(|m| m.to_string()))
                .execute(&self.pool)
                .await?;
            }
            StoreEvent::DeviceGroup { device, group_id } => {
                sqlx::query("UPDATE devices SET group_id = ? WHERE owner_id = ? AND ssid = ?")
                    .bind(group_id)
                    .bind(device.0)
                    .bind(i64::from(device.1))
                    .execute(&self.pool)
                    .await?;
            }
            StoreEvent::Text {
                device,
                group_id,
                unix_ms,
                text,
            } => {
                sqlx::query(
                    "INSERT INTO messages (sent_at_ms, owner_id, ssid, group_id, text) VALUES (?, ?, ?, ?, ?)",
                )
                .bind(unix_ms)
                .bind(device.0)
                .bind(i64::from(device.1))
                .bind(group_id)
                .bind(text.as_slice())
                .execute(&self.pool)
                .await?;
            }
            StoreEvent::DeviceConfig { device, items } => {
                let mut tx = self.pool.begin().await?;
                for Tlv { tag, value } in items {
                    sqlx::query("INSERT OR REPLACE INTO device_configs (owner_id, ssid, tag, value) VALUES (?, ?, ?, ?)")
                        .bind(device.0)
                        .bind(i64::from(device.1))
                        .bind(i64::from(*tag))
                        .bind(value.as_slice())
                        .execute(&mut *tx)
                        .await?;
                }
                tx.commit().await?;
            }
        }
        Ok(())
    }

    /// The newest `limit` (≤ 1000) text messages of a group, newest first:
    /// (Unix ms, sender name, SSID, text).
    pub async fn recent_messages(
        &self,
        group_id: i64,
        limit: u32,
    ) -> Result<Vec<(i64, String, u8, Vec<u8>)>, StoreError> {
        let rows = sqlx::query(
            "SELECT m.sent_at_ms, u.name, m.ssid, m.text FROM messages m JOIN users u ON u.id = m.owner_id
             WHERE m.group_id = ? ORDER BY m.sent_at_ms DESC, m.id DESC LIMIT ?",
        )
        .bind(group_id)
        .bind(i64::from(limit.min(1000)))
        .fetch_all(&self.pool)
        .await?;
        rows.iter()
            .map(|r| {
                let ssid: i64 = r.try_get(2)?;
                Ok((
                    r.try_get(0)?,
                    r.try_get(1)?,
                    u8::try_from(ssid).unwrap_or(0),
                    r.try_get(3)?,
                ))
            })
            .collect()
    }

    /// Stored Type 3 items of a device, ordered by tag.
    pub async fn device_config(&self, owner_id: i64, ssid: u8) -> Result<Vec<Tlv>, StoreError> {
        let rows = sqlx::query(
            "SELECT tag, value FROM device_configs WHERE owner_id = ? AND ssid = ? ORDER BY tag",
        )
        .bind(owner_id)
        .bind(i64::from(ssid))
        .fetch_all(&self.pool)
        .await?;
        rows.iter()
            .map(|r| {
                let tag: i64 = r.try_get(0)?;
                Ok(Tlv {
                    tag: u8::try_from(tag)
                        .map_err(|_| StoreError::Invalid(format!("config tag {tag}")))?,
                    value: r.try_get(1)?,
                })
            })
            .collect()
    }

    /// Loads everything the session core routes by. Rows with out-of-range
    /// values (SSID, model, DMR ID) are skipped rather than failing the load.
    pub async fn load_directory(&self) -> Result<Directory, StoreError> {
        let users = sqlx::query(
            "SELECT id, name, callsign, dmrid, status, approval_status, device_password_hash, default_group_id FROM users",
        )
        .fetch_all(&self.pool)
        .await?
        .iter()
        .map(|r| -> Result<UserRecord, sqlx::Error> {
            Ok(UserRecord {
                id: r.try_get(0)?,
                name: r.try_get(1)?,
                callsign: r.try_get(2)?,
                dmrid: u32::try_from(r.try_get::<i64, _>(3)?).unwrap_or(0),
                enabled: r.try_get::<i64, _>(4)? == 1,
                approved: r.try_get::<i64, _>(5)? == 1,
                device_password_hash: r.try_get(6)?,
                default_group_id: r.try_get(7)?,
            })
        })
        .collect::<Result<Vec<_>, _>>()?;
        let groups = sqlx::query("SELECT id, name, status, is_virtual FROM talkgroups")
            .fetch_all(&self.pool)
            .await?
            .iter()
            .map(|r| -> Result<GroupRecord, sqlx::Error> {
                Ok(GroupRecord {
                    id: r.try_get(0)?,
                    name: r.try_get(1)?,
                    enabled: r.try_get::<i64, _>(2)? == 1,
                    is_virtual: r.try_get::<i64, _>(3)? != 0,
                })
            })
            .collect::<Result<Vec<_>, _>>()?;
        let links = sqlx::query("SELECT link_group_id, target_group_id FROM group_links")
            .fetch_all(&self.pool)
            .await?
            .iter()
            .map(|r| Ok((r.try_get(0)?, r.try_get(1)?)))
            .collect::<Result<Vec<(i64, i64)>, sqlx::Error>>()?;
        let mut devices = Vec::new();
        for r in sqlx::query(
            "SELECT owner_id, ssid, dev_model, dmrid, group_id, disable_send, disable_recv, mac FROM devices",
        )
        .fetch_all(&self.pool)
        .await?
        {
            let (Ok(ssid), Ok(dev_model), Ok(dmrid)) = (
                u8::try_from(r.try_get::<i64, _>(1)?),
                u8::try_from(r.try_get::<i64, _>(2)?),
                u32::try_from(r.try_get::<i64, _>(3)?),
            ) else {
                continue;
            };
            let mac: Option<String> = r.try_get(7)?;
            devices.push(DeviceRecord {
                owner_id: r.try_get(0)?,
                ssid,
                dev_model,
                dmrid,
                group_id: r.try_get(4)?,
                disable_send: r.try_get::<i64, _>(5)? != 0,
                disable_recv: r.try_get::<i64, _>(6)? != 0,
                mac: mac.and_then(|m| Mac::parse(m.as_bytes())),
            });
        }
        Ok(Directory::new(users, groups, links, devices))
    }

    /// Closes the pool.
    pub async fn close(&self) {
        self.pool.close().await;
    }
}
