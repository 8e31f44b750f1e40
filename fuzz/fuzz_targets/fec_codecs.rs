//! The FEC side-channel decoders: loss reports (`LossReport`), the FEC
//! descriptor of the handshake (`FecConfig::decode_descriptor`), the
//! negotiated `FecDescriptor` and its server clamp, and the loss report's
//! effect on the adaptive parity policy. Asserted:
//!
//! - a decoded report or descriptor encodes to the same bytes / decodes to
//!   the same value; a descriptor that decodes is a valid configuration;
//! - a clamped request never exceeds the server's limits nor grants more
//!   parity than data shards;
//! - the adaptive policy's parity stays within `0..=max_parity` whatever
//!   reports it is fed, at whatever times, and so does the parity of a
//!   sparse one-shard group.
#![no_main]

use std::time::{Duration, Instant};

use libfuzzer_sys::arbitrary::{self, Arbitrary};
use libfuzzer_sys::fuzz_target;
use petrel_proto::fec::{FecConfig, LossReport, ParityPolicy};
use petrel_proto::handshake::FecDescriptor;

#[derive(Arbitrary, Debug)]
struct Input {
    bytes: Vec<u8>,
    request: (u8, u8, u8),
    limits: (u8, u8),
    /// `(expected, received, ms since the previous report)`.
    reports: Vec<(u32, u32, u16)>,
    policy: (u8, u8, u8),
}

fn request((tag, d, p): (u8, u8, u8)) -> FecDescriptor {
    match tag % 3 {
        0 => FecDescriptor::None,
        1 => FecDescriptor::Fixed { data: d, parity: p },
        _ => FecDescriptor::Adaptive {
            max_data: d,
            max_parity: p,
        },
    }
}

fuzz_target!(|input: Input| {
    let d = &input.bytes;
    if let Ok(r) = LossReport::decode(d) {
        assert_eq!(r.encode().as_slice(), d.as_slice());
    }
    if let Ok(c) = FecConfig::decode_descriptor(d) {
        assert_eq!(c.validate(), Ok(()));
        assert_eq!(FecConfig::decode_descriptor(&c.encode_descriptor()), Ok(c));
    }
    let (max_data, max_parity) = input.limits;
    match request(input.request).clamp(max_data, max_parity) {
        FecDescriptor::None => {}
        FecDescriptor::Fixed { data, parity }
        | FecDescriptor::Adaptive {
            max_data: data,
            max_parity: parity,
        } => {
            assert!(data <= max_data && parity <= max_parity, "over the limits");
            assert!(parity <= data, "more parity than data granted");
        }
    }
    let (k, p, t) = input.policy;
    let (k, p) = (k % 64 + 1, p % 16 + 1);
    let target = 10f64.powf(-f64::from(t % 81 + 10) / 10.0);
    let mut policy = ParityPolicy::new(k, p, target);
    let mut now = Instant::now();
    for &(expected, received, gap_ms) in &input.reports {
        now += Duration::from_millis(u64::from(gap_ms));
        policy.on_report(now, &LossReport { expected, received });
        assert!(policy.parity() <= p);
        assert!(policy.parity_for(1) <= policy.parity().max(1));
    }
});
