//! The interconnect control plane over real loopback TCP and TLS 1.3
//! (draarl-interconnect §3.1–§3.4, §3.6 step 1, §6.1, §7): the handshake
//! and its refusals, certificate pinning, the hello deadline, the pending
//! and per-IP limits, one session per node, and the edge's reconnect.

#![allow(clippy::unwrap_used)]

mod support;

use std::net::SocketAddr;
use std::time::{Duration, Instant};

use petrel_reflector::codec::interconnect::{
    encode_frame, ControlMessage, FrameReader, Offer, MAX_CONTROL_FRAME,
};
use petrel_reflector::core::interconnect::LinkState;
use petrel_reflector::model::{Backend, InterconnectConfig, NodeCredential, ServerConfig};
use petrel_reflector::runtime::interconnect::{
    add_edge_node, CentreTrust, EdgeControl, EdgeControlConfig, EdgeEvent, EdgeNode, TlsIdentity,
    DEFAULT_SERVER_NAME,
};
use petrel_reflector::runtime::server::ServerHandle;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;
use tokio_rustls::client::TlsStream;

use support::control_client::{
    centre, connect_from, credential, hello, loopback_cfg, stats_when, tls_connect,
};
use support::ScratchStore;

const WAIT: Duration = Duration::from_secs(10);

fn edge_cfg(addr: SocketAddr, cred: &NodeCredential, pin: [u8; 32]) -> EdgeControlConfig {
    EdgeControlConfig {
        centre: addr.to_string(),
        server_name: DEFAULT_SERVER_NAME.to_owned(),
        credential: cred.clone(),
        trust: CentreTrust::Pin(pin),
        offer: Offer::MINIMUM,
        heartbeat: Duration::from_millis(200),
    }
}

/// Sends `msg` and returns the reply frame's raw JSON (`None` when the
/// connection closed first).
async fn exchange(tls: &mut TlsStream<TcpStream>, msg: &ControlMessage) -> Option<String> {
    tls.write_all(&encode_frame(msg, MAX_CONTROL_FRAME).unwrap())
        .await
        .unwrap();
    read_frame(tls).await
}

async fn read_frame(tls: &mut TlsStream<TcpStream>) -> Option<String> {
    let mut len = [0u8; 4];
    tls.read_exact(&mut len).await.ok()?;
    let mut body = vec![0u8; u32::from_be_bytes(len) as usize];
    tls.read_exact(&mut body).await.ok()?;
    // The frame must also decode as a ControlMessage.
    let mut reader = FrameReader::new();
    let mut framed = len.to_vec();
    framed.extend_from_slice(&body);
    assert_eq!(reader.feed(&framed).unwrap().len(), 1);
    Some(String::from_utf8(body).unwrap())
}

/// Whether the peer closes the connection within `within`.
async fn closed_within(tls: &mut TlsStream<TcpStream>, within: Duration) -> bool {
    let mut b = [0u8; 1];
    matches!(
        tokio::time::timeout(within, tls.read(&mut b)).await,
        Ok(Ok(0) | Err(_))
    )
}

#[tokio::test]
async fn right_token_opens_one_session_that_both_sides_share() {
    let identity = TlsIdentity::generate().unwrap();
    let cred = credential("edge-a", 1);
    let server = centre(&loopback_cfg(), &identity, &[&cred]).await;
    let edge =
        EdgeControl::start(edge_cfg(server.local_addr(), &cred, identity.fingerprint())).unwrap();
    let mut events = edge.take_events().unwrap();
    let link = edge.wait_for_link(WAIT, |_| true).await.expect("connected");
    assert_eq!(link.node_id.to_string(), "edge-a");
    assert_eq!(
        (link.protocol, link.features.0, link.connects),
        (1, 0x17, 1)
    );
    let nodes = server.nodes();
    assert_eq!(nodes.len(), 1);
    assert_eq!(nodes[0].session_id, link.session_id, "one session id");
    // Heartbeats sealed with the edge's key pass the centre's HMAC check:
    // both hold the same session key.
    let s = stats_when(&server, WAIT, |s| s.heartbeats >= 2).await;
    assert_eq!((s.auth_ok, s.active_nodes, s.type0_dropped), (1, 1, 0));
    assert!(server.nodes()[0].last_heartbeat_ms > 0);
    // And the centre's envelopes pass the edge's.
    let env = petrel_reflector::runtime::interconnect::ControlEnvelope {
        subtype: petrel_reflector::codec::interconnect::Subtype::DEVICE_SESSION_REVOKE,
        flags: petrel_reflector::codec::interconnect::Flags::CONTROL,
        cluster_epoch: 7,
        projection_version: 0,
    };
    let id = server
        .send_envelope(link.node_id, &env, br#"{"session_id":1}"#)
        .unwrap();
    let got = tokio::time::timeout(WAIT, async {
        loop {
            if let Some(EdgeEvent::Envelope {
                header, payload, ..
            }) = events.recv().await
            {
                return (header, payload);
            }
        }
    })
    .await
    .unwrap();
    assert_eq!((got.0.message_id, got.0.cluster_epoch), (id, 7));
    assert_eq!(got.0.node_session_id, link.session_id);
    assert_eq!(got.1, br#"{"session_id":1}"#);
    assert_eq!(edge.stats().type0_dropped, 0);
    // A DataBind request over TLS is answered with a challenge (§3.6 step 3).
    let bind = petrel_reflector::runtime::interconnect::ControlEnvelope {
        subtype: petrel_reflector::codec::interconnect::Subtype::DATA_BIND,
        ..env
    };
    edge.send_envelope(&bind, br#"{"action":"request"}"#)
        .unwrap();
    let challenge = tokio::time::timeout(WAIT, async {
        loop {
            if let Some(EdgeEvent::Envelope {
                header, payload, ..
            }) = events.recv().await
            {
                if header.subtype == bind.subtype {
                    return payload;
                }
            }
        }
    })
    .await
    .unwrap();
    assert!(String::from_utf8(challenge)
        .unwrap()
        .starts_with(r#"{"action":"challenge","challenge":""#));
    stats_when(&server, WAIT, |s| s.data_bind_challenges == 1).await;
    edge.shutdown().await;
    let s = stats_when(&server, WAIT, |s| s.active_nodes == 0).await;
    assert!(server.nodes().is_empty(), "{s:?}");
}

#[tokio::test]
async fn wrong_token_gets_node_auth_error_without_the_token() {
    let identity = TlsIdentity::generate().unwrap();
    let cred = credential("edge-a", 1);
    let server = centre(&loopback_cfg(), &identity, &[&cred]).await;
    let wrong = credential("edge-a", 2);
    let mut tls = tls_connect(server.local_addr(), identity.fingerprint()).await;
    let reply = exchange(&mut tls, &hello("edge-a", wrong.expose()))
        .await
        .unwrap();
    assert_eq!(
        reply,
        r#"{"kind":"node_auth_error","error":"node authentication failed"}"#
    );
    assert!(closed_within(&mut tls, WAIT).await);
    // An unknown node and the reserved id get the same answer.
    for (node, token) in [("edge-zz", cred.expose()), ("center", cred.expose())] {
        let mut tls = tls_connect(server.local_addr(), identity.fingerprint()).await;
        let reply = exchange(&mut tls, &hello(node, token)).await.unwrap();
        assert!(reply.contains("node authentication failed"), "{reply}");
        assert!(!reply.contains(&token[20..]), "token echoed: {reply}");
    }
    // Bad negotiation is a protocol error.
    let mut tls = tls_connect(server.local_addr(), identity.fingerprint()).await;
    let mut old = hello("edge-a", cred.expose());
    old.min_protocol = 2;
    old.max_protocol = 3;
    let reply = exchange(&mut tls, &old).await.unwrap();
    assert!(reply.contains("node_protocol_error"), "{reply}");
    let s = server.stats();
    assert_eq!(
        (s.auth_failed, s.protocol_rejected, s.auth_ok),
        (3, 1, 0),
        "{s:?}"
    );
    // The edge client reports the refusal and keeps retrying.
    let edge = EdgeControl::start(edge_cfg(
        server.local_addr(),
        &wrong,
        identity.fingerprint(),
    ))
    .unwrap();
    let start = Instant::now();
    while edge.stats().handshake_failures == 0 {
        assert!(start.elapsed() < WAIT);
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    assert!(edge.link().is_none());
}

#[tokio::test]
async fn a_wrong_pin_or_another_certificate_is_refused_before_the_hello() {
    let identity = TlsIdentity::generate().unwrap();
    let other = TlsIdentity::generate().unwrap();
    let cred = credential("edge-a", 1);
    let server = centre(&loopback_cfg(), &identity, &[&cred]).await;
    // The token pins another certificate (or the centre changed its own).
    let edge =
        EdgeControl::start(edge_cfg(server.local_addr(), &cred, other.fingerprint())).unwrap();
    let start = Instant::now();
    while edge.stats().tls_failures < 2 {
        assert!(start.elapsed() < WAIT, "{:?}", edge.stats());
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    edge.shutdown().await;
    let s = stats_when(&server, WAIT, |s| s.tls_failures >= 2).await;
    // No hello ever reached the centre.
    assert_eq!(
        (
            s.auth_ok,
            s.auth_failed,
            s.auth_rate_rejected,
            s.protocol_rejected
        ),
        (0, 0, 0, 0)
    );
    // CA roots without the centre's certificate refuse it too.
    let ca = std::env::temp_dir().join(format!("petrel-ca-{}.pem", std::process::id()));
    std::fs::write(&ca, other_ca_pem()).unwrap();
    let trust = CentreTrust::from_ca_file(ca.to_str().unwrap()).unwrap();
    std::fs::remove_file(&ca).unwrap();
    let edge = EdgeControl::start(EdgeControlConfig {
        trust,
        ..edge_cfg(server.local_addr(), &cred, [0; 32])
    })
    .unwrap();
    let start = Instant::now();
    while edge.stats().tls_failures == 0 {
        assert!(start.elapsed() < WAIT);
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    assert_eq!(server.stats().auth_ok, 0);
}

/// A CA certificate unrelated to the centre's.
fn other_ca_pem() -> String {
    let mut params = rcgen::CertificateParams::new(vec!["ca.example".to_owned()]).unwrap();
    params.is_ca = rcgen::IsCa::Ca(rcgen::BasicConstraints::Unconstrained);
    let key = rcgen::KeyPair::generate().unwrap();
    let cert = params.self_signed(&key).unwrap();
    let der = cert.der();
    use base64::Engine as _;
    let b64 = base64::engine::general_purpose::STANDARD.encode(der.as_ref());
    let body: Vec<&str> = b64
        .as_bytes()
        .chunks(64)
        .map(|c| std::str::from_utf8(c).unwrap())
        .collect();
    format!(
        "-----BEGIN CERTIFICATE-----\n{}\n-----END CERTIFICATE-----\n",
        body.join("\n")
    )
}

#[tokio::test]
async fn a_silent_client_is_closed_at_the_hello_deadline() {
    let identity = TlsIdentity::generate().unwrap();
    let server = centre(&loopback_cfg(), &identity, &[]).await;
    let mut tls = tls_connect(server.local_addr(), identity.fingerprint()).await;
    let start = Instant::now();
    stats_when(&server, WAIT, |s| s.pending_handshakes == 1).await;
    assert!(closed_within(&mut tls, Duration::from_secs(12)).await);
    let waited = start.elapsed();
    assert!(
        waited >= Duration::from_secs(9) && waited < Duration::from_secs(12),
        "{waited:?}"
    );
    let s = stats_when(&server, WAIT, |s| s.handshake_timeouts == 1).await;
    assert_eq!(s.pending_handshakes, 0);
}

#[tokio::test]
async fn the_pending_cap_evicts_and_the_per_ip_limit_refuses() {
    let identity = TlsIdentity::generate().unwrap();
    let cred = credential("edge-a", 1);
    let cfg = InterconnectConfig {
        max_pending_handshakes: 2,
        auth_attempts_per_minute_per_ip: 2,
        ..loopback_cfg()
    };
    let server = centre(&cfg, &identity, &[&cred]).await;
    let addr = server.local_addr();
    // Cap 2, so one pending slot per /24: a second connection from
    // 127.0.0.x closes the first.
    let mut pending_a = tls_connect(addr, identity.fingerprint()).await;
    let pending_b = tls_connect(addr, identity.fingerprint()).await;
    assert!(
        closed_within(&mut pending_a, WAIT).await,
        "a gives way to b"
    );
    let s = stats_when(&server, WAIT, |s| s.pending_prefix_limited == 1).await;
    assert_eq!(s.pending_handshakes, 1);
    // Another /24 takes the second slot; a third /24 finds the table full
    // and the oldest (b) gives way.
    let other = connect_from([127, 0, 1, 1], addr).await;
    stats_when(&server, WAIT, |s| s.pending_handshakes == 2).await;
    let third = connect_from([127, 0, 2, 1], addr).await;
    let s = stats_when(&server, WAIT, |s| s.pending_evicted == 1).await;
    assert_eq!((s.pending_handshakes, s.pending_prefix_limited), (2, 1));
    let mut pending_b = pending_b;
    assert!(closed_within(&mut pending_b, WAIT).await, "b gives way");
    drop((pending_b, other, third));
    stats_when(&server, WAIT, |s| s.pending_handshakes == 0).await;
    // Two well-formed hellos per minute from 127.0.0.1; the third is refused
    // even with the right token. Stay clear of a minute boundary.
    let second = support_wall_second();
    if second >= 50 {
        tokio::time::sleep(Duration::from_secs(61 - second)).await;
    }
    for token in [
        credential("edge-a", 9).expose(),
        credential("edge-a", 8).expose(),
    ] {
        let mut tls = tls_connect(addr, identity.fingerprint()).await;
        let reply = exchange(&mut tls, &hello("edge-a", token)).await.unwrap();
        assert!(reply.contains("node authentication failed"));
    }
    let mut tls = tls_connect(addr, identity.fingerprint()).await;
    let reply = exchange(&mut tls, &hello("edge-a", cred.expose()))
        .await
        .unwrap();
    assert_eq!(
        reply,
        r#"{"kind":"node_auth_error","error":"node authentication failed"}"#
    );
    let s = server.stats();
    assert_eq!(
        (s.auth_failed, s.auth_rate_rejected, s.auth_ok),
        (2, 1, 0),
        "{s:?}"
    );
}

fn support_wall_second() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_secs()
        % 60
}

#[tokio::test]
async fn a_second_session_of_a_node_replaces_the_first_and_max_nodes_holds() {
    let identity = TlsIdentity::generate().unwrap();
    let a = credential("edge-a", 1);
    let b = credential("edge-b", 2);
    let cfg = InterconnectConfig {
        max_nodes: 1,
        ..loopback_cfg()
    };
    let server = centre(&cfg, &identity, &[&a, &b]).await;
    let addr = server.local_addr();
    let ok = |reply: &str| serde_json::from_str::<ControlMessage>(reply).unwrap();
    let mut first = tls_connect(addr, identity.fingerprint()).await;
    let r1 = ok(&exchange(&mut first, &hello("edge-a", a.expose()))
        .await
        .unwrap());
    assert_eq!(r1.kind, "node_auth_ok");
    assert_eq!(r1.key_epoch, 1);
    assert_eq!(r1.key.len(), 43, "32 key bytes, unpadded base64");
    // Another node does not fit in max_nodes = 1.
    let mut other = tls_connect(addr, identity.fingerprint()).await;
    let r = exchange(&mut other, &hello("edge-b", b.expose()))
        .await
        .unwrap();
    assert_eq!(
        r,
        r#"{"kind":"node_auth_error","error":"node capacity reached"}"#
    );
    // The same node again needs no slot and replaces the first session.
    let mut second = tls_connect(addr, identity.fingerprint()).await;
    let r2 = ok(&exchange(&mut second, &hello("edge-a", a.expose()))
        .await
        .unwrap());
    assert_eq!(r2.kind, "node_auth_ok");
    assert_ne!(r2.session_id, r1.session_id);
    assert_ne!(r2.key, r1.key);
    assert!(closed_within(&mut first, WAIT).await, "the first is closed");
    let s = stats_when(&server, WAIT, |s| {
        s.sessions_replaced == 1 && s.auth_ok == 2
    })
    .await;
    assert_eq!((s.auth_ok, s.active_nodes, s.max_nodes_rejected), (2, 1, 1));
    let nodes = server.nodes();
    assert_eq!(nodes.len(), 1);
    assert_eq!(nodes[0].session_id, r2.session_id);
    assert!(!closed_within(&mut second, Duration::from_millis(300)).await);
}

#[tokio::test]
async fn the_edge_reconnects_after_the_centre_restarts() {
    let identity = TlsIdentity::generate().unwrap();
    let cred = credential("edge-r", 3);
    let server = centre(&loopback_cfg(), &identity, &[&cred]).await;
    let addr = server.local_addr();
    let edge = EdgeControl::start(edge_cfg(addr, &cred, identity.fingerprint())).unwrap();
    let first = edge.wait_for_link(WAIT, |_| true).await.unwrap();
    server.shutdown().await;
    let start = Instant::now();
    while edge.link().is_some() {
        assert!(start.elapsed() < WAIT, "the edge notices the loss");
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    // Down for a while: the edge keeps trying with backoff.
    tokio::time::sleep(Duration::from_millis(800)).await;
    let failures = edge.stats().connect_failures;
    assert!(failures >= 1, "{:?}", edge.stats());
    let again = centre(
        &InterconnectConfig {
            control_listen: addr,
            ..loopback_cfg()
        },
        &identity,
        &[&cred],
    )
    .await;
    let second = edge
        .wait_for_link(WAIT, |l| l.session_id != first.session_id)
        .await
        .expect("reconnected");
    assert_eq!(second.connects, 2);
    assert_eq!(again.nodes()[0].session_id, second.session_id);
    stats_when(&again, WAIT, |s| s.heartbeats >= 1).await;
    edge.shutdown().await;
}

/// End to end with the store: `add_edge_node` makes a pinned token, a
/// centre started from a config with `[interconnect]` accepts it, and
/// `/metrics`' counters show the node.
#[test]
fn an_enrolled_edge_connects_to_a_configured_centre() {
    let rt = tokio::runtime::Runtime::new().unwrap();
    rt.block_on(async {
        let Some(scratch) = ScratchStore::create(Backend::Sqlite, "interconnect_e2e")
            .await
            .unwrap()
        else {
            return;
        };
        let db = scratch.location().to_owned();
        let store = support::open_cheap(&db).await;
        let token = add_edge_node(&store, Some("edge-e2e"), &loopback_cfg())
            .await
            .unwrap();
        assert!(token.expose().starts_with("draarl-node.edge-e2e."));
        let generated = add_edge_node(&store, None, &loopback_cfg()).await.unwrap();
        assert_eq!(generated.credential.node_id().len(), "edge-".len() + 24);
        assert_eq!(generated.pin, token.pin, "one centre certificate");
        store.close().await;
        let cfg = ServerConfig {
            listen: SocketAddr::from(([127, 0, 0, 1], 0)),
            db: db.clone(),
            http_listen: None,
            interconnect: loopback_cfg(),
            ..ServerConfig::default()
        };
        let server = ServerHandle::start(cfg).await.unwrap();
        let control = server.control_addr().unwrap();
        let edge =
            EdgeControl::start(edge_cfg(control, &token.credential, token.pin.unwrap())).unwrap();
        let link = edge.wait_for_link(WAIT, |_| true).await.expect("connected");
        assert_eq!(link.node_id.to_string(), "edge-e2e");
        // The edge node sends node_ready; the centre's dispatcher answers
        // with the snapshot and counts the ACK (§3.6 steps 5–6).
        let node = EdgeNode::spawn_default(edge).unwrap();
        node.wait_for_state(WAIT, |s| s == LinkState::Ready)
            .await
            .expect("ready");
        // The centre counts the session just after its reply is written.
        let start = Instant::now();
        let c = loop {
            let c = server.stats().interconnect.unwrap();
            if c.auth_ok == 1 || start.elapsed() > WAIT {
                break c;
            }
            tokio::time::sleep(Duration::from_millis(10)).await;
        };
        assert_eq!((c.auth_ok, c.active_nodes), (1, 1));
        let start = Instant::now();
        while server.stats().interconnect_routes.unwrap().acks_accepted == 0
            && start.elapsed() < WAIT
        {
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
        let metrics = petrel_reflector::runtime::http::render_metrics(&server.stats());
        for line in [
            "petrel_reflector_interconnect_active_nodes 1",
            "petrel_reflector_interconnect_route_snapshots_sent_total 1",
            "petrel_reflector_interconnect_route_acks_accepted_total 1",
            "petrel_reflector_interconnect_route_node_up_implied_total 0",
        ] {
            assert!(metrics.contains(line), "{line} in {metrics}");
        }
        drop(node);
        server.shutdown().await;
        scratch.remove().await.unwrap();
    });
}

/// Seals a control envelope from `node` on a raw client's session.
fn envelope_frame(
    node: &str,
    auth_ok: &ControlMessage,
    key: &[u8],
    message_id: u64,
    subtype: u8,
    flags: u16,
) -> ControlMessage {
    use petrel_reflector::codec::interconnect::{
        seal, Channel, EnvelopeHeader, Flags, NodeId, NodeKey, Subtype,
    };
    let sent_at_ms = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_millis() as i64;
    let header = EnvelopeHeader {
        source: NodeId::new(node).unwrap(),
        subtype: Subtype(subtype),
        flags: Flags(flags),
        cluster_epoch: 0,
        projection_version: 0,
        node_session_id: auth_ok.session_id,
        message_id,
        sent_at_ms,
        hop_count: 0,
        key_epoch: 1,
    };
    let sealed = seal(
        &header,
        b"{}",
        &NodeKey::new(key).unwrap(),
        Channel::Control,
    )
    .unwrap();
    ControlMessage::type0(&sealed, message_id)
}

#[tokio::test]
async fn forged_and_critical_envelopes_and_the_control_budget() {
    use base64::Engine as _;
    let identity = TlsIdentity::generate().unwrap();
    let cred = credential("edge-a", 1);
    let cfg = InterconnectConfig {
        control_soft_pps_per_node: 2,
        control_hard_pps_per_node: 4,
        ..loopback_cfg()
    };
    let server = centre(&cfg, &identity, &[&cred]).await;
    let mut tls = tls_connect(server.local_addr(), identity.fingerprint()).await;
    let ok: ControlMessage = serde_json::from_str(
        &exchange(&mut tls, &hello("edge-a", cred.expose()))
            .await
            .unwrap(),
    )
    .unwrap();
    let key = base64::engine::general_purpose::STANDARD_NO_PAD
        .decode(&ok.key)
        .unwrap();
    let send = |m: ControlMessage| encode_frame(&m, MAX_CONTROL_FRAME).unwrap();
    // Twelve legacy heartbeats in one write, then four frames of bad JSON:
    // at most 4 frames per second pass the budget, the rest are dropped
    // and counted at their length prefix, unparsed, so the bad JSON (past
    // the budget: the burst starts early in a one-second window) does not
    // end the session.
    let mut burst = Vec::new();
    for _ in 0..12 {
        burst.extend(send(ControlMessage::new("node_heartbeat")));
    }
    for _ in 0..4 {
        burst.extend_from_slice(&[0, 0, 0, 9]);
        burst.extend_from_slice(b"{not json");
    }
    let ms = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .subsec_millis();
    if ms > 500 {
        tokio::time::sleep(Duration::from_millis(u64::from(1050 - ms))).await;
    }
    tls.write_all(&burst).await.unwrap();
    let s = stats_when(&server, WAIT, |s| {
        s.legacy_heartbeats + s.control_hard_limit_drops == 16
    })
    .await;
    assert_eq!(
        (s.legacy_heartbeats, s.frame_errors, s.active_nodes),
        (4, 0, 1),
        "{s:?}"
    );
    assert!(s.control_soft_limit_events >= 1, "{s:?}");
    // Wait for a fresh one-second window.
    tokio::time::sleep(Duration::from_millis(1100)).await;
    // A heartbeat sealed with the session key passes; one sealed with
    // another key is dropped (HMAC), as is a replay of the first.
    let good = envelope_frame("edge-a", &ok, &key, 1, 0x05, 0x08);
    let forged = envelope_frame("edge-a", &ok, &[9u8; 32], 2, 0x05, 0x08);
    let mut pair = send(good.clone());
    pair.extend(send(forged));
    pair.extend(send(good));
    tls.write_all(&pair).await.unwrap();
    let s = stats_when(&server, WAIT, |s| s.type0_dropped + s.payload_errors == 3).await;
    assert_eq!(
        (s.type0_received, s.type0_dropped, s.payload_errors),
        (3, 2, 1),
        "{s:?}"
    );
    // An unknown subtype flagged CRITICAL closes the session with a
    // protocol error.
    tokio::time::sleep(Duration::from_millis(1100)).await;
    let critical = envelope_frame("edge-a", &ok, &key, 3, 0x7e, 0x18);
    tls.write_all(&send(critical)).await.unwrap();
    let reply = read_frame(&mut tls).await.unwrap();
    assert_eq!(
        reply,
        r#"{"kind":"node_protocol_error","error":"unsupported critical Type 0 subtype"}"#
    );
    assert!(closed_within(&mut tls, WAIT).await);
    let s = stats_when(&server, WAIT, |s| s.active_nodes == 0).await;
    assert_eq!(s.unsupported_subtype_drops, 1);
}
