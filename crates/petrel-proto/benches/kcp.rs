//! Micro-benchmarks of the KCP core: segment encode/decode and a whole
//! send → poll_transmit → input → recv (and ack back) round, in memory.
//!
//! A small self-timed harness (no criterion, to keep the dev-dependency build light
//! on shared CI): each case runs a warm-up, then several samples of a fixed
//! iteration count, and prints the median and best ns per iteration.
//! Run with `cargo bench -p petrel-proto --bench kcp`.

use std::hint::black_box;
use std::time::{Duration, Instant};

use petrel_proto::kcp::segment::{encode_segment, segments, Command, Header};
use petrel_proto::kcp::{Kcp, KcpConfig};

const SAMPLES: usize = 15;

fn bench(name: &str, iterations: u64, mut f: impl FnMut()) {
    for _ in 0..iterations {
        f();
    }
    let mut per_iter: Vec<f64> = (0..SAMPLES)
        .map(|_| {
            let start = Instant::now();
            for _ in 0..iterations {
                f();
            }
            start.elapsed().as_nanos() as f64 / iterations as f64
        })
        .collect();
    per_iter.sort_by(f64::total_cmp);
    println!(
        "{name:<44} median {:>9.1} ns/iter   best {:>9.1} ns/iter",
        per_iter[SAMPLES / 2],
        per_iter[0]
    );
}

fn header(len: u32) -> Header {
    Header {
        conv: 7,
        cmd: Command::Push,
        frg: 0,
        wnd: 512,
        ts: 1,
        sn: 2,
        una: 3,
        len,
    }
}

fn main() {
    let payload = vec![0xAB; 1176];
    let mut out = Vec::with_capacity(1200);
    bench("encode 1 segment (1176 B payload)", 200_000, || {
        out.clear();
        encode_segment(black_box(&header(1176)), black_box(&payload), &mut out);
    });
    let mut acks = Vec::with_capacity(1200);
    for sn in 0..50 {
        encode_segment(
            &Header {
                sn,
                cmd: Command::Ack,
                ..header(0)
            },
            &[],
            &mut acks,
        );
    }
    bench("decode datagram of 50 ACK segments", 200_000, || {
        for seg in segments(black_box(&acks)) {
            black_box(seg.ok());
        }
    });

    for size in [64usize, 1000, 16 * 1024] {
        let t0 = Instant::now();
        let mut now = t0;
        let config = KcpConfig::default();
        let mut a = Kcp::new(1, config, now).expect("valid config");
        let mut b = Kcp::new(1, config, now).expect("valid config");
        let msg = vec![7u8; size];
        let mut buf = Vec::with_capacity(1200);
        let name = format!("send->input->recv->ack round, {size} B message");
        bench(&name, 20_000, || {
            now += Duration::from_micros(50);
            a.send(&msg).expect("queue has room");
            while a.poll_transmit(now, &mut buf) {
                b.input(now, &buf).expect("well-formed");
            }
            while let Some(m) = b.recv() {
                black_box(m);
            }
            while b.poll_transmit(now, &mut buf) {
                a.input(now, &buf).expect("well-formed");
            }
        });
        assert_eq!(a.pending_segments(), 0);
    }
}
