//! Bulk goodput (`specs/benchmarks.md` §C): one connection transfers N bytes
//! **client → server** over loopback or through the emulator's `p2p` link, with
//! Petrel RUDP, the Petrel QUIC transport (a Petrel controller, or quinn's own), or
//! kernel TCP as a reference; or, with QUIC peers (aioquic, ngtcp2 as child
//! processes, alone or paired with Petrel QUIC), the client downloads N bytes
//! **server → client**, as the QUIC interop runner measures it.
//!
//! The `p2p` link can add random loss (`loss_percent`, each direction), and named
//! [`Scenario`]s set a link, sweep the controllers and check each against the
//! outcome the scenario expects. Each repetition also reports the RTT under load
//! (p50/p99 of the sender's srtt, when the sender is Petrel's) with the queueing
//! delay it implies (RTT − twice the one-way delay), and the CPU seconds per GB
//! moved (this process without the relay thread, plus the peers' processes).
//!
//! Per repetition it reports goodput two ways, both in Mbit/s of verified
//! application bytes (10^6 bit/s):
//! - `goodput_mbps`, as the QUIC interop runner: bytes ÷ time from the first to the
//!   last data byte read by the server;
//! - `wall_goodput_mbps`: bytes ÷ time from the client starting to connect to the
//!   last byte read (handshake and slow start included);
//!
//! and each as `efficiency_percent` = goodput ÷ link rate (with `p2p` only). The link
//! rate counts UDP payload bytes, so protocol headers (≈ 2–3 % at 1400-byte
//! datagrams) count against efficiency. Every byte is checked against a
//! deterministic pattern; any mismatch, short transfer or timeout makes the case not
//! `ok`.
//!
//! The result is the standard [`ResultRecord`]: `summary` holds min/median/max
//! across repetitions of each figure, plus `<figure>_mean` and `<figure>_stdev`
//! (sample standard deviation, 0 for one repetition) as one-value spreads.
//! `parameters.protocol` is the transport, so `petrel report` groups cases by
//! controller and link with one bar per transport.
//!
//! What does not live here: the transports (`petrel`, `petrel_quic::transport`), the
//! emulator (`petrel-netem`), the controllers (`petrel_proto::cc`), the command line.

mod config;
mod pattern;
mod scenario;
mod transfer;

use std::collections::BTreeMap;

use serde::Serialize;

use crate::record::goodput::{GoodputCase, GoodputParameters, TransportSettings};
pub use crate::record::goodput::{GoodputRound, RelayFigures, ScenarioExpectation};

pub use config::{
    aioquic_congestion, ngtcp2_congestion, tcp_congestion, ConfigError, GoodputConfig,
    GoodputProfile, GoodputTransport, DEFAULT_RUDP_MTU, DEFAULT_RUDP_WINDOW, RUDP_MTU_RANGE,
    RUDP_WINDOW_RANGE,
};
pub use petrel_proto::cc::CongestionKind;
pub use scenario::{Scenario, ScenarioLink, UnknownScenario};
pub use transfer::peer::{peer_required, PeerMissing, PYTHON_ENV, REQUIRE_ENV};
pub use transfer::{SenderStats, TransferError};

use crate::record::{RecordError, ResultRecord, Spread};
use transfer::{Transfer, CHUNK, SOCKET_BUFFER};

/// The benchmark name in result records.
pub const BENCHMARK: &str = "goodput";

/// Headline figures, in table order.
pub const FIGURES: [&str; 9] = [
    "goodput_mbps",
    "wall_goodput_mbps",
    "efficiency_percent",
    "wall_efficiency_percent",
    "rtt_p50_ms",
    "rtt_p99_ms",
    "queue_delay_p50_ms",
    "queue_delay_p99_ms",
    "cpu_s_per_gb",
];

impl GoodputRound {
    fn figure(&self, name: &str) -> Option<f64> {
        match name {
            "goodput_mbps" => self.goodput_mbps,
            "wall_goodput_mbps" => self.wall_goodput_mbps,
            "efficiency_percent" => self.efficiency_percent,
            "wall_efficiency_percent" => self.wall_efficiency_percent,
            "rtt_p50_ms" => self.rtt_p50_ms,
            "rtt_p99_ms" => self.rtt_p99_ms,
            "queue_delay_p50_ms" => self.queue_delay_p50_ms,
            "queue_delay_p99_ms" => self.queue_delay_p99_ms,
            "cpu_s_per_gb" => self.cpu_s_per_gb,
            _ => None,
        }
    }

    fn from_transfer(cfg: &GoodputConfig, repetition: u32, seed: u64, t: &Transfer) -> Self {
        let v = t.receipt.verifier;
        let complete = v.received == cfg.size_bytes;
        let ok = complete && v.mismatched == 0;
        let mbps = |secs: f64| (secs > 0.0).then(|| v.received as f64 * 8.0 / secs / 1e6);
        let transfer_s = match (t.receipt.first_byte, t.receipt.last_byte) {
            (Some(first), Some(last)) => Some((last - first).as_secs_f64()),
            _ => None,
        };
        let wall_s = t
            .receipt
            .last_byte
            .map(|last| (last - t.started).as_secs_f64());
        let goodput_mbps = transfer_s.and_then(mbps);
        let wall_goodput_mbps = wall_s.and_then(mbps);
        let efficiency = |g: Option<f64>| Some(g? * 1e6 / cfg.link_rate_bps()? as f64 * 100.0);
        let rtt = t
            .rtt
            .as_ref()
            .filter(|h| !h.is_empty())
            .map(|h| h.percentiles());
        let ms = |us: u64| us as f64 / 1e3;
        let rtt_p50_ms = rtt.map(|p| ms(p.p50_us));
        let rtt_p99_ms = rtt.map(|p| ms(p.p99_us));
        let base_ms = cfg.base_rtt().map(|d| d.as_secs_f64() * 1e3);
        let queue_delay = |rtt: Option<f64>| Some(rtt? - base_ms?);
        let cpu_s = t.cpu.map(|d| d.as_secs_f64());
        let gigabytes = v.received as f64 / 1e9;
        let mut round = Self {
            repetition,
            seed,
            ok,
            error: (!complete)
                .then(|| format!("{} of {} bytes arrived", v.received, cfg.size_bytes)),
            bytes_received: v.received,
            mismatched_bytes: v.mismatched,
            transfer_s,
            wall_s,
            goodput_mbps,
            wall_goodput_mbps,
            efficiency_percent: efficiency(goodput_mbps),
            wall_efficiency_percent: efficiency(wall_goodput_mbps),
            rtt_p50_ms,
            rtt_p99_ms,
            rtt_samples: rtt.map_or(0, |p| p.count),
            queue_delay_p50_ms: queue_delay(rtt_p50_ms),
            queue_delay_p99_ms: queue_delay(rtt_p99_ms),
            cpu_s,
            cpu_s_per_gb: cpu_s.filter(|_| gigabytes > 0.0).map(|c| c / gigabytes),
            verdict: None,
            sender: t.sender,
            relay: t.relay.as_ref().map(|r| RelayFigures {
                upstream_forwarded_bytes: r.upstream_total.forwarded_bytes,
                upstream_queue_drops: r.upstream_total.dropped.queue,
                upstream_queue_peak_packets: r.upstream_total.queue_peak_packets,
                downstream_queue_drops: r.downstream_total.dropped.queue,
                relay_send_dropped: r.send_dropped,
                lateness_max_us: r.lateness.max_us,
                upstream_random_drops: r.upstream_total.dropped.random,
                downstream_random_drops: r.downstream_total.dropped.random,
            }),
        };
        round.verdict = cfg.verdict(&round).map(str::to_owned);
        round
    }

    fn failed(repetition: u32, seed: u64, error: &TransferError) -> Self {
        Self {
            repetition,
            seed,
            ok: false,
            error: Some(error.to_string()),
            bytes_received: match error {
                TransferError::Timeout { received, .. } => *received,
                _ => 0,
            },
            mismatched_bytes: 0,
            transfer_s: None,
            wall_s: None,
            goodput_mbps: None,
            wall_goodput_mbps: None,
            efficiency_percent: None,
            wall_efficiency_percent: None,
            rtt_p50_ms: None,
            rtt_p99_ms: None,
            rtt_samples: 0,
            queue_delay_p50_ms: None,
            queue_delay_p99_ms: None,
            cpu_s: None,
            cpu_s_per_gb: None,
            verdict: None,
            sender: SenderStats::default(),
            relay: None,
        }
    }
}

/// Mean, sample standard deviation, min and max of one figure across repetitions.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct Stats {
    /// Arithmetic mean.
    pub mean: f64,
    /// Sample standard deviation (n − 1); 0 for one value.
    pub stdev: f64,
    /// Smallest value.
    pub min: f64,
    /// Largest value.
    pub max: f64,
}

impl Stats {
    /// The statistics of `values`; `None` when empty.
    pub fn of(values: &[f64]) -> Option<Self> {
        let n = values.len();
        if n == 0 {
            return None;
        }
        let mean = values.iter().sum::<f64>() / n as f64;
        let stdev = if n > 1 {
            (values.iter().map(|v| (v - mean).powi(2)).sum::<f64>() / (n - 1) as f64).sqrt()
        } else {
            0.0
        };
        Some(Self {
            mean,
            stdev,
            min: values.iter().copied().fold(f64::INFINITY, f64::min),
            max: values.iter().copied().fold(f64::NEG_INFINITY, f64::max),
        })
    }
}

/// One case's result.
#[derive(Debug, Clone)]
pub struct GoodputReport {
    /// The case.
    pub config: GoodputConfig,
    /// The result envelope (JSON).
    pub record: ResultRecord,
    /// Every repetition.
    pub rounds: Vec<GoodputRound>,
    /// Statistics of each of [`FIGURES`] over the repetitions that completed.
    pub stats: BTreeMap<&'static str, Stats>,
}

/// Why a case could not run at all (a failed repetition is a result, not an error).
#[derive(Debug, thiserror::Error)]
pub enum GoodputError {
    /// The configuration is invalid.
    #[error(transparent)]
    Config(#[from] ConfigError),
    /// The record could not be built.
    #[error(transparent)]
    Record(#[from] RecordError),
    /// A peer program the case needs is not installed (skip the case unless
    /// [`peer_required`]).
    #[error(transparent)]
    PeerMissing(#[from] PeerMissing),
}

/// The versions of the client and server programs of a peer pair, e.g.
/// `("aioquic 1.7.2 (Python 3.11.2)", "petrel-quic")`; `None` for Petrel's own
/// transports.
///
/// # Errors
/// [`PeerMissing`] naming the install command when a program cannot run.
pub fn peer_programs(transport: GoodputTransport) -> Result<Option<(String, String)>, PeerMissing> {
    let petrel = || "petrel-quic (quinn 0.11)".to_owned();
    Ok(match transport {
        GoodputTransport::Aioquic => {
            let v = transfer::peer::aioquic_version()?;
            Some((v.clone(), v))
        }
        GoodputTransport::AioquicQuic => Some((transfer::peer::aioquic_version()?, petrel())),
        GoodputTransport::QuicAioquic => Some((petrel(), transfer::peer::aioquic_version()?)),
        GoodputTransport::Ngtcp2 => {
            let v = transfer::peer::ngtcp2_version()?;
            Some((v.clone(), v))
        }
        _ => None,
    })
}

/// The settings of a peer pair (see [`TransportSettings::Peer`]).
fn peer_settings(cfg: &GoodputConfig, client: String, server: String) -> TransportSettings {
    let (alpn, sender_controller, settings) = match cfg.transport {
        GoodputTransport::Ngtcp2 => (
            "h3",
            ngtcp2_congestion(cfg.cc).unwrap_or("-").to_owned(),
            format!(
                "gtlsclient --max-data={w} --max-stream-data-bidi-local={w} (window auto-tuning on); gtlsserver defaults",
                w = transfer::NGTCP2_WINDOW
            ),
        ),
        GoodputTransport::AioquicQuic => (
            "hq-interop",
            cfg.cc.as_str().to_owned(),
            "aioquic client max_data = max_stream_data = 16 MiB; Petrel QUIC server with the transport's default windows".to_owned(),
        ),
        _ => (
            "hq-interop",
            aioquic_congestion(cfg.cc).unwrap_or("-").to_owned(),
            "aioquic max_data = max_stream_data = 16 MiB".to_owned(),
        ),
    };
    TransportSettings::Peer {
        client_program: client,
        server_program: server,
        alpn: alpn.to_owned(),
        sender_controller,
        settings,
    }
}

/// Whether the sender of `transport` is Petrel's (so its srtt is sampled).
fn petrel_sends(transport: GoodputTransport) -> bool {
    matches!(
        transport,
        GoodputTransport::Rudp
            | GoodputTransport::Quic
            | GoodputTransport::Quinn
            | GoodputTransport::AioquicQuic
    )
}

fn parameters(cfg: &GoodputConfig, programs: Option<(String, String)>) -> GoodputParameters {
    let transport_settings = match cfg.transport {
        GoodputTransport::Rudp => TransportSettings::Rudp {
            mtu_bytes: usize::from(cfg.rudp_mtu),
            snd_wnd_packets: cfg.rudp_window,
            rcv_wnd_packets: cfg.rudp_window,
            stream_mode: transfer::rudp::STREAM_MODE,
            socket_buffer_bytes: SOCKET_BUFFER,
        },
        GoodputTransport::Quic | GoodputTransport::Quinn => {
            let q = petrel_quic::QuicTransportConfig::default();
            TransportSettings::Quic {
                stream_receive_window_bytes: q.stream_receive_window,
                receive_window_bytes: q.receive_window,
                send_window_bytes: q.send_window,
                socket_buffer_bytes: SOCKET_BUFFER,
                controller: match cfg.transport {
                    GoodputTransport::Quinn => petrel_quic::QuicCongestion::quinn_own(cfg.cc)
                        .map(petrel_quic::QuicCongestion::name),
                    _ => Some(cfg.cc.as_str()),
                }
                .map(str::to_owned),
            }
        }
        GoodputTransport::Tcp => TransportSettings::Tcp {
            tcp_congestion: tcp_congestion(cfg.cc).map(str::to_owned),
            socket_buffer_bytes: "kernel autotuning".to_owned(),
        },
        GoodputTransport::Aioquic
        | GoodputTransport::AioquicQuic
        | GoodputTransport::QuicAioquic
        | GoodputTransport::Ngtcp2 => {
            let (client, server) = programs.unwrap_or_default();
            peer_settings(cfg, client, server)
        }
    };
    GoodputParameters {
        protocol: cfg.transport.name().to_owned(),
        case: GoodputCase {
            transport: cfg.transport.name().to_owned(),
            cc: cfg.cc.as_str().to_owned(),
            profile: match cfg.profile {
                GoodputProfile::None => "none",
                GoodputProfile::P2p => "p2p",
            }
            .to_owned(),
            bandwidth_bps: cfg.bandwidth_bps,
            delay: cfg.delay.as_secs_f64() * 1e3,
            queue_packets: cfg.queue_packets,
            queue_bytes: cfg.queue_bytes,
            loss_percent: cfg.loss_percent,
            size_bytes: cfg.size_bytes,
            repetitions: cfg.repetitions,
            seed: cfg.seed,
        },
        direction: if cfg.transport.is_download() {
            "server to client"
        } else {
            "client to server"
        }
        .to_owned(),
        rtt_source: if petrel_sends(cfg.transport) {
            transfer::RTT_SOURCE
        } else {
            "none (the sender is not Petrel's)"
        }
        .to_owned(),
        cpu_source: transfer::CPU_SOURCE.to_owned(),
        scenario: cfg.expectation(),
        link_rate_bps: cfg.link_rate_bps(),
        chunk_bytes: CHUNK,
        transfer_timeout_s: cfg.transfer_timeout().as_secs_f64(),
        runtime: "tokio multi-thread, 2 workers run the sender and receiver tasks; relay on its own thread"
            .to_owned(),
        transport_settings,
    }
}

/// Runs every repetition of `cfg`; `on_round` sees each as it finishes.
///
/// # Errors
/// [`GoodputError::Config`] for an invalid configuration, [`GoodputError::PeerMissing`]
/// when a peer program is not installed. A repetition that fails is recorded as a
/// failed round and makes the record not `ok`.
pub fn run_goodput(
    cfg: &GoodputConfig,
    mut on_round: impl FnMut(&GoodputRound),
) -> Result<GoodputReport, GoodputError> {
    cfg.validate()?;
    let programs = peer_programs(cfg.transport)?;
    let mut record = ResultRecord::begin(BENCHMARK, &cfg.case_name(), &parameters(cfg, programs))?;
    let mut rounds = Vec::new();
    for repetition in 0..cfg.repetitions {
        let seed = cfg.seed.wrapping_add(u64::from(repetition));
        let round = match transfer::run(cfg, seed) {
            Ok(t) => GoodputRound::from_transfer(cfg, repetition, seed, &t),
            Err(e) => GoodputRound::failed(repetition, seed, &e),
        };
        on_round(&round);
        record.seeds.push(seed);
        record.push_round(&round)?;
        rounds.push(round);
    }
    let mut stats = BTreeMap::new();
    for name in FIGURES {
        let values: Vec<f64> = rounds.iter().filter_map(|r| r.figure(name)).collect();
        if let (Some(spread), Some(s)) = (Spread::of(&values), Stats::of(&values)) {
            record.summary.insert(name.to_owned(), spread);
            for (suffix, v) in [("mean", s.mean), ("stdev", s.stdev)] {
                let one = Spread {
                    min: v,
                    median: v,
                    max: v,
                };
                record.summary.insert(format!("{name}_{suffix}"), one);
            }
            stats.insert(name, s);
        }
    }
    let failed = rounds.iter().filter(|r| r.error.is_some()).count() as u64;
    let mismatched = rounds.iter().filter(|r| r.mismatched_bytes > 0).count() as u64;
    record.errors.insert("incomplete_transfers".into(), failed);

    record
        .errors
        .insert("content_mismatches".into(), mismatched);
    record.peak_rss_bytes = crate::measure::peak_rss_bytes();
    record.ok = rounds.iter().all(|r| r.ok);
    Ok(GoodputReport {
        config: *cfg,
        record,
        rounds,
        stats,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn stats_of_three_and_of_one() {
        let s = Stats::of(&[1.0, 2.0, 3.0]).unwrap();
        assert_eq!((s.mean, s.stdev, s.min, s.max), (2.0, 1.0, 1.0, 3.0));
        let s = Stats::of(&[5.0]).unwrap();
        assert_eq!((s.mean, s.stdev), (5.0, 0.0));
        assert!(Stats::of(&[]).is_none());
    }
}
