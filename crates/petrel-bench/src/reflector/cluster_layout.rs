//! Which edge each simulated device logs in through, after the reference
//! benchmark's layouts (draarl-interconnect §9): client `i` is in group
//! `i mod G`, clients `0..G` are the speakers, and its position in its group
//! is `p = i div G`. Edges are numbered from 0 here (the spec's edge 1 is
//! edge 0, `edge-a`).
//!
//! - [`Layout::Local`]: every client on edge 0 (edge-local fan-out; the
//!   upstream copy is still sent, no edge receives it back).
//! - [`Layout::Distributed`]: client on edge `p mod E` (speakers on edge 0;
//!   each group has local and remote receivers).
//! - [`Layout::Cross`]: the speaker (`p = 0`) on edge 0, the others on edge
//!   `1 + (p − 1) mod (E − 1)`: every receiver is on another edge than its
//!   speaker. Needs at least two edges.

use std::fmt;
use std::str::FromStr;

/// A client-to-edge layout (§9).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Layout {
    /// Every client on the first edge.
    Local,
    /// Client at position `p` on edge `p mod E`.
    Distributed,
    /// Speakers on the first edge, their receivers on the other edges.
    Cross,
}

impl Layout {
    /// Every layout, in the order the help text lists them.
    pub const ALL: [Self; 3] = [Self::Local, Self::Distributed, Self::Cross];

    /// The name on the command line and in the results.
    pub fn name(self) -> &'static str {
        match self {
            Self::Local => "local",
            Self::Distributed => "distributed",
            Self::Cross => "cross",
        }
    }

    /// The fewest edges the layout needs.
    pub fn min_edges(self) -> usize {
        match self {
            Self::Cross => 2,
            Self::Local | Self::Distributed => 1,
        }
    }

    /// The edge (0-based) of client `i` with `groups` groups on `edges`
    /// edges; `groups` and `edges` must be at least 1 (and `edges` at least
    /// [`Layout::min_edges`]).
    pub fn edge_of(self, i: usize, groups: usize, edges: usize) -> usize {
        let p = i / groups.max(1);
        match self {
            Self::Local => 0,
            Self::Distributed => p % edges.max(1),
            Self::Cross if p == 0 => 0,
            Self::Cross => 1 + (p - 1) % edges.saturating_sub(1).max(1),
        }
    }

    /// The edge of each of `devices` clients.
    pub fn placement(self, devices: usize, groups: usize, edges: usize) -> Vec<usize> {
        (0..devices)
            .map(|i| self.edge_of(i, groups, edges))
            .collect()
    }

    /// Receivers (speakers excluded) per edge and group, `[edge][group]`,
    /// for `devices` clients: what each edge must deliver of one frame of
    /// each group.
    pub fn receivers(self, devices: usize, groups: usize, edges: usize) -> Vec<Vec<u64>> {
        receivers(&self.placement(devices, groups, edges), groups, edges)
    }
}

/// Receivers (speakers excluded) per node and group, `[node][group]`, when
/// client `i` is on node `placement[i]` (client `i` in group `i mod
/// groups`, clients `0..groups` the speakers); nodes at or past `nodes` are
/// left out.
pub fn receivers(placement: &[usize], groups: usize, nodes: usize) -> Vec<Vec<u64>> {
    let mut out = vec![vec![0u64; groups]; nodes];
    for (i, &node) in placement.iter().enumerate().skip(groups) {
        if let Some(row) = out.get_mut(node) {
            row[i % groups] += 1;
        }
    }
    out
}

impl fmt::Display for Layout {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

impl FromStr for Layout {
    type Err = String;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        Self::ALL
            .into_iter()
            .find(|l| l.name() == s)
            .ok_or_else(|| format!("unknown layout {s:?} (local, distributed or cross)"))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn layouts_follow_the_spec_formulas() {
        // 5 groups: clients 0..5 speak; client 17 is in group 2 at p = 3.
        assert_eq!(Layout::Local.edge_of(17, 5, 3), 0);
        assert_eq!(Layout::Distributed.edge_of(17, 5, 3), 0);
        assert_eq!(Layout::Distributed.edge_of(12, 5, 3), 2);
        assert_eq!(Layout::Distributed.edge_of(7, 5, 3), 1);
        for speaker in 0..5 {
            for l in Layout::ALL {
                assert_eq!(l.edge_of(speaker, 5, 3), 0, "{l} speaker {speaker}");
            }
        }
        // cross: p = 1 → edge 1 (spec edge 2), p = 2 → edge 2, p = 3 → edge 1.
        assert_eq!(Layout::Cross.edge_of(5, 5, 3), 1);
        assert_eq!(Layout::Cross.edge_of(12, 5, 3), 2);
        assert_eq!(Layout::Cross.edge_of(17, 5, 3), 1);
        // No receiver of cross ever shares the speaker's edge.
        assert!((5..20_000).all(|i| Layout::Cross.edge_of(i, 5, 3) != 0));
    }

    #[test]
    fn cross_at_20000_devices_puts_2000_and_1999_receivers_per_group_on_edges_b_and_c() {
        // §9: "Per group of 4000: edge-b holds 2000 receivers, edge-c 1999".
        assert_eq!(
            Layout::Cross.receivers(20_000, 5, 3),
            [0, 2000, 1999].map(|n| vec![n; 5])
        );
        assert_eq!(
            Layout::Cross.receivers(5_000, 5, 3),
            [0, 500, 499].map(|n| vec![n; 5])
        );
    }

    #[test]
    fn distributed_and_local_edge_counts_per_group() {
        // 1000 per group: p = 1..999 on p mod 3 → edge 0 gets p = 3, 6, … 999
        // (333), edge 1 p = 1, 4, … 997 (333), edge 2 p = 2, … 998 (333).
        assert_eq!(
            Layout::Distributed.receivers(5_000, 5, 3),
            [333, 333, 333].map(|n| vec![n; 5])
        );
        assert_eq!(
            Layout::Distributed.receivers(20_000, 5, 3),
            [1333, 1333, 1333].map(|n| vec![n; 5])
        );
        assert_eq!(
            Layout::Local.receivers(20_000, 5, 3),
            [3999, 0, 0].map(|n| vec![n; 5])
        );
        // Uneven groups: 7 devices in 3 groups; group 0 = {0, 3, 6}.
        let r = Layout::Cross.receivers(7, 3, 3);
        assert_eq!(r, vec![vec![0, 0, 0], vec![1, 1, 1], vec![1, 0, 0]]);
    }

    #[test]
    fn names_round_trip() {
        for l in Layout::ALL {
            assert_eq!(l.name().parse::<Layout>(), Ok(l));
        }
        assert!("ring".parse::<Layout>().is_err());
        assert_eq!(Layout::Cross.min_edges(), 2);
    }
}
