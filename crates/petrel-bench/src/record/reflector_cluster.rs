//! The centre + edges benchmark (`benchmark` = `"reflector-cluster"`,
//! `petrel bench reflector --edges N --layout L`, issue 15 item 6,
//! draarl-interconnect §9): a centre and N edges as child processes, the
//! devices logged in through the edges by layout, and, in the same run, the
//! same load on one single-node reflector for comparison. Its parameters and
//! one element of `rounds` per stage (cluster and single-node stages
//! alternate).

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use super::reflector::{LoadResult, ReflectorParameters};

/// Every parameter of a cluster run, as recorded in `parameters`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ClusterParameters {
    /// The stages' parameters, as `petrel bench reflector` records them
    /// (`writers` and `max_frame_age_ms` apply to every node; `in_process`
    /// is false and there are no app receivers), flattened.
    #[serde(flatten)]
    pub stages: ReflectorParameters,
    /// Edge nodes (the centre gets no devices).
    pub edges: usize,
    /// `"local"`, `"distributed"` or `"cross"` (draarl-interconnect §9).
    pub layout: String,
    /// Whether each cluster stage was followed by the same stage on one
    /// single-node reflector.
    pub baseline: bool,
    /// The cap on devices per load-generator process given on the command
    /// line (`--devices-per-process`); without it, the open-files limit
    /// alone sets how the devices are split.
    #[serde(default)]
    pub devices_per_process: Option<usize>,
}

/// One node's share of a stage.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct NodeStage {
    /// `"centre"`, `"edge-a"`, `"edge-b"`, … or `"single"`.
    pub name: String,
    /// Devices logged in through this node (speakers included).
    pub devices: usize,
    /// CPU time of the whole process over the measurement (`utime` +
    /// `stime` of `/proc/<pid>/stat`), s.
    pub cpu_s: f64,
    /// `cpu_s` / measurement time, cores.
    pub cpu_cores: f64,
    /// Resident set size at the end of the measurement, MiB.
    pub rss_mb: f64,
    /// Peak resident set size since the process started (`VmHWM`), MiB.
    pub peak_rss_mb: f64,
    /// Increases over the measurement of the node's `/metrics` counters
    /// that count dropped voice, by series name.
    pub drops: BTreeMap<String, u64>,
    /// Frames none of this node's receivers got (receiving nodes only).
    pub whole_frames_missed: u64,
    /// Datagrams this node's receivers missed, whole frames and partial.
    pub datagrams_missed: u64,
    /// Of those, datagrams this node's own drop counters explain.
    pub attributed: u64,
}

/// One load-generator process of a stage (not a node: its CPU is not in
/// any node's cost).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct GeneratorStage {
    /// `gen-0`, `gen-1`, …
    pub name: String,
    /// Devices it held (one socket each).
    pub devices: usize,
    /// CPU time of all its threads over the measurement, s.
    pub cpu_s: f64,
    /// `cpu_s` / measurement time, cores.
    pub cpu_cores: f64,
    /// Resident set size at the end of the measurement, MiB.
    pub rss_mb: f64,
    /// Peak resident set size (`VmHWM`), MiB.
    pub peak_rss_mb: f64,
}

/// Where the stage's missing datagrams went (datagram counts); the four
/// parts sum to `missing` unless counters explain more than was missing.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct LossAttribution {
    /// Expected − received.
    pub missing: u64,
    /// Explained by the receiving nodes' own drop counters (fan-out frames
    /// dropped or expired, interconnect drops of arriving relays, failed
    /// sends).
    pub node_counters: u64,
    /// Explained by frames dropped upstream of the receiving node (the
    /// centre, or the speaker's own edge).
    pub upstream_drops: u64,
    /// Explained by the host's UDP receive-buffer drops (`RcvbufErrors`).
    pub socket_drops: u64,
    /// Not explained by any counter.
    pub unattributed: u64,
}

/// Results of one stage: one element of `rounds`.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct ClusterStage {
    /// The layout (`"local"`, `"distributed"`, `"cross"`), or `"single"`
    /// for the single-node stage.
    pub layout: String,
    /// Edge nodes (0 for the single-node stage).
    pub edges: usize,
    /// The load generator's figures: sent, expected, received, loss,
    /// latency, output rate (its `server_cpu_cores` and `server_rss_mb` do
    /// not apply: see `nodes`).
    pub load: LoadResult,
    /// Time between the first and last node readings, s.
    pub measured_s: f64,
    /// Every node: the centre first, then the edges; or the single node.
    pub nodes: Vec<NodeStage>,
    /// Σ of the nodes' `cpu_s`, s.
    pub cpu_s_total: f64,
    /// `cpu_s_total` / received packets, µs (null when nothing arrived).
    pub cost_us_per_packet: Option<f64>,
    /// This stage's `cost_us_per_packet` / the single-node stage's with the
    /// same devices, groups and interval (cluster stages with a baseline).
    pub cost_ratio_to_single: Option<f64>,
    /// The host's `RcvbufErrors` increase over the measurement (all sockets).
    pub host_rcvbuf_errors: u64,
    /// Receipts for a round or row outside the stage (should be 0).
    pub receipts_out_of_range: u64,
    /// The missing datagrams, attributed.
    pub loss: LossAttribution,
    /// The load-generator processes the devices were split over (their CPU
    /// sums to `load.loadgen_cpu_cores`).
    #[serde(default)]
    pub generators: Vec<GeneratorStage>,
}
