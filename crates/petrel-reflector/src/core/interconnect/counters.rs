//! The data plane's counters, named as draarl-interconnect §7 names them
//! (`protection` per node, the bridge's, and the traffic counters), plus the
//! few causes §7 leaves unnamed (noted on each field).

use crate::codec::interconnect::EnvelopeError;

/// Per-node protection counters (§7 `protection`, the data-plane part; the
/// control-plane counters belong to the control session).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct ProtectionCounters {
    /// Windows in which the soft packet rate was exceeded (§4.3 step 7).
    pub data_soft_limit_events: u64,
    /// Dropped over the hard packet or byte rate (step 7).
    pub data_hard_limit_drops: u64,
    /// Dropped because the node's queue was full (step 10).
    pub data_queue_drops: u64,
    /// Dropped after waiting longer than the queue age limit (step 10).
    pub data_stale_drops: u64,
    /// Failed the tag (step 3).
    pub invalid_auth_tags: u64,
    /// Not named by §7: a correct tag with a hop count above 2 (step 3,
    /// §4.1).
    pub hop_count_drops: u64,
    /// Not named by §7: longer than the channel's limit (step 3, §4.1).
    pub oversize_drops: u64,
    /// Not named by §7: an envelope that does not decode — length or
    /// payload length field wrong, bad version, empty source (step 3,
    /// §4.1).
    pub malformed_envelopes: u64,
    /// Session id, key epoch or source id differ from the session's (step 4).
    pub identity_rejects: u64,
    /// Outside the ±2 s freshness window (step 5).
    pub expired_drops: u64,
    /// Refused by the replay window (step 6).
    pub replay_drops: u64,
    /// From an address other than the bound data address (step 9).
    pub unbound_address_drops: u64,
    /// DataBind proofs that did not bind (step 8).
    pub data_bind_rejects: u64,
    /// Frames of this node in the queue now (a gauge).
    pub queued_data: u64,
    /// Not named by §7: authenticated relays whose payload does not decode
    /// (§5.2 "relay decode").
    pub invalid_relay_drops: u64,
    /// Not named by §7: authenticated subtypes the UDP path does not take
    /// (§4.3 step 11; at the edge, subtypes §3.5 does not define).
    pub unexpected_subtype_drops: u64,
}

impl ProtectionCounters {
    /// Counts a step 3 refusal under its cause.
    pub fn count_open_error(&mut self, e: &EnvelopeError) {
        match e {
            EnvelopeError::BadTag => self.invalid_auth_tags += 1,
            EnvelopeError::HopCountTooHigh(_) => self.hop_count_drops += 1,
            EnvelopeError::TooLong { .. } => self.oversize_drops += 1,
            _ => self.malformed_envelopes += 1,
        }
    }
}

/// Traffic counters of one node on the interconnect side (§7 "traffic
/// counters"): counted from §4.3 step 5 on.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct TrafficCounters {
    /// Authenticated datagrams received.
    pub in_packets: u64,
    /// Their bytes.
    pub in_bytes: u64,
    /// Datagrams sent to this node.
    pub out_packets: u64,
    /// Their bytes.
    pub out_bytes: u64,
    /// Received datagrams dropped after being counted in.
    pub drops: u64,
}

/// Counters of the Type 0 bridge as a whole (§7 "Bridge"), plus the table
/// and queue housekeeping.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct BridgeCounters {
    /// Type 0 shaped datagrams with no live node session (step 2).
    pub unauthenticated_type0: u64,
    /// Not named by §7: Type 0 envelopes cut short (under 175 bytes with
    /// `DraA`, byte 48 = 0 and `NOD0`), dropped rather than handed to the
    /// device path.
    pub truncated_type0: u64,
    /// Authenticated-looking datagrams not consumed in steps 3–6 (bad tag or
    /// decode, identity, expired, replayed), as the reference counts them.
    pub invalid_type0: u64,
    /// Dropped because the global queue was full (step 10).
    pub global_queue_drops: u64,
    /// Not named by §7: node sessions evicted (least recently heard) to make
    /// room for a new node when the table was full.
    pub session_evictions: u64,
    /// Not named by §7: queued frames dropped because their node session
    /// was detached or replaced before they were polled.
    pub orphaned_drops: u64,
    /// Not named by §7: outbound datagrams evicted (oldest first) because
    /// the outbound queue was full.
    pub outbound_evictions: u64,
}
