//! How many receivers on each node got each frame of a stage: one counter
//! per (node, group, measured round), bumped by the receive threads, and one
//! flag per (group, round) set when the speaker's send succeeded. From them,
//! per node, the frames no receiver on that node got (whole-frame misses,
//! what a node's dropped or evicted frame costs) and the datagrams missing
//! from frames the node did deliver to some (partial misses, what a socket
//! drop or a failed send costs). [`super::loss_attribution`] matches these
//! with the nodes' counters.
//!
//! Bounded: at most [`MAX_CELLS`] counters; a receipt for a round or row
//! out of range is ignored (and counted in [`FrameReceipts::out_of_range`]).

use std::sync::atomic::{AtomicBool, AtomicU32, AtomicU64, Ordering::Relaxed};

use serde::{Deserialize, Serialize};

use super::LoadError;

/// Most (node, group, round) counters one stage may hold (64 MiB).
pub const MAX_CELLS: usize = 1 << 24;

/// Receipt counters of one stage.
#[derive(Debug)]
pub struct FrameReceipts {
    nodes: usize,
    groups: usize,
    /// The round number of the first measured round.
    first_round: u64,
    rounds: usize,
    /// `[row][round]`, row = node × groups + group.
    counts: Vec<AtomicU32>,
    /// `[group][round]`.
    sent: Vec<AtomicBool>,
    out_of_range: AtomicU64,
}

/// The dimensions of a stage's receipts, so a load-generator process can
/// keep its own with the same rows and rounds ([`FrameReceipts::from_shape`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct ReceiptShape {
    /// Receiving nodes.
    pub nodes: usize,
    /// Groups.
    pub groups: usize,
    /// Round number of the first measured round.
    pub first_round: u64,
    /// Measured rounds.
    pub rounds: usize,
}

/// Every counter of one process's receipts, to be added to the stage's
/// ([`FrameReceipts::absorb`]).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct ReceiptSnapshot {
    /// `[row][round]` receipt counts.
    pub counts: Vec<u32>,
    /// `[group][round]`: the speaker's send succeeded.
    pub sent: Vec<bool>,
    /// Receipts and sends out of range.
    pub out_of_range: u64,
}

/// What the receivers on one node missed.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct NodeMisses {
    /// Sent frames no receiver on the node got (only frames of groups with
    /// receivers there).
    pub whole_frames: u64,
    /// The datagrams those frames owed the node's receivers.
    pub whole_datagrams: u64,
    /// Datagrams missing from frames some receivers on the node got.
    pub partial_datagrams: u64,
}

impl NodeMisses {
    /// Every datagram the node's receivers missed.
    pub fn datagrams(&self) -> u64 {
        self.whole_datagrams + self.partial_datagrams
    }
}

impl FrameReceipts {
    /// Counters for `nodes` nodes, `groups` groups and the `rounds`
    /// measured rounds numbered from `first_round` (the round number the
    /// voice payload carries).
    ///
    /// # Errors
    /// [`LoadError::Invalid`] when that is more than [`MAX_CELLS`] counters.
    pub fn new(
        nodes: usize,
        groups: usize,
        first_round: u64,
        rounds: usize,
    ) -> Result<Self, LoadError> {
        let cells = nodes
            .checked_mul(groups)
            .and_then(|r| r.checked_mul(rounds))
            .filter(|&c| c <= MAX_CELLS)
            .ok_or_else(|| {
                LoadError::Invalid(format!(
                    "{nodes} nodes × {groups} groups × {rounds} rounds is more than {MAX_CELLS} frame receipts: shorten the stage or slow the interval"
                ))
            })?;
        Ok(Self {
            nodes,
            groups,
            first_round,
            rounds,
            counts: (0..cells).map(|_| AtomicU32::new(0)).collect(),
            sent: (0..groups * rounds)
                .map(|_| AtomicBool::new(false))
                .collect(),
            out_of_range: AtomicU64::new(0),
        })
    }

    /// Receipts of the same dimensions as `shape`.
    ///
    /// # Errors
    /// As [`FrameReceipts::new`].
    pub fn from_shape(shape: ReceiptShape) -> Result<Self, LoadError> {
        Self::new(shape.nodes, shape.groups, shape.first_round, shape.rounds)
    }

    /// The dimensions of these receipts.
    pub fn shape(&self) -> ReceiptShape {
        ReceiptShape {
            nodes: self.nodes,
            groups: self.groups,
            first_round: self.first_round,
            rounds: self.rounds,
        }
    }

    /// A copy of every counter.
    pub fn snapshot(&self) -> ReceiptSnapshot {
        ReceiptSnapshot {
            counts: self.counts.iter().map(|c| c.load(Relaxed)).collect(),
            sent: self.sent.iter().map(|s| s.load(Relaxed)).collect(),
            out_of_range: self.out_of_range(),
        }
    }

    /// Adds another process's counters (receipts of the same shape): counts
    /// add up, a frame counts as sent when either side sent it.
    ///
    /// # Errors
    /// [`LoadError::Invalid`] when `other` has another number of counters.
    pub fn absorb(&self, other: &ReceiptSnapshot) -> Result<(), LoadError> {
        if other.counts.len() != self.counts.len() || other.sent.len() != self.sent.len() {
            return Err(LoadError::Invalid(format!(
                "receipts of {} counters and {} send flags do not match the stage's {} and {}",
                other.counts.len(),
                other.sent.len(),
                self.counts.len(),
                self.sent.len()
            )));
        }
        for (mine, &n) in self.counts.iter().zip(&other.counts) {
            mine.fetch_add(n, Relaxed);
        }
        for (mine, &s) in self.sent.iter().zip(&other.sent) {
            if s {
                mine.store(true, Relaxed);
            }
        }
        self.out_of_range.fetch_add(other.out_of_range, Relaxed);
        Ok(())
    }

    /// The row of the receivers on `node` in `group`.
    pub fn row(&self, node: usize, group: usize) -> usize {
        node * self.groups + group
    }

    /// A receiver in `row` got the frame of measured round `round`.
    pub fn mark(&self, row: usize, round: u64) {
        match self.index(round).and_then(|i| self.cell(row, i)) {
            Some(c) => {
                c.fetch_add(1, Relaxed);
            }
            None => {
                self.out_of_range.fetch_add(1, Relaxed);
            }
        }
    }

    /// The speaker of `group` sent its frame of measured round `round`.
    pub fn mark_sent(&self, group: usize, round: u64) {
        match self.index(round).filter(|_| group < self.groups) {
            Some(r) => self.sent[group * self.rounds + r].store(true, Relaxed),
            None => {
                self.out_of_range.fetch_add(1, Relaxed);
            }
        }
    }

    /// Receipts and sends that named a row or round out of range.
    pub fn out_of_range(&self) -> u64 {
        self.out_of_range.load(Relaxed)
    }

    /// The index of round number `round` among the measured rounds.
    fn index(&self, round: u64) -> Option<usize> {
        let r = usize::try_from(round.checked_sub(self.first_round)?).ok()?;
        (r < self.rounds).then_some(r)
    }

    fn cell(&self, row: usize, index: usize) -> Option<&AtomicU32> {
        if index >= self.rounds {
            return None;
        }
        self.counts
            .get(row.checked_mul(self.rounds)?.checked_add(index)?)
    }

    /// What the receivers of each node missed, given `receivers[node][group]`
    /// (receivers per node and group, speakers excluded); one entry per node
    /// of `receivers`. A frame received more often than it had receivers
    /// (duplicates) counts as fully received.
    pub fn misses(&self, receivers: &[Vec<u64>]) -> Vec<NodeMisses> {
        receivers
            .iter()
            .enumerate()
            .map(|(node, per_group)| {
                let mut m = NodeMisses::default();
                for (group, &owed) in per_group.iter().enumerate().take(self.groups) {
                    if owed == 0 {
                        continue;
                    }
                    for round in 0..self.rounds {
                        if !self.sent[group * self.rounds + round].load(Relaxed) {
                            continue;
                        }
                        let got = self
                            .cell(self.row(node, group), round)
                            .map_or(0, |c| u64::from(c.load(Relaxed)));
                        if got == 0 {
                            m.whole_frames += 1;
                            m.whole_datagrams += owed;
                        } else {
                            m.partial_datagrams += owed.saturating_sub(got);
                        }
                    }
                }
                m
            })
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn whole_and_partial_misses_per_node() {
        // 2 nodes, 2 groups, 3 rounds; node 0 has 2 receivers of group 0,
        // node 1 has 3 of group 0 and 1 of group 1.
        // Measured rounds are numbered 8, 9, 10 (after 8 warm-up rounds).
        let r = FrameReceipts::new(2, 2, 8, 3).unwrap();
        let receivers = vec![vec![2, 0], vec![3, 1]];
        for round in 8..11 {
            r.mark_sent(0, round);
        }
        // Group 1's round 10 was never sent: nothing is owed for it.
        r.mark_sent(1, 8);
        r.mark_sent(1, 9);
        // Node 0: round 8 complete, round 9 one of two, round 10 none.
        r.mark(r.row(0, 0), 8);
        r.mark(r.row(0, 0), 8);
        r.mark(r.row(0, 0), 9);
        // Node 1, group 0: rounds 8 and 9 complete (9 with a duplicate),
        // round 10 none; group 1: round 8 received, round 9 not.
        for round in [8, 8, 8, 9, 9, 9, 9] {
            r.mark(r.row(1, 0), round);
        }
        r.mark(r.row(1, 1), 8);
        let m = r.misses(&receivers);
        assert_eq!(
            m[0],
            NodeMisses {
                whole_frames: 1,
                whole_datagrams: 2,
                partial_datagrams: 1
            }
        );
        assert_eq!(
            m[1],
            NodeMisses {
                whole_frames: 2,
                whole_datagrams: 4,
                partial_datagrams: 0
            }
        );
        assert_eq!(m[1].datagrams(), 4);
        assert_eq!(r.out_of_range(), 0);
        r.mark(r.row(1, 1), 11);
        r.mark(r.row(1, 1), 7);
        r.mark(99, 8);
        r.mark_sent(2, 8);
        assert_eq!(r.out_of_range(), 4);
    }

    #[test]
    fn receipts_kept_in_two_processes_add_up_to_one() {
        // One node, one group, 2 rounds, 4 receivers split 3 + 1.
        let whole = FrameReceipts::new(1, 1, 8, 2).unwrap();
        let a = FrameReceipts::from_shape(whole.shape()).unwrap();
        let b = FrameReceipts::from_shape(whole.shape()).unwrap();
        a.mark_sent(0, 8);
        a.mark_sent(0, 9);
        for _ in 0..3 {
            a.mark(0, 8);
        }
        b.mark(0, 8);
        b.mark(0, 9);
        b.mark(0, 12);
        whole.absorb(&a.snapshot()).unwrap();
        whole.absorb(&b.snapshot()).unwrap();
        let m = whole.misses(&[vec![4]]);
        // Round 8 complete (3 + 1), round 9 one of four.
        assert_eq!(
            m[0],
            NodeMisses {
                whole_frames: 0,
                whole_datagrams: 0,
                partial_datagrams: 3
            }
        );
        assert_eq!(whole.out_of_range(), 1);
        let other = FrameReceipts::new(2, 1, 8, 2).unwrap();
        assert!(whole.absorb(&other.snapshot()).is_err());
    }

    #[test]
    fn refuses_more_than_the_cell_budget() {
        assert!(FrameReceipts::new(4, 1024, 8, 60_000).is_err());
        assert!(FrameReceipts::new(usize::MAX, 2, 8, 2).is_err());
        assert!(FrameReceipts::new(4, 5, 8, 5_000).is_ok());
    }
}
