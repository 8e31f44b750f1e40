//! `petrel report` and `petrel bench matrix` as a user runs them, and the
//! peer protocols of `petrel bench echo`.

#![allow(clippy::unwrap_used)]

mod support;

use support::petrel;

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

#[test]
fn echo_runs_each_peer_and_names_it() {
    for (protocol, peer) in [
        ("websocket", "tokio-tungstenite "),
        ("kcp", "tokio_kcp "),
        ("quic", "quinn 0.11."),
    ] {
        let out = petrel(&[
            "bench",
            "echo",
            "--protocol",
            protocol,
            "--clients",
            "2",
            "--window",
            "4",
            "--seconds",
            "0.2",
            "--warmup",
            "0.05",
            "--json",
            "-",
        ]);
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(0), "{protocol}: {stderr}");
        let json: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
        assert_eq!(json["parameters"]["protocol"], protocol);
        let recorded = json["parameters"]["peer"].as_str().unwrap();
        assert!(recorded.starts_with(peer), "{recorded}");
    }
}

#[test]
fn socket_buffers_for_stream_transports_are_refused() {
    for protocol in ["tcp", "websocket"] {
        for flag in ["--send-buffer", "--recv-buffer"] {
            let out = petrel(&["bench", "echo", "--protocol", protocol, flag, "65536"]);
            let stderr = String::from_utf8_lossy(&out.stderr);
            assert_eq!(out.status.code(), Some(2), "{protocol} {flag}: {stderr}");
            assert!(stderr.contains("udp, rudp, kcp and quic only"), "{stderr}");
        }
    }
}

#[test]
fn report_renders_a_directory_and_rejects_bad_ones() {
    let dir = scratch("cli-report");
    let fixtures = Path::new(env!("CARGO_MANIFEST_DIR")).join("../petrel-bench/tests/fixtures");
    for entry in std::fs::read_dir(&fixtures).unwrap() {
        let path = entry.unwrap().path();
        std::fs::copy(&path, dir.join(path.file_name().unwrap())).unwrap();
    }
    let out = petrel(&["report", dir.to_str().unwrap()]);
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let html = std::fs::read_to_string(dir.join("report.html")).unwrap();
    assert!(html.contains("quic-1024B-4x16"));
    assert!(String::from_utf8_lossy(&out.stdout).contains("report.html"));

    let empty = scratch("cli-report-empty");
    let out = petrel(&["report", empty.to_str().unwrap()]);
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("no JSON result files"));

    std::fs::write(empty.join("junk.json"), "[]").unwrap();
    let out = petrel(&["report", empty.to_str().unwrap()]);
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("junk.json"));

    let out = petrel(&["report", empty.join("missing").to_str().unwrap()]);
    assert_eq!(out.status.code(), Some(1));
}

#[test]
fn matrix_runs_each_round_in_a_process_and_merges() {
    let dir = scratch("cli-matrix");
    let config = dir.join("matrix.toml");
    std::fs::write(
        &config,
        "seconds = 0.2\nwarmup = 0.05\n[[case]]\nprotocol = \"udp\"\nclients = 2\nwindow = 4\n[[case]]\nprotocol = \"kcp\"\n",
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
    // stderr is a pipe here: no progress bar, one line per round.
    assert_eq!(stderr.matches("running ").count(), 6, "{stderr}");
    assert!(!stderr.contains('\r'));
    let run = the_only_subdir(&out_dir);
    for case in ["udp-1024B-2x4", "kcp-1024B-1x1"] {
        let text = std::fs::read_to_string(run.join(format!("{case}.json"))).unwrap();
        let json: serde_json::Value = serde_json::from_str(&text).unwrap();
        assert_eq!(json["ok"], true);
        assert_eq!(json["seeds"], serde_json::json!([42, 43, 44]));
        assert_eq!(json["rounds"].as_array().unwrap().len(), 3);
        assert_eq!(json["parameters"]["rounds"], 3);
        assert_eq!(json["command_line"][2], "matrix");
        assert_eq!(json["rounds"][2]["command_line"][2], "echo");
        let s = &json["summary"]["round_trips_per_sec"];
        assert!(s["min"].as_f64().unwrap() <= s["max"].as_f64().unwrap());
        assert!(stdout.contains(case));
    }
    assert!(run.join("report.html").is_file());
    assert!(stdout.contains("report: "));
}

#[test]
fn matrix_config_errors_exit_2_and_name_the_field() {
    let dir = scratch("cli-matrix-bad");
    let cases = [
        (
            "[[case]]\nprotocol = \"udp\"\nwindow = 0\n",
            "case[0].window",
        ),
        ("[[case]]\nprotocol = \"smtp\"\n", "case[0].protocol"),
        (
            "rounds = 2\nseeds = [1]\n[[case]]\nprotocol = \"udp\"\n",
            "seeds",
        ),
        ("[[case]]\nprotocol = \"udp\"\nbogus = 1\n", "bogus"),
    ];
    for (i, (text, needle)) in cases.iter().enumerate() {
        let config = dir.join(format!("m{i}.toml"));
        std::fs::write(&config, text).unwrap();
        let out = petrel(&[
            "bench",
            "matrix",
            "--config",
            config.to_str().unwrap(),
            "--out-dir",
            dir.join("out").to_str().unwrap(),
        ]);
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{text}: {stderr}");
        assert!(stderr.contains(needle), "{text}: {stderr}");
    }
    assert!(
        !dir.join("out").exists(),
        "nothing is run or created for a bad file"
    );
    let out = petrel(&[
        "bench",
        "matrix",
        "--config",
        dir.join("none.toml").to_str().unwrap(),
    ]);
    assert_eq!(out.status.code(), Some(2));
}
