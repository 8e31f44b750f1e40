//! Whole FEC layer cost per group: `FecEncoder` → `FecDecoder`, native framing,
//! 8 data shards of 1200 bytes, fixed 8+2 (lossless, and one data shard lost and
//! rebuilt per group) and adaptive at zero loss (pass-through).
//!
//! Run: `cargo bench -p petrel-proto --bench fec_layer`.
#![allow(clippy::unwrap_used)]

use criterion::{criterion_group, criterion_main, Criterion, Throughput};
use petrel_proto::fec::{FecConfig, FecDecoder, FecEncoder, FecScheme, Framing};
use std::time::{Duration, Instant};

fn group(c: &mut Criterion, name: &str, cfg: FecConfig, lose: Option<usize>) {
    let mut enc = FecEncoder::new(&cfg, Framing::Native).unwrap();
    let mut dec = FecDecoder::new(&cfg, Framing::Native).unwrap();
    let data = [7u8; 1200];
    let (mut tx, mut rx) = (Vec::with_capacity(2048), Vec::with_capacity(2048));
    let mut t = Instant::now();
    let mut g = c.benchmark_group("fec_layer");
    g.throughput(Throughput::Bytes(8 * 1200));
    g.bench_function(name, |b| {
        b.iter(|| {
            t += Duration::from_micros(100);
            for _ in 0..8 {
                enc.push(t, &data).unwrap();
            }
            let mut i = 0;
            while enc.poll_transmit(t, &mut tx) {
                if lose != Some(i) {
                    dec.input(t, &tx).unwrap();
                }
                i += 1;
            }
            while dec.poll_datagram(&mut rx) {}
        })
    });
    g.finish();
}

fn benches(c: &mut Criterion) {
    group(c, "fixed_8+2_lossless", FecConfig::default(), None);
    group(c, "fixed_8+2_one_recovery", FecConfig::default(), Some(3));
    let adaptive = FecConfig {
        scheme: FecScheme::ADAPTIVE_DEFAULT,
        ..FecConfig::default()
    };
    group(c, "adaptive_zero_loss_passthrough", adaptive, None);
}

fn config() -> Criterion {
    Criterion::default()
        .sample_size(20)
        .warm_up_time(Duration::from_millis(300))
        .measurement_time(Duration::from_secs(1))
}

criterion_group! { name = layer; config = config(); targets = benches }
criterion_main!(layer);
