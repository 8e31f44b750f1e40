//! kcp-go framing with different FEC shapes on the two ends (kcptun report
//! #809): no corrupted message ever reaches the application, and each end's
//! decoder names both shapes within a bounded simulated time.
//!
//! Each end is KCP over Petrel's FEC encoder and decoder in kcp-go framing
//! behind kcptun's crypt-none header, with its own `data+parity` shape; both
//! send full-size messages (one KCP segment each) whose bytes are a function of
//! their index, and the receiver checks every message it gets. The simulated
//! network is `tests/support` (deterministic, seeded loss).
#![allow(clippy::unwrap_used)]

mod support;

use petrel_proto::fec::{
    FecConfig, FecDecoder, FecEncoder, FecScheme, Framing, ShapeCheck, ShapeMismatch,
    SHAPE_REPORT_DELAY,
};
use petrel_proto::kcp::{Kcp, KcpConfig};
use std::time::{Duration, Instant};
use support::{Link, LinkConfig, Machine, Sim};

/// kcptun's UDP mtu minus its crypt (20) and FEC (8) headers, bytes.
const KCP_MTU: usize = 1350 - 28;
/// Messages each end sends.
const MESSAGES: u32 = 3_000;
/// Simulated time a transfer may take.
const TRANSFER_LIMIT: Duration = Duration::from_secs(300);

/// The bytes of message `index` from end `from`: the index, then a
/// splitmix64 stream seeded by both.
fn message(from: u8, index: u32, len: usize) -> Vec<u8> {
    let mut m = index.to_le_bytes().to_vec();
    let mut x = (u64::from(from) << 32) | u64::from(index);
    while m.len() < len {
        x = x.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = x;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        m.extend_from_slice(&(z ^ (z >> 31)).to_le_bytes());
    }
    m.truncate(len);
    m
}

/// One end: KCP → kcp-go FEC encoder → wire → kcp-go FEC decoder → KCP.
struct Peer {
    id: u8,
    kcp: Kcp,
    enc: FecEncoder,
    dec: FecDecoder,
    datagram: Vec<u8>,
    sent: u32,
    /// Messages received intact, in order.
    received: u32,
    /// Messages received whose bytes or order were wrong.
    corrupted: u32,
    /// When the decoder's shape mismatch became final.
    mismatch_at: Option<Instant>,
}

impl Peer {
    fn new(id: u8, (data_shards, parity_shards): (u8, u8), now: Instant) -> Peer {
        let config = KcpConfig {
            mtu: KCP_MTU,
            ..KcpConfig::default()
        };
        let fec = FecConfig {
            scheme: FecScheme::Fixed {
                data_shards,
                parity_shards,
            },
            ..FecConfig::default()
        };
        let framing = Framing::KcpGo { crypt_header: true };
        let mut enc = FecEncoder::new(&fec, framing).unwrap();
        enc.set_nonce_seed(u64::from(id));
        Peer {
            id,
            kcp: Kcp::new(7, config, now).unwrap(),
            enc,
            dec: FecDecoder::new(&fec, framing).unwrap(),
            datagram: Vec::new(),
            sent: 0,
            received: 0,
            corrupted: 0,
            mismatch_at: None,
        }
    }

    fn note_mismatch(&mut self, now: Instant) {
        if self.mismatch_at.is_none() && self.dec.shape_mismatch().is_some() {
            self.mismatch_at = Some(now);
        }
    }

    fn done(&self) -> bool {
        self.received == MESSAGES && self.kcp.pending_segments() == 0
    }
}

impl Machine for Peer {
    fn poll_transmit(&mut self, now: Instant, out: &mut Vec<u8>) -> bool {
        let mss = self.kcp.mss();
        while self.sent < MESSAGES && self.kcp.can_send(mss) {
            self.kcp.send(&message(self.id, self.sent, mss)).unwrap();
            self.sent += 1;
        }
        loop {
            if self.enc.poll_transmit(now, out) {
                return true;
            }
            if !self.kcp.poll_transmit(now, &mut self.datagram) {
                return false;
            }
            self.enc.push(now, &self.datagram).unwrap();
        }
    }

    fn poll_timeout(&self) -> Option<Instant> {
        [
            self.kcp.poll_timeout(),
            self.enc.poll_timeout(),
            self.dec.poll_timeout(),
        ]
        .into_iter()
        .flatten()
        .min()
    }

    fn input(&mut self, now: Instant, datagram: &[u8]) {
        // Malformed datagrams are counted by the decoder; none are expected.
        let _ = self.dec.input(now, datagram);
        while self.dec.poll_datagram(&mut self.datagram) {
            // Rejections are KCP's own counters.
            let _ = self.kcp.input(now, &self.datagram);
        }
        let mss = self.kcp.mss();
        while let Some(m) = self.kcp.recv() {
            if m[..] == message(1 - self.id, self.received, mss)[..] {
                self.received += 1;
            } else {
                self.corrupted += 1;
            }
        }
        self.note_mismatch(now);
    }

    fn handle_timeout(&mut self, now: Instant) {
        self.kcp.handle_timeout(now);
        self.enc.handle_timeout(now);
        self.dec.handle_timeout(now);
        self.note_mismatch(now);
    }
}

/// Both ends send [`MESSAGES`] at `loss` each way, 20 ms one-way delay.
fn transfer(a_shape: (u8, u8), b_shape: (u8, u8), loss: f64, seed: u64) -> Sim<Peer> {
    let start = Instant::now();
    let link = LinkConfig {
        loss,
        ..LinkConfig::clean(Duration::from_millis(20))
    };
    let mut sim = Sim::new(
        start,
        Peer::new(0, a_shape, start),
        Peer::new(1, b_shape, start),
        Link::new(link, seed),
        Link::new(link, seed + 1),
    );
    let limit = start + TRANSFER_LIMIT;
    while !(sim.a.done() && sim.b.done()) && sim.step(limit) {}
    sim
}

fn check_mismatch(ours: (u8, u8), theirs: (u8, u8), loss: f64, seed: u64) {
    let sim = transfer(ours, theirs, loss, seed);
    let what = format!("{ours:?} vs {theirs:?} at {loss} loss");
    for (end, shape, peer_shape) in [(&sim.a, ours, theirs), (&sim.b, theirs, ours)] {
        let s = end.dec.stats();
        assert_eq!(end.corrupted, 0, "{what}: corrupted messages delivered");
        // Data shards still arrive: the ARQ completes the transfer without FEC.
        assert_eq!(end.received, MESSAGES, "{what}: transfer incomplete");
        assert_eq!(
            s.shards_recovered, 0,
            "{what}: rebuilt from a foreign shape"
        );
        assert_eq!(end.dec.shape_check(), ShapeCheck::Mismatch, "{what}");
        assert!(
            s.shape_mismatches > 0 && s.parity_dropped_for_shape > 0,
            "{what}"
        );
        let m = end.dec.shape_mismatch().unwrap();
        assert_eq!(
            m,
            ShapeMismatch {
                ours: shape,
                peer_data_shards: Some(u32::from(peer_shape.0)),
                peer_parity_shards: Some(u32::from(peer_shape.1)),
            },
            "{what}: {m}"
        );
        let after = end.mismatch_at.unwrap() - sim.start;
        assert!(
            after <= SHAPE_REPORT_DELAY,
            "{what}: reported after {after:?}"
        );
        eprintln!(
            "{what}: end {} reported \"{m}\" after {after:?}; {} shards contradicted, {} parity dropped",
            end.id, s.shape_mismatches, s.parity_dropped_for_shape
        );
    }
}

#[test]
fn ten_three_against_four_two() {
    check_mismatch((4, 2), (10, 3), 0.0, 1);
    check_mismatch((4, 2), (10, 3), 0.1, 2);
}

#[test]
fn twenty_five_against_four_two() {
    check_mismatch((4, 2), (20, 5), 0.0, 3);
    check_mismatch((4, 2), (20, 5), 0.1, 4);
}

#[test]
fn nine_four_against_four_two() {
    check_mismatch((4, 2), (9, 4), 0.0, 5);
    check_mismatch((4, 2), (9, 4), 0.1, 6);
}

/// The same shape on both ends: confirmed early, losses rebuilt, nothing
/// corrupted, no mismatch.
#[test]
fn matching_shapes_still_recover() {
    for (shape, seed) in [((4, 2), 7), ((10, 3), 8)] {
        let sim = transfer(shape, shape, 0.1, seed);
        for end in [&sim.a, &sim.b] {
            let s = end.dec.stats();
            assert_eq!((end.corrupted, end.received), (0, MESSAGES), "{shape:?}");
            assert_eq!(end.dec.shape_check(), ShapeCheck::Confirmed, "{shape:?}");
            assert_eq!((s.shape_mismatches, end.dec.shape_mismatch()), (0, None));
            assert!(s.shards_recovered > 100, "{shape:?}: {s:?}");
            eprintln!(
                "{shape:?} at 10 % loss: end {} rebuilt {} data shards",
                end.id, s.shards_recovered
            );
        }
    }
}
