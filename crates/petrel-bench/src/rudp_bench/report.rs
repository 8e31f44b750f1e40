//! Figures of the RUDP-under-impairment benchmark, as recorded and tabulated.

use petrel_netem::{LinkConfig, LinkStats, RelayStats};
use serde::Serialize;

use super::config::{FecMode, IoModel};
use super::transport::{EndpointTotals, FecTotals};
use crate::echo::EchoRound;
use crate::record::ResultRecord;
use crate::table::Row;

/// Every parameter of a run, as recorded in `parameters`.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct RudpParameters {
    /// Message size including the 16-byte header (bytes).
    pub payload: usize,
    /// Clients.
    pub clients: usize,
    /// Messages in flight per client.
    pub window: usize,
    /// Warm-up (s).
    pub warmup_s: f64,
    /// Measured interval (s).
    pub seconds: f64,
    /// Most time waited for outstanding echoes after the measured interval (s).
    pub drain_limit_s: f64,
    /// Rounds.
    pub rounds: u32,
    /// Runtime layout.
    pub io_model: IoModel,
    /// Workers of the shared runtime, or number of shard runtimes.
    pub io_threads: usize,
    /// FEC of every connection.
    pub fec: FecMode,
    /// The FEC scheme as configured (`petrel::FecScheme`, debug form).
    pub fec_scheme: String,
    /// How long an open FEC group waits for more datagrams before its parity goes (ms).
    pub fec_group_wait_ms: f64,
    /// Named impairment profile.
    pub profile: String,
    /// Conditions of each direction after overrides (probabilities as fractions,
    /// delays in ms).
    pub link: LinkConfig,
    /// Seed of round 0 (round `i` uses `seed + i`).
    pub seed: u64,
    /// ARQ settings of every connection.
    pub kcp: KcpSummary,
    /// `SO_RCVBUF`/`SO_SNDBUF` requested for the relay's sockets (bytes).
    pub relay_socket_buffer: usize,
}

/// The ARQ settings that shape the results (`petrel::KcpConfig`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct KcpSummary {
    /// Largest datagram, bytes.
    pub mtu: usize,
    /// Send window, segments.
    pub snd_wnd: u16,
    /// Receive window, segments.
    pub rcv_wnd: u16,
    /// Flush interval, ms.
    pub interval_ms: u128,
    /// RTO floor, ms.
    pub min_rto_ms: u128,
    /// Nodelay mode.
    pub nodelay: bool,
    /// Fast retransmit threshold (0 = off).
    pub fast_resend: u32,
}

impl From<&petrel::KcpConfig> for KcpSummary {
    fn from(k: &petrel::KcpConfig) -> Self {
        Self {
            mtu: k.mtu,
            snd_wnd: k.snd_wnd,
            rcv_wnd: k.rcv_wnd,
            interval_ms: k.interval.as_millis(),
            min_rto_ms: k.min_rto.as_millis(),
            nodelay: k.nodelay,
            fast_resend: k.fast_resend,
        }
    }
}

/// What the relay saw in one round.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct RelayFigures {
    /// Loss ratio the configured conditions should give, per direction (fraction).
    pub configured_loss: f64,
    /// Loss drops / packets offered, both directions together (fraction).
    pub measured_loss: f64,
    /// Client → server counters over every route.
    pub upstream: LinkStats,
    /// Server → client counters over every route.
    pub downstream: LinkStats,
    /// Most payload bytes any one route held at once (queued or delayed).
    pub route_peak_bytes: u64,
    /// Most packets any one route held at once.
    pub route_peak_packets: u64,
    /// Datagrams the relay dropped because its socket send buffer was full.
    pub send_dropped: u64,
    /// Relay send and receive errors.
    pub io_errors: u64,
    /// 99th percentile of the relay's send time − scheduled time (µs).
    pub lateness_p99_us: f64,
}

impl RelayFigures {
    pub(crate) fn new(stats: &RelayStats, link: &LinkConfig) -> Self {
        let mut both = stats.upstream_total;
        both.merge(&stats.downstream_total);
        Self {
            configured_loss: link.configured_loss(),
            measured_loss: both.observed_loss(),
            upstream: stats.upstream_total,
            downstream: stats.downstream_total,
            route_peak_bytes: stats
                .routes
                .iter()
                .map(|r| r.peak_held_bytes)
                .max()
                .unwrap_or(0),
            route_peak_packets: stats
                .routes
                .iter()
                .map(|r| r.peak_held_packets)
                .max()
                .unwrap_or(0),
            send_dropped: stats.send_dropped,
            io_errors: stats.send_errors + stats.recv_errors,
            lateness_p99_us: stats.lateness.p99_us,
        }
    }
}

/// FEC figures of one round, over every connection (both sides).
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct FecFigures {
    /// Data shards rebuilt from parity, in packets.
    pub recoveries: u64,
    /// Recoveries per 1000 round trips of the whole round (warm-up included).
    pub recoveries_per_1000_rt: Option<f64>,
    /// Groups with more shards lost than parity could repair.
    pub groups_unrecoverable: u64,
    /// Parity shards sent, in packets.
    pub parity_shards_sent: u64,
    /// Largest parity any group carried, in packets.
    pub max_parity: u8,
    /// Adaptive policy parity changes.
    pub policy_changes: u64,
    /// Peak of the retained bytes of all connections together, sampled every 100 ms
    /// (bytes).
    pub sampled_peak_retained_bytes: u64,
    /// Largest exact retained-bytes peak of any one connection (bytes).
    pub connection_peak_retained_bytes: u64,
}

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

/// Figures of one round: the echo harness's plus the transport's and the relay's.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct RudpRound {
    /// Relay seed of this round.
    pub seed: u64,
    /// Throughput, RTT, CPU and error counters of the echo harness.
    #[serde(flatten)]
    pub echo: EchoRound,
    /// Application bytes both ways: messages sent by clients plus messages echoed by
    /// the server, times the payload (bytes, whole round).
    pub app_bytes: u64,
    /// UDP payload bytes written by the server and every client endpoint (bytes,
    /// whole round, handshake, acks and retransmissions included).
    pub udp_bytes_sent: u64,
    /// Datagrams written by all endpoints.
    pub datagrams_sent: u64,
    /// `(udp_bytes_sent / app_bytes − 1) × 100` (%).
    pub overhead_percent: Option<f64>,
    /// ARQ retransmissions (timeout + fast) of every connection, both sides.
    pub retransmissions: u64,
    /// Retransmissions per 1000 round trips of the whole round (warm-up included).
    pub retransmissions_per_1000_rt: Option<f64>,
    /// Datagrams the endpoints skipped because a socket buffer was full.
    pub endpoint_send_dropped: u64,
    /// Relay counters.
    pub relay: RelayFigures,
    /// FEC figures; `None` when the connections run ARQ only.
    pub fec: Option<FecFigures>,
    /// Peak resident set size of the process after this round (bytes).
    pub peak_rss_bytes: Option<u64>,
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
            endpoint_send_dropped: totals.send_dropped,
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
