//! `petrel bench netem --json` writes the same result envelope as every other benchmark.

#![allow(clippy::unwrap_used)]

use std::process::Command;

#[test]
fn netem_bench_json_is_a_result_record() {
    let out = Command::new(env!("CARGO_BIN_EXE_petrel"))
        .args([
            "bench",
            "netem",
            "--mode",
            "accuracy",
            "--pps",
            "2000",
            "--accuracy-seconds",
            "0.3",
            "--json",
            "-",
        ])
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(0), "{stderr}");
    let json: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    for key in [
        "schema_version",
        "command_line",
        "build",
        "host",
        "started_at",
        "parameters",
        "rounds",
        "summary",
        "errors",
        "ok",
    ] {
        assert!(json.get(key).is_some(), "missing {key}");
    }
    assert_eq!(json["benchmark"], "netem");
    assert_eq!(json["case"], "netem-accuracy");
    assert!(json["build"]["git_revision"].is_string());
    assert!(json["build"]["rustc_version"].is_string());
    assert!(json["host"]["logical_cores"].as_u64().unwrap() >= 1);
    let round = &json["rounds"][0];
    assert!(round["ceiling"].is_null());
    assert!(round["delay_accuracy"]["received"].as_u64().unwrap() > 0);
    assert!(json["summary"]["relay_lateness_p99_us"]["median"].is_number());
    assert_eq!(json["errors"]["accuracy_no_traffic"], 0);
    assert_eq!(json["ok"], true);
}
