//! What one goodput case runs: transport, controller, link and size.

use std::fmt;
use std::ops::RangeInclusive;
use std::time::Duration;

use petrel_proto::cc::CongestionKind;
use petrel_proto::handshake::MTU_RANGE;
use petrel_quic::QuicCongestion;
use petrel_sys::range::{check_range, check_range_in, RangeError};
use serde::Serialize;

use super::scenario::Scenario;
use crate::record::goodput::{GoodputRound, ScenarioExpectation};

/// The transport carrying the transfer.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum GoodputTransport {
    /// Petrel RUDP (`petrel::Endpoint`), the chosen Petrel controller, paced when it paces.
    Rudp,
    /// The Petrel QUIC transport (quinn) with the chosen Petrel controller.
    Quic,
    /// The same QUIC transport with quinn's own controller (reno → NewReno,
    /// cubic → Cubic, bbrv1 → Bbr).
    Quinn,
    /// Kernel TCP over loopback, the controller set with `TCP_CONGESTION`
    /// (reno → `reno`, cubic → `cubic`, bbrv1 → `bbr`).
    Tcp,
    /// aioquic client ↔ aioquic server (child processes, hq-interop download);
    /// aioquic's own reno or cubic.
    Aioquic,
    /// aioquic client (child process) downloading from a Petrel QUIC server that
    /// sends with the chosen Petrel controller.
    #[serde(rename = "aioquic-quic")]
    AioquicQuic,
    /// Petrel QUIC client downloading from an aioquic server (child process) that
    /// sends with aioquic's reno or cubic.
    #[serde(rename = "quic-aioquic")]
    QuicAioquic,
    /// ngtcp2 example client ↔ server (Debian `ngtcp2-client`/`-server`, HTTP/3
    /// download); ngtcp2's own reno, cubic, bbr (bbrv1) or bbr2 (bbrv2).
    Ngtcp2,
}

impl GoodputTransport {
    /// Every transport, in report order.
    pub const ALL: [Self; 8] = [
        Self::Rudp,
        Self::Quic,
        Self::Quinn,
        Self::Tcp,
        Self::Aioquic,
        Self::AioquicQuic,
        Self::QuicAioquic,
        Self::Ngtcp2,
    ];

    /// Its name on the command line and in results: for pairs `<client>-<server>`.
    pub fn name(self) -> &'static str {
        match self {
            Self::Rudp => "rudp",
            Self::Quic => "quic",
            Self::Quinn => "quinn",
            Self::Tcp => "tcp",
            Self::Aioquic => "aioquic",
            Self::AioquicQuic => "aioquic-quic",
            Self::QuicAioquic => "quic-aioquic",
            Self::Ngtcp2 => "ngtcp2",
        }
    }

    /// Whether a peer program (a child process) takes part.
    pub fn uses_peer(self) -> bool {
        matches!(
            self,
            Self::Aioquic | Self::AioquicQuic | Self::QuicAioquic | Self::Ngtcp2
        )
    }

    /// Whether the bytes flow server → client (the peers' file download) rather
    /// than client → server.
    pub fn is_download(self) -> bool {
        self.uses_peer()
    }
}

impl fmt::Display for GoodputTransport {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// The Linux TCP congestion-control module closest to `cc`, if Linux has one.
pub fn tcp_congestion(cc: CongestionKind) -> Option<&'static str> {
    match cc {
        CongestionKind::NewReno => Some("reno"),
        CongestionKind::Cubic => Some("cubic"),
        CongestionKind::BbrV1 => Some("bbr"),
        _ => None,
    }
}

/// aioquic's controller closest to `cc` (aioquic has reno and cubic).
pub fn aioquic_congestion(cc: CongestionKind) -> Option<&'static str> {
    match cc {
        CongestionKind::NewReno => Some("reno"),
        CongestionKind::Cubic => Some("cubic"),
        _ => None,
    }
}

/// The ngtcp2 example's `--cc` closest to `cc` (it has reno, cubic, bbr, bbr2).
pub fn ngtcp2_congestion(cc: CongestionKind) -> Option<&'static str> {
    match cc {
        CongestionKind::NewReno => Some("reno"),
        CongestionKind::Cubic => Some("cubic"),
        CongestionKind::BbrV1 => Some("bbr"),
        CongestionKind::BbrV2 => Some("bbr2"),
        _ => None,
    }
}

/// [`GoodputConfig::controllers`] as `a, b or c`.
fn controller_list() -> String {
    let names: Vec<&str> = GoodputConfig::controllers()
        .map(CongestionKind::as_str)
        .collect();
    match names.split_last() {
        Some((last, rest)) if !rest.is_empty() => format!("{} or {last}", rest.join(", ")),
        _ => names.concat(),
    }
}

/// The link between client and server.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum GoodputProfile {
    /// Plain loopback, no relay.
    None,
    /// Through the in-process `petrel-netem` relay: the interop runner's ns-3
    /// "simple-p2p" link (bandwidth, one-way delay, drop-tail queue, both directions).
    P2p,
}

/// RUDP's `snd_wnd` and `rcv_wnd` unless `--rudp-window` says otherwise, segments.
/// On the default `p2p` link 200 Mbit/s × 8 ms is ≈ 140 segments of 1400 bytes, so
/// 512 (≈ 700 kB) is over 3 × BDP and keeps the link full; a larger window only
/// lets loss-based controllers fill more of the 1000-packet queue (more delay, and
/// the timeouts a delay spike causes, which the ARQ undoes as spurious).
pub const DEFAULT_RUDP_WINDOW: u16 = 512;

/// The `--rudp-window` values goodput accepts, segments.
pub const RUDP_WINDOW_RANGE: RangeInclusive<u16> = 16..=4096;

/// RUDP's `mtu` unless `--rudp-mtu` says otherwise, bytes: 1400, the legacy ARK
/// servers' size, which fits a 1500-byte Ethernet frame with room for tunnels.
pub const DEFAULT_RUDP_MTU: u16 = 1400;

/// The `--rudp-mtu` values goodput accepts, bytes: the native handshake's
/// [`MTU_RANGE`].
pub const RUDP_MTU_RANGE: RangeInclusive<u16> = MTU_RANGE;

/// One goodput case. `Default`: rudp, cubic, p2p at 200 Mbit/s, 4 ms one-way,
/// 1000-packet queue, no byte limit, no loss, 100 MB, 3 repetitions, seed 42,
/// RUDP windows of 512 segments.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct GoodputConfig {
    /// Transport under test.
    pub transport: GoodputTransport,
    /// Congestion controller.
    #[serde(serialize_with = "serialize_cc")]
    pub cc: CongestionKind,
    /// Link.
    pub profile: GoodputProfile,
    /// Link rate of each direction with `p2p`, bit/s. Range 1 Mbit/s..=10 Gbit/s.
    pub bandwidth_bps: u64,
    /// One-way delay of each direction with `p2p`. Range 0..=1 s.
    #[serde(serialize_with = "serialize_ms")]
    pub delay: Duration,
    /// Drop-tail queue of each direction with `p2p`, packets. Range 1..=4096.
    pub queue_packets: usize,
    /// Drop-tail queue limit of each direction with `p2p` in bytes, on top of
    /// `queue_packets` (`None`: packets only). Range 1500..=64 MiB.
    pub queue_bytes: Option<usize>,
    /// Random loss of each direction with `p2p`, percent of packets. Range 0..=100.
    pub loss_percent: f64,
    /// Bytes transferred client → server. Range 1 byte..=100 GB.
    pub size_bytes: u64,
    /// Transfers per case. Range 1..=100.
    pub repetitions: u32,
    /// Seed of repetition 0 (relay and BBR probe timing); repetition i uses seed + i.
    pub seed: u64,
    /// The named scenario that set the link, if any (its expectation is recorded
    /// and checked per repetition).
    pub scenario: Option<Scenario>,
    /// RUDP's `snd_wnd` and `rcv_wnd`, segments (other transports ignore it).
    /// Range 16..=4096; default 512.
    pub rudp_window: u16,
    /// RUDP's `mtu`: datagram size, bytes, KCP header included (other transports
    /// ignore it). Range 256..=9000, the native handshake's (a 9000-byte jumbo
    /// frame holds 8972 bytes of UDP payload over IPv4); default
    /// [`DEFAULT_RUDP_MTU`].
    pub rudp_mtu: u16,
}

fn serialize_cc<S: serde::Serializer>(cc: &CongestionKind, s: S) -> Result<S::Ok, S::Error> {
    s.serialize_str(cc.as_str())
}

fn serialize_ms<S: serde::Serializer>(d: &Duration, s: S) -> Result<S::Ok, S::Error> {
    s.serialize_f64(d.as_secs_f64() * 1e3)
}

impl Default for GoodputConfig {
    fn default() -> Self {
        Self {
            transport: GoodputTransport::Rudp,
            cc: CongestionKind::Cubic,
            profile: GoodputProfile::P2p,
            bandwidth_bps: 200_000_000,
            delay: Duration::from_millis(4),
            queue_packets: 1000,
            queue_bytes: None,
            loss_percent: 0.0,
            size_bytes: 100_000_000,
            repetitions: 3,
            seed: 42,
            scenario: None,
            rudp_window: DEFAULT_RUDP_WINDOW,
            rudp_mtu: DEFAULT_RUDP_MTU,
        }
    }
}

/// A [`GoodputConfig`] that cannot run.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub struct ConfigError(pub String);

impl GoodputConfig {
    /// The controllers a goodput case can measure: every built-in of the registry
    /// (`petrel_proto::cc::CongestionKind::ALL`) but `none`, in registry order.
    pub fn controllers() -> impl Iterator<Item = CongestionKind> {
        CongestionKind::ALL
            .into_iter()
            .filter(|&kind| kind != CongestionKind::None)
    }

    /// Checks every field and the transport/controller/profile combination.
    ///
    /// # Errors
    /// A [`ConfigError`] naming the field and its range, or why the combination
    /// cannot run (quinn has no BBRv2/v3; Linux TCP has no BBRv2/v3; TCP cannot go
    /// through the UDP relay; `none` is not a congestion controller to measure).
    pub fn validate(&self) -> Result<(), ConfigError> {
        let out_of_range = |e: RangeError| {
            ConfigError(format!(
                "invalid {} = {}: must be in {}",
                e.field, e.value, e.range
            ))
        };
        // Checked in Mbit/s, the unit of --bandwidth-mbps. Exact: every u64
        // below 2^53 converts exactly and the quotient rounds correctly, so
        // it is within 1..=10000 exactly when the bit/s are within 10^6..=10^10.
        let mbit_per_s = self.bandwidth_bps as f64 / 1e6;
        check_range_in("bandwidth", mbit_per_s, &(1.0..=10_000.0), "Mbit/s")
            .map_err(out_of_range)?;
        check_range(
            "delay",
            self.delay,
            &(Duration::ZERO..=Duration::from_secs(1)),
        )
        .map_err(out_of_range)?;
        check_range_in("queue", self.queue_packets, &(1..=4096), "packets")
            .map_err(out_of_range)?;
        if let Some(bytes) = self.queue_bytes {
            check_range_in("queue bytes", bytes, &(1500..=64 << 20), "bytes")
                .map_err(out_of_range)?;
        }
        check_range_in("loss", self.loss_percent, &(0.0..=100.0), "%").map_err(out_of_range)?;
        check_range_in("size", self.size_bytes, &(1..=100_000_000_000), "bytes")
            .map_err(out_of_range)?;
        check_range("repetitions", self.repetitions, &(1..=100)).map_err(out_of_range)?;
        check_range_in(
            "rudp window",
            self.rudp_window,
            &RUDP_WINDOW_RANGE,
            "segments",
        )
        .map_err(out_of_range)?;
        check_range_in("rudp mtu", self.rudp_mtu, &RUDP_MTU_RANGE, "bytes")
            .map_err(out_of_range)?;
        if self.cc == CongestionKind::None {
            return Err(ConfigError(format!(
                "cc none is not a congestion controller; use {}",
                controller_list()
            )));
        }
        match self.transport {
            GoodputTransport::Quinn if QuicCongestion::quinn_own(self.cc).is_none() => {
                Err(ConfigError(format!(
                    "quinn has no {} controller (it has reno, cubic and bbrv1); use --transport quic for Petrel's",
                    self.cc
                )))
            }
            GoodputTransport::Tcp if tcp_congestion(self.cc).is_none() => Err(ConfigError(
                format!("Linux TCP has no {} controller (it has reno, cubic and bbrv1)", self.cc),
            )),
            GoodputTransport::Tcp if self.profile == GoodputProfile::P2p => Err(ConfigError(
                "tcp runs over loopback only (--profile none): the emulator relays UDP".into(),
            )),
            GoodputTransport::Aioquic | GoodputTransport::QuicAioquic
                if aioquic_congestion(self.cc).is_none() =>
            {
                Err(ConfigError(format!(
                    "aioquic has no {} controller (it has reno and cubic); use --transport aioquic-quic for a Petrel sender",
                    self.cc
                )))
            }
            GoodputTransport::Ngtcp2 if ngtcp2_congestion(self.cc).is_none() => {
                Err(ConfigError(format!(
                    "ngtcp2 has no {} controller (it has reno, cubic, bbrv1 = bbr and bbrv2 = bbr2)",
                    self.cc
                )))
            }
            _ => Ok(()),
        }
    }

    /// The case name: `<transport>-<cc>-<link>`, e.g. `quic-bbrv3-p2p-200mbps-4ms-q1000`,
    /// `rudp-cubic-p2p-5mbps-50ms-q4096-312500b-loss1%` or `tcp-cubic-loopback`;
    /// a RUDP case with other than the default window ends in `-wnd<segments>`.
    pub fn case_name(&self) -> String {
        let link = match self.profile {
            GoodputProfile::None => "loopback".to_owned(),
            GoodputProfile::P2p => {
                let mut link = format!(
                    "p2p-{}mbps-{}ms-q{}",
                    self.bandwidth_bps as f64 / 1e6,
                    self.delay.as_secs_f64() * 1e3,
                    self.queue_packets
                );
                if let Some(bytes) = self.queue_bytes {
                    link.push_str(&format!("-{bytes}b"));
                }
                if self.loss_percent > 0.0 {
                    link.push_str(&format!("-loss{}%", self.loss_percent));
                }
                link
            }
        };
        let mut name = format!("{}-{}-{link}", self.transport, self.cc);
        if self.transport == GoodputTransport::Rudp && self.rudp_window != DEFAULT_RUDP_WINDOW {
            name.push_str(&format!("-wnd{}", self.rudp_window));
        }
        if self.transport == GoodputTransport::Rudp && self.rudp_mtu != DEFAULT_RUDP_MTU {
            name.push_str(&format!("-mtu{}", self.rudp_mtu));
        }
        name
    }

    /// `self` with `scenario`'s link (always `p2p`) and transfer size.
    pub fn with_scenario(self, scenario: Scenario) -> Self {
        let link = scenario.link();
        Self {
            profile: GoodputProfile::P2p,
            bandwidth_bps: link.bandwidth_bps,
            delay: link.delay,
            queue_packets: link.queue_packets,
            queue_bytes: link.queue_bytes,
            loss_percent: link.loss_percent,
            size_bytes: link.size_bytes,
            scenario: Some(scenario),
            ..self
        }
    }

    /// The scenario's expectation for this case (`None` without a scenario).
    pub fn expectation(&self) -> Option<ScenarioExpectation> {
        Some(self.scenario?.expectation(self.cc, self.base_rtt()?))
    }

    /// The scenario's verdict on `round` (see [`Scenario::verdict`]).
    pub fn verdict(&self, round: &GoodputRound) -> Option<&'static str> {
        self.scenario?.verdict(self.cc, self.base_rtt()?, round)
    }

    /// The round-trip time of the idle link: twice the one-way delay with `p2p`
    /// (serialization of one packet is not counted), `None` over loopback.
    pub fn base_rtt(&self) -> Option<Duration> {
        (self.profile == GoodputProfile::P2p).then_some(self.delay * 2)
    }

    /// The link rate goodput is compared with, bit/s (`None` over loopback).
    pub fn link_rate_bps(&self) -> Option<u64> {
        (self.profile == GoodputProfile::P2p).then_some(self.bandwidth_bps)
    }

    /// How long one transfer may take before it is abandoned as incomplete: ten
    /// times its time at the link rate (1 Gbit/s over loopback), times
    /// (1 + 10 × loss %, loss counted up to 10 %) with random loss (a loss-based
    /// controller gets a small share of the link then), at least 30 s.
    pub fn transfer_timeout(&self) -> Duration {
        let rate = self.link_rate_bps().unwrap_or(1_000_000_000) as f64;
        let loss_factor = 1.0 + 10.0 * self.loss_percent.min(10.0);
        let secs = self.size_bytes as f64 * 8.0 / rate * 10.0 * loss_factor;
        Duration::from_secs_f64(secs.max(30.0))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn defaults_validate_and_combinations_are_checked() {
        let ok = GoodputConfig::default();
        ok.validate().unwrap();
        assert_eq!(ok.case_name(), "rudp-cubic-p2p-200mbps-4ms-q1000");
        let bad = |c: GoodputConfig| c.validate().unwrap_err().0;
        assert!(bad(GoodputConfig {
            transport: GoodputTransport::Quinn,
            cc: CongestionKind::BbrV3,
            ..ok
        })
        .contains("quinn has no bbrv3"));
        assert!(bad(GoodputConfig {
            transport: GoodputTransport::Tcp,
            ..ok
        })
        .contains("loopback only"));
        assert!(bad(GoodputConfig {
            queue_packets: 0,
            ..ok
        })
        .contains("queue"));
        assert!(bad(GoodputConfig {
            repetitions: 0,
            ..ok
        })
        .contains("repetitions"));
        GoodputConfig {
            transport: GoodputTransport::Tcp,
            profile: GoodputProfile::None,
            ..ok
        }
        .validate()
        .unwrap();
    }

    #[test]
    fn loss_and_peer_controllers_are_checked() {
        let ok = GoodputConfig::default();
        let bad = |c: GoodputConfig| c.validate().unwrap_err().0;
        assert_eq!(
            bad(GoodputConfig {
                loss_percent: 100.5,
                ..ok
            }),
            "invalid loss = 100.5 %: must be in 0.0..=100.0 %"
        );
        let lossy = GoodputConfig {
            loss_percent: 1.0,
            ..ok
        };
        lossy.validate().unwrap();
        assert_eq!(lossy.case_name(), "rudp-cubic-p2p-200mbps-4ms-q1000-loss1%");
        assert!(lossy.transfer_timeout() > ok.transfer_timeout());
        assert!(bad(GoodputConfig {
            transport: GoodputTransport::Aioquic,
            cc: CongestionKind::BbrV1,
            ..ok
        })
        .contains("aioquic has no bbrv1"));
        // A Petrel server sends in aioquic-quic, so every Petrel controller runs.
        GoodputConfig {
            transport: GoodputTransport::AioquicQuic,
            cc: CongestionKind::BbrV3,
            ..ok
        }
        .validate()
        .unwrap();
        GoodputConfig {
            transport: GoodputTransport::Ngtcp2,
            cc: CongestionKind::BbrV2,
            ..ok
        }
        .validate()
        .unwrap();
        assert_eq!(ngtcp2_congestion(CongestionKind::BbrV2), Some("bbr2"));
        assert!(bad(GoodputConfig {
            queue_bytes: Some(100),
            ..ok
        })
        .contains("queue bytes"));
    }

    #[test]
    fn scenario_links_are_the_published_ones_and_validate() {
        let bloat = GoodputConfig::default().with_scenario(Scenario::BbrBufferbloat);
        assert_eq!(bloat.bandwidth_bps, 5_000_000);
        assert_eq!(bloat.base_rtt(), Some(Duration::from_millis(100)));
        // 500 ms of queue at the link rate.
        let queue_s = bloat.queue_bytes.unwrap() as f64 * 8.0 / bloat.bandwidth_bps as f64;
        assert!((queue_s - 0.5).abs() < 1e-9);
        bloat.validate().unwrap();
        let loss = GoodputConfig::default().with_scenario(Scenario::BbrLoss);
        assert_eq!(loss.base_rtt(), Some(Duration::from_millis(20)));
        assert_eq!(loss.loss_percent, 1.0);
        loss.validate().unwrap();
        for cfg in [bloat, loss] {
            let secs = cfg.size_bytes as f64 * 8.0 / cfg.bandwidth_bps as f64;
            assert!(
                secs <= 20.0,
                "{}: {secs} s at the link rate",
                cfg.case_name()
            );
            assert_eq!(
                cfg.expectation().unwrap().name,
                cfg.scenario.unwrap().name()
            );
        }
    }

    #[test]
    fn range_errors_render_the_checked_range() {
        let bad = |c: GoodputConfig| c.validate().unwrap_err().0;
        let ok = GoodputConfig::default();
        assert_eq!(
            bad(GoodputConfig {
                bandwidth_bps: 999_999,
                ..ok
            }),
            "invalid bandwidth = 0.999999 Mbit/s: must be in 1.0..=10000.0 Mbit/s"
        );
        let edges = [1_000_000, 10_000_000_000];
        for bandwidth_bps in edges {
            GoodputConfig {
                bandwidth_bps,
                ..ok
            }
            .validate()
            .unwrap();
        }
        assert!(GoodputConfig {
            bandwidth_bps: 10_000_000_001,
            ..ok
        }
        .validate()
        .is_err());
        assert_eq!(
            bad(GoodputConfig {
                size_bytes: 0,
                ..ok
            }),
            "invalid size = 0 bytes: must be in 1..=100000000000 bytes"
        );
        assert_eq!(
            bad(GoodputConfig {
                rudp_window: 8,
                ..ok
            }),
            "invalid rudp window = 8 segments: must be in 16..=4096 segments"
        );
        assert_eq!(
            bad(GoodputConfig {
                rudp_mtu: 9001,
                ..ok
            }),
            "invalid rudp mtu = 9001 bytes: must be in 256..=9000 bytes"
        );
    }

    #[test]
    fn a_non_default_rudp_window_names_the_rudp_case_only() {
        let deep = GoodputConfig {
            rudp_window: 1024,
            ..GoodputConfig::default()
        };
        deep.validate().unwrap();
        assert_eq!(deep.case_name(), "rudp-cubic-p2p-200mbps-4ms-q1000-wnd1024");
        let quic = GoodputConfig {
            transport: GoodputTransport::Quic,
            ..deep
        };
        assert_eq!(quic.case_name(), "quic-cubic-p2p-200mbps-4ms-q1000");
        assert_eq!(
            GoodputConfig::default().case_name(),
            "rudp-cubic-p2p-200mbps-4ms-q1000"
        );
        let jumbo = GoodputConfig {
            rudp_mtu: 8972,
            ..deep
        };
        jumbo.validate().unwrap();
        assert_eq!(
            jumbo.case_name(),
            "rudp-cubic-p2p-200mbps-4ms-q1000-wnd1024-mtu8972"
        );
        assert_eq!(
            GoodputConfig {
                transport: GoodputTransport::Quic,
                ..jumbo
            }
            .case_name(),
            "quic-cubic-p2p-200mbps-4ms-q1000"
        );
    }

    #[test]
    fn controllers_come_from_the_registry_without_none() {
        let names: Vec<&str> = GoodputConfig::controllers()
            .map(CongestionKind::as_str)
            .collect();
        assert_eq!(names, ["reno", "cubic", "bbrv1", "bbrv2", "bbrv3"]);
        let err = GoodputConfig {
            cc: CongestionKind::None,
            ..GoodputConfig::default()
        }
        .validate()
        .unwrap_err();
        assert_eq!(
            err.0,
            "cc none is not a congestion controller; use reno, cubic, bbrv1, bbrv2 or bbrv3"
        );
    }
}
