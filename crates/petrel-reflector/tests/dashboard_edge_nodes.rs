//! The operator dashboard's edge nodes on a centre over real loopback HTTP
//! and TLS (draarl-interconnect §7 "Control server", §3.7): an enrolled
//! edge that reached "ready" is listed online with the projection version
//! it committed, a second enrolled node that never connected is listed
//! offline, and the edge shows offline once it stops. A server without
//! `[interconnect]` has no `nodes`. Every test runs on SQLite and
//! PostgreSQL.

#![allow(clippy::unwrap_used)]

#[macro_use]
mod support;

use std::net::SocketAddr;
use std::time::{Duration, Instant};

use petrel_reflector::codec::interconnect::Offer;
use petrel_reflector::core::interconnect::LinkState;
use petrel_reflector::model::{InterconnectConfig, ServerConfig};
use petrel_reflector::runtime::interconnect::{
    add_edge_node, CentreTrust, EdgeControl, EdgeControlConfig, EdgeNode, DEFAULT_SERVER_NAME,
};
use petrel_reflector::runtime::server::ServerHandle;
use serde_json::Value;

use support::Env;

on_every_backend!(
    a_ready_edge_is_listed_with_its_projection_version_then_offline,
    without_interconnect_there_are_no_nodes,
);

const TOKEN: &str = "0123456789abcdef";
const WAIT: Duration = Duration::from_secs(10);

fn interconnect() -> InterconnectConfig {
    InterconnectConfig {
        enabled: true,
        control_listen: SocketAddr::from(([127, 0, 0, 1], 0)),
        ..InterconnectConfig::default()
    }
}

fn config(db: &str, interconnect: InterconnectConfig) -> ServerConfig {
    ServerConfig {
        listen: SocketAddr::from(([127, 0, 0, 1], 0)),
        db: db.to_owned(),
        http_listen: Some("127.0.0.1:0".parse().unwrap()),
        admin_token: Some(TOKEN.to_owned()),
        interconnect,
        ..ServerConfig::default()
    }
}

/// `GET /api/admin/dashboard` with the admin token, off the runtime's
/// threads (the client is blocking).
async fn dashboard(http: SocketAddr) -> Value {
    let (code, answer) = tokio::task::spawn_blocking(move || {
        support::http(
            http,
            &format!(
                "GET /api/admin/dashboard HTTP/1.1\r\nHost: x\r\n\
                 Authorization: Bearer {TOKEN}\r\nConnection: close\r\n\r\n"
            ),
        )
    })
    .await
    .unwrap();
    assert_eq!(code, 200, "{answer}");
    serde_json::from_str(answer.split_once("\r\n\r\n").unwrap().1).unwrap()
}

/// The dashboard's entry for `node` once `done` holds for it (fails after
/// [`WAIT`]).
async fn node_when(http: SocketAddr, node: &str, done: impl Fn(&Value) -> bool) -> Value {
    let start = Instant::now();
    loop {
        let d = dashboard(http).await;
        let entry = d["nodes"]
            .as_array()
            .unwrap()
            .iter()
            .find(|n| n["node_id"] == node)
            .cloned()
            .unwrap_or(Value::Null);
        if done(&entry) {
            return entry;
        }
        assert!(start.elapsed() < WAIT, "timed out: {d}");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

fn a_ready_edge_is_listed_with_its_projection_version_then_offline(env: &Env) {
    env.rt.block_on(async {
        let store = support::open_cheap(&env.db).await;
        let token = add_edge_node(&store, Some("edge-dash"), &interconnect())
            .await
            .unwrap();
        add_edge_node(&store, Some("edge-idle"), &interconnect())
            .await
            .unwrap();
        store.close().await;
        let server = ServerHandle::start(config(&env.db, interconnect()))
            .await
            .unwrap();
        let http = server.http_addr().unwrap();
        let edge = EdgeControl::start(EdgeControlConfig {
            centre: server.control_addr().unwrap().to_string(),
            server_name: DEFAULT_SERVER_NAME.to_owned(),
            credential: token.credential.clone(),
            trust: CentreTrust::Pin(token.pin.unwrap()),
            offer: Offer::MINIMUM,
            heartbeat: Duration::from_millis(200),
        })
        .unwrap();
        let node = EdgeNode::spawn_default(edge).unwrap();
        node.wait_for_state(WAIT, |s| s == LinkState::Ready)
            .await
            .expect("ready");
        let (_, committed) = node.state().lock().unwrap().routes.position();
        let session = server.control_server().unwrap().nodes();
        assert_eq!(session.len(), 1);
        // Listed online with the version the edge committed, and a
        // heartbeat once one arrived (every 200 ms).
        let online = node_when(http, "edge-dash", |n| {
            n["online"] == true && !n["last_heartbeat_unix_ms"].is_null()
        })
        .await;
        assert_eq!(online["projection_version"], committed, "{online}");
        assert_eq!(online["disabled"], false);
        assert_eq!(online["session_id"], session[0].session_id.to_string());
        assert_eq!(
            online["connected_unix_ms"], session[0].connected_at_ms,
            "{online}"
        );
        let remote: SocketAddr = online["remote"].as_str().unwrap().parse().unwrap();
        assert!(remote.ip().is_loopback(), "{online}");
        let d = dashboard(http).await;
        let ids: Vec<_> = d["nodes"]
            .as_array()
            .unwrap()
            .iter()
            .map(|n| (n["node_id"].clone(), n["online"].clone()))
            .collect();
        assert_eq!(
            ids,
            [
                ("edge-dash".into(), true.into()),
                ("edge-idle".into(), false.into())
            ],
            "online first, then the stored nodes offline: {d}"
        );
        // The edge stops: it stays listed (it is enrolled), offline, with
        // no session fields.
        drop(node);
        let offline = node_when(http, "edge-dash", |n| n["online"] == false).await;
        for field in [
            "session_id",
            "remote",
            "connected_unix_ms",
            "last_heartbeat_unix_ms",
            "projection_version",
        ] {
            assert!(offline[field].is_null(), "{field} in {offline}");
        }
        server.shutdown().await;
    });
}

fn without_interconnect_there_are_no_nodes(env: &Env) {
    env.rt.block_on(async {
        let server = ServerHandle::start(config(&env.db, InterconnectConfig::default()))
            .await
            .unwrap();
        let d = dashboard(server.http_addr().unwrap()).await;
        assert!(d["online"].is_number(), "{d}");
        assert!(d.get("nodes").is_none(), "{d}");
        server.shutdown().await;
    });
}
