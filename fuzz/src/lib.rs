//! Helpers shared by the fuzz targets in `fuzz_targets/`: splitting an input
//! into datagrams, and the token-bucket bound the rate-limit targets assert.
//!
//! What lives here: input framing and invariant checks used by more than one
//! target. What does not: the targets themselves (one file each under
//! `fuzz_targets/`), and anything the library crates could call (this crate
//! is built only by cargo-fuzz, see `README.md`).

use std::collections::HashMap;
use std::hash::Hash;

/// Splits `data` into `len: u16 LE` + `len` bytes records (the last one cut
/// short at the end of the input), so one input is a multi-datagram exchange.
pub fn datagrams(data: &[u8]) -> Vec<&[u8]> {
    let mut out = Vec::new();
    let mut rest = data;
    while rest.len() >= 2 {
        let len = usize::from(u16::from_le_bytes([rest[0], rest[1]])).min(rest.len() - 2);
        out.push(&rest[2..2 + len]);
        rest = &rest[2 + len..];
    }
    out
}

/// Checks that what a token bucket of `rate` tokens/s and `burst` tokens
/// admitted per key never exceeds `burst + rate × (t_j − t_i)` over any
/// window `[t_i, t_j]` of its admissions (a bucket that is evicted and comes
/// back full, or is forgotten when idle long enough to be full again, still
/// obeys it).
///
/// With `a_k = k − rate × t_k` for the k-th admission, the bound over the
/// window from i to j is `a_j − a_i + 1 ≤ burst`, so one running minimum of
/// `a` per key checks every window in O(1) per admission.
#[derive(Debug)]
pub struct WindowBound<K> {
    rate: f64,
    burst: f64,
    keys: HashMap<K, (u64, f64)>,
}

impl<K: Hash + Eq + std::fmt::Debug> WindowBound<K> {
    /// A bound of `rate` tokens per second with `burst` banked at most.
    pub fn new(rate: f64, burst: f64) -> Self {
        Self {
            rate,
            burst,
            keys: HashMap::new(),
        }
    }

    /// Records an admission of `key` at `t_s` seconds (non-decreasing per
    /// key) and panics if some window ending here admitted too many.
    pub fn admit(&mut self, key: K, t_s: f64) {
        let (rate, burst) = (self.rate, self.burst);
        let e = self.keys.entry(key).or_insert((0, f64::INFINITY));
        e.0 += 1;
        let a = e.0 as f64 - rate * t_s;
        e.1 = e.1.min(a);
        // 1e-6 tokens of slack for the float arithmetic of the buckets.
        let worst = a - e.1 + 1.0;
        assert!(
            worst <= burst + 1e-6,
            "{worst} admissions in a window allowing {burst} + rate × length (rate {rate}/s)"
        );
    }
}
