//! Admin changes and moving devices between a real centre and its edges,
//! end to end over loopback (draarl-interconnect §3.8): a device on an
//! edge that the admin moves to another group (store change + directory
//! reload) hears the new group and no longer the old one, and talks into
//! it; the device of an account the admin disables is revoked at its edge
//! and refused when it logs in again; a device that logs in at the centre
//! directly and then through an edge, or the reverse, keeps one session,
//! so voice reaches it once, at the address it logged in from last.

#![allow(clippy::unwrap_used)]

#[macro_use]
mod support;

use petrel_reflector::codec::PacketType;

use support::cluster::{
    bound_edge, centre, centre_counter, frames, on_sqlite, seeded_store, start_centre, talk,
    FLOOR_IDLE, PW, QUIET, SETTLE,
};
use support::edge_devices::{until, Device};

/// The talkgroup the admin moves devices to.
const OPS: i64 = 5;

#[test]
fn a_device_moved_to_another_group_by_the_admin_hears_that_group_at_its_edge() {
    on_sqlite("admin_group_move", |env| {
        env.rt.block_on(async {
            let store = seeded_store(env).await;
            store.add_group("ops", false, Some(OPS)).await.unwrap();
            store.set_device_group("erin", 1, OPS).await.unwrap();
            let (server, tokens) = start_centre(env, store, &["edge-a"]).await;
            let ea = bound_edge(&server, &tokens[0]).await;
            let at = ea.local_addr();
            let alice = Device::new(21, "alice", 1, PW).await;
            let bob = Device::new(22, "bob", 1, PW).await;
            let carol = Device::new(23, "carol", 1, PW).await;
            let erin = Device::new(25, "erin", 1, PW).await;
            alice.login(at).await;
            bob.login(at).await;
            // Carol (999) and erin (ops) are on the centre directly.
            carol.login(server.local_addr()).await;
            erin.login(server.local_addr()).await;
            talk(&bob, at, 1..=3).await;
            assert_eq!(
                alice.received(PacketType::Voice, SETTLE).await,
                frames(1..=3)
            );
            assert_eq!(
                carol.received(PacketType::Voice, QUIET).await,
                frames(1..=3)
            );
            assert!(erin.received(PacketType::Voice, QUIET).await.is_empty());
            // The admin moves alice's device to ops.
            let admin = support::open_cheap(&env.db).await;
            admin.set_device_group("alice", 1, OPS).await.unwrap();
            admin.close().await;
            let version = ea.stats().projection.1;
            server.reload_now();
            until("the route upsert", || {
                centre_counter(&server, "reload_route_upserts") == 1
            })
            .await;
            until("the edge applied it", || ea.stats().projection.1 > version).await;
            assert_eq!(ea.stats().sessions, 2, "alice keeps her session");
            tokio::time::sleep(FLOOR_IDLE).await;
            // 999 no longer reaches her; it still reaches carol.
            talk(&bob, at, 11..=13).await;
            assert_eq!(
                carol.received(PacketType::Voice, SETTLE).await,
                frames(11..=13)
            );
            assert!(alice.received(PacketType::Voice, QUIET).await.is_empty());
            // Ops reaches her from the centre, not bob.
            talk(&erin, server.local_addr(), 21..=23).await;
            assert_eq!(
                alice.received(PacketType::Voice, SETTLE).await,
                frames(21..=23)
            );
            assert!(bob.received(PacketType::Voice, QUIET).await.is_empty());
            tokio::time::sleep(FLOOR_IDLE).await;
            // She talks into ops.
            talk(&alice, at, 31..=33).await;
            assert_eq!(
                erin.received(PacketType::Voice, SETTLE).await,
                frames(31..=33)
            );
            assert!(bob.received(PacketType::Voice, QUIET).await.is_empty());
            assert!(carol.received(PacketType::Voice, QUIET).await.is_empty());
            // A reload that changes nothing sends nothing.
            server.reload_now();
            tokio::time::sleep(SETTLE).await;
            assert_eq!(centre_counter(&server, "reload_route_upserts"), 1);
            assert_eq!(centre_counter(&server, "reload_revokes"), 0);
            ea.shutdown().await;
            server.shutdown().await;
        });
    });
}

#[test]
fn the_device_of_a_disabled_account_is_revoked_at_its_edge() {
    on_sqlite("admin_disable", |env| {
        env.rt.block_on(async {
            let (server, tokens) = centre(env, &["edge-a"]).await;
            let ea = bound_edge(&server, &tokens[0]).await;
            let at = ea.local_addr();
            let alice = Device::new(31, "alice", 1, PW).await;
            let bob = Device::new(32, "bob", 1, PW).await;
            let carol = Device::new(33, "carol", 1, PW).await;
            alice.login(at).await;
            bob.login(at).await;
            carol.login(server.local_addr()).await;
            assert_eq!(ea.stats().sessions, 2);
            let admin = support::open_cheap(&env.db).await;
            admin.set_user_enabled("alice", false).await.unwrap();
            admin.close().await;
            server.reload_now();
            until("the revoke", || {
                centre_counter(&server, "reload_revokes") == 1
            })
            .await;
            until("the edge removed her session", || ea.stats().sessions == 1).await;
            // Her voice goes nowhere; bob's still crosses.
            talk(&alice, at, 1..=3).await;
            assert!(bob.received(PacketType::Voice, SETTLE).await.is_empty());
            assert!(carol.received(PacketType::Voice, QUIET).await.is_empty());
            talk(&bob, at, 11..=13).await;
            assert_eq!(
                carol.received(PacketType::Voice, SETTLE).await,
                frames(11..=13)
            );
            // Her next heartbeat is a proxied login, refused.
            assert_eq!(alice.login(at).await.callsign_str(), Some(""));
            assert_eq!(ea.stats().sessions, 1);
            ea.shutdown().await;
            server.shutdown().await;
        });
    });
}

#[test]
fn a_device_keeps_one_session_between_the_centre_and_an_edge_in_either_order() {
    on_sqlite("admin_one_session", |env| {
        env.rt.block_on(async {
            let (server, tokens) = centre(env, &["edge-a"]).await;
            let ea = bound_edge(&server, &tokens[0]).await;
            let (at, centre_at) = (ea.local_addr(), server.local_addr());
            // Alice's device, first at the centre, then behind the edge.
            let alice_c = Device::new(41, "alice", 1, PW).await;
            let alice_e = Device::new(42, "alice", 1, PW).await;
            let dave = Device::new(44, "dave", 1, PW).await;
            dave.login(centre_at).await;
            alice_c.login(centre_at).await;
            alice_e.login(at).await;
            until("the centre-direct session ended", || {
                server.stats().session.sessions_migrated == 1
            })
            .await;
            assert_eq!(ea.stats().sessions, 1);
            talk(&dave, centre_at, 1..=3).await;
            assert_eq!(
                alice_e.received(PacketType::Voice, SETTLE).await,
                frames(1..=3)
            );
            assert!(alice_c.received(PacketType::Voice, QUIET).await.is_empty());
            // Back at the centre: the edge's session is revoked.
            tokio::time::sleep(FLOOR_IDLE).await;
            alice_c.login(centre_at).await;
            until("the edge session revoked", || {
                centre_counter(&server, "direct_login_migrations") == 1
            })
            .await;
            until("the edge removed it", || ea.stats().sessions == 0).await;
            talk(&dave, centre_at, 11..=13).await;
            assert_eq!(
                alice_c.received(PacketType::Voice, SETTLE).await,
                frames(11..=13)
            );
            assert!(alice_e.received(PacketType::Voice, QUIET).await.is_empty());
            assert_eq!(centre_counter(&server, "direct_eviction_drops"), 0);
            ea.shutdown().await;
            server.shutdown().await;
        });
    });
}
