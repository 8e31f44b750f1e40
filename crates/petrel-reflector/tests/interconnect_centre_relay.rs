//! A centre's voice relay between its edges over a real server with
//! `[interconnect]`, a real store and loopback TLS/UDP
//! (draarl-interconnect §4.3, §4.5, §4.6, §5.2, §5.4, §3.10): two edges
//! bound to their UDP addresses (DataBind request over TLS, proof over
//! UDP) and one unbound, each owning a device of group 999 through a real
//! DeviceAuth, and a centre-direct device in the same group.
//!
//! An upstream relay from edge A reaches edge B exactly once by UDP (a
//! valid RelayDownstream under B's key, hop 1, the route's domain), edge C
//! once over TLS, the centre-direct device once, and never edge A. Forged
//! tags, replays, stale or wrongly keyed envelopes, an unbound source
//! address, a wrong identity and voice without the lease deliver nothing
//! and are counted. Centre-direct voice reaches every edge once with
//! source `center`, under the same speaker lease as edge talkers. Edge
//! voice and text are recorded once, at the centre. Every
//! test runs on SQLite and PostgreSQL.

#![allow(clippy::unwrap_used)]

#[macro_use]
mod support;

use std::net::{IpAddr, SocketAddr};
use std::time::{Duration, Instant};

use petrel_reflector::codec::interconnect::messages::DeviceGrant;
use petrel_reflector::codec::interconnect::{
    open, Channel, EnvelopeHeader, Flags, NodeId, NodeKey, RelayFrame, RelayHeader, Subtype,
};
use petrel_reflector::codec::{decode, encode, Header, PacketType};
use petrel_reflector::model::{NodeToken, RecordingConfig, ServerConfig};
use petrel_reflector::runtime::interconnect::add_edge_node;
use petrel_reflector::runtime::server::ServerHandle;
use petrel_reflector::runtime::store::{Store, StoreOptions};
use tokio::net::UdpSocket;

use support::control_client::loopback_cfg;
use support::raw_edge::{wall_ms, RawEdge};
use support::Env;

on_every_backend!(
    an_upstream_relay_reaches_every_other_receiver_once,
    forged_stale_replayed_unbound_and_unleased_relays_deliver_nothing,
    centre_direct_voice_reaches_every_edge_with_source_center,
    edge_voice_and_text_are_recorded_once_at_the_centre,
);

const PW: &str = "Secret12";
const WAIT: Duration = Duration::from_secs(5);
const QUIET: Duration = Duration::from_millis(400);
/// The public group every account joins on a fresh store; its domain.
const DOMAIN: u64 = 999;

fn ip(last: u8) -> IpAddr {
    IpAddr::from([127, 0, 0, last])
}

/// A centre, edges A and B bound at 127.0.0.11 and .12, edge C unbound,
/// alice on A, bob on B, dave on C (all group 999), and carol logged in
/// directly from 127.0.0.31.
struct Cluster {
    server: ServerHandle,
    a: RawEdge,
    b: RawEdge,
    c: RawEdge,
    alice: DeviceGrant,
    carol: UdpSocket,
}

async fn cluster(env: &Env) -> Cluster {
    cluster_with(env, RecordingConfig::default()).await
}

async fn cluster_with(env: &Env, recording: RecordingConfig) -> Cluster {
    let store = support::open_cheap(&env.db).await;
    support::add_users(
        &store,
        [
            support::account("alice", "BA1AA".into(), 4_600_001, PW),
            support::account("bob", "BA1BB".into(), 4_600_002, PW),
            support::account("carol", "BA1CC".into(), 4_600_003, PW),
            support::account("dave", "BA1DD".into(), 4_600_004, PW),
        ],
    )
    .await;
    let mut tokens: Vec<NodeToken> = Vec::new();
    for n in ["edge-a", "edge-b", "edge-c"] {
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
        recording,
        ..support::udp_config(&env.db)
    };
    let server = ServerHandle::start(cfg).await.unwrap();
    let udp = server.local_addr();
    let mut edges = Vec::new();
    for t in &tokens {
        edges.push(
            RawEdge::connect(
                server.control_addr().unwrap(),
                t.pin.unwrap(),
                &t.credential,
            )
            .await,
        );
    }
    let mut c = edges.pop().unwrap();
    let mut b = edges.pop().unwrap();
    let mut a = edges.pop().unwrap();
    a.bind_udp(ip(11), udp).await;
    b.bind_udp(ip(12), udp).await;
    bound(&server, a.node, ip(11)).await;
    bound(&server, b.node, ip(12)).await;
    let alice = grant(&mut a, "alice").await;
    grant(&mut b, "bob").await;
    grant(&mut c, "dave").await;
    let carol = UdpSocket::bind(SocketAddr::new(ip(31), 0)).await.unwrap();
    carol
        .send_to(&support::heartbeat("carol", 7, PW, &[0; 24]), udp)
        .await
        .unwrap();
    let reply = recv(&carol, WAIT).await.expect("carol's login reply");
    assert_eq!(decode(&reply).unwrap().header.callsign_str(), Some("BA1CC"));
    Cluster {
        server,
        a,
        b,
        c,
        alice,
        carol,
    }
}

/// Waits until the centre bound `node`'s data address to `at`.
async fn bound(server: &ServerHandle, node: NodeId, at: IpAddr) {
    let data = server.control_server().unwrap().data_plane();
    let start = Instant::now();
    loop {
        let addr = data.lock().unwrap().data_address(node);
        if addr.is_some_and(|a| a.ip() == at) {
            return;
        }
        assert!(start.elapsed() < WAIT, "{node} not bound");
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
}

/// A real DeviceAuth of `name`-7 through `edge`; the grant (its route
/// delta is read, so the edge's projection version is known).
async fn grant(edge: &mut RawEdge, name: &str) -> DeviceGrant {
    let resp = edge
        .device_auth("192.0.2.1", support::heartbeat(name, 7, PW, &[0; 24]))
        .await;
    assert!(resp.success, "{resp:?}");
    edge.recv(Subtype::ROUTE_DELTA, WAIT)
        .await
        .expect("a route delta");
    resp.grant.unwrap()
}

async fn recv(sock: &UdpSocket, within: Duration) -> Option<Vec<u8>> {
    let mut buf = [0u8; 2048];
    match tokio::time::timeout(within, sock.recv_from(&mut buf)).await {
        Ok(Ok((n, _))) => Some(buf[..n].to_vec()),
        _ => None,
    }
}

/// A Type 4/5 packet of `name`-7 with `callsign`, Reserved `reserved`.
fn inner(t: PacketType, name: &str, callsign: &str, reserved: u32, data: &[u8]) -> Vec<u8> {
    let mut h = Header::new(t);
    h.set_username(name);
    h.set_callsign(callsign);
    h.ssid = 7;
    h.dev_model = 2;
    h.reserved = reserved;
    encode(&h, data).unwrap()
}

fn relay_of(g: &DeviceGrant, lease: u64) -> RelayHeader {
    RelayHeader {
        session_id: g.route.session_id,
        session_epoch: g.route.session_epoch,
        // The edge's own claim: the centre uses the route's domain.
        domain_id: 4242,
        required_projection_version: 1,
        speaker_lease_id: lease,
    }
}

/// Opens a downstream relay under `key` and checks the §4.6 envelope
/// rules for `to`; its relay header and inner packet.
fn downstream(
    datagram: &[u8],
    key: &NodeKey,
    channel: Channel,
    to: &RawEdge,
) -> (EnvelopeHeader, RelayHeader, Vec<u8>) {
    let env = open(datagram, key, channel).expect("a valid envelope under the target's key");
    let h = env.header;
    assert_eq!(h.subtype, Subtype::RELAY_DOWNSTREAM);
    assert_eq!(h.source, NodeId::CENTRE);
    assert_eq!((h.hop_count, h.node_session_id), (1, to.session_id));
    assert!(h.cluster_epoch != 0);
    let f = RelayFrame::parse(env.payload).unwrap();
    assert_eq!(f.header.required_projection_version, h.projection_version);
    assert!(h.projection_version >= 1, "the target's version");
    (h, f.header, f.inner.to_vec())
}

/// The next RelayDownstream edge C (unbound) gets over TLS.
async fn downstream_over_tls(c: &mut RawEdge) -> Option<(RelayHeader, Vec<u8>)> {
    let r = c.recv(Subtype::RELAY_DOWNSTREAM, WAIT).await?;
    assert_eq!((r.header.hop_count, r.header.source), (1, NodeId::CENTRE));
    let f = RelayFrame::parse(&r.payload).unwrap();
    Some((f.header, f.inner.to_vec()))
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

fn has(m: &str, line: &str) {
    assert!(m.contains(line), "{line} in\n{m}");
}

fn an_upstream_relay_reaches_every_other_receiver_once(env: &Env) {
    env.rt.block_on(async {
        let mut k = cluster(env).await;
        let udp = k.server.local_addr();
        for (t, lease_needed) in [(PacketType::Text, false), (PacketType::Voice, true)] {
            let lease = if lease_needed {
                let g =
                    k.a.claim_lease(
                        k.alice.route.session_id,
                        k.alice.route.session_epoch,
                        DOMAIN,
                    )
                    .await;
                assert_eq!(g.action, "grant", "{g:?}");
                g.lease_id
            } else {
                0
            };
            let sent = inner(t, "alice", "BA1AA", 77, b"relayed payload");
            let d = k.a.upstream(relay_of(&k.alice, lease), &sent);
            k.a.send_udp(&d, udp).await;
            let expected = {
                let mut e = sent.clone();
                e[86..90].fill(0);
                e
            };
            // Edge B, by UDP, once.
            let got = k.b.recv_udp(WAIT).await.expect("a downstream at edge B");
            let (_, h, got_inner) = downstream(&got, &k.b.key, Channel::Udp, &k.b);
            assert_eq!(
                (
                    h.session_id,
                    h.session_epoch,
                    h.domain_id,
                    h.speaker_lease_id
                ),
                (
                    k.alice.route.session_id,
                    k.alice.route.session_epoch,
                    DOMAIN,
                    lease
                )
            );
            assert_eq!(got_inner, expected, "inner as sent, Reserved cleared");
            assert!(k.b.recv_udp(QUIET).await.is_none(), "exactly once");
            // Edge C, not bound: over TLS.
            let (h, got_inner) = downstream_over_tls(&mut k.c)
                .await
                .expect("a downstream over TLS");
            assert_eq!((h.domain_id, got_inner), (DOMAIN, expected.clone()));
            // The centre-direct device, once.
            let local = recv(&k.carol, WAIT).await.expect("local delivery");
            assert_eq!(local, expected);
            assert!(recv(&k.carol, QUIET).await.is_none());
            // Never back to the source edge.
            assert!(k.a.recv_udp(QUIET).await.is_none());
            assert!(k.a.drain(Subtype::RELAY_DOWNSTREAM, QUIET).await.is_empty());
        }
        let m = metrics(&k.server).await;
        has(
            &m,
            "petrel_reflector_interconnect_relay_upstream_accepted_total 2",
        );
        has(
            &m,
            "petrel_reflector_interconnect_relay_downstream_udp_total 2",
        );
        has(
            &m,
            "petrel_reflector_interconnect_relay_downstream_control_total 2",
        );
        has(
            &m,
            "petrel_reflector_interconnect_relay_local_deliveries_total 2",
        );
        has(
            &m,
            "petrel_reflector_interconnect_node_in_packets_total{node=\"edge-a\"}",
        );
        k.server.shutdown().await;
    });
}

fn forged_stale_replayed_unbound_and_unleased_relays_deliver_nothing(env: &Env) {
    env.rt.block_on(async {
        let mut k = cluster(env).await;
        let udp = k.server.local_addr();
        let text = inner(PacketType::Text, "alice", "", 0, b"hi");
        // A replay: the first copy is delivered, the second is not.
        let d = k.a.upstream(relay_of(&k.alice, 0), &text);
        k.a.send_udp(&d, udp).await;
        assert!(k.b.recv_udp(WAIT).await.is_some(), "the first copy");
        assert!(recv(&k.carol, WAIT).await.is_some());
        downstream_over_tls(&mut k.c).await.unwrap();
        k.a.send_udp(&d, udp).await;
        // A forged tag.
        let mut forged = k.a.upstream(relay_of(&k.alice, 0), &text);
        *forged.last_mut().unwrap() ^= 1;
        k.a.send_udp(&forged, udp).await;
        // Sealed with another key.
        let h = k.a.header(Subtype::RELAY_UPSTREAM, Flags::default());
        let wrong = k.a.upstream_with(
            &h,
            relay_of(&k.alice, 0),
            &text,
            &NodeKey::new(&[9; 32]).unwrap(),
        );
        k.a.send_udp(&wrong, udp).await;
        // Sent 3 s ago.
        let mut h = k.a.header(Subtype::RELAY_UPSTREAM, Flags::default());
        h.sent_at_ms = wall_ms() - 3_000;
        let stale =
            k.a.upstream_with(&h, relay_of(&k.alice, 0), &text, &k.a.key.clone());
        k.a.send_udp(&stale, udp).await;
        // Valid, but from an address that is not the bound one.
        let valid = k.a.upstream(relay_of(&k.alice, 0), &text);
        let other = UdpSocket::bind(SocketAddr::new(ip(11), 0)).await.unwrap();
        other.send_to(&valid, udp).await.unwrap();
        // Valid envelope, but bob's identity in alice's session.
        let bob = inner(PacketType::Text, "bob", "", 0, b"hi");
        let d = k.a.upstream(relay_of(&k.alice, 0), &bob);
        k.a.send_udp(&d, udp).await;
        // Voice without the speaker lease.
        let voice = inner(PacketType::Voice, "alice", "", 0, &[1; 40]);
        let d = k.a.upstream(relay_of(&k.alice, 0), &voice);
        k.a.send_udp(&d, udp).await;
        // Nothing is delivered anywhere.
        assert!(k.b.recv_udp(Duration::from_millis(800)).await.is_none());
        assert!(recv(&k.carol, QUIET).await.is_none());
        assert!(k.c.drain(Subtype::RELAY_DOWNSTREAM, QUIET).await.is_empty());
        let m = metrics(&k.server).await;
        for line in [
            "petrel_reflector_interconnect_relay_upstream_accepted_total 1",
            "petrel_reflector_interconnect_relay_upstream_identity_drops_total 1",
            "petrel_reflector_interconnect_relay_upstream_lease_drops_total 1",
            "petrel_reflector_interconnect_node_replay_drops_total{node=\"edge-a\"} 1",
            "petrel_reflector_interconnect_node_invalid_auth_tags_total{node=\"edge-a\"} 2",
            "petrel_reflector_interconnect_node_expired_drops_total{node=\"edge-a\"} 1",
            "petrel_reflector_interconnect_node_unbound_address_drops_total{node=\"edge-a\"} 1",
            "petrel_reflector_interconnect_node_relay_rejects_total{node=\"edge-a\"} 2",
            "petrel_reflector_interconnect_bridge_invalid_type0_total 4",
        ] {
            has(&m, line);
        }
        k.server.shutdown().await;
    });
}

fn centre_direct_voice_reaches_every_edge_with_source_center(env: &Env) {
    env.rt.block_on(async {
        let mut k = cluster(env).await;
        let udp = k.server.local_addr();
        let voice = inner(PacketType::Voice, "carol", "", 0, &[3; 40]);
        k.carol.send_to(&voice, udp).await.unwrap();
        let mut seen = Vec::new();
        for edge in [&k.a, &k.b] {
            let got = edge
                .recv_udp(WAIT)
                .await
                .expect("a downstream from the centre");
            let (_, h, got_inner) = downstream(&got, &edge.key, Channel::Udp, edge);
            assert_eq!(h.domain_id, DOMAIN);
            assert!(h.session_id >= 1 << 63, "a centre-direct source session");
            assert!(h.speaker_lease_id != 0, "under the speaker lease");
            let p = decode(&got_inner).unwrap();
            assert_eq!(p.header.username_str(), Some("carol"));
            assert_eq!(
                p.header.callsign_str(),
                Some("BA1CC"),
                "the forwarding rewrite"
            );
            assert_eq!(
                (p.header.packet_type, p.header.reserved),
                (PacketType::Voice, 0)
            );
            seen.push(h.speaker_lease_id);
            assert!(edge.recv_udp(QUIET).await.is_none(), "exactly once");
        }
        assert_eq!(seen[0], seen[1]);
        let (h, _) = downstream_over_tls(&mut k.c)
            .await
            .expect("over TLS to edge C");
        assert_eq!(h.speaker_lease_id, seen[0]);
        // Carol holds the domain's lease: alice's claim through edge A is
        // denied until it is idle.
        let deny =
            k.a.claim_lease(
                k.alice.route.session_id,
                k.alice.route.session_epoch,
                DOMAIN,
            )
            .await;
        assert_eq!(deny.action, "deny", "{deny:?}");
        assert!(deny.retry_after_ms > 0);
        let m = metrics(&k.server).await;
        has(
            &m,
            "petrel_reflector_interconnect_relay_centre_frames_total 1",
        );
        k.server.shutdown().await;
    });
}

fn edge_voice_and_text_are_recorded_once_at_the_centre(env: &Env) {
    let dir = std::env::temp_dir().join(format!("petrel-centre-rec-{}", env.label));
    let recording = RecordingConfig {
        enabled: true,
        dir: dir.to_str().unwrap().into(),
        ..RecordingConfig::default()
    };
    env.rt.block_on(async {
        let mut k = cluster_with(env, recording).await;
        let udp = k.server.local_addr();
        let text = inner(PacketType::Text, "alice", "", 0, b"hello");
        let d = k.a.upstream(relay_of(&k.alice, 0), &text);
        k.a.send_udp(&d, udp).await;
        assert!(
            recv(&k.carol, WAIT).await.is_some(),
            "the text is delivered"
        );
        let lease =
            k.a.claim_lease(
                k.alice.route.session_id,
                k.alice.route.session_epoch,
                DOMAIN,
            )
            .await
            .lease_id;
        for n in 0u8..6 {
            let voice =
                petrel_reflector::codec::merge_frames([&[n; 20][..], &[n + 100; 21][..]]).unwrap();
            let packet = inner(PacketType::Voice, "alice", "BA1AA", 0, &voice);
            let d = k.a.upstream(relay_of(&k.alice, lease), &packet);
            k.a.send_udp(&d, udp).await;
            assert!(recv(&k.carol, WAIT).await.is_some(), "frame {n} delivered");
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
        let store = Store::open(&env.db, StoreOptions::default()).await.unwrap();
        let start = Instant::now();
        let rows = loop {
            let rows = store.recent_recordings(999, 10).await.unwrap();
            if !rows.is_empty() || start.elapsed() > WAIT {
                break rows;
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        };
        // One recording of the twelve frames, once (local delivery and the
        // downstream copies record nothing).
        assert_eq!(rows.len(), 1, "{rows:?}");
        assert_eq!(rows[0].1, 12 * 60);
        let file = std::fs::read(dir.join(&rows[0].0)).unwrap();
        let frames = petrel_reflector::codec::decode_raw(&file).unwrap();
        assert_eq!(
            (frames.len(), frames[0], frames[11]),
            (12, &[0u8; 20][..], &[105u8; 21][..])
        );
        let messages = store.recent_messages(999, 10).await.unwrap();
        assert_eq!(messages.len(), 1, "{messages:?}");
        assert_eq!(
            (
                messages[0].1.as_str(),
                messages[0].2,
                messages[0].3.as_slice()
            ),
            ("alice", 7, &b"hello"[..])
        );
        tokio::time::sleep(Duration::from_millis(500)).await;
        assert_eq!(store.recent_recordings(999, 10).await.unwrap().len(), 1);
        store.close().await;
        k.server.shutdown().await;
    });
    let _ = std::fs::remove_dir_all(&dir);
}
