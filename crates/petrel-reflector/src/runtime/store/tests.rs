use super::harness::{on_every_backend, run};
use super::*;
use crate::codec::{Mac, Tlv};
use crate::model::{DeviceRecord, StoreEvent};

on_every_backend!(
    fresh_store_migrates_once_and_has_the_public_group,
    users_groups_links_and_devices_round_trip,
    device_config_reports_are_stored,
    text_history_is_kept_newest_first_and_pruned,
    recordings_are_listed_newest_first,
    group_ids_follow_the_highest_in_use,
    a_duplicate_says_which_value_is_taken,
    text_history_is_pruned_oldest_first_with_bytes,
    oldest_recordings_come_first_and_rows_delete,
    a_device_group_must_be_a_talkgroup,
);

const CHEAP: HashCost = HashCost {
    m_cost_kib: 64,
    t_cost: 1,
    p_cost: 1,
};

fn opts() -> StoreOptions {
    StoreOptions {
        hash_cost: CHEAP,
        ..StoreOptions::default()
    }
}

fn alice() -> NewUser {
    NewUser {
        name: "alice".into(),
        callsign: "BA1AAA".into(),
        dmrid: 4_600_001,
        device_password: "Secret12".into(),
        default_group_id: None,
    }
}

/// Stores `text` from device 7 of user `uid` in group 999 at `unix_ms`.
async fn store_text(s: &Store, uid: i64, unix_ms: i64, text: &[u8]) {
    s.apply(&StoreEvent::Text {
        device: (uid, 7),
        group_id: 999,
        unix_ms,
        text: text.to_vec(),
    })
    .await
    .unwrap();
}

async fn fresh_store_migrates_once_and_has_the_public_group(db: String) {
    let s = Store::open(&db, opts()).await.unwrap();
    assert_eq!(s.schema_version().await.unwrap(), 7);
    s.close().await;
    let s = Store::open(&db, opts()).await.unwrap();
    assert_eq!(s.schema_version().await.unwrap(), 7);
    let d = s.load_directory().await.unwrap();
    let g = d.group(999).unwrap();
    assert!(g.enabled && !g.is_virtual);
    assert_eq!(d.domain_of(999).unwrap().id, 999);
}

async fn users_groups_links_and_devices_round_trip(db: String) {
    let s = Store::open(&db, opts()).await.unwrap();
    let uid = s.add_user(&alice()).await.unwrap();
    assert!(
        matches!(s.add_user(&alice()).await, Err(StoreError::Duplicate(_))),
        "duplicate name accepted"
    );
    let mut bad = alice();
    bad.name = "x".into();
    bad.callsign = "X".into();
    bad.device_password = "short".into();
    assert!(matches!(
        s.add_user(&bad).await,
        Err(StoreError::Password(_))
    ));

    let a = s.add_group("a", false, None).await.unwrap();
    let b = s.add_group("b", false, None).await.unwrap();
    let v = s.add_group("net", true, Some(50)).await.unwrap();
    assert_eq!(v, 50);
    s.link_groups(v, a).await.unwrap();
    s.link_groups(v, b).await.unwrap();
    assert!(matches!(
        s.link_groups(a, b).await,
        Err(StoreError::Invalid(_))
    ));
    assert!(matches!(
        s.link_groups(12345, b).await,
        Err(StoreError::NotFound(_))
    ));

    s.set_device_group("alice", 7, a).await.unwrap();
    assert!(matches!(
        s.set_device_group("alice", 101, a).await,
        Err(StoreError::Invalid(_))
    ));
    assert!(matches!(
        s.set_device_group("nobody", 7, a).await,
        Err(StoreError::NotFound(_))
    ));
    s.set_device_bans("alice", 7, true, false).await.unwrap();

    // A login upsert updates model and MAC but not the admin-owned group or bans.
    let rec = DeviceRecord {
        owner_id: uid,
        ssid: 7,
        dev_model: 2,
        dmrid: 4_600_001,
        group_id: 999,
        disable_send: false,
        disable_recv: false,
        mac: Some(Mac([2, 0x42, 0, 0, 0, 1])),
    };
    s.apply(&StoreEvent::DeviceUpsert(rec)).await.unwrap();
    let d = s.load_directory().await.unwrap();
    let u = d.user_by_name("alice").unwrap();
    assert_eq!((u.callsign.as_str(), u.default_group_id), ("BA1AAA", 999));
    assert!(crate::model::verify_device_password(
        u.device_password_hash.as_deref().unwrap(),
        b"Secret12"
    ));
    let dev = d.device(uid, 7).unwrap();
    assert_eq!(
        (dev.group_id, dev.dev_model, dev.disable_send),
        (a, 2, true)
    );
    assert_eq!(dev.mac, Some(Mac([2, 0x42, 0, 0, 0, 1])));
    assert_eq!(&*d.domain_of(b).unwrap().groups, &[50, a, b]);

    s.apply(&StoreEvent::DeviceGroup {
        device: (uid, 7),
        group_id: b,
    })
    .await
    .unwrap();
    s.set_group_enabled(v, false).await.unwrap();
    let d = s.load_directory().await.unwrap();
    assert_eq!(d.device(uid, 7).unwrap().group_id, b);
    assert_eq!(&*d.domain_of(b).unwrap().groups, &[b]);

    s.set_device_password("alice", "Newpass9").await.unwrap();
    s.set_user_enabled("alice", false).await.unwrap();
    let d = s.load_directory().await.unwrap();
    let u = d.user_by_name("alice").unwrap();
    assert!(!u.enabled);
    assert!(crate::model::verify_device_password(
        u.device_password_hash.as_deref().unwrap(),
        b"Newpass9"
    ));
}

async fn device_config_reports_are_stored(db: String) {
    let s = Store::open(&db, opts()).await.unwrap();
    let uid = s.add_user(&alice()).await.unwrap();
    let items = vec![
        Tlv {
            tag: 0x05,
            value: vec![3],
        },
        Tlv {
            tag: 0x01,
            value: 439_000_000u64.to_be_bytes().to_vec(),
        },
    ];
    s.apply(&StoreEvent::DeviceConfig {
        device: (uid, 1),
        items: items.clone(),
    })
    .await
    .unwrap();
    let mut want = items;
    want.sort_by_key(|t| t.tag);
    assert_eq!(s.device_config(uid, 1).await.unwrap(), want);
}

async fn text_history_is_kept_newest_first_and_pruned(db: String) {
    let s = Store::open(&db, opts()).await.unwrap();
    let uid = s.add_user(&alice()).await.unwrap();
    for (ms, text) in [(1_000, "first"), (2_000, "second"), (3_000, "third")] {
        store_text(&s, uid, ms, text.as_bytes()).await;
    }
    let got = s.recent_messages(999, 2).await.unwrap();
    assert_eq!(
        got,
        vec![
            (3_000, "alice".to_owned(), 7, b"third".to_vec()),
            (2_000, "alice".to_owned(), 7, b"second".to_vec()),
        ]
    );
    assert!(s.recent_messages(1, 10).await.unwrap().is_empty());
    assert_eq!(s.prune_messages(2_500).await.unwrap().rows, 2);
    assert_eq!(s.recent_messages(999, 10).await.unwrap().len(), 1);
}

async fn recordings_are_listed_newest_first(db: String) {
    let s = Store::open(&db, opts()).await.unwrap();
    let uid = s.add_user(&alice()).await.unwrap();
    for (ms, path) in [(5_000, "2026/01/01/b.raw"), (1_000, "2026/01/01/a.raw")] {
        let r = crate::model::Recording {
            device: (uid, 7),
            group_id: 999,
            started_unix_ms: ms,
            frames: vec![vec![0; 20]; 10],
        };
        s.add_recording(&r, path, 1234).await.unwrap();
    }
    let got = s.recent_recordings(999, 10).await.unwrap();
    assert_eq!(
        got,
        vec![
            ("2026/01/01/b.raw".to_owned(), 600),
            ("2026/01/01/a.raw".to_owned(), 600),
        ]
    );
    assert_eq!(s.recent_recordings(999, 1).await.unwrap().len(), 1);
    assert!(s.recent_recordings(1, 10).await.unwrap().is_empty());
}

async fn group_ids_follow_the_highest_in_use(db: String) {
    let s = Store::open(&db, opts()).await.unwrap();
    assert_eq!(s.add_group("next", false, None).await.unwrap(), 1000);
    assert_eq!(s.add_group("fixed", false, Some(5000)).await.unwrap(), 5000);
    assert_eq!(s.add_group("after", true, None).await.unwrap(), 5001);
    assert!(matches!(
        s.add_group("clash", false, Some(5000)).await,
        Err(StoreError::Duplicate(_))
    ));
    assert!(matches!(
        s.add_group("zero", false, Some(0)).await,
        Err(StoreError::Invalid(_))
    ));
}

/// Which unique value a duplicate hit is read from the backend's error
/// (SQLite's message, PostgreSQL's constraint name).
async fn a_duplicate_says_which_value_is_taken(db: String) {
    let s = Store::open(&db, opts()).await.unwrap();
    s.add_user(&alice()).await.unwrap();
    let duplicate = |r: Result<i64, StoreError>| match r {
        Err(StoreError::Duplicate(message)) => message,
        other => panic!("{other:?}"),
    };
    // Name and callsign both taken: the name is reported.
    assert_eq!(
        duplicate(s.add_user(&alice()).await),
        r#"a user named "alice" already exists"#
    );
    let mut same_callsign = alice();
    same_callsign.name = "bob".into();
    assert_eq!(
        duplicate(s.add_user(&same_callsign).await),
        r#"callsign "BA1AAA" is taken"#
    );
    let mut same_name = alice();
    same_name.callsign = "BA2BBB".into();
    assert_eq!(
        duplicate(s.add_user(&same_name).await),
        r#"a user named "alice" already exists"#
    );
    s.add_group("Test", false, None).await.unwrap();
    assert_eq!(
        duplicate(s.add_group("Test", false, None).await),
        r#"a group named "Test" already exists"#
    );
    assert_eq!(
        duplicate(s.add_group("Other", false, Some(999)).await),
        "group id 999 is taken"
    );
    s.close().await;
}

#[tokio::test]
async fn open_errors_name_the_location_without_its_password() {
    let err = Store::open("postgres://petrel:hunter2@127.0.0.1:1/db", opts())
        .await
        .unwrap_err();
    let text = err.to_string();
    assert!(matches!(err, StoreError::Open { .. }), "{err:?}");
    assert!(
        text.contains("postgres://petrel:***@127.0.0.1:1/db"),
        "{text}"
    );
    assert!(!text.contains("hunter2"), "{text}");
    assert!(!format!("{err:?}").contains("hunter2"), "{err:?}");
}

/// PostgreSQL only: SQLite is embedded, one server per file. The four
/// opens interleave at every await, so each waits on the others' lock.
#[tokio::test]
async fn concurrent_first_opens_on_postgres_migrate_once() {
    run(
        Backend::Postgres,
        "concurrent_open",
        |db: String| async move {
            let open = || Store::open(&db, opts());
            let all = tokio::join!(open(), open(), open(), open());
            for s in [all.0, all.1, all.2, all.3] {
                let s = s.unwrap();
                assert_eq!(s.schema_version().await.unwrap(), 7);
                s.close().await;
            }
        },
    )
    .await;
}

async fn text_history_is_pruned_oldest_first_with_bytes(db: String) {
    let s = Store::open(&db, opts()).await.unwrap();
    let uid = s.add_user(&alice()).await.unwrap();
    // Same timestamp for the first two: insertion order breaks the tie.
    for (ms, text) in [
        (1_000, "aaaa"),
        (1_000, "bb"),
        (2_000, "cccccc"),
        (500, "d"),
    ] {
        store_text(&s, uid, ms, text.as_bytes()).await;
    }
    assert_eq!(s.text_bytes().await.unwrap(), 13);
    // "d" (1 byte) is not enough, "d" and "aaaa" are.
    let p = s.prune_oldest_messages(3).await.unwrap();
    assert_eq!((p.rows, p.bytes), (2, 5));
    let left: Vec<Vec<u8>> = s
        .recent_messages(999, 10)
        .await
        .unwrap()
        .into_iter()
        .map(|m| m.3)
        .collect();
    assert_eq!(left, vec![b"cccccc".to_vec(), b"bb".to_vec()]);
    assert_eq!(s.text_bytes().await.unwrap(), 8);
    let p = s.prune_messages(1_500).await.unwrap();
    assert_eq!((p.rows, p.bytes), (1, 2));
    assert_eq!(s.prune_oldest_messages(10).await.unwrap().rows, 1);
    assert_eq!(s.text_bytes().await.unwrap(), 0);
    // A backlog larger than one batch (256) goes in one call.
    for ms in 0..600 {
        store_text(&s, uid, ms, b"xy").await;
    }
    let p = s.prune_messages(550).await.unwrap();
    assert_eq!((p.rows, p.bytes), (550, 1100));
    assert_eq!(s.text_bytes().await.unwrap(), 100);
}

async fn oldest_recordings_come_first_and_rows_delete(db: String) {
    let s = Store::open(&db, opts()).await.unwrap();
    let uid = s.add_user(&alice()).await.unwrap();
    for (ms, path, bytes) in [
        (5_000, "b.raw", 300),
        (1_000, "a.raw", 200),
        (9_000, "c.raw", 100),
    ] {
        let r = crate::model::Recording {
            device: (uid, 7),
            group_id: 999,
            started_unix_ms: ms,
            frames: vec![vec![0; 20]; 10],
        };
        s.add_recording(&r, path, bytes).await.unwrap();
    }
    assert_eq!(s.recording_bytes().await.unwrap(), 600);
    let old = s.oldest_recordings(2).await.unwrap();
    let paths: Vec<(&str, u64)> = old.iter().map(|r| (r.path.as_str(), r.bytes)).collect();
    assert_eq!(paths, vec![("a.raw", 200), ("b.raw", 300)]);
    s.delete_recording(old[0].id).await.unwrap();
    assert_eq!(s.recording_bytes().await.unwrap(), 400);
    assert_eq!(s.oldest_recordings(10).await.unwrap()[0].path, "b.raw");
}

async fn a_device_group_must_be_a_talkgroup(db: String) {
    let s = Store::open(&db, opts()).await.unwrap();
    let uid = s.add_user(&alice()).await.unwrap();
    let a = s.add_group("a", false, None).await.unwrap();
    s.set_device_group("alice", 7, a).await.unwrap();
    for missing in [i64::MAX, a + 1, -1] {
        match s.set_device_group("alice", 7, missing).await {
            Err(StoreError::NotFound(what)) => assert_eq!(what, format!("group {missing}")),
            other => panic!("group {missing}: {other:?}"),
        }
        // Neither an existing device nor a new one is written.
        assert!(matches!(
            s.set_device_group("alice", 8, missing).await,
            Err(StoreError::NotFound(_))
        ));
    }
    // 0 is "ungrouped", not a talkgroup, and always allowed.
    s.set_device_group("alice", 9, 0).await.unwrap();
    let d = s.load_directory().await.unwrap();
    assert_eq!(d.device(uid, 7).unwrap().group_id, a);
    assert!(d.device(uid, 8).is_none());
    assert_eq!(d.device(uid, 9).unwrap().group_id, 0);
    s.close().await;
}
