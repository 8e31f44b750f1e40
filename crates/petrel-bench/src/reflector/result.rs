//! The `RESULT key=value` line of one load stage (the reference's output,
//! draarl-v1 §7.3, plus this generator's own fields); the stage's recorded
//! fields are [`crate::record::reflector::LoadResult`].

use crate::record::reflector::LoadResult;

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
        ) + &self.kind_fields()
    }

    /// ` <kind>_loss_pct=… <kind>_latency_p99_ms=… …` for each receiver kind
    /// when the stage had app receivers (empty otherwise).
    pub fn kind_fields(&self) -> String {
        if self.by_kind.len() < 2 {
            return String::new();
        }
        self.by_kind
            .iter()
            .map(|k| {
                format!(
                    " {0}_receivers={1} {0}_expected={2} {0}_received={3} {0}_loss_pct={4:.4} {0}_latency_avg_ms={5:.3} {0}_latency_p99_ms={6:.3} {0}_latency_max_ms={7:.3} {0}_wrong_reserved={8}",
                    k.kind, k.receivers, k.expected, k.received, k.loss_pct, k.latency_avg_ms,
                    k.latency_p99_ms, k.latency_max_ms, k.wrong_reserved
                )
            })
            .collect()
    }
}
