//! Talkgroups as the app API sees them (`specs/draarl-apps.md` §1.5,
//! §3.4 "Group rule"): type (1 public, 2 private), owner, verified
//! members, and the listing of the groups a user may use.

use std::collections::HashMap;

use sqlx::any::AnyRow;
use sqlx::Row;

use super::{Store, StoreError};
use crate::model::{GroupFacts, GROUP_PRIVATE, GROUP_PUBLIC};

/// One group with what the group rule and `/api/groups` need, for one user.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AppGroup {
    /// Group id.
    pub id: i64,
    /// Name.
    pub name: String,
    /// 1 public, 2 private, 0 legacy.
    pub group_type: i64,
    /// 1 = enabled.
    pub status: i64,
    /// A virtual (link) group.
    pub is_virtual: bool,
    /// Owner's user id, if any.
    pub owner_id: Option<i64>,
    /// Owner's callsign (empty without an owner).
    pub owner_callsign: String,
    /// Free text.
    pub note: String,
    /// Whether the user owns it.
    pub is_owner: bool,
    /// Whether the user is a verified member.
    pub is_joined: bool,
}

impl AppGroup {
    /// What the group rule reads of it.
    pub fn facts(&self) -> GroupFacts {
        GroupFacts {
            status: self.status,
            is_virtual: self.is_virtual,
            group_type: self.group_type,
            is_owner: self.is_owner,
            is_verified_member: self.is_joined,
        }
    }
}

/// The select list of [`AppGroup`] for user `$1`.
const SELECT: &str = "SELECT g.id, g.name, g.type, g.status, g.is_virtual, g.owner_id,
        COALESCE(o.callsign, ''), g.note,
        CASE WHEN g.owner_id = $1 THEN 1 ELSE 0 END,
        CASE WHEN m.is_verified = 1 THEN 1 ELSE 0 END
     FROM talkgroups g
     LEFT JOIN users o ON o.id = g.owner_id
     LEFT JOIN group_members m ON m.group_id = g.id AND m.user_id = $1";

/// The group rule in SQL, for user `$1` who is an admin when `$2 = 1`.
const USABLE: &str = "g.status = 1 AND g.is_virtual = 0 AND g.type IN (1, 2)
     AND ($2 = 1 OR g.type = 1 OR g.owner_id = $1 OR m.is_verified = 1)";

fn app_group(r: &AnyRow) -> Result<AppGroup, sqlx::Error> {
    Ok(AppGroup {
        id: r.try_get(0)?,
        name: r.try_get(1)?,
        group_type: r.try_get(2)?,
        status: r.try_get(3)?,
        is_virtual: r.try_get::<i64, _>(4)? != 0,
        owner_id: r.try_get(5)?,
        owner_callsign: r.try_get(6)?,
        note: r.try_get(7)?,
        is_owner: r.try_get::<i64, _>(8)? == 1,
        is_joined: r.try_get::<i64, _>(9)? == 1,
    })
}

impl Store {
    /// The groups among `ids` that exist, as seen by `user_id`. At most
    /// 1024 ids (the caller bounds routings far below that).
    pub async fn app_groups(
        &self,
        user_id: i64,
        ids: &[i64],
    ) -> Result<HashMap<i64, AppGroup>, StoreError> {
        if ids.is_empty() {
            return Ok(HashMap::new());
        }
        if ids.len() > 1024 {
            return Err(StoreError::Invalid("more than 1024 group ids".into()));
        }
        let placeholders: Vec<String> = (0..ids.len()).map(|i| format!("${}", i + 2)).collect();
        let sql = format!("{SELECT} WHERE g.id IN ({})", placeholders.join(", "));
        let mut q = sqlx::query(&sql).bind(user_id);
        for id in ids {
            q = q.bind(*id);
        }
        q.fetch_all(&self.pool)
            .await?
            .iter()
            .map(|r| app_group(r).map(|g| (g.id, g)))
            .collect::<Result<_, _>>()
            .map_err(StoreError::from)
    }

    /// One page of the groups `user_id` may use (the group rule), by id,
    /// and how many there are in all.
    pub async fn usable_groups(
        &self,
        user_id: i64,
        is_admin: bool,
        offset: u64,
        limit: u32,
    ) -> Result<(Vec<AppGroup>, i64), StoreError> {
        let admin = i64::from(is_admin);
        let total: i64 = sqlx::query(&format!(
            "SELECT COUNT(*) FROM talkgroups g
             LEFT JOIN group_members m ON m.group_id = g.id AND m.user_id = $1 WHERE {USABLE}"
        ))
        .bind(user_id)
        .bind(admin)
        .fetch_one(&self.pool)
        .await?
        .try_get(0)?;
        let rows = sqlx::query(&format!(
            "{SELECT} WHERE {USABLE} ORDER BY g.id LIMIT $3 OFFSET $4"
        ))
        .bind(user_id)
        .bind(admin)
        .bind(i64::from(limit))
        .bind(i64::try_from(offset).unwrap_or(i64::MAX))
        .fetch_all(&self.pool)
        .await?;
        let groups = rows.iter().map(app_group).collect::<Result<_, _>>()?;
        Ok((groups, total))
    }

    /// Devices placed in each group (physical devices; `devices.group_id`).
    pub async fn group_device_totals(&self) -> Result<HashMap<i64, i64>, StoreError> {
        sqlx::query("SELECT group_id, COUNT(*) FROM devices WHERE group_id <> 0 GROUP BY group_id")
            .fetch_all(&self.pool)
            .await?
            .iter()
            .map(|r| Ok((r.try_get(0)?, r.try_get(1)?)))
            .collect::<Result<_, sqlx::Error>>()
            .map_err(StoreError::from)
    }

    /// Makes group `id` public or private (`private`) and sets its owner
    /// (`None` for none).
    pub async fn set_group_access(
        &self,
        id: i64,
        private: bool,
        owner: Option<&str>,
    ) -> Result<(), StoreError> {
        let owner_id = match owner {
            Some(name) => Some(self.user_id_of(name).await?),
            None => None,
        };
        let r = sqlx::query("UPDATE talkgroups SET type = $1, owner_id = $2 WHERE id = $3")
            .bind(if private { GROUP_PRIVATE } else { GROUP_PUBLIC })
            .bind(owner_id)
            .bind(id)
            .execute(&self.pool)
            .await?;
        super::accounts::updated(r.rows_affected(), || format!("group {id}"))
    }

    /// Adds `user` to group `id` (or updates the row) as a verified member
    /// or not.
    pub async fn set_group_member(
        &self,
        id: i64,
        user: &str,
        verified: bool,
    ) -> Result<(), StoreError> {
        let user_id = self.user_id_of(user).await?;
        let r = sqlx::query(
            "INSERT INTO group_members (group_id, user_id, is_verified, joined_at_ms)
             SELECT $1, $2, $3, $4 WHERE EXISTS (SELECT 1 FROM talkgroups WHERE id = $1)
             ON CONFLICT (group_id, user_id) DO UPDATE SET is_verified = excluded.is_verified",
        )
        .bind(id)
        .bind(user_id)
        .bind(i64::from(verified))
        .bind(super::now_ms())
        .execute(&self.pool)
        .await?;
        super::accounts::updated(r.rows_affected(), || format!("group {id}"))
    }

    /// Removes `user` from group `id`.
    pub async fn remove_group_member(&self, id: i64, user: &str) -> Result<(), StoreError> {
        let user_id = self.user_id_of(user).await?;
        let r = sqlx::query("DELETE FROM group_members WHERE group_id = $1 AND user_id = $2")
            .bind(id)
            .bind(user_id)
            .execute(&self.pool)
            .await?;
        super::accounts::updated(r.rows_affected(), || format!("member {user} of group {id}"))
    }

    async fn user_id_of(&self, name: &str) -> Result<i64, StoreError> {
        sqlx::query("SELECT id FROM users WHERE name = $1")
            .bind(name)
            .fetch_optional(&self.pool)
            .await?
            .ok_or_else(|| StoreError::NotFound(format!("user {name}")))?
            .try_get(0)
            .map_err(StoreError::from)
    }
}
