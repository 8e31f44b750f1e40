//! Pages of a group's text history for the apps
//! (`specs/draarl-apps.md` §3.7): newest first by time then id, resumed
//! after a (time, id) cursor.

use sqlx::Row;

use super::{Store, StoreError};

/// One stored text message with its sender.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct GroupMessage {
    /// Row id.
    pub id: i64,
    /// Sent, Unix ms.
    pub sent_at_ms: i64,
    /// Sender's user id.
    pub user_id: i64,
    /// Sender's account name.
    pub username: String,
    /// Sender's callsign.
    pub callsign: String,
    /// Sender's display name.
    pub nickname: String,
    /// Sender's SSID.
    pub ssid: i64,
    /// The text as received.
    pub text: Vec<u8>,
}

impl Store {
    /// Up to `limit` (≤ 1000) text messages delivered to `group_id`,
    /// newest first, strictly older than `before` = (Unix ms, id) if given.
    pub async fn group_messages(
        &self,
        group_id: i64,
        before: Option<(i64, i64)>,
        limit: u32,
    ) -> Result<Vec<GroupMessage>, StoreError> {
        let (at, id) = before.unwrap_or((i64::MAX, i64::MAX));
        let rows = sqlx::query(
            "SELECT m.id, m.sent_at_ms, m.owner_id, u.name, u.callsign, u.nickname, m.ssid, m.text
             FROM messages m JOIN users u ON u.id = m.owner_id
             WHERE m.group_id = $1 AND (m.sent_at_ms < $2 OR (m.sent_at_ms = $2 AND m.id < $3))
             ORDER BY m.sent_at_ms DESC, m.id DESC LIMIT $4",
        )
        .bind(group_id)
        .bind(at)
        .bind(id)
        .bind(i64::from(limit.min(1000)))
        .fetch_all(&self.pool)
        .await?;
        rows.iter()
            .map(|r| {
                Ok(GroupMessage {
                    id: r.try_get(0)?,
                    sent_at_ms: r.try_get(1)?,
                    user_id: r.try_get(2)?,
                    username: r.try_get(3)?,
                    callsign: r.try_get(4)?,
                    nickname: r.try_get(5)?,
                    ssid: r.try_get(6)?,
                    text: r.try_get(7)?,
                })
            })
            .collect::<Result<_, sqlx::Error>>()
            .map_err(StoreError::from)
    }
}
