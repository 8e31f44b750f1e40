//! A centre and its edges over loopback TLS (draarl-interconnect §3.6
//! steps 5–6, §3.7, §6.1): `node_ready` is answered with the full
//! projection, the edge becomes ready only after its ACK, route deltas
//! reach it, and losing the centre starts its local grace until it is
//! ready again.

#![allow(clippy::unwrap_used)]

use std::net::SocketAddr;
use std::time::{Duration, Instant};

use petrel_reflector::codec::interconnect::messages::DeviceRoute;
use petrel_reflector::codec::interconnect::{NodeId, Offer};
use petrel_reflector::core::interconnect::LinkState;
use petrel_reflector::model::{InterconnectConfig, NodeCredential};
use petrel_reflector::runtime::interconnect::{
    CentreDispatch, CentreTrust, ControlServer, EdgeControl, EdgeControlConfig, EdgeNode,
    NodeAuthority, TlsIdentity, DEFAULT_SERVER_NAME,
};

const WAIT: Duration = Duration::from_secs(10);

fn credential(node: &str, fill: u8) -> NodeCredential {
    NodeCredential::new(node, &[fill; 32]).unwrap()
}

fn cfg_at(addr: SocketAddr) -> InterconnectConfig {
    InterconnectConfig {
        enabled: true,
        control_listen: addr,
        ..InterconnectConfig::default()
    }
}

/// A centre with its dispatcher on `addr`, knowing `nodes`.
async fn centre(
    addr: SocketAddr,
    identity: &TlsIdentity,
    nodes: &[&NodeCredential],
    epoch: u64,
) -> (ControlServer, CentreDispatch) {
    let mut authority = NodeAuthority::default();
    for c in nodes {
        authority = authority.with_static_token(c.node_id(), c.expose());
    }
    let (tx, rx) = tokio::sync::mpsc::channel(1024);
    let server = ControlServer::bind(
        &cfg_at(addr),
        identity.server_config().unwrap(),
        authority,
        Some(tx),
    )
    .await
    .unwrap();
    let dispatch = CentreDispatch::spawn(server.sender(), rx, epoch);
    (server, dispatch)
}

fn edge(addr: SocketAddr, cred: &NodeCredential, pin: [u8; 32], grace: Duration) -> EdgeNode {
    let control = EdgeControl::start(EdgeControlConfig {
        centre: addr.to_string(),
        server_name: DEFAULT_SERVER_NAME.to_owned(),
        credential: cred.clone(),
        trust: CentreTrust::Pin(pin),
        offer: Offer::MINIMUM,
        heartbeat: Duration::from_millis(200),
    })
    .unwrap();
    EdgeNode::spawn(control, grace).unwrap()
}

fn route(session_id: u64, username: &str) -> DeviceRoute {
    DeviceRoute {
        session_id,
        device_id: 7,
        username: username.to_owned(),
        ssid: 1,
        group_id: 3,
        domain_id: 3,
        ..DeviceRoute::default()
    }
}

async fn until(what: &str, done: impl Fn() -> bool) {
    let start = Instant::now();
    while !done() {
        assert!(start.elapsed() < WAIT, "timed out waiting for {what}");
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
}

#[tokio::test]
async fn an_edge_is_ready_after_the_snapshot_and_follows_route_deltas() {
    let identity = TlsIdentity::generate().unwrap();
    let cred = credential("edge-a", 1);
    let (server, dispatch) = centre(
        SocketAddr::from(([127, 0, 0, 1], 0)),
        &identity,
        &[&cred],
        41,
    )
    .await;
    let node = edge(
        server.local_addr(),
        &cred,
        identity.fingerprint(),
        Duration::from_secs(15),
    );
    let state = node
        .wait_for_state(WAIT, |s| s == LinkState::Ready)
        .await
        .expect("ready");
    assert_eq!(state, LinkState::Ready);
    // Ready means the commit was ACKed: the centre accepted exactly that ACK.
    until("the snapshot ACK", || {
        dispatch.route_stats().acks_accepted == 1
    })
    .await;
    let shared = node.state();
    assert_eq!(shared.lock().unwrap().routes.position(), (41, 0));
    assert!(shared.lock().unwrap().routes.is_synced());
    // A route change reaches the edge as a delta and is ACKed.
    let edge_a = NodeId::new("edge-a").unwrap();
    let sender = server.sender();
    let sent = dispatch
        .routes()
        .lock()
        .unwrap()
        .upsert(&sender, Instant::now(), edge_a, route(9, "BG1ABC"))
        .unwrap();
    assert!(sent);
    until("the delta ACK", || {
        dispatch.route_stats().acks_accepted == 2
    })
    .await;
    let s = shared.lock().unwrap();
    assert_eq!(s.routes.position(), (41, 1));
    let p = s.routes.projection().unwrap();
    assert_eq!(p.devices.get(&9).unwrap().username, "BG1ABC");
    assert_eq!((s.bad_payloads, s.send_failures), (0, 0));
    assert_eq!(dispatch.route_stats().acks_refused, 0);
}

#[tokio::test]
async fn losing_the_centre_starts_the_grace_and_a_new_centre_makes_it_ready_again() {
    let identity = TlsIdentity::generate().unwrap();
    let cred = credential("edge-g", 2);
    let (server, dispatch) = centre(
        SocketAddr::from(([127, 0, 0, 1], 0)),
        &identity,
        &[&cred],
        5,
    )
    .await;
    let addr = server.local_addr();
    let node = edge(addr, &cred, identity.fingerprint(), Duration::from_secs(5));
    node.wait_for_state(WAIT, |s| s == LinkState::Ready)
        .await
        .expect("ready");
    drop(dispatch);
    server.shutdown().await;
    let lost = node
        .wait_for_state(WAIT, |s| matches!(s, LinkState::Disconnected(_)))
        .await
        .expect("in grace");
    assert!(matches!(lost, LinkState::Disconnected(_)));
    // A new centre process (new cluster epoch) on the same address.
    let (_again, dispatch) = centre(addr, &identity, &[&cred], 6).await;
    node.wait_for_state(WAIT, |s| s == LinkState::Ready)
        .await
        .expect("ready again");
    until("the new snapshot ACK", || {
        dispatch.route_stats().acks_accepted == 1
    })
    .await;
    assert_eq!(node.state().lock().unwrap().routes.position(), (6, 0));
}

#[tokio::test]
async fn without_a_centre_the_grace_expires() {
    let identity = TlsIdentity::generate().unwrap();
    let cred = credential("edge-x", 3);
    let (server, dispatch) = centre(
        SocketAddr::from(([127, 0, 0, 1], 0)),
        &identity,
        &[&cred],
        8,
    )
    .await;
    let node = edge(
        server.local_addr(),
        &cred,
        identity.fingerprint(),
        Duration::from_millis(300),
    );
    node.wait_for_state(WAIT, |s| s == LinkState::Ready)
        .await
        .expect("ready");
    drop(dispatch);
    server.shutdown().await;
    let expired = node.wait_for_state(WAIT, |s| s == LinkState::Expired).await;
    assert_eq!(expired, Some(LinkState::Expired));
}
