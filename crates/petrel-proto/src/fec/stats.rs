//! FEC counters. All counts are cumulative since creation.

use serde::Serialize;

/// Sender-side counters of a [`super::FecEncoder`].
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize)]
pub struct EncoderStats {
    /// Data shards framed for sending, in packets.
    pub data_shards_sent: u64,
    /// Parity shards framed for sending, in packets.
    pub parity_shards_sent: u64,
    /// Groups closed with at least one parity shard.
    pub groups_encoded: u64,
    /// Groups whose parity was lowered by the byte cap (parity ≤ the stream's
    /// data bytes) or the memory budget.
    pub parity_capped: u64,
    /// Groups closed before full or before `group_wait` because the shared
    /// retained-memory budget ([`super::FecBudget`]) had no room for the next shard
    /// (kcp-go framing: abandoned without parity, as its groups have a fixed shape).
    pub groups_closed_for_budget: u64,
    /// Native framing: groups closed before full or before `group_wait` because
    /// the traffic was sparse and the caller had nothing more to send
    /// ([`super::FecEncoder::flush`]).
    pub groups_closed_sparse: u64,
    /// Datagrams sent without parity protection (outside any group) because the
    /// shared budget had no room even with no group open, in packets.
    pub ungrouped_for_budget: u64,
    /// Largest parity count any group carried, in packets.
    pub max_parity_observed: u8,
    /// Adaptive policy parity changes.
    pub policy_changes: u64,
    /// Datagrams dropped because the caller did not poll the transmit queue.
    pub tx_queue_dropped: u64,
    /// Bytes held now (open group's shards + transmit queue).
    pub retained_bytes: usize,
    /// Peak of `retained_bytes`.
    pub peak_retained_bytes: usize,
}

/// Receiver-side counters of a [`super::FecDecoder`].
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize)]
pub struct DecoderStats {
    /// Data shards received and handed up, in packets.
    pub data_shards_received: u64,
    /// Parity shards received, in packets.
    pub parity_shards_received: u64,
    /// Data shards rebuilt from parity and handed up, in packets.
    pub shards_recovered: u64,
    /// Groups retired with data missing although their shape was known (parity
    /// seen): more shards were lost than parity could repair.
    pub groups_unrecoverable: u64,
    /// Groups retired by `group_expiry` before completing (any shape).
    pub groups_expired: u64,
    /// Groups released early to respect the memory budget or the group table size.
    pub groups_evicted: u64,
    /// Of `groups_evicted`: incomplete groups released because the shared
    /// retained-memory budget ([`super::FecBudget`]) was full.
    pub groups_released_for_budget: u64,
    /// Shards not kept for recovery because the shared budget stayed full after
    /// releasing every other incomplete group of this decoder, in packets. Data
    /// shards among them were still handed up.
    pub shards_refused_for_budget: u64,
    /// Shards already seen (same `seq`), dropped; also rebuilt shards whose
    /// `seq` was already handed up (their group expired and was tracked afresh).
    pub duplicates: u64,
    /// Shards older than the duplicate window ([`super::SEQ_WINDOW`]), dropped,
    /// as they may have been handed up already.
    pub stale: u64,
    /// kcp-go framing: shards whose flag (data / parity) contradicts the index
    /// our shape gives their `seqid` — evidence that the peer's shape is not
    /// ours ([`super::shape`]).
    pub shape_mismatches: u64,
    /// kcp-go framing: parity shards dropped because a shape mismatch stopped
    /// recovery for good, in packets.
    pub parity_dropped_for_shape: u64,
    /// Datagrams rejected as malformed (bad header, CRC, size or shape), in
    /// packets; includes `shapes_refused`.
    pub malformed: u64,
    /// Native framing: shards of a group shape the negotiated scheme does not
    /// allow (more data or parity shards), dropped, in packets.
    pub shapes_refused: u64,
    /// Groups not rebuilt because the decode matrix of their missing-shard set
    /// did not fit the FEC budget (see `fec::rs`); counted unrecoverable too.
    pub rebuilds_refused_for_budget: u64,
    /// Bytes of cached Reed–Solomon decode matrices, reserved in the FEC budget.
    pub codec_bytes: usize,
    /// Datagrams dropped because the caller did not poll the delivery queue.
    pub rx_queue_dropped: u64,
    /// Loss reports received (native framing) and returned to the caller.
    pub reports_received: u64,
    /// Bytes held now in incomplete groups and the delivery queue.
    pub retained_bytes: usize,
    /// Peak of `retained_bytes`.
    pub peak_retained_bytes: usize,
}
