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

use std::net::SocketAddr;
use std::time::Duration;

use petrel_reflector::codec::PacketType;
use petrel_reflector::core::interconnect::LinkState;
use petrel_reflector::model::{Backend, InterconnectConfig, NodeToken, ServerConfig};
use petrel_reflector::runtime::interconnect::{add_edge_node, EdgeServer};
use petrel_reflector::runtime::server::ServerHandle;

use support::edge_devices::{bound, edge_config, frame, ready_edge, Device};
use support::Env;

const PW: &str = "Secret12";
/// Reconnecting takes up to the 5 s backoff cap plus confirmation and the
/// snapshot (§6.1).
const RECONNECT: Duration = Duration::from_secs(30);
const USERS: [(&str, &str, u32); 5] = [
    ("alice", "BA1AA", 4_600_001),
    ("bob", "BA1BB", 4_600_002),
    ("carol", "BA1CC", 4_600_003),
    ("dave", "BA1DD", 4_600_004),
    ("erin", "BA1EE", 4_600_005),
];
const QUIET: Duration = Duration::from_millis(150);
const SETTLE: Duration = Duration::from_millis(600);

fn centre_config(env: &Env, udp: SocketAddr, control: SocketAddr) -> ServerConfig {
    ServerConfig {
        listen: udp,
        interconnect: InterconnectConfig {
            enabled: true,
            control_listen: control,
            ..InterconnectConfig::default()
        },
        ..support::udp_config(&env.db)
    }
}

/// A centre over `env`'s store with [`USERS`] and the edges `nodes`.
async fn centre(env: &Env, nodes: &[&str]) -> (ServerHandle, Vec<NodeToken>) {
    let loopback = SocketAddr::from(([127, 0, 0, 1], 0));
    let store = support::open_cheap(&env.db).await;
    support::add_users(
        &store,
        USERS
            .iter()
            .map(|(n, c, d)| support::account(n, (*c).to_owned(), *d, PW)),
    )
    .await;
    let mut tokens = Vec::new();
    for n in nodes {
        let ic = centre_config(env, loopback, loopback).interconnect;
        tokens.push(add_edge_node(&store, Some(n), &ic).await.unwrap());
    }
    store.close().await;
    let server = ServerHandle::start(centre_config(env, loopback, loopback))
        .await
        .unwrap();
    (server, tokens)
}

/// A ready edge of `server` whose UDP address the centre has bound.
async fn bound_edge(server: &ServerHandle, token: &NodeToken) -> EdgeServer {
    let e = ready_edge(edge_config(
        server.control_addr().unwrap(),
        server.local_addr(),
        &token.credential,
        token.pin.unwrap(),
        Duration::from_secs(15),
    ))
    .await;
    bound(
        &server.control_server().unwrap().data_plane(),
        token.credential.node_id(),
    )
    .await;
    e
}

fn on_sqlite(name: &str, body: impl FnOnce(&Env)) {
    support::run(Backend::Sqlite, name, body).expect("SQLite is always available");
}

async fn talk(d: &Device, to: SocketAddr, frames: impl IntoIterator<Item = u8>) {
    for n in frames {
        d.send(to, PacketType::Voice, &frame(n)).await;
        tokio::time::sleep(Duration::from_millis(120)).await;
    }
}

fn frames(r: std::ops::RangeInclusive<u8>) -> Vec<Vec<u8>> {
    r.map(frame).collect()
}

/// The centre's interconnect counter `name` (without prefix and suffix).
fn centre_counter(server: &ServerHandle, name: &str) -> u64 {
    let stats = server.stats();
    let snap = stats.interconnect_voice.expect("a centre");
    snap.counters
        .iter()
        .find(|(n, _)| n == name)
        .unwrap_or_else(|| panic!("no counter {name}"))
        .1
}

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
