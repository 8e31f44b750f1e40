//! An idle sender's open group (`FecEncoder::flush_idle`): an adaptive encoder
//! closes it at once when the parity credit pays the parity its size needs,
//! and otherwise lets it wait for `group_wait`, as a fixed one and kcp-go
//! framing always do; at zero loss there is no group to close.
#![allow(clippy::unwrap_used)]

use std::time::{Duration, Instant};

use petrel_proto::fec::{FecConfig, FecEncoder, FecScheme, Framing, LossReport};

const FIXED: FecScheme = FecScheme::Fixed {
    data_shards: 8,
    parity_shards: 2,
};

fn encoder(scheme: FecScheme, framing: Framing, now: Instant) -> FecEncoder {
    let cfg = FecConfig {
        scheme,
        ..FecConfig::default()
    };
    let mut enc = FecEncoder::new(&cfg, framing).unwrap();
    // 5 % loss reported: adaptive parity rises to its maximum for 8-shard groups.
    enc.handle_loss_report(
        now,
        &LossReport {
            expected: 1000,
            received: 950,
        },
    );
    enc
}

/// Pushes a burst of `n` datagrams of 1000 bytes at `now` (the dense part of
/// an echo: a gap far below `group_wait`) and drains them; returns how many
/// parity shards `flush_idle` made available at `now`.
fn burst_then_idle(enc: &mut FecEncoder, now: Instant, n: usize) -> (bool, u64) {
    let mut out = Vec::new();
    let before = enc.stats().parity_shards_sent;
    for i in 0..n {
        enc.push(now, &[i as u8; 1000]).unwrap();
    }
    while enc.poll_transmit(now, &mut out) {}
    let closed = enc.flush_idle(now);
    while enc.poll_transmit(now, &mut out) {}
    (closed, enc.stats().parity_shards_sent - before)
}

#[test]
fn adaptive_closes_the_group_of_an_idle_burst_at_once() {
    let t0 = Instant::now();
    let mut enc = encoder(FecScheme::ADAPTIVE_DEFAULT, Framing::Native, t0);
    assert_eq!(enc.current_parity(), 4);
    let mut now = t0;
    for _ in 0..4 {
        let (closed, parity) = burst_then_idle(&mut enc, now, 3);
        assert!(closed && parity > 0, "{:?}", enc.stats());
        assert_eq!(enc.poll_timeout(), None, "no group left waiting");
        now += Duration::from_micros(200);
    }
    // Three shards of 1002 bytes each get parity for their size (the binomial
    // rule at 5 % loss: 3 + 3), within the credit their own bytes bring.
    let s = enc.stats();
    assert_eq!(s.groups_closed_sparse, 0, "{s:?}");
    assert_eq!(s.groups_encoded, 4, "{s:?}");
    assert!(s.parity_shards_sent <= s.data_shards_sent, "{s:?}");
    assert_eq!(s.parity_shards_sent, 12, "{s:?}");
}

#[test]
fn a_group_the_credit_cannot_protect_in_full_keeps_waiting() {
    let t0 = Instant::now();
    let mut enc = encoder(FecScheme::ADAPTIVE_DEFAULT, Framing::Native, t0);
    // One shard needs two copies at 5 % loss; its own bytes pay for one.
    let (closed, parity) = burst_then_idle(&mut enc, t0, 1);
    assert!(!closed && parity == 0, "{:?}", enc.stats());
    assert_eq!(
        enc.poll_timeout(),
        Some(t0 + FecConfig::default().group_wait)
    );
    // A full group (8 + 4) leaves credit for four more parity shards...
    let t1 = t0 + Duration::from_millis(10);
    enc.handle_timeout(t1);
    let (_, parity) = burst_then_idle(&mut enc, t1, 8);
    assert_eq!(parity, 4);
    // ...so the next lone datagram's group closes at once with its two copies.
    let (closed, parity) = burst_then_idle(&mut enc, t1, 1);
    assert!(closed, "{:?}", enc.stats());
    assert_eq!(parity, 2);
    let s = enc.stats();
    assert!(s.parity_shards_sent <= s.data_shards_sent, "{s:?}");
}

#[test]
fn fixed_schemes_and_kcp_go_framing_keep_waiting() {
    let t0 = Instant::now();
    for (scheme, framing) in [
        (FIXED, Framing::Native),
        (FIXED, Framing::KcpGo { crypt_header: true }),
    ] {
        let mut enc = encoder(scheme, framing, t0);
        let (closed, parity) = burst_then_idle(&mut enc, t0, 3);
        assert!(!closed && parity == 0, "{scheme:?} {framing:?}");
    }
    // Native fixed: the parity still follows `group_wait` later.
    let mut enc = encoder(FIXED, Framing::Native, t0);
    burst_then_idle(&mut enc, t0, 3);
    let due = enc.poll_timeout().unwrap();
    assert_eq!(due, t0 + FecConfig::default().group_wait);
    enc.handle_timeout(due);
    let mut out = Vec::new();
    let mut n = 0;
    while enc.poll_transmit(due, &mut out) {
        n += 1;
    }
    assert_eq!(n, 2);
}

#[test]
fn zero_loss_has_no_group_to_close() {
    let t0 = Instant::now();
    let cfg = FecConfig {
        scheme: FecScheme::ADAPTIVE_DEFAULT,
        ..FecConfig::default()
    };
    let mut enc = FecEncoder::new(&cfg, Framing::Native).unwrap();
    let (closed, parity) = burst_then_idle(&mut enc, t0, 3);
    assert!(!closed);
    assert_eq!((parity, enc.stats().data_shards_sent), (0, 3));
}
