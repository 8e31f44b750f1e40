//! Channel history: text messages and voice recordings (draarl-v1 §5.3),
//! and the queries that keep them bounded (age, byte cap, disk quota).

use sqlx::any::AnyRow;
use sqlx::Row;

use super::{Store, StoreError};
use crate::model::Recording;

/// Messages deleted per query when pruning.
const PRUNE_BATCH: u32 = 256;

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

    /// Deletes messages sent before `before_ms` (Unix ms); returns how many
    /// and their text's bytes. The server runs it at every reload with its
    /// retention setting. Deletes in batches of 256, oldest
    /// first, so a long backlog never comes back as one huge answer.
    pub async fn prune_messages(&self, before_ms: i64) -> Result<Pruned, StoreError> {
        let mut total = Pruned::default();
        loop {
            let rows = sqlx::query(
                "DELETE FROM messages WHERE id IN
                   (SELECT id FROM messages WHERE sent_at_ms < $1 ORDER BY sent_at_ms, id LIMIT $2)
                 RETURNING CAST(LENGTH(text) AS BIGINT)",
            )
            .bind(before_ms)
            .bind(i64::from(PRUNE_BATCH))
            .fetch_all(&self.pool)
            .await?;
            let batch = Pruned::of(&rows)?;
            total.rows += batch.rows;
            total.bytes += batch.bytes;
            if batch.rows < u64::from(PRUNE_BATCH) {
                return Ok(total);
            }
        }
    }

    /// Deletes the fewest oldest messages (by time, then insertion) that
    /// hold at least `bytes` of text, at most 256 per call;
    /// returns how many and their bytes. The server runs it while the
    /// history is over its byte cap, with the excess.
    pub async fn prune_oldest_messages(&self, bytes: u64) -> Result<Pruned, StoreError> {
        let rows = sqlx::query(
            "DELETE FROM messages WHERE id IN (
               SELECT id FROM (
                 SELECT id, SUM(LENGTH(text)) OVER (ORDER BY sent_at_ms, id) - LENGTH(text) AS before
                 FROM (SELECT id, sent_at_ms, text FROM messages ORDER BY sent_at_ms, id LIMIT $2) AS oldest
               ) AS ranked WHERE before < $1)
             RETURNING CAST(LENGTH(text) AS BIGINT)",
        )
        .bind(i64::try_from(bytes).unwrap_or(i64::MAX))
        .bind(i64::from(PRUNE_BATCH))
        .fetch_all(&self.pool)
        .await?;
        Pruned::of(&rows)
    }

    /// Bytes of message text stored (a full scan: the server reads it once
    /// at start and then keeps count).
    pub async fn text_bytes(&self) -> Result<u64, StoreError> {
        self.sum("SELECT CAST(COALESCE(SUM(LENGTH(text)), 0) AS BIGINT) FROM messages")
            .await
    }

    /// Bytes of the recording files the store lists (read once at start).
    pub async fn recording_bytes(&self) -> Result<u64, StoreError> {
        self.sum("SELECT CAST(COALESCE(SUM(bytes), 0) AS BIGINT) FROM recordings")
            .await
    }

    async fn sum(&self, sql: &str) -> Result<u64, StoreError> {
        let n: i64 = sqlx::query(sql).fetch_one(&self.pool).await?.try_get(0)?;
        Ok(u64::try_from(n).unwrap_or(0))
    }

    /// The `limit` oldest recordings (by start time, then insertion),
    /// oldest first.
    pub async fn oldest_recordings(&self, limit: u32) -> Result<Vec<StoredRecording>, StoreError> {
        let rows = sqlx::query(
            "SELECT id, path, bytes FROM recordings ORDER BY started_at_ms, id LIMIT $1",
        )
        .bind(i64::from(limit))
        .fetch_all(&self.pool)
        .await?;
        rows.iter()
            .map(|r| {
                Ok(StoredRecording {
                    id: r.try_get(0)?,
                    path: r.try_get(1)?,
                    bytes: u64::try_from(r.try_get::<i64, _>(2)?).unwrap_or(0),
                })
            })
            .collect()
    }

    /// Deletes a recording's row (its file is the caller's).
    pub async fn delete_recording(&self, id: i64) -> Result<(), StoreError> {
        sqlx::query("DELETE FROM recordings WHERE id = $1")
            .bind(id)
            .execute(&self.pool)
            .await?;
        Ok(())
    }
}

/// What a pruning query deleted.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Pruned {
    /// Rows deleted.
    pub rows: u64,
    /// Bytes of message text they held.
    pub bytes: u64,
}

impl Pruned {
    fn of(rows: &[AnyRow]) -> Result<Self, StoreError> {
        let mut p = Self::default();
        for r in rows {
            p.rows += 1;
            p.bytes += u64::try_from(r.try_get::<i64, _>(0)?).unwrap_or(0);
        }
        Ok(p)
    }
}

/// A recording's row, as the quota pruning reads it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StoredRecording {
    /// Row id.
    pub id: i64,
    /// Path relative to the recording directory.
    pub path: String,
    /// File size, bytes.
    pub bytes: u64,
}
