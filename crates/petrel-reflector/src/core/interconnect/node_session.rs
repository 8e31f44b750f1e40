//! One node session as the data plane sees it (draarl-interconnect §1
//! table "Node session"): id, key, key epoch, replay window, data budget,
//! bound address, counters.

use std::time::Instant;

use crate::codec::interconnect::{NodeId, NodeKey};

use super::address_binding::AddressBinding;
use super::counters::{ProtectionCounters, TrafficCounters};
use super::data_budget::DataBudget;
use super::replay_window::ReplayWindow;

/// What the control plane hands the data plane after `node_auth_ok`
/// (§3.2 step 5).
#[derive(Debug, Clone)]
pub struct NodeSessionParams {
    /// The peer's node id (an edge id at the centre, `center` at the edge).
    pub node_id: NodeId,
    /// The control session id (`session_id` of `node_auth_ok`).
    pub session_id: u64,
    /// The session key.
    pub key: NodeKey,
    /// The key epoch (1).
    pub key_epoch: u32,
}

#[derive(Debug)]
pub(super) struct NodeSession {
    pub(super) params: NodeSessionParams,
    pub(super) replay: ReplayWindow,
    pub(super) budget: DataBudget,
    pub(super) binding: AddressBinding,
    pub(super) protection: ProtectionCounters,
    pub(super) traffic: TrafficCounters,
    pub(super) last_heard: Instant,
}

impl NodeSession {
    pub(super) fn new(now: Instant, params: NodeSessionParams) -> Self {
        Self {
            params,
            replay: ReplayWindow::new(),
            budget: DataBudget::default(),
            binding: AddressBinding::default(),
            protection: ProtectionCounters::default(),
            traffic: TrafficCounters::default(),
            last_heard: now,
        }
    }
}
