//! `petrel bench goodput` as a user runs it: exit codes, the table and JSON output.

#![allow(clippy::unwrap_used)]

mod support;

use support::{assert_usage_errors, petrel};

#[test]
fn invalid_arguments_exit_with_2_and_name_the_problem() {
    let cases: [(&[&str], &str); 21] = [
        (&["--transport", "sctp"], "transport"),
        (&["--cc", "vegas"], "cc"),
        (
            &["--transport", "quinn", "--cc", "bbrv3"],
            "quinn has no bbrv3",
        ),
        (
            &["--transport", "quic,quinn", "--cc", "cubic,bbrv2"],
            "quinn has no bbrv2",
        ),
        (&["--transport", "tcp"], "loopback only"),
        (
            &["--transport", "tcp", "--profile", "none", "--cc", "bbrv3"],
            "Linux TCP has no bbrv3",
        ),
        (&["--queue", "0"], "queue"),
        (&["--bandwidth-mbps", "0"], "bandwidth"),
        (&["--size-mb", "0"], "size-mb"),
        (&["--repetitions", "0"], "repetitions"),
        // The RUDP flags' ranges are checked whatever the transport, and
        // the error names the flag and its range, also for a non-number.
        (
            &[
                "--transport",
                "tcp",
                "--profile",
                "none",
                "--rudp-mtu",
                "9001",
            ],
            "'--rudp-mtu <RUDP_MTU>': must be a whole number in 256..=9000",
        ),
        (
            &["--rudp-mtu", "abc"],
            "--rudp-mtu <RUDP_MTU>': must be a whole number in 256..=9000",
        ),
        (&["--rudp-mtu", "255"], "256..=9000"),
        (
            &["--rudp-window", "8"],
            "'--rudp-window <RUDP_WINDOW>': must be a whole number in 16..=4096",
        ),
        (&["--json", "/nonexistent-dir/out.json"], "--json"),
        (&["--loss", "101"], "--loss"),
        (&["--loss", "-1"], "--loss"),
        (&["--scenario", "bbr-fast"], "--scenario"),
        (
            &["--scenario", "bbr-loss", "--cc", "cubic"],
            "cannot be used with",
        ),
        (
            &["--transport", "aioquic", "--cc", "bbrv3"],
            "aioquic has no bbrv3",
        ),
        (
            &["--transport", "ngtcp2", "--cc", "bbrv3"],
            "ngtcp2 has no bbrv3",
        ),
    ];
    assert_usage_errors(&["bench", "goodput", "--size-mb", "0.1"], &cases);
}

#[test]
fn a_sweep_writes_one_record_per_case() {
    let dir = std::env::temp_dir().join(format!("petrel-goodput-cli-{}", std::process::id()));
    let dir_arg = dir.to_str().unwrap();
    let out = petrel(&[
        "bench",
        "goodput",
        "--profile",
        "none",
        "--transport",
        "rudp,quic",
        "--cc",
        "reno",
        "--size-mb",
        "0.5",
        "--repetitions",
        "1",
        "--json",
        "-",
        "--out-dir",
        dir_arg,
    ]);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(0), "{stderr}");
    let records: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let records = records.as_array().unwrap();
    assert_eq!(records.len(), 2);
    for (r, protocol) in records.iter().zip(["rudp", "quic"]) {
        assert_eq!(r["benchmark"], "goodput");
        assert_eq!(r["parameters"]["protocol"], protocol);
        assert_eq!(r["ok"], true);
        assert_eq!(r["rounds"][0]["bytes_received"], 500_000);
        let case = r["case"].as_str().unwrap();
        assert!(dir.join(format!("goodput-{case}.json")).is_file());
    }
    assert!(stderr.contains("rudp-reno-loopback"), "{stderr}");
    std::fs::remove_dir_all(&dir).unwrap();
}

/// Runs `petrel bench goodput` for an aioquic pair with a Python that does not
/// exist, with and without `PETREL_REQUIRE_QUIC_INTEROP=1`.
fn missing_aioquic(required: bool) -> std::process::Output {
    let mut command = std::process::Command::new(env!("CARGO_BIN_EXE_petrel"));
    command
        .args([
            "bench",
            "goodput",
            "--transport",
            "aioquic",
            "--size-mb",
            "0.1",
        ])
        .env("PETREL_PYTHON", "/nonexistent/python3");
    if required {
        command.env("PETREL_REQUIRE_QUIC_INTEROP", "1");
    } else {
        command.env_remove("PETREL_REQUIRE_QUIC_INTEROP");
    }
    command.output().unwrap()
}

#[test]
fn a_missing_peer_is_skipped_with_its_install_command_unless_required() {
    let out = missing_aioquic(false);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(0), "{stderr}");
    let skip = stderr
        .lines()
        .find(|l| l.starts_with("SKIPPED aioquic-cubic"))
        .unwrap_or_else(|| panic!("no skip line: {stderr}"));
    assert!(skip.contains("python3 -m pip install aioquic"), "{skip}");

    let out = missing_aioquic(true);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{stderr}");
    assert!(stderr.contains("aioquic is not available"), "{stderr}");
}
