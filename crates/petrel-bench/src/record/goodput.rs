//! The bulk goodput benchmark (`benchmark` = `"goodput"`,
//! `specs/benchmarks.md` §C): its parameters (the case and the transport's
//! settings) and the figures of one repetition.

use super::endpoint_io::EndpointIo;
use serde::{Deserialize, Serialize};

/// Every parameter of a goodput case, as recorded in `parameters`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct GoodputParameters {
    /// Transport under test: `"rudp"`, `"quic"`, `"quinn"`, `"tcp"`, or a QUIC
    /// peer pair `"aioquic"`, `"aioquic-quic"`, `"quic-aioquic"`, `"ngtcp2"`
    /// (`<client>-<server>`; `petrel report` draws one bar per transport).
    pub protocol: String,
    /// The case as configured.
    pub case: GoodputCase,
    /// Which way the bytes flow: `"client to server"` (Petrel's own transports) or
    /// `"server to client"` (the peers' file download).
    pub direction: String,
    /// Where the RTT figures come from, in words (`"none"` when not measured).
    pub rtt_source: String,
    /// What the CPU figures count, in words.
    pub cpu_source: String,
    /// The named scenario this case belongs to, with its expected outcome.
    pub scenario: Option<ScenarioExpectation>,
    /// Link rate goodput is compared with, bit/s; `None` over loopback.
    pub link_rate_bps: Option<u64>,
    /// Bytes per application write, bytes.
    pub chunk_bytes: usize,
    /// How long one transfer may take before it counts as incomplete, s.
    pub transfer_timeout_s: f64,
    /// The runtime layout, in words.
    pub runtime: String,
    /// The transport's settings that shape the result.
    pub transport_settings: TransportSettings,
}

/// One goodput case: transport, controller, link and size.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct GoodputCase {
    /// Transport: `"rudp"`, `"quic"`, `"quinn"` or `"tcp"`.
    pub transport: String,
    /// Congestion controller (`petrel_proto::cc` name, e.g. `"cubic"`).
    pub cc: String,
    /// Link: `"none"` (plain loopback) or `"p2p"` (the emulated link).
    pub profile: String,
    /// Link rate of each direction with `p2p`, bit/s.
    pub bandwidth_bps: u64,
    /// One-way delay of each direction with `p2p`, ms.
    pub delay: f64,
    /// Drop-tail queue of each direction with `p2p`, packets.
    pub queue_packets: usize,
    /// Drop-tail queue limit of each direction with `p2p`, bytes (null: packets only).
    pub queue_bytes: Option<usize>,
    /// Random loss of each direction with `p2p`, % of packets.
    pub loss_percent: f64,
    /// Bytes transferred (in `direction`), bytes.
    pub size_bytes: u64,
    /// Transfers (repetitions) per case.
    pub repetitions: u32,
    /// Seed of repetition 0; repetition i uses seed + i.
    pub seed: u64,
}

/// The settings of the transport under test.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(untagged)]
pub enum TransportSettings {
    /// Petrel RUDP.
    Rudp {
        /// Largest datagram, bytes.
        mtu_bytes: usize,
        /// Send window, packets.
        snd_wnd_packets: u16,
        /// Receive window, packets.
        rcv_wnd_packets: u16,
        /// Whether both ends ran KCP stream mode (`KcpConfig::stream`). Records
        /// written before the field existed ran message mode.
        #[serde(default)]
        stream_mode: bool,
        /// `SO_SNDBUF`/`SO_RCVBUF` requested, bytes.
        socket_buffer_bytes: usize,
    },
    /// The Petrel QUIC transport, with a Petrel or a quinn controller.
    Quic {
        /// Per-stream flow-control window, bytes.
        stream_receive_window_bytes: u64,
        /// Connection flow-control window, bytes.
        receive_window_bytes: u64,
        /// Send window, bytes.
        send_window_bytes: u64,
        /// `SO_SNDBUF`/`SO_RCVBUF` requested, bytes.
        socket_buffer_bytes: usize,
        /// The controller quinn runs (`None`: quinn has none by that name).
        controller: Option<String>,
    },
    /// A QUIC peer pair with at least one external program (child processes).
    Peer {
        /// The client program and its version, e.g. `"aioquic 1.7.2"`, `"petrel-quic"`.
        client_program: String,
        /// The server (sending) program and its version.
        server_program: String,
        /// The application protocol (`"hq-interop"` or `"h3"`).
        alpn: String,
        /// The sender's controller by the sender's own name (e.g. `"cubic"`, `"bbr2"`).
        sender_controller: String,
        /// Flow-control and other settings passed to the programs, in words.
        settings: String,
    },
    /// Kernel TCP.
    Tcp {
        /// The Linux congestion-control module (`TCP_CONGESTION`).
        tcp_congestion: Option<String>,
        /// Always `"kernel autotuning"`: TCP buffers are left to the kernel.
        socket_buffer_bytes: String,
    },
}

/// The relay's counters that explain a shortfall.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct RelayFigures {
    /// Client → server bytes forwarded (UDP payload).
    pub upstream_forwarded_bytes: u64,
    /// Client → server packets dropped by the drop-tail queue.
    pub upstream_queue_drops: u64,
    /// Largest client → server queue, packets.
    pub upstream_queue_peak_packets: u64,
    /// Server → client (acks) packets dropped by the queue.
    pub downstream_queue_drops: u64,
    /// Packets the relay's own sockets could not send (buffer full).
    pub relay_send_dropped: u64,
    /// Latest release after its deadline, µs (the relay's own lateness).
    pub lateness_max_us: f64,
    /// Client → server packets dropped by the random loss (`--loss`).
    pub upstream_random_drops: u64,
    /// Server → client packets dropped by the random loss (`--loss`).
    pub downstream_random_drops: u64,
}

/// A named scenario's expectation for one case (`bench goodput --scenario`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ScenarioExpectation {
    /// Scenario name, e.g. `"bbr-bufferbloat"`.
    pub name: String,
    /// What the scenario expects of this controller, in words.
    pub expected: String,
    /// The check each repetition's numbers must pass, in words (e.g.
    /// `"rtt_p50_ms <= 150"`).
    pub criterion: String,
}

/// One repetition.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct GoodputRound {
    /// 0-based repetition.
    pub repetition: u32,
    /// Seed of the relay and of BBR's probe timing.
    pub seed: u64,
    /// Every byte arrived and matched the pattern.
    pub ok: bool,
    /// Why the transfer failed, if it did.
    pub error: Option<String>,
    /// Bytes the server read and checked.
    pub bytes_received: u64,
    /// Bytes that differed from the pattern.
    pub mismatched_bytes: u64,
    /// First to last data byte at the server, s.
    pub transfer_s: Option<f64>,
    /// Client start to last data byte at the server, s.
    pub wall_s: Option<f64>,
    /// Interop-runner goodput, Mbit/s.
    pub goodput_mbps: Option<f64>,
    /// Wall-time goodput, Mbit/s.
    pub wall_goodput_mbps: Option<f64>,
    /// `goodput_mbps` ÷ link rate, % (`p2p` only).
    pub efficiency_percent: Option<f64>,
    /// `wall_goodput_mbps` ÷ link rate, % (`p2p` only).
    pub wall_efficiency_percent: Option<f64>,
    /// RTT during the transfer: median, ms (`parameters.rtt_source` says whose).
    pub rtt_p50_ms: Option<f64>,
    /// RTT during the transfer: 99th percentile, ms.
    pub rtt_p99_ms: Option<f64>,
    /// RTT samples taken.
    pub rtt_samples: u64,
    /// `rtt_p50_ms` − base RTT (twice the one-way delay): the queueing delay the
    /// transfer causes, ms (`p2p` only).
    pub queue_delay_p50_ms: Option<f64>,
    /// `rtt_p99_ms` − base RTT, ms (`p2p` only).
    pub queue_delay_p99_ms: Option<f64>,
    /// CPU time (user + system) of the transport over the repetition, s:
    /// this process minus the relay thread, plus child processes (peers).
    pub cpu_s: Option<f64>,
    /// `cpu_s` per 10^9 bytes received, s/GB.
    pub cpu_s_per_gb: Option<f64>,
    /// With `--scenario`: `"pass"` when this repetition meets the scenario's
    /// criterion, `"concern"` when it does not (null without a scenario or figures).
    pub verdict: Option<String>,
    /// The sender's counters.
    pub sender: SenderStats,
    /// The relay's counters (`p2p` only).
    pub relay: Option<RelayFigures>,
}

/// What the sender's connection counted, when the transport exposes it.
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize, Deserialize)]
pub struct SenderStats {
    /// Datagrams (or TCP segments) sent.
    pub packets_sent: Option<u64>,
    /// Packets declared lost (QUIC) or retransmitted (RUDP: timeout + fast).
    pub packets_lost_or_retransmitted: Option<u64>,
    /// Congestion window at the end, bytes.
    pub cwnd_bytes: Option<u64>,
    /// Smoothed RTT at the end, ms.
    pub srtt_ms: Option<f64>,
    /// `SO_SNDBUF` granted to the sender's socket, bytes.
    pub send_buffer: Option<usize>,
    /// `SO_RCVBUF` granted to the receiver's socket, bytes.
    pub recv_buffer: Option<usize>,
    /// The sending Petrel endpoint's I/O counters (RUDP only; messages = chunks sent).
    pub sender_io: Option<EndpointIo>,
    /// The receiving Petrel endpoint's I/O counters (RUDP only; messages = chunks
    /// received).
    pub receiver_io: Option<EndpointIo>,
}
