//! The KCP core against a lying peer: oversized segments, arbitrary headers. Simulated
//! clock, seeded inputs.

#![allow(clippy::unwrap_used)]

use std::time::{Duration, Instant};

use petrel_proto::kcp::segment::{encode_segment, segments, Command, Header};
use petrel_proto::kcp::{Kcp, KcpConfig};
use proptest::prelude::*;

const CONV: u32 = 0x0102_0304;

fn push(sn: u32, payload: &[u8]) -> Vec<u8> {
    let header = Header {
        conv: CONV,
        cmd: Command::Push,
        frg: 0,
        wnd: 128,
        ts: 0,
        sn,
        una: 0,
        len: 0,
    };
    let mut out = Vec::new();
    encode_segment(&header, payload, &mut out);
    out
}

/// The sns `kcp` acknowledges in everything it has to send at `now`.
fn acked(kcp: &mut Kcp, now: Instant) -> Vec<u32> {
    let mut out = Vec::new();
    let mut sns = Vec::new();
    while kcp.poll_transmit(now, &mut out) {
        for seg in segments(&out).flatten() {
            if seg.header.cmd == Command::Ack {
                sns.push(seg.header.sn);
            }
        }
    }
    sns
}

/// A segment far above the mss is dropped unacknowledged and counted; one at the
/// Ethernet mss is accepted even though our own mss is smaller.
#[test]
fn oversized_segment_is_dropped_and_counted() {
    let t0 = Instant::now();
    let mut kcp = Kcp::new(CONV, KcpConfig::default(), t0).unwrap();
    assert_eq!(kcp.max_segment_payload(), 1448);
    kcp.input(t0, &push(0, &[7u8; 60_000])).unwrap();
    assert_eq!(kcp.stats().segments_dropped_oversize, 1);
    assert!(acked(&mut kcp, t0).is_empty());
    assert!(kcp.recv().is_none());
    kcp.input(t0, &push(0, &[7u8; 1448])).unwrap();
    assert_eq!(acked(&mut kcp, t0), vec![0]);
    assert_eq!(kcp.recv().unwrap().len(), 1448);
}

/// A peer that fills both the receive buffer and the queue gets at most
/// `2 × rcv_wnd × max_segment_payload` bytes acknowledged, however large its segments.
#[test]
fn receive_side_bytes_are_bounded() {
    let t0 = Instant::now();
    let config = KcpConfig::default();
    let mut kcp = Kcp::new(CONV, config, t0).unwrap();
    let rcv_wnd = u32::from(config.rcv_wnd);
    let mut acked_bytes = 0usize;
    for sn in (0..rcv_wnd).chain(rcv_wnd + 1..2 * rcv_wnd) {
        let len = if sn % 2 == 0 { 60_000 } else { 1448 };
        kcp.input(t0, &push(sn, &vec![1u8; len])).unwrap();
        acked_bytes += acked(&mut kcp, t0).len() * len;
    }
    let bound = 2 * config.rcv_wnd as usize * kcp.max_segment_payload();
    assert!(acked_bytes <= bound, "{acked_bytes} > {bound}");
    assert_eq!(
        kcp.stats().segments_dropped_oversize,
        u64::from(rcv_wnd) - 1,
        "every even sn but {rcv_wnd} was oversized"
    );
}

/// Moves every datagram between two connections for `steps` simulated milliseconds,
/// delivering messages to `received`.
/// A datagram of window updates carrying the given cumulative acks.
fn unas(unas: &[u32]) -> Vec<u8> {
    let mut out = Vec::new();
    for &una in unas {
        let header = Header {
            conv: CONV,
            cmd: Command::WindowTell,
            frg: 0,
            wnd: 128,
            ts: 0,
            sn: 0,
            una,
            len: 0,
        };
        encode_segment(&header, &[], &mut out);
    }
    out
}

/// A `una` 2^31 or more ahead is behind in wrapping order and acks nothing, also
/// after an earlier segment of the same datagram advanced the cumulative ack.
#[test]
fn a_una_half_the_sequence_space_ahead_acks_nothing() {
    let t0 = Instant::now();
    let mut kcp = Kcp::new(CONV, KcpConfig::default(), t0).unwrap();
    for i in 0..10u8 {
        kcp.send(&[i; 100]).unwrap();
    }
    let mut out = Vec::new();
    while kcp.poll_transmit(t0, &mut out) {}
    assert_eq!(kcp.pending_segments(), 10);
    kcp.input(t0, &unas(&[1, 1 << 31, 2, 1 << 31])).unwrap();
    assert_eq!(kcp.pending_segments(), 8);
}

fn run(a: &mut Kcp, b: &mut Kcp, t0: Instant, steps: u64, received: &mut Vec<Vec<u8>>) {
    let mut out = Vec::new();
    for ms in 1..=steps {
        let now = t0 + Duration::from_millis(ms);
        for k in [&mut *a, &mut *b] {
            if k.poll_timeout().is_some_and(|t| t <= now) {
                k.handle_timeout(now);
            }
        }
        while a.poll_transmit(now, &mut out) {
            let _ = b.input(now, &out);
        }
        while let Some(m) = b.recv() {
            received.push(m.to_vec());
        }
        while b.poll_transmit(now, &mut out) {
            let _ = a.input(now, &out);
        }
        if a.pending_segments() == 0 && a.error().is_none() && ms > 10 {
            return;
        }
        if a.error().is_some() {
            return;
        }
    }
}

/// A peer with the legacy servers' mtu (1400) sends to a receiver with mtu 1200:
/// every message arrives (its segments are under the Ethernet mss).
#[test]
fn larger_mtu_peer_within_ethernet_still_interoperates() {
    let t0 = Instant::now();
    let mut a = Kcp::new(
        CONV,
        KcpConfig {
            mtu: 1400,
            // Room for all 40 messages (21 segments each), queued at once.
            send_queue_limit: 1024,
            notsent_lowat: 2 << 20,
            ..KcpConfig::default()
        },
        t0,
    )
    .unwrap();
    let mut b = Kcp::new(CONV, KcpConfig::default(), t0).unwrap();
    let messages: Vec<Vec<u8>> = (0..40u8).map(|i| vec![i; 1376 * 20 + 5]).collect();
    for m in &messages {
        a.send(m).unwrap();
    }
    let mut received = Vec::new();
    run(&mut a, &mut b, t0, 20_000, &mut received);
    assert!(received == messages, "{:?}", b.stats());
    assert_eq!(b.stats().segments_dropped_oversize, 0);
}

/// A peer whose segments exceed the bound (mtu 9000 against our 1200) ends on its
/// dead-link limit instead of hanging or being buffered.
#[test]
fn jumbo_peer_fails_cleanly() {
    let t0 = Instant::now();
    let mut a = Kcp::new(
        CONV,
        KcpConfig {
            mtu: 9000,
            ..KcpConfig::default()
        },
        t0,
    )
    .unwrap();
    let mut b = Kcp::new(CONV, KcpConfig::default(), t0).unwrap();
    a.send(&[3u8; 8000]).unwrap();
    let mut received = Vec::new();
    run(&mut a, &mut b, t0, 600_000, &mut received);
    assert!(a.error().is_some(), "{:?}", a.stats());
    assert!(received.is_empty());
    assert!(b.stats().segments_dropped_oversize > 0);
}

fn arbitrary_segment() -> impl Strategy<Value = Vec<u8>> {
    (
        prop_oneof![Just(81u8), Just(82u8), Just(83u8), Just(84u8), any::<u8>()],
        any::<u8>(),
        any::<u16>(),
        any::<u32>(),
        prop_oneof![0u32..64, any::<u32>()],
        prop_oneof![0u32..64, any::<u32>()],
        prop::collection::vec(any::<u8>(), 0..3000),
        any::<bool>(),
    )
        .prop_map(|(cmd, frg, wnd, ts, sn, una, payload, lie)| {
            let mut out = Vec::new();
            out.extend_from_slice(&CONV.to_le_bytes());
            out.push(cmd);
            out.push(frg);
            out.extend_from_slice(&wnd.to_le_bytes());
            out.extend_from_slice(&ts.to_le_bytes());
            out.extend_from_slice(&sn.to_le_bytes());
            out.extend_from_slice(&una.to_le_bytes());
            let len = if lie {
                payload.len() as u32 * 3 + 1
            } else {
                payload.len() as u32
            };
            out.extend_from_slice(&len.to_le_bytes());
            out.extend_from_slice(&payload);
            out
        })
}

proptest! {
    /// Arbitrary headers from a peer (lying lengths, any sn/una/frg/wnd, unknown
    /// commands) never panic, and what the connection holds stays within its bounds.
    #[test]
    fn arbitrary_segments_keep_bounds(dgs in prop::collection::vec(arbitrary_segment(), 1..200)) {
        let t0 = Instant::now();
        let config = KcpConfig::default();
        let mut kcp = Kcp::new(CONV, config, t0).unwrap();
        kcp.send(&[9u8; 5000]).unwrap();
        let mut out = Vec::new();
        for (i, dg) in dgs.iter().enumerate() {
            let now = t0 + Duration::from_millis(i as u64);
            let _ = kcp.input(now, dg);
            kcp.handle_timeout(now);
            while kcp.poll_transmit(now, &mut out) {
                prop_assert!(out.len() <= config.mtu);
            }
            while kcp.recv().is_some() {}
        }
        let s = kcp.stats();
        prop_assert!(s.send_queue + s.in_flight <= 5);
        prop_assert!(s.rcv_wnd <= config.rcv_wnd);
    }
}
