//! Adding an edge node at the centre (draarl-interconnect §3.3, admin
//! side; `petrel reflector edge add`): a node id (given or `edge-` + 24
//! hex), a long-term credential from 32 random bytes stored only as its
//! SHA-256 hex, and the node token to hand the edge, pinning the centre's
//! certificate (format in [`crate::model::NodeToken`]'s module).

use rand::rngs::OsRng;
use rand::RngCore;

use super::super::store::{Store, StoreError};
use super::identity::{centre_identity, IdentityError};
use crate::model::{
    generated_node_name, InterconnectConfig, NodeCredential, NodeCredentialError, NodeToken,
};

/// Why a node could not be added.
#[derive(Debug, thiserror::Error)]
pub enum EnrolError {
    /// The name is not a valid node id.
    #[error(transparent)]
    Name(#[from] NodeCredentialError),
    /// The centre's certificate could not be read or made.
    #[error(transparent)]
    Identity(#[from] IdentityError),
    /// The store refused (duplicate, `max_nodes`, database).
    #[error(transparent)]
    Store(#[from] StoreError),
}

/// Adds a node named `name` (or a generated `edge-…` id) to the store and
/// returns its token, pinned to the certificate `cfg` makes the centre
/// present. The token is returned once and stored nowhere.
///
/// # Errors
/// [`EnrolError`].
pub async fn add_edge_node(
    store: &Store,
    name: Option<&str>,
    cfg: &InterconnectConfig,
) -> Result<NodeToken, EnrolError> {
    let node_id = match name {
        Some(n) => n.to_owned(),
        None => {
            let mut random = [0u8; 12];
            OsRng.fill_bytes(&mut random);
            generated_node_name(&random)
        }
    };
    let mut secret = [0u8; 32];
    OsRng.fill_bytes(&mut secret);
    let credential = NodeCredential::new(&node_id, &secret)?;
    let pin = centre_identity(cfg, store).await?.fingerprint();
    store
        .add_node(&node_id, &credential.hash_hex(), cfg.max_nodes)
        .await?;
    Ok(NodeToken {
        credential,
        pin: Some(pin),
    })
}
