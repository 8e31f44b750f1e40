//! Deterministic simulations of two KCP endpoints over an impaired in-memory link.
#![allow(clippy::unwrap_used)]

mod support;

use std::collections::VecDeque;
use std::time::{Duration, Instant};

use petrel_proto::cc::CongestionKind;
use petrel_proto::kcp::{Kcp, KcpConfig, SendError};
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;
use support::{Link, LinkConfig, Sim};

/// What one direction of the application does: messages still to send, messages
/// sent and not yet received (in order), and a check of what arrives.
struct Stream {
    to_send: VecDeque<Vec<u8>>,
    expected: VecDeque<Vec<u8>>,
    received: usize,
}

impl Stream {
    fn random(rng: &mut ChaCha8Rng, count: usize, max: usize) -> Self {
        let to_send = (0..count)
            .map(|i| {
                // Mostly small messages, some up to the maximum, some empty.
                let len = match rng.gen_range(0..20) {
                    0 => 0,
                    1 => rng.gen_range(0..=max),
                    _ => rng.gen_range(1..=3000),
                };
                let mut m = vec![0u8; len];
                rng.fill(&mut m[..]);
                if let Some(first) = m.first_mut() {
                    *first = i as u8;
                }
                m
            })
            .collect();
        Self {
            to_send,
            expected: VecDeque::new(),
            received: 0,
        }
    }

    fn pump(&mut self, sender: &mut Kcp) {
        while let Some(m) = self.to_send.front() {
            match sender.send(m) {
                Ok(()) => {
                    let m = self.to_send.pop_front().unwrap();
                    self.expected.push_back(m);
                }
                Err(SendError::QueueFull) => break,
                Err(e) => panic!("send failed: {e}"),
            }
        }
    }

    fn drain(&mut self, receiver: &mut Kcp) {
        while let Some(m) = receiver.recv() {
            let want = self
                .expected
                .pop_front()
                .expect("received a message that was never sent (duplicate?)");
            assert_eq!(
                &m[..],
                &want[..],
                "message {} corrupted or out of order",
                self.received
            );
            self.received += 1;
        }
    }

    fn done(&self) -> bool {
        self.to_send.is_empty() && self.expected.is_empty()
    }
}

fn run(seed: u64, loss: f64, congestion: CongestionKind) {
    let mut rng = ChaCha8Rng::seed_from_u64(seed);
    let start = Instant::now();
    let config = KcpConfig {
        congestion,
        send_queue_limit: 512,
        ..KcpConfig::default()
    };
    let a = Kcp::new(0xC0FFEE, config, start).unwrap();
    let b = Kcp::new(0xC0FFEE, config, start).unwrap();
    let max = a.max_message_size();
    let link = LinkConfig {
        loss,
        duplicate: 0.05,
        delay: Duration::from_millis(20),
        jitter: Duration::from_millis(15),
    };
    let mut sim = Sim::new(
        start,
        a,
        b,
        Link::new(link, seed ^ 1),
        Link::new(link, seed ^ 2),
    );
    let mut ab = Stream::random(&mut rng, 150, max);
    let mut ba = Stream::random(&mut rng, 150, max);
    let limit = start + Duration::from_secs(600);
    loop {
        ab.pump(&mut sim.a);
        ba.pump(&mut sim.b);
        let progressed = sim.step(limit);
        ab.drain(&mut sim.b);
        ba.drain(&mut sim.a);
        assert!(
            sim.a.error().is_none() && sim.b.error().is_none(),
            "seed {seed}: link died"
        );
        if ab.done() && ba.done() && sim.a.pending_segments() == 0 && sim.b.pending_segments() == 0
        {
            break;
        }
        assert!(
            progressed,
            "seed {seed} loss {loss}: stalled at {:?}",
            sim.elapsed()
        );
    }
    // Let the last acks land, then both ends must be idle: no timer at all.
    while sim.step(limit) {}
    assert_eq!(sim.a.poll_timeout(), None);
    assert_eq!(sim.b.poll_timeout(), None);
    let s = sim.a.stats();
    assert_eq!(s.messages_sent, 150);
    assert_eq!(sim.b.stats().messages_received, 150);
    if loss > 0.0 {
        assert!(s.retransmissions_timeout + s.retransmissions_fast > 0);
    }
    assert!(
        sim.b.stats().duplicate_segments > 0,
        "duplication was exercised"
    );
}

#[test]
fn delivers_exactly_once_in_order_without_loss() {
    for seed in 0..3 {
        run(seed, 0.0, CongestionKind::None);
    }
}

#[test]
fn delivers_exactly_once_in_order_with_10_percent_loss() {
    for seed in 10..14 {
        run(seed, 0.10, CongestionKind::None);
    }
}

#[test]
fn delivers_exactly_once_in_order_with_30_percent_loss() {
    for seed in 30..33 {
        run(seed, 0.30, CongestionKind::None);
    }
}

#[test]
fn delivers_with_newreno_under_loss() {
    for seed in 50..53 {
        run(seed, 0.15, CongestionKind::NewReno);
    }
}
