//! The centre's device-session entries on every backend
//! (draarl-interconnect §3.9, §6.2): put, offline, conditional clear, the
//! load limit, and the migration from schema 6 to 7.

use sqlx::Connection;

use super::harness::{self, on_every_backend};
use super::*;
use crate::model::{SessionEntryRecord, SessionEntryWrite, StoreEvent};

on_every_backend!(
    entries_are_put_marked_offline_and_cleared,
    schema_6_store_migrates_to_7_keeping_nodes,
);

fn entry(owner_id: i64, ssid: u8, node: &str, control_session: u64) -> SessionEntryRecord {
    SessionEntryRecord {
        owner_id,
        ssid,
        device_id: owner_id * 256 + i64::from(ssid),
        node_id: node.into(),
        control_session,
        offline_since_ms: 0,
    }
}

async fn put(s: &Store, w: SessionEntryWrite) {
    s.apply(&StoreEvent::SessionEntry(w)).await.unwrap();
}

async fn entries_are_put_marked_offline_and_cleared(db: String) {
    let s = Store::open(&db, harness::cheap_options()).await.unwrap();
    // A control session id above i64::MAX survives the signed column.
    let big = u64::MAX - 5;
    put(&s, SessionEntryWrite::Put(entry(7, 1, "edge-a", big))).await;
    put(&s, SessionEntryWrite::Put(entry(7, 2, "edge-a", 11))).await;
    put(&s, SessionEntryWrite::Put(entry(8, 1, "edge-b", 12))).await;
    // Re-activation elsewhere replaces the row.
    put(&s, SessionEntryWrite::Put(entry(7, 2, "edge-b", 12))).await;
    let all = s.session_entries(100).await.unwrap();
    assert_eq!(
        all,
        vec![
            entry(7, 1, "edge-a", big),
            entry(7, 2, "edge-b", 12),
            entry(8, 1, "edge-b", 12)
        ]
    );
    put(
        &s,
        SessionEntryWrite::Offline {
            node_id: "edge-b".into(),
            control_session: 12,
            at_ms: 5_000,
        },
    )
    .await;
    let all = s.session_entries(100).await.unwrap();
    assert_eq!(all[0].offline_since_ms, 0, "other node untouched");
    assert_eq!(all[1].offline_since_ms, 5_000);
    assert_eq!(all[2].offline_since_ms, 5_000);
    // A clear naming another control session leaves the row alone.
    put(
        &s,
        SessionEntryWrite::Clear {
            owner_id: 7,
            ssid: 1,
            node_id: "edge-a".into(),
            control_session: 1,
        },
    )
    .await;
    assert_eq!(s.session_entries(100).await.unwrap().len(), 3);
    put(
        &s,
        SessionEntryWrite::Clear {
            owner_id: 7,
            ssid: 1,
            node_id: "edge-a".into(),
            control_session: big,
        },
    )
    .await;
    let all = s.session_entries(100).await.unwrap();
    assert_eq!(all.len(), 2);
    assert_eq!(s.session_entries(1).await.unwrap().len(), 1, "limit");
    s.close().await;
}

async fn schema_6_store_migrates_to_7_keeping_nodes(db: String) {
    let mut conn = harness::store_at_schema(&db, 6).await;
    sqlx::raw_sql(
        "INSERT INTO talkgroups (id, name, status, is_virtual) VALUES (999, 'Public', 1, 0);
         INSERT INTO interconnect_nodes (node_id, credential_hash, disabled, created_at_ms)
           VALUES ('edge-1', '00', 0, 1);",
    )
    .execute(&mut conn)
    .await
    .unwrap();
    conn.close().await.unwrap();
    let s = Store::open(&db, harness::cheap_options()).await.unwrap();
    assert_eq!(s.schema_version().await.unwrap(), 7);
    assert_eq!(s.nodes().await.unwrap().len(), 1);
    assert!(s.session_entries(10).await.unwrap().is_empty());
    put(&s, SessionEntryWrite::Put(entry(1, 3, "edge-1", 42))).await;
    assert_eq!(
        s.session_entries(10).await.unwrap(),
        vec![entry(1, 3, "edge-1", 42)]
    );
    s.close().await;
}
