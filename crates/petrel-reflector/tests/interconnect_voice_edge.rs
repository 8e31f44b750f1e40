//! Edge reflectors against a scripted centre, over loopback (draarl-
//! interconnect §3.6, §3.8, §3.10, §4.5, §5.1, §5.3, §6.1): devices log in
//! through an edge (the scripted centre checks a fixed password and
//! grants), heartbeats are answered by the edge, voice and text fan out
//! locally without the sender and go upstream exactly once over UDP from
//! the device socket (bound by the DataBind proof), downstream from the
//! centre reaches every local receiver, a second edge gets what the first
//! sends, and without the centre the edge keeps local traffic for its
//! grace period only.
//!
//! The scripted centre is the real control server, route sync, lease table
//! and data plane with the least glue: a test of the edge, not of the
//! centre (that is `interconnect_voice.rs`).

#![allow(clippy::unwrap_used)]

#[macro_use]
mod support;

use std::collections::HashMap;
use std::net::{SocketAddr, UdpSocket as StdUdp};
use std::sync::atomic::{AtomicBool, Ordering::Relaxed};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use petrel_reflector::codec::interconnect::messages::{
    DeviceAuthRequest, DeviceAuthResponse, DeviceGrant, DeviceRoute, SpeakerLease,
};
use petrel_reflector::codec::interconnect::{Flags, NodeId, RelayFrame, Subtype};
use petrel_reflector::codec::{decode, encode, Header, PacketType, CALLSIGN_LEN, PASSWORD_LEN};
use petrel_reflector::core::interconnect::{
    ControlSend, DataPlane, DownstreamTarget, LeaseTable, LinkState, Path, Verdict,
};
use petrel_reflector::model::{InterconnectConfig, NodeCredential};
use petrel_reflector::runtime::interconnect::{
    CentreEvent, CentreRoutes, CentreSender, ControlServer, EdgeServer, NodeAuthority, TlsIdentity,
};
use serde::Serialize;

use support::control_client::credential;
use support::edge_devices::{bound, edge_config, frame, metrics, ready_edge, until, Device, WAIT};
use support::raw_edge::wall_ms;
const DOMAIN: u64 = 7;
const PASSWORD: &str = "secret1";

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap()
}

/// What the scripted centre saw and decides.
struct Script {
    routes: CentreRoutes,
    leases: LeaseTable,
    next_session: u64,
    /// Session id → (owning edge, route).
    sessions: HashMap<u64, (NodeId, DeviceRoute)>,
    /// Every RelayUpstream accepted: (edge, session, lease id, inner).
    upstream: Vec<(NodeId, u64, u64, Vec<u8>)>,
    /// Downstream datagrams sent by UDP.
    downstream_sent: usize,
}

/// A centre of the least logic: fixed password, one domain, leases from
/// the real table, every upstream relayed to every other edge.
struct ScriptedCentre {
    server: ControlServer,
    udp: SocketAddr,
    script: Arc<Mutex<Script>>,
    stop: Arc<AtomicBool>,
    task: tokio::task::JoinHandle<()>,
}

fn answer(req: &Header, data: &[u8], callsign: Option<&str>) -> Vec<u8> {
    let mut h = req.clone();
    h.device_password = [0; PASSWORD_LEN];
    h.callsign = [0; CALLSIGN_LEN];
    h.reserved = 0;
    match callsign {
        Some(c) => {
            h.set_callsign(c);
            encode(&h, data).unwrap()
        }
        None => {
            let mut reject = vec![3];
            reject.extend_from_slice(b"invalid_password");
            encode(&h, &reject).unwrap()
        }
    }
}

impl ScriptedCentre {
    async fn start(identity: &TlsIdentity, nodes: &[&NodeCredential], epoch: u64) -> Self {
        Self::start_at(
            SocketAddr::from(([127, 0, 0, 1], 0)),
            None,
            identity,
            nodes,
            epoch,
        )
        .await
    }

    async fn start_at(
        control: SocketAddr,
        udp: Option<SocketAddr>,
        identity: &TlsIdentity,
        nodes: &[&NodeCredential],
        epoch: u64,
    ) -> Self {
        let mut authority = NodeAuthority::default();
        for c in nodes {
            authority = authority.with_static_token(c.node_id(), c.expose());
        }
        let cfg = InterconnectConfig {
            enabled: true,
            control_listen: control,
            ..InterconnectConfig::default()
        };
        let (tx, mut events) = tokio::sync::mpsc::channel(1024);
        let server =
            ControlServer::bind(&cfg, identity.server_config().unwrap(), authority, Some(tx))
                .await
                .unwrap();
        let sock = StdUdp::bind(udp.unwrap_or(SocketAddr::from(([127, 0, 0, 1], 0)))).unwrap();
        sock.set_read_timeout(Some(Duration::from_millis(20)))
            .unwrap();
        let udp = sock.local_addr().unwrap();
        let script = Arc::new(Mutex::new(Script {
            routes: CentreRoutes::new(epoch),
            leases: LeaseTable::new(64),
            next_session: 100,
            sessions: HashMap::new(),
            upstream: Vec::new(),
            downstream_sent: 0,
        }));
        let stop = Arc::new(AtomicBool::new(false));
        let sender = server.sender();
        {
            let (sender, script, stop) = (sender.clone(), Arc::clone(&script), Arc::clone(&stop));
            std::thread::spawn(move || udp_loop(&sock, &sender, &script, &stop));
        }
        let task = {
            let script = Arc::clone(&script);
            tokio::spawn(async move {
                let mut tick = tokio::time::interval(Duration::from_millis(250));
                loop {
                    tokio::select! {
                        _ = tick.tick() => lock(&script).routes.handle_timeout(&sender, Instant::now()),
                        e = events.recv() => match e {
                            Some(e) => handle_event(&sender, &script, e),
                            None => return,
                        },
                    }
                }
            })
        };
        Self {
            server,
            udp,
            script,
            stop,
            task,
        }
    }

    /// Waits until `node`'s UDP address is bound (§4.5).
    async fn bound(&self, node: &str) {
        bound(&self.server.data_plane(), node).await;
    }

    /// A ready edge of this centre as `cred` (trusting `identity`), with
    /// the local grace `grace`.
    async fn edge(
        &self,
        identity: &TlsIdentity,
        cred: &NodeCredential,
        grace: Duration,
    ) -> EdgeServer {
        let control = self.server.local_addr();
        ready_edge(edge_config(
            control,
            self.udp,
            cred,
            identity.fingerprint(),
            grace,
        ))
        .await
    }

    fn upstream(&self) -> Vec<(NodeId, u64, u64, Vec<u8>)> {
        lock(&self.script).upstream.clone()
    }

    async fn shutdown(self) {
        self.stop.store(true, Relaxed);
        self.task.abort();
        self.server.shutdown().await;
        // The UDP thread ends within its read timeout.
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

fn send<T: Serialize>(sender: &CentreSender, node: NodeId, subtype: Subtype, msg: &T) {
    let id = lock(&sender.message_ids()).next_id();
    let send = ControlSend {
        subtype,
        flags: Flags::CONTROL.with(Flags::ACK),
        message_id: id,
        cluster_epoch: 0,
        projection_version: 0,
        payload: serde_json::to_vec(msg).unwrap(),
    };
    sender.send_control(node, &send).unwrap();
}

fn handle_event(sender: &CentreSender, script: &Mutex<Script>, e: CentreEvent) {
    let now = Instant::now();
    let mut s = lock(script);
    match e {
        CentreEvent::NodeUp {
            node_id,
            session_id,
            ..
        } => s.routes.node_up(node_id, session_id),
        CentreEvent::NodeReady {
            node_id,
            session_id,
        } => s.routes.node_ready(sender, now, node_id, session_id),
        CentreEvent::NodeDown {
            node_id,
            session_id,
        } => {
            s.routes.node_down(node_id, session_id);
            s.sessions.retain(|_, (n, _)| *n != node_id);
        }
        CentreEvent::Envelope {
            node_id,
            session_id,
            header,
            payload,
            ..
        } => {
            if s.routes
                .handle_envelope(sender, now, node_id, session_id, &header, &payload)
            {
                return;
            }
            match header.subtype {
                Subtype::DEVICE_AUTH => {
                    let req: DeviceAuthRequest = serde_json::from_slice(&payload).unwrap();
                    let p = decode(&req.packet).unwrap();
                    let user = p.header.username_str().unwrap().to_owned();
                    if p.header.password_bytes() != PASSWORD.as_bytes() {
                        let resp = DeviceAuthResponse {
                            request_id: req.request_id,
                            error: "invalid_password".into(),
                            response_packet: answer(&p.header, p.data, None),
                            ..DeviceAuthResponse::default()
                        };
                        send(sender, node_id, Subtype::DEVICE_AUTH, &resp);
                        return;
                    }
                    s.next_session += 1;
                    let id = s.next_session;
                    let route = DeviceRoute {
                        session_id: id,
                        device_id: i64::try_from(id).unwrap(),
                        username: user,
                        callsign: format!("BG{id}"),
                        ssid: p.header.ssid,
                        dev_model: p.header.dev_model,
                        group_id: 7,
                        domain_id: DOMAIN,
                        session_epoch: 1,
                        ..DeviceRoute::default()
                    };
                    s.routes
                        .upsert(sender, now, node_id, route.clone())
                        .unwrap();
                    s.sessions.insert(id, (node_id, route.clone()));
                    let resp = DeviceAuthResponse {
                        request_id: req.request_id,
                        success: true,
                        response_packet: answer(&p.header, p.data, Some(&route.callsign)),
                        grant: Some(DeviceGrant {
                            route,
                            owner_id: 1,
                            dmrid: 4_600_000,
                            expires_at_ms: wall_ms() + 120_000,
                            ..DeviceGrant::default()
                        }),
                        ..DeviceAuthResponse::default()
                    };
                    send(sender, node_id, Subtype::DEVICE_AUTH, &resp);
                }
                Subtype::SPEAKER_LEASE => {
                    let msg: SpeakerLease = serde_json::from_slice(&payload).unwrap();
                    let ids = sender.message_ids();
                    let reply = s.leases.handle_message(
                        &mut lock(&ids),
                        now,
                        node_id,
                        session_id,
                        &msg,
                        true,
                    );
                    if let Some(reply) = reply {
                        sender.send_control(node_id, &reply).unwrap();
                    }
                }
                _ => {}
            }
        }
    }
}

/// The centre's UDP port: DataBind proofs bind, RelayUpstream is recorded
/// and relayed to every other edge by UDP.
fn udp_loop(sock: &StdUdp, sender: &CentreSender, script: &Mutex<Script>, stop: &AtomicBool) {
    let data: Arc<Mutex<DataPlane>> = sender.data_plane();
    let mut buf = [0u8; 2048];
    while !stop.load(Relaxed) {
        let Ok((n, src)) = sock.recv_from(&mut buf) else {
            continue;
        };
        let now = Instant::now();
        let mut d = lock(&data);
        if !matches!(
            d.handle_datagram(now, wall_ms(), src, &buf[..n]),
            Verdict::Queued
        ) {
            continue;
        }
        let mut out = Vec::new();
        while let Some(a) = d.poll_accepted(now) {
            let Some(relay) = a.relay() else { continue };
            let mut s = lock(script);
            s.upstream.push((
                a.node_id,
                relay.header.session_id,
                relay.header.speaker_lease_id,
                relay.inner.to_vec(),
            ));
            let targets: Vec<DownstreamTarget> = sender
                .nodes()
                .into_iter()
                .map(|n| DownstreamTarget {
                    node_id: n.node_id,
                    projection_version: s.routes.version(n.node_id).unwrap_or(0),
                })
                .collect();
            let frame = RelayFrame {
                header: relay.header,
                inner: relay.inner,
            };
            let epoch = s.routes.cluster_epoch();
            d.relay_downstream(
                &mut lock(&sender.message_ids()),
                wall_ms(),
                epoch,
                a.node_id,
                0,
                &frame,
                targets,
            )
            .unwrap();
            out.extend(std::iter::from_fn(|| d.poll_transmit()));
        }
        drop(d);
        for o in out {
            if let Path::Udp(to) = o.path {
                sock.send_to(&o.datagram, to).unwrap();
                lock(script).downstream_sent += 1;
            }
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn devices_log_in_through_an_edge_and_talk_locally_and_upstream() {
    let identity = TlsIdentity::generate().unwrap();
    let cred = credential("edge-a", 1);
    let centre = ScriptedCentre::start(&identity, &[&cred], 41).await;
    let e = centre.edge(&identity, &cred, Duration::from_secs(15)).await;
    centre.bound("edge-a").await;
    let at = e.local_addr();
    let alice = Device::new(11, "alice", 1, PASSWORD).await;
    let bob = Device::new(12, "bob", 1, PASSWORD).await;
    let mallory = Device::new(13, "mallory", 1, "wrong12").await;
    // Logins: the centre's answer carries the callsign; a wrong password
    // gets the ordinary reject.
    let a = alice.login(at).await;
    assert!(a.callsign_str().is_some_and(|c| c.starts_with("BG")));
    assert!(a.password_bytes().is_empty());
    bob.login(at).await;
    let m = mallory.login(at).await;
    assert_eq!(m.callsign_str(), Some(""));
    // The next heartbeat is answered by the edge, not the centre.
    let before = e.stats().session.auth_requests;
    assert_eq!(alice.login(at).await.callsign_str(), a.callsign_str());
    assert_eq!(e.stats().session.auth_requests, before);
    // Text: bob gets it once, rewritten; alice does not; one upstream.
    alice.send(at, PacketType::Text, b"hello bob").await;
    let got = bob
        .received(PacketType::Text, Duration::from_millis(300))
        .await;
    assert_eq!(got, vec![b"hello bob".to_vec()]);
    assert!(alice
        .received(PacketType::Text, Duration::from_millis(100))
        .await
        .is_empty());
    until("the text upstream", || centre.upstream().len() == 1).await;
    let (node, _, lease, inner) = &centre.upstream()[0];
    assert_eq!(node.to_string(), "edge-a");
    assert_eq!(*lease, 0);
    let inner = decode(inner).unwrap();
    assert!(inner.header.password_bytes().is_empty());
    assert_eq!(inner.header.callsign_str(), a.callsign_str());
    // Voice: the first frames wait for the lease, then all arrive in
    // order at bob and go upstream once each with the lease id; bob cannot
    // talk over alice meanwhile.
    for n in 1..=5 {
        alice.send(at, PacketType::Voice, &frame(n)).await;
        tokio::time::sleep(Duration::from_millis(60)).await;
    }
    bob.send(at, PacketType::Voice, &frame(9)).await;
    let got = bob
        .received(PacketType::Voice, Duration::from_millis(500))
        .await;
    assert_eq!(got, (1..=5).map(frame).collect::<Vec<_>>());
    assert!(alice
        .received(PacketType::Voice, Duration::from_millis(100))
        .await
        .is_empty());
    until("five voice upstreams", || centre.upstream().len() == 6).await;
    let up = centre.upstream();
    assert!(up[1..].iter().all(|(_, _, lease, _)| *lease != 0));
    let s = e.stats();
    assert_eq!(s.sessions, 2);
    assert_eq!(s.session.auth_failed, 1);
    assert_eq!(s.lease.other_talker_drops, 1);
    assert_eq!(s.device.upstream_frames, 6);
    assert_eq!(s.output.udp_errors, 0);
    // /metrics carries the counters.
    let body = metrics(e.http_addr().unwrap()).await;
    assert!(
        body.contains("petrel_reflector_edge_sessions 2\n"),
        "{body}"
    );
    assert!(body.contains("petrel_reflector_edge_device_upstream_frames_total 6\n"));
    assert!(body.contains("petrel_reflector_edge_link_state 2\n"));
    e.shutdown().await;
    centre.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn voice_crosses_to_a_second_edge_once_and_never_comes_back() {
    let identity = TlsIdentity::generate().unwrap();
    let (ca, cb) = (credential("edge-a", 1), credential("edge-b", 2));
    let centre = ScriptedCentre::start(&identity, &[&ca, &cb], 42).await;
    let grace = Duration::from_secs(15);
    let ea = centre.edge(&identity, &ca, grace).await;
    let eb = centre.edge(&identity, &cb, grace).await;
    centre.bound("edge-a").await;
    centre.bound("edge-b").await;
    let alice = Device::new(21, "alice", 1, PASSWORD).await;
    let bob = Device::new(22, "bob", 1, PASSWORD).await;
    let carol = Device::new(23, "carol", 1, PASSWORD).await;
    alice.login(ea.local_addr()).await;
    bob.login(eb.local_addr()).await;
    carol.login(eb.local_addr()).await;
    for n in 1..=4 {
        alice
            .send(ea.local_addr(), PacketType::Voice, &frame(n))
            .await;
        tokio::time::sleep(Duration::from_millis(60)).await;
    }
    let want: Vec<Vec<u8>> = (1..=4).map(frame).collect();
    assert_eq!(
        bob.received(PacketType::Voice, Duration::from_millis(500))
            .await,
        want
    );
    assert_eq!(
        carol
            .received(PacketType::Voice, Duration::from_millis(100))
            .await,
        want
    );
    assert!(alice
        .received(PacketType::Voice, Duration::from_millis(100))
        .await
        .is_empty());
    // Edge b delivered the downstream and sent nothing upstream; edge a got
    // nothing back.
    let (sa, sb) = (ea.stats(), eb.stats());
    assert_eq!(sb.device.downstream_frames, 4);
    assert_eq!(sb.device.upstream_frames, 0);
    assert_eq!(sa.device.downstream_frames, 0);
    assert_eq!(sa.reader.downstream, 0);
    assert_eq!(centre.upstream().len(), 4);
    assert_eq!(lock(&centre.script).downstream_sent, 4);
    ea.shutdown().await;
    eb.shutdown().await;
    centre.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn without_the_centre_an_edge_talks_locally_for_its_grace_only() {
    let identity = TlsIdentity::generate().unwrap();
    let cred = credential("edge-g", 3);
    let centre = ScriptedCentre::start(&identity, &[&cred], 43).await;
    let e = centre.edge(&identity, &cred, Duration::from_secs(2)).await;
    let at = e.local_addr();
    let alice = Device::new(31, "alice", 1, PASSWORD).await;
    let bob = Device::new(32, "bob", 1, PASSWORD).await;
    alice.login(at).await;
    bob.login(at).await;
    centre.shutdown().await;
    e.wait_for_state(WAIT, |s| matches!(s, LinkState::Disconnected(_)))
        .await
        .expect("in grace");
    let upstream_before = e.stats().device.upstream_frames;
    for n in 1..=3 {
        alice.send(at, PacketType::Voice, &frame(n)).await;
    }
    assert_eq!(
        bob.received(PacketType::Voice, Duration::from_millis(300))
            .await,
        (1..=3).map(frame).collect::<Vec<_>>()
    );
    assert_eq!(e.stats().device.upstream_frames, upstream_before);
    assert_eq!(e.stats().link.local_voice, 3);
    // Past the grace period the sessions are gone and nothing is relayed.
    e.wait_for_state(WAIT, |s| s == LinkState::Expired)
        .await
        .expect("grace over");
    assert_eq!(e.stats().sessions, 0);
    alice.send(at, PacketType::Voice, &frame(7)).await;
    assert!(bob
        .received(PacketType::Voice, Duration::from_millis(300))
        .await
        .is_empty());
    e.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn forged_type0_from_elsewhere_is_charged_to_the_device_rate_limits() {
    use petrel_reflector::codec::interconnect::{seal, Channel, EnvelopeHeader, NodeKey};
    let identity = TlsIdentity::generate().unwrap();
    let cred = credential("edge-f", 4);
    let centre = ScriptedCentre::start(&identity, &[&cred], 44).await;
    let e = centre.edge(&identity, &cred, Duration::from_secs(15)).await;
    // Type 0 shaped, sealed with a key nobody holds.
    let header = EnvelopeHeader {
        source: NodeId::CENTRE,
        subtype: Subtype::RELAY_DOWNSTREAM,
        flags: Flags::default(),
        cluster_epoch: 44,
        projection_version: 0,
        node_session_id: 1,
        message_id: 1,
        sent_at_ms: wall_ms(),
        hop_count: 1,
        key_epoch: 1,
    };
    let forged = seal(
        &header,
        &[0; 200],
        &NodeKey::new(&[9; 32]).unwrap(),
        Channel::Udp,
    )
    .unwrap();
    let sock = StdUdp::bind("127.0.0.91:0").unwrap();
    for _ in 0..400 {
        sock.send_to(&forged, e.local_addr()).unwrap();
    }
    until("the forged datagrams read", || {
        e.stats().reader.type0 == 400
    })
    .await;
    until("the rate-limit counters", || {
        let s = e.stats();
        s.reader.type0_not_consumed + s.ingress.rate_limit_drops == 400
    })
    .await;
    let s = e.stats();
    // Over the per-IP:port budget (150 pps): most were dropped before the
    // tag was computed; none was accepted.
    assert!(s.ingress.rate_limit_drops >= 200, "{:?}", s.ingress);
    assert_eq!(s.reader.type0_accepted, 0);
    assert_eq!(s.device.downstream_frames, 0);
    e.shutdown().await;
    centre.shutdown().await;
}
