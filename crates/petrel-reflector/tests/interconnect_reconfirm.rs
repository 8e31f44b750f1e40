//! Session reconfirmation after a centre restart, end to end over
//! loopback (draarl-interconnect §3.9, §6.2, §6.3): a `ServerHandle`
//! centre over a SQLite store, two `EdgeServer` edges and real devices.
//! The centre stops and starts again on the same store; the edges confirm
//! their live sessions before `node_ready`, so the devices keep their
//! sessions without logging in again (their heartbeats are answered by
//! their edge, the centre sees no login), and voice crosses edges again,
//! once. A device whose account was disabled while the centre was down is
//! refused at reconfirmation, removed from its edge, and its next
//! heartbeat gets the ordinary refusal.

#![allow(clippy::unwrap_used)]

#[macro_use]
mod support;

use std::time::Duration;

use petrel_reflector::codec::PacketType;
use petrel_reflector::core::interconnect::LinkState;
use petrel_reflector::runtime::interconnect::EdgeServer;
use petrel_reflector::runtime::server::ServerHandle;

use support::cluster::{
    bound_edge, centre, centre_config, centre_counter, frames, on_sqlite, talk, PW, QUIET,
    RECONNECT, SETTLE, USERS,
};
use support::edge_devices::{bound, Device};
use support::Env;

/// Waits (≤ 10 s) until the centre's background writer has stored `n`
/// device-session entries (§3.9: what a restarted centre reconfirms from).
async fn entries_stored(env: &Env, n: usize) {
    let store = support::open_cheap(&env.db).await;
    let deadline = tokio::time::Instant::now() + Duration::from_secs(10);
    loop {
        let stored = store.session_entries(64).await.unwrap().len();
        if stored >= n {
            break;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "{stored} of {n} session entries stored after 10 s"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    store.close().await;
}

/// Stops `server`, waits until both edges lost it, and starts a new centre
/// process on the same addresses and store (a new cluster epoch, §6.3).
async fn restart(env: &Env, server: ServerHandle, edges: [&EdgeServer; 2]) -> ServerHandle {
    let (udp, control) = (server.local_addr(), server.control_addr().unwrap());
    entries_stored(env, 4).await;
    server.shutdown().await;
    for e in edges {
        e.wait_for_state(RECONNECT, |s| matches!(s, LinkState::Disconnected(_)))
            .await
            .expect("in grace");
    }
    let server = ServerHandle::start(centre_config(env, udp, control))
        .await
        .unwrap();
    for e in edges {
        e.wait_for_state(RECONNECT, |s| s == LinkState::Ready)
            .await
            .expect("ready again");
    }
    let data = server.control_server().unwrap().data_plane();
    bound(&data, "edge-a").await;
    bound(&data, "edge-b").await;
    server
}

#[test]
fn after_a_centre_restart_devices_keep_their_sessions_and_voice_crosses_once() {
    on_sqlite("reconfirm_restart", |env| {
        env.rt.block_on(async {
            let (server, tokens) = centre(env, &["edge-a", "edge-b"]).await;
            let ea = bound_edge(&server, &tokens[0]).await;
            let eb = bound_edge(&server, &tokens[1]).await;
            let (a_at, b_at) = (ea.local_addr(), eb.local_addr());
            let alice = Device::new(91, "alice", 1, PW).await;
            let bob = Device::new(92, "bob", 1, PW).await;
            let carol = Device::new(93, "carol", 1, PW).await;
            let dave = Device::new(94, "dave", 1, PW).await;
            let devices = [(&alice, a_at), (&bob, a_at), (&carol, b_at), (&dave, b_at)];
            for (d, at) in devices {
                assert!(d
                    .login(at)
                    .await
                    .callsign_str()
                    .is_some_and(|c| !c.is_empty()));
            }
            talk(&alice, a_at, 1..=3).await;
            assert_eq!(
                carol.received(PacketType::Voice, SETTLE).await,
                frames(1..=3)
            );
            for d in [&bob, &dave] {
                let _ = d.received(PacketType::Voice, QUIET).await;
            }
            let server = restart(env, server, [&ea, &eb]).await;
            // Every session was confirmed, none refused, no login needed.
            for e in [&ea, &eb] {
                let s = e.stats();
                assert_eq!(s.sessions, 2);
                assert_eq!(s.reconfirm.confirmed, 2);
                assert_eq!(s.reconfirm.session_reconfirm_rejected, 0);
            }
            assert_eq!(centre_counter(&server, "reconfirm_accepted"), 4);
            // Heartbeats are answered by the edges; the new centre sees no
            // login at all.
            for (d, at) in devices {
                assert_eq!(
                    d.login(at).await.callsign_str().map(str::to_owned),
                    Some(USERS.iter().find(|u| u.0 == d.user).unwrap().1.to_owned())
                );
            }
            assert_eq!(centre_counter(&server, "device_auth_requests"), 0);
            // Voice crosses edges again, once, never back to its sender.
            talk(&alice, a_at, 31..=34).await;
            let want = frames(31..=34);
            assert_eq!(bob.received(PacketType::Voice, SETTLE).await, want);
            assert_eq!(carol.received(PacketType::Voice, QUIET).await, want);
            assert_eq!(dave.received(PacketType::Voice, QUIET).await, want);
            assert!(alice.received(PacketType::Voice, QUIET).await.is_empty());
            // And the other way, once alice's floor is idle (§3.10).
            tokio::time::sleep(Duration::from_millis(1500)).await;
            talk(&dave, b_at, 41..=42).await;
            let want = frames(41..=42);
            assert_eq!(alice.received(PacketType::Voice, SETTLE).await, want);
            assert_eq!(carol.received(PacketType::Voice, QUIET).await, want);
            assert_eq!(bob.received(PacketType::Voice, QUIET).await, want);
            assert_eq!(centre_counter(&server, "device_auth_requests"), 0);
            ea.shutdown().await;
            eb.shutdown().await;
            server.shutdown().await;
        });
    });
}

#[test]
fn an_account_disabled_while_the_centre_was_down_is_refused_at_reconfirmation() {
    on_sqlite("reconfirm_disabled", |env| {
        env.rt.block_on(async {
            let (server, tokens) = centre(env, &["edge-a", "edge-b"]).await;
            let ea = bound_edge(&server, &tokens[0]).await;
            let eb = bound_edge(&server, &tokens[1]).await;
            let (a_at, b_at) = (ea.local_addr(), eb.local_addr());
            let alice = Device::new(101, "alice", 1, PW).await;
            let erin = Device::new(105, "erin", 1, PW).await;
            let carol = Device::new(103, "carol", 1, PW).await;
            for (d, at) in [(&alice, a_at), (&erin, a_at), (&carol, b_at)] {
                assert!(d
                    .login(at)
                    .await
                    .callsign_str()
                    .is_some_and(|c| !c.is_empty()));
            }
            entries_stored(env, 3).await;
            let (udp, control) = (server.local_addr(), server.control_addr().unwrap());
            server.shutdown().await;
            for e in [&ea, &eb] {
                e.wait_for_state(RECONNECT, |s| matches!(s, LinkState::Disconnected(_)))
                    .await
                    .expect("in grace");
            }
            let store = support::open_cheap(&env.db).await;
            store.set_user_enabled("erin", false).await.unwrap();
            store.close().await;
            let server = ServerHandle::start(centre_config(env, udp, control))
                .await
                .unwrap();
            for e in [&ea, &eb] {
                e.wait_for_state(RECONNECT, |s| s == LinkState::Ready)
                    .await
                    .expect("ready again");
            }
            let data = server.control_server().unwrap().data_plane();
            bound(&data, "edge-a").await;
            bound(&data, "edge-b").await;
            let s = ea.stats();
            assert_eq!(s.sessions, 1, "erin's session was removed");
            assert_eq!(s.reconfirm.confirmed, 1);
            assert_eq!(s.reconfirm.session_reconfirm_rejected, 1);
            assert_eq!(centre_counter(&server, "reconfirm_accepted"), 2);
            assert_eq!(
                centre_counter(&server, "reconfirm_rejected_account_disabled"),
                1
            );
            // Erin's next heartbeat goes to the centre as a login and gets
            // the ordinary refusal (no callsign).
            assert_eq!(erin.login(a_at).await.callsign_str().unwrap_or(""), "");
            assert_eq!(centre_counter(&server, "device_auth_requests"), 1);
            // Her voice goes nowhere; alice's still crosses.
            talk(&erin, a_at, 1..=2).await;
            assert!(carol.received(PacketType::Voice, SETTLE).await.is_empty());
            assert!(alice.received(PacketType::Voice, QUIET).await.is_empty());
            talk(&alice, a_at, 11..=12).await;
            assert_eq!(
                carol.received(PacketType::Voice, SETTLE).await,
                frames(11..=12)
            );
            ea.shutdown().await;
            eb.shutdown().await;
            server.shutdown().await;
        });
    });
}
