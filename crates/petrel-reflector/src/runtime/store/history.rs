//! Channel history: text messages and voice recordings (draarl-v1 §5.3).

use sqlx::Row;

use super::{Store, StoreError};
use crate::model::Recording;

impl Store {
    /// Records a written `.raw` file.
    pub async fn add_recording(
        &self,
        r: &Recording,
        path: &str,
        bytes: u64,
    ) -> Result<(), StoreError> {
        sqlx::query(
            "INSERT INTO recordings (owner_id, ssid, group_id, started_at_ms, duration_ms, path, bytes)
             VALUES ($1, $2, $3, $4, $5, $6, $7)",
        )
        .bind(r.device.0)
        .bind(i64::from(r.device.1))
        .bind(r.group_id)
        .bind(r.started_unix_ms)
        .bind(i64::try_from(r.duration_ms()).unwrap_or(i64::MAX))
        .bind(path)
        .bind(i64::try_from(bytes).unwrap_or(i64::MAX))
        .execute(&self.pool)
        .await?;
        Ok(())
    }

    /// Paths and durations (ms) of a group's newest recordings, newest first.
    pub async fn recent_recordings(
        &self,
        group_id: i64,
        limit: u32,
    ) -> Result<Vec<(String, i64)>, StoreError> {
        let rows = sqlx::query(
            "SELECT path, duration_ms FROM recordings WHERE group_id = $1 ORDER BY started_at_ms DESC, id DESC LIMIT $2",
        )
        .bind(group_id)
        .bind(i64::from(limit.min(1000)))
        .fetch_all(&self.pool)
        .await?;
        rows.iter()
            .map(|r| Ok((r.try_get(0)?, r.try_get(1)?)))
            .collect()
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
             WHERE m.group_id = $1 ORDER BY m.sent_at_ms DESC, m.id DESC LIMIT $2",
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

    /// Deletes messages sent before `before_ms` (Unix ms); returns how many.
    /// The server runs it at every reload with its retention setting, which
    /// keeps the table bounded.
    pub async fn prune_messages(&self, before_ms: i64) -> Result<u64, StoreError> {
        Ok(sqlx::query("DELETE FROM messages WHERE sent_at_ms < $1")
            .bind(before_ms)
            .execute(&self.pool)
            .await?
            .rows_affected())
    }
}
