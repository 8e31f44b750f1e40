//! A user-defined congestion controller plugged in through
//! [`ControllerFactory`] on [`KcpConfig::controller`], without touching the crate:
//! a fixed window of three segments, driven by KCP and by a [`Session`] over the
//! deterministic simulated link (`support`).
#![allow(clippy::unwrap_used)]

mod support;

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use petrel_proto::cc::{
    AckEvent, CongestionController, ControllerFactory, ControllerParams, LossEvent, SentEvent,
};
use petrel_proto::handshake::{Binding, Established, RAW_PARAMS};
use petrel_proto::kcp::{Kcp, KcpConfig};
use petrel_proto::session::{Session, SessionConfig};
use support::{Link, LinkConfig, Machine, Sim};

/// Segments the fixed window holds.
const WINDOW_SEGMENTS: u64 = 3;

/// What the factory and its controllers saw, shared with the test.
#[derive(Debug, Default)]
struct Seen {
    builds: AtomicU64,
    max_datagram_size: AtomicU64,
    seed: AtomicU64,
    acks: AtomicU64,
}

/// A window of [`WINDOW_SEGMENTS`] datagrams whatever happens; counts acks.
#[derive(Debug)]
struct FixedWindow {
    window: u64,
    seen: Arc<Seen>,
}

impl CongestionController for FixedWindow {
    fn on_sent(&mut self, _event: &SentEvent) {}
    fn on_ack(&mut self, _event: &AckEvent) {
        self.seen.acks.fetch_add(1, Ordering::Relaxed);
    }
    fn on_loss(&mut self, _event: &LossEvent) {}
    fn cwnd(&self) -> u64 {
        self.window
    }
    fn pacing_rate(&self) -> Option<u64> {
        None
    }
    fn send_quantum(&self) -> u64 {
        u64::MAX
    }
    fn set_max_datagram_size(&mut self, max_datagram_size: u64) {
        self.window = WINDOW_SEGMENTS * max_datagram_size;
    }
    fn name(&self) -> &'static str {
        "fixed3"
    }
}

#[derive(Debug, Default)]
struct FixedWindowFactory {
    seen: Arc<Seen>,
}

impl ControllerFactory for FixedWindowFactory {
    fn build(&self, _now: Instant, params: &ControllerParams) -> Box<dyn CongestionController> {
        self.seen.builds.fetch_add(1, Ordering::Relaxed);
        self.seen
            .max_datagram_size
            .store(params.max_datagram_size, Ordering::Relaxed);
        self.seen.seed.store(params.seed, Ordering::Relaxed);
        Box::new(FixedWindow {
            window: WINDOW_SEGMENTS * params.max_datagram_size,
            seen: Arc::clone(&self.seen),
        })
    }

    fn name(&self) -> &str {
        "fixed3"
    }
}

/// A config with a fresh factory (leaked: a factory lives as long as its
/// configuration, here the test).
fn fixed_config() -> (KcpConfig, Arc<Seen>) {
    let factory: &'static FixedWindowFactory = Box::leak(Box::default());
    (
        KcpConfig::default().with_controller(factory),
        Arc::clone(&factory.seen),
    )
}

/// Runs `sim` until `count` messages reached `b` and the acks are back; returns the
/// most segments the sender had in flight after any step.
fn deliver_all<M: Machine>(
    sim: &mut Sim<M>,
    count: usize,
    in_flight: impl Fn(&M) -> u64,
    recv: impl Fn(&mut M) -> Option<bytes::Bytes>,
) -> u64 {
    let limit = sim.start + Duration::from_secs(30);
    let mut received = 0;
    let mut peak = 0;
    while received < count {
        assert!(sim.step(limit), "stalled after {received} messages");
        peak = peak.max(in_flight(&sim.a));
        while recv(&mut sim.b).is_some() {
            received += 1;
        }
    }
    // Let the last acks arrive.
    let quiet = sim.now + Duration::from_secs(1);
    while sim.step(quiet) {}
    peak
}

#[test]
fn user_controller_window_limits_kcp_in_flight() {
    let (config, seen) = fixed_config();
    assert_eq!(config.controller_name(), "fixed3");
    let start = Instant::now();
    let mut a = Kcp::new(7, config, start).unwrap();
    assert_eq!(seen.builds.load(Ordering::Relaxed), 1);
    assert_eq!(seen.max_datagram_size.load(Ordering::Relaxed), 1200);
    assert_eq!(seen.seed.load(Ordering::Relaxed), 7);
    for _ in 0..50 {
        a.send(&vec![0; a.mss()]).unwrap();
    }
    let mut out = Vec::new();
    while a.poll_transmit(start, &mut out) {}
    let stats = a.stats();
    assert_eq!(
        (stats.in_flight, stats.in_flight_bytes, stats.cwnd),
        (3, 3600, 3600)
    );

    // A whole transfer: the window holds throughout and the controller sees the acks.
    let b = Kcp::new(7, KcpConfig::default(), start).unwrap();
    let link = LinkConfig::clean(Duration::from_millis(10));
    let mut sim = Sim::new(start, a, b, Link::new(link, 1), Link::new(link, 2));
    let peak = deliver_all(&mut sim, 50, |k| k.stats().in_flight, Kcp::recv);
    assert_eq!(peak, WINDOW_SEGMENTS);
    assert_eq!(seen.acks.load(Ordering::Relaxed), 50);
}

#[test]
fn user_controller_runs_inside_a_session() {
    let (kcp, seen) = fixed_config();
    let config = SessionConfig {
        kcp,
        ..SessionConfig::default()
    };
    let established = Established {
        conv: 0x0fac_7041,
        params: RAW_PARAMS,
        binding: Binding::Raw,
    };
    let start = Instant::now();
    let a = Session::new(&established, &config, start).unwrap();
    let b = Session::new(&established, &SessionConfig::default(), start).unwrap();
    assert_eq!(seen.builds.load(Ordering::Relaxed), 1);
    assert_eq!(seen.seed.load(Ordering::Relaxed), 0x0fac_7041);
    let link = LinkConfig::clean(Duration::from_millis(10));
    let mut sim = Sim::new(start, a, b, Link::new(link, 3), Link::new(link, 4));
    // One full segment per message (the largest message is 255 segments), so the
    // 3600-byte window is exactly three segments.
    let size = sim.a.max_message_size() / 255;
    for _ in 0..40 {
        sim.a.send(&vec![1; size]).unwrap();
    }
    let peak = deliver_all(&mut sim, 40, |s| s.stats().kcp.in_flight, Session::recv);
    assert_eq!(peak, WINDOW_SEGMENTS);
    assert_eq!(sim.a.stats().kcp.cwnd, WINDOW_SEGMENTS * 1200);
    assert_eq!(seen.acks.load(Ordering::Relaxed), 40);
}
