//! How a kcptun round's figures are computed from the echo harness, the relay,
//! kcptun's SNMP rows and its processes' CPU, and the run's outcome as
//! tabulated (the recorded fields are [`crate::record::rudp::KcptunRound`]).

use std::collections::BTreeMap;

use super::snmp;
use crate::echo::EchoRound;
use crate::record::rudp::{KcptunRound, KcptunTuning, RelayFigures};
use crate::record::ResultRecord;
use crate::table::Row;

/// CPU of both kcptun processes over the measured interval (%, 100 = one core).
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub(crate) struct ChildrenCpu {
    pub client: Option<f64>,
    pub server: Option<f64>,
}

/// SNMP rows of both processes, or why there are none.
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum SnmpRows {
    /// Last rows of `kcptun-client` and `kcptun-server`.
    Read {
        client: BTreeMap<String, u64>,
        server: BTreeMap<String, u64>,
    },
    /// Why they could not be read.
    Missing(String),
}

impl KcptunRound {
    pub(crate) fn new(
        seed: u64,
        echo: EchoRound,
        payload: usize,
        snmp_rows: SnmpRows,
        cpu: ChildrenCpu,
        relay: RelayFigures,
        peak_rss_bytes: Option<u64>,
    ) -> Self {
        let app_bytes = (echo.sent + echo.server_echoed) * payload as u64;
        let all_round_trips = echo.round_trips + echo.warmup_round_trips;
        let per_1000 = |n: Option<u64>| {
            n.filter(|_| all_round_trips > 0)
                .map(|n| n as f64 * 1000.0 / all_round_trips as f64)
        };
        let (client_snmp, server_snmp, snmp_error) = match snmp_rows {
            SnmpRows::Read { client, server } => (Some(client), Some(server), None),
            SnmpRows::Missing(why) => (None, None, Some(why)),
        };
        let rows: Vec<&BTreeMap<String, u64>> =
            client_snmp.iter().chain(server_snmp.iter()).collect();
        let counter = |key: &str| (!rows.is_empty()).then(|| snmp::sum(&rows, key)).flatten();
        let udp_bytes_sent = counter("OutBytes");
        let retransmissions = counter("RetransSegs");
        let fec_recoveries = counter("FECRecovered");
        Self {
            seed,
            app_bytes,
            udp_bytes_sent,
            overhead_percent: udp_bytes_sent
                .filter(|_| app_bytes > 0)
                .map(|b| (b as f64 / app_bytes as f64 - 1.0) * 100.0),
            retransmissions,
            retransmissions_per_1000_rt: per_1000(retransmissions),
            fec_recoveries,
            fec_recoveries_per_1000_rt: per_1000(fec_recoveries),
            client_cpu_percent: cpu.client,
            server_cpu_percent: cpu.server,
            children_cpu_percent: cpu.client.zip(cpu.server).map(|(c, s)| c + s),
            client_snmp,
            server_snmp,
            snmp_error,
            relay,
            peak_rss_bytes,
            echo,
        }
    }

    /// The figures summarised as min/median/max across rounds, by record key.
    ///
    /// `cpu_percent` is the bench process's plus both kcptun processes', so the
    /// CPU column compares with a Petrel row's, where the whole stack runs in the
    /// bench process; `harness_cpu_percent` is the bench process's alone.
    pub(crate) fn headline(&self) -> [(&'static str, Option<f64>); 16] {
        let e = &self.echo;
        let total = match (e.cpu_percent, self.children_cpu_percent) {
            (Some(harness), Some(children)) => Some(harness + children),
            _ => None,
        };
        [
            ("round_trips_per_sec", Some(e.round_trips_per_sec)),
            ("rtt_p50_us", Some(e.rtt.p50_us as f64)),
            ("rtt_p95_us", Some(e.rtt.p95_us as f64)),
            ("rtt_p99_us", Some(e.rtt.p99_us as f64)),
            ("rtt_max_us", Some(e.rtt.max_us as f64)),
            ("cpu_percent", total),
            ("harness_cpu_percent", e.cpu_percent),
            ("children_cpu_percent", self.children_cpu_percent),
            ("client_cpu_percent", self.client_cpu_percent),
            ("server_cpu_percent", self.server_cpu_percent),
            ("peak_rss_bytes", self.peak_rss_bytes.map(|b| b as f64)),
            ("overhead_percent", self.overhead_percent),
            (
                "retransmissions_per_1000_rt",
                self.retransmissions_per_1000_rt,
            ),
            (
                "fec_recoveries_per_1000_rt",
                self.fec_recoveries_per_1000_rt,
            ),
            (
                "measured_loss_percent",
                Some(self.relay.measured_loss * 100.0),
            ),
            ("relay_lateness_p99_us", Some(self.relay.lateness_p99_us)),
        ]
    }
}

/// The outcome of [`run_kcptun_bench`](super::run_kcptun_bench).
#[derive(Debug, Clone)]
pub struct KcptunBenchReport {
    /// The JSON result envelope (`benchmark` = `"rudp"`, `parameters.peer` names
    /// kcptun).
    pub record: ResultRecord,
    /// The rounds, typed.
    pub rounds: Vec<KcptunRound>,
    /// The flags both processes ran with.
    pub tuning: KcptunTuning,
    /// `"kcptun <version>"`.
    pub peer: String,
}

impl KcptunBenchReport {
    /// The summary-table row: medians across rounds, errors summed. Its CPU is the
    /// bench process's plus kcptun's (`cpu_percent` of the summary).
    pub fn summary_row(&self) -> Row {
        Row::from_record(&self.record)
    }
}
