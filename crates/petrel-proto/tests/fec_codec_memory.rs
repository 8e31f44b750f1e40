//! The Reed–Solomon codec-cache attack (issue 17, H3) against one session,
//! measured as live heap bytes with a counting allocator (its own test binary,
//! so no other test's allocations move the figure).
//!
//! A peer granted adaptive 8+4 sends native shards of 10-byte data and 14-byte
//! parity, cycling every shape the wire can express (1..=64 data × 1..=16
//! parity) with a new missing set in each group, then only the negotiated
//! shapes (every group a new decode matrix). Shapes beyond the negotiated
//! 8+4 are refused and counted; the decode matrices of the others are reserved
//! in the FEC budget. The session's heap must stay within its FEC budget plus
//! a small constant (the codecs' own tables, `MAX_CODECS` per encoder or
//! decoder, and the decoder's fixed tables).
#![allow(clippy::unwrap_used)]

use std::alloc::{GlobalAlloc, Layout, System};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use petrel_proto::fec::{FecBudget, FecConfig, FecScheme};
use petrel_proto::handshake::{Binding, Established, RAW_PARAMS};
use petrel_proto::session::{Session, SessionConfig};

struct Counting;

static LIVE: AtomicUsize = AtomicUsize::new(0);
static PEAK: AtomicUsize = AtomicUsize::new(0);

// SAFETY: forwards every call to the system allocator unchanged and only counts
// the sizes it was asked for.
unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        let live = LIVE.fetch_add(layout.size(), Ordering::Relaxed) + layout.size();
        PEAK.fetch_max(live, Ordering::Relaxed);
        // SAFETY: the caller's layout is passed through as is.
        unsafe { System.alloc(layout) }
    }
    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        LIVE.fetch_sub(layout.size(), Ordering::Relaxed);
        // SAFETY: `ptr` was allocated by `System` with this layout.
        unsafe { System.dealloc(ptr, layout) }
    }
    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        if new_size > layout.size() {
            let live = LIVE.fetch_add(new_size - layout.size(), Ordering::Relaxed)
                + (new_size - layout.size());
            PEAK.fetch_max(live, Ordering::Relaxed);
        } else {
            LIVE.fetch_sub(layout.size() - new_size, Ordering::Relaxed);
        }
        // SAFETY: as `alloc` / `dealloc`: the pointer and layout come from `System`.
        unsafe { System.realloc(ptr, layout, new_size) }
    }
}

#[global_allocator]
static ALLOC: Counting = Counting;

/// Datagrams the attacker sends.
const DATAGRAMS: usize = 200_000;
/// Heap a session may hold beyond its FEC budget, bytes: 2 × `MAX_CODECS`
/// codecs of about 10 KiB, the decoder's group table (1024 entries) and queues.
const CONSTANT: usize = 512 << 10;

/// Native shards of group `base` with shape `k + p`, all but those in
/// `missing` (bit i = shard i), conv-prefixed.
fn group(conv: u32, base: u32, k: u8, p: u8, missing: u128, out: &mut Vec<Vec<u8>>) {
    for i in 0..k + p {
        if missing & 1 << i != 0 {
            continue;
        }
        let seq = base.wrapping_add(u32::from(i));
        let mut d = conv.to_le_bytes().to_vec();
        if i < k {
            d.extend_from_slice(&[0x10, i]);
            d.extend_from_slice(&seq.to_le_bytes());
            d.extend_from_slice(&[0x5A; 10]);
        } else {
            d.extend_from_slice(&[0x11, i]);
            d.extend_from_slice(&seq.to_le_bytes());
            d.extend_from_slice(&[k, p]);
            d.extend_from_slice(&[0xC3; 14]);
        }
        out.push(d);
    }
}

#[test]
fn codec_cache_attack_stays_within_the_fec_budget() {
    let now = Instant::now();
    let fec = FecConfig {
        scheme: FecScheme::Adaptive {
            max_data: 8,
            max_parity: 4,
            target: 1e-3,
        },
        ..FecConfig::default()
    };
    let config = SessionConfig {
        fec,
        ..SessionConfig::default()
    };
    let established = Established {
        conv: 77,
        params: RAW_PARAMS,
        binding: Binding::Raw,
    };
    let budget = FecBudget::new(fec.budget);
    let before = LIVE.load(Ordering::Relaxed);
    PEAK.store(before, Ordering::Relaxed);
    let mut session = Session::with_fec_budget(&established, &config, now, budget.clone()).unwrap();
    let mut out = Vec::new();
    let (mut sent, mut base, mut shape, mut pattern) = (0usize, 0u32, 0u32, 0u64);
    let mut shards = Vec::new();
    while sent < DATAGRAMS {
        // First half: every shape the wire can express; second half: only the
        // negotiated ones (1..=8 data × 1..=4 parity), the worst for the cache.
        let (k, p) = if sent < DATAGRAMS / 2 {
            ((shape % 64) as u8 + 1, (shape / 64 % 16) as u8 + 1)
        } else {
            ((shape % 8) as u8 + 1, (shape / 8 % 4) as u8 + 1)
        };
        shape += 1;
        // A new missing set each group: m data shards lost (1..=min(k, p)),
        // spread by a stride that changes with the group.
        let k64 = u64::from(k);
        let m = 1 + (pattern % u64::from(k.min(p))) as u32;
        let (start, stride) = (pattern / 5 % k64, 1 + pattern / 3 % k64);
        let mut missing = 0u128;
        for j in 0..k64 {
            if missing.count_ones() == m {
                break;
            }
            missing |= 1 << ((start + j * stride) % k64);
        }
        for i in 0..k {
            if missing.count_ones() == m {
                break;
            }
            missing |= 1 << i;
        }
        pattern += 1;
        shards.clear();
        group(77, base, k, p, missing, &mut shards);
        base = base.wrapping_add(u32::from(k) + u32::from(p));
        for d in &shards {
            let _ = session.input(now, d);
            while session.poll_transmit(now, &mut out) {}
            while session.recv().is_some() {}
        }
        sent += shards.len();
        if sent % 10_000 < shards.len() {
            session.handle_timeout(now + Duration::from_millis(1));
        }
    }
    let growth = LIVE.load(Ordering::Relaxed) - before;
    let peak_growth = PEAK.load(Ordering::Relaxed) - before;
    let fec_stats = session.stats().fec.unwrap().decoder;
    eprintln!(
        "codec-cache attack, {sent} datagrams: session heap +{} KiB now, +{} KiB at peak; \
         FEC budget {} KiB, reserved {} KiB (peak {} KiB), decode matrices {} KiB; \
         {} shards refused (shape not negotiated), {} parity shards taken, \
         {} rebuilds refused for the budget",
        growth >> 10,
        peak_growth >> 10,
        budget.limit() >> 10,
        budget.current() >> 10,
        budget.peak() >> 10,
        fec_stats.codec_bytes >> 10,
        fec_stats.shapes_refused,
        fec_stats.parity_shards_received,
        fec_stats.rebuilds_refused_for_budget,
    );
    assert!(
        fec_stats.shapes_refused > DATAGRAMS as u64 / 3,
        "{fec_stats:?}"
    );
    // The negotiated shapes were rebuilt (garbage parity: nothing valid comes
    // out, but each new missing set costs a decode matrix).
    assert!(
        fec_stats.parity_shards_received > 100 && fec_stats.codec_bytes > 0,
        "{fec_stats:?}"
    );
    assert!(budget.peak() <= budget.limit());
    assert!(
        peak_growth.max(growth) <= budget.limit() + CONSTANT,
        "heap +{peak_growth} bytes, budget {} + {CONSTANT}",
        budget.limit()
    );
    drop(session);
    assert_eq!(budget.current(), 0, "everything reserved is returned");
}
