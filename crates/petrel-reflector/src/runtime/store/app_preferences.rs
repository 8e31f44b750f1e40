//! App routing preferences (`specs/draarl-apps.md` §2.3, §3.4): the routing
//! saved per (user, DevModel, client instance), so the next login of that
//! install starts with it, and each user's last TX group per DevModel (the
//! fallback of correction 5, and `last_group_id` of the login answer).
//!
//! The RX list is stored as decimal ids joined by `,`. Each user keeps at
//! most a configured number of preferences: saving one more evicts the
//! least recently used.

use sqlx::Row;

use super::{Store, StoreError};
use crate::model::Routing;

/// The key of one preference.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PreferenceKey<'a> {
    /// `users.id`.
    pub user_id: i64,
    /// 101–105.
    pub dev_model: u8,
    /// Normalised client instance id.
    pub client_instance_id: &'a str,
}

/// A stored preference as read: TX and RX as stored (not yet sanitised).
/// `None` RX means the stored list did not parse.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StoredRouting {
    /// TX group.
    pub tx_group_id: i64,
    /// RX groups, or `None` if the stored text is not a list of ids.
    pub rx_group_ids: Option<Vec<i64>>,
}

fn join(ids: &[i64]) -> String {
    ids.iter().map(i64::to_string).collect::<Vec<_>>().join(",")
}

fn split(text: &str) -> Option<Vec<i64>> {
    if text.is_empty() {
        return Some(Vec::new());
    }
    text.split(',').map(|s| s.parse().ok()).collect()
}

impl Store {
    /// The stored routing of `key`, if any.
    pub async fn app_preference(
        &self,
        key: &PreferenceKey<'_>,
    ) -> Result<Option<StoredRouting>, StoreError> {
        let row = sqlx::query(
            "SELECT tx_group_id, rx_group_ids FROM app_preferences
             WHERE user_id = $1 AND dev_model = $2 AND client_instance_id = $3",
        )
        .bind(key.user_id)
        .bind(i64::from(key.dev_model))
        .bind(key.client_instance_id)
        .fetch_optional(&self.pool)
        .await?;
        let Some(r) = row else {
            return Ok(None);
        };
        let rx: String = r.try_get(1)?;
        Ok(Some(StoredRouting {
            tx_group_id: r.try_get(0)?,
            rx_group_ids: split(&rx),
        }))
    }

    /// Saves `routing` as the preference of `key`, used at `now_ms`, then
    /// evicts the user's least recently used preferences beyond
    /// `per_user`; returns how many were evicted.
    pub async fn save_app_preference(
        &self,
        key: &PreferenceKey<'_>,
        routing: &Routing,
        now_ms: i64,
        per_user: u32,
    ) -> Result<u64, StoreError> {
        sqlx::query(
            "INSERT INTO app_preferences
             (user_id, dev_model, client_instance_id, tx_group_id, rx_group_ids, last_used_ms)
             VALUES ($1, $2, $3, $4, $5, $6)
             ON CONFLICT (user_id, dev_model, client_instance_id) DO UPDATE SET
                 tx_group_id = excluded.tx_group_id, rx_group_ids = excluded.rx_group_ids,
                 last_used_ms = excluded.last_used_ms",
        )
        .bind(key.user_id)
        .bind(i64::from(key.dev_model))
        .bind(key.client_instance_id)
        .bind(routing.tx_group_id)
        .bind(join(&routing.rx_group_ids))
        .bind(now_ms)
        .execute(&self.pool)
        .await?;
        let r = sqlx::query(
            "DELETE FROM app_preferences WHERE user_id = $1 AND
                 (dev_model, client_instance_id) NOT IN (
                     SELECT dev_model, client_instance_id FROM app_preferences WHERE user_id = $1
                     ORDER BY last_used_ms DESC, dev_model, client_instance_id LIMIT $2)",
        )
        .bind(key.user_id)
        .bind(i64::from(per_user))
        .execute(&self.pool)
        .await?;
        Ok(r.rows_affected())
    }

    /// Marks the preference of `key` used at `now_ms`.
    pub async fn touch_app_preference(
        &self,
        key: &PreferenceKey<'_>,
        now_ms: i64,
    ) -> Result<(), StoreError> {
        sqlx::query(
            "UPDATE app_preferences SET last_used_ms = $1
             WHERE user_id = $2 AND dev_model = $3 AND client_instance_id = $4",
        )
        .bind(now_ms)
        .bind(key.user_id)
        .bind(i64::from(key.dev_model))
        .bind(key.client_instance_id)
        .execute(&self.pool)
        .await?;
        Ok(())
    }

    /// Preferences stored for `user_id`.
    pub async fn app_preference_count(&self, user_id: i64) -> Result<i64, StoreError> {
        Ok(
            sqlx::query("SELECT COUNT(*) FROM app_preferences WHERE user_id = $1")
                .bind(user_id)
                .fetch_one(&self.pool)
                .await?
                .try_get(0)?,
        )
    }

    /// The user's last TX group for `dev_model`, if one was saved.
    pub async fn app_last_group(
        &self,
        user_id: i64,
        dev_model: u8,
    ) -> Result<Option<i64>, StoreError> {
        sqlx::query("SELECT group_id FROM app_last_groups WHERE user_id = $1 AND dev_model = $2")
            .bind(user_id)
            .bind(i64::from(dev_model))
            .fetch_optional(&self.pool)
            .await?
            .map(|r| r.try_get(0))
            .transpose()
            .map_err(StoreError::from)
    }

    /// Records `group_id` as the user's last TX group for `dev_model`
    /// (one row per user and DevModel 101–105, so bounded).
    pub async fn set_app_last_group(
        &self,
        user_id: i64,
        dev_model: u8,
        group_id: i64,
    ) -> Result<(), StoreError> {
        sqlx::query(
            "INSERT INTO app_last_groups (user_id, dev_model, group_id) VALUES ($1, $2, $3)
             ON CONFLICT (user_id, dev_model) DO UPDATE SET group_id = excluded.group_id",
        )
        .bind(user_id)
        .bind(i64::from(dev_model))
        .bind(group_id)
        .execute(&self.pool)
        .await?;
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rx_lists_round_trip_and_garbage_is_none() {
        assert_eq!(split(&join(&[1, 999, 1001])), Some(vec![1, 999, 1001]));
        assert_eq!(split(""), Some(vec![]));
        assert_eq!(split("1,,2"), None);
        assert_eq!(split("1;2"), None);
    }
}
