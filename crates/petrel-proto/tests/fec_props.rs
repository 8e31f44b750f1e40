//! Property tests: no input can panic the decoder or grow it without bound.
#![allow(clippy::unwrap_used)]

use petrel_proto::fec::{FecConfig, FecDecoder, FecEncoder, FecScheme, Framing, LossReport};
use proptest::prelude::*;
use std::time::{Duration, Instant};

fn configs() -> Vec<(FecConfig, Framing)> {
    let kcp = FecConfig {
        scheme: FecScheme::Fixed {
            data_shards: 10,
            parity_shards: 3,
        },
        ..FecConfig::default()
    };
    vec![
        (FecConfig::default(), Framing::Native),
        (kcp, Framing::KcpGo { crypt_header: true }),
        (
            kcp,
            Framing::KcpGo {
                crypt_header: false,
            },
        ),
    ]
}

proptest! {
    #[test]
    fn arbitrary_datagrams_never_panic(datagrams in prop::collection::vec(prop::collection::vec(any::<u8>(), 0..300), 0..64)) {
        let t0 = Instant::now();
        for (cfg, framing) in configs() {
            let mut dec = FecDecoder::new(&cfg, framing).unwrap();
            let mut out = Vec::new();
            for (i, d) in datagrams.iter().enumerate() {
                let _ = dec.input(t0 + Duration::from_millis(i as u64), d);
                while dec.poll_datagram(&mut out) {}
            }
            prop_assert!(dec.stats().retained_bytes <= cfg.budget);
        }
    }

    /// Valid shards with random bytes flipped, truncated or replayed: the decoder
    /// may reject them or hand up garbage (the ARQ checks its own framing), but it
    /// never panics.
    #[test]
    fn mutated_shards_never_panic(
        seed_lens in prop::collection::vec(1usize..1200, 1..20),
        flips in prop::collection::vec((any::<usize>(), any::<u8>()), 0..40),
        cut in any::<usize>(),
    ) {
        let t0 = Instant::now();
        for (cfg, framing) in configs() {
            let mut enc = FecEncoder::new(&cfg, framing).unwrap();
            let mut dec = FecDecoder::new(&cfg, framing).unwrap();
            for (i, &n) in seed_lens.iter().enumerate() {
                enc.push(t0, &vec![i as u8; n]).unwrap();
            }
            enc.handle_timeout(t0 + cfg.group_wait);
            let mut wire = Vec::new();
            let mut out = Vec::new();
            while enc.poll_transmit(t0 + cfg.group_wait, &mut out) {
                wire.push(out.clone());
            }
            for (j, (at, x)) in flips.iter().enumerate() {
                let n = wire.len();
                let w = &mut wire[j % n];
                if !w.is_empty() {
                    let k = at % w.len();
                    w[k] ^= x;
                }
            }
            let w0 = &mut wire[0];
            w0.truncate(cut % (w0.len() + 1));
            for w in wire.iter().chain(wire.iter()) {
                let _ = dec.input(t0, w);
                while dec.poll_datagram(&mut out) {}
            }
        }
    }
}

proptest! {
    #[test]
    fn descriptor_and_report_decoders_never_panic(b in prop::collection::vec(any::<u8>(), 0..16)) {
        if let Ok(cfg) = FecConfig::decode_descriptor(&b) {
            prop_assert!(cfg.validate().is_ok());
            prop_assert_eq!(FecConfig::decode_descriptor(&cfg.encode_descriptor()), Ok(cfg));
        }
        if let Ok(r) = LossReport::decode(&b) {
            prop_assert_eq!(r.encode().to_vec(), b);
        }
    }

    #[test]
    fn loss_report_round_trips(expected in any::<u32>(), received in any::<u32>()) {
        let r = LossReport { expected, received };
        prop_assert_eq!(LossReport::decode(&r.encode()), Ok(r));
    }
}
