//! `petrel bench` as a user runs it: exit codes, JSON output, result files.

#![allow(clippy::unwrap_used)]

mod support;

use support::{assert_usage_errors, petrel};

use std::path::PathBuf;

#[test]
fn invalid_arguments_exit_with_2_and_name_the_problem() {
    let cases: [(&[&str], &str); 11] = [
        (&["--io-threads", "0"], "--io-threads"),
        (&["--payload", "15"], "--payload"),
        (&["--payload", "65508"], "--payload"),
        (&["--clients", "0"], "--clients"),
        (&["--window", "0"], "--window"),
        (&["--seconds", "0"], "--seconds"),
        (&["--seconds=-1"], "--seconds"),
        // A negative number is the flag's value, checked against its range, not
        // an unknown flag `-1`.
        (
            &["--seconds", "-1"],
            "'--seconds <SECONDS>': must be in 0..=86400 s",
        ),
        (&["--rounds", "0"], "--rounds"),
        (&["--protocol", "carrier-pigeon"], "protocol"),
        (&["--no-such-flag"], "no-such-flag"),
    ];
    assert_usage_errors(&["bench", "echo"], &cases);
    let out = petrel(&["bench", "--seconds", "0", "--out-dir", "unused"]);
    assert_eq!(out.status.code(), Some(2));
    // In the unit the flag takes, not `0ns` / `1ns..=3600s`.
    assert!(
        String::from_utf8_lossy(&out.stderr)
            .contains("invalid --seconds = 0 s: must be in 0.001..=3600 s"),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
}

#[test]
fn echo_writes_json_to_stdout_and_exits_0_when_ok() {
    for protocol in ["udp", "tcp"] {
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
            "0.3",
            "--warmup",
            "0.1",
            "--json",
            "-",
        ]);
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(0), "{stderr}");
        let json: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
        assert_eq!(json["ok"], true);
        assert_eq!(json["parameters"]["protocol"], protocol);
        assert_eq!(json["parameters"]["runtime"], "current_thread");
        assert_eq!(json["command_line"][3], "--protocol");
        assert!(json["rounds"][0]["round_trips"].as_u64().unwrap() > 0);
        assert!(stderr.contains("rt/s"), "table goes to stderr: {stderr}");
    }
}

#[test]
fn echo_on_a_multi_thread_runtime_writes_a_json_file() {
    let path = PathBuf::from(env!("CARGO_TARGET_TMPDIR"))
        .join(format!("echo-{}.json", std::process::id()));
    let out = petrel(&[
        "bench",
        "echo",
        "--protocol",
        "tcp",
        "--io-threads",
        "2",
        "--seconds",
        "0.2",
        "--warmup",
        "0",
        "--json",
        path.to_str().unwrap(),
    ]);
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(String::from_utf8_lossy(&out.stdout).contains("tcp-1024B-1x1"));
    let json: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&path).unwrap()).unwrap();
    assert_eq!(json["parameters"]["runtime"], "multi_thread");
    assert_eq!(json["parameters"]["runtime_workers"], 2);
    std::fs::remove_file(&path).unwrap();
}

#[test]
fn default_suite_writes_one_json_per_case() {
    let out_dir =
        PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join(format!("suite-{}", std::process::id()));
    let out = petrel(&[
        "bench",
        "--seconds",
        "0.2",
        "--warmup",
        "0.05",
        "--out-dir",
        out_dir.to_str().unwrap(),
    ]);
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert_eq!(
        out.status.code(),
        Some(0),
        "{stdout}{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let runs: Vec<_> = std::fs::read_dir(&out_dir).unwrap().collect();
    assert_eq!(runs.len(), 1);
    let run = runs.into_iter().next().unwrap().unwrap().path();
    let mut names: Vec<String> = std::fs::read_dir(&run)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    names.sort();
    let mut expected = vec!["report.html".to_owned()];
    for protocol in ["udp", "rudp", "kcp", "quic", "tcp", "websocket"] {
        for shape in ["4x16", "1x1"] {
            expected.push(format!("{protocol}-1024B-{shape}.json"));
        }
    }
    for profile in ["none", "random", "burst"] {
        for fec in ["arq", "fec-fixed", "fec-adaptive"] {
            expected.push(format!("rudp-{profile}-{fec}-1024B-4x16.json"));
        }
    }
    // kcptun's rows where it is installed (CI requires it), one skip line otherwise.
    let kcptun = ["kcptun-client", "kcptun-server"].iter().all(|name| {
        std::env::var_os("PATH")
            .is_some_and(|path| std::env::split_paths(&path).any(|dir| dir.join(name).is_file()))
    });
    if kcptun {
        for profile in ["random", "burst"] {
            for shape in ["8+2", "10+3"] {
                expected.push(format!("kcptun-{profile}-fec-{shape}-1024B-4x16.json"));
            }
        }
    } else {
        assert!(
            stdout.contains("kcptun not installed: skipped kcptun rows (apt install kcptun)\n"),
            "{stdout}"
        );
    }
    expected.sort();
    assert_eq!(names, expected);
    let report = run.join("report.html");
    assert!(stdout.contains(&format!("report: {}", report.display())));
    names.retain(|n| n.ends_with(".json"));
    for name in &names {
        let text = std::fs::read_to_string(run.join(name)).unwrap();
        let json: serde_json::Value = serde_json::from_str(&text).unwrap();
        assert_eq!(json["ok"], true, "{name}");
        assert!(stdout.contains(name.trim_end_matches(".json")));
    }
    for ratio in [
        "1024B-4x16: rudp / udp",
        "1024B-1x1: rudp / quic",
        "random 1024B-4x16: fec-adaptive / arq",
    ] {
        assert!(stdout.contains(ratio), "missing {ratio}: {stdout}");
    }
    if kcptun {
        for ratio in [
            "random 1024B-4x16: rudp fec-fixed / kcptun 8+2",
            "burst 1024B-4x16: rudp fec-adaptive / kcptun 10+3",
        ] {
            assert!(stdout.contains(ratio), "missing {ratio}: {stdout}");
        }
    }
    let stderr = String::from_utf8_lossy(&out.stderr);
    let last = if kcptun {
        "[25/25] running kcptun-burst-fec-10+3-1024B-4x16"
    } else {
        "[21/21] running rudp-burst-fec-adaptive-1024B-4x16"
    };
    assert!(stderr.contains(last), "{stderr}");
    std::fs::remove_dir_all(&out_dir).unwrap();
}

#[test]
fn reflector_bench_writes_a_record_with_one_round_per_stage() {
    let out = petrel(&[
        "bench",
        "reflector",
        "--levels",
        "4,8",
        "--duration-s",
        "1",
        "--json",
        "-",
    ]);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(0), "{stderr}");
    let json: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(json["benchmark"], "reflector");
    assert_eq!(json["ok"], true);
    let rounds = json["rounds"].as_array().unwrap();
    assert_eq!(rounds.len(), 2);
    for (round, devices) in rounds.iter().zip([4, 8]) {
        assert_eq!(round["clients"], devices);
        // One speaker, everyone else receives every voice packet.
        let sent = round["sent"].as_u64().unwrap();
        assert!(sent > 0);
        assert_eq!(round["expected"].as_u64().unwrap(), sent * (devices - 1));
        assert_eq!(round["received"], round["expected"], "{round}");
        for key in ["latency_p95_ms", "server_cpu_cores", "loadgen_cpu_cores"] {
            assert!(round[key].as_f64().is_some(), "{key} in {round}");
        }
        // By default the reflector is a child process, measured on its own.
        assert_eq!(round["server_process"], "child", "{round}");
        assert!(round["server_rss_mb"].as_f64().unwrap() > 1.0, "{round}");
    }
    assert_eq!(stderr.matches("RESULT clients=").count(), 2, "{stderr}");
}

#[test]
fn reflector_bench_interval_list_finds_the_fastest_zero_loss_interval() {
    let out = petrel(&[
        "bench",
        "reflector",
        "--levels",
        "4",
        "--interval-ms",
        "60,30",
        "--duration-s",
        "1",
        "--in-process",
        "--json",
        "-",
    ]);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(0), "{stderr}");
    let json: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let rounds = json["rounds"].as_array().unwrap();
    let intervals: Vec<u64> = rounds
        .iter()
        .map(|r| r["interval_ms"].as_u64().unwrap())
        .collect();
    assert_eq!(intervals, [60, 30]);
    assert!(rounds.iter().all(|r| r["loss_pct"] == 0.0), "{json}");
    assert!(
        rounds
            .iter()
            .all(|r| r["server_process"] == "in-process" && r["server_rss_mb"].is_null()),
        "{json}"
    );
    assert!(
        stderr.contains("FASTEST clients=4 zero_loss_interval=30ms output_pps="),
        "{stderr}"
    );
}

#[test]
fn reflector_bench_rejects_invalid_stages() {
    let cases: [(&[&str], &str); 7] = [
        (&["--groups", "0"], "groups"),
        (&["--levels", "1"], "devices"),
        (&["--payload", "9999"], "payload"),
        (&["--json", "/proc/petrel/x.json"], "/proc/petrel/x.json"),
        (&["--writers", "0"], "writers"),
        (&["--max-frame-age-ms", "0"], "max_frame_age_ms"),
        (&["--interval-ms", "30,60"], "slowest first"),
    ];
    assert_usage_errors(&["bench", "reflector", "--levels", "4"], &cases);
}
