//! Reno and CUBIC with 1024-segment windows through the `p2p` link of
//! `petrel bench goodput` (200 Mbit/s, 8 ms RTT, 1000-packet drop-tail queue,
//! 1400-byte datagrams): the windows let slow start fill most of the queue, the
//! RTT grows from 8 ms to over 60 ms faster than the RTO follows, and the
//! resulting timeouts are spurious. Undoing them (Eifel detection, RFC 3522) keeps
//! goodput ≥ 95 % of what the link carries in payload, measured over 3 s after a
//! 0.5 s warm-up. Sans-IO: real `Kcp` pairs over `cc_support::Dumbbell`.
#![allow(clippy::unwrap_used)]

mod cc_support;

use std::time::{Duration, Instant};

use cc_support::{measure, Dumbbell, Path};
use petrel_proto::cc::CongestionKind;
use petrel_proto::kcp::KcpConfig;

const MTU: usize = 1400;
const WINDOW: u16 = 1024;

fn efficiency(kind: CongestionKind) -> f64 {
    let t0 = Instant::now();
    let path = Path {
        rate_bps: 200_000_000,
        one_way: Duration::from_millis(4),
        queue: 1000,
    };
    let mut sim = Dumbbell::new(path, t0);
    let config = KcpConfig {
        congestion: kind,
        mtu: MTU,
        snd_wnd: WINDOW,
        rcv_wnd: WINDOW,
        send_queue_limit: 256,
        ..KcpConfig::default()
    };
    sim.add_flow(config, t0);
    let from = t0 + Duration::from_millis(500);
    let goodput = measure(&mut sim, from, from + Duration::from_secs(3))[0];
    let u = goodput / path.payload_capacity(MTU);
    let s = sim.sender_stats(0);
    println!(
        "{kind}: {:.1} % drops {} max queue {} rto {} undone {} fast {} srtt {} us",
        u * 100.0,
        sim.drops,
        sim.max_queue,
        s.retransmissions_timeout,
        s.spurious_rto_undone,
        s.retransmissions_fast,
        s.srtt_us
    );
    u
}

#[test]
fn reno_fills_a_deep_queue_link_with_a_1024_segment_window() {
    let u = efficiency(CongestionKind::NewReno);
    assert!(u >= 0.95, "reno: {:.1} %", u * 100.0);
}

#[test]
fn cubic_fills_a_deep_queue_link_with_a_1024_segment_window() {
    let u = efficiency(CongestionKind::Cubic);
    assert!(u >= 0.95, "cubic: {:.1} %", u * 100.0);
}
