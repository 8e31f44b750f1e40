//! The reflector's stateful datagram handler (draarl-v1 §3): one or two
//! `core::Reflector` shards behind the `core::Ingress` front, over an
//! in-memory directory and a fake clock, driven by a fuzz-chosen sequence of
//! datagrams from a small set of sources, clock advances, ICMP unreachable
//! reports, password-check verdicts (chosen by the fuzzer: no Argon2 runs),
//! admin group moves and directory reloads. After every step each shard is
//! polled until empty, and these invariants are asserted:
//!
//! - at most `max_sessions` devices online over all shards, and the shared
//!   tables count exactly the shards' sessions;
//! - password checks in flight ≤ `password_checks_in_flight`;
//! - online endpoints per account ≤ `max_per_account` and per /24 or /64 ≤
//!   `max_per_prefix` (exempt loopback sources aside);
//! - one step sends at most 3 datagrams (a reply, a config query and a time
//!   sync), each a well-formed packet to a source that was seen, and at most
//!   one frame;
//! - a frame's receivers are all online endpoints that receive, never its
//!   sender's endpoint's exclusion broken, and a non-exempt receiver was
//!   heard at two times at least `receive_after_ms` apart;
//! - after an ICMP unreachable report for an address silent for
//!   `UNREACHABLE_TRUSTED_AFTER_SILENCE`, no device is online there (one
//!   heard more recently may have contradicted an earlier report);
//! - finished recordings are bounded, round-trip through the `.raw` codec
//!   and get a relative file name without `..`.
#![no_main]

use std::collections::{HashMap, HashSet};
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::{Duration, Instant};

use libfuzzer_sys::arbitrary::{self, Arbitrary};
use libfuzzer_sys::fuzz_target;
use petrel_reflector::codec::{
    self, ConfigCommand, Header, HeartbeatData, Mac, PacketType, Tlv, MAX_DATA_LEN,
};
use petrel_reflector::core::{
    shard_of, Ingress, Recorder, Reflector, UNREACHABLE_TRUSTED_AFTER_SILENCE,
};
use petrel_reflector::model::{
    relative_path, DeviceKey, DeviceRecord, Directory, EndpointPolicy, GroupRecord,
    RecordingConfig, SessionConfig, SourcePrefix, UserRecord,
};
use petrel_reflector::runtime::SharedTables;

/// Loopback (exempt by default), two ports of one IPv4 host, a second host
/// and a second network, IPv6 hosts of one /64, and an IPv4-mapped address.
const SOURCES: [&str; 9] = [
    "127.0.0.1:4000",
    "127.0.0.1:4001",
    "10.0.0.1:5000",
    "10.0.0.1:5001",
    "10.0.0.2:5000",
    "10.0.1.1:5000",
    "[2001:db8::1]:6000",
    "[2001:db8::2]:6000",
    "[::ffff:10.0.0.1]:5000",
];
/// Index 6 is unknown to the directory, 7 is empty.
const NAMES: [&str; 8] = [
    "alice", "bob", "carol", "dave", "erin", "frank", "nobody", "",
];
/// Valid, valid but not the user's, malformed (short, non-alphanumeric), empty.
const PASSWORDS: [&str; 5] = ["Secret12", "Wrong123", "abc", "pass word", ""];
/// Usable SSIDs, and reserved ones (0, 100–105, 255).
const SSIDS: [u8; 8] = [1, 2, 3, 7, 248, 0, 101, 255];
/// Stand-ins for Argon2id hashes: the verdict comes from the fuzzer.
const PHC: &str = "$argon2id$v=19$m=64,t=1,p=1$ZnV6enNhbHQ$ZnV6emhhc2g";
const PHC_CHANGED: &str = "$argon2id$v=19$m=64,t=1,p=1$b3RoZXJzYWx0$b3RoZXJoYXNo";
/// The MAC on record for alice's SSID 1.
const ALICE_MAC: [u8; 6] = [2, 0, 0, 0, 0, 1];

#[derive(Arbitrary, Debug)]
struct Input {
    knobs: Knobs,
    wall_ms: u64,
    ops: Vec<Op>,
}

#[derive(Arbitrary, Debug)]
struct Knobs {
    two_shards: bool,
    max_sessions: u8,
    max_per_account: u8,
    max_per_prefix: u8,
    wait_before_receiving: bool,
    exempt_loopback: bool,
    checks_in_flight: u8,
    prefix_burst: u8,
    text_burst: u8,
    record: bool,
}

#[derive(Arbitrary, Debug)]
enum Op {
    Send { from: u8, packet: Pkt },
    Raw { from: u8, bytes: Vec<u8> },
    Advance { ms: u16 },
    Unreachable { at: u8 },
    Answer { pick: u8, ok: bool },
    AnswerUnknown { id: u8, ok: bool },
    SetGroup { user: u8, ssid: u8, group: u8 },
    Reload { variant: u8 },
}

#[derive(Arbitrary, Debug)]
struct Pkt {
    kind: u8,
    user: u8,
    password: u8,
    ssid: u8,
    dev_model: u8,
    tagged: bool,
    data: Data,
}

#[derive(Arbitrary, Debug)]
enum Data {
    Empty,
    Heartbeat {
        gps: Option<(f64, f64, f64)>,
        mac: Option<bool>,
    },
    Query,
    TimeSync(i64),
    Set(Vec<(u8, Vec<u8>)>),
    Voice(Vec<Vec<u8>>),
    Bytes(Vec<u8>),
}

fn user(id: i64, name: &str, group: i64) -> UserRecord {
    UserRecord {
        id,
        name: name.into(),
        callsign: format!("CALL{id}"),
        dmrid: 4_600_000 + id as u32,
        enabled: true,
        approved: true,
        device_password_hash: Some(PHC.into()),
        default_group_id: group,
    }
}

fn group(id: i64, enabled: bool, is_virtual: bool) -> GroupRecord {
    GroupRecord {
        id,
        name: format!("g{id}"),
        enabled,
        is_virtual,
    }
}

fn device(owner_id: i64, ssid: u8, group_id: i64) -> DeviceRecord {
    DeviceRecord {
        owner_id,
        ssid,
        dev_model: 2,
        dmrid: 4_600_000,
        group_id,
        disable_send: false,
        disable_recv: false,
        mac: None,
    }
}

/// alice (999), bob (1; SSID 2 receive-banned, SSID 3 send-banned), carol
/// disabled, dave unapproved, erin without a password, frank in a virtual
/// group (so ungrouped); 1 and 2 linked by virtual 50. `variant` bits, for
/// reloads: bob's password changed, alice disabled, bob's SSID 1 moved to 2,
/// group 1 disabled.
fn directory(variant: u8) -> Directory {
    let mut users = vec![
        user(1, "alice", 999),
        user(2, "bob", 1),
        user(3, "carol", 999),
        user(4, "dave", 2),
        user(5, "erin", 999),
        user(6, "frank", 50),
    ];
    users[2].enabled = false;
    users[3].approved = false;
    users[4].device_password_hash = None;
    if variant & 1 != 0 {
        users[1].device_password_hash = Some(PHC_CHANGED.into());
    }
    if variant & 2 != 0 {
        users[0].enabled = false;
    }
    let mut alice = device(1, 1, 999);
    alice.mac = Some(Mac(ALICE_MAC));
    alice.dev_model = 1;
    let mut deaf = device(2, 2, 1);
    deaf.disable_recv = true;
    let mut mute = device(2, 3, 1);
    mute.disable_send = true;
    let moved = device(2, 1, if variant & 4 != 0 { 2 } else { 1 });
    Directory::new(
        users,
        vec![
            group(999, true, false),
            group(1, variant & 8 == 0, false),
            group(2, true, false),
            group(50, true, true),
        ],
        vec![(50, 1), (50, 2)],
        vec![alice, deaf, mute, moved],
    )
}

fn config(k: &Knobs) -> SessionConfig {
    let cfg = SessionConfig {
        max_sessions: 1 + usize::from(k.max_sessions % 8),
        rate_table_max: 16,
        ban_table_max: 16,
        password_budget_table_max: 16,
        password_checks_in_flight: 1 + usize::from(k.checks_in_flight % 4),
        prefix_password_checks_burst: 1 + u32::from(k.prefix_burst % 8),
        text_burst: 1 + u32::from(k.text_burst % 4),
        endpoints: EndpointPolicy {
            max_per_account: 1 + usize::from(k.max_per_account % 4),
            max_per_prefix: 1 + usize::from(k.max_per_prefix % 4),
            receive_after_ms: if k.wait_before_receiving { 2_000 } else { 0 },
            exempt_loopback: k.exempt_loopback,
        },
        ..SessionConfig::default()
    };
    cfg.validate().expect("the fuzzed config is in range");
    cfg
}

fn encode(p: &Pkt) -> Vec<u8> {
    let kind = PacketType::from_u8(1 + p.kind % 5).expect("1..=5 are packet types");
    let mut h = Header::new(kind);
    h.set_username(NAMES[usize::from(p.user) % NAMES.len()]);
    h.set_password(PASSWORDS[usize::from(p.password) % PASSWORDS.len()]);
    h.set_callsign("FORGED");
    h.ssid = SSIDS[usize::from(p.ssid) % SSIDS.len()];
    h.dev_model = p.dev_model;
    h.reserved = u32::from(p.tagged) * 77;
    let mut data = match &p.data {
        Data::Empty => Vec::new(),
        Data::Heartbeat { gps, mac } => HeartbeatData {
            gps: gps.map(|(lat, lon, alt)| codec::Gps { lat, lon, alt }),
            mac: mac.map(|ours| Mac(if ours { ALICE_MAC } else { [2, 0, 0, 0, 0, 9] })),
        }
        .encode(),
        Data::Query => vec![0x01],
        Data::TimeSync(ms) => ConfigCommand::TimeSync(*ms).encode().unwrap_or_default(),
        Data::Set(items) => {
            let items = items
                .iter()
                .map(|(tag, value)| Tlv {
                    tag: *tag,
                    value: value.clone(),
                })
                .collect();
            ConfigCommand::Set(items).encode().unwrap_or_default()
        }
        Data::Voice(frames) => {
            codec::merge_frames(frames.iter().map(Vec::as_slice)).unwrap_or_default()
        }
        Data::Bytes(b) => b.clone(),
    };
    data.truncate(MAX_DATA_LEN);
    codec::encode(&h, &data).expect("DATA within the limit encodes")
}

/// Every device key the directory and the packets can name.
fn keys() -> impl Iterator<Item = DeviceKey> {
    (1..=6).flat_map(|uid| SSIDS.iter().map(move |&s| (uid, s)))
}

struct Harness {
    cfg: SessionConfig,
    sources: Vec<SocketAddr>,
    shards: Vec<Reflector>,
    tables: Option<Arc<SharedTables>>,
    ingress: Ingress,
    t0: Instant,
    now: Instant,
    /// Checks polled and not answered yet: (shard, id).
    pending: Vec<(usize, u64)>,
    /// First and last time a datagram from each source reached a shard.
    heard: HashMap<SocketAddr, (Instant, Instant)>,
}

impl Harness {
    fn new(k: &Knobs, wall_ms: u64) -> Self {
        let cfg = config(k);
        let t0 = Instant::now();
        let n = if k.two_shards { 2 } else { 1 };
        let tables = k.two_shards.then(|| Arc::new(SharedTables::new(&cfg, t0)));
        // Any wall clock a host can have, up to the year 9999.
        let wall = (wall_ms % 253_402_300_800_000) as i64;
        let shards = (0..n)
            .map(|_| {
                let mut r = match &tables {
                    Some(t) => {
                        Reflector::shard(cfg.clone(), directory(0), t0, Box::new(Arc::clone(t)))
                    }
                    None => Reflector::new(cfg.clone(), directory(0), t0),
                };
                r.set_wall_clock(t0, wall);
                if k.record {
                    let rec = RecordingConfig {
                        enabled: true,
                        min_duration_ms: 0,
                        max_duration_s: 1,
                        gap_ms: 100,
                        max_active: 1,
                        ..RecordingConfig::default()
                    };
                    rec.validate().expect("recording config in range");
                    r = r.with_recorder(Recorder::new(rec));
                }
                r
            })
            .collect();
        Self {
            ingress: Ingress::new(&cfg, n),
            cfg,
            sources: SOURCES
                .iter()
                .map(|s| s.parse().expect("a socket address"))
                .collect(),
            shards,
            tables,
            t0,
            now: t0,
            pending: Vec::new(),
            heard: HashMap::new(),
        }
    }

    fn source(&self, i: u8) -> SocketAddr {
        self.sources[usize::from(i) % self.sources.len()]
    }

    fn deliver(&mut self, src: SocketAddr, bytes: &[u8]) {
        let Some(shard) = self.ingress.admit(self.now, src, bytes) else {
            return;
        };
        let now = self.now;
        self.heard
            .entry(src)
            .and_modify(|h| h.1 = now)
            .or_insert((now, now));
        self.shards[shard].handle_datagram(now, src, bytes);
    }

    fn step(&mut self, op: &Op) {
        let mut sender = None;
        match op {
            Op::Send { from, packet } => {
                let src = self.source(*from);
                sender = Some(src);
                self.deliver(src, &encode(packet));
            }
            Op::Raw { from, bytes } => {
                let src = self.source(*from);
                sender = Some(src);
                self.deliver(src, bytes);
            }
            Op::Advance { ms } => {
                self.now += Duration::from_millis(u64::from(*ms));
                self.ingress.sweep(self.now);
                for r in &mut self.shards {
                    r.handle_timeout(self.now);
                }
            }
            Op::Unreachable { at } => {
                let addr = self.source(*at);
                for r in &mut self.shards {
                    r.handle_unreachable(self.now, addr);
                }
                // A session survives a report only if it contradicted an
                // earlier one and has not been silent that long since.
                let silent = self
                    .heard
                    .get(&addr)
                    .map_or(Duration::MAX, |h| self.now.saturating_duration_since(h.1));
                for r in &self.shards {
                    for key in keys() {
                        if silent >= UNREACHABLE_TRUSTED_AFTER_SILENCE {
                            assert_ne!(r.session_addr(key), Some(addr), "{key:?} still online");
                        }
                    }
                }
            }
            Op::Answer { pick, ok } => {
                if !self.pending.is_empty() {
                    let (shard, id) = self.pending.remove(usize::from(*pick) % self.pending.len());
                    self.shards[shard].handle_password_check(self.now, id, *ok);
                }
            }
            Op::AnswerUnknown { id, ok } => {
                self.shards[0].handle_password_check(self.now, 1_000_000 + u64::from(*id), *ok);
            }
            Op::SetGroup { user, ssid, group } => {
                let uid = 1 + i64::from(user % 7);
                let ssid = SSIDS[usize::from(*ssid) % SSIDS.len()];
                let group = [999, 1, 2, 50, 7][usize::from(*group) % 5];
                // The shard owning the device, as the ingress front picks it.
                let mut h = Header::new(PacketType::Heartbeat);
                h.set_username(NAMES[(uid - 1) as usize]);
                h.ssid = ssid;
                let probe = codec::encode(&h, &[]).expect("an empty heartbeat encodes");
                let shard = shard_of(&probe, self.sources[0], self.shards.len());
                self.shards[shard].set_device_group((uid, ssid), group);
            }
            Op::Reload { variant } => {
                for r in &mut self.shards {
                    r.replace_directory(directory(*variant));
                }
            }
        }
        self.drain(sender);
        self.check_tables();
    }

    fn drain(&mut self, sender: Option<SocketAddr>) {
        let (mut sent, mut frames) = (0, Vec::new());
        for (i, r) in self.shards.iter_mut().enumerate() {
            while let Some(t) = r.poll_transmit() {
                sent += 1;
                assert!(
                    self.heard.contains_key(&t.dst),
                    "reply to {} never heard",
                    t.dst
                );
                let p = codec::decode(&t.payload).expect("the reflector sends valid packets");
                assert_eq!(p.header.password_bytes(), b"", "a reply carries a password");
            }
            frames.extend(std::iter::from_fn(|| r.poll_frame()));
            while r.poll_event().is_some() {}
            while let Some(c) = r.poll_password_check() {
                self.pending.push((i, c.id()));
            }
            while let Some(rec) = r.poll_recording() {
                // One packet adds at most MAX_DATA_LEN / 3 frames past the 1 s cap.
                assert!(
                    rec.frames.len() <= 1_000 / 60 + MAX_DATA_LEN / 3,
                    "{}",
                    rec.frames.len()
                );
                let frames: Vec<&[u8]> = rec.frames.iter().map(Vec::as_slice).collect();
                let file = codec::encode_raw(&frames).expect("a recording encodes");
                assert_eq!(codec::decode_raw(&file).as_deref(), Ok(frames.as_slice()));
                let path = relative_path(&rec);
                assert!(
                    !path.starts_with('/') && !path.split('/').any(|c| c == ".."),
                    "{path}"
                );
            }
        }
        assert!(sent <= 3, "one step sent {sent} datagrams");
        assert!(frames.len() <= 1, "one step made {} frames", frames.len());
        let receiving: HashSet<SocketAddr> = self
            .shards
            .iter()
            .flat_map(|r| {
                keys()
                    .filter(|k| r.session_receives(*k) == Some(true))
                    .filter_map(|k| r.session_addr(k))
            })
            .collect();
        let wait = Duration::from_millis(self.cfg.endpoints.receive_after_ms);
        for f in frames {
            assert_eq!(Some(f.exclude), sender, "a frame excludes its sender");
            codec::decode(&f.packet).expect("a forwarded packet decodes");
            for addr in f.snapshot.partitions.iter().flatten() {
                assert!(
                    receiving.contains(addr),
                    "{addr} in a snapshot but not receiving"
                );
                if !self.cfg.endpoints.exempt(*addr) {
                    let (first, last) = self.heard[addr];
                    assert!(
                        last - first >= wait,
                        "{addr} receives, heard only within {wait:?}"
                    );
                }
            }
        }
    }

    fn check_tables(&self) {
        let online: usize = self.shards.iter().map(Reflector::online).sum();
        assert!(online <= self.cfg.max_sessions, "{online} sessions");
        if let Some(t) = &self.tables {
            assert_eq!(t.online(), online, "shared tables and shards disagree");
        }
        let checks: usize = self
            .shards
            .iter()
            .map(Reflector::password_checks_in_flight)
            .sum();
        assert!(
            checks <= self.cfg.password_checks_in_flight,
            "{checks} checks"
        );
        let (mut per_account, mut per_prefix) = (HashMap::new(), HashMap::new());
        for r in &self.shards {
            for key in keys() {
                let Some(addr) = r.session_addr(key) else {
                    continue;
                };
                if !self.cfg.endpoints.exempt(addr) {
                    *per_account.entry(key.0).or_insert(0usize) += 1;
                    *per_prefix
                        .entry(SourcePrefix::of(addr.ip()))
                        .or_insert(0usize) += 1;
                }
            }
        }
        let caps = &self.cfg.endpoints;
        assert!(
            per_account.values().all(|n| *n <= caps.max_per_account),
            "{per_account:?}"
        );
        assert!(
            per_prefix.values().all(|n| *n <= caps.max_per_prefix),
            "{per_prefix:?}"
        );
        assert!(self.now >= self.t0);
    }
}

fuzz_target!(|input: Input| {
    let mut h = Harness::new(&input.knobs, input.wall_ms);
    for op in &input.ops {
        h.step(op);
    }
});
