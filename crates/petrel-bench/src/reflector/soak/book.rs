//! Which device received which frame: a ring of the rounds not yet tallied,
//! each a bit per (group, device), shared by the receive threads (which set
//! bits) and the speaker thread (which opens a round before sending it and
//! takes it once every datagram of it has had time to arrive).
//!
//! Bounded: `rounds` slots, reused in turn; a datagram of a round already
//! taken (or never opened) is counted as late instead of stored.

use std::sync::{Mutex, PoisonError};

/// What marking one received datagram did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Mark {
    /// First copy of this frame at this device.
    New,
    /// The device already had this frame.
    Duplicate,
    /// The round was already tallied, or is unknown.
    Late,
}

#[derive(Debug)]
struct Slot {
    round: Option<u64>,
    bits: Vec<u64>,
}

/// The receipt ring.
#[derive(Debug)]
pub(super) struct FrameBook {
    groups: usize,
    words: usize,
    slots: Vec<Mutex<Slot>>,
}

impl FrameBook {
    /// Room for `rounds` rounds in flight of `groups` frames to `devices` devices.
    pub(super) fn new(rounds: usize, groups: usize, devices: usize) -> Self {
        let words = devices.div_ceil(64);
        Self {
            groups,
            words,
            slots: (0..rounds.max(1))
                .map(|_| {
                    Mutex::new(Slot {
                        round: None,
                        bits: vec![0; groups * words],
                    })
                })
                .collect(),
        }
    }

    fn slot(&self, round: u64) -> std::sync::MutexGuard<'_, Slot> {
        let i = (round % self.slots.len() as u64) as usize;
        self.slots[i].lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Starts recording `round`, forgetting whatever its slot held.
    pub(super) fn open(&self, round: u64) {
        let mut s = self.slot(round);
        s.round = Some(round);
        s.bits.fill(0);
    }

    /// Device `device` received group `group`'s frame of `round`.
    pub(super) fn mark(&self, round: u64, group: usize, device: usize) -> Mark {
        if group >= self.groups || device >= self.words * 64 {
            return Mark::Late;
        }
        let mut s = self.slot(round);
        if s.round != Some(round) {
            return Mark::Late;
        }
        let w = &mut s.bits[group * self.words + device / 64];
        let bit = 1u64 << (device % 64);
        if *w & bit != 0 {
            return Mark::Duplicate;
        }
        *w |= bit;
        Mark::New
    }

    /// Ends `round`: copies who received group `group`'s frame into `out`
    /// for each group in turn (`out[group]`), and closes the slot. `false`
    /// if the slot no longer holds `round`.
    pub(super) fn take(&self, round: u64, out: &mut Vec<Vec<u64>>) -> bool {
        let mut s = self.slot(round);
        if s.round != Some(round) {
            return false;
        }
        out.clear();
        out.extend(s.bits.chunks(self.words).map(<[u64]>::to_vec));
        s.round = None;
        true
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn marks_once_then_duplicate_then_late() {
        let book = FrameBook::new(4, 2, 130);
        book.open(9);
        assert_eq!(book.mark(9, 1, 129), Mark::New);
        assert_eq!(book.mark(9, 1, 129), Mark::Duplicate);
        assert_eq!(book.mark(9, 0, 3), Mark::New);
        // Round 5 shares the slot of 9 but is not open.
        assert_eq!(book.mark(5, 0, 3), Mark::Late);
        assert_eq!(book.mark(9, 2, 3), Mark::Late);
        let mut out = Vec::new();
        assert!(book.take(9, &mut out));
        assert_eq!(out.len(), 2);
        assert_eq!(out[0], vec![1 << 3, 0, 0]);
        assert_eq!(out[1], vec![0, 0, 1 << 1]);
        assert_eq!(book.mark(9, 0, 4), Mark::Late);
        assert!(!book.take(9, &mut out));
        // Reopening the slot for a later round starts from nothing.
        book.open(13);
        assert!(book.take(13, &mut out));
        assert!(out.iter().flatten().all(|&w| w == 0));
    }
}
