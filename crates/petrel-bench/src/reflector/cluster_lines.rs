//! The `key=value` lines of a cluster or single-node stage
//! ([`ClusterStage`]): one `CLUSTER` line with the stage's loss, latency,
//! output, total CPU, cost per delivered packet and loss attribution; one
//! `NODE` line per node with its CPU, memory, misses and drop counters; and
//! the `COST` line comparing a cluster stage with its single-node stage.

use crate::record::reflector_cluster::ClusterStage;

impl ClusterStage {
    /// The `CLUSTER key=value …` line.
    pub fn cluster_line(&self) -> String {
        let r = &self.load;
        let l = &self.loss;
        format!(
            "CLUSTER layout={} edges={} clients={} groups={} interval={}ms sent={} expected={} received={} loss_pct={:.4} output_pps={:.0} latency_avg_ms={:.3} latency_p50_ms={:.3} latency_p99_ms={:.3} latency_max_ms={:.3} cpu_s_total={:.3} cost_us_per_packet={} missing={} attributed_node_counters={} attributed_upstream={} attributed_socket={} unattributed={} host_rcvbuf_errors={} recv_errors={} receipts_out_of_range={} generators={} loadgen_cpu_cores={:.3}",
            self.layout, self.edges, r.clients, r.groups, r.interval_ms, r.sent, r.expected, r.received,
            r.loss_pct, r.output_pps, r.latency_avg_ms, r.latency_p50_ms, r.latency_p99_ms, r.latency_max_ms,
            self.cpu_s_total, opt(self.cost_us_per_packet), l.missing, l.node_counters, l.upstream_drops,
            l.socket_drops, l.unattributed, self.host_rcvbuf_errors, r.recv_errors, self.receipts_out_of_range,
            self.generators.len(), r.loadgen_cpu_cores
        )
    }

    /// One `NODE key=value …` line per node; `drops=` lists the drop
    /// counters that grew (`name:increase`, comma-separated; `-` for none).
    pub fn node_lines(&self) -> Vec<String> {
        self.nodes
            .iter()
            .map(|n| {
                let drops = if n.drops.is_empty() {
                    "-".to_owned()
                } else {
                    n.drops
                        .iter()
                        .map(|(k, v)| format!("{k}:{v}"))
                        .collect::<Vec<_>>()
                        .join(",")
                };
                format!(
                    "NODE layout={} clients={} interval={}ms name={} devices={} cpu_s={:.3} cpu_cores={:.3} rss_mb={:.1} peak_rss_mb={:.1} whole_frames_missed={} datagrams_missed={} attributed={} drops={drops}",
                    self.layout, self.load.clients, self.load.interval_ms, n.name, n.devices, n.cpu_s,
                    n.cpu_cores, n.rss_mb, n.peak_rss_mb, n.whole_frames_missed, n.datagrams_missed,
                    n.attributed
                )
            })
            .collect()
    }

    /// One `GENERATOR key=value …` line per load-generator process: its
    /// devices, CPU and memory (not part of any node's cost).
    pub fn generator_lines(&self) -> Vec<String> {
        self.generators
            .iter()
            .map(|g| {
                format!(
                    "GENERATOR layout={} clients={} interval={}ms name={} devices={} cpu_s={:.3} cpu_cores={:.3} rss_mb={:.1} peak_rss_mb={:.1}",
                    self.layout, self.load.clients, self.load.interval_ms, g.name, g.devices,
                    g.cpu_s, g.cpu_cores, g.rss_mb, g.peak_rss_mb
                )
            })
            .collect()
    }

    /// The `COST …` line of this cluster stage against `single`, the
    /// single-node stage with the same load.
    pub fn cost_line(&self, single: &Self) -> String {
        format!(
            "COST layout={} clients={} groups={} interval={}ms cluster_us_per_packet={} single_us_per_packet={} ratio={}",
            self.layout,
            self.load.clients,
            self.load.groups,
            self.load.interval_ms,
            opt(self.cost_us_per_packet),
            opt(single.cost_us_per_packet),
            self.cost_ratio_to_single
                .map_or_else(|| "na".to_owned(), |r| format!("{r:.3}"))
        )
    }

    /// Sets [`ClusterStage::cost_ratio_to_single`] from `single`'s cost.
    pub fn compare_with(&mut self, single: &Self) {
        self.cost_ratio_to_single = match (self.cost_us_per_packet, single.cost_us_per_packet) {
            (Some(c), Some(s)) if s > 0.0 => Some(c / s),
            _ => None,
        };
    }
}

fn opt(v: Option<f64>) -> String {
    v.map_or_else(|| "na".to_owned(), |v| format!("{v:.3}"))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::record::reflector_cluster::{GeneratorStage, NodeStage};

    #[test]
    fn lines_and_ratio() {
        let mut cluster = ClusterStage {
            layout: "cross".into(),
            edges: 3,
            cost_us_per_packet: Some(3.0),
            nodes: vec![NodeStage {
                name: "edge-b".into(),
                drops: [("petrel_reflector_fanout_frames_dropped_total".to_owned(), 5)].into(),
                ..NodeStage::default()
            }],
            generators: vec![GeneratorStage {
                name: "gen-1".into(),
                devices: 10_000,
                cpu_s: 2.5,
                cpu_cores: 0.5,
                rss_mb: 40.0,
                peak_rss_mb: 41.0,
            }],
            ..ClusterStage::default()
        };
        assert_eq!(
            cluster.generator_lines(),
            ["GENERATOR layout=cross clients=0 interval=0ms name=gen-1 devices=10000 cpu_s=2.500 cpu_cores=0.500 rss_mb=40.0 peak_rss_mb=41.0"]
        );
        assert!(cluster
            .cluster_line()
            .ends_with(" generators=1 loadgen_cpu_cores=0.000"));
        let single = ClusterStage {
            layout: "single".into(),
            cost_us_per_packet: Some(2.0),
            ..ClusterStage::default()
        };
        cluster.compare_with(&single);
        assert_eq!(cluster.cost_ratio_to_single, Some(1.5));
        assert!(cluster
            .cost_line(&single)
            .ends_with("cluster_us_per_packet=3.000 single_us_per_packet=2.000 ratio=1.500"));
        assert!(cluster
            .cluster_line()
            .starts_with("CLUSTER layout=cross edges=3 "));
        assert!(cluster.node_lines()[0]
            .ends_with("name=edge-b devices=0 cpu_s=0.000 cpu_cores=0.000 rss_mb=0.0 peak_rss_mb=0.0 whole_frames_missed=0 datagrams_missed=0 attributed=0 drops=petrel_reflector_fanout_frames_dropped_total:5"));
        let nothing = ClusterStage::default();
        cluster.compare_with(&nothing);
        assert_eq!(cluster.cost_ratio_to_single, None);
    }
}
