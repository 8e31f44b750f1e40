//! The wait line for the global Argon2 budget: one FIFO per source prefix,
//! served round-robin, so that when the global budget is contended every
//! prefix that waits gets its turn instead of the fastest sender taking
//! every token as it refills.
//!
//! A prefix enters the round at its tail when its first ticket arrives and
//! leaves it when its queue empties, so a first login from a prefix that is
//! not flooding waits for at most one grant per other waiting prefix: with
//! `n` prefixes waiting and the global budget at `R` checks/s, at most
//! about `n / R` seconds (with the defaults, 10 flooding /24s and 10
//! checks/s: about 1 s), however fast the others send. What each prefix
//! may put in line is bounded by its own per-prefix budget (a ticket takes
//! its tokens) and by `per_prefix` tickets; the line as a whole holds at
//! most `max` tickets, and a new ticket in a full line evicts the newest
//! ticket of the prefix with the longest queue (counted), so a full line
//! never refuses a prefix that holds less than another.

use std::collections::{HashMap, HashSet, VecDeque};
use std::hash::Hash;

/// Where a ticket stands ([`FairQueue::claim`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TicketState {
    /// Its turn came: run the check (the ticket is now used up).
    Granted,
    /// Still in line.
    Waiting,
    /// Evicted from a full line, cancelled, or already claimed.
    Gone,
}

/// Per-prefix FIFOs of tickets served round-robin, keyed by prefix `P`
/// (the budget's source prefix); see the module docs.
/// Looking a ticket up is O(1); evicting from a full line scans the
/// prefixes in line.
/// Bounded by `max` tickets in line plus the granted ones not yet claimed
/// (at most the checks in flight the caller lets [`FairQueue::grant_next`]
/// hand out).
#[derive(Debug)]
pub struct FairQueue<P> {
    per_prefix: usize,
    max: usize,
    queues: HashMap<P, VecDeque<u64>>,
    /// Prefixes with a ticket in line, in serving order.
    round: VecDeque<P>,
    /// Each ticket in line and its prefix.
    waiting: HashMap<u64, P>,
    granted: HashSet<u64>,
    next_ticket: u64,
    evictions: u64,
}

impl<P: Copy + Eq + Hash> FairQueue<P> {
    /// An empty line of at most `per_prefix` tickets per prefix and `max`
    /// tickets in all (both at least 1).
    pub fn new(per_prefix: usize, max: usize) -> Self {
        Self {
            per_prefix: per_prefix.max(1),
            max: max.max(1),
            queues: HashMap::new(),
            round: VecDeque::new(),
            waiting: HashMap::new(),
            granted: HashSet::new(),
            next_ticket: 0,
            evictions: 0,
        }
    }

    /// Tickets in line.
    pub fn waiting(&self) -> usize {
        self.waiting.len()
    }

    /// Tickets granted and not yet claimed.
    pub fn granted(&self) -> usize {
        self.granted.len()
    }

    /// Tickets evicted from a full line so far.
    pub fn evictions(&self) -> u64 {
        self.evictions
    }

    /// Whether `prefix` may put one more ticket in line (its queue is not
    /// full, and a full line has a longer queue to evict from).
    pub fn has_room(&self, prefix: P) -> bool {
        let mine = self.queues.get(&prefix).map_or(0, VecDeque::len);
        mine < self.per_prefix
            && (self.waiting.len() < self.max || self.queues.values().any(|q| q.len() > mine + 1))
    }

    /// Puts a ticket for `prefix` in line and returns it, or `None` when
    /// [`FairQueue::has_room`] says no.
    pub fn enqueue(&mut self, prefix: P) -> Option<u64> {
        if !self.has_room(prefix) {
            return None;
        }
        if self.waiting.len() >= self.max {
            self.evict_from_longest();
        }
        let ticket = self.next_ticket;
        self.next_ticket += 1;
        let q = self.queues.entry(prefix).or_default();
        if q.is_empty() {
            self.round.push_back(prefix);
        }
        q.push_back(ticket);
        self.waiting.insert(ticket, prefix);
        Some(ticket)
    }

    fn evict_from_longest(&mut self) {
        let Some((&prefix, _)) = self.queues.iter().max_by_key(|(_, q)| q.len()) else {
            return;
        };
        if let Some(q) = self.queues.get_mut(&prefix) {
            if let Some(t) = q.pop_back() {
                self.waiting.remove(&t);
            }
            self.evictions += 1;
            if q.is_empty() {
                self.queues.remove(&prefix);
                self.round.retain(|p| *p != prefix);
            }
        }
    }

    /// Grants the next ticket in round-robin order, if any is waiting.
    pub fn grant_next(&mut self) -> Option<u64> {
        let prefix = self.round.pop_front()?;
        let q = self.queues.get_mut(&prefix)?;
        let ticket = q.pop_front()?;
        self.waiting.remove(&ticket);
        if q.is_empty() {
            self.queues.remove(&prefix);
        } else {
            self.round.push_back(prefix);
        }
        self.granted.insert(ticket);
        Some(ticket)
    }

    /// Where `ticket` stands; a granted ticket is handed over once.
    pub fn claim(&mut self, ticket: u64) -> TicketState {
        if self.granted.remove(&ticket) {
            TicketState::Granted
        } else if self.waiting.contains_key(&ticket) {
            TicketState::Waiting
        } else {
            TicketState::Gone
        }
    }

    /// Takes `ticket` out of line, or out of the granted ones (its login
    /// was abandoned).
    pub fn cancel(&mut self, ticket: u64) {
        self.granted.remove(&ticket);
        let Some(prefix) = self.waiting.remove(&ticket) else {
            return;
        };
        if let Some(q) = self.queues.get_mut(&prefix) {
            q.retain(|t| *t != ticket);
            if q.is_empty() {
                self.queues.remove(&prefix);
                self.round.retain(|p| *p != prefix);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A prefix (the queue only needs it hashable).
    fn p(i: u8) -> [u8; 3] {
        [10, i, 0]
    }

    /// Ten flooding prefixes keep 4 tickets each in line; a ticket from an
    /// eleventh prefix is granted within one round (at most 10 grants).
    #[test]
    fn a_new_prefix_waits_at_most_one_round() {
        let mut q = FairQueue::new(4, 1024);
        for round in 0..4 {
            for i in 0..10 {
                assert!(q.enqueue(p(i)).is_some(), "{round} {i}");
            }
        }
        assert!(q.enqueue(p(0)).is_none(), "per-prefix bound");
        // Some grants go by, the flooders refill their queues at once.
        for _ in 0..7 {
            q.grant_next();
        }
        for i in 0..10 {
            q.enqueue(p(i));
        }
        let honest = q.enqueue(p(200)).unwrap();
        let mut grants = 0;
        loop {
            let t = q.grant_next().unwrap();
            grants += 1;
            // The flooders top up after every grant.
            for i in 0..10 {
                q.enqueue(p(i));
            }
            if t == honest {
                break;
            }
        }
        assert!(grants <= 11, "{grants}");
        assert_eq!(q.claim(honest), TicketState::Granted);
        assert_eq!(q.claim(honest), TicketState::Gone);
    }

    #[test]
    fn a_full_line_evicts_from_the_longest_queue_and_cancel_frees() {
        let mut q = FairQueue::new(8, 6);
        let a: Vec<u64> = (0..5).map(|_| q.enqueue(p(1)).unwrap()).collect();
        let b = q.enqueue(p(2)).unwrap();
        assert_eq!(q.waiting(), 6);
        // A newcomer evicts prefix 1's newest ticket.
        let c = q.enqueue(p(3)).unwrap();
        assert_eq!((q.waiting(), q.evictions()), (6, 1));
        assert_eq!(q.claim(a[4]), TicketState::Gone);
        assert_eq!(q.claim(a[3]), TicketState::Waiting);
        // Prefix 2 (1 ticket) may still enter; prefix 1 (4) may not grow
        // a full line past the others.
        assert!(q.has_room(p(2)));
        assert!(!q.has_room(p(1)));
        q.cancel(b);
        q.cancel(c);
        assert_eq!(q.waiting(), 4);
        assert_eq!(q.grant_next(), Some(a[0]));
        assert_eq!(q.granted(), 1);
        q.cancel(a[0]);
        assert_eq!(q.granted(), 0);
        while q.grant_next().is_some() {}
        assert_eq!((q.waiting(), q.granted()), (0, 3));
        assert!(q.queues.is_empty() && q.round.is_empty());
    }
}
