//! The per-node side of a cluster or single-node stage: which node each
//! device logs in through, the frame receipts per node, and for every node
//! process its CPU time (`/proc/<pid>/stat`), RSS, peak RSS and `/metrics`
//! counters read when the measurement starts and ends, with the host's UDP
//! receive-buffer drops. [`NodeProbe::finish`] turns them into the recorded
//! [`ClusterStage`]: per node CPU seconds and cores, memory and drop
//! counters; the cost per delivered packet; the missing datagrams attributed
//! ([`super::loss_attribution`]).

use std::net::SocketAddr;
use std::sync::{Mutex, PoisonError};
use std::time::Instant;

use petrel_sys::proc::{
    clock_ticks_per_s, peak_rss_bytes_of, process_cpu_ticks, rss_bytes, udp_rcvbuf_errors,
};

use super::cluster_layout::receivers;
use super::loss_attribution::{attribute, NodeDrops};
use super::node_metrics::{drop_increases, login_counters, node_drops, MetricsReading};
use super::receipts::FrameReceipts;
use super::stage_probe::StageProbe;
use super::LoadError;
use crate::record::reflector::LoadResult;
use crate::record::reflector_cluster::{ClusterStage, NodeStage};

const MIB: f64 = 1024.0 * 1024.0;

/// One node process of a stage.
#[derive(Debug, Clone)]
pub(super) struct ProbedNode {
    /// `centre`, `edge-a`, … or `single`.
    pub name: String,
    /// Its process.
    pub pid: u32,
    /// Its HTTP address with `/metrics`.
    pub http: SocketAddr,
    /// Where devices log in through it: its UDP address and its index among
    /// the receiving nodes (the index `placement` uses). `None` for the
    /// centre of a cluster, which gets no devices.
    pub entry: Option<(SocketAddr, usize)>,
}

/// The readings of every node at one instant.
#[derive(Debug)]
struct Reading {
    at: Instant,
    cpu_ticks: Vec<u64>,
    metrics: Vec<MetricsReading>,
    host_rcvbuf_errors: u64,
}

/// The per-node probe of one stage.
#[derive(Debug)]
pub(super) struct NodeProbe {
    nodes: Vec<ProbedNode>,
    /// Receiving-node index of each device.
    placement: Vec<usize>,
    /// UDP entry of each receiving node.
    entries: Vec<SocketAddr>,
    groups: usize,
    receipts: FrameReceipts,
    first: Mutex<Option<Reading>>,
    last: Mutex<Option<Reading>>,
}

impl NodeProbe {
    /// A probe of `nodes`, with device `i` logging in through the receiving
    /// node `placement[i]`; receipts for `groups` groups and the measured
    /// rounds `first_round..first_round + rounds`.
    ///
    /// # Errors
    /// [`LoadError::Invalid`] when a device names a receiving node no node
    /// has, or the receipts would be too large.
    pub(super) fn new(
        nodes: Vec<ProbedNode>,
        placement: Vec<usize>,
        groups: usize,
        first_round: u64,
        rounds: usize,
    ) -> Result<Self, LoadError> {
        let mut entries: Vec<(usize, SocketAddr)> = nodes
            .iter()
            .filter_map(|n| n.entry.map(|(addr, index)| (index, addr)))
            .collect();
        entries.sort_unstable_by_key(|&(index, _)| index);
        if entries
            .iter()
            .enumerate()
            .any(|(k, &(index, _))| k != index)
        {
            return Err(LoadError::Invalid(
                "receiving nodes must be numbered 0, 1, … in turn".into(),
            ));
        }
        let entries: Vec<SocketAddr> = entries.into_iter().map(|(_, a)| a).collect();
        if placement.iter().any(|&p| p >= entries.len()) {
            return Err(LoadError::Invalid(
                "a device is placed on a node that takes no devices".into(),
            ));
        }
        let receipts = FrameReceipts::new(entries.len(), groups, first_round, rounds)?;
        Ok(Self {
            nodes,
            placement,
            entries,
            groups,
            receipts,
            first: Mutex::new(None),
            last: Mutex::new(None),
        })
    }

    fn read(&self) -> Result<Reading, LoadError> {
        let mut cpu_ticks = Vec::with_capacity(self.nodes.len());
        let mut metrics = Vec::with_capacity(self.nodes.len());
        for n in &self.nodes {
            cpu_ticks.push(process_cpu_ticks(n.pid).ok_or_else(|| {
                LoadError::Invalid(format!("node {} (pid {}) is gone", n.name, n.pid))
            })?);
            metrics.push(
                MetricsReading::fetch(n.http)
                    .map_err(|e| LoadError::Invalid(format!("node {} /metrics: {e}", n.name)))?,
            );
        }
        Ok(Reading {
            at: Instant::now(),
            cpu_ticks,
            metrics,
            host_rcvbuf_errors: udp_rcvbuf_errors().unwrap_or(0),
        })
    }

    /// The recorded stage: `load` (the driver's figures) with every node's
    /// share and the loss attributed; `layout` and `edges` as recorded.
    ///
    /// # Errors
    /// [`LoadError::Invalid`] when the measurement's readings are missing.
    pub(super) fn finish(
        &self,
        mut load: LoadResult,
        layout: &str,
        edges: usize,
    ) -> Result<ClusterStage, LoadError> {
        let take = |m: &Mutex<Option<Reading>>| {
            m.lock()
                .unwrap_or_else(PoisonError::into_inner)
                .take()
                .ok_or_else(|| LoadError::Invalid("the stage took no node readings".into()))
        };
        let (first, last) = (take(&self.first)?, take(&self.last)?);
        let measured_s = last.at.duration_since(first.at).as_secs_f64().max(1e-9);
        let hz = clock_ticks_per_s() as f64;
        let owed = receivers(&self.placement, self.groups, self.entries.len());
        let misses = self.receipts.misses(&owed);
        let mut own = vec![NodeDrops::default(); self.entries.len()];
        let mut upstream_frames = 0;
        let mut nodes = Vec::with_capacity(self.nodes.len());
        for (k, n) in self.nodes.iter().enumerate() {
            let increases = last.metrics[k].increases_since(&first.metrics[k]);
            let drops = node_drops(&increases);
            match n.entry {
                Some((_, index)) => own[index] = drops,
                None => upstream_frames += drops.frames + drops.datagrams,
            }
            let cpu_s = last.cpu_ticks[k].saturating_sub(first.cpu_ticks[k]) as f64 / hz;
            let (whole_frames_missed, datagrams_missed) = n.entry.map_or((0, 0), |(_, i)| {
                (misses[i].whole_frames, misses[i].datagrams())
            });
            nodes.push(NodeStage {
                name: n.name.clone(),
                devices: n.entry.map_or(0, |(_, i)| {
                    self.placement.iter().filter(|&&p| p == i).count()
                }),
                cpu_s,
                cpu_cores: cpu_s / measured_s,
                rss_mb: rss_bytes(n.pid).unwrap_or(0) as f64 / MIB,
                peak_rss_mb: peak_rss_bytes_of(n.pid).unwrap_or(0) as f64 / MIB,
                drops: drop_increases(&increases)
                    .into_iter()
                    .map(|(name, v, _)| (name, v))
                    .collect(),
                whole_frames_missed,
                datagrams_missed,
                attributed: 0,
            });
        }
        let host_rcvbuf_errors = last
            .host_rcvbuf_errors
            .saturating_sub(first.host_rcvbuf_errors);
        let missing = load.expected.saturating_sub(load.received);
        let (loss, by_node) =
            attribute(missing, &misses, &own, upstream_frames, host_rcvbuf_errors);
        for (node, n) in nodes.iter_mut().zip(&self.nodes) {
            if let Some((_, i)) = n.entry {
                node.attributed = by_node[i];
            }
        }
        let cpu_s_total: f64 = nodes.iter().map(|n| n.cpu_s).sum();
        if edges > 0 {
            load.server_process = "cluster".into();
            load.server_cpu_cores = cpu_s_total / measured_s;
            load.server_rss_mb = Some(nodes.iter().map(|n| n.rss_mb).sum());
        }
        Ok(ClusterStage {
            layout: layout.to_owned(),
            edges,
            cost_us_per_packet: (load.received > 0)
                .then(|| cpu_s_total / load.received as f64 * 1e6),
            load,
            measured_s,
            nodes,
            cpu_s_total,
            cost_ratio_to_single: None,
            host_rcvbuf_errors,
            receipts_out_of_range: self.receipts.out_of_range(),
            loss,
            generators: Vec::new(),
        })
    }
}

impl StageProbe for NodeProbe {
    fn entry(&self, device: usize) -> Option<SocketAddr> {
        self.placement
            .get(device)
            .and_then(|&p| self.entries.get(p))
            .copied()
    }

    fn receipts(&self) -> Option<&FrameReceipts> {
        Some(&self.receipts)
    }

    fn receipt_row(&self, device: usize) -> usize {
        let node = self.placement.get(device).copied().unwrap_or(0);
        self.receipts.row(node, device % self.groups.max(1))
    }

    fn begin(&self) -> Result<(), LoadError> {
        let r = self.read()?;
        *self.first.lock().unwrap_or_else(PoisonError::into_inner) = Some(r);
        Ok(())
    }

    fn end(&self) -> Result<(), LoadError> {
        let r = self.read()?;
        *self.last.lock().unwrap_or_else(PoisonError::into_inner) = Some(r);
        Ok(())
    }

    fn login_failure(&self, failed: usize) -> LoadError {
        let counters = self
            .nodes
            .iter()
            .map(|n| match MetricsReading::fetch(n.http) {
                Ok(m) => format!("{}: {}", n.name, login_counters(&m)),
                Err(e) => format!("{}: /metrics {e}", n.name),
            })
            .collect::<Vec<_>>()
            .join("; ");
        LoadError::NodeLogin { failed, counters }
    }
}
