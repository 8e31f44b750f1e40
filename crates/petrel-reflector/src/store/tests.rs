use super::*;
use crate::codec::Mac;

const CHEAP: HashCost = HashCost {
    m_cost_kib: 64,
    t_cost: 1,
    p_cost: 1,
};

struct Temp(String);

impl Drop for Temp {
    fn drop(&mut self) {
        for ext in ["", "-wal", "-shm"] {
            let _ = std::fs::remove_file(format!("{}{ext}", self.0));
        }
    }
}

fn temp(name: &str) -> Temp {
    let p = std::env::temp_dir().join(format!("petrel-store-{}-{name}.db", std::process::id()));
    let t = Temp(p.to_string_lossy().into_owned());
    drop(Temp(t.0.clone()));
    t
}

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

#[tokio::test]
async fn fresh_store_migrates_once_and_has_the_public_group() {
    let t = temp("fresh");
    let s = Store::open(&t.0, opts()).await.unwrap();
    assert_eq!(s.schema_version().await.unwrap(), 3);
    s.close().await;
    let s = Store::open(&t.0, opts()).await.unwrap();
    assert_eq!(s.schema_version().await.unwrap(), 3);
    let d = s.load_directory().await.unwrap();
    let g = d.group(999).unwrap();
    assert!(g.enabled && !g.is_virtual);
    assert_eq!(d.domain_of(999).unwrap().id, 999);
}

#[tokio::test]
async fn users_groups_links_and_devices_round_trip() {
    let t = temp("roundtrip");
    let s = Store::open(&t.0, opts()).await.unwrap();
    let uid = s.add_user(&alice()).await.unwrap();
    assert!(
        matches!(s.add_user(&alice()).await, Err(StoreError::Db(_))),
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
    assert!(crate::session::verify_device_password(
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
    assert!(crate::session::verify_device_password(
        u.device_password_hash.as_deref().unwrap(),
        b"Newpass9"
    ));
}

#[tokio::test]
async fn device_config_reports_are_stored() {
    let t = temp("config");
    let s = Store::open(&t.0, opts()).await.unwrap();
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

#[tokio::test]
async fn text_history_is_kept_newest_first_and_pruned() {
    let t = temp("messages");
    let s = Store::open(&t.0, opts()).await.unwrap();
    let uid = s.add_user(&alice()).await.unwrap();
    for (ms, text) in [(1_000, "first"), (2_000, "second"), (3_000, "third")] {
        s.apply(&StoreEvent::Text {
            device: (uid, 7),
            group_id: 999,
            unix_ms: ms,
            text: text.into(),
        })
        .await
        .unwrap();
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
    assert_eq!(s.prune_messages(2_500).await.unwrap(), 2);
    assert_eq!(s.recent_messages(999, 10).await.unwrap().len(), 1);
}
