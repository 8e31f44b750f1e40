//! A centre's side of device sessions proxied by its edges, over a real
//! server with `[interconnect]`, a real store and loopback TLS/UDP
//! (draarl-interconnect §3.7, §3.8, §7): a proxied login gets a grant, the
//! reply a direct login gets and a route delta; a wrong password gets the
//! direct reject; failures forwarded from one IP ban that IP only, and
//! direct logins share the ban; renew extends, report drops the session
//! and its route; a second edge taking the device revokes the first.
//! Every test runs on SQLite and PostgreSQL.

#![allow(clippy::unwrap_used)]

#[macro_use]
mod support;

use std::net::SocketAddr;
use std::time::Duration;

use petrel_reflector::codec::interconnect::messages::{
    DeviceAuthRequest, DeviceAuthResponse, DeviceSessionRenew, DeviceSessionReport,
    DeviceSessionRevoke, RouteDelta, RouteOperation,
};
use petrel_reflector::codec::interconnect::Subtype;
use petrel_reflector::codec::{decode, PacketType};
use petrel_reflector::model::{NodeToken, ServerConfig};
use petrel_reflector::runtime::interconnect::add_edge_node;
use petrel_reflector::runtime::server::ServerHandle;
use tokio::net::UdpSocket;

use support::control_client::loopback_cfg;
use support::raw_edge::{wall_ms, RawEdge};
use support::Env;

on_every_backend!(
    a_proxied_login_gets_a_grant_the_direct_reply_and_a_route,
    failures_forwarded_from_one_ip_ban_that_ip_only,
    renew_extends_report_drops_and_a_second_edge_takes_the_device,
);

const PW: &str = "Secret12";
const WAIT: Duration = Duration::from_secs(5);

/// A centre over `env`'s store with alice and bob (group 999) and the
/// enrolled edges `nodes`; their tokens.
async fn centre(env: &Env, nodes: &[&str]) -> (ServerHandle, Vec<NodeToken>) {
    let store = support::open_cheap(&env.db).await;
    support::add_users(
        &store,
        [
            support::account("alice", "BA1AA".into(), 4_600_001, PW),
            support::account("bob", "BA1BB".into(), 4_600_002, PW),
        ],
    )
    .await;
    let mut tokens = Vec::new();
    for n in nodes {
        tokens.push(
            add_edge_node(&store, Some(n), &loopback_cfg())
                .await
                .unwrap(),
        );
    }
    store.close().await;
    let cfg = ServerConfig {
        http_listen: Some("127.0.0.1:0".parse().unwrap()),
        interconnect: loopback_cfg(),
        ..support::udp_config(&env.db)
    };
    (ServerHandle::start(cfg).await.unwrap(), tokens)
}

async fn edge(server: &ServerHandle, token: &NodeToken) -> RawEdge {
    RawEdge::connect(
        server.control_addr().unwrap(),
        token.pin.unwrap(),
        &token.credential,
    )
    .await
}

/// What a direct heartbeat of `packet` from `from` gets back.
async fn direct(server: &ServerHandle, from: [u8; 4], packet: &[u8]) -> Vec<u8> {
    let sock = UdpSocket::bind(SocketAddr::from((from, 0))).await.unwrap();
    sock.send_to(packet, server.local_addr()).await.unwrap();
    let mut buf = [0u8; 2048];
    let (n, _) = tokio::time::timeout(WAIT, sock.recv_from(&mut buf))
        .await
        .expect("a direct reply")
        .unwrap();
    buf[..n].to_vec()
}

/// Sends a DeviceAuth for `packet` from `ip` and returns the response.
async fn auth(edge: &mut RawEdge, ip: &str, packet: Vec<u8>) -> DeviceAuthResponse {
    let request_id = edge.next_id() + 1000;
    let req = DeviceAuthRequest {
        request_id,
        source_ip: ip.to_owned(),
        packet,
    };
    edge.send_json(Subtype::DEVICE_AUTH, &req).await;
    let (h, resp): (_, DeviceAuthResponse) = edge
        .recv_json(Subtype::DEVICE_AUTH, WAIT)
        .await
        .expect("a DeviceAuth response");
    assert_eq!(h.source.to_string(), "center");
    assert_eq!(resp.request_id, request_id);
    resp
}

fn reason(reply: &[u8]) -> String {
    let p = decode(reply).unwrap();
    assert_eq!(p.header.packet_type, PacketType::Heartbeat);
    String::from_utf8(p.data[1..].to_vec()).unwrap()
}

async fn renew(edge: &mut RawEdge, session_id: u64, session_epoch: u64) -> DeviceSessionRenew {
    let request_id = edge.next_id() + 1000;
    let req = DeviceSessionRenew {
        request_id,
        session_id,
        session_epoch,
        ..DeviceSessionRenew::default()
    };
    edge.send_json(Subtype::DEVICE_SESSION_RENEW, &req).await;
    let (_, resp): (_, DeviceSessionRenew) = edge
        .recv_json(Subtype::DEVICE_SESSION_RENEW, WAIT)
        .await
        .expect("a renew answer");
    assert_eq!(resp.request_id, request_id);
    resp
}

/// The next route delta's one operation.
async fn delta(edge: &mut RawEdge) -> RouteOperation {
    let (_, d): (_, RouteDelta) = edge
        .recv_json(Subtype::ROUTE_DELTA, WAIT)
        .await
        .expect("a route delta");
    assert_eq!(d.new_version, d.base_version + 1);
    assert_eq!(d.operations.len(), 1);
    d.operations[0].clone()
}

async fn metrics(server: &ServerHandle) -> String {
    let http = server.http_addr().unwrap();
    let (code, body) = tokio::task::spawn_blocking(move || {
        support::http(
            http,
            "GET /metrics HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n",
        )
    })
    .await
    .unwrap();
    assert_eq!(code, 200);
    body
}

fn a_proxied_login_gets_a_grant_the_direct_reply_and_a_route(env: &Env) {
    env.rt.block_on(async {
        let (server, tokens) = centre(env, &["edge-a"]).await;
        let packet = support::heartbeat("alice", 7, PW, b"0123456789abcdefghijklmnAABBCCDDEEFF");
        let expected = direct(&server, [127, 0, 0, 1], &packet).await;
        assert_eq!(reason_or_callsign(&expected), "BA1AA");
        let mut a = edge(&server, &tokens[0]).await;
        let before = wall_ms();
        let resp = auth(&mut a, "192.0.2.10", packet).await;
        assert!(resp.success, "{resp:?}");
        assert_eq!(resp.response_packet, expected, "the direct login's reply");
        let grant = resp.grant.unwrap();
        let r = &grant.route;
        assert_eq!(
            (r.username.as_str(), r.callsign.as_str(), r.ssid),
            ("alice", "BA1AA", 7)
        );
        assert_eq!((r.group_id, r.domain_id, r.session_epoch), (999, 999, 1));
        assert!(r.session_id != 0 && !r.disable_send && !r.disable_recv);
        assert_eq!(grant.dmrid, 4_600_001);
        assert!(grant.owner_id > 0);
        let life = grant.expires_at_ms - before;
        assert!((119_000..=121_000).contains(&life), "{life}");
        // The route reaches the owning edge's projection.
        match delta(&mut a).await {
            RouteOperation::Upsert { route } => assert_eq!(*route, grant.route),
            other => panic!("{other:?}"),
        }
        // A wrong password gets what a direct login gets.
        let wrong = support::heartbeat("bob", 3, "Wrong123", &[0; 24]);
        let expected = direct(&server, [127, 0, 0, 1], &wrong).await;
        let resp = auth(&mut a, "192.0.2.10", wrong).await;
        assert!(!resp.success && resp.grant.is_none());
        assert_eq!(resp.error, "invalid_password");
        assert_eq!(resp.response_packet, expected);
        assert_eq!(reason(&resp.response_packet), "invalid_password");
        // Type 1 and other packets are not proxied.
        let mut voice = support::heartbeat("alice", 7, PW, &[]);
        voice[48] = 5;
        let resp = auth(&mut a, "192.0.2.10", voice).await;
        assert_eq!(
            (
                resp.success,
                resp.error.as_str(),
                resp.response_packet.len()
            ),
            (false, "unsupported_packet_type", 0)
        );
        let m = metrics(&server).await;
        for line in [
            "petrel_reflector_interconnect_device_auth_granted_total 1",
            "petrel_reflector_interconnect_device_auth_rejected_total 1",
            "petrel_reflector_interconnect_device_auth_failed_total 1",
            "petrel_reflector_interconnect_device_sessions 1",
            "petrel_reflector_interconnect_node_session_limit_rejects_total{node=\"edge-a\"} 0",
        ] {
            assert!(m.contains(line), "{line} in\n{m}");
        }
        server.shutdown().await;
    });
}

/// The callsign of a success reply.
fn reason_or_callsign(reply: &[u8]) -> String {
    decode(reply)
        .unwrap()
        .header
        .callsign_str()
        .unwrap()
        .to_owned()
}

fn failures_forwarded_from_one_ip_ban_that_ip_only(env: &Env) {
    env.rt.block_on(async {
        let (server, tokens) = centre(env, &["edge-a"]).await;
        let mut a = edge(&server, &tokens[0]).await;
        for _ in 0..4 {
            let resp = auth(
                &mut a,
                "127.0.0.7",
                support::heartbeat("alice", 7, "Wrong123", &[]),
            )
            .await;
            assert_eq!(resp.error, "invalid_password");
        }
        let right = support::heartbeat("alice", 7, PW, &[]);
        let resp = auth(&mut a, "127.0.0.7", right.clone()).await;
        assert_eq!(resp.error, "too_many_failures");
        assert_eq!(reason(&resp.response_packet), "too_many_failures");
        // Another forwarded IP is not banned.
        let resp = auth(&mut a, "127.0.0.8", right.clone()).await;
        assert!(resp.success, "{resp:?}");
        // The ban is the server's: a direct login from the banned IP is
        // refused too.
        let reply = direct(&server, [127, 0, 0, 7], &right).await;
        assert_eq!(reason(&reply), "too_many_failures");
        server.shutdown().await;
    });
}

fn renew_extends_report_drops_and_a_second_edge_takes_the_device(env: &Env) {
    env.rt.block_on(async {
        let (server, tokens) = centre(env, &["edge-a", "edge-b"]).await;
        let mut a = edge(&server, &tokens[0]).await;
        let mut b = edge(&server, &tokens[1]).await;
        let packet = support::heartbeat("alice", 7, PW, &[0; 24]);
        let g1 = auth(&mut a, "192.0.2.1", packet.clone())
            .await
            .grant
            .unwrap();
        let (s1, e1) = (g1.route.session_id, g1.route.session_epoch);
        assert!(matches!(delta(&mut a).await, RouteOperation::Upsert { .. }));
        tokio::time::sleep(Duration::from_millis(20)).await;
        let renewed = renew(&mut a, s1, e1).await;
        assert!(renewed.success, "{renewed:?}");
        assert!(renewed.expires_at_ms > g1.expires_at_ms);
        // Another edge's renew of it is refused.
        let foreign = renew(&mut b, s1, e1).await;
        assert_eq!(
            (foreign.success, foreign.error.as_str()),
            (false, "session_not_owned")
        );
        // The device moves to edge-b: a new session, the next epoch; edge-a
        // is told and loses the route.
        let g2 = auth(&mut b, "192.0.2.2", packet).await.grant.unwrap();
        assert_ne!(g2.route.session_id, s1);
        assert_eq!(g2.route.session_epoch, e1 + 1);
        let (_, revoke): (_, DeviceSessionRevoke) = a
            .recv_json(Subtype::DEVICE_SESSION_REVOKE, WAIT)
            .await
            .expect("a revoke");
        assert_eq!(
            (
                revoke.session_id,
                revoke.session_epoch,
                revoke.reason.as_str()
            ),
            (s1, e1, "session_migrated")
        );
        assert_eq!(
            delta(&mut a).await,
            RouteOperation::Remove { session_id: s1 }
        );
        assert!(matches!(delta(&mut b).await, RouteOperation::Upsert { .. }));
        let stale = renew(&mut a, s1, e1).await;
        assert_eq!(stale.error, "session_not_owned");
        // edge-b reports it gone: ownership and route are dropped.
        let report = DeviceSessionReport {
            session_id: g2.route.session_id,
            session_epoch: g2.route.session_epoch,
            online: false,
            reason: "device_timeout".into(),
            reported_at_ms: wall_ms(),
            ..DeviceSessionReport::default()
        };
        b.send_json(Subtype::DEVICE_SESSION_REPORT, &report).await;
        assert_eq!(
            delta(&mut b).await,
            RouteOperation::Remove {
                session_id: g2.route.session_id
            }
        );
        let gone = renew(&mut b, g2.route.session_id, g2.route.session_epoch).await;
        assert_eq!(gone.error, "session_not_owned");
        let m = metrics(&server).await;
        for line in [
            "petrel_reflector_interconnect_device_owner_migrations_total 1",
            "petrel_reflector_interconnect_device_owner_reports_removed_total 1",
            "petrel_reflector_interconnect_device_owner_renewals_total 1",
            "petrel_reflector_interconnect_device_sessions 0",
        ] {
            assert!(m.contains(line), "{line} in\n{m}");
        }
        server.shutdown().await;
    });
}
