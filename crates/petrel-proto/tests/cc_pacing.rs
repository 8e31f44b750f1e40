//! The KCP sender paces when its controller asks: datagrams leave at the pacing rate
//! in bursts of at most one send quantum, and `poll_timeout` names the next release.
#![allow(clippy::unwrap_used)]

use std::time::{Duration, Instant};

use petrel_proto::cc::CongestionKind;
use petrel_proto::kcp::{Kcp, KcpConfig};

const MS: Duration = Duration::from_millis(1);

/// A sender and receiver of `congestion` that exchanged one message over a 10 ms RTT
/// (so the controller has an RTT sample), then the sender queued `count` segments.
fn warmed_up(congestion: CongestionKind, count: usize) -> (Kcp, Kcp, Instant) {
    let t0 = Instant::now();
    let config = KcpConfig {
        congestion,
        // Every segment of the burst queued at once.
        notsent_lowat: 1 << 20,
        ..KcpConfig::default()
    };
    let mut a = Kcp::new(9, config, t0).unwrap();
    let mut b = Kcp::new(9, config, t0).unwrap();
    let mut out = Vec::new();
    a.send(b"hi").unwrap();
    assert!(a.poll_transmit(t0, &mut out));
    b.input(t0 + 5 * MS, &out).unwrap();
    assert!(b.poll_transmit(t0 + 5 * MS, &mut out));
    let now = t0 + 10 * MS;
    a.input(now, &out).unwrap();
    for _ in 0..count {
        a.send(&vec![1; a.mss()]).unwrap();
    }
    (a, b, now)
}

#[test]
fn paced_sender_releases_a_quantum_then_waits_for_the_pacer() {
    let (mut a, _b, now) = warmed_up(CongestionKind::Cubic, 10);
    let mut out = Vec::new();
    let mut burst = 0;
    while a.poll_transmit(now, &mut out) {
        burst += 1;
    }
    let s = a.stats();
    // cwnd 12 026 bytes (10 segments plus the acked "hi") over a 10 ms srtt at the
    // slow-start factor 2: 2.4 MB/s, a quantum of 2 datagrams (2 × 1200 bytes plus a
    // few), not the 10 segments cwnd allows.
    assert_eq!(s.pacing_rate, 2 * 12_026 * 100);
    assert_eq!(burst, 2);
    assert!(s.pacing_waits >= 1);
    let release = a.poll_timeout().unwrap();
    let gap = (release - now).as_secs_f64();
    let one_datagram = 1200.0 / s.pacing_rate as f64;
    assert!(gap > 0.9 * one_datagram && gap <= one_datagram, "{gap}");
    assert!(!a.poll_transmit(release - Duration::from_nanos(1), &mut out));
    assert!(a.poll_transmit(release, &mut out));
    assert!(!a.poll_transmit(release, &mut out));
    // Released one by one at the rate until cwnd is full.
    let mut t = release;
    let mut sent = burst + 1;
    while let Some(next) = a.poll_timeout().filter(|_| sent < 10) {
        assert!(next > t);
        t = next;
        a.handle_timeout(t);
        while a.poll_transmit(t, &mut out) {
            sent += 1;
        }
    }
    assert_eq!(sent, 10);
    let spread = (t - now).as_secs_f64();
    assert!(spread >= 7.0 * 0.9 * one_datagram, "{spread}");
}

#[test]
fn unpaced_sender_flushes_the_window_at_once() {
    let (mut a, _b, now) = warmed_up(CongestionKind::None, 100);
    let mut out = Vec::new();
    let mut burst = 0;
    while a.poll_transmit(now, &mut out) {
        burst += 1;
    }
    assert_eq!(burst, 100);
    assert_eq!(a.stats().pacing_waits, 0);
}

#[test]
fn bbr_paces_from_the_first_datagram_and_idles_without_a_deadline() {
    for kind in [
        CongestionKind::BbrV1,
        CongestionKind::BbrV2,
        CongestionKind::BbrV3,
    ] {
        let (mut a, mut b, mut now) = warmed_up(kind, 200);
        let mut out = Vec::new();
        // Deliver everything over a 10 ms RTT, driven only by poll_timeout.
        let mut in_transit: Vec<(Instant, Vec<u8>)> = Vec::new();
        let mut acks: Vec<(Instant, Vec<u8>)> = Vec::new();
        let end = now + Duration::from_secs(5);
        while now < end && a.pending_segments() > 0 {
            a.handle_timeout(now);
            while a.poll_transmit(now, &mut out) {
                in_transit.push((now + 5 * MS, out.clone()));
            }
            in_transit.retain(|(at, d)| {
                if *at <= now {
                    b.input(now, d).unwrap();
                    false
                } else {
                    true
                }
            });
            while b.recv().is_some() {}
            while b.poll_transmit(now, &mut out) {
                acks.push((now + 5 * MS, out.clone()));
            }
            acks.retain(|(at, d)| {
                if *at <= now {
                    a.input(now, d).unwrap();
                    false
                } else {
                    true
                }
            });
            let next = [a.poll_timeout()]
                .into_iter()
                .chain(in_transit.iter().map(|(t, _)| Some(*t)))
                .chain(acks.iter().map(|(t, _)| Some(*t)))
                .flatten()
                .min();
            now = next.unwrap_or(now + MS).max(now + Duration::from_nanos(1));
        }
        assert_eq!(a.pending_segments(), 0, "{kind}");
        assert!(a.stats().pacing_waits > 0, "{kind}");
        assert_eq!(a.poll_timeout(), None, "{kind}: idle sender keeps a timer");
        // A long idle period, then more data: still paced, no overflow.
        let later = now + Duration::from_secs(3 * 3600);
        a.handle_timeout(later);
        a.send(&vec![2; 5000]).unwrap();
        assert!(a.poll_transmit(later, &mut out));
        assert!(a.stats().pacing_rate > 0);
    }
}
