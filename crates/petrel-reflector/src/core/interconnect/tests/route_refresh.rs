//! A directory reload's effect on the sessions the edges own
//! (draarl-interconnect §3.8): group moves and bans become upserts, an
//! account that is gone, disabled or not approved is revoked, and an
//! unchanged route produces nothing.

use crate::codec::interconnect::messages::DeviceRoute;
use crate::model::{DeviceRecord, Directory, GroupRecord, UserRecord};

use super::super::*;
use super::node;

fn user(id: i64, name: &str, enabled: bool, approved: bool) -> UserRecord {
    UserRecord {
        id,
        name: name.to_owned(),
        callsign: format!("BA{id}"),
        dmrid: 4_600_000 + u32::try_from(id).unwrap(),
        enabled,
        approved,
        device_password_hash: None,
        default_group_id: 0,
    }
}

fn group(id: i64) -> GroupRecord {
    GroupRecord {
        id,
        name: format!("g{id}"),
        enabled: true,
        is_virtual: false,
    }
}

fn device(owner_id: i64, group_id: i64) -> DeviceRecord {
    DeviceRecord {
        owner_id,
        ssid: 1,
        dev_model: 2,
        dmrid: 0,
        group_id,
        disable_send: false,
        disable_recv: false,
        mac: None,
    }
}

fn directory(users: Vec<UserRecord>, devices: Vec<DeviceRecord>) -> Directory {
    Directory::new(users, vec![group(5), group(6)], vec![], devices)
}

fn session(owner_id: i64, session_id: u64) -> OwnedSession {
    OwnedSession {
        identity: DeviceIdentity { owner_id, ssid: 1 },
        control: ControlRef {
            node: node("edge-a"),
            control_session: 77,
        },
        session_id,
        session_epoch: 3,
        expires_at_ms: 0,
    }
}

/// The route granted for `owner_id`'s device under `dir`.
fn granted(dir: &Directory, owner_id: i64, session_id: u64) -> (OwnedSession, DeviceRoute) {
    let s = session(owner_id, session_id);
    let rec = dir.device(owner_id, 1).unwrap();
    let route = device_route(
        dir.user(owner_id).unwrap(),
        rec,
        wire_domain(dir, rec.group_id),
        &s,
    );
    (s, route)
}

#[test]
fn an_unchanged_directory_changes_nothing() {
    let dir = directory(vec![user(1, "alice", true, true)], vec![device(1, 5)]);
    let sessions = vec![granted(&dir, 1, 10)];
    assert!(refresh_routes(&dir, &sessions).is_empty());
}

#[test]
fn a_group_move_is_an_upsert_that_ends_the_lease() {
    let before = directory(vec![user(1, "alice", true, true)], vec![device(1, 5)]);
    let sessions = vec![granted(&before, 1, 10)];
    let after = directory(vec![user(1, "alice", true, true)], vec![device(1, 6)]);
    let changes = refresh_routes(&after, &sessions);
    let [RouteRefresh::Upsert {
        session,
        route,
        lease_ends,
    }] = changes.as_slice()
    else {
        panic!("{changes:?}");
    };
    assert_eq!(*session, sessions[0].0);
    assert_eq!((route.group_id, route.domain_id), (6, 6));
    // Id and epoch are kept: the edge applies it to the live grant.
    assert_eq!((route.session_id, route.session_epoch), (10, 3));
    assert!(lease_ends);
}

#[test]
fn bans_and_a_new_callsign_are_upserts() {
    let before = directory(vec![user(1, "alice", true, true)], vec![device(1, 5)]);
    let sessions = vec![granted(&before, 1, 10)];
    // A receive ban keeps the lease.
    let mut rec = device(1, 5);
    rec.disable_recv = true;
    let after = directory(vec![user(1, "alice", true, true)], vec![rec.clone()]);
    let changes = refresh_routes(&after, &sessions);
    assert!(matches!(
        changes.as_slice(),
        [RouteRefresh::Upsert { route, lease_ends: false, .. }] if route.disable_recv
    ));
    // A send ban ends it.
    rec.disable_send = true;
    let after = directory(vec![user(1, "alice", true, true)], vec![rec]);
    let changes = refresh_routes(&after, &sessions);
    assert!(matches!(
        changes.as_slice(),
        [RouteRefresh::Upsert { route, lease_ends: true, .. }] if route.disable_send
    ));
    let mut renamed = user(1, "alice", true, true);
    renamed.callsign = "BA9ZZ".to_owned();
    let after = directory(vec![renamed], vec![device(1, 5)]);
    let changes = refresh_routes(&after, &sessions);
    assert!(matches!(
        changes.as_slice(),
        [RouteRefresh::Upsert { route, lease_ends: false, .. }] if route.callsign == "BA9ZZ"
    ));
}

#[test]
fn accounts_that_lost_their_rights_are_revoked() {
    let before = directory(
        vec![
            user(1, "alice", true, true),
            user(2, "bob", true, true),
            user(3, "carol", true, true),
            user(4, "dave", true, true),
        ],
        vec![device(1, 5), device(2, 5), device(3, 5), device(4, 5)],
    );
    let sessions: Vec<_> = (1..=4)
        .map(|id| granted(&before, id, 10 + u64::try_from(id).unwrap()))
        .collect();
    let after = directory(
        vec![
            user(1, "alice", false, true),
            user(2, "bob", true, false),
            user(4, "dave", true, true),
        ],
        vec![device(1, 5), device(2, 5), device(3, 5), device(4, 5)],
    );
    let changes = refresh_routes(&after, &sessions);
    let revoked: Vec<(u64, i64, &str)> = changes
        .iter()
        .map(|c| match c {
            RouteRefresh::Revoke {
                session,
                device_id,
                reason,
            } => (session.session_id, *device_id, *reason),
            RouteRefresh::Upsert { .. } => panic!("{c:?}"),
        })
        .collect();
    assert_eq!(
        revoked,
        vec![
            (11, device_id((1, 1)), session_error::USER_DISABLED),
            (12, device_id((2, 1)), session_error::USER_UNAPPROVED),
            (13, device_id((3, 1)), session_error::USER_DELETED),
        ]
    );
}

#[test]
fn a_session_without_a_device_record_keeps_its_route() {
    let before = directory(vec![user(1, "alice", true, true)], vec![device(1, 5)]);
    let sessions = vec![granted(&before, 1, 10)];
    let after = directory(vec![user(1, "alice", true, true)], vec![]);
    assert!(refresh_routes(&after, &sessions).is_empty());
}

#[test]
fn a_revoke_names_its_reason_and_session() {
    let mut ids = MessageIds::default();
    let s = session(1, 10);
    let msg =
        DeviceOwners::revoke_with_reason(&mut ids, 99, &s, 256 + 1, session_error::USER_DISABLED);
    let text = String::from_utf8_lossy(&msg.payload).into_owned();
    assert!(text.contains("\"reason\":\"user_disabled\""), "{text}");
    assert!(text.contains("\"session_id\":10"), "{text}");
    assert!(text.contains("\"session_epoch\":3"), "{text}");
}
