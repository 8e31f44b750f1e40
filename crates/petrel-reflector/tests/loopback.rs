//! Integration tests on real loopback sockets: scripted clients written from
//! the spec (draarl-v1 §2, §3, §7.2) against a running reflector. Every
//! client binds its own 127.0.0.x address, as the reference benchmark does.
//!
//! Every test runs once per store backend: on a fresh SQLite file, and on a
//! fresh PostgreSQL schema when `PETREL_TEST_PG_URL` is set (see
//! `tests/support/backends.rs`; `PETREL_REQUIRE_PG=1` makes a
//! missing URL a failure). The store is removed afterwards, pass or fail.
#![allow(clippy::unwrap_used)]

use std::net::{SocketAddr, UdpSocket};
use std::time::Duration;

use petrel_reflector::codec::{decode, encode, Header, PacketType};
use petrel_reflector::model::{FanoutConfig, ServerConfig};
use petrel_reflector::runtime::server::ServerHandle;
use petrel_reflector::runtime::store::{Store, StoreOptions};

#[macro_use]
mod support;
use support::{http, Env};

const PW: &str = "Bench123";

on_every_backend!(
    login_exchange_voice_and_text_and_rejections,
    repeated_failures_ban_and_spoofed_voice_is_dropped,
    overload_drops_whole_frames_and_stays_bounded,
    membership_change_elsewhere_drops_no_frames,
    metrics_healthz_and_admin_api,
    voice_is_recorded_as_raw_files,
    each_device_keeps_its_order_across_ingress_shards,
    a_text_flood_is_limited_and_costs_no_voice,
);

/// Fills the empty store with `users` accounts (cheap Argon2 for speed) and
/// the extra groups 1 and 2.
fn seed(env: &Env, users: &[&str]) {
    env.rt.block_on(async {
        let store = support::open_cheap(&env.db).await;
        let accounts = users
            .iter()
            .enumerate()
            .map(|(i, u)| support::account(u, format!("BT{i:05}"), 9_000_000 + i as u32, PW));
        support::add_users(&store, accounts).await;
        store.add_group("one", false, Some(1)).await.unwrap();
        store.add_group("two", false, Some(2)).await.unwrap();
        store.close().await;
    });
}

fn start(env: &Env, fanout: FanoutConfig) -> ServerHandle {
    let cfg = ServerConfig {
        fanout,
        ..support::udp_config(&env.db)
    };
    env.rt.block_on(ServerHandle::start(cfg)).unwrap()
}

struct Client {
    sock: UdpSocket,
    server: SocketAddr,
    name: String,
    ssid: u8,
}

impl Client {
    fn new(ip: [u8; 4], server: SocketAddr, name: &str, ssid: u8) -> Self {
        let sock = UdpSocket::bind(SocketAddr::from((ip, 0))).unwrap();
        sock.set_read_timeout(Some(Duration::from_millis(300)))
            .unwrap();
        Self {
            sock,
            server,
            name: name.into(),
            ssid,
        }
    }

    fn header(&self, t: PacketType, pw: &str) -> Header {
        let mut h = Header::new(t);
        h.set_username(&self.name);
        h.set_password(pw);
        h.ssid = self.ssid;
        h.dev_model = 2;
        h
    }

    /// Heartbeat with 24 zero GPS bytes and a MAC (as the reference bench).
    fn heartbeat(&self, pw: &str, mac: &str) -> Option<(String, Vec<u8>)> {
        let mut data = vec![0u8; 24];
        data.extend_from_slice(mac.as_bytes());
        self.sock
            .send_to(
                &encode(&self.header(PacketType::Heartbeat, pw), &data).unwrap(),
                self.server,
            )
            .unwrap();
        let p = self.recv_type(PacketType::Heartbeat)?;
        let h = decode(&p).unwrap().header;
        assert_eq!(h.device_password, [0; 10], "password echoed");
        Some((
            h.callsign_str().unwrap().to_owned(),
            decode(&p).unwrap().data.to_vec(),
        ))
    }

    fn login(&self) {
        let (callsign, _) = self.heartbeat(PW, &self.mac()).expect("heartbeat reply");
        assert!(!callsign.is_empty(), "{}-{} rejected", self.name, self.ssid);
    }

    fn mac(&self) -> String {
        let ip = match self.sock.local_addr().unwrap() {
            SocketAddr::V4(a) => a.ip().octets(),
            SocketAddr::V6(_) => [0; 4],
        };
        format!(
            "02:42:{:02X}:{:02X}:{:02X}:{:02X}",
            ip[0], ip[1], ip[2], self.ssid
        )
    }

    fn send(&self, t: PacketType, payload: &[u8]) {
        let mut h = self.header(t, PW);
        h.set_callsign("FORGED");
        self.sock
            .send_to(&encode(&h, payload).unwrap(), self.server)
            .unwrap();
    }

    fn recv_type(&self, t: PacketType) -> Option<Vec<u8>> {
        support::recv_type(&self.sock, t)
    }

    /// Every packet of type `t` that arrives until the socket is quiet for 30 ms.
    fn drain(&self, t: PacketType) -> Vec<Vec<u8>> {
        self.sock
            .set_read_timeout(Some(Duration::from_millis(30)))
            .unwrap();
        let out = std::iter::from_fn(|| self.recv_type(t)).collect();
        self.sock
            .set_read_timeout(Some(Duration::from_millis(300)))
            .unwrap();
        out
    }
}

fn reject(r: Option<(String, Vec<u8>)>) -> (u8, String) {
    let (callsign, data) = r.expect("a reply");
    assert!(callsign.is_empty());
    (data[0], String::from_utf8(data[1..].to_vec()).unwrap())
}

fn login_exchange_voice_and_text_and_rejections(env: &Env) {
    seed(env, &["alice", "bob", "carol"]);
    let srv = start(env, FanoutConfig::default());
    let at = srv.local_addr();
    let alice = Client::new([127, 0, 1, 1], at, "alice", 7);
    let bob = Client::new([127, 0, 1, 2], at, "bob", 1);
    let carol = Client::new([127, 0, 1, 3], at, "carol", 1);
    for c in [&alice, &bob, &carol] {
        c.login();
    }
    let (callsign, _) = alice.heartbeat(PW, &alice.mac()).unwrap();
    assert_eq!(callsign, "BT00000");

    // Merged voice (two length-prefixed Opus frames) reaches the others byte-for-byte.
    let voice = petrel_reflector::codec::merge_frames([&[1u8; 40][..], &[2u8; 38][..]]).unwrap();
    alice.send(PacketType::Voice, &voice);
    for c in [&bob, &carol] {
        let p = c.recv_type(PacketType::Voice).expect("voice");
        let p = decode(&p).unwrap();
        assert_eq!(p.data, &voice[..]);
        assert_eq!(p.header.username_str(), Some("alice"));
        assert_eq!(p.header.callsign_str(), Some("BT00000"));
        assert_eq!(p.header.device_password, [0; 10]);
        assert_eq!(
            (p.header.ssid, p.header.reserved, p.header.dmrid),
            (7, 0, 9_000_000)
        );
    }
    assert!(
        alice.recv_type(PacketType::Voice).is_none(),
        "sender got its own voice"
    );

    std::thread::sleep(Duration::from_millis(950)); // floor frees
    carol.send(PacketType::Text, "73 de carol".as_bytes());
    for c in [&alice, &bob] {
        let p = c.recv_type(PacketType::Text).expect("text");
        assert_eq!(decode(&p).unwrap().data, b"73 de carol");
    }

    let other = Client::new([127, 0, 1, 9], at, "bob", 2);
    assert_eq!(
        reject(other.heartbeat("Wrong123", "")),
        (3, "invalid_password".into())
    );
    let reserved = Client::new([127, 0, 1, 9], at, "bob", 101);
    assert_eq!(
        reject(reserved.heartbeat(PW, "")),
        (2, "reserved_ssid".into())
    );
    let thief = Client::new([127, 0, 1, 10], at, "bob", 1);
    assert_eq!(
        reject(thief.heartbeat(PW, "02:42:00:00:00:99")),
        (1, "device_conflict_online".into())
    );
    // The original endpoint keeps the device.
    alice.send(PacketType::Text, b"still there?");
    assert!(bob.recv_type(PacketType::Text).is_some());
    assert!(thief.recv_type(PacketType::Text).is_none());
    env.rt.block_on(srv.shutdown());
}

fn repeated_failures_ban_and_spoofed_voice_is_dropped(env: &Env) {
    seed(env, &["alice", "bob"]);
    let srv = start(env, FanoutConfig::default());
    let at = srv.local_addr();
    let alice = Client::new([127, 0, 2, 1], at, "alice", 1);
    let bob = Client::new([127, 0, 2, 2], at, "bob", 1);
    alice.login();
    bob.login();

    let guesser = Client::new([127, 0, 2, 9], at, "bob", 5);
    for _ in 0..4 {
        assert_eq!(
            reject(guesser.heartbeat("Guess123", "")).1,
            "invalid_password"
        );
    }
    assert_eq!(
        reject(guesser.heartbeat(PW, "")),
        (3, "too_many_failures".into())
    );

    // Voice naming alice from another address is not forwarded.
    let spoofer = Client::new([127, 0, 2, 66], at, "alice", 1);
    spoofer.send(PacketType::Voice, b"spoofed");
    assert!(bob.recv_type(PacketType::Voice).is_none());
    std::thread::sleep(Duration::from_millis(50));
    let s = srv.stats();
    assert_eq!(s.session.endpoint_mismatch_drops, 1);
    assert_eq!(s.fanout.frames_accepted, 0);
    env.rt.block_on(srv.shutdown());
}

fn overload_drops_whole_frames_and_stays_bounded(env: &Env) {
    let users = ["u0", "u1"];
    seed(env, &users);
    let srv = start(
        env,
        FanoutConfig {
            writers: 2,
            frame_queue: 2,
            ..FanoutConfig::default()
        },
    );
    let at = srv.local_addr();
    let ssids: Vec<u8> = (1..=99).chain(106..=254).collect();
    let clients: Vec<Client> = (0..300)
        .map(|i| {
            let n = i + 1;
            Client::new(
                [127, 1, (n / 250) as u8 + 1, (n % 250) as u8 + 1],
                at,
                users[i / 248],
                ssids[i % 248],
            )
        })
        .collect();
    for c in &clients {
        c.login();
    }
    const FRAMES: u64 = 60;
    for seq in 0..FRAMES {
        clients[0].send(PacketType::Voice, &seq.to_be_bytes());
    }
    std::thread::sleep(Duration::from_millis(500));
    let s = srv.stats();
    assert_eq!(s.fanout.frames_accepted, FRAMES);
    assert!(s.fanout.queue_high_water <= 2, "queue grew past its bound");
    assert!(
        s.fanout.frames_dropped > 0,
        "no overload happened: {:?}",
        s.fanout
    );
    assert_eq!(
        s.fanout.frames_sent + s.fanout.frames_dropped + s.fanout.frames_expired,
        FRAMES
    );

    // Every frame reached all 299 receivers or none of them.
    let mut per_frame = vec![0u32; FRAMES as usize];
    for c in &clients[1..] {
        let mut last = None;
        for p in c.drain(PacketType::Voice) {
            let seq = u64::from_be_bytes(decode(&p).unwrap().data.try_into().unwrap());
            assert!(last < Some(seq), "out of order at one receiver");
            last = Some(seq);
            per_frame[seq as usize] += 1;
        }
    }
    let delivered = per_frame.iter().filter(|&&n| n > 0).count() as u64;
    assert!(
        per_frame.iter().all(|&n| n == 0 || n == 299),
        "partial frame: {per_frame:?}"
    );
    assert_eq!(delivered, s.fanout.frames_sent);
    env.rt.block_on(srv.shutdown());
}

fn membership_change_elsewhere_drops_no_frames(env: &Env) {
    seed(env, &["alice", "bob", "carol", "dave"]);
    // carol and dave live in group 1; their logins change domain 1 while
    // alice talks in domain 999.
    env.rt.block_on(async {
        let store = Store::open(&env.db, StoreOptions::default()).await.unwrap();
        store.set_device_group("carol", 1, 1).await.unwrap();
        store.set_device_group("dave", 1, 1).await.unwrap();
        store.close().await;
    });
    let srv = start(env, FanoutConfig::default());
    let at = srv.local_addr();
    let alice = Client::new([127, 0, 3, 1], at, "alice", 1);
    let bob = Client::new([127, 0, 3, 2], at, "bob", 1);
    alice.login();
    bob.login();
    let carol = Client::new([127, 0, 3, 3], at, "carol", 1);
    let dave = Client::new([127, 0, 3, 4], at, "dave", 1);
    for seq in 0u32..20 {
        alice.send(PacketType::Voice, &seq.to_be_bytes());
        if seq == 5 {
            carol.login();
        }
        if seq == 10 {
            dave.login();
        }
        std::thread::sleep(Duration::from_millis(5));
    }
    let got = bob.drain(PacketType::Voice);
    assert_eq!(got.len(), 20);
    assert!(carol.drain(PacketType::Voice).is_empty());
    let s = srv.stats();
    assert_eq!((s.fanout.frames_dropped, s.fanout.frames_expired), (0, 0));
    env.rt.block_on(srv.shutdown());
}

fn metrics_healthz_and_admin_api(env: &Env) {
    seed(env, &["alice", "bob"]);
    let cfg = ServerConfig {
        http_listen: Some("127.0.0.1:0".parse().unwrap()),
        admin_token: Some("0123456789abcdef".into()),
        ..support::udp_config(&env.db)
    };
    let srv = env.rt.block_on(ServerHandle::start(cfg)).unwrap();
    let web = srv.http_addr().unwrap();
    let alice = Client::new([127, 0, 4, 1], srv.local_addr(), "alice", 1);
    let bob = Client::new([127, 0, 4, 2], srv.local_addr(), "bob", 1);
    alice.login();
    bob.login();

    let (code, body) = http(
        web,
        "GET /healthz HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n",
    );
    assert_eq!(code, 200);
    assert!(body.ends_with("ok\n"));
    std::thread::sleep(Duration::from_millis(50));
    let (code, body) = http(
        web,
        "GET /metrics HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n",
    );
    assert_eq!(code, 200);
    assert!(
        body.contains("petrel_reflector_session_logins_total 2\n"),
        "{body}"
    );
    assert!(body.contains(
        "# TYPE petrel_reflector_online_devices gauge\npetrel_reflector_online_devices 2\n"
    ));
    // Two heartbeats read and queued to the shards, two shards, the
    // buffers as configured and as the kernel granted them.
    assert!(
        body.contains("petrel_reflector_ingress_read_total 2\n"),
        "{body}"
    );
    assert!(body.contains("petrel_reflector_ingress_workers 2\n"));
    assert!(body.contains("petrel_reflector_socket_buffer_requested_bytes 4194304\n"));
    let actual = body
        .lines()
        .find_map(|l| l.strip_prefix("petrel_reflector_socket_buffer_recv_actual_bytes "))
        .and_then(|v| v.parse::<u64>().ok());
    assert!(actual.is_some_and(|v| v > 0), "{body}");
    assert!(body.contains("petrel_reflector_recording_finished_total 0\n"));

    let put = |auth: &str| {
        let json = r#"{"group_id": 1}"#;
        http(
            web,
            &format!(
                "PUT /api/devices/bob/1/group HTTP/1.1\r\nHost: x\r\n{auth}Content-Type: application/json\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{json}",
                json.len()
            ),
        )
        .0
    };
    assert_eq!(put(""), 401);
    assert_eq!(put("Authorization: Bearer wrong-token-000000\r\n"), 401);
    assert_eq!(put("Authorization: Bearer 0123456789abcdef\r\n"), 204);
    // The reload is immediate: bob (now in group 1) no longer hears 999.
    std::thread::sleep(Duration::from_millis(300));
    alice.send(PacketType::Voice, b"x");
    assert!(bob.recv_type(PacketType::Voice).is_none());
    let (code, body) = http(
        web,
        "GET /api/stats HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer 0123456789abcdef\r\nConnection: close\r\n\r\n",
    );
    assert_eq!(code, 200);
    assert!(body.contains("\"online\":2"), "{body}");
    env.rt.block_on(srv.shutdown());
}

fn voice_is_recorded_as_raw_files(env: &Env) {
    seed(env, &["alice", "bob"]);
    let dir = std::env::temp_dir().join(format!("petrel-refl-rec-{}", env.label));
    let cfg = ServerConfig {
        recording: petrel_reflector::model::RecordingConfig {
            enabled: true,
            dir: dir.to_str().unwrap().into(),
            ..Default::default()
        },
        ..support::udp_config(&env.db)
    };
    let srv = env.rt.block_on(ServerHandle::start(cfg)).unwrap();
    let alice = Client::new([127, 0, 5, 1], srv.local_addr(), "alice", 1);
    let bob = Client::new([127, 0, 5, 2], srv.local_addr(), "bob", 1);
    alice.login();
    bob.login();
    for k in 0u8..6 {
        let voice =
            petrel_reflector::codec::merge_frames([&[k; 20][..], &[k + 100; 21][..]]).unwrap();
        alice.send(PacketType::Voice, &voice);
        std::thread::sleep(Duration::from_millis(100));
    }
    // The spurt ends after the floor hold; its row is written by the store
    // writer a moment later (sooner or later on a loaded machine).
    std::thread::sleep(Duration::from_millis(1000));
    let store = env
        .rt
        .block_on(Store::open(&env.db, StoreOptions::default()))
        .unwrap();
    let deadline = std::time::Instant::now() + Duration::from_secs(5);
    let rows = loop {
        let rows = env.rt.block_on(store.recent_recordings(999, 10)).unwrap();
        if !rows.is_empty() || std::time::Instant::now() > deadline {
            break rows;
        }
        std::thread::sleep(Duration::from_millis(50));
    };
    env.rt.block_on(store.close());
    assert_eq!(rows.len(), 1, "{:?}", srv.stats().recording);
    assert_eq!(rows[0].1, 12 * 60);
    let file = std::fs::read(dir.join(&rows[0].0)).unwrap();
    let frames = petrel_reflector::codec::decode_raw(&file).unwrap();
    assert_eq!(frames.len(), 12);
    assert_eq!((frames[0], frames[11]), (&[0u8; 20][..], &[105u8; 21][..]));
    env.rt.block_on(srv.shutdown());
    let _ = std::fs::remove_dir_all(&dir);
}

fn each_device_keeps_its_order_across_ingress_shards(env: &Env) {
    use petrel_reflector::core::shard_of;
    use petrel_reflector::model::SessionConfig;
    const SHARDS: usize = 4;
    const ROUNDS: u32 = 200;
    let names: Vec<String> = (0..12).map(|i| format!("t{i}")).collect();
    let refs: Vec<&str> = names.iter().map(String::as_str).collect();
    seed(env, &refs);
    // Three talkers on three different shards, one per domain (999, 1, 2),
    // each heard by one listener.
    let shard = |name: &str| {
        let mut h = Header::new(PacketType::Voice);
        h.set_username(name);
        h.ssid = 1;
        shard_of(
            &encode(&h, b"x").unwrap(),
            "127.0.0.1:1".parse().unwrap(),
            SHARDS,
        )
    };
    let mut talkers: Vec<&str> = Vec::new();
    for n in &refs {
        if talkers.len() < 3 && talkers.iter().all(|t| shard(t) != shard(n)) {
            talkers.push(n);
        }
    }
    let listeners: Vec<&str> = refs
        .iter()
        .copied()
        .filter(|n| !talkers.contains(n))
        .take(3)
        .collect();
    env.rt.block_on(async {
        let store = Store::open(&env.db, StoreOptions::default()).await.unwrap();
        for (group, pair) in [(1, 1), (2, 2)] {
            store
                .set_device_group(talkers[pair], 1, group)
                .await
                .unwrap();
            store
                .set_device_group(listeners[pair], 1, group)
                .await
                .unwrap();
        }
        store.close().await;
    });
    let cfg = ServerConfig {
        ingress_workers: SHARDS,
        session: SessionConfig {
            per_ip_pps: 100_000,
            per_endpoint_pps: 100_000,
            ..SessionConfig::default()
        },
        ..support::udp_config(&env.db)
    };
    let srv = env.rt.block_on(ServerHandle::start(cfg)).unwrap();
    let at = srv.local_addr();
    let client = |i: u8, name: &str| {
        let c = Client::new([127, 0, 4, i], at, name, 1);
        c.login();
        c
    };
    let talk: Vec<Client> = (0..3).map(|i| client(i + 1, talkers[i as usize])).collect();
    let hear: Vec<Client> = (0..3)
        .map(|i| client(i + 11, listeners[i as usize]))
        .collect();
    for seq in 0..ROUNDS {
        for t in &talk {
            t.send(PacketType::Voice, &seq.to_be_bytes());
        }
        if seq % 8 == 7 {
            std::thread::sleep(Duration::from_millis(2));
        }
    }
    for (l, t) in hear.iter().zip(&talkers) {
        let seqs: Vec<u32> = l
            .drain(PacketType::Voice)
            .iter()
            .map(|p| u32::from_be_bytes(decode(p).unwrap().data[..4].try_into().unwrap()))
            .collect();
        assert!(
            seqs.windows(2).all(|w| w[0] < w[1]),
            "{t}'s voice reordered: {seqs:?}"
        );
        assert!(
            seqs.len() as u32 > ROUNDS / 2,
            "{t}: {} of {ROUNDS}",
            seqs.len()
        );
    }
    let s = srv.stats();
    assert_eq!(s.ingress_workers, SHARDS);
    assert_eq!(s.ingress.queue_full_drops, 0);
    assert_eq!(s.session.voice_frames, u64::from(ROUNDS) * 3);
    env.rt.block_on(srv.shutdown());
}

fn a_text_flood_is_limited_and_costs_no_voice(env: &Env) {
    seed(env, &["alice", "bob"]);
    // Room for all 40 voice frames and a single text frame: the texts the
    // budget lets through may evict each other, never voice (the queue's
    // unit tests show the separation; this checks the wiring).
    let srv = start(
        env,
        FanoutConfig {
            frame_queue: 64,
            text_queue: 1,
            ..FanoutConfig::default()
        },
    );
    let alice = Client::new([127, 0, 6, 1], srv.local_addr(), "alice", 1);
    let bob = Client::new([127, 0, 6, 2], srv.local_addr(), "bob", 1);
    alice.login();
    bob.login();
    for k in 0u8..40 {
        alice.send(PacketType::Text, &[b'a' + k % 26; 200]);
        alice.send(PacketType::Voice, &[k; 30]);
    }
    bob.sock
        .set_read_timeout(Some(Duration::from_millis(300)))
        .unwrap();
    let (mut voice, mut text) = (Vec::new(), 0);
    let mut buf = [0u8; 2048];
    while let Ok((n, _)) = bob.sock.recv_from(&mut buf) {
        match decode(&buf[..n]).unwrap() {
            p if p.header.packet_type == PacketType::Voice => voice.push(p.data[0]),
            p if p.header.packet_type == PacketType::Text => text += 1,
            _ => {}
        }
    }
    let s = srv.stats();
    // The default budget: a burst of 5 texts; the rest dropped at the core.
    assert_eq!(s.session.text_rate_drops, 35);
    assert!((1..=5).contains(&text), "{text} texts");
    assert_eq!(text as u64 + s.fanout.text_frames_dropped, 5);
    // Every voice frame arrives, in order.
    assert_eq!(voice, (0u8..40).collect::<Vec<_>>());
    assert_eq!((s.fanout.frames_dropped, s.fanout.frames_expired), (0, 0));
    env.rt.block_on(srv.shutdown());
}
