//! Every missing datagram of a stage matched with a node's counter
//! (issue 15 item 6, "every missing datagram is attributed to a node's
//! counter"; draarl-interconnect §9 explains the reference soak's loss the
//! same way: "whole frames evicted by the edges' fan-out queues").
//!
//! The receipts ([`super::receipts`]) say, per receiving node, how many
//! frames none of its receivers got (whole-frame misses) and how many
//! datagrams were missing from frames it did deliver (partial misses). The
//! counters say what each node dropped over the stage. They are matched in
//! this order, each counter used at most once:
//!
//! 1. A receiving node's own frame drops (fan-out evictions and expiries,
//!    interconnect drops of arriving relays) explain its whole-frame misses,
//!    one frame each; its own failed sends explain its partial misses, one
//!    datagram each.
//! 2. Frames dropped upstream — by a node without receivers (the centre),
//!    or a receiving node's frame drops left over from step 1 (the speaker's
//!    own edge dropping the frame before its upstream copy) — explain the
//!    remaining whole-frame misses: one such drop can cost every receiving
//!    node that frame, so the pool is not used up across nodes.
//! 3. The host's UDP receive-buffer drops (`RcvbufErrors`, one datagram
//!    each) explain the remaining partial misses first (a receiver's socket
//!    overflowed), then remaining whole-frame misses (a node's socket dropped
//!    the frame).
//!
//! A whole-frame miss explained in part is charged at the node's average
//! datagrams per missed frame. What is left is `unattributed`.

use super::receipts::NodeMisses;
use crate::record::reflector_cluster::LossAttribution;

/// What one node's counters say it dropped over a stage.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct NodeDrops {
    /// Voice frames dropped whole (each costs all the node's receivers of it).
    pub frames: u64,
    /// Single datagrams that were not sent (failed sends to one receiver).
    pub datagrams: u64,
}

/// Matches `missing` (expected − received) with the counters. `misses` and
/// `own` are per receiving node, in the same order; `upstream_frames` are
/// the frame drops of the nodes without receivers; `socket_drops` the host's
/// `RcvbufErrors` over the stage. Returns the totals and, per node of
/// `misses`, the datagrams its own counters explain.
pub fn attribute(
    missing: u64,
    misses: &[NodeMisses],
    own: &[NodeDrops],
    upstream_frames: u64,
    socket_drops: u64,
) -> (LossAttribution, Vec<u64>) {
    let mut rest: Vec<NodeMisses> = misses.to_vec();
    let mut by_node = vec![0u64; misses.len()];
    let mut pool = upstream_frames;
    for ((m, drops), charged) in rest.iter_mut().zip(own).zip(&mut by_node) {
        let frames = m.whole_frames.min(drops.frames);
        let datagrams = take_frames(m, frames);
        let partial = m.partial_datagrams.min(drops.datagrams);
        m.partial_datagrams -= partial;
        *charged = datagrams + partial;
        pool += drops.frames - frames;
    }
    let mut upstream = 0;
    for m in &mut rest {
        let frames = m.whole_frames.min(pool);
        upstream += take_frames(m, frames);
    }
    let mut sockets_left = socket_drops;
    let mut socket = 0;
    for m in &mut rest {
        let d = m.partial_datagrams.min(sockets_left);
        m.partial_datagrams -= d;
        sockets_left -= d;
        socket += d;
    }
    for m in &mut rest {
        let frames = m.whole_frames.min(sockets_left);
        sockets_left -= frames;
        socket += take_frames(m, frames);
    }
    let attributed = by_node.iter().sum::<u64>() + upstream + socket;
    let totals = LossAttribution {
        missing,
        node_counters: by_node.iter().sum(),
        upstream_drops: upstream,
        socket_drops: socket,
        unattributed: missing.saturating_sub(attributed),
    };
    (totals, by_node)
}

/// Removes `frames` of `m`'s whole-frame misses; the datagrams they owed
/// (all of them when every missed frame goes, else the average share).
fn take_frames(m: &mut NodeMisses, frames: u64) -> u64 {
    if frames == 0 || m.whole_frames == 0 {
        return 0;
    }
    let datagrams = if frames >= m.whole_frames {
        m.whole_datagrams
    } else {
        let share = u128::from(m.whole_datagrams) * u128::from(frames) / u128::from(m.whole_frames);
        u64::try_from(share).unwrap_or(m.whole_datagrams)
    };
    m.whole_frames -= frames.min(m.whole_frames);
    m.whole_datagrams -= datagrams;
    datagrams
}

#[cfg(test)]
mod tests {
    use super::*;

    fn misses(whole_frames: u64, whole_datagrams: u64, partial_datagrams: u64) -> NodeMisses {
        NodeMisses {
            whole_frames,
            whole_datagrams,
            partial_datagrams,
        }
    }

    #[test]
    fn edge_evictions_explain_their_whole_frames() {
        // The reference soak: edge-b 5 frames × 2000, edge-c 2 × 1999.
        let m = [misses(0, 0, 0), misses(5, 10_000, 0), misses(2, 3_998, 0)];
        let own = [
            NodeDrops::default(),
            NodeDrops {
                frames: 5,
                datagrams: 0,
            },
            NodeDrops {
                frames: 2,
                datagrams: 0,
            },
        ];
        let (a, by_node) = attribute(13_998, &m, &own, 0, 0);
        assert_eq!(by_node, vec![0, 10_000, 3_998]);
        assert_eq!(a.node_counters, 13_998);
        assert_eq!(a.unattributed, 0);
    }

    #[test]
    fn unexplained_frames_stay_unattributed_and_partial_counts_are_prorated() {
        // 4 whole frames (1000 datagrams) on one node, 1 frame drop counted.
        let own = [NodeDrops {
            frames: 1,
            datagrams: 0,
        }];
        let (a, by_node) = attribute(1_000, &[misses(4, 1_000, 0)], &own, 0, 0);
        assert_eq!(by_node, vec![250]);
        assert_eq!(a.unattributed, 750);
    }

    #[test]
    fn upstream_drops_cost_every_receiving_node_their_frame() {
        // The centre dropped 2 frames: each target edge missed both.
        let m = [misses(2, 400, 0), misses(2, 398, 0)];
        let own = [NodeDrops::default(); 2];
        let (a, _) = attribute(798, &m, &own, 2, 0);
        assert_eq!(a.upstream_drops, 798);
        assert_eq!(a.node_counters, 0);
        assert_eq!(a.unattributed, 0);
        // A receiving node's unused frame drops join the upstream pool (the
        // speaker's own edge dropped the frame before its upstream copy).
        let m = [misses(0, 0, 0), misses(1, 200, 0), misses(1, 199, 0)];
        let own = [
            NodeDrops {
                frames: 1,
                datagrams: 0,
            },
            NodeDrops::default(),
            NodeDrops::default(),
        ];
        let (a, _) = attribute(399, &m, &own, 0, 0);
        assert_eq!(a.upstream_drops, 399);
        assert_eq!(a.unattributed, 0);
    }

    #[test]
    fn socket_drops_go_to_partial_misses_first_then_whole_frames() {
        let m = [misses(1, 100, 3)];
        let (a, _) = attribute(103, &m, &[NodeDrops::default()], 0, 2);
        assert_eq!(a.socket_drops, 2);
        assert_eq!(a.unattributed, 101);
        let (a, _) = attribute(103, &m, &[NodeDrops::default()], 0, 4);
        // Three partial datagrams, then one socket drop = one whole frame.
        assert_eq!(a.socket_drops, 103);
        assert_eq!(a.unattributed, 0);
        // Failed sends of the node itself explain partial misses before sockets.
        let own = [NodeDrops {
            frames: 0,
            datagrams: 3,
        }];
        let (a, by_node) = attribute(103, &m, &own, 0, 0);
        assert_eq!(by_node, vec![3]);
        assert_eq!(a.unattributed, 100);
    }

    #[test]
    fn nothing_missing_nothing_attributed() {
        let own = [NodeDrops {
            frames: 9,
            datagrams: 9,
        }];
        let (a, _) = attribute(0, &[misses(0, 0, 0)], &own, 5, 5);
        assert_eq!(a.node_counters + a.upstream_drops + a.socket_drops, 0);
        assert_eq!(a.unattributed, 0);
    }
}
