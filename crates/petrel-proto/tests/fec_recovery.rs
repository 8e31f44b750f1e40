//! Recovery, timing and bounds of the FEC layer, driven with a simulated clock.
#![allow(clippy::unwrap_used)]

use petrel_proto::fec::{FecConfig, FecDecoder, FecEncoder, FecScheme, Framing, ShapeCheck};
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;
use std::time::{Duration, Instant};

fn fixed(data_shards: u8, parity_shards: u8) -> FecConfig {
    FecConfig {
        scheme: FecScheme::Fixed {
            data_shards,
            parity_shards,
        },
        ..FecConfig::default()
    }
}

/// Encodes one full group of random datagrams (64..=1200 bytes); returns the
/// datagrams and the wire shards in send order.
fn one_group(
    enc: &mut FecEncoder,
    rng: &mut ChaCha8Rng,
    k: u8,
    now: Instant,
) -> (Vec<Vec<u8>>, Vec<Vec<u8>>) {
    let data: Vec<Vec<u8>> = (0..k)
        .map(|_| {
            let n = rng.gen_range(64..=1200);
            (0..n).map(|_| rng.gen()).collect()
        })
        .collect();
    for d in &data {
        enc.push(now, d).unwrap();
    }
    let mut wire = Vec::new();
    let mut out = Vec::new();
    while enc.poll_transmit(now, &mut out) {
        wire.push(out.clone());
    }
    (data, wire)
}

fn drain(dec: &mut FecDecoder) -> Vec<Vec<u8>> {
    let mut got = Vec::new();
    let mut out = Vec::new();
    while dec.poll_datagram(&mut out) {
        got.push(out.clone());
    }
    got
}

fn sorted(mut v: Vec<Vec<u8>>) -> Vec<Vec<u8>> {
    v.sort();
    v
}

/// Every subset of `0..n` with at most `max` elements, as bitmasks.
fn patterns(n: u32, max: u32) -> Vec<u32> {
    (0..1u32 << n).filter(|m| m.count_ones() <= max).collect()
}

fn check_patterns(framing: Framing, k: u8, p: u8, masks: &[u32], seed: u64) {
    let cfg = fixed(k, p);
    let mut enc = FecEncoder::new(&cfg, framing).unwrap();
    let mut dec = FecDecoder::new(&cfg, framing).unwrap();
    let mut rng = ChaCha8Rng::seed_from_u64(seed);
    let now = Instant::now();
    // kcp-go framing rebuilds nothing before the peer's shape is proven ours:
    // two whole groups prove it (a complete data run and a complete parity run).
    for _ in 0..2 {
        let (data, wire) = one_group(&mut enc, &mut rng, k, now);
        for w in &wire {
            dec.input(now, w).unwrap();
        }
        assert_eq!(sorted(drain(&mut dec)), sorted(data));
    }
    assert_eq!(dec.shape_check(), ShapeCheck::Confirmed);
    for &mask in masks {
        let (data, wire) = one_group(&mut enc, &mut rng, k, now);
        assert_eq!(wire.len(), usize::from(k + p));
        let lost_data = (0..u32::from(k)).filter(|i| mask & (1 << i) != 0).count() as u64;
        let before = dec.stats();
        for (i, w) in wire.iter().enumerate() {
            if mask & (1 << i) == 0 {
                dec.input(now, w).unwrap();
            }
        }
        let got = drain(&mut dec);
        assert_eq!(sorted(got), sorted(data), "pattern {mask:#b} of {k}+{p}");
        let after = dec.stats();
        assert_eq!(after.shards_recovered - before.shards_recovered, lost_data);
    }
    let s = dec.stats();
    assert_eq!(
        (s.malformed, s.duplicates, s.groups_unrecoverable),
        (0, 0, 0)
    );
}

#[test]
fn every_loss_pattern_recovers_4_2_and_8_2() {
    check_patterns(Framing::Native, 4, 2, &patterns(6, 2), 1);
    check_patterns(Framing::Native, 8, 2, &patterns(10, 2), 2);
    let kcp = Framing::KcpGo { crypt_header: true };
    check_patterns(kcp, 4, 2, &patterns(6, 2), 3);
    check_patterns(kcp, 8, 2, &patterns(10, 2), 4);
}

#[test]
fn sampled_loss_patterns_recover_8_4() {
    let mut rng = ChaCha8Rng::seed_from_u64(84);
    let all = patterns(12, 4);
    let masks: Vec<u32> = (0..300).map(|_| all[rng.gen_range(0..all.len())]).collect();
    check_patterns(Framing::Native, 8, 4, &masks, 5);
    check_patterns(
        Framing::KcpGo {
            crypt_header: false,
        },
        8,
        4,
        &masks,
        6,
    );
}

#[test]
fn too_many_losses_are_counted_unrecoverable_at_expiry() {
    let cfg = fixed(4, 2);
    let mut enc = FecEncoder::new(&cfg, Framing::Native).unwrap();
    let mut dec = FecDecoder::new(&cfg, Framing::Native).unwrap();
    let mut rng = ChaCha8Rng::seed_from_u64(7);
    let t0 = Instant::now();
    let (data, wire) = one_group(&mut enc, &mut rng, 4, t0);
    for w in &wire[3..] {
        dec.input(t0, w).unwrap();
    }
    assert_eq!(drain(&mut dec), vec![data[3].clone()]);
    assert_eq!(dec.poll_timeout(), Some(t0 + cfg.group_expiry));
    dec.handle_timeout(t0 + cfg.group_expiry);
    let s = dec.stats();
    assert_eq!(
        (s.groups_expired, s.groups_unrecoverable, s.retained_bytes),
        (1, 1, 0)
    );
    assert_eq!(dec.poll_timeout(), None);
}

#[test]
fn partial_group_is_flushed_after_group_wait() {
    let cfg = fixed(8, 2);
    let mut enc = FecEncoder::new(&cfg, Framing::Native).unwrap();
    let mut dec = FecDecoder::new(&cfg, Framing::Native).unwrap();
    let t0 = Instant::now();
    let data: Vec<Vec<u8>> = (0..3u8).map(|i| vec![i; 100 + usize::from(i)]).collect();
    let mut wire = Vec::new();
    let mut out = Vec::new();
    for d in &data {
        enc.push(t0, d).unwrap();
        // Data is never held back by FEC.
        assert!(enc.poll_transmit(t0, &mut out));
        wire.push(out.clone());
    }
    assert_eq!(enc.poll_timeout(), Some(t0 + cfg.group_wait));
    assert!(!enc.poll_transmit(t0 + Duration::from_millis(1), &mut out));
    enc.handle_timeout(t0 + cfg.group_wait);
    assert_eq!(enc.poll_timeout(), None);
    while enc.poll_transmit(t0 + cfg.group_wait, &mut out) {
        // Parity header announces the group's real shape: 3 data + 2 parity.
        assert_eq!((out[0], out[6], out[7]), (0x11, 3, 2));
        wire.push(out.clone());
    }
    assert_eq!(wire.len(), 5);
    // Lose two of the three data shards: recovered from the two parity shards.
    for w in &wire[2..] {
        dec.input(t0, w).unwrap();
    }
    assert_eq!(sorted(drain(&mut dec)), sorted(data));
    assert_eq!(dec.stats().shards_recovered, 2);
    let s = enc.stats();
    assert_eq!(
        (s.data_shards_sent, s.parity_shards_sent, s.groups_encoded),
        (3, 2, 1)
    );
}

#[test]
fn zero_parity_is_pass_through_without_wait_or_retention() {
    let cfg = FecConfig {
        scheme: FecScheme::ADAPTIVE_DEFAULT,
        ..FecConfig::default()
    };
    let mut enc = FecEncoder::new(&cfg, Framing::Native).unwrap();
    let mut dec = FecDecoder::new(&cfg, Framing::Native).unwrap();
    let t0 = Instant::now();
    let mut out = Vec::new();
    enc.push(t0, b"ping").unwrap();
    assert_eq!(enc.poll_timeout(), None);
    assert!(enc.poll_transmit(t0, &mut out));
    assert_eq!(out.len(), 4 + 6);
    dec.input(t0, &out).unwrap();
    assert_eq!(
        dec.poll_timeout(),
        None,
        "a parity-less shard opens no group"
    );
    assert_eq!(drain(&mut dec), vec![b"ping".to_vec()]);
    assert_eq!(dec.stats().retained_bytes, 0);
    assert_eq!(enc.stats().parity_shards_sent, 0);
}

#[test]
fn duplicates_are_dropped_including_late_originals_of_recovered_shards() {
    let cfg = fixed(4, 2);
    let mut enc = FecEncoder::new(&cfg, Framing::Native).unwrap();
    let mut dec = FecDecoder::new(&cfg, Framing::Native).unwrap();
    let mut rng = ChaCha8Rng::seed_from_u64(9);
    let t0 = Instant::now();
    let (data, wire) = one_group(&mut enc, &mut rng, 4, t0);
    dec.input(t0, &wire[1]).unwrap();
    dec.input(t0, &wire[1]).unwrap();
    for w in &wire[2..] {
        dec.input(t0, w).unwrap();
    }
    // wire[0] was recovered; its late original must not be delivered twice.
    dec.input(t0, &wire[0]).unwrap();
    assert_eq!(sorted(drain(&mut dec)), sorted(data));
    assert_eq!(dec.stats().duplicates, 2);
}

/// A group whose last shards arrive after `group_expiry` is tracked afresh; the
/// data it then rebuilds was handed up before and is not handed up again (found
/// by the `fec_decoder` fuzz target). Shards older than the duplicate window are
/// dropped for the same reason.
#[test]
fn late_shards_after_group_expiry_hand_nothing_up_twice() {
    for framing in [Framing::Native, Framing::KcpGo { crypt_header: true }] {
        let cfg = fixed(4, 2);
        let mut enc = FecEncoder::new(&cfg, framing).unwrap();
        let mut dec = FecDecoder::new(&cfg, framing).unwrap();
        let mut rng = ChaCha8Rng::seed_from_u64(10);
        let t0 = Instant::now();
        for _ in 0..2 {
            let (_, wire) = one_group(&mut enc, &mut rng, 4, t0);
            for w in &wire {
                dec.input(t0, w).unwrap();
            }
        }
        drain(&mut dec);
        assert_eq!(dec.shape_check(), ShapeCheck::Confirmed);
        let (data, wire) = one_group(&mut enc, &mut rng, 4, t0);
        dec.input(t0, &wire[0]).unwrap();
        dec.input(t0, &wire[1]).unwrap();
        assert_eq!(drain(&mut dec), data[..2].to_vec());
        let late = t0 + cfg.group_expiry;
        dec.handle_timeout(late);
        assert_eq!(dec.stats().groups_expired, 1, "{framing:?}");
        // Data 2 and 3 and both parity shards: enough to rebuild 0 and 1 again.
        for w in &wire[2..] {
            dec.input(late, w).unwrap();
        }
        assert_eq!(drain(&mut dec), data[2..].to_vec(), "{framing:?}");
        let s = dec.stats();
        assert_eq!((s.shards_recovered, s.duplicates), (0, 2), "{framing:?}");
        // 1104 shards later its first data shard again: out of the window, so
        // it may have been handed up: dropped, counted stale.
        for _ in 0..184 {
            let (_, wire) = one_group(&mut enc, &mut rng, 4, t0);
            dec.input(late, &wire[0]).unwrap();
        }
        drain(&mut dec);
        let stale = dec.stats().stale;
        dec.input(late, &wire[0]).unwrap();
        assert!(drain(&mut dec).is_empty(), "{framing:?}");
        assert_eq!(dec.stats().stale, stale + 1, "{framing:?}");
    }
}

#[test]
fn budget_releases_oldest_groups_and_counts_them() {
    let cfg = FecConfig {
        budget: 16 << 10,
        ..fixed(8, 2)
    };
    let mut enc = FecEncoder::new(&cfg, Framing::Native).unwrap();
    let mut dec = FecDecoder::new(&cfg, Framing::Native).unwrap();
    let t0 = Instant::now();
    let mut out = Vec::new();
    // 200 groups whose parity never arrives: each retains 8 KiB of data shards.
    for g in 0..200u32 {
        for _ in 0..8 {
            enc.push(t0, &[g as u8; 1022]).unwrap();
        }
        while enc.poll_transmit(t0, &mut out) {
            if out[0] != 0x11 {
                dec.input(t0, &out).unwrap();
            }
        }
        assert!(dec.stats().retained_bytes <= (16 << 10) + 4096 * 1030);
        drain(&mut dec);
        assert!(dec.stats().retained_bytes <= 16 << 10);
    }
    let s = dec.stats();
    assert!(s.groups_evicted >= 190, "{s:?}");
    assert!(s.peak_retained_bytes <= (16 << 10) + 2 * 1024 * 10);
    assert_eq!(s.data_shards_received, 1600);
}
