//! kcp-go framing carries no group shape: the check that the peer's shape is
//! ours before any rebuilt datagram reaches the ARQ.
//!
//! In kcp-go framing (spec `kcp.md` §2, kcp-go `fec.go`) a shard says only
//! `seqid` and whether it is data (`0xF1`) or parity (`0xF2`); both ends derive
//! the group as `seqid / (data + parity)` and the index as `seqid % (data +
//! parity)` from their *own* configuration. A peer configured with another shape
//! (kcptun report #809: 10+3 against 4+2) therefore makes a decoder mix shards of
//! different groups into one Reed–Solomon codeword. The rebuilt "datagram" keeps
//! every byte that is equal across the mixed shards (conv, command, length, the
//! high bytes of `sn`), so it passes KCP's parsing, and KCP has no checksum: the
//! application would get corrupted bytes. A consistent-looking single group is no
//! evidence either (10+3 against 4+2: seqids 6–11 read as a valid 4+2 group).
//!
//! # The rule
//!
//! Every shard is checked against our pattern: data iff `seqid % (d + p) < d`.
//!
//! - **Confirmation.** Rebuilding is enabled once the decoder has seen, at seqids
//!   all agreeing with our pattern, a *complete data run* — `d` data shards at
//!   consecutive seqids with a parity shard right before and right after — and a
//!   *complete parity run* — `p` parity shards at consecutive seqids between two
//!   data shards. The two runs need not be adjacent.
//! - **Mismatch.** The first shard whose flag contradicts our pattern switches
//!   rebuilding off for good: incomplete groups are dropped without rebuilding,
//!   later parity is dropped (counted), data shards are still handed up (they are
//!   the peer's real datagrams), and the mismatch becomes an error naming both
//!   shapes, the peer's inferred from the next complete data and parity runs it
//!   sends, or after [`SHAPE_REPORT_DELAY`] with the unknown parts left open.
//!
//! # Why confirmation proves the shape
//!
//! Assumption: the peer's encoder has one fixed shape `d' + p'` and numbers its
//! shards so that the shard it sends as `seqid` s is data iff `(s − φ) mod (d' +
//! p') < d'` for a fixed phase φ (kcp-go: φ = 0, `next` starts at 0 and wraps at
//! `paws`, a multiple of the group size; skipped parity leaves its seqids unsent,
//! it does not shift later ones). Then every maximal run of data shards at
//! consecutive seqids that is bounded by parity on both sides has exactly `d'`
//! elements, and every bounded parity run exactly `p'`: the bounds prove the run
//! spans one whole data (parity) section of the peer's group. Observing a bounded
//! data run of `d` and a bounded parity run of `p` therefore gives `d' = d` and
//! `p' = p`; the data run starts at a seqid ≡ 0 mod (d + p) (it agrees with our
//! pattern), so φ ≡ 0 as well, and the peer's pattern is ours at every seqid.
//! No bound on the peer's shape is needed, unlike a window argument (periodic
//! sequences of periods T and T′ agreeing on T + T′ − gcd positions, Fine–Wilf),
//! which would need the largest shape a peer may use; and nothing is inferred
//! from reordered or missing seqids, which only delay confirmation. Under loss q
//! a group yields a complete data run with probability (1 − q)^(d + 2), so
//! shapes up to 20+5 confirm within a few dozen groups at 10 % loss; until then
//! the ARQ retransmits what FEC would have rebuilt.
//!
//! The check needs no `now` except for the report delay, and its memory is a few
//! integers per decoder.

use std::fmt;
use std::time::{Duration, Instant};

/// How long after the first contradicting shard the mismatch is reported even if
/// the peer's shape could not be inferred (its parity may be skipped, or lost).
pub const SHAPE_REPORT_DELAY: Duration = Duration::from_secs(1);

/// Where a kcp-go decoder stands on the peer's group shape.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ShapeCheck {
    /// No contradiction yet, not yet proven: data shards are handed up, shards
    /// are kept, nothing is rebuilt.
    Unconfirmed,
    /// The peer's shape is proven to be ours (native framing: always, the shape
    /// is on the wire): lost data shards are rebuilt.
    Confirmed,
    /// A shard contradicted our shape: nothing is ever rebuilt again.
    Mismatch,
}

/// The peer sends a kcp-go FEC shape other than ours; the connection cannot use
/// FEC and is ended with this error.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub struct ShapeMismatch {
    /// Our `(data_shards, parity_shards)`.
    pub ours: (u8, u8),
    /// The peer's data shards per group, from a complete run of its data shards;
    /// `None` if none was seen.
    pub peer_data_shards: Option<u32>,
    /// The peer's parity shards per group, from a complete run of its parity
    /// shards; `None` if none was seen (e.g. kcp-go skips parity of sparse traffic).
    pub peer_parity_shards: Option<u32>,
}

impl fmt::Display for ShapeMismatch {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let part = |n: Option<u32>| n.map_or_else(|| "?".to_owned(), |n| n.to_string());
        write!(
            f,
            "fec shape mismatch: we speak {}+{} (data+parity shards), the peer sends {}+{}",
            self.ours.0,
            self.ours.1,
            part(self.peer_data_shards),
            part(self.peer_parity_shards)
        )
    }
}

/// What one shard told the [`ShapeGuard`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Observed {
    /// Agrees with our shape; nothing changed.
    Agrees,
    /// Agrees, and completes the proof: rebuilding may start.
    Confirmed,
    /// Contradicts our shape (first or later contradiction).
    Contradicts,
}

/// The per-decoder state of the rule in the module docs.
#[derive(Debug)]
pub(crate) struct ShapeGuard {
    data_shards: u8,
    parity_shards: u8,
    state: ShapeCheck,
    /// `seqid` and kind (data?) of the previous shard, in arrival order.
    last: Option<(u32, bool)>,
    /// Shards of the current run: one kind at consecutive seqids.
    run: u32,
    /// Whether the current run began right after a shard of the other kind.
    run_bounded: bool,
    /// Length of the latest complete data / parity run (since the mismatch,
    /// once there is one).
    data_run: Option<u32>,
    parity_run: Option<u32>,
    /// First contradiction.
    mismatch_at: Option<Instant>,
    /// The mismatch is final: reported by [`ShapeGuard::mismatch`].
    reported: bool,
}

impl ShapeGuard {
    pub fn new(data_shards: u8, parity_shards: u8) -> Self {
        ShapeGuard {
            data_shards,
            parity_shards,
            state: ShapeCheck::Unconfirmed,
            last: None,
            run: 0,
            run_bounded: false,
            data_run: None,
            parity_run: None,
            mismatch_at: None,
            reported: false,
        }
    }

    pub fn state(&self) -> ShapeCheck {
        self.state
    }

    /// Records the shard `seq` (data or parity) that arrived at `now`.
    pub fn observe(&mut self, now: Instant, seq: u32, is_data: bool) -> Observed {
        let n = u32::from(self.data_shards) + u32::from(self.parity_shards);
        let agrees = (seq % n < u32::from(self.data_shards)) == is_data;
        match self.last {
            Some((prev, prev_data)) if seq == prev.wrapping_add(1) => {
                if prev_data == is_data {
                    self.run = self.run.saturating_add(1);
                } else {
                    if self.run_bounded {
                        let done = if prev_data {
                            &mut self.data_run
                        } else {
                            &mut self.parity_run
                        };
                        *done = Some(self.run);
                    }
                    self.run = 1;
                    self.run_bounded = true;
                }
            }
            _ => {
                self.run = 1;
                self.run_bounded = false;
            }
        }
        self.last = Some((seq, is_data));
        if !agrees && self.state != ShapeCheck::Mismatch {
            self.state = ShapeCheck::Mismatch;
            self.mismatch_at = Some(now);
            // Infer the peer's shape from what it sends from now on.
            (self.data_run, self.parity_run) = (None, None);
        }
        match self.state {
            ShapeCheck::Mismatch => {
                if self.data_run.is_some() && self.parity_run.is_some() {
                    self.reported = true;
                }
                if agrees {
                    Observed::Agrees
                } else {
                    Observed::Contradicts
                }
            }
            ShapeCheck::Unconfirmed
                if self.data_run == Some(u32::from(self.data_shards))
                    && self.parity_run == Some(u32::from(self.parity_shards)) =>
            {
                self.state = ShapeCheck::Confirmed;
                Observed::Confirmed
            }
            ShapeCheck::Unconfirmed | ShapeCheck::Confirmed => Observed::Agrees,
        }
    }

    /// When an unreported mismatch must be reported without the peer's shape.
    pub fn poll_timeout(&self) -> Option<Instant> {
        match (self.reported, self.mismatch_at) {
            (false, Some(t)) => Some(t + SHAPE_REPORT_DELAY),
            _ => None,
        }
    }

    pub fn handle_timeout(&mut self, now: Instant) {
        if self.poll_timeout().is_some_and(|t| now >= t) {
            self.reported = true;
        }
    }

    /// The mismatch, once final.
    pub fn mismatch(&self) -> Option<ShapeMismatch> {
        self.reported.then_some(ShapeMismatch {
            ours: (self.data_shards, self.parity_shards),
            peer_data_shards: self.data_run,
            peer_parity_shards: self.parity_run,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The flags a kcp-go encoder of shape `d + p` sends for seqids `range`.
    fn feed(g: &mut ShapeGuard, now: Instant, d: u32, p: u32, seqs: impl Iterator<Item = u32>) {
        for s in seqs {
            g.observe(now, s, s % (d + p) < d);
        }
    }

    #[test]
    fn same_shape_confirms_after_one_data_and_one_parity_run() {
        let now = Instant::now();
        let mut g = ShapeGuard::new(4, 2);
        // 0..=5 is a whole group, but its data run is not bounded before seqid 0;
        // seqid 6 closes the parity run 4..=5.
        feed(&mut g, now, 4, 2, 0..7);
        assert_eq!(g.state(), ShapeCheck::Unconfirmed);
        feed(&mut g, now, 4, 2, 7..10);
        assert_eq!(g.state(), ShapeCheck::Unconfirmed);
        // seqid 10 closes the data run 6..=9.
        assert_eq!(g.observe(now, 10, false), Observed::Confirmed);
        assert_eq!(g.state(), ShapeCheck::Confirmed);
        assert_eq!(g.poll_timeout(), None);
    }

    #[test]
    fn gaps_and_reordering_never_complete_a_run() {
        let now = Instant::now();
        let mut g = ShapeGuard::new(4, 2);
        // Every group loses one data shard: no complete data run ever.
        for group in 0..100u32 {
            let b = group * 6;
            feed(
                &mut g,
                now,
                4,
                2,
                [b, b + 1, b + 3, b + 4, b + 5].into_iter(),
            );
        }
        assert_eq!(g.state(), ShapeCheck::Unconfirmed);
        // Parity before its data (reordered): no run spans the swap.
        let mut g = ShapeGuard::new(4, 2);
        feed(
            &mut g,
            now,
            4,
            2,
            [5, 4, 6, 7, 8, 9, 11, 10, 12].into_iter(),
        );
        assert_eq!(g.state(), ShapeCheck::Unconfirmed);
    }

    #[test]
    fn ten_three_against_four_two_is_a_mismatch_naming_both() {
        let t0 = Instant::now();
        let mut g = ShapeGuard::new(4, 2);
        // Seqids 6..=11 of a 10+3 peer read as a valid 4+2 group.
        feed(&mut g, t0, 10, 3, 6..12);
        assert_eq!(g.state(), ShapeCheck::Unconfirmed);
        assert_eq!(g.observe(t0, 12, false), Observed::Contradicts);
        assert_eq!(g.state(), ShapeCheck::Mismatch);
        assert_eq!(g.mismatch(), None);
        feed(&mut g, t0, 10, 3, 13..40);
        let m = g.mismatch().unwrap();
        assert_eq!(
            (m.ours, m.peer_data_shards, m.peer_parity_shards),
            ((4, 2), Some(10), Some(3))
        );
        assert_eq!(
            m.to_string(),
            "fec shape mismatch: we speak 4+2 (data+parity shards), the peer sends 10+3"
        );
    }

    #[test]
    fn an_uninferable_mismatch_is_reported_after_the_delay() {
        let t0 = Instant::now();
        let mut g = ShapeGuard::new(4, 2);
        // A 9+4 peer whose parity is lost: data runs are never bounded.
        g.observe(t0, 4, true);
        assert_eq!(g.state(), ShapeCheck::Mismatch);
        assert_eq!(g.poll_timeout(), Some(t0 + SHAPE_REPORT_DELAY));
        g.handle_timeout(t0 + SHAPE_REPORT_DELAY - Duration::from_millis(1));
        assert_eq!(g.mismatch(), None);
        g.handle_timeout(t0 + SHAPE_REPORT_DELAY);
        let m = g.mismatch().unwrap();
        assert_eq!((m.peer_data_shards, m.peer_parity_shards), (None, None));
        assert!(m.to_string().ends_with("the peer sends ?+?"), "{m}");
        assert_eq!(g.poll_timeout(), None);
    }

    /// Exhaustive over small shapes and every window of a peer's seqids: the
    /// guard confirms only the peer's own shape, and a window of three groups of
    /// the same shape always confirms it.
    #[test]
    fn confirmation_only_for_the_same_shape() {
        let now = Instant::now();
        for (d, p) in (1..=6u32).flat_map(|d| (1..=6u32).map(move |p| (d, p))) {
            for (dp, pp) in (1..=8u32).flat_map(|d| (1..=8u32).map(move |p| (d, p))) {
                let same = (d, p) == (dp, pp);
                for start in 0..(dp + pp) {
                    let mut g = ShapeGuard::new(d as u8, p as u8);
                    for s in start..start + 3 * (dp + pp) {
                        g.observe(now, s, s % (dp + pp) < dp);
                        if g.state() == ShapeCheck::Confirmed {
                            assert!(same, "{d}+{p} confirmed a {dp}+{pp} peer from {start}");
                        }
                    }
                    if same {
                        assert_eq!(g.state(), ShapeCheck::Confirmed, "{d}+{p} from {start}");
                    } else {
                        assert_eq!(g.state(), ShapeCheck::Mismatch, "{d}+{p} vs {dp}+{pp}");
                    }
                }
            }
        }
    }
}
