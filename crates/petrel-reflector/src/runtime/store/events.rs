//! What the running server reads and writes: session-core events, stored
//! device configurations and the routing directory.

use sqlx::Row;

use super::{Store, StoreError};
use crate::codec::{Mac, Tlv};
use crate::model::{DeviceRecord, Directory, GroupRecord, StoreEvent, UserRecord};

impl Store {
    /// Applies one event from the session core.
    pub async fn apply(&self, e: &StoreEvent) -> Result<(), StoreError> {
        match e {
            StoreEvent::DeviceUpsert(d) => {
                sqlx::query(
                    "INSERT INTO devices (owner_id, ssid, dev_model, dmrid, group_id, disable_send, disable_recv, mac)
                     VALUES ($1, $2, $3, $4, $5, $6, $7, $8)
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
            StoreEvent::SessionEntry(w) => self.apply_session_entry(w).await?,
            StoreEvent::DeviceGroup { device, group_id } => {
                sqlx::query("UPDATE devices SET group_id = $1 WHERE owner_id = $2 AND ssid = $3")
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
                    "INSERT INTO messages (sent_at_ms, owner_id, ssid, group_id, text) VALUES ($1, $2, $3, $4, $5)",
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
                    sqlx::query(
                        "INSERT INTO device_configs (owner_id, ssid, tag, value) VALUES ($1, $2, $3, $4)
                         ON CONFLICT (owner_id, ssid, tag) DO UPDATE SET value = excluded.value",
                    )
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

    /// Stored Type 3 items of a device, ordered by tag.
    pub async fn device_config(&self, owner_id: i64, ssid: u8) -> Result<Vec<Tlv>, StoreError> {
        let rows = sqlx::query(
            "SELECT tag, value FROM device_configs WHERE owner_id = $1 AND ssid = $2 ORDER BY tag",
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
}
