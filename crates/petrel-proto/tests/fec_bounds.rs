//! Every FEC queue and table is driven past its bound: the oldest entry goes and
//! the drop is counted.
#![allow(clippy::unwrap_used)]

use petrel_proto::fec::{
    EncodeError, FecConfig, FecDecoder, FecEncoder, FecScheme, Framing, MAX_GROUPS, RX_QUEUE_LIMIT,
    TX_QUEUE_LIMIT,
};
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

#[test]
fn transmit_queue_is_bounded() {
    let mut enc = FecEncoder::new(&fixed(8, 2), Framing::Native).unwrap();
    let t0 = Instant::now();
    for i in 0..300u32 {
        enc.push(t0, &i.to_le_bytes()).unwrap();
    }
    // 300 data shards and the parity of the first 25 full groups (250
    // entries) queued, 256 kept; the 12 groups that close on a full queue
    // get no parity rather than push data out.
    let s = enc.stats();
    assert_eq!(s.tx_queue_dropped, 300 + 50 - TX_QUEUE_LIMIT as u64);
    assert_eq!(s.parity_capped, 12);
    let mut out = Vec::new();
    let mut n = 0;
    while enc.poll_transmit(t0, &mut out) {
        n += 1;
    }
    assert_eq!(n, TX_QUEUE_LIMIT);
    assert_eq!(enc.stats().retained_bytes, 4 * 6);
    assert_eq!(
        enc.push(t0, &vec![0; 70_000]),
        Err(EncodeError::TooLarge(70_000))
    );
}

#[test]
fn delivery_queue_is_bounded() {
    let cfg = FecConfig {
        scheme: FecScheme::None,
        ..FecConfig::default()
    };
    let mut enc = FecEncoder::new(&cfg, Framing::Native).unwrap();
    let mut dec = FecDecoder::new(&cfg, Framing::Native).unwrap();
    let t0 = Instant::now();
    let mut out = Vec::new();
    for i in 0..5000u32 {
        enc.push(t0, &i.to_le_bytes()).unwrap();
        assert!(enc.poll_transmit(t0, &mut out));
        dec.input(t0, &out).unwrap();
    }
    assert_eq!(dec.stats().rx_queue_dropped, 5000 - RX_QUEUE_LIMIT as u64);
    assert!(dec.poll_datagram(&mut out));
    // The oldest were dropped: the first delivered is datagram 904.
    assert_eq!(out, (5000 - RX_QUEUE_LIMIT as u32).to_le_bytes());
}

#[test]
fn group_table_is_bounded() {
    let cfg = FecConfig {
        group_expiry: Duration::from_secs(60),
        ..fixed(2, 1)
    };
    let mut enc = FecEncoder::new(&cfg, Framing::Native).unwrap();
    let mut dec = FecDecoder::new(&cfg, Framing::Native).unwrap();
    let t0 = Instant::now();
    let mut out = Vec::new();
    let groups = MAX_GROUPS + 76;
    for g in 0..groups {
        let now = t0 + Duration::from_millis(3 * g as u64);
        enc.push(now, b"x").unwrap();
        enc.handle_timeout(now + cfg.group_wait);
        // Only the data shard arrives: every group stays incomplete.
        assert!(enc.poll_transmit(now, &mut out));
        dec.input(now, &out).unwrap();
        while enc.poll_transmit(now, &mut out) {}
        while dec.poll_datagram(&mut out) {}
    }
    let s = dec.stats();
    assert_eq!((s.groups_evicted, s.groups_expired), (76, 0));
    assert_eq!(s.data_shards_received, groups as u64);
}

/// A native shard header: data `kind | index | seq u32 LE`, parity adds
/// `data_count | parity_count`; then a 2-byte size prefix and the payload.
fn native_shard(parity: Option<(u8, u8)>, index: u8, seq: u32, payload: &[u8]) -> Vec<u8> {
    let mut d = vec![if parity.is_some() { 0x11 } else { 0x10 }, index];
    d.extend_from_slice(&seq.to_le_bytes());
    if let Some((data, parity)) = parity {
        d.extend_from_slice(&[data, parity]);
    }
    d.extend_from_slice(&(payload.len() as u16 + 2).to_le_bytes());
    d.extend_from_slice(payload);
    d
}

/// Native mode announces the FEC shape in its handshake (spec `kcp.md` §4):
/// shards of a larger shape than the negotiated 4+2 are refused and counted
/// before they reach a group; shards of the negotiated shape are accepted.
#[test]
fn shapes_beyond_the_negotiated_scheme_are_refused() {
    let mut dec = FecDecoder::new(&fixed(4, 2), Framing::Native).unwrap();
    let t0 = Instant::now();
    let refused = [
        native_shard(Some((8, 4)), 9, 9, b"parity"), // more data shards
        native_shard(Some((4, 3)), 6, 6, b"parity"), // more parity shards
        native_shard(None, 5, 5, b"data"),           // a data index beyond 4
    ];
    for d in &refused {
        let e = dec.input(t0, d).unwrap_err();
        assert!(e.to_string().contains("was not negotiated"), "{e}");
    }
    assert_eq!(dec.stats().shapes_refused, 3);
    // The negotiated shape still goes through: a 4+2 group's data shard and
    // its parity are accepted, nothing more is refused.
    dec.input(t0, &native_shard(None, 0, 100, b"data")).unwrap();
    dec.input(t0, &native_shard(Some((4, 2)), 4, 104, b"parity"))
        .unwrap();
    let s = dec.stats();
    assert_eq!((s.shapes_refused, s.malformed), (3, 3));
}
