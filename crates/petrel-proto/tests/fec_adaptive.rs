//! The adaptive parity policy over a simulated lossy link (seeded Bernoulli loss,
//! simulated clock): it settles near the parity the binomial rule predicts.
#![allow(clippy::unwrap_used)]

use petrel_proto::fec::{EncoderStats, FecConfig, FecDecoder, FecEncoder, FecScheme, Framing};
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;
use std::time::{Duration, Instant};

/// Runs 4 s of traffic (8 datagrams of 500 bytes per ms, a loss report every
/// 20 ms); returns the parity chosen at each report of the last 2 s and the
/// encoder's counters.
fn simulate(loss: f64, seed: u64) -> (Vec<u8>, EncoderStats, u64) {
    let cfg = FecConfig {
        scheme: FecScheme::ADAPTIVE_DEFAULT,
        ..FecConfig::default()
    };
    let mut enc = FecEncoder::new(&cfg, Framing::Native).unwrap();
    let mut dec = FecDecoder::new(&cfg, Framing::Native).unwrap();
    let mut rng = ChaCha8Rng::seed_from_u64(seed);
    let t0 = Instant::now();
    let mut out = Vec::new();
    let mut settled = Vec::new();
    let mut delivered = 0u64;
    for ms in 0..4000u64 {
        let now = t0 + Duration::from_millis(ms);
        for i in 0..8u8 {
            enc.push(now, &[i; 500]).unwrap();
        }
        enc.handle_timeout(now + cfg.group_wait);
        while enc.poll_transmit(now + cfg.group_wait, &mut out) {
            if rng.gen::<f64>() >= loss {
                dec.input(now, &out).unwrap();
            }
        }
        while dec.poll_datagram(&mut out) {
            delivered += 1;
        }
        if ms % 20 == 19 {
            if let Some(r) = dec.take_loss_report() {
                enc.handle_loss_report(now, &r);
            }
            if ms >= 2000 {
                settled.push(enc.current_parity());
            }
        }
    }
    (settled, enc.stats(), delivered)
}

fn most_common(v: &[u8]) -> u8 {
    (0..=16u8)
        .max_by_key(|p| v.iter().filter(|&&x| x == *p).count())
        .unwrap()
}

#[test]
fn no_loss_sends_no_parity() {
    let (settled, s, delivered) = simulate(0.0, 1);
    assert!(settled.iter().all(|&p| p == 0));
    assert_eq!(
        (
            s.parity_shards_sent,
            s.policy_changes,
            s.max_parity_observed
        ),
        (0, 0, 0)
    );
    assert_eq!(delivered, 32_000);
}

#[test]
fn two_percent_loss_settles_at_two_or_three() {
    let (settled, s, _) = simulate(0.02, 2);
    assert!(settled.iter().all(|p| (2..=3).contains(p)), "{settled:?}");
    assert!(s.policy_changes < 12, "{s:?}");
}

#[test]
fn five_percent_loss_settles_at_four() {
    let (settled, s, _) = simulate(0.05, 5);
    assert_eq!(most_common(&settled), 4, "{settled:?}");
    assert!(settled.iter().all(|p| (3..=4).contains(p)), "{settled:?}");
    assert_eq!(s.max_parity_observed, 4);
    assert!(s.policy_changes <= 5, "{s:?}");
}

#[test]
fn ten_percent_loss_uses_max_parity_and_recovers_most_groups() {
    let (settled, s, delivered) = simulate(0.10, 10);
    assert!(settled.iter().all(|&p| p == 4), "{settled:?}");
    assert_eq!((s.max_parity_observed, s.policy_changes), (4, 1));
    // Without FEC 10 % of 32 000 datagrams would be missing; with 8+4 nearly
    // every group is repaired (P(>4 of 12 lost) ≈ 0.4 %).
    assert!(delivered > 31_500, "{delivered}");
}

/// Parity shards the adaptive encoder adds to each of `groups` (full groups,
/// one after another) once a 10 % loss report has raised its parity to the
/// maximum.
fn parities(groups: &[[usize; 8]]) -> Vec<u64> {
    use petrel_proto::fec::LossReport;
    let cfg = FecConfig {
        scheme: FecScheme::ADAPTIVE_DEFAULT,
        ..FecConfig::default()
    };
    let mut enc = FecEncoder::new(&cfg, Framing::Native).unwrap();
    let now = Instant::now();
    enc.handle_loss_report(
        now,
        &LossReport {
            expected: 1000,
            received: 900,
        },
    );
    assert_eq!(enc.current_parity(), 4);
    let mut out = Vec::new();
    let mut sent = 0;
    groups
        .iter()
        .map(|sizes| {
            for (i, len) in sizes.iter().enumerate() {
                enc.push(now, &vec![i as u8; *len]).unwrap();
            }
            while enc.poll_transmit(now, &mut out) {}
            let total = enc.stats().parity_shards_sent;
            let this = total - sent;
            sent = total;
            this
        })
        .collect()
}

const FULL: [usize; 8] = [1000; 8];
const MIXED: [usize; 8] = [1000, 20, 1000, 20, 1000, 20, 1000, 20];
const ACKS: [usize; 8] = [1000, 20, 20, 20, 20, 20, 20, 20];

/// Parity bytes stay within the data bytes over the stream: a full group of
/// requests and acks (half the shards tiny) keeps its 4 parity shards — a
/// cap at half of each group's data bytes cut it to 2, which at 5 % loss
/// left groups unrepaired — and a group of one request among seven acks
/// borrows what the groups before it left, while a stream of such groups
/// alone gets one parity shard each.
#[test]
fn parity_bytes_stay_within_the_data_bytes_of_the_stream() {
    assert_eq!(parities(&[FULL]), [4]);
    assert_eq!(parities(&[MIXED]), [4]);
    assert_eq!(parities(&[ACKS]), [1]);
    assert_eq!(parities(&[FULL, ACKS, ACKS]), [4, 4, 2]);
    let long = parities(&[ACKS; 40]);
    assert!(long.iter().all(|&p| (1..=2).contains(&p)), "{long:?}");
    // 40 groups of 1156 data bytes (2-byte length prefixes included) buy
    // 46 parity shards of 1002 bytes at most.
    assert!(long.iter().sum::<u64>() <= 46, "{long:?}");
}
