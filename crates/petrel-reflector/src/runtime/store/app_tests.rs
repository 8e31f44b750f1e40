//! The app side of the store on every backend: refresh-token rotation and
//! bounds (§1.4), a new web password revoking the refresh tokens, and the
//! migration from schema 4 to 5.

use sqlx::Connection;

use super::harness::{self, on_every_backend};
use super::*;

on_every_backend!(
    refresh_tokens_rotate_once_and_are_capped,
    schema_4_store_migrates_to_5_keeping_rows,
    the_generated_jwt_secret_is_kept_once,
    a_new_web_password_revokes_refresh_tokens_and_changes_the_stamp,
);

fn user(name: &str, callsign: &str) -> NewUser {
    NewUser {
        name: name.into(),
        callsign: callsign.into(),
        dmrid: 0,
        device_password: "Secret12".into(),
        default_group_id: None,
    }
}

/// alice with public groups 1001 and 1002.
async fn seeded(db: &str) -> Store {
    let s = Store::open(db, harness::cheap_options()).await.unwrap();
    s.add_user(&user("alice", "BA1AAA")).await.unwrap();
    for (id, name) in [(1001, "A"), (1002, "B")] {
        s.add_group(name, false, Some(id)).await.unwrap();
    }
    s
}

async fn refresh_tokens_rotate_once_and_are_capped(db: String) {
    let s = seeded(&db).await;
    let uid = s.web_user_by_name("alice").await.unwrap().unwrap().id;
    let token = |hash: &str, at: i64| NewRefreshToken {
        hash: hash.into(),
        user_id: uid,
        created_at_ms: at,
        expires_at_ms: at + 1000,
        ip: "127.0.0.1".into(),
        user_agent: "test".into(),
    };
    s.insert_refresh_token(&token("a", 100), 3).await.unwrap();
    assert_eq!(
        s.refresh_token_state("a", 100).await.unwrap(),
        RefreshTokenState::Valid { user_id: uid }
    );
    assert!(s
        .rotate_refresh_token("a", &token("b", 200), 3)
        .await
        .unwrap()
        .is_some());
    // The loser of a second rotation stores nothing.
    assert!(s
        .rotate_refresh_token("a", &token("c", 200), 3)
        .await
        .unwrap()
        .is_none());
    assert_eq!(
        s.refresh_token_state("a", 200).await.unwrap(),
        RefreshTokenState::Revoked {
            user_id: uid,
            rotated: true
        }
    );
    assert_eq!(
        s.refresh_token_state("c", 200).await.unwrap(),
        RefreshTokenState::Unknown
    );
    assert_eq!(
        s.refresh_token_state("b", 1200).await.unwrap(),
        RefreshTokenState::Expired { user_id: uid }
    );
    // The per-user cap evicts the oldest rows; expired rows are pruned.
    for (i, h) in ["d", "e", "f"].iter().enumerate() {
        let c = s
            .insert_refresh_token(&token(h, 300 + i as i64), 3)
            .await
            .unwrap();
        assert_eq!(c.pruned, 0);
        if i == 1 {
            assert_eq!(c.evicted, 1);
        }
    }
    assert_eq!(s.refresh_token_count(uid).await.unwrap(), 3);
    assert_eq!(
        s.refresh_token_state("b", 300).await.unwrap(),
        RefreshTokenState::Unknown
    );
    let c = s.insert_refresh_token(&token("g", 5000), 3).await.unwrap();
    assert_eq!(c.pruned, 3);
    assert_eq!(s.revoke_user_refresh_tokens(uid, 5000).await.unwrap(), 1);
    s.close().await;
}

async fn schema_4_store_migrates_to_5_keeping_rows(db: String) {
    let mut conn = harness::store_at_schema(&db, 4).await;
    sqlx::raw_sql(
        "INSERT INTO talkgroups (id, name, status, is_virtual) VALUES (999, 'Public', 1, 0);
         INSERT INTO users (id, name, callsign, status, approval_status) VALUES (7, 'old', 'OLD1', 1, 1);
         INSERT INTO devices (owner_id, ssid, group_id) VALUES (7, 1, 999);",
    )
    .execute(&mut conn)
    .await
    .unwrap();
    sqlx::query("INSERT INTO messages (sent_at_ms, owner_id, ssid, group_id, text) VALUES (5, 7, 1, 999, $1)")
        .bind(b"hi".to_vec())
        .execute(&mut conn)
        .await
        .unwrap();
    conn.close().await.unwrap();
    let s = Store::open(&db, harness::cheap_options()).await.unwrap();
    assert_eq!(s.schema_version().await.unwrap(), 7);
    let u = s.web_user_by_name("old").await.unwrap().unwrap();
    assert_eq!(
        (u.id, u.callsign.as_str(), u.roles.as_str()),
        (7, "OLD1", "user")
    );
    assert_eq!((u.status, u.approval_status, u.password_hash), (1, 1, None));
    let groups = s.app_groups(7, &[999]).await.unwrap();
    assert!(
        groups[&999].facts().usable_by(false),
        "existing groups stay public"
    );
    assert_eq!(s.group_device_totals().await.unwrap()[&999], 1);
    let msgs = s.group_messages(999, None, 10).await.unwrap();
    assert_eq!((msgs.len(), msgs[0].text.as_slice()), (1, &b"hi"[..]));
    s.set_web_password("old", "new-web-pw").await.unwrap();
    assert!(s
        .web_user_by_name("old")
        .await
        .unwrap()
        .unwrap()
        .password_hash
        .is_some());
    s.close().await;
}

async fn the_generated_jwt_secret_is_kept_once(db: String) {
    let s = Store::open(&db, harness::cheap_options()).await.unwrap();
    let first = s
        .jwt_secret_or_insert("first-generated-secret")
        .await
        .unwrap();
    assert_eq!(first, "first-generated-secret");
    let again = s
        .jwt_secret_or_insert("second-generated-secret")
        .await
        .unwrap();
    assert_eq!(again, first);
    s.close().await;
}

async fn a_new_web_password_revokes_refresh_tokens_and_changes_the_stamp(db: String) {
    let s = seeded(&db).await;
    s.add_user(&user("bob", "BA1BBB")).await.unwrap();
    let id = |name: &'static str| {
        let s = &s;
        async move { s.web_user_by_name(name).await.unwrap().unwrap().id }
    };
    let (alice, bob) = (id("alice").await, id("bob").await);
    let before = s.web_password_stamps().await.unwrap();
    assert_eq!((before[&alice], before[&bob]), (0, 0));
    s.set_web_password("alice", "web-pass-1").await.unwrap();
    for (hash, user_id) in [("a", alice), ("b", bob)] {
        let t = NewRefreshToken {
            hash: hash.into(),
            user_id,
            created_at_ms: 100,
            expires_at_ms: i64::MAX / 2,
            ip: "127.0.0.1".into(),
            user_agent: "test".into(),
        };
        s.insert_refresh_token(&t, 20).await.unwrap();
    }
    let set = s.web_password_stamps().await.unwrap();
    assert_ne!(set[&alice], 0);
    s.set_web_password("alice", "web-pass-2").await.unwrap();
    let changed = s.web_password_stamps().await.unwrap();
    assert!(changed[&alice] != set[&alice] && changed[&bob] == 0);
    assert!(matches!(
        s.refresh_token_state("a", 200).await.unwrap(),
        RefreshTokenState::Revoked { .. }
    ));
    assert_eq!(
        s.refresh_token_state("b", 200).await.unwrap(),
        RefreshTokenState::Valid { user_id: bob }
    );
    s.close().await;
}
