//! The HTML report as a browser renders it: a tiny real run (`petrel bench
//! echo` of raw UDP, RUDP and TCP, and `petrel bench rudp` through the
//! emulator, 0.2 s each), `petrel report`, then headless Chromium dumps the DOM and takes a
//! screenshot (`target/tmp/report-browser/report.png`). The summary and the
//! published-vs-Petrel panel must be in the DOM, with Petrel's figure in the
//! rows whose case ran and "not run" in the others, and Chromium must log no
//! console message.
//!
//! Skipped with a message when Chromium is not installed;
//! `PETREL_REQUIRE_CHROMIUM=1` (set by `.ci/run`) makes that a failure.
//! Chromium runs with `--no-sandbox`: its sandbox refuses to start as root,
//! and the page is a local file this test wrote.

#![allow(clippy::unwrap_used)]

mod support;

use std::fs::File;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use support::petrel;

/// Longest a Chromium run may take before it is killed and the test fails.
const CHROMIUM_TIMEOUT: Duration = Duration::from_secs(120);

fn scratch(name: &str) -> PathBuf {
    let dir = Path::new(env!("CARGO_TARGET_TMPDIR")).join(name);
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

/// The first Chromium on `PATH`.
fn chromium() -> Option<PathBuf> {
    let path = std::env::var_os("PATH")?;
    ["chromium", "chromium-browser", "google-chrome"]
        .iter()
        .flat_map(|name| std::env::split_paths(&path).map(move |dir| dir.join(name)))
        .find(|p| p.is_file())
}

/// Runs Chromium headless on `page` with `mode` (`--dump-dom` or
/// `--screenshot=…`); returns (stdout, stderr). Kills it after
/// [`CHROMIUM_TIMEOUT`].
fn run_chromium(bin: &Path, work: &Path, mode: &str, page: &Path) -> (String, String) {
    let out = work.join("chromium.out");
    let err = work.join("chromium.err");
    let mut child = Command::new(bin)
        .args([
            "--headless",
            "--no-sandbox",
            "--disable-gpu",
            "--disable-dev-shm-usage",
            "--no-first-run",
            "--enable-logging=stderr",
            "--v=0",
            "--window-size=1280,1000",
        ])
        .arg(format!(
            "--user-data-dir={}",
            work.join("profile").display()
        ))
        .arg(mode)
        .arg(format!("file://{}", page.display()))
        .stdin(Stdio::null())
        .stdout(File::create(&out).unwrap())
        .stderr(File::create(&err).unwrap())
        .spawn()
        .unwrap();
    let deadline = Instant::now() + CHROMIUM_TIMEOUT;
    let status = loop {
        if let Some(status) = child.try_wait().unwrap() {
            break status;
        }
        if Instant::now() > deadline {
            let _ = child.kill();
            let _ = child.wait();
            panic!("chromium {mode} did not finish in {CHROMIUM_TIMEOUT:?}");
        }
        std::thread::sleep(Duration::from_millis(50));
    };
    let stdout = std::fs::read_to_string(&out).unwrap();
    let stderr = std::fs::read_to_string(&err).unwrap();
    assert!(status.success(), "chromium {mode}: {status}\n{stderr}");
    (stdout, stderr)
}

fn bench(args: &[&str]) {
    let out = petrel(args);
    assert_eq!(
        out.status.code(),
        Some(0),
        "{args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
}

/// The DOM of the `<tr data-figure="id">` row.
fn figure_row<'a>(dom: &'a str, id: &str) -> &'a str {
    let start = dom
        .find(&format!("<tr data-figure=\"{id}\""))
        .unwrap_or_else(|| panic!("no row {id}"));
    let row = &dom[start..];
    &row[..row.find("</tr>").unwrap()]
}

#[test]
fn report_renders_summary_and_published_panel_in_chromium() {
    let Some(bin) = chromium() else {
        let msg = "chromium not found; install it (apt install chromium) to check the report in a browser";
        assert!(
            std::env::var("PETREL_REQUIRE_CHROMIUM").as_deref() != Ok("1"),
            "PETREL_REQUIRE_CHROMIUM=1: {msg}"
        );
        eprintln!("SKIPPED: {msg}");
        return;
    };
    let work = scratch("report-browser");
    let results = work.join("results");
    std::fs::create_dir_all(&results).unwrap();
    let json = |case: &str| results.join(format!("{case}.json")).display().to_string();
    let short = ["--seconds", "0.2", "--warmup", "0.05"];
    for protocol in ["udp", "rudp", "tcp"] {
        let target = json(&format!("{protocol}-1024B-1x1"));
        bench(
            &[
                &["bench", "echo", "--protocol", protocol, "--json", &target],
                &short[..],
            ]
            .concat(),
        );
    }
    let target = json("rudp-random-fec-fixed-1024B-4x16");
    bench(
        &[
            &[
                "bench",
                "rudp",
                "--profile",
                "random",
                "--fec",
                "fixed",
                "--rounds",
                "1",
                "--json",
                &target,
            ],
            &short[..],
        ]
        .concat(),
    );
    // What a run writes for a peer that is not installed.
    petrel_bench::report::note_skipped(
        &results,
        "rudp-kcptun-random-fec-fixed-1024B-4x16",
        "kcptun-client not found; install it with apt install kcptun",
    )
    .unwrap();
    let out = petrel(&["report", results.to_str().unwrap()]);
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let page = results.join("report.html");

    let (dom, log) = run_chromium(&bin, &work, "--dump-dom", &page);
    for needle in [
        "<section id=\"summary\">",
        "What ran",
        "4 case(s): 3 echo, 1 rudp",
        "What won",
        "What failed",
        "rudp-kcptun-random-fec-fixed-1024B-4x16",
        "kcptun-client not found",
        "<section id=\"published-vs-petrel\">",
        "Published vs Petrel",
    ] {
        assert!(dom.contains(needle), "DOM lacks {needle}");
    }
    // RUDP and TCP at 1024B-1x1 are compared; raw UDP is the baseline.
    let won = &dom[dom.find("<table class=\"won\">").expect("a What won table")..];
    let won = &won[..won.find("</table>").unwrap()];
    assert_eq!(won.matches("<tr>").count(), 2, "{won}");
    assert!(
        won.contains("Loopback echo, 1024B-1x1") && won.contains("× "),
        "{won}"
    );
    assert!(!won.contains("<b>udp</b>"), "{won}");
    // The summary comes first, before the panel and the charts.
    let summary = dom.find("id=\"summary\"").unwrap();
    assert!(summary < dom.find("id=\"published-vs-petrel\"").unwrap());
    assert!(summary < dom.find("<svg").unwrap());
    // Rows whose case ran carry Petrel's case and a share of this run's limit.
    let udp = figure_row(&dom, "arknet-udp-1x1-throughput");
    assert!(
        udp.contains("udp-1024B-1x1") && udp.contains("not like-for-like: different machine"),
        "{udp}"
    );
    let fixed = figure_row(&dom, "arknet-rudp-random-fixed-throughput");
    assert!(
        fixed.contains("rudp-random-fec-fixed-1024B-4x16"),
        "{fixed}"
    );
    assert!(fixed.contains("844–869 rt/s"), "{fixed}");
    assert!(fixed.contains("÷ 20 ms emulated RTT"), "{fixed}");
    // Cases that did not run say so and show no Petrel number.
    for id in [
        "arknet-udp-16x1-throughput",
        "quic-goodput-aioquic",
        "draarl-9000-20ms-pps",
    ] {
        let row = figure_row(&dom, id);
        assert!(row.contains("not run"), "{row}");
        assert!(!row.contains("class=\"petrel\""), "{row}");
    }
    // Every chart has its unit, an x-axis label and a legend.
    let charts = dom.matches("<svg").count();
    assert!(charts >= 3, "{charts} charts");
    assert_eq!(dom.matches("class=\"x-label\"").count(), charts);
    assert_eq!(dom.matches("<g class=\"legend\">").count(), charts);
    // No console message (script error, failed load) from the page.
    let console: Vec<&str> = log
        .lines()
        .filter(|l| l.contains("CONSOLE") || l.contains("Uncaught"))
        .collect();
    assert!(console.is_empty(), "console: {console:?}");

    let png = work.join("report.png");
    run_chromium(
        &bin,
        &work,
        &format!("--screenshot={}", png.display()),
        &page,
    );
    let size = std::fs::metadata(&png).unwrap().len();
    assert!(size > 10_000, "screenshot of {size} bytes");
}
