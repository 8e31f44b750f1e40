//! A delay spike without loss: a bulk `Kcp` sender over the seeded simulated link
//! (`support`, 10 ms each way) whose path holds every datagram sent during 300 ms
//! and then delivers them. The retransmission timer fires during the spike and
//! the controller collapses its window; when the ACK of the timed-out segment's
//! original transmission arrives (its `ts` echo predates the retransmission:
//! Eifel detection, RFC 3522 §2) the timeout is undone and the window is back
//! where it was before the spike.
#![allow(clippy::unwrap_used)]

mod support;

use std::time::{Duration, Instant};

use petrel_proto::cc::CongestionKind;
use petrel_proto::kcp::{Kcp, KcpConfig};
use support::{Link, LinkConfig, Sim};

const BASE: Duration = Duration::from_millis(10);
const SPIKE: Duration = Duration::from_millis(300);
const STEP: Duration = Duration::from_millis(1);

struct Outcome {
    before: u64,
    lowest: u64,
    after: u64,
    timeouts: u64,
    undone: u64,
}

fn spike(congestion: CongestionKind) -> Outcome {
    let start = Instant::now();
    let config = KcpConfig {
        congestion,
        snd_wnd: 256,
        rcv_wnd: 256,
        ..KcpConfig::default()
    };
    let link = LinkConfig::clean(BASE);
    let mut sim = Sim::new(
        start,
        Kcp::new(7, config, start).unwrap(),
        Kcp::new(7, config, start).unwrap(),
        Link::new(link, 1),
        Link::new(link, 2),
    );
    let message = vec![0x42; 1000];
    let spike_at = start + Duration::from_secs(2);
    let spike_end = spike_at + SPIKE;
    let end = spike_end + Duration::from_secs(1);
    // During the spike both directions hold what is sent until it ends.
    sim.ab.hold = Some(spike_at..spike_end);
    sim.ba.hold = Some(spike_at..spike_end);
    let mut before = 0;
    let mut lowest = u64::MAX;
    while sim.now < end {
        while sim.a.can_send(message.len()) {
            sim.a.send(&message).unwrap();
        }
        let limit = sim.now + STEP;
        while sim.step(limit) {}
        while sim.b.recv().is_some() {}
        let cwnd = sim.a.stats().cwnd;
        if sim.now < spike_at {
            before = cwnd;
        } else {
            lowest = lowest.min(cwnd);
        }
    }
    let s = sim.a.stats();
    Outcome {
        before,
        lowest,
        after: s.cwnd,
        timeouts: s.retransmissions_timeout,
        undone: s.spurious_rto_undone,
    }
}

fn check(congestion: CongestionKind) {
    let o = spike(congestion);
    let name = congestion.as_str();
    assert!(o.timeouts > 0, "{name}: the spike must cause a timeout");
    assert!(
        o.lowest < o.before,
        "{name}: the timeout reduced the window ({} → {})",
        o.before,
        o.lowest
    );
    assert!(o.undone >= 1, "{name}: the timeout was not found spurious");
    assert!(
        o.after >= o.before,
        "{name}: window {} after the spike, {} before",
        o.after,
        o.before
    );
}

#[test]
fn reno_undoes_a_spurious_timeout() {
    check(CongestionKind::NewReno);
}

#[test]
fn cubic_undoes_a_spurious_timeout() {
    check(CongestionKind::Cubic);
}

/// A real loss of everything in flight (the path drops it instead of delaying
/// it) is not undone: the retransmissions' echoes are not older than them.
#[test]
fn a_real_timeout_is_not_undone() {
    let start = Instant::now();
    let config = KcpConfig {
        congestion: CongestionKind::NewReno,
        ..KcpConfig::default()
    };
    let mut sim = Sim::new(
        start,
        Kcp::new(9, config, start).unwrap(),
        Kcp::new(9, config, start).unwrap(),
        Link::new(LinkConfig::clean(BASE), 3),
        Link::new(LinkConfig::clean(BASE), 4),
    );
    let blackout = start + Duration::from_secs(1)..start + Duration::from_millis(1300);
    let end = start + Duration::from_secs(3);
    while sim.now < end {
        sim.ab.config.loss = if blackout.contains(&sim.now) {
            1.0
        } else {
            0.0
        };
        while sim.a.can_send(1000) {
            sim.a.send(&[1; 1000]).unwrap();
        }
        let limit = sim.now + STEP;
        while sim.step(limit) {}
        while sim.b.recv().is_some() {}
    }
    let s = sim.a.stats();
    assert!(s.retransmissions_timeout > 0);
    assert_eq!(s.spurious_rto_undone, 0, "{s:?}");
}
