//! The centre's credential check (draarl-interconnect §3.3): a static
//! token map (the reference's `NodeTokens`, for tests and bootstrap) is
//! tried first, then the store's node row — a disabled node is refused,
//! otherwise the presented token's SHA-256 hex must equal the stored hash.
//! Both compares are of hashes, in constant time; tokens are never logged.
//! Registration credentials and rotation (§3.3) are not implemented: every
//! stored credential is long-term.

use std::collections::HashMap;
use std::fmt;

use super::super::store::{Store, StoreError};
use crate::model::{hashes_match, sha256_hex};

/// Where node credentials are checked.
#[derive(Clone, Default)]
pub struct NodeAuthority {
    store: Option<Store>,
    /// Node id → SHA-256 hex of its static token.
    static_tokens: HashMap<String, String>,
}

impl fmt::Debug for NodeAuthority {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("NodeAuthority")
            .field("store", &self.store.as_ref().map(Store::backend))
            .field("static_tokens", &self.static_tokens.len())
            .finish()
    }
}

impl NodeAuthority {
    /// Checks the store's nodes.
    pub fn from_store(store: Store) -> Self {
        Self {
            store: Some(store),
            static_tokens: HashMap::new(),
        }
    }

    /// Also accepts `token` for `node_id` (kept hashed).
    pub fn with_static_token(mut self, node_id: &str, token: &str) -> Self {
        self.static_tokens
            .insert(node_id.to_owned(), sha256_hex(token));
        self
    }

    /// Whether `token` authenticates `node_id`.
    ///
    /// # Errors
    /// [`StoreError`] when the store cannot be read (the caller refuses).
    pub async fn check(&self, node_id: &str, token: &str) -> Result<bool, StoreError> {
        if token.is_empty() {
            return Ok(false);
        }
        self.check_hash(node_id, &sha256_hex(token)).await
    }

    /// Whether the credential whose SHA-256 hex is `presented` (as
    /// [`NodeAuthority::check`] computes it) still authenticates `node_id`:
    /// the centre re-checks a live session with it, so a node disabled or
    /// removed in the store loses its session (§3.3 revoke).
    ///
    /// # Errors
    /// [`StoreError`] when the store cannot be read.
    pub async fn check_hash(&self, node_id: &str, presented: &str) -> Result<bool, StoreError> {
        if let Some(h) = self.static_tokens.get(node_id) {
            if hashes_match(presented, h) {
                return Ok(true);
            }
        }
        let Some(store) = &self.store else {
            return Ok(false);
        };
        Ok(match store.node_credential(node_id).await? {
            Some(row) if !row.disabled => hashes_match(presented, &row.credential_hash),
            _ => false,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::super::super::store::harness::on_every_backend;
    use super::super::super::store::StoreOptions;
    use super::*;
    use crate::model::NodeCredential;

    on_every_backend!(stored_nodes_authenticate_unless_disabled_or_removed);

    async fn stored_nodes_authenticate_unless_disabled_or_removed(db: String) {
        let store = Store::open(&db, StoreOptions::default()).await.unwrap();
        let cred = NodeCredential::new("edge-a", &[1; 32]).unwrap();
        let other = NodeCredential::new("edge-a", &[2; 32]).unwrap();
        store
            .add_node("edge-a", &cred.hash_hex(), 256)
            .await
            .unwrap();
        let auth = NodeAuthority::from_store(store.clone()).with_static_token("boot", "static-t");
        assert!(auth.check("edge-a", cred.expose()).await.unwrap());
        assert!(!auth.check("edge-a", other.expose()).await.unwrap());
        assert!(!auth.check("edge-b", cred.expose()).await.unwrap());
        assert!(!auth.check("edge-a", "").await.unwrap());
        assert!(auth.check("boot", "static-t").await.unwrap());
        assert!(!auth.check("boot", "static-x").await.unwrap());
        store.set_node_disabled("edge-a", true).await.unwrap();
        assert!(!auth.check("edge-a", cred.expose()).await.unwrap());
        store.set_node_disabled("edge-a", false).await.unwrap();
        assert!(auth.check("edge-a", cred.expose()).await.unwrap());
        store.remove_node("edge-a").await.unwrap();
        assert!(!auth.check("edge-a", cred.expose()).await.unwrap());
        assert!(!format!("{auth:?}").contains("static-t"));
        store.close().await;
    }
}
