//! One direction of a route as a sans-IO state machine: packets are offered with the
//! time they arrived, and polled out at the time they are due.

use std::cmp::Ordering;
use std::collections::{BinaryHeap, VecDeque};
use std::time::{Duration, Instant};

use rand::Rng;
use rand_chacha::ChaCha8Rng;

use crate::config::LinkConfig;
use crate::stats::{DropCause, LinkStats};

/// Anything the link can carry: it needs the size that serialization, queue limits and
/// counters use, and a copy for duplication.
pub trait Packet: Clone {
    /// Size in bytes (the UDP payload length).
    fn wire_len(&self) -> usize;
}

impl Packet for Vec<u8> {
    fn wire_len(&self) -> usize {
        self.len()
    }
}

/// What happened to one offered packet.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Verdict {
    /// Copies now held for release: 0, 1, or 2 when duplicated.
    pub queued: u8,
    /// The cause of the first dropped copy, if any was dropped.
    pub dropped: Option<DropCause>,
}

/// A packet leaving the link.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Transmit<P> {
    /// The packet.
    pub packet: P,
    /// When it was due: arrival + serialization + delay. The runtime's lateness is
    /// its send time minus this.
    pub scheduled: Instant,
}

/// Space left in the route when a packet is offered (see [`crate::RouteCapacity`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Room {
    /// Bytes the route may still hold.
    pub bytes: usize,
    /// Packets the route may still hold.
    pub packets: usize,
}

struct Held<P> {
    release: Instant,
    seq: u64,
    packet: P,
}

// Min-heap on (release, seq): earliest first, arrival order among equal times.
impl<P> Ord for Held<P> {
    fn cmp(&self, other: &Self) -> Ordering {
        (other.release, other.seq).cmp(&(self.release, self.seq))
    }
}
impl<P> PartialOrd for Held<P> {
    fn partial_cmp(&self, other: &Self) -> Option<Ordering> {
        Some(self.cmp(other))
    }
}
impl<P> PartialEq for Held<P> {
    fn eq(&self, other: &Self) -> bool {
        self.seq == other.seq
    }
}
impl<P> Eq for Held<P> {}

/// One direction of one route. Every random decision draws from the link's own
/// ChaCha8 stream, a fixed number of draws per packet per enabled condition, so the
/// same seed and the same arrivals give the same decisions, packet for packet.
pub struct Link<P> {
    config: LinkConfig,
    rng: ChaCha8Rng,
    burst_pos: u32,
    gilbert_bad: bool,
    /// Finish time and size of each packet waiting for or in serialization.
    serializer: VecDeque<(Instant, usize)>,
    serializer_bytes: usize,
    wire_free_at: Option<Instant>,
    delay_line: BinaryHeap<Held<P>>,
    held_bytes: usize,
    seq: u64,
    stats: LinkStats,
}

impl<P> std::fmt::Debug for Link<P> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Link")
            .field("config", &self.config)
            .field("held_packets", &self.delay_line.len())
            .field("held_bytes", &self.held_bytes)
            .field("stats", &self.stats)
            .finish_non_exhaustive()
    }
}

impl<P: Packet> Link<P> {
    /// A link with a validated `config` and its random stream (see
    /// [`crate::stream_rng`]).
    pub fn new(config: LinkConfig, rng: ChaCha8Rng) -> Self {
        Self {
            config,
            rng,
            burst_pos: 0,
            gilbert_bad: false,
            serializer: VecDeque::new(),
            serializer_bytes: 0,
            wire_free_at: None,
            delay_line: BinaryHeap::new(),
            held_bytes: 0,
            seq: 0,
            stats: LinkStats::default(),
        }
    }

    /// The link's configuration.
    pub fn config(&self) -> &LinkConfig {
        &self.config
    }

    /// Counters so far.
    pub fn stats(&self) -> &LinkStats {
        &self.stats
    }

    /// Packets held (queued or delayed), not yet released.
    pub fn held_packets(&self) -> usize {
        self.delay_line.len()
    }

    /// Bytes held, not yet released.
    pub fn held_bytes(&self) -> usize {
        self.held_bytes
    }

    /// Offers a packet that arrived at `now`; `room` is what the route can still hold
    /// and is reduced by what this call keeps. `now` must not go backwards between
    /// calls (earlier values are treated as the latest seen).
    pub fn offer(&mut self, now: Instant, packet: P, room: &mut Room) -> Verdict {
        let len = packet.wire_len();
        self.stats.in_packets += 1;
        self.stats.in_bytes += len as u64;
        if let Some(cause) = self.loss_decision() {
            self.stats.dropped.count(cause);
            return Verdict {
                queued: 0,
                dropped: Some(cause),
            };
        }
        let duplicate = self.config.duplicate > 0.0 && self.rng.gen_bool(self.config.duplicate);
        let mut verdict = Verdict {
            queued: 0,
            dropped: None,
        };
        if duplicate {
            self.stats.duplicated += 1;
            self.enqueue(now, packet.clone(), len, room, &mut verdict);
        }
        self.enqueue(now, packet, len, room, &mut verdict);
        verdict
    }

    /// Steps every enabled loss condition once (so each keeps its own position in the
    /// stream whatever the others decide) and returns the first that hit.
    fn loss_decision(&mut self) -> Option<DropCause> {
        let burst_hit = self.config.burst.is_some_and(|b| {
            let pos = self.burst_pos;
            self.burst_pos = (pos + 1) % b.n;
            pos >= b.n - b.k
        });
        let gilbert_hit = self.config.gilbert.is_some_and(|g| {
            let flip = if self.gilbert_bad {
                g.p_bad_to_good
            } else {
                g.p_good_to_bad
            };
            if self.rng.gen_bool(flip) {
                self.gilbert_bad = !self.gilbert_bad;
            }
            let loss = if self.gilbert_bad {
                g.loss_bad
            } else {
                g.loss_good
            };
            self.rng.gen_bool(loss)
        });
        let random_hit =
            self.config.random_loss > 0.0 && self.rng.gen_bool(self.config.random_loss);
        if burst_hit {
            Some(DropCause::Burst)
        } else if gilbert_hit {
            Some(DropCause::Gilbert)
        } else if random_hit {
            Some(DropCause::Random)
        } else {
            None
        }
    }

    fn enqueue(&mut self, now: Instant, packet: P, len: usize, room: &mut Room, v: &mut Verdict) {
        // Delay draws come first so a copy's stream position does not depend on
        // whether the queue had space.
        let delay = self.draw_delay();
        while self
            .serializer
            .front()
            .is_some_and(|&(done, _)| done <= now)
        {
            if let Some((_, l)) = self.serializer.pop_front() {
                self.serializer_bytes -= l;
            }
        }
        let departs = if let Some(rate) = self.config.rate_bps {
            let full_packets = self
                .config
                .queue_packets
                .is_some_and(|q| self.serializer.len() >= q);
            let full_bytes = self
                .config
                .queue_bytes
                .is_some_and(|q| self.serializer_bytes + len > q);
            if full_packets || full_bytes {
                self.drop_copy(DropCause::Queue, v);
                return;
            }
            if room.packets == 0 || room.bytes < len {
                self.drop_copy(DropCause::Capacity, v);
                return;
            }
            let start = self.wire_free_at.map_or(now, |t| t.max(now));
            let done = start + serialization_time(len, rate);
            self.wire_free_at = Some(done);
            self.serializer.push_back((done, len));
            self.serializer_bytes += len;
            self.stats.queue_peak_packets = self
                .stats
                .queue_peak_packets
                .max(self.serializer.len() as u64);
            self.stats.queue_peak_bytes = self
                .stats
                .queue_peak_bytes
                .max(self.serializer_bytes as u64);
            done
        } else {
            if room.packets == 0 || room.bytes < len {
                self.drop_copy(DropCause::Capacity, v);
                return;
            }
            now
        };
        room.packets -= 1;
        room.bytes -= len;
        self.held_bytes += len;
        self.seq += 1;
        self.delay_line.push(Held {
            release: departs + delay,
            seq: self.seq,
            packet,
        });
        v.queued += 1;
    }

    fn drop_copy(&mut self, cause: DropCause, v: &mut Verdict) {
        self.stats.dropped.count(cause);
        v.dropped.get_or_insert(cause);
    }

    fn draw_delay(&mut self) -> Duration {
        let c = &self.config;
        let mut delay = c.delay;
        if !c.jitter.is_zero() {
            let j = c.jitter.as_nanos() as i64;
            let offset = self.rng.gen_range(-j..=j);
            let nanos = (c.delay.as_nanos() as i64 + offset).max(0);
            delay = Duration::from_nanos(nanos as u64);
        }
        if c.reorder > 0.0 && self.rng.gen_bool(c.reorder) {
            self.stats.reordered += 1;
            delay += c.reorder_delay;
        }
        delay
    }

    /// When the next packet is due, if any is held.
    pub fn next_deadline(&self) -> Option<Instant> {
        self.delay_line.peek().map(|h| h.release)
    }

    /// Releases the earliest packet due at or before `now`.
    pub fn poll_transmit(&mut self, now: Instant) -> Option<Transmit<P>> {
        if self.delay_line.peek()?.release > now {
            return None;
        }
        let held = self.delay_line.pop()?;
        let len = held.packet.wire_len();
        self.held_bytes -= len;
        self.stats.forwarded_packets += 1;
        self.stats.forwarded_bytes += len as u64;
        Some(Transmit {
            packet: held.packet,
            scheduled: held.release,
        })
    }
}

/// Time to put `len` bytes on a wire of `rate_bps` bit/s, rounded to the nearest ns.
fn serialization_time(len: usize, rate_bps: u64) -> Duration {
    let bits = len as u128 * 8;
    let rate = u128::from(rate_bps.max(1));
    let nanos = (bits * 1_000_000_000 + rate / 2) / rate;
    Duration::from_nanos(u64::try_from(nanos).unwrap_or(u64::MAX))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn serialization_time_of_1200_bytes_at_1_gbit_is_9_6_us() {
        assert_eq!(
            serialization_time(1200, 1_000_000_000),
            Duration::from_nanos(9600)
        );
    }
}
