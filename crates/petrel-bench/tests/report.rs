//! The HTML report rendered from committed fixture results.

#![allow(clippy::unwrap_used)]

use std::path::{Path, PathBuf};

use petrel_bench::report::svg::number;
use petrel_bench::report::{load_records, render_html, write_report, ReportError, REPORT_FILE};

fn fixtures() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures")
}

/// A fresh scratch directory under the target dir.
fn scratch(name: &str) -> PathBuf {
    let dir = Path::new(env!("CARGO_TARGET_TMPDIR")).join(name);
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

const CASES: [&str; 7] = [
    "udp-1024B-4x16",
    "rudp-1024B-4x16",
    "kcp-1024B-1x1",
    "quic-1024B-4x16",
    "websocket-1024B-1x1",
    "rudp-random-arq-1024B-4x16",
    "rudp-random-fec-adaptive-1024B-4x16",
];

/// The two results through the emulator also get a network-overhead chart.
const IMPAIRED: usize = 2;

#[test]
fn report_has_titles_a_bar_per_case_and_the_numbers() {
    let records = load_records(&fixtures()).unwrap();
    assert_eq!(records.len(), CASES.len());
    let order: Vec<&str> = records.iter().map(|r| r.case.as_str()).collect();
    assert_eq!(
        order, CASES,
        "protocol order udp, rudp, kcp, quic, tcp, websocket, then the emulator cases"
    );
    let html = render_html(&records);
    for title in [
        "<title>Petrel benchmark report</title>",
        "Throughput (round trips/s",
        "p99 RTT (µs",
        "Process CPU (%",
        "<h2>Resources</h2>",
        "<h2>Environment</h2>",
        "<h2>Commands</h2>",
    ] {
        assert!(html.contains(title), "missing {title}");
    }
    // Three charts per panel, one bar per case in each, plus overhead for the
    // emulator panel.
    let bars = 3 * CASES.len() + IMPAIRED;
    assert_eq!(html.matches(r#"<rect class="bar""#).count(), bars);
    assert_eq!(html.matches(r#"<g class="whisker""#).count(), bars);
    for case in CASES {
        let charts = if case.contains("random") { 4 } else { 3 };
        let bars = html.matches(&format!(r#"data-case="{case}""#)).count();
        assert_eq!(bars, charts, "{case}");
    }
    // One panel per echo shape and one for the emulator, each with its own axes.
    for panel in [
        "<h3>Loopback echo, 1024B-4x16</h3>",
        "<h3>Loopback echo, 1024B-1x1</h3>",
        "<h3>RUDP through the emulator, 1024B-4x16</h3>",
    ] {
        assert!(html.contains(panel), "missing {panel}");
    }
    assert_eq!(html.matches("<h3>").count(), 3);
    // Ratios of cases of one shape: RUDP against UDP and quinn at 4x16, adaptive
    // FEC against ARQ-only under the random profile.
    assert!(html.contains("<h2>Ratios</h2>"));
    let rt = |case: &str| {
        let r = records.iter().find(|r| r.case == case).unwrap();
        r.summary["round_trips_per_sec"].median
    };
    for (num, den) in [
        ("rudp-1024B-4x16", "udp-1024B-4x16"),
        ("rudp-1024B-4x16", "quic-1024B-4x16"),
        (
            "rudp-random-fec-adaptive-1024B-4x16",
            "rudp-random-arq-1024B-4x16",
        ),
    ] {
        let ratio = format!("<td>{:.2}</td>", rt(num) / rt(den));
        assert!(html.contains(&ratio), "{num} / {den}: {ratio}");
    }
    assert_eq!(
        html.matches("<td>rudp</td><td>").count(),
        2,
        "no 1x1 rudp case"
    );
    for r in &records {
        for key in ["round_trips_per_sec", "rtt_p99_us", "cpu_percent"] {
            let s = r.summary[key];
            for v in [s.median, s.min, s.max] {
                assert!(html.contains(&number(v)), "{} {key} {v}", r.case);
            }
        }
        assert!(html.contains(&r.build.git_revision));
        assert!(html.contains(&r.host.kernel));
        let rss_mib = format!("{:.1}", r.peak_rss_bytes.unwrap() as f64 / 1048576.0);
        assert!(html.contains(&rss_mib));
        let buffers = r.socket_buffers.unwrap();
        assert!(html.contains(&buffers.server.recv_actual.to_string()));
        assert!(html.contains(&r.command_line[1..].join(" ")));
    }
    for peer in ["tokio_kcp 0.", "quinn 0.11.", "tokio-tungstenite 0."] {
        assert!(html.contains(peer), "missing peer {peer}");
    }
    assert!(html.contains("all ok"));
}

#[test]
fn report_is_self_contained() {
    let html = render_html(&load_records(&fixtures()).unwrap());
    for external in [
        "http://", "https://", "<script", "<link", "src=", "url(", "@import",
    ] {
        assert!(!html.contains(external), "external reference {external}");
    }
}

#[test]
fn write_report_writes_next_to_the_results() {
    let dir = scratch("report-write");
    for case in CASES {
        let name = format!("{case}.json");
        std::fs::copy(fixtures().join(&name), dir.join(&name)).unwrap();
    }
    let path = write_report(&dir).unwrap();
    assert_eq!(path, dir.join(REPORT_FILE));
    let html = std::fs::read_to_string(&path).unwrap();
    assert!(html.starts_with("<!DOCTYPE html>"));
    // The report itself is not read back as a result on a second run.
    write_report(&dir).unwrap();
}

#[test]
fn bad_directories_are_clear_errors() {
    let empty = scratch("report-empty");
    assert!(matches!(load_records(&empty), Err(ReportError::Empty(_))));

    let bad = scratch("report-bad");
    std::fs::write(bad.join("broken.json"), "{\"schema_version\": 1").unwrap();
    let err = load_records(&bad).unwrap_err();
    assert!(matches!(err, ReportError::Parse { .. }));
    assert!(err.to_string().contains("broken.json"), "{err}");

    let missing = empty.join("no-such-dir");
    assert!(matches!(
        load_records(&missing),
        Err(ReportError::Io { .. })
    ));
}
