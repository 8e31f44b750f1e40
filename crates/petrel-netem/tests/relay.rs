//! The relay over real loopback sockets, driven through the in-process API.
#![allow(clippy::unwrap_used)]

use std::net::{SocketAddr, UdpSocket};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use petrel_netem::{Direction, LinkConfig, Relay, RelayConfig, RelayStats, Route, RouteConfig};

/// A UDP echo server on loopback, stopped on drop.
struct Echo {
    addr: SocketAddr,
    stop: Arc<AtomicBool>,
    thread: Option<JoinHandle<()>>,
}

impl Echo {
    fn start() -> Echo {
        let sock = UdpSocket::bind("127.0.0.1:0").unwrap();
        sock.set_read_timeout(Some(Duration::from_millis(20)))
            .unwrap();
        roomy(&sock);
        let addr = sock.local_addr().unwrap();
        let stop = Arc::new(AtomicBool::new(false));
        let flag = Arc::clone(&stop);
        let thread = std::thread::spawn(move || {
            let mut buf = [0u8; 2048];
            while !flag.load(Ordering::SeqCst) {
                if let Ok((n, from)) = sock.recv_from(&mut buf) {
                    sock.send_to(&buf[..n], from).unwrap();
                }
            }
        });
        Echo {
            addr,
            stop,
            thread: Some(thread),
        }
    }
}

impl Drop for Echo {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::SeqCst);
        self.thread.take().unwrap().join().unwrap();
    }
}

/// A large receive buffer, so a busy machine does not drop what the relay counted.
fn roomy(s: &UdpSocket) {
    socket2::SockRef::from(s)
        .set_recv_buffer_size(4 << 20)
        .unwrap();
}

fn client() -> UdpSocket {
    let c = UdpSocket::bind("127.0.0.1:0").unwrap();
    roomy(&c);
    c.set_read_timeout(Some(Duration::from_secs(1))).unwrap();
    c
}

/// Sends `count` numbered datagrams, 200 µs apart, while another thread collects the
/// echoes until 1 s passes without one. Returns the sequence numbers and RTTs.
fn ping(c: &UdpSocket, to: SocketAddr, count: u32) -> Vec<(u32, Duration)> {
    let start = Instant::now();
    let rx = c.try_clone().unwrap();
    let receiver = std::thread::spawn(move || {
        let mut got = Vec::new();
        let mut buf = [0u8; 200];
        while let Ok(n) = rx.recv(&mut buf) {
            assert_eq!(n, 100);
            let i = u32::from_be_bytes(buf[..4].try_into().unwrap());
            let sent = start + Duration::from_micros(200) * i;
            got.push((i, sent.elapsed()));
        }
        got
    });
    for i in 0..count {
        let mut msg = [0u8; 100];
        msg[..4].copy_from_slice(&i.to_be_bytes());
        c.send_to(&msg, to).unwrap();
        // Pace on an absolute schedule so RTTs can be computed from the number.
        let next = start + Duration::from_micros(200) * (i + 1);
        std::thread::sleep(next.saturating_duration_since(Instant::now()));
    }
    receiver.join().unwrap()
}

/// Waits until the published counters show `pred`, up to 2 s.
fn settled(relay: &Relay, pred: impl Fn(&RelayStats) -> bool) -> RelayStats {
    let until = Instant::now() + Duration::from_secs(2);
    loop {
        let s = relay.stats();
        if pred(&s) || Instant::now() > until {
            return s;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
}

#[test]
fn forwards_both_ways_without_impairment() {
    let echo = Echo::start();
    let relay = Relay::start(RelayConfig::new("127.0.0.1:0".parse().unwrap(), echo.addr)).unwrap();
    let c = client();
    let got = ping(&c, relay.local_addr(), 1000);
    assert_eq!(got.len(), 1000);
    let s = settled(&relay, |s| s.downstream_total.forwarded_packets == 1000);
    assert_eq!(s.routes.len(), 1);
    assert_eq!(s.routes[0].client, c.local_addr().unwrap());
    for t in [&s.upstream_total, &s.downstream_total] {
        assert_eq!(
            (t.in_packets, t.forwarded_packets, t.dropped.total()),
            (1000, 1000, 0)
        );
        assert_eq!(t.forwarded_bytes, 100_000);
    }
    assert_eq!(s.lateness.samples, 2000);
    let last = relay.stop().unwrap();
    assert_eq!(last.downstream_total.forwarded_packets, 1000);
}

#[test]
fn applies_seeded_loss_and_delay_exactly_as_the_model() {
    let echo = Echo::start();
    let link = LinkConfig {
        random_loss: 0.1,
        delay: Duration::from_millis(5),
        ..Default::default()
    };
    let mut cfg = RelayConfig::new("127.0.0.1:0".parse().unwrap(), echo.addr);
    cfg.route = RouteConfig::symmetric(link);
    cfg.seed = 7;
    let relay = Relay::start(cfg.clone()).unwrap();
    let c = client();
    let got = ping(&c, relay.local_addr(), 2000);
    let s = settled(&relay, |s| {
        s.downstream_total.forwarded_packets == got.len() as u64
    });

    // The same seed and route index in the sans-IO model predict the upstream drops.
    let mut model: Route<Vec<u8>> = Route::new(&cfg.route, 7, 0);
    let t = Instant::now();
    let kept = (0..2000)
        .filter(|_| model.offer(Direction::Upstream, t, vec![0; 100]).queued == 1)
        .count() as u64;
    assert_eq!(s.upstream_total.forwarded_packets, kept);
    assert_eq!(s.upstream_total.dropped.random, 2000 - kept);
    assert_eq!(s.downstream_total.in_packets, kept);
    assert_eq!(got.len() as u64, s.downstream_total.forwarded_packets);
    let r = &s.routes[0];
    assert!(
        (r.upstream.observed_loss - 0.1).abs() < 0.03,
        "{}",
        r.upstream.observed_loss
    );
    assert_eq!(r.upstream.configured_loss, 0.1);
    // Two 5 ms one-way delays: no echo can come back sooner than 10 ms.
    assert!(got.iter().all(|(_, rtt)| *rtt >= Duration::from_millis(10)));
}

#[test]
fn each_client_gets_its_own_route_up_to_the_limit() {
    let echo = Echo::start();
    let mut cfg = RelayConfig::new("127.0.0.1:0".parse().unwrap(), echo.addr);
    cfg.max_routes = 2;
    let relay = Relay::start(cfg).unwrap();
    let clients = [client(), client(), client()];
    for c in &clients {
        c.send_to(b"hello", relay.local_addr()).unwrap();
        std::thread::sleep(Duration::from_millis(20));
    }
    let mut buf = [0u8; 16];
    assert_eq!(clients[0].recv(&mut buf).unwrap(), 5);
    assert_eq!(clients[1].recv(&mut buf).unwrap(), 5);
    assert!(clients[2].recv(&mut buf).is_err());
    let s = settled(&relay, |s| s.routes_rejected == 1);
    assert_eq!(s.routes_rejected, 1);
    assert_eq!(s.routes.len(), 2);
    let locals: Vec<_> = s.routes.iter().map(|r| r.upstream_local.unwrap()).collect();
    assert_ne!(
        locals[0], locals[1],
        "each route has its own upstream socket"
    );
}

#[test]
fn rejects_invalid_configuration() {
    let mut cfg = RelayConfig::new(
        "127.0.0.1:0".parse().unwrap(),
        "127.0.0.1:9".parse().unwrap(),
    );
    cfg.route.upstream.random_loss = 2.0;
    let e = Relay::start(cfg).unwrap_err();
    assert!(e.to_string().contains("random_loss"), "{e}");
    let e = Relay::start(RelayConfig::default()).unwrap_err();
    assert!(e.to_string().contains("upstream"), "{e}");
}

#[test]
fn idle_routes_expire_and_free_their_place() {
    let echo = Echo::start();
    let mut cfg = RelayConfig::new("127.0.0.1:0".parse().unwrap(), echo.addr);
    cfg.max_routes = 1;
    cfg.route_idle_timeout = Some(Duration::from_millis(100));
    let relay = Relay::start(cfg).unwrap();
    let (a, b) = (client(), client());
    let mut buf = [0u8; 16];
    a.send_to(b"first", relay.local_addr()).unwrap();
    assert_eq!(a.recv(&mut buf).unwrap(), 5);
    let s = settled(&relay, |s| s.routes_expired == 1);
    assert_eq!((s.routes_expired, s.routes.len()), (1, 0));
    // The expired route's counters stay in the totals.
    assert_eq!(s.upstream_total.forwarded_packets, 1);
    b.send_to(b"second", relay.local_addr()).unwrap();
    assert_eq!(b.recv(&mut buf).unwrap(), 6);
    let s = settled(&relay, |s| s.routes.len() == 1);
    assert_eq!(
        s.routes[0].index, 1,
        "a new route gets the next index and stream"
    );
    assert_eq!(s.routes[0].client, b.local_addr().unwrap());
    assert_eq!(s.routes_rejected, 0);
    assert_eq!(s.upstream_total.forwarded_packets, 2);
}
