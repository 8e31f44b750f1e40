//! The relay's route table: one slot per client address, reused after idle expiry.

use std::collections::HashMap;
use std::net::{SocketAddr, UdpSocket};
use std::time::{Duration, Instant};

use super::report::{DirectionReport, RouteReport};
use crate::route::{Direction, Route};
use crate::stats::LinkStats;

pub(crate) struct Slot {
    /// Creation order; selects the route's random streams and tells a reused slot's
    /// new route from its old one.
    pub(crate) index: u64,
    pub(crate) client: SocketAddr,
    pub(crate) socket: UdpSocket,
    pub(crate) route: Route<Vec<u8>>,
    pub(crate) armed: [Option<Instant>; 2],
    pub(crate) created: Instant,
    pub(crate) last_active: Instant,
}

/// Live routes by slot position (the epoll token is derived from it), with the
/// counters of expired routes kept in the totals.
#[derive(Default)]
pub(crate) struct RouteTable {
    slots: Vec<Option<Slot>>,
    free: Vec<usize>,
    by_client: HashMap<SocketAddr, usize>,
    next_index: u64,
    retired: [LinkStats; 2],
    pub(crate) expired: u64,
}

impl RouteTable {
    pub(crate) fn live(&self) -> usize {
        self.by_client.len()
    }

    pub(crate) fn lookup(&self, client: &SocketAddr) -> Option<usize> {
        self.by_client.get(client).copied()
    }

    pub(crate) fn get(&self, pos: usize) -> Option<&Slot> {
        self.slots.get(pos)?.as_ref()
    }

    pub(crate) fn get_mut(&mut self, pos: usize) -> Option<&mut Slot> {
        self.slots.get_mut(pos)?.as_mut()
    }

    /// The slot position the next [`RouteTable::insert`] will use, and the route
    /// index it will get.
    pub(crate) fn next_position(&self) -> (usize, u64) {
        (
            self.free.last().copied().unwrap_or(self.slots.len()),
            self.next_index,
        )
    }

    pub(crate) fn insert(&mut self, slot: Slot) -> usize {
        let client = slot.client;
        let pos = match self.free.pop() {
            Some(p) => {
                self.slots[p] = Some(slot);
                p
            }
            None => {
                self.slots.push(Some(slot));
                self.slots.len() - 1
            }
        };
        self.next_index += 1;
        self.by_client.insert(client, pos);
        pos
    }

    /// Removes routes that hold nothing and saw no packet for `idle`; their sockets
    /// close (which also removes them from epoll).
    pub(crate) fn expire_idle(&mut self, now: Instant, idle: Duration) {
        for pos in 0..self.slots.len() {
            let expired = self.slots[pos].as_ref().is_some_and(|s| {
                s.route.held_packets() == 0 && now.saturating_duration_since(s.last_active) >= idle
            });
            if !expired {
                continue;
            }
            if let Some(s) = self.slots[pos].take() {
                for (i, dir) in Direction::BOTH.into_iter().enumerate() {
                    self.retired[i].merge(s.route.link(dir).stats());
                }
                self.by_client.remove(&s.client);
                self.free.push(pos);
                self.expired += 1;
            }
        }
    }

    /// Reports of the live routes in creation order, and the upstream and downstream
    /// totals over every route the relay has had.
    pub(crate) fn reports(&self, now: Instant) -> (Vec<RouteReport>, [LinkStats; 2]) {
        let mut totals = self.retired;
        let mut routes: Vec<RouteReport> = self
            .slots
            .iter()
            .flatten()
            .map(|s| {
                let age = now.saturating_duration_since(s.created);
                let up = s.route.link(Direction::Upstream);
                let down = s.route.link(Direction::Downstream);
                totals[0].merge(up.stats());
                totals[1].merge(down.stats());
                RouteReport {
                    index: s.index,
                    client: s.client,
                    upstream_local: s.socket.local_addr().ok(),
                    age_ms: age.as_secs_f64() * 1e3,
                    peak_held_bytes: s.route.peak_held_bytes() as u64,
                    peak_held_packets: s.route.peak_held_packets() as u64,
                    upstream: DirectionReport::new(*up.stats(), up.config(), age),
                    downstream: DirectionReport::new(*down.stats(), down.config(), age),
                }
            })
            .collect();
        routes.sort_by_key(|r| r.index);
        (routes, totals)
    }
}
