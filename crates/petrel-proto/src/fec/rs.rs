//! Reed–Solomon codecs, one per group shape, built on first use and kept.
//!
//! `reed-solomon-erasure` (GF(2^8), Backblaze/klauspost Vandermonde-derived
//! systematic matrix) — the same parity bytes kcp-go computes, see `fec` docs.

use super::config::{MAX_DATA_SHARDS, MAX_PARITY_SHARDS};
use reed_solomon_erasure::galois_8::ReedSolomon;

/// Lazily built codecs for every `(data, parity)` shape up to the crate limits:
/// at most 64 × 16 entries, each a few KiB, so bounded.
#[derive(Debug, Default)]
pub(crate) struct Codecs {
    slots: Vec<Option<ReedSolomon>>,
}

impl Codecs {
    /// The codec for `data + parity` shards; `None` if the shape is out of range.
    pub fn get(&mut self, data: u8, parity: u8) -> Option<&ReedSolomon> {
        if data == 0 || parity == 0 || data > MAX_DATA_SHARDS || parity > MAX_PARITY_SHARDS {
            return None;
        }
        if self.slots.is_empty() {
            let n = usize::from(MAX_DATA_SHARDS) * usize::from(MAX_PARITY_SHARDS);
            self.slots.resize_with(n, || None);
        }
        let i = usize::from(data - 1) * usize::from(MAX_PARITY_SHARDS) + usize::from(parity - 1);
        let slot = self.slots.get_mut(i)?;
        if slot.is_none() {
            *slot = ReedSolomon::new(usize::from(data), usize::from(parity)).ok();
        }
        slot.as_ref()
    }
}
