//! The RUDP-under-impairment benchmark (`benchmark` = `"rudp"`,
//! `specs/benchmarks.md` §B): its parameters, the runtime layout and FEC
//! vocabulary they use, and the figures of one round (the echo figures plus
//! the transport's and the relay's) — for Petrel, and for kcptun as the peer
//! (`--peer kcptun`: its parameters, tuning and rounds).

use std::collections::BTreeMap;
use std::fmt;

use petrel_netem::{LinkConfig, LinkStats, RelayStats};
use serde::{Deserialize, Serialize};

use super::echo::EchoRound;

/// How the tokio runtimes are laid out (`specs/benchmarks.md` §A `--io-model`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum IoModel {
    /// One runtime with `io_threads` workers (1: a current-thread runtime) runs the
    /// server, the clients and the harness.
    Shared,
    /// `io_threads` single-thread runtimes, each on its own thread, own the client
    /// endpoints (socket reader and timers), dealt out round-robin; the server and
    /// the harness's per-client send/receive tasks run on one more current-thread
    /// runtime.
    Sharded,
}

/// Forward error correction of the connections under test.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum FecMode {
    /// ARQ only.
    None,
    /// Fixed 8 data + 2 parity shards per group (the reference report's fixed mode).
    Fixed,
    /// Up to 8 data and 4 parity shards, parity chosen from the receiver's loss
    /// reports for a 10⁻³ unrecoverable-group target ([`petrel::FecScheme::ADAPTIVE_DEFAULT`]).
    Adaptive,
}

/// The shape of a fixed FEC group: `data_shards` data + `parity_shards` parity
/// packets, written `D+P` (e.g. `8+2`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct FecShape {
    /// Data packets per group.
    pub data_shards: u8,
    /// Parity packets per group.
    pub parity_shards: u8,
}

impl fmt::Display for FecShape {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}+{}", self.data_shards, self.parity_shards)
    }
}

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
    /// Data + parity shards of every group with `fec` = `fixed`; null otherwise.
    pub fec_shape: Option<FecShape>,
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
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
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
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
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
    /// The figures of a relay's counters `stats` under the conditions `link`.
    pub fn new(stats: &RelayStats, link: &LinkConfig) -> Self {
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
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
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

/// Figures of one round: the echo harness's plus the transport's and the relay's.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
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
    /// Times the endpoints' I/O drivers found a socket buffer full and waited
    /// (nothing is dropped for it; absent, read as 0, in results from before the
    /// batched driver, whose `endpoint_send_dropped` this replaces).
    #[serde(default)]
    pub endpoint_send_waits: u64,
    /// Relay counters.
    pub relay: RelayFigures,
    /// FEC figures; `None` when the connections run ARQ only.
    pub fec: Option<FecFigures>,
    /// Peak resident set size of the process after this round (bytes).
    pub peak_rss_bytes: Option<u64>,
}

/// Every parameter of a `--peer kcptun` run, as recorded in `parameters`: the
/// echo shape, impairment and seed as for Petrel, and the flags both kcptun
/// processes ran with.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct KcptunParameters {
    /// The peer and its version, e.g. `"kcptun 20210922+ds-1+b6"` (the Debian
    /// package version when `--version` says only `SELFBUILD`).
    pub peer: String,
    /// Message size including the 16-byte header (bytes).
    pub payload: usize,
    /// TCP clients of `kcptun-client`.
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
    /// `"none"` (`--datashard 0 --parityshard 0`) or `"fixed"`.
    pub fec: FecMode,
    /// Data + parity shards with `fec` = `fixed`; null otherwise.
    pub fec_shape: Option<FecShape>,
    /// Named impairment profile.
    pub profile: String,
    /// Conditions of each direction after overrides (probabilities as fractions,
    /// delays in ms).
    pub link: LinkConfig,
    /// Seed of round 0 (round `i` uses `seed + i`).
    pub seed: u64,
    /// The flags both `kcptun-client` and `kcptun-server` ran with.
    pub tuning: KcptunTuning,
    /// Period of kcptun's SNMP log (`--snmpperiod`, s).
    pub snmp_period_s: u64,
    /// `SO_RCVBUF`/`SO_SNDBUF` requested for the relay's sockets (bytes).
    pub relay_socket_buffer: usize,
}

/// kcptun's tuning flags, chosen to match Petrel's `KcpConfig` field by field.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct KcptunTuning {
    /// `--crypt` (`"none"`: no encryption, as Petrel's RUDP).
    pub crypt: String,
    /// `false`: `--nocomp` (no snappy compression).
    pub compression: bool,
    /// `--mode` (`"manual"`: the four values below instead of a preset).
    pub mode: String,
    /// `--nodelay 1` (RTO floor 30 ms, no RTO doubling).
    pub nodelay: bool,
    /// `--interval`, flush interval (ms).
    pub interval_ms: u64,
    /// `--resend`, fast retransmit after this many skipping acks (0 = off).
    pub resend: u32,
    /// `--nc 1`: no congestion window.
    pub no_congestion_window: bool,
    /// `--acknodelay`: acks flushed at once rather than at the next interval.
    pub ack_nodelay: bool,
    /// `--mtu`, largest UDP payload (bytes, FEC header included).
    pub mtu: usize,
    /// `--sndwnd`, send window (segments).
    pub snd_wnd: u16,
    /// `--rcvwnd`, receive window (segments).
    pub rcv_wnd: u16,
    /// `--datashard` (0 with FEC off).
    pub data_shards: u8,
    /// `--parityshard` (0 with FEC off).
    pub parity_shards: u8,
    /// `--conn` of `kcptun-client`: KCP sessions, TCP clients dealt to them
    /// round-robin (one per client, as Petrel's one connection per client).
    pub conn: usize,
    /// `--smuxver`, the stream multiplexer's version.
    pub smux_version: u8,
    /// `--sockbuf`, UDP socket buffer of each process (bytes).
    pub sockbuf: usize,
}

/// Figures of one `--peer kcptun` round: the echo harness's, the relay's,
/// kcptun's own counters and the CPU of its processes.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct KcptunRound {
    /// Relay seed of this round.
    pub seed: u64,
    /// Throughput, RTT, CPU (of the bench process only) and error counters of
    /// the echo harness.
    #[serde(flatten)]
    pub echo: EchoRound,
    /// Application bytes both ways: messages sent by clients plus messages echoed by
    /// the server, times the payload (bytes, whole round).
    pub app_bytes: u64,
    /// UDP payload bytes written by both kcptun processes (SNMP `OutBytes`,
    /// whole round); null without SNMP.
    pub udp_bytes_sent: Option<u64>,
    /// `(udp_bytes_sent / app_bytes − 1) × 100` (%).
    pub overhead_percent: Option<f64>,
    /// Segments retransmitted by both processes (SNMP `RetransSegs`: timeout,
    /// fast and early).
    pub retransmissions: Option<u64>,
    /// Retransmissions per 1000 round trips of the whole round (warm-up included).
    pub retransmissions_per_1000_rt: Option<f64>,
    /// Packets rebuilt from parity by both processes (SNMP `FECRecovered`).
    pub fec_recoveries: Option<u64>,
    /// FEC recoveries per 1000 round trips of the whole round (warm-up included).
    pub fec_recoveries_per_1000_rt: Option<f64>,
    /// CPU of `kcptun-client` over the measured interval (%, 100 = one core).
    pub client_cpu_percent: Option<f64>,
    /// CPU of `kcptun-server` over the measured interval (%, 100 = one core).
    pub server_cpu_percent: Option<f64>,
    /// Sum of both kcptun processes' CPU (%), on top of the bench process's
    /// `cpu_percent`.
    pub children_cpu_percent: Option<f64>,
    /// Last SNMP row of `kcptun-client`, by kcp-go's column name (counts and
    /// bytes since the process started); null when none was read.
    pub client_snmp: Option<BTreeMap<String, u64>>,
    /// Last SNMP row of `kcptun-server`, as `client_snmp`.
    pub server_snmp: Option<BTreeMap<String, u64>>,
    /// Why the SNMP rows are missing, when they are.
    pub snmp_error: Option<String>,
    /// Relay counters.
    pub relay: RelayFigures,
    /// Peak resident set size of the bench process after this round (bytes).
    pub peak_rss_bytes: Option<u64>,
}
