//! The centre's table of connections not yet authenticated
//! (draarl-interconnect §7 `MaxPendingHandshakes`), shared fairly between
//! source networks ([`SourcePrefix`]: /24 for IPv4, /64 for IPv6).
//!
//! ```text
//!  admit(prefix) ─ prefix holds ≥ per_prefix? ─yes─▶ evict that prefix's oldest  (PrefixLimited)
//!                └ table holds ≥ cap? ─yes─▶ evict the oldest of the prefix holding most (Evicted)
//!                └▶ newcomer takes a slot (always)
//! ```
//!
//! A newcomer is always admitted: an unauthenticated connection has no
//! claim to outrank it, and refusing newcomers once full lets one network
//! that keeps the table full (half-open connections renewed every hello
//! deadline) lock every edge out. With at most `per_prefix` slots each,
//! one network holds at most a quarter of the table, and a full table
//! always gives up a slot of the network holding most, never the
//! newcomer's when it holds fewer.

use crate::model::SourcePrefix;

/// Why an entry left the table to make room for a newcomer.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Eviction {
    /// The newcomer's network already held its share; its oldest went.
    PrefixLimited,
    /// The table was full; the oldest of the network holding most went.
    Evicted,
}

struct Slot<T> {
    seq: u64,
    prefix: SourcePrefix,
    handle: T,
}

/// Pending connections, oldest first; `T` is what closes one (the
/// runtime's cancel handle), handed back on eviction.
pub(super) struct PendingSlots<T> {
    cap: usize,
    per_prefix: usize,
    next_seq: u64,
    slots: Vec<Slot<T>>,
}

impl<T> PendingSlots<T> {
    /// A table of `cap` slots (at least 1), each network holding at most
    /// `max(1, cap / 4)`.
    pub(super) fn new(cap: usize) -> Self {
        let cap = cap.max(1);
        Self {
            cap,
            per_prefix: (cap / 4).max(1),
            next_seq: 0,
            slots: Vec::with_capacity(cap),
        }
    }

    /// Slots held.
    pub(super) fn len(&self) -> usize {
        self.slots.len()
    }

    /// Admits a connection from `prefix`: its slot id (for
    /// [`PendingSlots::remove`]) and the entry evicted to make room, if
    /// any, with the reason.
    pub(super) fn admit(
        &mut self,
        prefix: SourcePrefix,
        handle: T,
    ) -> (u64, Option<(Eviction, T)>) {
        let own = self.slots.iter().filter(|s| s.prefix == prefix).count();
        let evicted = if own >= self.per_prefix {
            self.evict_oldest_of(prefix)
                .map(|h| (Eviction::PrefixLimited, h))
        } else if self.slots.len() >= self.cap {
            let busiest = self.busiest_prefix();
            busiest
                .and_then(|p| self.evict_oldest_of(p))
                .map(|h| (Eviction::Evicted, h))
        } else {
            None
        };
        let seq = self.next_seq;
        self.next_seq += 1;
        self.slots.push(Slot {
            seq,
            prefix,
            handle,
        });
        (seq, evicted)
    }

    /// Frees slot `seq` (the handshake ended); no effect when it was
    /// evicted already.
    pub(super) fn remove(&mut self, seq: u64) {
        if let Some(i) = self.slots.iter().position(|s| s.seq == seq) {
            self.slots.remove(i);
        }
    }

    fn evict_oldest_of(&mut self, prefix: SourcePrefix) -> Option<T> {
        let i = self.slots.iter().position(|s| s.prefix == prefix)?;
        Some(self.slots.remove(i).handle)
    }

    /// The network holding most slots; among equals, the one whose oldest
    /// slot is oldest.
    fn busiest_prefix(&self) -> Option<SourcePrefix> {
        let count = |p: SourcePrefix| self.slots.iter().filter(|s| s.prefix == p).count();
        let most = self.slots.iter().map(|s| count(s.prefix)).max()?;
        self.slots
            .iter()
            .map(|s| s.prefix)
            .find(|&p| count(p) == most)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn net(third: u8) -> SourcePrefix {
        SourcePrefix::of(std::net::IpAddr::from([127, 0, third, 1]))
    }

    #[test]
    fn a_network_beyond_its_share_gives_up_its_own_oldest() {
        let mut t = PendingSlots::new(8);
        assert_eq!(t.admit(net(1), "a1"), (0, None));
        assert_eq!(t.admit(net(1), "a2"), (1, None));
        assert_eq!(
            t.admit(net(1), "a3"),
            (2, Some((Eviction::PrefixLimited, "a1")))
        );
        assert_eq!(t.admit(net(2), "b1"), (3, None));
        assert_eq!(t.len(), 3);
    }

    #[test]
    fn a_full_table_gives_up_the_busiest_networks_oldest_and_admits() {
        let mut t = PendingSlots::new(4);
        // per_prefix 1 with cap 4: fill with four networks, one each.
        for n in 1..=4u8 {
            assert_eq!(t.admit(net(n), n).1, None);
        }
        // All tie: the oldest overall goes.
        assert_eq!(t.admit(net(9), 9).1, Some((Eviction::Evicted, 1)));
        let mut t = PendingSlots::new(8);
        for h in [10, 11, 20, 21, 30, 40, 41, 50] {
            t.admit(net(h / 10), h);
        }
        // Networks 1, 2 and 4 hold two each; network 1's oldest is oldest.
        assert_eq!(t.admit(net(6), 60).1, Some((Eviction::Evicted, 10)));
        assert_eq!(t.admit(net(7), 70).1, Some((Eviction::Evicted, 20)));
        assert_eq!(t.len(), 8);
    }

    #[test]
    fn remove_frees_a_slot_once() {
        let mut t = PendingSlots::new(1);
        let (a, _) = t.admit(net(1), ());
        t.remove(a);
        t.remove(a);
        assert_eq!(t.len(), 0);
        assert_eq!(t.admit(net(2), ()).1, None);
    }
}
