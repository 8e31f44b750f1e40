//! The FEC hot path allocates nothing per packet after warm-up (design.md):
//! counted with a global allocator wrapper. A separate test binary, so no other
//! test's allocations are counted.
#![allow(clippy::unwrap_used)]

use petrel_proto::fec::{FecConfig, FecDecoder, FecEncoder, Framing};
use std::alloc::{GlobalAlloc, Layout, System};
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

struct Counting;

static ALLOCS: AtomicU64 = AtomicU64::new(0);

unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        ALLOCS.fetch_add(1, Ordering::Relaxed);
        // SAFETY: forwarded unchanged to the system allocator.
        unsafe { System.alloc(layout) }
    }
    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        // SAFETY: forwarded unchanged to the system allocator.
        unsafe { System.dealloc(ptr, layout) }
    }
    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        ALLOCS.fetch_add(1, Ordering::Relaxed);
        // SAFETY: forwarded unchanged to the system allocator.
        unsafe { System.realloc(ptr, layout, new_size) }
    }
}

#[global_allocator]
static GLOBAL: Counting = Counting;

/// Sends `groups` full 8+2 groups of 1200-byte datagrams through encoder and
/// decoder, losing data shard `lose` of each group if given.
fn run(
    (enc, dec): (&mut FecEncoder, &mut FecDecoder),
    (tx, rx): (&mut Vec<u8>, &mut Vec<u8>),
    t: &mut Instant,
    groups: usize,
    lose: Option<usize>,
) {
    let data = [7u8; 1200];
    for _ in 0..groups {
        *t += Duration::from_millis(1);
        for _ in 0..8 {
            enc.push(*t, &data).unwrap();
        }
        let mut i = 0;
        while enc.poll_transmit(*t, tx) {
            if lose != Some(i) {
                dec.input(*t, tx).unwrap();
            }
            i += 1;
        }
        while dec.poll_datagram(rx) {
            assert_eq!(rx.len(), 1200);
        }
    }
}

#[test]
fn steady_state_allocates_nothing_per_packet() {
    let cfg = FecConfig::default();
    let mut enc = FecEncoder::new(&cfg, Framing::Native).unwrap();
    let mut dec = FecDecoder::new(&cfg, Framing::Native).unwrap();
    let mut t = Instant::now();
    let (mut tx, mut rx) = (Vec::with_capacity(2048), Vec::with_capacity(2048));
    // Warm-up long enough for groups to start expiring, so the group table is at
    // its steady size.
    run((&mut enc, &mut dec), (&mut tx, &mut rx), &mut t, 1000, None);
    let before = ALLOCS.load(Ordering::Relaxed);
    run((&mut enc, &mut dec), (&mut tx, &mut rx), &mut t, 1000, None);
    let lossless = ALLOCS.load(Ordering::Relaxed) - before;
    assert_eq!(lossless, 0, "allocations in 1000 lossless groups");

    run(
        (&mut enc, &mut dec),
        (&mut tx, &mut rx),
        &mut t,
        1000,
        Some(3),
    );
    let before = ALLOCS.load(Ordering::Relaxed);
    run(
        (&mut enc, &mut dec),
        (&mut tx, &mut rx),
        &mut t,
        1000,
        Some(3),
    );
    let lossy = ALLOCS.load(Ordering::Relaxed) - before;
    assert_eq!(dec.stats().shards_recovered, 2000);
    assert_eq!(
        lossy, 0,
        "allocations in 1000 groups with one recovery each"
    );
}
