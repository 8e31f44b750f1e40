//! Counters of one link direction (see `specs/netem.md`, "What it reports").

use serde::{Deserialize, Serialize};

/// Why a packet was dropped.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum DropCause {
    /// Independent random loss.
    Random,
    /// Periodic burst loss.
    Burst,
    /// Gilbert–Elliott loss.
    Gilbert,
    /// The drop-tail queue was full.
    Queue,
    /// The route held its capacity in bytes or packets.
    Capacity,
}

/// Drops by cause, in packets.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct DropCounters {
    /// Random loss.
    pub random: u64,
    /// Burst loss.
    pub burst: u64,
    /// Gilbert–Elliott loss.
    pub gilbert: u64,
    /// Queue full.
    pub queue: u64,
    /// Route capacity reached.
    pub capacity: u64,
}

impl DropCounters {
    pub(crate) fn count(&mut self, cause: DropCause) {
        let c = match cause {
            DropCause::Random => &mut self.random,
            DropCause::Burst => &mut self.burst,
            DropCause::Gilbert => &mut self.gilbert,
            DropCause::Queue => &mut self.queue,
            DropCause::Capacity => &mut self.capacity,
        };
        *c += 1;
    }

    /// Drops by the loss conditions (random + burst + Gilbert–Elliott).
    pub fn loss(&self) -> u64 {
        self.random + self.burst + self.gilbert
    }

    /// All drops.
    pub fn total(&self) -> u64 {
        self.loss() + self.queue + self.capacity
    }
}

/// Counters of one direction of one route. Packets and bytes count UDP payloads.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct LinkStats {
    /// Packets offered to the link.
    pub in_packets: u64,
    /// Bytes offered to the link.
    pub in_bytes: u64,
    /// Packets released after their delay (duplicates included).
    pub forwarded_packets: u64,
    /// Bytes released after their delay.
    pub forwarded_bytes: u64,
    /// Drops by cause.
    pub dropped: DropCounters,
    /// Packets that got a second copy.
    pub duplicated: u64,
    /// Packets (copies) that got the reorder extra delay.
    pub reordered: u64,
    /// Highest drop-tail queue occupancy in packets.
    pub queue_peak_packets: u64,
    /// Highest drop-tail queue occupancy in bytes.
    pub queue_peak_bytes: u64,
}

impl LinkStats {
    /// Observed loss ratio of the loss conditions: loss drops / packets in (0 when
    /// nothing came in). Compare with [`crate::LinkConfig::configured_loss`].
    pub fn observed_loss(&self) -> f64 {
        if self.in_packets == 0 {
            0.0
        } else {
            self.dropped.loss() as f64 / self.in_packets as f64
        }
    }

    /// Adds another direction's or route's counters; peaks take the maximum.
    pub fn merge(&mut self, o: &LinkStats) {
        self.in_packets += o.in_packets;
        self.in_bytes += o.in_bytes;
        self.forwarded_packets += o.forwarded_packets;
        self.forwarded_bytes += o.forwarded_bytes;
        self.dropped.random += o.dropped.random;
        self.dropped.burst += o.dropped.burst;
        self.dropped.gilbert += o.dropped.gilbert;
        self.dropped.queue += o.dropped.queue;
        self.dropped.capacity += o.dropped.capacity;
        self.duplicated += o.duplicated;
        self.reordered += o.reordered;
        self.queue_peak_packets = self.queue_peak_packets.max(o.queue_peak_packets);
        self.queue_peak_bytes = self.queue_peak_bytes.max(o.queue_peak_bytes);
    }
}
