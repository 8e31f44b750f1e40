//! A route: both directions between one client and the server, sharing one capacity.

use std::time::Instant;

use rand::SeedableRng;
use rand_chacha::ChaCha8Rng;
use serde::Serialize;

use crate::config::{RouteCapacity, RouteConfig};
use crate::link::{Link, Packet, Room, Transmit, Verdict};

/// Which way a packet travels.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Direction {
    /// Client → server.
    Upstream,
    /// Server → client.
    Downstream,
}

impl Direction {
    /// Both directions, upstream first.
    pub const BOTH: [Direction; 2] = [Direction::Upstream, Direction::Downstream];

    fn stream_bit(self) -> u64 {
        match self {
            Direction::Upstream => 0,
            Direction::Downstream => 1,
        }
    }
}

/// The random stream of one route direction: ChaCha8 keyed by `seed`, on stream
/// `2·route_index + direction` (ChaCha's 64-bit stream id gives independent sequences
/// from one key). Route indexes count routes in the order they were created.
pub fn stream_rng(seed: u64, route_index: u64, direction: Direction) -> ChaCha8Rng {
    let mut rng = ChaCha8Rng::seed_from_u64(seed);
    rng.set_stream(route_index.wrapping_mul(2) | direction.stream_bit());
    rng
}

/// Both directions of one route and their shared [`RouteCapacity`].
#[derive(Debug)]
pub struct Route<P> {
    upstream: Link<P>,
    downstream: Link<P>,
    capacity: RouteCapacity,
    peak_held_bytes: usize,
    peak_held_packets: usize,
}

impl<P: Packet> Route<P> {
    /// A route with a validated `config`, its streams derived from `seed` and
    /// `route_index` (see [`stream_rng`]).
    pub fn new(config: &RouteConfig, seed: u64, route_index: u64) -> Self {
        Self {
            upstream: Link::new(
                config.upstream.clone(),
                stream_rng(seed, route_index, Direction::Upstream),
            ),
            downstream: Link::new(
                config.downstream.clone(),
                stream_rng(seed, route_index, Direction::Downstream),
            ),
            capacity: config.capacity,
            peak_held_bytes: 0,
            peak_held_packets: 0,
        }
    }

    /// One direction's link.
    pub fn link(&self, direction: Direction) -> &Link<P> {
        match direction {
            Direction::Upstream => &self.upstream,
            Direction::Downstream => &self.downstream,
        }
    }

    fn link_mut(&mut self, direction: Direction) -> &mut Link<P> {
        match direction {
            Direction::Upstream => &mut self.upstream,
            Direction::Downstream => &mut self.downstream,
        }
    }

    /// Packets held by both directions.
    pub fn held_packets(&self) -> usize {
        self.upstream.held_packets() + self.downstream.held_packets()
    }

    /// Bytes held by both directions.
    pub fn held_bytes(&self) -> usize {
        self.upstream.held_bytes() + self.downstream.held_bytes()
    }

    /// Most bytes both directions held at once since the route was created: what
    /// the emulated path stored for this client (compare with the capacity).
    pub fn peak_held_bytes(&self) -> usize {
        self.peak_held_bytes
    }

    /// Most packets both directions held at once since the route was created.
    pub fn peak_held_packets(&self) -> usize {
        self.peak_held_packets
    }

    /// Offers a packet that arrived at `now` travelling in `direction`.
    pub fn offer(&mut self, direction: Direction, now: Instant, packet: P) -> Verdict {
        let mut room = Room {
            bytes: self.capacity.bytes.saturating_sub(self.held_bytes()),
            packets: self.capacity.packets.saturating_sub(self.held_packets()),
        };
        let verdict = self.link_mut(direction).offer(now, packet, &mut room);
        // Holdings only grow on offer, so the peak is exact when tracked here.
        self.peak_held_bytes = self.peak_held_bytes.max(self.held_bytes());
        self.peak_held_packets = self.peak_held_packets.max(self.held_packets());
        verdict
    }

    /// Releases the earliest packet of `direction` due at or before `now`.
    pub fn poll_transmit(&mut self, direction: Direction, now: Instant) -> Option<Transmit<P>> {
        self.link_mut(direction).poll_transmit(now)
    }

    /// When `direction`'s next packet is due.
    pub fn next_deadline(&self, direction: Direction) -> Option<Instant> {
        self.link(direction).next_deadline()
    }
}
