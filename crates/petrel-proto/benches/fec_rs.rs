//! Reed–Solomon library comparison on Petrel's FEC shapes.
//!
//! Shapes 4+2, 8+2 and 8+4 (data_shards+parity_shards), shard sizes 64, 256 and
//! 1200 bytes. `encode` computes all parity shards of one group; `decode` recovers
//! `parity_shards` lost data shards (the worst recoverable case) from the rest.
//! Each library is used the way a long-lived encoder/decoder would use it: the
//! codec object is built once and reused, as `fec::rs` does.
//!
//! Run: `cargo bench -p petrel-proto --bench fec_rs`.
#![allow(clippy::unwrap_used)]

use criterion::{black_box, criterion_group, criterion_main, BenchmarkId, Criterion, Throughput};
use reed_solomon_simd::{ReedSolomonDecoder, ReedSolomonEncoder};
use std::time::Duration;

const SHAPES: [(usize, usize); 3] = [(4, 2), (8, 2), (8, 4)];
const SIZES: [usize; 3] = [64, 256, 1200];

fn data(ds: usize, size: usize) -> Vec<Vec<u8>> {
    (0..ds)
        .map(|i| (0..size).map(|j| (i * 31 + j * 7) as u8).collect())
        .collect()
}

fn bench_encode(c: &mut Criterion) {
    let mut g = c.benchmark_group("encode");
    for (ds, ps) in SHAPES {
        for size in SIZES {
            let id = format!("{ds}+{ps}/{size}B");
            g.throughput(Throughput::Bytes((ds * size) as u64));
            let shards = data(ds, size);

            let rse = reed_solomon_erasure::galois_8::ReedSolomon::new(ds, ps).unwrap();
            let mut parity = vec![vec![0u8; size]; ps];
            g.bench_function(BenchmarkId::new("erasure", &id), |b| {
                b.iter(|| {
                    rse.encode_sep(black_box(&shards), &mut parity).unwrap();
                })
            });

            let mut enc = ReedSolomonEncoder::new(ds, ps, size).unwrap();
            g.bench_function(BenchmarkId::new("simd", &id), |b| {
                b.iter(|| {
                    enc.reset(ds, ps, size).unwrap();
                    for s in &shards {
                        enc.add_original_shard(black_box(s)).unwrap();
                    }
                    let r = enc.encode().unwrap();
                    black_box(r.recovery(0));
                })
            });
        }
    }
    g.finish();
}

fn bench_decode(c: &mut Criterion) {
    let mut g = c.benchmark_group("decode");
    for (ds, ps) in SHAPES {
        for size in SIZES {
            let id = format!("{ds}+{ps}/{size}B");
            g.throughput(Throughput::Bytes((ds * size) as u64));
            let shards = data(ds, size);

            let rse = reed_solomon_erasure::galois_8::ReedSolomon::new(ds, ps).unwrap();
            let mut parity = vec![vec![0u8; size]; ps];
            rse.encode_sep(&shards, &mut parity).unwrap();
            let all: Vec<Vec<u8>> = shards.iter().chain(parity.iter()).cloned().collect();
            g.bench_function(BenchmarkId::new("erasure", &id), |b| {
                b.iter(|| {
                    let mut opt: Vec<Option<Vec<u8>>> = all.iter().cloned().map(Some).collect();
                    for slot in opt.iter_mut().take(ps) {
                        *slot = None;
                    }
                    rse.reconstruct_data(&mut opt).unwrap();
                    black_box(&opt);
                })
            });

            let recovery = reed_solomon_simd::encode(ds, ps, &shards).unwrap();
            let mut dec = ReedSolomonDecoder::new(ds, ps, size).unwrap();
            g.bench_function(BenchmarkId::new("simd", &id), |b| {
                b.iter(|| {
                    dec.reset(ds, ps, size).unwrap();
                    for (i, s) in shards.iter().enumerate().skip(ps) {
                        dec.add_original_shard(i, black_box(s)).unwrap();
                    }
                    for (i, r) in recovery.iter().enumerate() {
                        dec.add_recovery_shard(i, r).unwrap();
                    }
                    let r = dec.decode().unwrap();
                    black_box(r.restored_original(0));
                })
            });
            g.bench_function(BenchmarkId::new("simd-oneshot", &id), |b| {
                b.iter(|| {
                    let orig = shards.iter().enumerate().skip(ps);
                    let rec = recovery.iter().enumerate();
                    black_box(reed_solomon_simd::decode(ds, ps, orig, rec).unwrap());
                })
            });
        }
    }
    g.finish();
}

fn config() -> Criterion {
    Criterion::default()
        .sample_size(20)
        .warm_up_time(Duration::from_millis(300))
        .measurement_time(Duration::from_secs(1))
}

criterion_group! { name = benches; config = config(); targets = bench_encode, bench_decode }
criterion_main!(benches);
