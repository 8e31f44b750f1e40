//! Encoders and decoders sharing one retained-memory budget (one per endpoint):
//! the total never exceeds the limit, a full budget costs the filler its own
//! oldest groups or its parity (counted), and dropping returns every byte.
#![allow(clippy::unwrap_used)]

use petrel_proto::fec::{FecBudget, FecConfig, FecDecoder, FecEncoder, FecScheme, Framing};
use std::time::{Duration, Instant};

const LIMIT: usize = 16 << 10;
const PAYLOAD: usize = 1000;
/// A stored data shard is its payload plus the 2-byte size field.
const SHARD: usize = PAYLOAD + 2;

fn config() -> FecConfig {
    FecConfig {
        scheme: FecScheme::Fixed {
            data_shards: 4,
            parity_shards: 2,
        },
        group_expiry: Duration::from_secs(60),
        ..FecConfig::default()
    }
}

/// The first data shard of each of `n` groups; its parity and siblings are
/// lost, so a decoder keeps every group incomplete.
fn lone_data_shards(t0: Instant, n: usize) -> Vec<Vec<u8>> {
    let cfg = config();
    let mut enc = FecEncoder::new(&cfg, Framing::Native).unwrap();
    let mut shards = Vec::new();
    for g in 0..n {
        let now = t0 + Duration::from_millis(10 * g as u64);
        enc.push(now, &vec![g as u8; PAYLOAD]).unwrap();
        enc.handle_timeout(now + cfg.group_wait);
        let mut out = Vec::new();
        assert!(enc.poll_transmit(now, &mut out));
        shards.push(out);
        while enc.poll_transmit(now, &mut Vec::new()) {}
    }
    shards
}

fn feed(dec: &mut FecDecoder, t0: Instant, shard: &[u8]) {
    dec.input(t0, shard).unwrap();
    while dec.poll_datagram(&mut Vec::new()) {}
}

#[test]
fn decoders_sharing_a_budget_evict_their_own_oldest_groups() {
    let t0 = Instant::now();
    let budget = FecBudget::new(LIMIT);
    let mut a = FecDecoder::with_budget(&config(), Framing::Native, budget.clone()).unwrap();
    let mut b = FecDecoder::with_budget(&config(), Framing::Native, budget.clone()).unwrap();
    let shards = lone_data_shards(t0, 20);
    for s in &shards[..5] {
        feed(&mut b, t0, s);
    }
    for (g, s) in shards.iter().enumerate() {
        feed(&mut a, t0 + Duration::from_millis(g as u64), s);
        let (ra, rb) = (a.stats().retained_bytes, b.stats().retained_bytes);
        assert_eq!(budget.current(), ra + rb);
        assert!(budget.current() <= LIMIT);
    }
    // b keeps its 5 groups; a fits (16384 - 5 × 1002) / 1002 = 11 of its 20.
    let (sa, sb) = (a.stats(), b.stats());
    assert_eq!(sb.retained_bytes, 5 * SHARD);
    assert_eq!(sb.groups_released_for_budget, 0);
    assert_eq!(sa.retained_bytes, 11 * SHARD);
    assert_eq!(sa.groups_released_for_budget, 9);
    assert_eq!(sa.groups_evicted, 9);
    assert_eq!(budget.groups_released(), 9);
    assert_eq!(sa.data_shards_received, 20);
    assert_eq!(budget.peak(), 16 * SHARD);

    // The oldest went: the oldest group a still holds arrived at t0 + 9 ms.
    let expiry = config().group_expiry;
    assert_eq!(
        a.poll_timeout(),
        Some(t0 + Duration::from_millis(9) + expiry)
    );

    drop(a);
    assert_eq!(budget.current(), 5 * SHARD);
    drop(b);
    assert_eq!(budget.current(), 0);
}

#[test]
fn decoder_refuses_a_shard_when_only_others_hold_the_budget() {
    let t0 = Instant::now();
    let budget = FecBudget::new(LIMIT);
    let mut a = FecDecoder::with_budget(&config(), Framing::Native, budget.clone()).unwrap();
    let mut b = FecDecoder::with_budget(&config(), Framing::Native, budget.clone()).unwrap();
    let shards = lone_data_shards(t0, 17);
    for s in &shards[..16] {
        feed(&mut b, t0, s);
    }
    // a has no group of its own to release: the shard is handed up, not kept.
    a.input(t0, &shards[16]).unwrap();
    let mut out = Vec::new();
    assert!(a.poll_datagram(&mut out));
    assert_eq!(out, vec![16u8; PAYLOAD]);
    let s = a.stats();
    assert_eq!((s.shards_refused_for_budget, s.retained_bytes), (1, 0));
    assert_eq!(budget.current(), 16 * SHARD);
}

#[test]
fn encoder_closes_early_or_drops_parity_never_data() {
    let t0 = Instant::now();
    let budget = FecBudget::new(LIMIT);
    let mut dec = FecDecoder::with_budget(&config(), Framing::Native, budget.clone()).unwrap();
    for s in &lone_data_shards(t0, 16) {
        feed(&mut dec, t0, s);
    }
    // 16384 - 16 × 1002 = 352 bytes left: room for one 200-byte shard at a time.
    let mut enc = FecEncoder::with_budget(&config(), Framing::Native, budget.clone()).unwrap();
    let mut wire = Vec::new();
    let mut sent = Vec::new();
    for i in 0..3u8 {
        let d = vec![i; 200];
        enc.push(t0, &d).unwrap();
        sent.push(d);
        assert!(budget.current() <= LIMIT);
    }
    let big = vec![9u8; 400];
    enc.push(t0, &big).unwrap();
    sent.push(big);
    let s = enc.stats();
    // Pushes 2 and 3 closed the one-shard group before them; push 4 closed the
    // third and still did not fit.
    assert_eq!(s.groups_closed_for_budget, 3);
    assert_eq!(s.ungrouped_for_budget, 1);
    assert_eq!(s.groups_encoded, 3);
    assert_eq!(s.data_shards_sent, 4);
    assert_eq!(budget.current(), 16 * SHARD);

    let mut rx = FecDecoder::new(&config(), Framing::Native).unwrap();
    let mut got = Vec::new();
    let mut out = Vec::new();
    while enc.poll_transmit(t0, &mut out) {
        wire.push(out.clone());
    }
    for w in &wire {
        rx.input(t0, w).unwrap();
        while rx.poll_datagram(&mut out) {
            got.push(out.clone());
        }
    }
    assert_eq!(got, sent);

    // An open group's reservation is returned on drop.
    drop(dec);
    enc.push(t0, &[1; 98]).unwrap();
    assert_eq!(budget.current(), 100);
    drop(enc);
    assert_eq!(budget.current(), 0);
}
