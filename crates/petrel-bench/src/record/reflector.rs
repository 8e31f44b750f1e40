//! The reflector fan-out benchmark (`benchmark` = `"reflector"`,
//! `petrel bench reflector`, draarl-v1 §7 / benchmarks §D): its parameters
//! and the figures of one stage (one element of `rounds` per stage).

use serde::{Deserialize, Serialize};

/// Every parameter of `petrel bench reflector`, as recorded in `parameters`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ReflectorParameters {
    /// Device counts run, ascending, one level each.
    pub levels: Vec<usize>,
    /// Groups, which is also the number of simultaneous speakers.
    pub groups: usize,
    /// Voice intervals per speaker tried at each level, slowest first, ms.
    pub interval_ms: Vec<u64>,
    /// Voice DATA bytes per packet, bytes.
    pub payload: usize,
    /// Measurement time per stage, s.
    pub duration_s: u64,
    /// Reflector send paths.
    pub writers: usize,
    /// Reflector frame-age limit, ms.
    pub max_frame_age_ms: u64,
    /// Whether the reflector ran inside the load generator's process
    /// instead of as a child `petrel reflector serve`.
    pub in_process: bool,
    /// UDP ghost receivers per stage (draarl-apps §2).
    #[serde(default)]
    pub ghosts: usize,
    /// WebSocket receivers per stage (draarl-apps §4).
    #[serde(default)]
    pub ws: usize,
}

/// Loss and latency of one kind of receiver in a stage.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct ReceiverKindResult {
    /// `"device"` (physical, Type 2 login), `"ghost"` (UDP app session) or
    /// `"websocket"` (web client session).
    pub kind: String,
    /// Receivers of this kind online.
    pub receivers: usize,
    /// Frames they should have received: Σ over sent packets of the
    /// receivers of this kind in the speaker's group (the speaker excluded).
    pub expected: u64,
    /// Marked frames of the stage they received.
    pub received: u64,
    /// 100 × (expected − received) / expected.
    pub loss_pct: f64,
    /// Mean latency, ms.
    pub latency_avg_ms: f64,
    /// 99th-percentile latency, ms.
    pub latency_p99_ms: f64,
    /// Worst latency, ms.
    pub latency_max_ms: f64,
    /// Frames whose Reserved was not the source group (app sessions) or 0
    /// (devices), draarl-apps §2.7; anything but 0 is a reflector bug.
    pub wrong_reserved: u64,
}

/// Results of one stage: one element of `rounds`, also printed as a
/// `RESULT key=value` line.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct LoadResult {
    /// Devices online.
    pub clients: usize,
    /// Groups / speakers.
    pub groups: usize,
    /// Datagram size, bytes.
    pub packet_bytes: usize,
    /// Voice interval, ms.
    pub interval_ms: u64,
    /// Voice packets sent by speakers.
    pub sent: u64,
    /// Σ (group size − 1) over sent packets.
    pub expected: u64,
    /// Marked packets received in this stage.
    pub received: u64,
    /// 100 × (expected − received) / expected.
    pub loss_pct: f64,
    /// Received packets per second of measurement.
    pub output_pps: f64,
    /// Application-layer output, Mbit/s.
    pub output_mbps: f64,
    /// Mean latency, ms.
    pub latency_avg_ms: f64,
    /// Median latency, ms.
    #[serde(default)]
    pub latency_p50_ms: f64,
    /// 95th-percentile latency, ms.
    pub latency_p95_ms: f64,
    /// 99th-percentile latency, ms.
    pub latency_p99_ms: f64,
    /// Worst latency, ms.
    pub latency_max_ms: f64,
    /// Reflector CPU / wall time, cores: the child process's threads, or
    /// in-process the `refl-*` threads (schedstat; includes whatever softirq
    /// work ran while they were on a CPU).
    pub server_cpu_cores: f64,
    /// The load generator's CPU / wall time, cores (in-process: every
    /// thread but `refl-*`).
    pub loadgen_cpu_cores: f64,
    /// The load generator's receive threads alone (part of
    /// `loadgen_cpu_cores`), cores.
    pub loadgen_recv_cpu_cores: f64,
    /// Whole host, all processes: Δ(user + nice + system + irq + softirq)
    /// of `/proc/stat` over all CPUs / wall time, cores.
    pub host_busy_cores: f64,
    /// Whole host softirq time (part of `host_busy_cores`), cores.
    pub host_softirq_cores: f64,
    /// Whole host steal time (hypervisor ran something else), cores.
    pub host_steal_cores: f64,
    /// Host CPUs online.
    pub host_cpus: usize,
    /// 1-minute load average when the stage started (other work on the host).
    pub host_load_1m: f64,
    /// Load-generator `recv` errors other than `EAGAIN`.
    pub recv_errors: u64,
    /// Of `frames_dropped`, those dropped for exceeding the frame-age limit
    /// (the rest were evicted from a full queue).
    pub frames_expired: u64,
    /// Most frames the reflector had queued at once.
    pub queue_high_water: u64,
    /// Longest time the reflector took to send one frame to all targets, ms.
    pub max_dispatch_ms: f64,
    /// This process's RSS at the end, MiB: the load generator, plus the
    /// reflector when it runs in-process.
    pub process_rss_mb: f64,
    /// The reflector child's RSS at the end, MiB (`None` in-process).
    pub server_rss_mb: Option<f64>,
    /// `"child"` or `"in-process"`: where the reflector ran, which decides
    /// what `server_cpu_cores` and the RSS fields cover.
    pub server_process: String,
    /// Whole frames the reflector evicted or expired.
    pub frames_dropped: u64,
    /// Devices connected per second during login.
    pub connect_per_s: f64,
    /// The same figures per kind of receiver; the stage's totals above
    /// cover all of them.
    #[serde(default)]
    pub by_kind: Vec<ReceiverKindResult>,
}
