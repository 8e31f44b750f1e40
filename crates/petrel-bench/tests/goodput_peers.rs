//! QUIC peers in goodput: short verified downloads through the `p2p` emulator with
//! aioquic ↔ aioquic, an aioquic client ↔ a Petrel QUIC server, and the ngtcp2
//! examples ↔ themselves. A peer that is not installed skips its test with a
//! message, unless `PETREL_REQUIRE_QUIC_INTEROP=1` (CI), which fails it.
#![allow(clippy::unwrap_used)]

use std::io::Write as _;
use std::time::Duration;

use petrel_bench::goodput::{
    peer_required, run_goodput, CongestionKind, GoodputConfig, GoodputError, GoodputReport,
    GoodputTransport,
};

fn case(transport: GoodputTransport) -> GoodputConfig {
    GoodputConfig {
        transport,
        cc: CongestionKind::Cubic,
        bandwidth_bps: 50_000_000,
        delay: Duration::from_millis(4),
        size_bytes: 1_000_000,
        repetitions: 1,
        seed: 11,
        ..GoodputConfig::default()
    }
}

/// The report, or `None` after printing why the peer is missing (a skip).
fn run(cfg: &GoodputConfig) -> Option<GoodputReport> {
    match run_goodput(cfg, |_| {}) {
        Ok(report) => Some(report),
        Err(GoodputError::PeerMissing(missing)) if !peer_required() => {
            // Straight to the process's stderr: libtest captures `eprintln!`.
            let _ = writeln!(
                std::io::stderr(),
                "SKIPPED {}: {missing}; set PETREL_REQUIRE_QUIC_INTEROP=1 to fail instead",
                cfg.case_name()
            );
            None
        }
        Err(e) => panic!("{}: {e}", cfg.case_name()),
    }
}

/// A verified download no faster than the link, with the peer's version recorded
/// and the children's CPU counted.
fn check(report: &GoodputReport, program: &str) {
    let round = &report.rounds[0];
    assert!(report.record.ok, "{round:?}");
    assert_eq!(round.bytes_received, report.config.size_bytes);
    assert_eq!(round.mismatched_bytes, 0);
    let goodput = round.goodput_mbps.unwrap();
    assert!(goodput > 0.0 && goodput <= 50.0 * 1.02, "{round:?}");
    assert!(round.relay.unwrap().upstream_forwarded_bytes > 0);
    let params = &report.record.parameters;
    assert_eq!(params["direction"], "server to client");
    let settings = &params["transport_settings"];
    let programs = format!(
        "{} {}",
        settings["client_program"], settings["server_program"]
    );
    assert!(programs.contains(program), "{programs}");
    // A child process's interpreter start-up alone is tens of ms of CPU.
    assert!(round.cpu_s.unwrap() > 0.01, "{round:?}");
}

#[test]
fn aioquic_self_pair_downloads_through_the_emulator() {
    if let Some(report) = run(&case(GoodputTransport::Aioquic)) {
        check(&report, "aioquic ");
        assert_eq!(
            report.rounds[0].rtt_samples, 0,
            "no Petrel sender to sample"
        );
    }
}

#[test]
fn aioquic_client_downloads_from_a_petrel_quic_server() {
    if let Some(report) = run(&case(GoodputTransport::AioquicQuic)) {
        check(&report, "petrel-quic");
        let round = &report.rounds[0];
        assert!(round.rtt_p50_ms.unwrap() >= 8.0, "{round:?}");
        assert!(round.sender.packets_sent.unwrap() > 0);
    }
}

#[test]
fn ngtcp2_self_pair_downloads_through_the_emulator() {
    if let Some(report) = run(&case(GoodputTransport::Ngtcp2)) {
        check(&report, "ngtcp2 examples (");
        let program = report.record.parameters["transport_settings"]["server_program"]
            .as_str()
            .unwrap()
            .to_owned();
        // Each package named with its own version (dpkg-query), where Debian's.
        assert!(
            program.contains("ngtcp2-server ") || program.contains("version unknown"),
            "{program}"
        );
        assert_eq!(report.record.parameters["transport_settings"]["alpn"], "h3");
    }
}
