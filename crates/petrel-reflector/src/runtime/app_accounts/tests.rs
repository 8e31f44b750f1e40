//! [`AppAccounts`] as the [`AppAuthority`] of app sessions on every
//! backend (§2.2 steps 4–6, §2.3 "Initial routing", §3.4 rows 5–6,
//! correction 5), and its per-user preference cap.

use std::sync::Arc;

use super::*;
use crate::runtime::store::harness::on_every_backend;
use crate::runtime::store::{harness::cheap_options, NewUser, PreferenceKey, Store};

on_every_backend!(
    authorize_creates_sanitises_and_saves_the_preference,
    authorize_refuses_bad_tokens_and_users_in_order,
    change_routing_checks_existence_then_access_then_saves,
    preferences_are_capped_per_user_least_recent_first,
);

const SECRET: &[u8] = b"0123456789abcdef0123456789abcdef";
const IID: &str = "11111111-1111-4111-8111-111111111111";

fn user(name: &str, callsign: &str) -> NewUser {
    NewUser {
        name: name.into(),
        callsign: callsign.into(),
        dmrid: 0,
        device_password: "Secret12".into(),
        default_group_id: None,
    }
}

fn accounts(s: &Store, preferences_per_user: u32) -> AppAccounts {
    AppAccounts::new(
        s.clone(),
        SECRET,
        AccountLimits {
            refresh_tokens_per_user: 3,
            preferences_per_user,
            max_subscriptions: 16,
        },
        Arc::default(),
    )
}

fn request(a: &AppAccounts, name: &str, dev_model: u8) -> AppAuthRequest {
    AppAuthRequest {
        token: a
            .keys()
            .issue(name, "", crate::runtime::app_accounts::unix_s()),
        dev_model,
        client_instance_id: IID.into(),
    }
}

/// alice, with public groups 1001 and 1002, private group 2001 (alice a
/// verified member) and private group 2002 (no access).
async fn seeded(db: &str) -> Store {
    let s = Store::open(db, cheap_options()).await.unwrap();
    s.add_user(&user("alice", "BA1AAA")).await.unwrap();
    s.add_user(&user("bob", "BA1BBB")).await.unwrap();
    for (id, name) in [(1001, "A"), (1002, "B"), (2001, "P1"), (2002, "P2")] {
        s.add_group(name, false, Some(id)).await.unwrap();
    }
    s.set_group_access(2001, true, Some("bob")).await.unwrap();
    s.set_group_access(2002, true, Some("bob")).await.unwrap();
    s.set_group_member(2001, "alice", true).await.unwrap();
    s
}

async fn authorize_creates_sanitises_and_saves_the_preference(db: String) {
    let s = seeded(&db).await;
    let a = accounts(&s, 8);
    // No preference and no last group: TX 999, RX [999], and it is saved.
    let g = a.authorize(request(&a, "alice", 101)).await.unwrap();
    assert_eq!(g.routing, Routing::new(999, vec![]));
    assert_eq!(
        (g.user.username.as_str(), g.user.is_admin),
        ("alice", false)
    );
    let uid = g.user.user_id;
    assert_eq!(s.app_preference_count(uid).await.unwrap(), 1);
    // A saved routing with an inaccessible TX and RX: TX falls back to
    // the last group for the DevModel (enabled), inaccessible RX dropped.
    let user = app_user(&s.web_user_by_name("alice").await.unwrap().unwrap());
    let change = |tx, rx| RoutingChange {
        user: user.clone(),
        dev_model: 101,
        client_instance_id: IID.into(),
        requested: Routing::new(tx, rx),
    };
    a.change_routing(change(2001, vec![1001, 1002]))
        .await
        .unwrap();
    let g = a.authorize(request(&a, "alice", 101)).await.unwrap();
    assert_eq!(g.routing, Routing::new(2001, vec![1001, 1002]));
    s.remove_group_member(2001, "alice").await.unwrap();
    s.set_group_enabled(1002, false).await.unwrap();
    let g = a.authorize(request(&a, "alice", 101)).await.unwrap();
    // Last group 2001 is still enabled (status 1), so it is the fallback,
    // which always counts as usable.
    assert_eq!(g.routing, Routing::new(2001, vec![1001]));
    s.set_group_enabled(2001, false).await.unwrap();
    let g = a.authorize(request(&a, "alice", 101)).await.unwrap();
    assert_eq!(g.routing, Routing::new(999, vec![1001]));
    // The sanitised routing was saved.
    let stored = s
        .app_preference(&PreferenceKey {
            user_id: uid,
            dev_model: 101,
            client_instance_id: IID,
        })
        .await
        .unwrap()
        .unwrap();
    assert_eq!(stored.tx_group_id, 999);
    assert_eq!(stored.rx_group_ids, Some(vec![999, 1001]));
    // Another DevModel has its own preference and last group.
    let g = a.authorize(request(&a, "alice", 105)).await.unwrap();
    assert_eq!(g.routing, Routing::new(999, vec![]));
    // A stored routing over the subscription limit is unavailable.
    let big = Routing::new(1001, (1..=17).collect());
    let key = PreferenceKey {
        user_id: uid,
        dev_model: 102,
        client_instance_id: IID,
    };
    s.save_app_preference(&key, &big, 0, 8).await.unwrap();
    assert_eq!(
        a.authorize(request(&a, "alice", 102)).await,
        Err(AppReject::PreferenceUnavailable)
    );
    // Admins use private groups without membership.
    s.set_user_roles("alice", "admin").await.unwrap();
    s.set_group_enabled(2001, true).await.unwrap();
    let admin = AppUser {
        is_admin: true,
        ..user.clone()
    };
    let r = a
        .change_routing(RoutingChange {
            user: admin,
            ..change(2002, vec![])
        })
        .await
        .unwrap();
    assert_eq!(r, Routing::new(2002, vec![]));
    let g = a.authorize(request(&a, "alice", 101)).await.unwrap();
    assert!(g.user.is_admin);
    assert_eq!(g.routing, Routing::new(2002, vec![]));
    s.close().await;
}

async fn authorize_refuses_bad_tokens_and_users_in_order(db: String) {
    let s = seeded(&db).await;
    let a = accounts(&s, 8);
    let mut r = request(&a, "alice", 101);
    r.token.push('x');
    assert_eq!(a.authorize(r).await, Err(AppReject::InvalidToken));
    let other = AppAccounts::new(
        s.clone(),
        b"another-secret-another-secret-xx",
        a.limits(),
        Arc::default(),
    );
    assert_eq!(
        a.authorize(request(&other, "alice", 101)).await,
        Err(AppReject::InvalidToken)
    );
    assert_eq!(
        a.authorize(request(&a, "nobody", 101)).await,
        Err(AppReject::UserNotFound)
    );
    s.set_user_approval("alice", 0).await.unwrap();
    assert_eq!(
        a.authorize(request(&a, "alice", 101)).await,
        Err(AppReject::UserNotApproved)
    );
    // Admins are not exempt from approval here (§2.2 step 4).
    s.set_user_roles("alice", "admin").await.unwrap();
    assert_eq!(
        a.authorize(request(&a, "alice", 101)).await,
        Err(AppReject::UserNotApproved)
    );
    s.set_user_enabled("alice", false).await.unwrap();
    assert_eq!(
        a.authorize(request(&a, "alice", 101)).await,
        Err(AppReject::UserDisabled)
    );
    let stats = a.stats().snapshot();
    assert_eq!(
        (stats.app_logins_authorised, stats.app_logins_refused),
        (0, 6)
    );
    s.close().await;
}

async fn change_routing_checks_existence_then_access_then_saves(db: String) {
    let s = seeded(&db).await;
    let a = accounts(&s, 8);
    let bob = app_user(&s.web_user_by_name("bob").await.unwrap().unwrap());
    let alice = app_user(&s.web_user_by_name("alice").await.unwrap().unwrap());
    let change = |user: &AppUser, tx, rx| RoutingChange {
        user: user.clone(),
        dev_model: 105,
        client_instance_id: IID.into(),
        requested: Routing::new(tx, rx),
    };
    // Row 5 before row 6: a missing group wins over a forbidden one.
    assert_eq!(
        a.change_routing(change(&alice, 2002, vec![4242])).await,
        Err(RoutingReject::GroupNotFound)
    );
    assert_eq!(
        a.change_routing(change(&alice, 1001, vec![2002])).await,
        Err(RoutingReject::GroupForbidden)
    );
    // Owners use their private groups; verified members too.
    assert_eq!(
        a.change_routing(change(&bob, 2002, vec![2001])).await,
        Ok(Routing::new(2002, vec![2001]))
    );
    assert_eq!(
        a.change_routing(change(&alice, 1002, vec![2001])).await,
        Ok(Routing::new(1002, vec![2001]))
    );
    // Saved as the preference and as the DevModel's last group.
    assert_eq!(
        s.app_last_group(alice.user_id, 105).await.unwrap(),
        Some(1002)
    );
    let g = a.authorize(request(&a, "alice", 105)).await.unwrap();
    assert_eq!(g.routing, Routing::new(1002, vec![2001]));
    s.close().await;
}

async fn preferences_are_capped_per_user_least_recent_first(db: String) {
    let s = seeded(&db).await;
    let a = accounts(&s, 2);
    let ids = [
        "11111111-1111-4111-8111-000000000001",
        "11111111-1111-4111-8111-000000000002",
        "11111111-1111-4111-8111-000000000003",
    ];
    let uid = s.web_user_by_name("alice").await.unwrap().unwrap().id;
    // Two preferences used long ago, the first one least recently.
    for (at, iid) in [(1, ids[0]), (2, ids[1])] {
        let key = PreferenceKey {
            user_id: uid,
            dev_model: 101,
            client_instance_id: iid,
        };
        let evicted = s
            .save_app_preference(&key, &Routing::new(1001, vec![]), at, 2)
            .await
            .unwrap();
        assert_eq!(evicted, 0);
    }
    // A login from a third install evicts the least recently used.
    let mut r = request(&a, "alice", 101);
    r.client_instance_id = ids[2].into();
    a.authorize(r).await.unwrap();
    assert_eq!(s.app_preference_count(uid).await.unwrap(), 2);
    assert_eq!(a.stats().snapshot().preference_evictions, 1);
    let first = PreferenceKey {
        user_id: uid,
        dev_model: 101,
        client_instance_id: ids[0],
    };
    assert_eq!(s.app_preference(&first).await.unwrap(), None);
    s.close().await;
}
