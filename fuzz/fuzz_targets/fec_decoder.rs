//! petrel-proto's FEC layer (spec `kcp.md` §2): the wire decoders and the
//! decoder state machine in every framing (native, kcp-go, kcp-go behind
//! kcptun's crypt-none header), with a small memory budget so groups are
//! released for it. Two parts per input:
//!
//! - arbitrary datagrams into a `FecDecoder` at fuzz-chosen times: no panic,
//!   every delivered datagram fits a shard; also the loss report and the
//!   handshake's FEC descriptor decoders, which must round-trip;
//! - datagrams through a `FecEncoder`, shards lost as the fuzzer chooses,
//!   into a `FecDecoder`: everything delivered was sent (recovery never
//!   invents or corrupts a datagram), each at most as often as it was sent,
//!   and with no loss everything sent is delivered exactly once.
#![no_main]

use std::collections::HashMap;
use std::time::{Duration, Instant};

use libfuzzer_sys::arbitrary::{self, Arbitrary};
use libfuzzer_sys::fuzz_target;
use petrel_proto::fec::wire::MAX_PAYLOAD;
use petrel_proto::fec::{FecConfig, FecDecoder, FecEncoder, FecScheme, Framing, LossReport};

#[derive(Arbitrary, Debug)]
struct Input {
    framing: u8,
    adaptive: bool,
    small_budget: bool,
    /// (ms since the previous, datagram) into the decoder.
    arrivals: Vec<(u8, Vec<u8>)>,
    /// (ms since the previous, datagram, lose its shard) through the encoder.
    sent: Vec<(u8, Vec<u8>, bool)>,
    lose_parity: Vec<bool>,
}

fn framing(b: u8) -> Framing {
    match b % 3 {
        0 => Framing::Native,
        1 => Framing::KcpGo {
            crypt_header: false,
        },
        _ => Framing::KcpGo { crypt_header: true },
    }
}

fn config(input: &Input, framing: Framing) -> FecConfig {
    let scheme = match (framing, input.adaptive) {
        (Framing::Native, true) => FecScheme::ADAPTIVE_DEFAULT,
        _ => FecScheme::Fixed {
            data_shards: 4,
            parity_shards: 2,
        },
    };
    let cfg = FecConfig {
        scheme,
        budget: if input.small_budget {
            16 << 10
        } else {
            1 << 20
        },
        ..FecConfig::default()
    };
    cfg.validate().expect("the fuzzed config is in range");
    cfg
}

fuzz_target!(|input: Input| {
    let f = framing(input.framing);
    let cfg = config(&input, f);
    decode_arbitrary(&input, f, &cfg);
    through_encoder(&input, f, &cfg);
});

fn decode_arbitrary(input: &Input, f: Framing, cfg: &FecConfig) {
    let mut dec = FecDecoder::new(cfg, f).expect("a valid decoder config");
    let mut now = Instant::now();
    let mut out = Vec::new();
    for (ms, d) in &input.arrivals {
        now += Duration::from_millis(u64::from(*ms));
        let _ = dec.input(now, d);
        while dec.poll_datagram(&mut out) {
            assert!(out.len() <= MAX_PAYLOAD);
        }
        if let Some(t) = dec.poll_timeout() {
            dec.handle_timeout(t.max(now));
        }
        let _ = dec.take_loss_report();
        if let Ok(r) = LossReport::decode(d) {
            assert_eq!(r.encode().as_slice(), d.as_slice());
        }
        if let Ok(c) = FecConfig::decode_descriptor(d) {
            assert_eq!(FecConfig::decode_descriptor(&c.encode_descriptor()), Ok(c));
        }
    }
}

/// The encoder's shards to the decoder at `now`; the first is lost if
/// `lose_first`, later ones as `lose_parity` says. Returns whether any was lost.
fn transmit(
    enc: &mut FecEncoder,
    dec: &mut FecDecoder,
    now: Instant,
    lose_first: bool,
    lose_parity: &mut impl Iterator<Item = bool>,
    delivered: &mut Vec<Vec<u8>>,
) -> bool {
    let (mut shard, mut out) = (Vec::new(), Vec::new());
    let (mut first, mut lost) = (true, false);
    while enc.poll_transmit(now, &mut shard) {
        // Mostly the push's data shard first, then parity (a closing group's
        // parity may come first); the checks hold whichever is lost.
        let drop = if first {
            lose_first
        } else {
            lose_parity.next().unwrap_or(false)
        };
        first = false;
        lost |= drop;
        if !drop {
            dec.input(now, &shard).expect("an encoded shard decodes");
        }
        while dec.poll_datagram(&mut out) {
            delivered.push(out.clone());
        }
    }
    lost
}

/// Datagrams through encoder and decoder, timers driven at their deadlines as
/// the session does.
fn through_encoder(input: &Input, f: Framing, cfg: &FecConfig) {
    let mut enc = FecEncoder::new(cfg, f).expect("a valid encoder config");
    let mut dec = FecDecoder::new(cfg, f).expect("a valid decoder config");
    let mut now = Instant::now();
    let (mut sent, mut delivered) = (Vec::new(), Vec::new());
    let mut lost = false;
    let mut lose_parity = input.lose_parity.iter().copied().cycle();
    for (ms, d, lose) in &input.sent {
        let next = now + Duration::from_millis(u64::from(*ms));
        if let Some(deadline) = enc.poll_timeout().filter(|d| *d <= next) {
            now = deadline.max(now);
            enc.handle_timeout(now);
            lost |= transmit(
                &mut enc,
                &mut dec,
                now,
                false,
                &mut lose_parity,
                &mut delivered,
            );
        }
        now = next;
        // The ARQ never sends an empty datagram, nor one over its MTU.
        let d = &d[..d.len().min(1_400)];
        if d.is_empty() || enc.push(now, d).is_err() {
            continue;
        }
        sent.push(d.to_vec());
        lost |= transmit(
            &mut enc,
            &mut dec,
            now,
            *lose,
            &mut lose_parity,
            &mut delivered,
        );
    }
    if let Some(deadline) = enc.poll_timeout() {
        now = deadline.max(now);
        enc.handle_timeout(now);
        lost |= transmit(
            &mut enc,
            &mut dec,
            now,
            false,
            &mut lose_parity,
            &mut delivered,
        );
    }
    let mut sent_sorted = sent.clone();
    sent_sorted.sort();
    for d in &delivered {
        assert!(
            sent_sorted.binary_search(d).is_ok(),
            "delivered a datagram never sent"
        );
    }
    // Each datagram is handed up at most as often as it was sent (every shard
    // seq at most once, received or rebuilt, even when a group's last shards
    // arrive after `group_expiry`), and exactly as often when nothing was lost.
    let mut count: HashMap<&[u8], i64> = HashMap::new();
    for d in &sent {
        *count.entry(d).or_default() += 1;
    }
    for d in &delivered {
        *count.entry(d).or_default() -= 1;
    }
    assert!(count.values().all(|c| *c >= 0), "a datagram handed up twice");
    if !lost {
        assert!(
            count.values().all(|c| *c == 0),
            "lossless, yet not everything arrived"
        );
    }
}
