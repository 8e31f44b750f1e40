//! `petrel bench matrix` with cases of several kinds, and the `bench echo`
//! options the arknet matrices use: `--work`, `--io-model sharded`, and the
//! `tls` and `wss` protocols.

#![allow(clippy::unwrap_used)]

mod support;

use support::{assert_usage_errors, petrel};

use std::path::{Path, PathBuf};

/// A fresh scratch directory under the target dir.
fn scratch(name: &str) -> PathBuf {
    let dir = Path::new(env!("CARGO_TARGET_TMPDIR")).join(name);
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

fn the_only_subdir(dir: &Path) -> PathBuf {
    let runs: Vec<_> = std::fs::read_dir(dir).unwrap().collect();
    assert_eq!(runs.len(), 1);
    runs.into_iter().next().unwrap().unwrap().path()
}

fn json(path: &Path) -> serde_json::Value {
    serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap()
}

#[test]
fn a_rudp_case_and_an_echo_case_run_with_their_seeds_and_merge() {
    let dir = scratch("cli-matrix-kinds");
    let config = dir.join("matrix.toml");
    std::fs::write(
        &config,
        r#"
        rounds = 2
        seeds = [7, 8]
        seconds = 0.3
        warmup = 0.1

        [[case]]
        kind = "rudp"
        profile = "random"
        fec = "fixed"
        clients = 2
        window = 4

        [[case]]
        protocol = "tls"
        clients = 2
        window = 2
        work = 3
        seeds = [9]
        "#,
    )
    .unwrap();
    let out_dir = dir.join("out");
    let out = petrel(&[
        "bench",
        "matrix",
        "--config",
        config.to_str().unwrap(),
        "--out-dir",
        out_dir.to_str().unwrap(),
    ]);
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(0), "{stdout}{stderr}");
    assert!(
        stderr.contains("2 cases, 3 rounds, estimated wall time"),
        "{stderr}"
    );
    assert_eq!(stderr.matches("running ").count(), 3, "{stderr}");
    assert!(stdout.contains("wall time: "), "{stdout}");
    let run = the_only_subdir(&out_dir);

    let rudp = json(&run.join("rudp-random-fec-fixed-1024B-2x4.json"));
    assert_eq!(rudp["benchmark"], "rudp");
    assert_eq!(rudp["ok"], true);
    assert_eq!(rudp["seeds"], serde_json::json!([7, 8]));
    let rounds = rudp["rounds"].as_array().unwrap();
    assert_eq!(rounds.len(), 2);
    for (i, seed) in [(0, 7), (1, 8)] {
        assert_eq!(rounds[i]["seed"], seed);
        let argv: Vec<&str> = rounds[i]["command_line"]
            .as_array()
            .unwrap()
            .iter()
            .map(|a| a.as_str().unwrap())
            .collect();
        // The round's seed reaches the relay through `--seed`.
        let at = argv.iter().position(|a| *a == "--seed").unwrap();
        assert_eq!(argv[at + 1], seed.to_string(), "{argv:?}");
        assert_eq!(&argv[1..3], ["bench", "rudp"]);
    }
    assert_eq!(rudp["parameters"]["rounds"], 2);
    assert_eq!(rudp["command_line"][2], "matrix");
    let s = &rudp["summary"]["round_trips_per_sec"];
    assert!(s["min"].as_f64().unwrap() <= s["median"].as_f64().unwrap());
    assert!(s["median"].as_f64().unwrap() <= s["max"].as_f64().unwrap());
    assert!(s["min"].as_f64().unwrap() > 0.0);

    let tls = json(&run.join("tls-1024B-2x2-work3.json"));
    assert_eq!(tls["ok"], true);
    assert_eq!(tls["seeds"], serde_json::json!([9]));
    assert_eq!(tls["parameters"]["work"], 3);
    assert_eq!(tls["parameters"]["tls"]["version"], "TLSv1_3");
    assert_eq!(tls["rounds"][0]["command_line"][2], "echo");
    // Per-round results and the rounds' stderr are kept next to the merge.
    assert!(run.join("rounds/case000-rudp-r1.json").is_file());
    assert!(run.join("rounds/tls-1024B-2x2-work3-r0.stderr").is_file());
    assert!(run.join("report.html").is_file());
}

#[test]
fn a_case_the_subcommand_refuses_stops_the_matrix_with_exit_2() {
    let dir = scratch("cli-matrix-refused");
    let config = dir.join("matrix.toml");
    // In range for the matrix, refused by `bench echo`: socket buffers for TCP.
    std::fs::write(
        &config,
        "seconds = 0.1\nwarmup = 0\n[[case]]\nprotocol = \"tcp\"\nsend_buffer = 65536\n",
    )
    .unwrap();
    let out = petrel(&[
        "bench",
        "matrix",
        "--config",
        config.to_str().unwrap(),
        "--out-dir",
        dir.join("out").to_str().unwrap(),
    ]);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{stderr}");
    assert!(stderr.contains("case[0]"), "{stderr}");
    assert!(stderr.contains("udp, rudp, kcp and quic only"), "{stderr}");
}

#[test]
fn unknown_options_are_named_before_anything_runs() {
    let dir = scratch("cli-matrix-unknown");
    let config = dir.join("matrix.toml");
    std::fs::write(&config, "[[case]]\nkind = \"rudp\"\nfec_shap = \"8+2\"\n").unwrap();
    let out = petrel(&[
        "bench",
        "matrix",
        "--config",
        config.to_str().unwrap(),
        "--out-dir",
        dir.join("out").to_str().unwrap(),
    ]);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{stderr}");
    assert!(stderr.contains("unknown option `fec_shap`"), "{stderr}");
    assert!(!dir.join("out").exists());
}

#[test]
fn dry_run_prints_the_estimate_and_every_round() {
    let config = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../matrices/arknet-rudp.toml");
    let out = petrel(&[
        "bench",
        "matrix",
        "--config",
        config.to_str().unwrap(),
        "--dry-run",
    ]);
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert_eq!(out.status.code(), Some(0), "{stdout}");
    assert!(
        stdout.starts_with("matrix: 60 cases, 96 rounds, estimated wall time 21 min 18 s"),
        "{stdout}"
    );
    assert_eq!(stdout.matches("petrel bench rudp ").count(), 96);
    assert_eq!(stdout.matches("--profile soak").count(), 6);
}

fn echo_json(args: &[&str]) -> serde_json::Value {
    let base = [
        "bench",
        "echo",
        "--seconds",
        "0.3",
        "--warmup",
        "0.05",
        "--json",
        "-",
    ];
    let out = petrel(&[&base[..], args].concat());
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(0), "{args:?}: {stderr}");
    serde_json::from_slice(&out.stdout).unwrap()
}

#[test]
fn tls_and_wss_echo_record_their_session() {
    for (protocol, peer) in [("tls", "rustls 0.23."), ("wss", "tokio-tungstenite ")] {
        let json = echo_json(&["--protocol", protocol, "--clients", "2", "--window", "4"]);
        assert_eq!(json["ok"], true, "{protocol}");
        assert_eq!(json["case"], format!("{protocol}-1024B-2x4"));
        let p = &json["parameters"];
        assert!(p["peer"].as_str().unwrap().starts_with(peer), "{p}");
        assert_eq!(p["tls"]["version"], "TLSv1_3", "{p}");
        assert!(
            p["tls"]["cipher_suite"]
                .as_str()
                .unwrap()
                .starts_with("TLS13_"),
            "{p}"
        );
        assert!(p["tls"]["library"].as_str().unwrap().starts_with("rustls "));
        assert!(json["rounds"][0]["round_trips"].as_u64().unwrap() > 0);
    }
}

#[test]
fn work_and_the_sharded_model_are_recorded_and_run_clean() {
    let json = echo_json(&["--protocol", "udp", "--clients", "2", "--work", "50"]);
    assert_eq!(json["ok"], true);
    assert_eq!(json["case"], "udp-1024B-2x1-work50");
    assert_eq!(json["parameters"]["work"], 50);
    assert_eq!(json["parameters"]["io_model"], "shared");
    let round = &json["rounds"][0];
    assert_eq!(round["server_echoed"], round["sent"]);

    let json = echo_json(&[
        "--protocol",
        "rudp",
        "--clients",
        "3",
        "--window",
        "2",
        "--io-model",
        "sharded",
        "--io-threads",
        "2",
    ]);
    assert_eq!(json["ok"], true);
    assert_eq!(json["case"], "rudp-1024B-3x2-sharded2");
    assert_eq!(json["parameters"]["io_model"], "sharded");
    assert_eq!(json["parameters"]["shards"], 2);
    assert_eq!(json["parameters"]["work"], 0);

    assert_usage_errors(
        &["bench", "echo", "--seconds", "0.1"],
        &[
            (&["--work", "1000001"], "work"),
            (&["--work", "lots"], "--work"),
            (&["--io-model", "pooled"], "--io-model"),
            (
                &["--protocol", "wss", "--recv-buffer", "65536"],
                "tls and wss",
            ),
        ],
    );
}

#[test]
fn goodput_and_reflector_cases_merge_their_figures() {
    let dir = scratch("cli-matrix-goodput-reflector");
    let config = dir.join("matrix.toml");
    std::fs::write(
        &config,
        r#"
        rounds = 2
        seeds = [3, 4]

        [[case]]
        kind = "goodput"
        transport = "rudp"
        cc = "cubic"
        bandwidth_mbps = 50
        size_mb = 1

        [[case]]
        kind = "reflector"
        levels = 10
        interval_ms = 120
        duration_s = 1
        "#,
    )
    .unwrap();
    let out_dir = dir.join("out");
    let out = petrel(&[
        "bench",
        "matrix",
        "--config",
        config.to_str().unwrap(),
        "--out-dir",
        out_dir.to_str().unwrap(),
    ]);
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(0), "{stdout}{stderr}");
    let run = the_only_subdir(&out_dir);

    let goodput = json(&run.join("rudp-cubic-p2p-50mbps-4ms-q1000.json"));
    assert_eq!(goodput["benchmark"], "goodput");
    assert_eq!(goodput["ok"], true);
    assert_eq!(goodput["seeds"], serde_json::json!([3, 4]));
    assert_eq!(goodput["rounds"].as_array().unwrap().len(), 2);
    assert_eq!(goodput["rounds"][1]["seed"], 4);
    let g = &goodput["summary"]["goodput_mbps"];
    assert!(g["min"].as_f64().unwrap() > 0.0, "{g}");
    assert!(g["max"].as_f64().unwrap() <= 50.0, "{g}");

    let reflector = json(&run.join("reflector-1g-120ms.json"));
    assert_eq!(reflector["ok"], true);
    assert_eq!(reflector["rounds"].as_array().unwrap().len(), 2);
    // A stage keeps no summary: its rounds' numbers are merged instead.
    let pps = &reflector["summary"]["output_pps"];
    assert!(pps["median"].as_f64().unwrap() > 0.0, "{pps}");
    assert!(stdout.contains("goodput_mbps "), "{stdout}");
    assert!(
        stdout.contains("reflector-1g-120ms  output_pps "),
        "{stdout}"
    );
}
