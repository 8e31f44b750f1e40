//! No lock-out by table filling (issue 14), on real loopback sockets against
//! a server with default settings: while and after a flood fills the rate
//! tables, an honest device from a fresh address is answered within 1 s.
//!
//! Floods are bounded in count (100,000 and 65,536 datagrams) and time
//! (10 s), and run one at a time.
#![allow(clippy::unwrap_used)]

use std::net::{Ipv4Addr, SocketAddr, SocketAddrV4, UdpSocket};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering::Relaxed};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Duration, Instant};

use petrel_reflector::codec::{decode, PacketType};
use petrel_reflector::runtime::server::ServerHandle;

mod support;

const PW: &str = "Honest12";
const ANSWER_WITHIN: Duration = Duration::from_secs(1);
const FLOOD_DEADLINE: Duration = Duration::from_secs(10);

static ONE_AT_A_TIME: Mutex<()> = Mutex::new(());

/// A server with default settings over a store holding the user `honest`.
fn with_server(name: &str, body: impl FnOnce(&ServerHandle)) {
    let _alone = ONE_AT_A_TIME.lock().unwrap_or_else(PoisonError::into_inner);
    let honest = support::account("honest", "HN0NST".into(), 9_200_000, PW);
    support::with_sqlite_server(name, [honest], support::udp_config, body);
}

/// Logs device `ssid` of `honest` in from a fresh socket on `ip`, resending
/// every 250 ms as a device retrying would; the time to a successful reply.
fn honest_login(server: SocketAddr, ip: Ipv4Addr, ssid: u8) -> Option<Duration> {
    let sock = UdpSocket::bind(SocketAddrV4::new(ip, 0)).unwrap();
    sock.set_read_timeout(Some(Duration::from_millis(250)))
        .unwrap();
    let hb = support::heartbeat("honest", ssid, PW, &[0u8; 24]);
    let t0 = Instant::now();
    while t0.elapsed() < ANSWER_WITHIN {
        sock.send_to(&hb, server).unwrap();
        if let Some(reply) = support::recv_type(&sock, PacketType::Heartbeat) {
            let ok = decode(&reply).unwrap().header.callsign_str() == Some("HN0NST");
            return ok.then(|| t0.elapsed());
        }
    }
    None
}

/// Sends `count` empty datagrams, each from a fresh socket (so a fresh
/// source port) on `source(i)`; stops early at [`FLOOD_DEADLINE`].
fn flood(
    server: SocketAddr,
    count: usize,
    source: fn(usize) -> Ipv4Addr,
    sent: Arc<AtomicUsize>,
    stop: Arc<AtomicBool>,
) -> std::thread::JoinHandle<Duration> {
    std::thread::spawn(move || {
        let t0 = Instant::now();
        for i in 0..count {
            if stop.load(Relaxed) || t0.elapsed() > FLOOD_DEADLINE {
                break;
            }
            if let Ok(s) = UdpSocket::bind(SocketAddrV4::new(source(i), 0)) {
                let _ = s.send_to(&[], server);
            }
            sent.store(i + 1, Relaxed);
        }
        t0.elapsed()
    })
}

/// Runs a flood and logs in once at mid-flood and once right after it.
fn honest_device_is_answered_during_and_after(
    srv: &ServerHandle,
    count: usize,
    source: fn(usize) -> Ipv4Addr,
) {
    let at = srv.local_addr();
    let sent = Arc::new(AtomicUsize::new(0));
    let stop = Arc::new(AtomicBool::new(false));
    let flooder = flood(at, count, source, Arc::clone(&sent), Arc::clone(&stop));
    let started = Instant::now();
    while sent.load(Relaxed) < count / 2 && started.elapsed() < FLOOD_DEADLINE {
        std::thread::sleep(Duration::from_millis(1));
    }
    let during = honest_login(at, Ipv4Addr::new(127, 0, 10, 1), 1);
    let took = flooder.join().unwrap();
    let after = honest_login(at, Ipv4Addr::new(127, 0, 10, 2), 2);
    std::thread::sleep(Duration::from_millis(50));
    let st = srv.stats();
    eprintln!(
        "{} datagrams in {took:?}; honest login answered during the flood in {during:?}, \
         after it in {after:?}; ingress {:?}",
        sent.load(Relaxed),
        st.ingress.counters()
    );
    stop.store(true, Relaxed);
    assert_eq!(sent.load(Relaxed), count, "the flood was cut short");
    assert!(during.is_some(), "no answer during the flood");
    assert!(after.is_some(), "no answer after the flood");
}

/// Issue 14's attack: 100,000 empty datagrams from rotating source ports of
/// 5 addresses filled the 65,536-entry IP:port table, and a fresh address
/// was refused (`rate_table_full_drops`) until the idle entries were swept.
#[test]
fn rotating_ports_of_five_addresses_do_not_lock_out_a_fresh_device() {
    with_server("flood_rotating_ports", |srv| {
        honest_device_is_answered_during_and_after(srv, 100_000, |i| {
            Ipv4Addr::new(127, 0, 9, (i % 5) as u8 + 1)
        });
    });
}

/// 65,536 distinct source addresses fill the per-IP table.
#[test]
fn distinct_addresses_do_not_lock_out_a_fresh_device() {
    with_server("flood_distinct_addresses", |srv| {
        honest_device_is_answered_during_and_after(srv, 65_536, |i| {
            let n = 0x7f40_0000 + i as u32;
            Ipv4Addr::from(n)
        });
    });
}
