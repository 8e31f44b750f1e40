//! The result of one load stage and its `RESULT key=value` line (the
//! reference's output, draarl-v1 §7.3, plus this generator's own fields).

/// Results of one stage; printed as a `RESULT key=value` line.
#[derive(Debug, Clone, Default, PartialEq, serde::Serialize)]
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
    pub server_process: &'static str,
    /// Whole frames the reflector evicted or expired.
    pub frames_dropped: u64,
    /// Devices connected per second during login.
    pub connect_per_s: f64,
}

impl LoadResult {
    /// The `RESULT key=value …` line.
    pub fn result_line(&self) -> String {
        format!(
            "RESULT clients={} groups={} senders={} type=5 packet_bytes={} interval={}ms sent={} expected={} received={} loss_pct={:.4} output_pps={:.0} output_mbps={:.2} latency_avg_ms={:.3} latency_p95_ms={:.3} latency_p99_ms={:.3} latency_max_ms={:.3} server_cpu_cores={:.3} loadgen_cpu_cores={:.3} process_rss_mb={:.1} frames_dropped={} connect_per_s={:.0} loadgen_recv_cpu_cores={:.3} host_busy_cores={:.3} host_softirq_cores={:.3} host_steal_cores={:.3} host_cpus={} host_load_1m={:.2} recv_errors={} frames_expired={} queue_high_water={} max_dispatch_ms={:.3} server_process={} server_rss_mb={}",
            self.clients, self.groups, self.groups, self.packet_bytes, self.interval_ms, self.sent, self.expected,
            self.received, self.loss_pct, self.output_pps, self.output_mbps, self.latency_avg_ms, self.latency_p95_ms, self.latency_p99_ms,
            self.latency_max_ms, self.server_cpu_cores, self.loadgen_cpu_cores, self.process_rss_mb, self.frames_dropped, self.connect_per_s,
            self.loadgen_recv_cpu_cores, self.host_busy_cores, self.host_softirq_cores, self.host_steal_cores, self.host_cpus,
            self.host_load_1m, self.recv_errors, self.frames_expired, self.queue_high_water, self.max_dispatch_ms,
            self.server_process, self.server_rss_mb.map_or_else(|| "na".to_owned(), |m| format!("{m:.1}"))
        )
    }
}
