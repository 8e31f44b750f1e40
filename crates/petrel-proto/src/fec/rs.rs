//! Reed–Solomon codecs, one per group shape, built on first use and kept within
//! fixed bounds.
//!
//! `reed-solomon-erasure` (GF(2^8), Backblaze/klauspost Vandermonde-derived
//! systematic matrix) — the same parity bytes kcp-go computes, see `fec` docs.
//!
//! # Memory
//!
//! A codec holds its encoding matrix and an LRU cache of inverted decode
//! matrices, one per distinct set of missing shards, that the library fills on
//! every reconstruction (up to 254 entries, allocated for up front). A peer
//! choosing shapes and loss patterns could otherwise grow this without limit
//! (issue 17, H3), so:
//!
//! - at most [`MAX_CODECS`] codecs are kept, the least recently used one is
//!   dropped (with its cache) when another shape is needed;
//! - each codec rebuilds at most [`MAX_DECODE_MATRICES`] distinct missing sets;
//!   the next new one replaces the codec by a fresh one, which drops its cache;
//! - every decode matrix the library will cache is reserved in the endpoint's
//!   [`FecBudget`] first ([`matrix_cost`] bytes, an upper bound of what the
//!   library allocates for it); a reconstruction whose matrix does not fit even
//!   after its codec's own matrices were dropped is refused (the group is
//!   unrecoverable, the ARQ retransmits).
//!
//! A codec's own footprint is not reserved: about 10 KiB (the encoding matrix,
//! 1 KiB inline plus `n·k` bytes beyond, and the cache's table, which the library
//! allocates for 254 entries up front), at most [`MAX_CODECS`] of them per
//! encoder or decoder: a per-connection constant.

use super::budget::FecBudget;
use super::config::{MAX_DATA_SHARDS, MAX_PARITY_SHARDS};
use reed_solomon_erasure::galois_8::ReedSolomon;

/// Most codecs (group shapes) one encoder or decoder keeps.
pub const MAX_CODECS: usize = 8;
/// Most distinct missing-shard sets one codec rebuilds before it is replaced by
/// a fresh codec (dropping its cached decode matrices).
pub const MAX_DECODE_MATRICES: usize = 16;

/// Upper bound of the bytes one cached decode matrix of a `data`-shard codec
/// costs in `reed-solomon-erasure` 6: the `Arc<Matrix>` (a 1 KiB inline
/// `SmallVec`, `data²` bytes on the heap beyond 32 data shards), its LRU entry
/// and table slot, the key (8 bytes per missing shard) and allocator headers.
pub fn matrix_cost(data: u8, parity: u8) -> usize {
    let (k, n) = (usize::from(data), usize::from(data) + usize::from(parity));
    1536 + k * k + 8 * n
}

#[derive(Debug)]
struct Slot {
    data: u8,
    parity: u8,
    codec: ReedSolomon,
    /// Missing-shard sets (bit i = shard i missing) whose decode matrix the
    /// codec has cached, each reserved in the budget.
    matrices: Vec<u128>,
}

/// Why a reconstruction did not run.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Refused {
    /// The shape is outside the crate limits, or the library rejected the shards.
    Codec,
    /// The decode matrix did not fit the FEC budget.
    Budget,
}

/// The codecs of one encoder or decoder (see the module docs for the bounds).
#[derive(Debug)]
pub(crate) struct Codecs {
    /// Least recently used first.
    slots: Vec<Slot>,
    budget: FecBudget,
    /// Bytes reserved in `budget` for cached decode matrices.
    charged: usize,
}

impl Codecs {
    pub fn new(budget: FecBudget) -> Self {
        Codecs {
            slots: Vec::with_capacity(MAX_CODECS),
            budget,
            charged: 0,
        }
    }

    /// Bytes reserved now for cached decode matrices.
    pub fn charged(&self) -> usize {
        self.charged
    }

    /// The slot of `data + parity`, built if needed and moved to the most
    /// recently used end; `None` if the shape is out of range.
    fn slot(&mut self, data: u8, parity: u8) -> Option<&mut Slot> {
        if data == 0 || parity == 0 || data > MAX_DATA_SHARDS || parity > MAX_PARITY_SHARDS {
            return None;
        }
        match self
            .slots
            .iter()
            .position(|s| (s.data, s.parity) == (data, parity))
        {
            Some(i) => {
                let s = self.slots.remove(i);
                self.slots.push(s);
            }
            None => {
                let codec = ReedSolomon::new(usize::from(data), usize::from(parity)).ok()?;
                if self.slots.len() >= MAX_CODECS {
                    let old = self.slots.remove(0);
                    self.release(&old);
                }
                self.slots.push(Slot {
                    data,
                    parity,
                    codec,
                    matrices: Vec::with_capacity(MAX_DECODE_MATRICES),
                });
            }
        }
        self.slots.last_mut()
    }

    fn release(&mut self, slot: &Slot) {
        let bytes = slot.matrices.len() * matrix_cost(slot.data, slot.parity);
        self.budget.release(bytes);
        self.charged -= bytes;
    }

    /// Computes the `parity` shards of `data` equal-length shards.
    pub fn encode(&mut self, data: &[Vec<u8>], parity: &mut [Vec<u8>]) -> bool {
        // Both counts come from slices the encoder bounds by the crate limits.
        let (k, p) = (data.len() as u8, parity.len() as u8);
        self.slot(k, p)
            .is_some_and(|s| s.codec.encode_sep(data, parity).is_ok())
    }

    /// Rebuilds the missing data shards of `set` (`(shard, present)` per index,
    /// equal lengths) for the shape `data + parity`.
    pub fn reconstruct_data(
        &mut self,
        data: u8,
        parity: u8,
        set: &mut [(Vec<u8>, bool)],
    ) -> Result<(), Refused> {
        let missing = set
            .iter()
            .enumerate()
            .filter(|(_, (_, present))| !present)
            .fold(0u128, |m, (i, _)| m | 1 << i);
        let cost = matrix_cost(data, parity);
        let known = self
            .slot(data, parity)
            .ok_or(Refused::Codec)?
            .matrices
            .contains(&missing);
        if !known {
            let full = self
                .slots
                .last()
                .is_some_and(|s| s.matrices.len() >= MAX_DECODE_MATRICES);
            if full || !self.budget.try_reserve(cost) {
                // A fresh codec has an empty cache: return what this one holds.
                let slot = self.slots.pop().ok_or(Refused::Codec)?;
                self.release(&slot);
                let codec = ReedSolomon::new(usize::from(data), usize::from(parity))
                    .map_err(|_| Refused::Codec)?;
                self.slots.push(Slot {
                    data,
                    parity,
                    codec,
                    matrices: Vec::with_capacity(MAX_DECODE_MATRICES),
                });
                if !self.budget.try_reserve(cost) {
                    return Err(Refused::Budget);
                }
            }
            self.charged += cost;
            if let Some(slot) = self.slots.last_mut() {
                slot.matrices.push(missing);
            }
        }
        let slot = self.slots.last().ok_or(Refused::Codec)?;
        slot.codec.reconstruct_data(set).map_err(|_| Refused::Codec)
    }
}

impl Drop for Codecs {
    /// Returns the decode matrices' reservation to the shared budget.
    fn drop(&mut self) {
        self.budget.release(self.charged);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn set(k: usize, p: usize, missing: &[usize]) -> Vec<(Vec<u8>, bool)> {
        let mut shards: Vec<Vec<u8>> = (0..k + p).map(|i| vec![i as u8 + 1; 16]).collect();
        let codec = ReedSolomon::new(k, p).unwrap();
        let (d, par) = shards.split_at_mut(k);
        codec.encode_sep(d, par).unwrap();
        shards
            .into_iter()
            .enumerate()
            .map(|(i, s)| {
                let present = !missing.contains(&i);
                (if present { s } else { vec![0; 16] }, present)
            })
            .collect()
    }

    #[test]
    fn codecs_and_matrices_are_bounded_and_charged() {
        let budget = FecBudget::new(1 << 20);
        let mut c = Codecs::new(budget.clone());
        // Every shape once: at most MAX_CODECS kept.
        for (k, p) in (1..=8u8).flat_map(|k| (1..=4u8).map(move |p| (k, p))) {
            let mut s = set(usize::from(k), usize::from(p), &[0]);
            c.reconstruct_data(k, p, &mut s).unwrap();
            assert!(c.slots.len() <= MAX_CODECS);
            assert_eq!(c.charged(), budget.current());
        }
        // Every missing set of one shape: at most MAX_DECODE_MATRICES charged.
        let mut s = set(8, 4, &[]);
        for m in 1u32..1 << 12 {
            let missing: Vec<usize> = (0..12).filter(|i| m & 1 << i != 0).collect();
            if missing.len() > 4 || !missing.iter().any(|&i| i < 8) {
                continue;
            }
            s.clone_from(&set(8, 4, &missing));
            c.reconstruct_data(8, 4, &mut s).unwrap();
            let whole = set(8, 4, &[]);
            for i in 0..8 {
                assert_eq!(s[i].0, whole[i].0, "missing {missing:?}");
            }
            let slot = c.slots.last().unwrap();
            assert!(slot.matrices.len() <= MAX_DECODE_MATRICES);
        }
        assert!(c.charged() <= MAX_CODECS * MAX_DECODE_MATRICES * matrix_cost(8, 4));
        assert_eq!(c.charged(), budget.current());
        drop(c);
        assert_eq!(budget.current(), 0);
    }

    #[test]
    fn a_full_budget_refuses_the_rebuild() {
        let budget = FecBudget::new(matrix_cost(4, 2) - 1);
        let mut c = Codecs::new(budget.clone());
        let mut s = set(4, 2, &[1]);
        assert_eq!(c.reconstruct_data(4, 2, &mut s), Err(Refused::Budget));
        assert_eq!((c.charged(), budget.current()), (0, 0));
        assert_eq!(
            c.reconstruct_data(65, 2, &mut s),
            Err(Refused::Codec),
            "out of the crate limits"
        );
    }
}
