//! The amplification attack of issue 14, on real loopback sockets: an
//! account holder logs one device in from its own address, sends Type 2
//! heartbeats with the account's password "from" 100 other addresses
//! (here: sockets the test binds, each in its own /24, so what reaches
//! them can be counted) and talks. Measured: bytes that reach the forged
//! addresses per byte the attacker sent (everything it sent, forged
//! heartbeats included), and voice bytes alone. Also: an endpoint whose
//! port closes receives nothing once the ICMP error has been read.
//!
//! Loopback stands in for the Internet here, so the reflector runs with
//! its default settings except `exempt_loopback = false`. Run with
//! `--nocapture` to see the figures.
#![allow(clippy::unwrap_used)]

use std::net::{SocketAddr, UdpSocket};
use std::time::{Duration, Instant};

use petrel_reflector::codec::{decode, encode, Header, PacketType};
use petrel_reflector::model::{Backend, EndpointPolicy, ServerConfig, SessionConfig};
use petrel_reflector::runtime::server::ServerHandle;
use tokio::runtime::Runtime;

mod support;
use support::ScratchStore;

const PW: &str = "Bench123";
/// Forged source addresses.
const FORGED: usize = 100;
/// Voice DATA bytes per packet (two merged Opus frames of a link box).
const VOICE_DATA: usize = 320;
/// Voice packet interval while talking (faster than a link box's 120 ms,
/// so the attacker's heartbeat cost weighs less: the worst case).
const VOICE_EVERY: Duration = Duration::from_millis(40);

/// The running reflector of one measurement, on its own store.
struct Bed {
    rt: Runtime,
    scratch: Option<ScratchStore>,
    server: Option<ServerHandle>,
    addr: SocketAddr,
}

impl Bed {
    fn start(name: &str, endpoints: EndpointPolicy) -> Self {
        let rt = Runtime::new().unwrap();
        let scratch = rt
            .block_on(ScratchStore::create(Backend::Sqlite, name))
            .unwrap()
            .unwrap();
        let mallory = support::account("mallory", "BT00001".into(), 9_000_001, PW);
        support::seed_users(&rt, scratch.location(), [mallory]);
        let cfg = ServerConfig {
            session: SessionConfig {
                endpoints,
                ..SessionConfig::default()
            },
            ..support::udp_config(scratch.location())
        };
        let server = rt.block_on(ServerHandle::start(cfg)).unwrap();
        let addr = server.local_addr();
        Self {
            rt,
            scratch: Some(scratch),
            server: Some(server),
            addr,
        }
    }

    fn server(&self) -> &ServerHandle {
        self.server.as_ref().unwrap()
    }
}

impl Drop for Bed {
    fn drop(&mut self) {
        if let Some(s) = self.server.take() {
            self.rt.block_on(s.shutdown());
        }
        if let Some(s) = self.scratch.take() {
            let _ = self.rt.block_on(s.remove());
        }
    }
}

/// Default settings, with loopback treated as the Internet.
fn defaults() -> EndpointPolicy {
    EndpointPolicy {
        exempt_loopback: false,
        ..EndpointPolicy::default()
    }
}

/// SSID of forged login `i`: 2–99, then 106 on (100–105 are reserved).
fn forged_ssid(i: usize) -> u8 {
    if i < 98 {
        2 + i as u8
    } else {
        106 + (i - 98) as u8
    }
}

fn datagram(t: PacketType, ssid: u8, data: &[u8]) -> Vec<u8> {
    let mut h = Header::new(t);
    h.set_username("mallory");
    h.set_password(PW);
    h.ssid = ssid;
    h.dev_model = 1;
    encode(&h, data).unwrap()
}

/// A link box heartbeat: 24 zero GPS bytes and a MAC (draarl-v1 §8.2).
fn heartbeat(ssid: u8) -> Vec<u8> {
    let mut data = vec![0u8; 24];
    data.extend_from_slice(format!("02:42:00:00:00:{ssid:02X}").as_bytes());
    datagram(PacketType::Heartbeat, ssid, &data)
}

/// The attacker's side: what it sent, from where.
struct Attacker {
    own: UdpSocket,
    server: SocketAddr,
    bytes_in: u64,
    voice_in: u64,
}

impl Attacker {
    /// Logs its own device (SSID 1) in from 127.0.0.1.
    fn login(server: SocketAddr) -> Self {
        let own = UdpSocket::bind("127.0.0.1:0").unwrap();
        own.set_read_timeout(Some(Duration::from_secs(2))).unwrap();
        let hb = heartbeat(1);
        let mut a = Self {
            own,
            server,
            bytes_in: 0,
            voice_in: 0,
        };
        a.send_own(&hb);
        let reply = support::recv_type(&a.own, PacketType::Heartbeat).unwrap();
        let p = decode(&reply).unwrap();
        assert!(!p.header.callsign_str().unwrap().is_empty(), "own login");
        a.own.set_nonblocking(true).unwrap();
        a
    }

    fn send_own(&mut self, d: &[u8]) {
        self.own.send_to(d, self.server).unwrap();
        self.bytes_in += d.len() as u64;
    }

    /// A heartbeat "from" `victim` (the forged source address).
    fn forge(&mut self, victim: &Victim) {
        let d = heartbeat(victim.ssid);
        victim.sock.send_to(&d, self.server).unwrap();
        self.bytes_in += d.len() as u64;
    }

    fn talk_once(&mut self) {
        let d = datagram(PacketType::Voice, 1, &[0x11; VOICE_DATA]);
        self.voice_in += d.len() as u64;
        self.send_own(&d);
        // Its own device's replies and frames are its own business.
        let mut buf = [0u8; 2048];
        while self.own.recv_from(&mut buf).is_ok() {}
    }
}

/// A forged source address: a socket the test binds so it can count what
/// the reflector sends there.
struct Victim {
    sock: UdpSocket,
    ssid: u8,
    bytes: u64,
    voice: u64,
    datagrams: u64,
}

impl Victim {
    /// Victim `i`, alone in 127.(20 + i / 200).(i % 200).0/24.
    fn new(i: usize) -> Self {
        let ip = [127, 20 + (i / 200) as u8, (i % 200) as u8, 1];
        let sock = UdpSocket::bind(SocketAddr::from((ip, 0))).unwrap();
        sock.set_nonblocking(true).unwrap();
        Self {
            sock,
            ssid: forged_ssid(i),
            bytes: 0,
            voice: 0,
            datagrams: 0,
        }
    }

    fn drain(&mut self) {
        let mut buf = [0u8; 2048];
        while let Ok((n, _)) = self.sock.recv_from(&mut buf) {
            self.bytes += n as u64;
            self.datagrams += 1;
            if decode(&buf[..n]).is_ok_and(|p| p.header.packet_type == PacketType::Voice) {
                self.voice += n as u64;
            }
        }
    }
}

/// How an attack went.
#[derive(Debug)]
struct Outcome {
    bytes_in: u64,
    bytes_out: u64,
    voice_in: u64,
    voice_out: u64,
    /// Voice out per voice in from `steady_from` on (every admitted
    /// endpoint receiving).
    steady_voice_ratio: Option<f64>,
    receiving_victims: usize,
}

impl Outcome {
    fn ratio(&self) -> f64 {
        self.bytes_out as f64 / self.bytes_in as f64
    }

    fn voice_ratio(&self) -> f64 {
        self.voice_out as f64 / self.voice_in as f64
    }
}

/// Runs the attack for `talk` while re-sending the forged heartbeats every
/// `refresh` (`None`: once, as in the issue); the steady ratio is taken
/// from `steady_from` on.
fn attack(
    endpoints: EndpointPolicy,
    name: &str,
    refresh: Option<Duration>,
    talk: Duration,
    steady_from: Option<Duration>,
) -> Outcome {
    let bed = Bed::start(name, endpoints);
    let mut attacker = Attacker::login(bed.addr);
    let mut victims: Vec<Victim> = (0..FORGED).map(Victim::new).collect();
    for v in &victims {
        attacker.forge(v);
    }
    let start = Instant::now();
    let mut last_refresh = start;
    let mut next_voice = start;
    let mut steady_mark = None;
    while start.elapsed() < talk {
        if steady_mark.is_none() && steady_from.is_some_and(|t| start.elapsed() >= t) {
            let out: u64 = victims.iter().map(|v| v.voice).sum();
            steady_mark = Some((attacker.voice_in, out));
        }
        let now = Instant::now();
        if refresh.is_some_and(|r| now >= last_refresh + r) {
            last_refresh = now;
            for v in &victims {
                attacker.forge(v);
            }
        }
        if now >= next_voice {
            next_voice += VOICE_EVERY;
            attacker.talk_once();
        }
        for v in &mut victims {
            v.drain();
        }
        std::thread::sleep(Duration::from_millis(5));
    }
    std::thread::sleep(Duration::from_millis(300));
    for v in &mut victims {
        v.drain();
    }
    let voice_out: u64 = victims.iter().map(|v| v.voice).sum();
    let stats = bed.server().stats();
    eprintln!(
        "{name}: logins {} refused(account cap) {} heard-twice {}",
        stats.session.logins,
        stats.session.account_endpoint_limit_rejects,
        stats.session.endpoints_heard_twice
    );
    Outcome {
        bytes_in: attacker.bytes_in,
        bytes_out: victims.iter().map(|v| v.bytes).sum(),
        voice_in: attacker.voice_in,
        voice_out,
        steady_voice_ratio: steady_mark
            .map(|(vin, vout)| (voice_out - vout) as f64 / (attacker.voice_in - vin) as f64),
        receiving_victims: victims.iter().filter(|v| v.voice > 0).count(),
    }
}

fn report(label: &str, o: &Outcome) {
    println!(
        "AMPLIFICATION {label}: {:.1}x all bytes ({} out / {} in), {:.1}x voice ({} / {}), steady voice {}, {} of {FORGED} forged addresses received voice",
        o.ratio(),
        o.bytes_out,
        o.bytes_in,
        o.voice_ratio(),
        o.voice_out,
        o.voice_in,
        o.steady_voice_ratio
            .map_or("-".to_owned(), |r| format!("{r:.1}x")),
        o.receiving_victims
    );
}

#[test]
fn forged_heartbeats_without_the_policy_amplify_many_times() {
    let o = attack(
        EndpointPolicy::unlimited(),
        "amp_before",
        None,
        Duration::from_millis(2_500),
        None,
    );
    report("before (no endpoint policy, one forged heartbeat each)", &o);
    assert_eq!(o.receiving_victims, FORGED);
    assert!(o.voice_ratio() > 50.0, "{o:?}");
}

#[test]
fn forged_heartbeats_as_written_get_nothing_at_defaults() {
    let o = attack(
        defaults(),
        "amp_once",
        None,
        Duration::from_millis(3_000),
        None,
    );
    report("defaults, one forged heartbeat each", &o);
    assert_eq!(o.receiving_victims, 0, "{o:?}");
    assert!(o.ratio() <= 8.0, "{o:?}");
}

#[test]
fn forged_heartbeats_kept_up_are_capped_at_defaults() {
    let o = attack(
        defaults(),
        "amp_kept",
        Some(Duration::from_millis(1_000)),
        Duration::from_millis(5_000),
        Some(Duration::from_millis(3_000)),
    );
    report("defaults, forged heartbeats repeated every 1 s", &o);
    assert!(o.receiving_victims <= 7, "{o:?}");
    assert!(o.voice_ratio() <= 8.0, "{o:?}");
    assert!(o.steady_voice_ratio.is_some_and(|r| r <= 8.0), "{o:?}");
    assert!(o.ratio() <= 8.0, "{o:?}");
}

#[test]
fn a_closed_port_gets_nothing_one_second_after_its_icmp_error() {
    let bed = Bed::start("closed_port", defaults());
    let mut attacker = Attacker::login(bed.addr);
    // A device that proves itself (heard again 2 s on) and receives.
    let mut victim = Victim::new(0);
    let at = victim.sock.local_addr().unwrap();
    let started = Instant::now();
    attacker.forge(&victim);
    while started.elapsed() < Duration::from_millis(2_100) {
        std::thread::sleep(Duration::from_millis(700));
        attacker.forge(&victim);
    }
    for _ in 0..10 {
        attacker.talk_once();
        std::thread::sleep(VOICE_EVERY);
    }
    std::thread::sleep(Duration::from_millis(100));
    victim.drain();
    assert!(victim.voice > 0, "the device never received");
    // Its port closes; the next datagram to it draws the ICMP error.
    drop(victim);
    let closed = Instant::now();
    let mut ended_after = None;
    while closed.elapsed() < Duration::from_secs(1) {
        attacker.talk_once();
        let s = bed.server().stats();
        if ended_after.is_none() && s.session.unreachable_sessions_ended > 0 {
            ended_after = Some(closed.elapsed());
        }
        std::thread::sleep(VOICE_EVERY);
    }
    // Reopened at the same address to count what still arrives there.
    let reopened = UdpSocket::bind(at).unwrap();
    reopened.set_nonblocking(true).unwrap();
    let mut after = 0u64;
    let mut buf = [0u8; 2048];
    let counting = Instant::now();
    while counting.elapsed() < Duration::from_millis(1_500) {
        attacker.talk_once();
        std::thread::sleep(VOICE_EVERY);
        while reopened.recv_from(&mut buf).is_ok() {
            after += 1;
        }
    }
    let s = bed.server().stats();
    println!(
        "CLOSED PORT: session ended {:?} after the port closed; {after} datagrams reached it from 1 s to 2.5 s after; icmp {:?}",
        ended_after, s.icmp
    );
    assert_eq!(s.session.unreachable_sessions_ended, 1);
    assert!(s.icmp.unreachable >= 1);
    assert!(ended_after.is_some_and(|d| d < Duration::from_secs(1)));
    assert_eq!(after, 0);
}
