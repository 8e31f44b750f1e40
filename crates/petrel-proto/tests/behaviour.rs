//! Targeted behaviours of the KCP state machine: dead link, window probing, idle,
//! fast retransmit, limits. All driven by a simulated clock.
#![allow(clippy::unwrap_used)]

mod support;

use std::time::{Duration, Instant};

use petrel_proto::cc::CongestionKind;
use petrel_proto::kcp::{InputError, Kcp, KcpConfig, KcpError, SendError};
use support::{Link, LinkConfig, Sim};

const MS: Duration = Duration::from_millis(1);

fn pair(config_a: KcpConfig, config_b: KcpConfig, link: LinkConfig) -> Sim {
    let start = Instant::now();
    Sim::new(
        start,
        Kcp::new(42, config_a, start).unwrap(),
        Kcp::new(42, config_b, start).unwrap(),
        Link::new(link, 1),
        Link::new(link, 2),
    )
}

#[test]
fn dead_link_is_reported_in_bounded_time() {
    let mut sim = pair(
        KcpConfig::default(),
        KcpConfig::default(),
        LinkConfig::clean(10 * MS),
    );
    sim.a.send(b"hello").unwrap();
    // Exchange once so an RTT sample exists, then the peer vanishes.
    let limit = sim.now + Duration::from_secs(1);
    while sim.step(limit) {}
    assert_eq!(sim.b.recv().as_deref(), Some(&b"hello"[..]));
    sim.ab.config.loss = 1.0;
    sim.a.send(b"into the void").unwrap();
    let start = sim.now;
    let limit = sim.now + Duration::from_secs(3600);
    while sim.a.error().is_none() && sim.step(limit) {}
    let dead_after = sim.now - start;
    assert_eq!(
        sim.a.error(),
        Some(&KcpError::DeadLink {
            sn: 1,
            retransmissions: 20
        })
    );
    // 30 ms RTO floor, ×1.5 backoff capped at 60 s: about 4 minutes.
    assert!(dead_after < Duration::from_secs(600), "{dead_after:?}");
    assert!(dead_after > Duration::from_secs(60), "{dead_after:?}");
    assert_eq!(sim.a.send(b"x"), Err(SendError::Dead));
    assert_eq!(sim.a.poll_timeout(), None);
    assert_eq!(sim.a.input(sim.now, &[0; 24]), Err(InputError::Dead));
    assert_eq!(sim.a.stats().retransmissions_timeout, 20);
}

#[test]
fn zero_window_is_probed_and_transfer_resumes_when_the_receiver_reads() {
    let a_config = KcpConfig {
        snd_wnd: 32,
        ..KcpConfig::default()
    };
    let b_config = KcpConfig {
        rcv_wnd: 16,
        ..KcpConfig::default()
    };
    let mut sim = pair(a_config, b_config, LinkConfig::clean(10 * MS));
    let messages: Vec<Vec<u8>> = (0..100u8).map(|i| vec![i; 500]).collect();
    for m in &messages {
        sim.a.send(m).unwrap();
    }
    // The receiver does not read for 10 s: its window fills, the sender probes.
    let limit = sim.now + Duration::from_secs(10);
    while sim.step(limit) {}
    let a = sim.a.stats();
    assert_eq!(a.rmt_wnd, 0);
    assert!(a.window_probes_sent >= 3, "{a:?}");
    assert!(sim.b.stats().window_tells_sent >= 3);
    // 16 segments wait in b's receive queue and 16 more in its reorder buffer.
    assert_eq!(sim.a.pending_segments(), 100 - 2 * 16);
    // Probes back off: at most a handful in 10 s, not one per tick.
    assert!(a.window_probes_sent <= 12, "{a:?}");
    // Now the application reads: the window reopens and everything arrives in order.
    let mut received = Vec::new();
    let limit = sim.now + Duration::from_secs(10);
    loop {
        while let Some(m) = sim.b.recv() {
            received.push(m.to_vec());
        }
        if !sim.step(limit) {
            break;
        }
    }
    assert_eq!(received, messages);
    assert_eq!(sim.a.pending_segments(), 0);
    assert_eq!(sim.a.poll_timeout(), None);
}

#[test]
fn idle_connection_has_no_deadline() {
    let mut sim = pair(
        KcpConfig::default(),
        KcpConfig::default(),
        LinkConfig::clean(5 * MS),
    );
    assert_eq!(sim.a.poll_timeout(), None);
    sim.a.send(&[1; 3000]).unwrap();
    sim.b.send(b"pong").unwrap();
    sim.flush();
    assert!(sim.a.poll_timeout().is_some());
    let limit = sim.now + Duration::from_secs(5);
    while sim.step(limit) {}
    assert_eq!(sim.b.recv().map(|m| m.len()), Some(3000));
    assert_eq!(sim.a.recv().as_deref(), Some(&b"pong"[..]));
    assert_eq!((sim.a.pending_segments(), sim.b.pending_segments()), (0, 0));
    assert_eq!(sim.a.poll_timeout(), None);
    assert_eq!(sim.b.poll_timeout(), None);
    let mut out = Vec::new();
    assert!(!sim.a.poll_transmit(sim.now, &mut out));
    assert!(out.is_empty());
}

#[test]
fn held_acks_wait_for_the_interval_when_ack_nodelay_is_off() {
    let start = Instant::now();
    let config = KcpConfig {
        ack_nodelay: false,
        ..KcpConfig::default()
    };
    let mut a = Kcp::new(9, KcpConfig::default(), start).unwrap();
    let mut b = Kcp::new(9, config, start).unwrap();
    let mut out = Vec::new();
    a.send(b"x").unwrap();
    assert!(a.poll_transmit(start, &mut out));
    b.input(start, &out).unwrap();
    assert!(!b.poll_transmit(start, &mut out), "ack held");
    assert_eq!(b.poll_timeout(), Some(start + 10 * MS));
    b.handle_timeout(start + 10 * MS);
    assert!(b.poll_transmit(start + 10 * MS, &mut out));
    assert_eq!(b.stats().acks_sent, 1);
    assert_eq!(b.poll_timeout(), None);
}

#[test]
fn send_goes_out_immediately_and_ack_right_after_input() {
    let start = Instant::now();
    let mut a = Kcp::new(9, KcpConfig::default(), start).unwrap();
    let mut b = Kcp::new(9, KcpConfig::default(), start).unwrap();
    let mut out = Vec::new();
    let mut spare = Vec::new();
    a.send(b"ping").unwrap();
    assert!(
        a.poll_transmit(start, &mut out),
        "no waiting for the interval"
    );
    assert!(!a.poll_transmit(start, &mut spare));
    b.input(start + MS, &out).unwrap();
    b.send(b"pong").unwrap();
    assert!(b.poll_transmit(start + MS, &mut out));
    // The ack and the reply share one datagram.
    assert_eq!(out.len(), 24 + 24 + 4);
    assert!(!b.poll_transmit(start + MS, &mut spare));
    a.input(start + 2 * MS, &out).unwrap();
    assert_eq!(a.pending_segments(), 0);
    assert_eq!(a.stats().srtt_us, 2000);
}

#[test]
fn fast_retransmit_fires_before_the_rto() {
    let start = Instant::now();
    let config = KcpConfig::default();
    let mut a = Kcp::new(3, config, start).unwrap();
    let mut b = Kcp::new(3, config, start).unwrap();
    let mss = a.mss();
    for i in 0..10u8 {
        a.send(&vec![i; mss]).unwrap();
    }
    let mut datagrams = Vec::new();
    let mut out = Vec::new();
    while a.poll_transmit(start, &mut out) {
        datagrams.push(out.clone());
    }
    assert_eq!(datagrams.len(), 10);
    // The first data datagram is lost; the rest arrive one by one, each acked at once.
    let now = start + 5 * MS;
    for d in &datagrams[1..] {
        b.input(now, d).unwrap();
        assert!(b.poll_transmit(now, &mut out));
        a.input(now, &out).unwrap();
    }
    let s = a.stats();
    assert_eq!(s.retransmissions_fast, 1);
    assert_eq!(s.retransmissions_timeout, 0);
    assert!(
        a.poll_transmit(now, &mut out),
        "retransmission goes out at once"
    );
    assert!(now < start + config.min_rto);
    b.input(now, &out).unwrap();
    for i in 0..10u8 {
        assert_eq!(b.recv().unwrap(), vec![i; mss]);
    }
}

#[test]
fn message_size_limit_and_zero_length_messages() {
    let start = Instant::now();
    let mut a = Kcp::new(1, KcpConfig::default(), start).unwrap();
    let max = a.max_message_size();
    assert_eq!(max, 1176 * 255);
    // The empty message goes first: after the largest one the queue is full (its
    // 255 segments and 299,880 bytes) and takes nothing until it drains.
    assert_eq!(
        a.send(&vec![0; max + 1]),
        Err(SendError::MessageTooLarge { len: max + 1, max })
    );
    assert!(!a.can_send(max + 1));
    assert!(a.can_send(max));
    a.send(&[]).unwrap();
    a.send(&vec![0; max]).unwrap();
    let mut b = Kcp::new(1, KcpConfig::default(), start).unwrap();
    let mut out = Vec::new();
    let mut now = start;
    while a.pending_segments() > 0 {
        while a.poll_transmit(now, &mut out) {
            b.input(now, &out).unwrap();
        }
        while b.poll_transmit(now, &mut out) {
            a.input(now, &out).unwrap();
        }
        now += MS;
    }
    assert_eq!(b.recv().map(|m| m.len()), Some(0));
    assert_eq!(b.recv().map(|m| m.len()), Some(max));
    assert_eq!(b.recv(), None);
}

#[test]
fn send_queue_is_bounded_in_bytes() {
    let start = Instant::now();
    let config = KcpConfig {
        notsent_lowat: 2000,
        ..KcpConfig::default()
    };
    let mut a = Kcp::new(1, config, start).unwrap();
    let mss = a.mss();
    // A message longer than the low-water mark enters an empty queue whole.
    a.send(&vec![7; 3 * mss]).unwrap();
    assert!(!a.send_queue_low());
    assert!(!a.can_send(1));
    assert_eq!(a.send(b"m"), Err(SendError::QueueFull));
    assert_eq!(a.stats().send_queue_full, 1);
    let mut out = Vec::new();
    while a.poll_transmit(start, &mut out) {}
    assert!(a.send_queue_low());
    // Below the mark a message is taken even if it ends above it; then nothing is.
    a.send(&vec![1; mss]).unwrap();
    a.send(&vec![2; mss]).unwrap();
    assert_eq!(a.send(&vec![3; mss]), Err(SendError::QueueFull));
    // 2 × 1176 bytes wait: above half the mark, so blocked writers still sleep.
    assert!(!a.send_queue_low());
}

#[test]
fn send_queue_is_bounded() {
    let start = Instant::now();
    let config = KcpConfig {
        send_queue_limit: 8,
        ..KcpConfig::default()
    };
    let mut a = Kcp::new(1, config, start).unwrap();
    assert_eq!(a.max_message_size(), 8 * a.mss());
    for _ in 0..8 {
        a.send(b"m").unwrap();
    }
    assert!(!a.can_send(1));
    assert_eq!(a.send(b"m"), Err(SendError::QueueFull));
    assert_eq!(a.stats().send_queue_full, 1);
    // Moving the queue into the send window makes room again.
    let mut out = Vec::new();
    while a.poll_transmit(start, &mut out) {}
    assert!(a.can_send(1));
    a.send(b"m").unwrap();
}

#[test]
fn bad_input_is_an_error_and_changes_nothing() {
    let start = Instant::now();
    let mut a = Kcp::new(1, KcpConfig::default(), start).unwrap();
    let mut other = Kcp::new(2, KcpConfig::default(), start).unwrap();
    let mut out = Vec::new();
    other.send(b"x").unwrap();
    assert!(other.poll_transmit(start, &mut out));
    assert!(matches!(
        a.input(start, &out),
        Err(InputError::ConvMismatch {
            expected: 1,
            got: 2
        })
    ));
    assert!(matches!(
        a.input(start, &out[..10]),
        Err(InputError::Malformed(_))
    ));
    assert_eq!(a.stats().input_errors, 2);
    assert_eq!(a.stats().datagrams_received, 0);
    assert!(!a.poll_transmit(start, &mut out));
}

#[test]
fn congestion_window_limits_bytes_in_flight() {
    let start = Instant::now();
    let send_burst = |congestion| {
        let config = KcpConfig {
            congestion,
            // 200 full segments queued at once.
            notsent_lowat: 200 * 1176,
            ..KcpConfig::default()
        };
        let mut a = Kcp::new(1, config, start).unwrap();
        for _ in 0..200 {
            a.send(&vec![0; a.mss()]).unwrap();
        }
        let mut out = Vec::new();
        while a.poll_transmit(start, &mut out) {}
        a.stats()
    };
    // NewReno's initial window is 10 × 1200 bytes: 10 full segments.
    let reno = send_burst(CongestionKind::NewReno);
    assert_eq!(
        (reno.in_flight, reno.in_flight_bytes, reno.cwnd),
        (10, 12_000, 12_000)
    );
    // Without a controller the peer's assumed window (128, the reference default) rules.
    let none = send_burst(CongestionKind::None);
    assert_eq!(none.in_flight, 128);
}
