//! The centre's device-session entries (draarl-interconnect §1, §3.9,
//! §6.2): per physical device the entry node, its control session id at
//! activation and since when that session is gone. Written in the
//! background from [`SessionEntryWrite`] events (never on a datagram's
//! path) and read once at centre start.
//!
//! Control session ids are u64 on the wire and stored bit for bit in a
//! signed 64-bit column.

use sqlx::Row;

use super::{Store, StoreError};
use crate::model::{SessionEntryRecord, SessionEntryWrite};

fn to_db(v: u64) -> i64 {
    i64::from_be_bytes(v.to_be_bytes())
}

fn from_db(v: i64) -> u64 {
    u64::from_be_bytes(v.to_be_bytes())
}

impl Store {
    /// Applies one entry change.
    pub(super) async fn apply_session_entry(
        &self,
        w: &SessionEntryWrite,
    ) -> Result<(), StoreError> {
        match w {
            SessionEntryWrite::Put(e) => {
                sqlx::query(
                    "INSERT INTO device_session_entries
                       (owner_id, ssid, device_id, node_id, control_session_id, offline_since_ms)
                     VALUES ($1, $2, $3, $4, $5, $6)
                     ON CONFLICT (owner_id, ssid) DO UPDATE SET
                       device_id = excluded.device_id, node_id = excluded.node_id,
                       control_session_id = excluded.control_session_id,
                       offline_since_ms = excluded.offline_since_ms",
                )
                .bind(e.owner_id)
                .bind(i64::from(e.ssid))
                .bind(e.device_id)
                .bind(&e.node_id)
                .bind(to_db(e.control_session))
                .bind(e.offline_since_ms)
                .execute(&self.pool)
                .await?;
            }
            SessionEntryWrite::Clear {
                owner_id,
                ssid,
                node_id,
                control_session,
            } => {
                sqlx::query(
                    "DELETE FROM device_session_entries
                     WHERE owner_id = $1 AND ssid = $2 AND node_id = $3 AND control_session_id = $4",
                )
                .bind(owner_id)
                .bind(i64::from(*ssid))
                .bind(node_id)
                .bind(to_db(*control_session))
                .execute(&self.pool)
                .await?;
            }
            SessionEntryWrite::Offline {
                node_id,
                control_session,
                at_ms,
            } => {
                sqlx::query(
                    "UPDATE device_session_entries SET offline_since_ms = $1
                     WHERE node_id = $2 AND control_session_id = $3 AND offline_since_ms = 0",
                )
                .bind(at_ms)
                .bind(node_id)
                .bind(to_db(*control_session))
                .execute(&self.pool)
                .await?;
            }
        }
        Ok(())
    }

    /// At most `limit` entries (oldest owners first), for the centre to
    /// load at start.
    ///
    /// # Errors
    /// [`StoreError::Db`]; a row with an SSID outside 0–255 is skipped.
    pub async fn session_entries(
        &self,
        limit: usize,
    ) -> Result<Vec<SessionEntryRecord>, StoreError> {
        let rows = sqlx::query(
            "SELECT owner_id, ssid, device_id, node_id, control_session_id, offline_since_ms
             FROM device_session_entries ORDER BY owner_id, ssid LIMIT $1",
        )
        .bind(i64::try_from(limit).unwrap_or(i64::MAX))
        .fetch_all(&self.pool)
        .await?;
        let mut out = Vec::with_capacity(rows.len());
        for r in rows {
            let Ok(ssid) = u8::try_from(r.try_get::<i64, _>(1)?) else {
                continue;
            };
            out.push(SessionEntryRecord {
                owner_id: r.try_get(0)?,
                ssid,
                device_id: r.try_get(2)?,
                node_id: r.try_get(3)?,
                control_session: from_db(r.try_get(4)?),
                offline_since_ms: r.try_get(5)?,
            });
        }
        Ok(out)
    }
}
