//! Type 1 app ("ghost") sessions over UDP (`specs/draarl-apps.md` §2):
//! login with every reject, uplink resolution, heartbeats, media both ways
//! with physical devices, replacement, expiry and deduplication. The
//! account store is a closure answering the core's login checks.

use rand::SeedableRng;

use super::*;
use crate::codec::AppLoginSuccess;
use crate::model::{AppGrant, AppReject, AppUser, Routing};

const IID: &str = "11111111-1111-4111-8111-111111111111";
const IID2: &str = "22222222-2222-4222-8222-222222222222";

fn app_user(id: i64, name: &str) -> AppUser {
    AppUser {
        user_id: id,
        username: name.into(),
        callsign: format!("BG7{id:03}"),
        is_admin: false,
    }
}

fn grant(id: i64, name: &str, tx: i64, rx: &[i64]) -> Result<AppGrant, AppReject> {
    Ok(AppGrant {
        user: app_user(id, name),
        routing: Routing::new(tx, rx.to_vec()),
    })
}

fn login_json(instance: &str) -> String {
    format!(
        r#"{{"version":1,"token":"tok","client_instance_id":"{instance}","capabilities":["multi_receive_v1","source_group_v1"]}}"#
    )
}

fn type1(dev_model: u8, data: &[u8]) -> Vec<u8> {
    let mut h = Header::new(PacketType::JwtAuth);
    h.dev_model = dev_model;
    encode(&h, data).unwrap()
}

fn ghost_sim(cfg: SessionConfig) -> Sim {
    let now = crate::test_clock::origin();
    Sim {
        r: Reflector::new(cfg, dir(), now)
            .with_rng(Box::new(rand_chacha::ChaCha8Rng::seed_from_u64(7))),
        now,
    }
}

/// A logged-in app session, as its client knows it.
#[derive(Debug, Clone)]
struct Ghost {
    src: &'static str,
    username: String,
    ssid: u8,
    tag: u32,
    success: AppLoginSuccess,
}

impl Ghost {
    fn packet(&self, t: PacketType, data: &[u8]) -> Vec<u8> {
        let mut h = Header::new(t);
        h.set_username(&self.username);
        h.ssid = self.ssid;
        h.dev_model = self.ssid;
        h.reserved = self.tag;
        encode(&h, data).unwrap()
    }
}

impl Sim {
    /// Sends a Type 1 and answers its check with `verdict`; returns the reply.
    fn app_login(
        &mut self,
        src: &str,
        dev_model: u8,
        data: &[u8],
        verdict: Result<AppGrant, AppReject>,
    ) -> Vec<u8> {
        self.r
            .handle_datagram(self.now, addr(src), &type1(dev_model, data));
        if let Some(c) = self.r.poll_app_login() {
            assert_eq!(c.request.token, "tok");
            assert_eq!(c.request.dev_model, dev_model);
            self.r.handle_app_login(self.now, c.id, verdict);
        }
        let t = self.r.poll_transmit().expect("a Type 1 reply");
        assert_eq!(t.dst, addr(src));
        assert!(self.r.poll_transmit().is_none());
        t.payload
    }

    /// A successful login whose session then proves its address with a heartbeat.
    fn ghost(
        &mut self,
        src: &'static str,
        instance: &str,
        verdict: Result<AppGrant, AppReject>,
    ) -> Ghost {
        let reply = self.app_login(src, 101, login_json(instance).as_bytes(), verdict);
        let p = decode(&reply).unwrap();
        assert_eq!(p.data[0], 0, "{:?}", String::from_utf8_lossy(p.data));
        let success: AppLoginSuccess = serde_json::from_slice(&p.data[1..]).unwrap();
        let g = Ghost {
            src,
            username: p.header.username_str().unwrap().to_owned(),
            ssid: p.header.ssid,
            tag: p.header.reserved,
            success,
        };
        assert!(self
            .send(src, &g.packet(PacketType::Heartbeat, &[0; 24]))
            .is_some());
        g
    }
}

fn app_reject_of(reply: &[u8], dev_model: u8) -> (u8, String) {
    let p = decode(reply).unwrap();
    let h = &p.header;
    assert_eq!(h.packet_type, PacketType::JwtAuth);
    assert_eq!(
        (h.dev_model, h.ssid, h.dmrid, h.reserved),
        (dev_model, dev_model, 0, 0)
    );
    assert_eq!(h.callsign_str(), Some(""));
    assert_eq!(h.password_bytes(), b"");
    (p.data[0], String::from_utf8(p.data[1..].to_vec()).unwrap())
}

fn reserved_of(packet: &[u8]) -> u32 {
    decode(packet).unwrap().header.reserved
}

#[test]
fn an_android_ghost_logs_in_heartbeats_talks_and_listens_with_a_physical_device() {
    let mut s = ghost_sim(SessionConfig::default());
    s.login("127.0.0.1:4000", "alice", 7);
    let reply = s.app_login(
        "127.0.0.1:5000",
        101,
        login_json(&IID.to_uppercase()).as_bytes(),
        grant(2, "bob", 999, &[]),
    );
    let p = decode(&reply).unwrap();
    let h = &p.header;
    assert_eq!(h.packet_type, PacketType::JwtAuth);
    assert_eq!(h.username_str(), Some("bob"));
    assert_eq!(h.callsign_str(), Some("BG7002"));
    assert_eq!((h.dev_model, h.ssid, h.dmrid), (101, 101, 0));
    assert_eq!(h.password_bytes(), b"");
    assert_eq!(p.data[0], 0);
    let ok: AppLoginSuccess = serde_json::from_slice(&p.data[1..]).unwrap();
    assert_eq!(ok.session_tag, h.reserved);
    assert_ne!(ok.session_tag, 0);
    assert_eq!(ok.client_instance_id, IID);
    assert_eq!((ok.tx_group_id, ok.rx_group_ids.clone()), (999, vec![999]));
    let id = uuid::Uuid::parse_str(&ok.session_id).unwrap();
    assert_eq!(id.get_version_num(), 4);
    assert_eq!(ok.session_id, ok.session_id.to_lowercase());
    assert_eq!(s.r.stats().app_logins_accepted, 1);

    let g = Ghost {
        src: "127.0.0.1:5000",
        username: "bob".into(),
        ssid: 101,
        tag: ok.session_tag,
        success: ok,
    };
    // Heartbeat: echoed with the callsign and Reserved 0 (§2.6).
    let gps = [7u8; 24];
    let hb_reply = s
        .send(g.src, &g.packet(PacketType::Heartbeat, &gps))
        .unwrap();
    let p = decode(&hb_reply).unwrap();
    assert_eq!(p.header.packet_type, PacketType::Heartbeat);
    assert_eq!((p.header.reserved, p.data), (0, &gps[..]));
    assert_eq!(p.header.callsign_str(), Some("BG7002"));
    assert_eq!(s.r.stats().ghost_heartbeats, 1);

    // The ghost talks: alice gets the frame with Reserved 0 and bob's identity.
    assert!(s
        .send(g.src, &g.packet(PacketType::Voice, b"opus"))
        .is_none());
    let f = s.r.poll_frame().unwrap();
    assert_eq!(f.snapshot.partitions.concat(), vec![addr("127.0.0.1:4000")]);
    assert_eq!(f.snapshot.aware.concat(), vec![addr(g.src)]);
    assert_eq!(f.exclude, addr(g.src));
    let fwd = decode(&f.packet).unwrap();
    assert_eq!(fwd.header.username_str(), Some("bob"));
    assert_eq!(fwd.header.callsign_str(), Some("BG7002"));
    assert_eq!(
        (fwd.header.ssid, fwd.header.dev_model, fwd.header.dmrid),
        (101, 101, 0)
    );
    assert_eq!((fwd.header.reserved, fwd.data), (0, &b"opus"[..]));
    // The floor is shared: alice is refused while bob holds it.
    s.advance(100);
    s.send(
        "127.0.0.1:4000",
        &media(PacketType::Voice, "alice", 7, b"a"),
    );
    assert!(s.r.poll_frame().is_none());
    assert_eq!(s.r.stats().floor_busy_drops, 1);

    // After 900 ms of silence alice talks; bob's copy carries group 999.
    s.advance(901);
    s.send(
        "127.0.0.1:4000",
        &media(PacketType::Voice, "alice", 7, b"a"),
    );
    let f = s.r.poll_frame().unwrap();
    assert_eq!(reserved_of(&f.packet), 0);
    let copy = f.session_packet.as_ref().unwrap();
    assert_eq!(reserved_of(copy), 999);
    assert_eq!(decode(copy).unwrap().header.username_str(), Some("alice"));
    assert_eq!(&copy[..86], &f.packet[..86]);
    assert_eq!(f.snapshot.aware.concat(), vec![addr(g.src)]);
    assert_eq!(f.exclude, addr("127.0.0.1:4000"));

    // Text is forwarded and stored under bob's (user, SSID).
    s.send(g.src, &g.packet(PacketType::Text, b"hello"));
    assert!(s.r.poll_frame().is_some());
    let texts: Vec<StoreEvent> = std::iter::from_fn(|| s.r.poll_event())
        .filter(|e| matches!(e, StoreEvent::Text { .. }))
        .collect();
    assert_eq!(
        texts,
        vec![StoreEvent::Text {
            device: (2, 101),
            group_id: 999,
            unix_ms: 0,
            text: b"hello".to_vec()
        }]
    );
    // Empty voice is not forwarded.
    s.advance(1_000);
    s.send(g.src, &g.packet(PacketType::Voice, b""));
    assert!(s.r.poll_frame().is_none());
    let _ = g.success;
}

#[test]
fn every_type1_reject_has_its_code_and_text() {
    let mut s = ghost_sim(SessionConfig {
        ghost_subscriptions: 2,
        ..SessionConfig::default()
    });
    let json = login_json(IID);
    fn expect(
        s: &mut Sim,
        src: &str,
        model: u8,
        data: &[u8],
        verdict: Result<AppGrant, AppReject>,
        want: (u8, &str),
    ) {
        let reply = s.app_login(src, model, data, verdict);
        assert_eq!(app_reject_of(&reply, model), (want.0, want.1.to_owned()));
    }
    let ok = || grant(2, "bob", 999, &[]);
    for (data, text) in [
        // A bare JWT as old clients sent (larger than the reject).
        (
            b"eyJhbGciOiJIUzI1NiJ9.eyJ1c2VybmFtZSI6ImJvYiJ9.c2lnbmF0dXJl".to_vec(),
            "ghost_protocol_upgrade_required",
        ),
        (
            br#"{"version":1,"token":"tok","client_instance_id":"hardware-id"}"#.to_vec(),
            "invalid_client_instance_id",
        ),
        (
            format!(r#"{{"version":1,"token":"tok","client_instance_id":"{IID}","capabilities":["source_group_v1"]}}"#)
                .into_bytes(),
            "ghost_capabilities_required",
        ),
    ] {
        expect(&mut s, "127.0.0.1:1", 101, &data, ok(), (1, text));
    }
    for (r, code, text) in [
        (AppReject::InvalidToken, 1, "Invalid or expired token"),
        (AppReject::UserNotFound, 2, "User not found"),
        (AppReject::UserDisabled, 3, "User is disabled"),
        (AppReject::UserNotApproved, 4, "User is not approved"),
    ] {
        expect(
            &mut s,
            "127.0.0.1:1",
            101,
            json.as_bytes(),
            Err(r),
            (code, text),
        );
        // Step 4 comes before the DevModel check.
        expect(
            &mut s,
            "127.0.0.1:1",
            105,
            json.as_bytes(),
            Err(r),
            (code, text),
        );
    }
    for model in [105, 100, 7, 0] {
        expect(
            &mut s,
            "127.0.0.1:1",
            model,
            json.as_bytes(),
            ok(),
            (5, "Invalid device model for UDP"),
        );
        expect(
            &mut s,
            "127.0.0.1:1",
            model,
            json.as_bytes(),
            Err(AppReject::PreferenceUnavailable),
            (5, "Invalid device model for UDP"),
        );
    }
    expect(
        &mut s,
        "127.0.0.1:1",
        102,
        json.as_bytes(),
        Err(AppReject::PreferenceUnavailable),
        (1, "client_preference_unavailable"),
    );
    // A stored routing over the subscription limit (2).
    expect(
        &mut s,
        "127.0.0.1:1",
        101,
        json.as_bytes(),
        grant(2, "bob", 1, &[2, 3]),
        (1, "client_preference_unavailable"),
    );
    // The endpoint is held by another live session.
    s.ghost("127.0.0.1:2", IID, grant(2, "bob", 999, &[]));
    expect(
        &mut s,
        "127.0.0.1:2",
        101,
        login_json(IID2).as_bytes(),
        grant(2, "bob", 999, &[]),
        (1, "ghost_session_registration_failed"),
    );
    assert_eq!(s.r.stats().ghost_registration_failures, 1);
    // Nothing was ever forwarded, and no ban: alice logs in from the same IP.
    assert!(s.r.poll_frame().is_none());
    s.login("127.0.0.1:3", "alice", 7);
}

#[test]
fn a_ninth_session_is_refused_with_the_counts() {
    let mut s = ghost_sim(SessionConfig::default());
    let srcs = [
        "127.0.0.1:6001",
        "127.0.0.1:6002",
        "127.0.0.1:6003",
        "127.0.0.1:6004",
        "127.0.0.1:6005",
        "127.0.0.1:6006",
        "127.0.0.1:6007",
        "127.0.0.1:6008",
    ];
    for (i, src) in srcs.iter().enumerate() {
        let iid = format!("11111111-1111-4111-8111-{:012}", i + 1);
        s.ghost(src, &iid, grant(2, "bob", 999, &[]));
    }
    let reply = s.app_login(
        "127.0.0.1:6009",
        101,
        login_json(IID2).as_bytes(),
        grant(2, "bob", 999, &[]),
    );
    assert_eq!(
        app_reject_of(&reply, 101),
        (1, "ghost_session_limit active=8 limit=8".into())
    );
    assert_eq!(s.r.stats().ghost_session_limit_rejects, 1);
    // Another account is not limited by bob's sessions.
    s.ghost("127.0.0.1:6010", IID2, grant(3, "carol", 999, &[]));
}

#[test]
fn malformed_padded_and_doubled_json_is_refused_without_a_check() {
    let mut s = ghost_sim(SessionConfig::default());
    let mut padded = login_json(IID).into_bytes();
    padded.extend_from_slice(&[0; 8]);
    let doubled = format!("{}{{}}", login_json(IID));
    for data in [padded.as_slice(), doubled.as_bytes()] {
        s.r.handle_datagram(s.now, addr("127.0.0.1:1"), &type1(101, data));
        assert!(s.r.poll_app_login().is_none());
        let reply = s.r.poll_transmit().unwrap();
        assert_eq!(
            app_reject_of(&reply.payload, 101),
            (1, "ghost_protocol_upgrade_required".into())
        );
    }
    // Requests smaller than the reject are refused without a reply
    // (amplification bound), but counted.
    for data in [&b"{\"version\":1"[..], b""] {
        s.r.handle_datagram(s.now, addr("127.0.0.1:1"), &type1(101, data));
        assert!(s.r.poll_app_login().is_none());
        assert!(s.r.poll_transmit().is_none());
    }
    assert_eq!(s.r.stats().app_replies_withheld, 2);
    assert_eq!(s.r.stats().app_login_rejects, 4);
    assert_eq!(s.r.app_logins_in_flight(), 0);
}

#[test]
fn unresolved_tagged_packets_are_dropped_and_counted_in_their_step() {
    let mut s = ghost_sim(SessionConfig::default());
    s.login("127.0.0.1:4000", "alice", 7);
    let g = s.ghost("127.0.0.1:32001", IID, grant(2, "bob", 999, &[]));
    let voice = |g: &Ghost| g.packet(PacketType::Voice, b"v");
    let mut wrong_tag = g.clone();
    wrong_tag.tag = g.tag.wrapping_add(1).max(1);
    let mut wrong_name = g.clone();
    wrong_name.username = "mallory".into();
    let mut wrong_ssid = g.clone();
    wrong_ssid.ssid = 102;
    for (src, packet) in [
        (g.src, voice(&wrong_tag)),
        (g.src, voice(&wrong_name)),
        (g.src, voice(&wrong_ssid)),
        ("127.0.0.1:32002", voice(&g)),
        ("127.0.0.1:32002", g.packet(PacketType::Heartbeat, &[])),
    ] {
        s.r.handle_datagram(s.now, addr(src), &packet);
        assert!(s.r.poll_transmit().is_none());
        assert!(s.r.poll_frame().is_none());
    }
    let st = s.r.stats();
    assert_eq!(
        (
            st.ghost_invalid_tags,
            st.ghost_identity_rejects,
            st.ghost_endpoint_rejects
        ),
        (1, 2, 2)
    );
    // The right packet from the right address still goes through.
    s.send(g.src, &voice(&g));
    assert!(s.r.poll_frame().is_some());
}

#[test]
fn untagged_reserved_ssids_get_a_reject_of_their_own_type() {
    let mut s = ghost_sim(SessionConfig::default());
    for (t, ssid) in [
        (PacketType::Voice, 101),
        (PacketType::Text, 105),
        (PacketType::Config, 255),
        (PacketType::Heartbeat, 100),
    ] {
        let mut h = Header::new(t);
        h.set_username("bob");
        h.ssid = ssid;
        // 24 bytes of DATA (an old app's GPS heartbeat): the reply is smaller.
        let reply = s
            .send("127.0.0.1:1", &encode(&h, &[0; 24]).unwrap())
            .unwrap();
        let p = decode(&reply).unwrap();
        assert_eq!(p.header.packet_type, t);
        assert_eq!(p.data, b"\x02reserved_ssid");
        assert_eq!(p.header.reserved, 0);
        // One byte of DATA: the reply would be larger, so none is sent.
        assert!(s.send("127.0.0.1:1", &encode(&h, b"x").unwrap()).is_none());
    }
    assert_eq!(s.r.stats().rejects_reserved_ssid, 8);
    assert_eq!(s.r.stats().app_replies_withheld, 4);
    // Tagged SSID 255 is dropped silently.
    let mut h = Header::new(PacketType::Voice);
    h.ssid = 255;
    h.reserved = 9;
    assert!(s.send("127.0.0.1:1", &encode(&h, b"x").unwrap()).is_none());
    assert_eq!(s.r.stats().reserved_tag_drops, 1);
}

#[test]
fn a_login_of_the_same_instance_replaces_the_session() {
    let mut s = ghost_sim(SessionConfig::default());
    let old = s.ghost("127.0.0.1:7001", IID, grant(2, "bob", 999, &[]));
    let new = s.ghost("127.0.0.1:7002", IID, grant(2, "bob", 999, &[]));
    assert_ne!(old.tag, new.tag);
    assert_ne!(old.success.session_id, new.success.session_id);
    assert_eq!(s.r.stats().ghost_replacements, 1);
    // The old tag stops resolving, even from its own address.
    s.r.handle_datagram(
        s.now,
        addr(old.src),
        &old.packet(PacketType::Heartbeat, &[]),
    );
    assert!(s.r.poll_transmit().is_none());
    assert_eq!(s.r.stats().ghost_invalid_tags, 1);
    // Another instance, or the same instance under another DevModel, coexists.
    s.ghost("127.0.0.1:7003", IID2, grant(2, "bob", 999, &[]));
    let reply = s.app_login(
        "127.0.0.1:7004",
        102,
        login_json(IID).as_bytes(),
        grant(2, "bob", 999, &[]),
    );
    assert_eq!(decode(&reply).unwrap().data[0], 0);
    assert_eq!(s.r.stats().ghost_replacements, 1);
}

#[test]
fn a_session_silent_for_more_than_20_s_expires() {
    let mut s = ghost_sim(SessionConfig::default());
    let g = s.ghost("127.0.0.1:8001", IID, grant(2, "bob", 999, &[]));
    s.advance(15_000);
    assert!(s
        .send(g.src, &g.packet(PacketType::Heartbeat, &[]))
        .is_some());
    s.advance(20_000);
    assert_eq!(s.r.stats().ghost_sessions_expired, 0);
    s.advance(5_000);
    assert_eq!(s.r.stats().ghost_sessions_expired, 1);
    assert!(s
        .send(g.src, &g.packet(PacketType::Heartbeat, &[]))
        .is_none());
    assert_eq!(s.r.stats().ghost_invalid_tags, 1);
    // Its address is free for a new login.
    s.ghost(g.src, IID2, grant(2, "bob", 999, &[]));
}

#[test]
fn overlapping_subscriptions_get_one_copy_with_the_source_group() {
    let mut s = ghost_sim(SessionConfig::default());
    // dave talks in group 1, linked with group 2 by virtual group 50.
    s.login("127.0.0.1:4000", "dave", 7);
    s.login("127.0.0.1:4001", "erin", 7);
    let g = s.ghost("127.0.0.1:9001", IID, grant(2, "bob", 1, &[2]));
    let h = s.ghost("127.0.0.1:9002", IID2, grant(3, "carol", 2, &[]));
    // A session that has not yet proved its address gets nothing.
    let reply = s.app_login(
        "127.0.0.1:9003",
        101,
        login_json("33333333-3333-4333-8333-333333333333").as_bytes(),
        grant(6, "frank", 1, &[2]),
    );
    assert_eq!(decode(&reply).unwrap().data[0], 0);
    s.send("127.0.0.1:4000", &media(PacketType::Voice, "dave", 7, b"v"));
    let f = s.r.poll_frame().unwrap();
    assert_eq!(f.exclude, addr("127.0.0.1:4000"));
    assert_eq!(
        f.snapshot.partitions.concat(),
        vec![addr("127.0.0.1:4000"), addr("127.0.0.1:4001")]
    );
    let mut aware = f.snapshot.aware.concat();
    aware.sort();
    assert_eq!(aware, vec![addr(g.src), addr(h.src)]);
    assert_eq!(reserved_of(f.session_packet.as_ref().unwrap()), 1);
    // Bob's own voice reaches carol and dave, not bob.
    s.advance(1_000);
    s.send(g.src, &g.packet(PacketType::Voice, b"v"));
    let f = s.r.poll_frame().unwrap();
    assert_eq!(f.exclude, addr(g.src));
    assert_eq!(reserved_of(f.session_packet.as_ref().unwrap()), 1);
}

#[test]
fn logins_waiting_too_long_or_beyond_the_bound_are_abandoned() {
    let mut s = ghost_sim(SessionConfig {
        app_logins_in_flight: 2,
        ..SessionConfig::default()
    });
    for port in 1..=3 {
        s.r.handle_datagram(
            s.now,
            addr(&format!("127.0.0.1:{port}")),
            &type1(101, login_json(IID).as_bytes()),
        );
    }
    assert_eq!(s.r.app_logins_in_flight(), 2);
    assert_eq!(s.r.stats().app_login_checks_evicted, 1);
    let checks: Vec<_> = std::iter::from_fn(|| s.r.poll_app_login()).collect();
    assert_eq!(checks.iter().map(|c| c.id).collect::<Vec<_>>(), vec![1, 2]);
    s.advance(10_001);
    s.advance(5_000);
    assert_eq!(s.r.app_logins_in_flight(), 0);
    assert_eq!(s.r.stats().app_login_checks_abandoned, 2);
    s.r.handle_app_login(s.now, 1, grant(2, "bob", 999, &[]));
    assert!(s.r.poll_transmit().is_none());
    assert_eq!(s.r.stats().app_login_results_unknown, 1);
}

/// "Last heard" tells the kinds apart: a UDP ghost's spurt is a ghost's, a
/// WebSocket session's a WebSocket's (the dashboard's device kind).
#[test]
fn talk_spurts_name_ghost_and_websocket_talkers() {
    use crate::core::{GhostRegistry, NewGhost};
    use crate::model::{DeviceKind, Endpoint, DEV_MODEL_WEB};
    use std::sync::Arc;

    let mut s = ghost_sim(SessionConfig::default());
    s.r.set_wall_clock(s.now, 1_000_000);
    let g = s.ghost("127.0.0.1:5000", IID, grant(2, "bob", 999, &[]));
    s.send(g.src, &g.packet(PacketType::Voice, b"v"));
    let start = s.r.poll_talk_spurt().expect("the ghost's spurt");
    assert_eq!(
        (start.device, start.kind, start.group_id),
        ((2, 101), DeviceKind::Ghost, 999)
    );

    // A web session of carol, registered as the WebSocket upgrade does.
    let conn = 42;
    let mut rng = rand_chacha::ChaCha8Rng::seed_from_u64(1);
    let registered = GhostRegistry::register(
        &mut s.r.shared.ghosts(),
        NewGhost {
            user: Arc::new(app_user(3, "carol")),
            dev_model: DEV_MODEL_WEB,
            client_instance_id: IID2.into(),
            capabilities: vec![],
            transport: Endpoint::WebSocket(conn),
            routing: Routing::new(999, vec![]),
        },
        s.now,
        1_000_000,
        &mut rng,
    );
    assert!(registered.is_ok());
    // The floor is bob's until it frees.
    s.advance(1_000);
    let mut h = Header::new(PacketType::Voice);
    h.set_username("carol");
    let packet = encode(&h, b"w").unwrap();
    s.r.handle_connection_packet(s.now, conn, &packet);
    let kinds: Vec<_> = std::iter::from_fn(|| s.r.poll_talk_spurt())
        .map(|e| (e.device, e.kind))
        .collect();
    assert!(
        kinds.contains(&((3, DEV_MODEL_WEB), DeviceKind::WebSocket)),
        "{kinds:?}"
    );
}
