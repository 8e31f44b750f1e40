//! How the RUDP-under-impairment figures are computed from the transport's
//! and the relay's counters, and the run's outcome as tabulated (the recorded
//! fields are [`crate::record::rudp`]).

use super::transport::{EndpointTotals, FecTotals};
use crate::echo::EchoRound;
use crate::record::rudp::{FecFigures, RelayFigures, RudpRound};
use crate::record::ResultRecord;
use crate::table::Row;

impl FecFigures {
    fn new(t: &FecTotals, round_trips: u64) -> Self {
        Self {
            recoveries: t.recoveries,
            recoveries_per_1000_rt: (round_trips > 0)
                .then(|| t.recoveries as f64 * 1000.0 / round_trips as f64),
            groups_unrecoverable: t.groups_unrecoverable,
            parity_shards_sent: t.parity_shards_sent,
            max_parity: t.max_parity,
            policy_changes: t.policy_changes,
            sampled_peak_retained_bytes: t.sampled_peak_retained_bytes,
            connection_peak_retained_bytes: t.connection_peak_retained_bytes,
        }
    }
}

impl RudpRound {
    pub(crate) fn new(
        seed: u64,
        echo: EchoRound,
        payload: usize,
        totals: EndpointTotals,
        relay: RelayFigures,
        peak_rss_bytes: Option<u64>,
    ) -> Self {
        let app_bytes = (echo.sent + echo.server_echoed) * payload as u64;
        let all_round_trips = echo.round_trips + echo.warmup_round_trips;
        let ratio = |num: f64, den: u64| (den > 0).then(|| num / den as f64);
        Self {
            seed,
            app_bytes,
            udp_bytes_sent: totals.bytes_sent,
            datagrams_sent: totals.datagrams_sent,
            overhead_percent: ratio(totals.bytes_sent as f64, app_bytes).map(|r| (r - 1.0) * 100.0),
            retransmissions: totals.retransmissions,
            retransmissions_per_1000_rt: ratio(
                totals.retransmissions as f64 * 1000.0,
                all_round_trips,
            ),
            endpoint_send_waits: totals.send_waits,
            relay,
            fec: totals
                .fec
                .as_ref()
                .map(|f| FecFigures::new(f, all_round_trips)),
            peak_rss_bytes,
            echo,
        }
    }

    /// The figures summarised as min/median/max across rounds, by record key.
    pub(crate) fn headline(&self) -> [(&'static str, Option<f64>); 16] {
        let e = &self.echo;
        let fec = self.fec.as_ref();
        [
            ("round_trips_per_sec", Some(e.round_trips_per_sec)),
            ("rtt_p50_us", Some(e.rtt.p50_us as f64)),
            ("rtt_p95_us", Some(e.rtt.p95_us as f64)),
            ("rtt_p99_us", Some(e.rtt.p99_us as f64)),
            ("rtt_max_us", Some(e.rtt.max_us as f64)),
            ("cpu_percent", e.cpu_percent),
            ("peak_rss_bytes", self.peak_rss_bytes.map(|b| b as f64)),
            ("overhead_percent", self.overhead_percent),
            (
                "retransmissions_per_1000_rt",
                self.retransmissions_per_1000_rt,
            ),
            (
                "measured_loss_percent",
                Some(self.relay.measured_loss * 100.0),
            ),
            (
                "relay_route_peak_bytes",
                Some(self.relay.route_peak_bytes as f64),
            ),
            ("relay_lateness_p99_us", Some(self.relay.lateness_p99_us)),
            (
                "fec_recoveries_per_1000_rt",
                fec.and_then(|f| f.recoveries_per_1000_rt),
            ),
            (
                "fec_sampled_peak_retained_bytes",
                fec.map(|f| f.sampled_peak_retained_bytes as f64),
            ),
            ("fec_max_parity", fec.map(|f| f64::from(f.max_parity))),
            ("fec_policy_changes", fec.map(|f| f.policy_changes as f64)),
        ]
    }
}

/// The outcome of [`run_rudp_bench`](super::run_rudp_bench).
#[derive(Debug, Clone)]
pub struct RudpBenchReport {
    /// The JSON result envelope (`benchmark` = `"rudp"`).
    pub record: ResultRecord,
    /// The rounds, typed.
    pub rounds: Vec<RudpRound>,
}

impl RudpBenchReport {
    /// The summary-table row: medians across rounds, errors summed.
    pub fn summary_row(&self) -> Row {
        let median = |key: &str| self.record.summary.get(key).map(|s| s.median);
        Row {
            case: self.record.case.clone(),
            round_trips_per_sec: median("round_trips_per_sec").unwrap_or(0.0),
            p50_us: median("rtt_p50_us"),
            p99_us: median("rtt_p99_us"),
            cpu_percent: median("cpu_percent"),
            errors: self.record.errors.values().sum(),
            ok: self.record.ok,
        }
    }
}
