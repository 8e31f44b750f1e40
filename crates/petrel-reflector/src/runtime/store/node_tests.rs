//! The centre's edge nodes on every backend (draarl-interconnect §3.3):
//! add, list, disable, remove, the `max_nodes` bound, the generated TLS
//! identity kept once, and the migration from schema 5 to 6.

use sqlx::Connection;

use super::harness::{self, on_every_backend};
use super::*;
use crate::model::NodeCredential;

on_every_backend!(
    nodes_are_added_listed_disabled_and_removed,
    the_node_table_is_bounded_by_max_nodes,
    the_generated_tls_identity_is_kept_once,
    schema_5_store_migrates_to_6_keeping_rows,
);

fn hash(node: &str, fill: u8) -> String {
    NodeCredential::new(node, &[fill; 32]).unwrap().hash_hex()
}

async fn nodes_are_added_listed_disabled_and_removed(db: String) {
    let s = Store::open(&db, harness::cheap_options()).await.unwrap();
    assert!(s.nodes().await.unwrap().is_empty());
    s.add_node("edge-b", &hash("edge-b", 2), 256).await.unwrap();
    s.add_node("edge-a", &hash("edge-a", 1), 256).await.unwrap();
    assert!(matches!(
        s.add_node("edge-a", &hash("edge-a", 3), 256).await,
        Err(StoreError::Duplicate(_))
    ));
    for bad in ["center", "a.b", ""] {
        assert!(matches!(
            s.add_node(bad, &hash("x", 1), 256).await,
            Err(StoreError::Invalid(_))
        ));
    }
    assert!(matches!(
        s.add_node("edge-c", "not-a-hash", 256).await,
        Err(StoreError::Invalid(_))
    ));
    let list = s.nodes().await.unwrap();
    let ids: Vec<_> = list.iter().map(|n| n.node_id.as_str()).collect();
    assert_eq!(ids, ["edge-a", "edge-b"]);
    assert!(list.iter().all(|n| !n.disabled && n.created_at_ms > 0));
    let row = s.node_credential("edge-a").await.unwrap().unwrap();
    assert_eq!(row.credential_hash, hash("edge-a", 1));
    assert!(!row.disabled);
    s.set_node_disabled("edge-a", true).await.unwrap();
    assert!(s.node_credential("edge-a").await.unwrap().unwrap().disabled);
    assert!(matches!(
        s.set_node_disabled("nope", true).await,
        Err(StoreError::NotFound(_))
    ));
    s.remove_node("edge-a").await.unwrap();
    assert!(s.node_credential("edge-a").await.unwrap().is_none());
    assert!(matches!(
        s.remove_node("edge-a").await,
        Err(StoreError::NotFound(_))
    ));
    s.close().await;
}

async fn the_node_table_is_bounded_by_max_nodes(db: String) {
    let s = Store::open(&db, harness::cheap_options()).await.unwrap();
    for n in ["n1", "n2"] {
        s.add_node(n, &hash(n, 1), 2).await.unwrap();
    }
    let e = s.add_node("n3", &hash("n3", 1), 2).await.unwrap_err();
    assert!(e.to_string().contains("max_nodes is 2"), "{e}");
    s.remove_node("n1").await.unwrap();
    s.add_node("n3", &hash("n3", 1), 2).await.unwrap();
    assert_eq!(s.nodes().await.unwrap().len(), 2);
    s.close().await;
}

async fn the_generated_tls_identity_is_kept_once(db: String) {
    let s = Store::open(&db, harness::cheap_options()).await.unwrap();
    assert_eq!(s.tls_identity().await.unwrap(), None);
    let first = s.tls_identity_or_insert("first").await.unwrap();
    assert_eq!(first, "first");
    assert_eq!(s.tls_identity_or_insert("second").await.unwrap(), "first");
    assert_eq!(s.tls_identity().await.unwrap().as_deref(), Some("first"));
    s.close().await;
}

async fn schema_5_store_migrates_to_6_keeping_rows(db: String) {
    let mut conn = harness::store_at_schema(&db, 5).await;
    sqlx::raw_sql(
        "INSERT INTO talkgroups (id, name, status, is_virtual) VALUES (999, 'Public', 1, 0);
         INSERT INTO users (id, name, callsign, status, approval_status) VALUES (7, 'old', 'OLD1', 1, 1);
         INSERT INTO settings (key, value) VALUES ('jwt_secret', 'kept-secret');",
    )
    .execute(&mut conn)
    .await
    .unwrap();
    conn.close().await.unwrap();
    let s = Store::open(&db, harness::cheap_options()).await.unwrap();
    assert_eq!(s.schema_version().await.unwrap(), 7);
    assert!(s.web_user_by_name("old").await.unwrap().is_some());
    assert_eq!(s.jwt_secret_or_insert("new").await.unwrap(), "kept-secret");
    assert!(s.nodes().await.unwrap().is_empty());
    s.add_node("edge-1", &hash("edge-1", 9), 256).await.unwrap();
    assert_eq!(s.nodes().await.unwrap().len(), 1);
    s.close().await;
}
