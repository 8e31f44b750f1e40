//! The single node's fan-out admission rules through edges, end to end
//! over loopback (draarl-v1 §3.1, §3.6, §9; draarl-interconnect §3.8): a
//! `ServerHandle` centre and an `EdgeServer` edge, both with loopback not
//! exempt, and devices on their own 127.0.0.x addresses. The centre caps
//! an account's endpoints over its direct sessions and every edge's
//! together and refuses one more, through an edge or directly, with the
//! single node's reject; a new
//! endpoint at the edge receives fan-out only once heard again after
//! `receive_after_ms`; an ICMP port unreachable read on the edge's socket
//! ends the session there.

#![allow(clippy::unwrap_used)]

#[macro_use]
mod support;

use std::net::SocketAddr;
use std::time::Duration;

use petrel_reflector::codec::PacketType;
use petrel_reflector::model::{
    Backend, EndpointPolicy, InterconnectConfig, NodeToken, ServerConfig,
};
use petrel_reflector::runtime::interconnect::{add_edge_node, EdgeServer};
use petrel_reflector::runtime::server::ServerHandle;

use support::edge_devices::{edge_config, ready_edge, until, Device};
use support::Env;

const PW: &str = "Secret12";
const SETTLE: Duration = Duration::from_millis(400);

/// Loopback counted like any network; an account may hold 2 endpoints;
/// a new one receives after 1 s.
fn policy() -> EndpointPolicy {
    EndpointPolicy {
        max_per_account: 2,
        max_per_prefix: 32,
        receive_after_ms: 1_000,
        exempt_loopback: false,
    }
}

fn interconnect(control: SocketAddr) -> InterconnectConfig {
    InterconnectConfig {
        enabled: true,
        control_listen: control,
        ..InterconnectConfig::default()
    }
}

async fn centre(env: &Env) -> (ServerHandle, NodeToken) {
    let loopback = SocketAddr::from(([127, 0, 0, 1], 0));
    let store = support::open_cheap(&env.db).await;
    support::add_users(
        &store,
        [
            support::account("alice", "BA1AA".to_owned(), 4_600_001, PW),
            support::account("bob", "BA1BB".to_owned(), 4_600_002, PW),
            support::account("carol", "BA1CC".to_owned(), 4_600_003, PW),
        ],
    )
    .await;
    let token = add_edge_node(&store, Some("edge-a"), &interconnect(loopback))
        .await
        .unwrap();
    store.close().await;
    let mut cfg = ServerConfig {
        listen: loopback,
        interconnect: interconnect(loopback),
        ..support::udp_config(&env.db)
    };
    cfg.session.endpoints = policy();
    (ServerHandle::start(cfg).await.unwrap(), token)
}

async fn edge(server: &ServerHandle, token: &NodeToken) -> EdgeServer {
    let mut cfg = edge_config(
        server.control_addr().unwrap(),
        server.local_addr(),
        &token.credential,
        token.pin.unwrap(),
        Duration::from_secs(15),
    );
    cfg.node.devices.sessions.endpoints = policy();
    ready_edge(cfg).await
}

fn on_sqlite(name: &str, body: impl FnOnce(&Env)) {
    support::run(Backend::Sqlite, name, body).expect("SQLite is always available");
}

/// The DATA of `d`'s heartbeat answer from `to`.
async fn login_answer(d: &Device, to: SocketAddr) -> Vec<u8> {
    for _ in 0..20 {
        d.send(to, PacketType::Heartbeat, &[0; 41]).await;
        if let Some((_, data)) = d
            .packets(PacketType::Heartbeat, Duration::from_millis(500))
            .await
            .into_iter()
            .next()
        {
            return data;
        }
    }
    panic!("{} got no heartbeat answer", d.user);
}

#[test]
fn the_account_cap_counts_direct_and_edge_sessions_together() {
    on_sqlite("edge_endpoint_caps", |env| {
        env.rt.block_on(async {
            let (server, token) = centre(env).await;
            let ea = edge(&server, &token).await;
            let at = ea.local_addr();
            // One of alice's devices directly on the centre, one on the edge.
            let direct = Device::new(51, "alice", 1, PW).await;
            assert_eq!(
                direct.login(server.local_addr()).await.callsign_str(),
                Some("BA1AA")
            );
            let second = Device::new(52, "alice", 2, PW).await;
            assert_eq!(second.login(at).await.callsign_str(), Some("BA1AA"));
            // A third is refused through the edge with the single node's
            // reject (code 3, too_many_devices).
            let third = Device::new(53, "alice", 3, PW).await;
            let data = login_answer(&third, at).await;
            assert_eq!(data[0], 3, "{data:?}");
            assert_eq!(&data[1..], b"too_many_devices");
            // And so is a third directly on the centre: a direct login
            // counts the account's edge sessions too.
            let fourth = Device::new(55, "alice", 4, PW).await;
            let data = login_answer(&fourth, server.local_addr()).await;
            assert_eq!(data[0], 3, "{data:?}");
            assert_eq!(&data[1..], b"too_many_devices");
            // Another account is not affected.
            let bob = Device::new(54, "bob", 3, PW).await;
            assert_eq!(bob.login(at).await.callsign_str(), Some("BA1BB"));
            // The edge's sessions are alice-2 and bob-3 only.
            assert_eq!(ea.stats().sessions, 2);
            ea.shutdown().await;
            server.shutdown().await;
        });
    });
}

#[test]
fn a_new_edge_endpoint_receives_once_heard_twice_and_icmp_ends_it() {
    on_sqlite("edge_endpoint_liveness", |env| {
        env.rt.block_on(async {
            let (server, token) = centre(env).await;
            let ea = edge(&server, &token).await;
            let at = ea.local_addr();
            let alice = Device::new(61, "alice", 1, PW).await;
            let bob = Device::new(62, "bob", 1, PW).await;
            assert_eq!(alice.login(at).await.callsign_str(), Some("BA1AA"));
            assert_eq!(bob.login(at).await.callsign_str(), Some("BA1BB"));
            // Heard once: bob receives nothing yet.
            alice.send(at, PacketType::Text, b"early").await;
            assert!(bob.received(PacketType::Text, SETTLE).await.is_empty());
            // Heard again after the wait: bob receives.
            tokio::time::sleep(Duration::from_millis(1_100)).await;
            bob.send(at, PacketType::Heartbeat, &[0; 41]).await;
            until("bob heard twice", || {
                ea.stats().session.endpoints_heard_twice >= 1
            })
            .await;
            alice.send(at, PacketType::Text, b"later").await;
            assert_eq!(bob.received(PacketType::Text, SETTLE).await, [b"later"]);
            // Bob's port closes: the next frame sent there draws a port
            // unreachable, which ends his session on the edge (reported).
            drop(bob);
            alice.send(at, PacketType::Text, b"to a closed port").await;
            until("the unreachable session ended", || {
                ea.stats().session.unreachable_sessions_ended == 1
            })
            .await;
            let s = ea.stats();
            assert_eq!(s.sessions, 1);
            assert!(s.icmp.unreachable >= 1, "{:?}", s.icmp);
            ea.shutdown().await;
            server.shutdown().await;
        });
    });
}
