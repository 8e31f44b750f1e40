//! The centre's edge nodes (draarl-interconnect §3.3): node id, the
//! SHA-256 hex of the long-term credential (the credential itself is shown
//! once by `petrel reflector edge add` and never stored), a disabled flag
//! and the creation time. The table is bounded by `MaxNodes` (§7): adding
//! beyond it is refused with [`StoreError::Invalid`], since silently
//! dropping an operator's node would lock that edge out.

use sqlx::Row;

use super::{now_ms, Store, StoreError};
use crate::model::is_node_name;

/// One stored edge node (without its credential hash).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NodeRecord {
    /// The node id.
    pub node_id: String,
    /// Whether the node is refused at authentication.
    pub disabled: bool,
    /// Added, Unix ms.
    pub created_at_ms: i64,
}

/// What the credential check reads for one node.
#[derive(Clone, PartialEq, Eq)]
pub struct NodeCredentialRow {
    /// SHA-256 hex of the node's credential.
    pub credential_hash: String,
    /// Whether the node is disabled.
    pub disabled: bool,
}

impl std::fmt::Debug for NodeCredentialRow {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("NodeCredentialRow")
            .field("disabled", &self.disabled)
            .finish_non_exhaustive()
    }
}

impl Store {
    /// Adds node `node_id` (checked with [`is_node_name`]) whose credential
    /// hashes to `credential_hash` (64 hex characters), unless `max_nodes`
    /// nodes are stored already.
    ///
    /// # Errors
    /// [`StoreError::Invalid`] for a bad name or hash or a full table,
    /// [`StoreError::Duplicate`] when the id exists.
    pub async fn add_node(
        &self,
        node_id: &str,
        credential_hash: &str,
        max_nodes: usize,
    ) -> Result<(), StoreError> {
        if !is_node_name(node_id) {
            return Err(StoreError::Invalid(format!("node name {node_id:?}")));
        }
        if credential_hash.len() != 64 || !credential_hash.bytes().all(|b| b.is_ascii_hexdigit()) {
            return Err(StoreError::Invalid("credential hash".into()));
        }
        let mut tx = self.pool.begin().await?;
        let count: i64 = sqlx::query("SELECT COUNT(*) FROM interconnect_nodes")
            .fetch_one(&mut *tx)
            .await?
            .try_get(0)?;
        if count >= i64::try_from(max_nodes).unwrap_or(i64::MAX) {
            return Err(StoreError::Invalid(format!(
                "node count: {count} nodes stored, max_nodes is {max_nodes}"
            )));
        }
        let r = sqlx::query(
            "INSERT INTO interconnect_nodes (node_id, credential_hash, disabled, created_at_ms)
             VALUES ($1, $2, 0, $3) ON CONFLICT DO NOTHING",
        )
        .bind(node_id)
        .bind(credential_hash)
        .bind(now_ms())
        .execute(&mut *tx)
        .await?;
        if r.rows_affected() == 0 {
            return Err(StoreError::Duplicate(format!(
                "a node named {node_id:?} already exists"
            )));
        }
        tx.commit().await?;
        Ok(())
    }

    /// Every node, by id.
    pub async fn nodes(&self) -> Result<Vec<NodeRecord>, StoreError> {
        let rows = sqlx::query(
            "SELECT node_id, disabled, created_at_ms FROM interconnect_nodes ORDER BY node_id",
        )
        .fetch_all(&self.pool)
        .await?;
        rows.iter()
            .map(|r| {
                Ok(NodeRecord {
                    node_id: r.try_get(0)?,
                    disabled: r.try_get::<i64, _>(1)? != 0,
                    created_at_ms: r.try_get(2)?,
                })
            })
            .collect()
    }

    /// Removes node `node_id`.
    ///
    /// # Errors
    /// [`StoreError::NotFound`] when there is none.
    pub async fn remove_node(&self, node_id: &str) -> Result<(), StoreError> {
        let r = sqlx::query("DELETE FROM interconnect_nodes WHERE node_id = $1")
            .bind(node_id)
            .execute(&self.pool)
            .await?;
        if r.rows_affected() == 0 {
            return Err(StoreError::NotFound(format!("node {node_id:?}")));
        }
        Ok(())
    }

    /// Disables or enables node `node_id` (a disabled node is refused at
    /// authentication, §3.3).
    ///
    /// # Errors
    /// [`StoreError::NotFound`] when there is none.
    pub async fn set_node_disabled(&self, node_id: &str, disabled: bool) -> Result<(), StoreError> {
        let r = sqlx::query("UPDATE interconnect_nodes SET disabled = $1 WHERE node_id = $2")
            .bind(i64::from(disabled))
            .bind(node_id)
            .execute(&self.pool)
            .await?;
        if r.rows_affected() == 0 {
            return Err(StoreError::NotFound(format!("node {node_id:?}")));
        }
        Ok(())
    }

    /// The credential hash and disabled flag of `node_id`, if stored.
    pub async fn node_credential(
        &self,
        node_id: &str,
    ) -> Result<Option<NodeCredentialRow>, StoreError> {
        let row = sqlx::query(
            "SELECT credential_hash, disabled FROM interconnect_nodes WHERE node_id = $1",
        )
        .bind(node_id)
        .fetch_optional(&self.pool)
        .await?;
        row.map(|r| {
            Ok(NodeCredentialRow {
                credential_hash: r.try_get(0)?,
                disabled: r.try_get::<i64, _>(1)? != 0,
            })
        })
        .transpose()
    }
}
