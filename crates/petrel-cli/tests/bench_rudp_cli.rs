//! `petrel bench rudp` as a user runs it: exit codes and JSON output.

#![allow(clippy::unwrap_used)]

mod support;

use support::{assert_usage_errors, petrel};

#[test]
fn invalid_arguments_exit_with_2_and_name_the_problem() {
    let cases: [(&[&str], &str); 11] = [
        (&["--json", "/nonexistent-dir/out.json"], "--json"),
        (&["--fec", "xor"], "fec"),
        (&["--profile", "p2p"], "profile"),
        (&["--io-model", "threads"], "io-model"),
        (
            &["--io-model", "sharded", "--io-threads", "5"],
            "io-threads",
        ),
        (&["--io-threads", "0"], "io-threads"),
        (&["--loss", "101"], "loss"),
        (&["--duplicate", "NaN"], "duplicate"),
        (&["--delay-ms", "60001"], "delay-ms"),
        (&["--payload", "15"], "payload"),
        (&["--rounds", "0"], "rounds"),
    ];
    assert_usage_errors(
        &["bench", "rudp", "--seconds", "0.1", "--warmup", "0"],
        &cases,
    );
}

#[test]
fn short_random_run_writes_an_ok_record_to_stdout() {
    let out = petrel(&[
        "bench",
        "rudp",
        "--profile",
        "random",
        "--loss",
        "10",
        "--seconds",
        "1",
        "--warmup",
        "0.3",
        "--rounds",
        "1",
        "--seed",
        "5",
        "--json",
        "-",
    ]);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(0), "{stderr}");
    assert!(stderr.contains("rudp-random-arq-1024B-4x16"), "{stderr}");
    let json: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(json["ok"], true);
    assert_eq!(json["seeds"], serde_json::json!([5]));
    assert_eq!(json["parameters"]["link"]["random_loss"], 0.1);
    let round = &json["rounds"][0];
    let loss = round["relay"]["measured_loss"].as_f64().unwrap();
    assert!((0.05..=0.16).contains(&loss), "{loss}");
    assert!(round["retransmissions"].as_u64().unwrap() > 0);
    assert!(json["command_line"].as_array().unwrap().len() > 2);
}
