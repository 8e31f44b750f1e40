//! Hostile command lines: every numeric flag with negative, zero, huge, NaN and
//! non-numeric values, unknown profiles, unwritable output paths, a relay pointed at
//! itself. Usage errors exit 2 and name the flag; nothing panics or runs forever.
//!
//! Every child runs under a time limit and is killed (by its own handle) past it.

#![allow(clippy::unwrap_used)]

use std::net::UdpSocket;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

/// Exit code (None if it had to be killed), stdout, stderr, wall time.
struct Run {
    code: Option<i32>,
    stdout: String,
    stderr: String,
    took: Duration,
}

fn run_bounded(args: &[&str], limit: Duration) -> Run {
    let start = Instant::now();
    let mut child = Command::new(env!("CARGO_BIN_EXE_petrel"))
        .args(args)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut code = None;
    while start.elapsed() < limit {
        if let Some(status) = child.try_wait().unwrap() {
            code = status.code();
            break;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    let took = start.elapsed();
    if code.is_none() {
        child.kill().unwrap();
    }
    let out = child.wait_with_output().unwrap();
    Run {
        code,
        stdout: String::from_utf8_lossy(&out.stdout).into_owned(),
        stderr: String::from_utf8_lossy(&out.stderr).into_owned(),
        took,
    }
}

fn assert_usage_error(args: &[&str], needle: &str) {
    let r = run_bounded(args, Duration::from_secs(20));
    assert_eq!(
        r.code,
        Some(2),
        "{args:?} exited {:?}: {}",
        r.code,
        r.stderr
    );
    assert!(
        r.stderr.to_lowercase().contains(needle),
        "{args:?}: message does not name {needle:?}: {}",
        r.stderr
    );
    assert!(!r.stderr.contains("panicked"), "{args:?}: {}", r.stderr);
}

const BAD_NUMBERS: [&str; 8] = ["-1", "NaN", "inf", "-inf", "abc", "", "1e400", "0x10"];

#[test]
fn bench_echo_rejects_every_bad_number() {
    let flags = [
        "payload",
        "clients",
        "window",
        "seconds",
        "warmup",
        "rounds",
        "io-threads",
        "send-buffer",
        "recv-buffer",
    ];
    for flag in flags {
        for value in BAD_NUMBERS {
            let arg = format!("--{flag}={value}");
            assert_usage_error(&["bench", "echo", &arg], flag);
        }
    }
    let huge = [
        ("payload", "18446744073709551616"),
        ("payload", "65508"),
        ("clients", "1025"),
        ("window", "4097"),
        ("seconds", "3601"),
        ("seconds", "1e30"),
        ("seconds", "1e-300"),
        ("warmup", "1e30"),
        ("rounds", "4294967296"),
        ("io-threads", "65"),
    ];
    for (flag, value) in huge {
        let arg = format!("--{flag}={value}");
        assert_usage_error(&["bench", "echo", &arg], flag);
    }
    for value in ["-1", "NaN", "1e30", "0"] {
        assert_usage_error(&["bench", &format!("--seconds={value}")], "seconds");
        if value != "0" {
            assert_usage_error(&["bench", &format!("--warmup={value}")], "warmup");
        }
    }
    assert_usage_error(
        &["bench", "echo", "--protocol", "carrier-pigeon"],
        "protocol",
    );
}

/// Socket buffer sizes the kernel cannot grant are clamped, not a crash.
#[test]
fn bench_echo_survives_extreme_socket_buffers() {
    for value in ["0", "18446744073709551615"] {
        for flag in ["--send-buffer", "--recv-buffer"] {
            let r = run_bounded(
                &[
                    "bench",
                    "echo",
                    "--seconds",
                    "0.2",
                    "--warmup",
                    "0",
                    flag,
                    value,
                ],
                Duration::from_secs(30),
            );
            assert!(
                matches!(r.code, Some(0 | 1)),
                "{flag} {value}: {:?} {}",
                r.code,
                r.stderr
            );
            assert!(
                !r.stderr.contains("panicked"),
                "{flag} {value}: {}",
                r.stderr
            );
        }
    }
}

/// `--json` to a path that cannot be written should fail before the benchmark runs,
/// not after the user waited for it.
#[test]
fn bench_echo_unwritable_json_fails_before_running() {
    let r = run_bounded(
        &[
            "bench",
            "echo",
            "--seconds",
            "2",
            "--warmup",
            "0",
            "--json",
            "/nonexistent-dir/result.json",
        ],
        Duration::from_secs(30),
    );
    assert_ne!(r.code, Some(0), "{}", r.stderr);
    assert!(
        r.stderr.contains("/nonexistent-dir/result.json"),
        "{}",
        r.stderr
    );
    assert!(
        r.stdout.is_empty(),
        "the benchmark ran first:\n{}",
        r.stdout
    );
}

#[test]
fn bench_suite_unwritable_out_dir_fails_cleanly() {
    let r = run_bounded(
        &[
            "bench",
            "--seconds",
            "0.1",
            "--warmup",
            "0",
            "--out-dir",
            "/proc/petrel",
        ],
        Duration::from_secs(30),
    );
    assert_eq!(r.code, Some(2), "{}", r.stderr);
    assert!(r.stderr.contains("/proc/petrel"), "{}", r.stderr);
    assert!(
        !r.stderr.contains("running"),
        "ran before failing: {}",
        r.stderr
    );
}

const RELAY: [&str; 5] = [
    "netem",
    "--listen",
    "127.0.0.1:0",
    "--upstream",
    "127.0.0.1:9",
];

#[test]
fn netem_rejects_every_bad_value() {
    let cases: &[(&str, &[&str])] = &[
        ("loss", &["-1", "101", "NaN", "inf", "abc", "", "%"]),
        ("duplicate", &["-1", "101", "NaN"]),
        ("reorder", &["-0.5", "100.1", "x"]),
        ("delay", &["-5", "NaN", "1e9", "abc", "ms", "60001"]),
        ("jitter", &["-1", "inf"]),
        ("reorder-delay", &["-1", "NaN"]),
        (
            "rate",
            &[
                "0", "-1", "abc", "1e13", "NaNmbit", "mbit", "", "1001g", "infbit",
            ],
        ),
        ("profile", &["bogus", ""]),
        ("burst", &["5/0", "a/b", "3", "7/3", "-1/2", "/"]),
        (
            "gilbert",
            &["1,2,3", "1,2,3,x", "1,2,3,200", "", "1,2,3,4,5"],
        ),
        ("queue-packets", &["0", "-1", "4294967296", "x"]),
        ("queue-bytes", &["0", "NaN"]),
        ("capacity-bytes", &["0", "-5"]),
        ("capacity-packets", &["0", "1.5"]),
        ("max-routes", &["0", "65537", "-1", "x"]),
        ("seed", &["-1", "18446744073709551616", "x"]),
        (
            "route-idle-timeout",
            &["-1", "abc", "0.001", "86401", "NaN"],
        ),
        ("spin-us", &["10001", "-1"]),
        ("stats-interval", &["0", "NaN", "-1", "1e9"]),
        (
            "listen",
            &["not-an-address", "127.0.0.1", "127.0.0.1:99999"],
        ),
        ("upstream", &["127.0.0.1:0", "0.0.0.0:5000", "::"]),
    ];
    for (flag, values) in cases {
        for value in *values {
            let arg = format!("--{flag}={value}");
            let mut args = match *flag {
                "listen" => vec!["netem", "--upstream", "127.0.0.1:9"],
                "upstream" => vec!["netem", "--listen", "127.0.0.1:0"],
                _ => RELAY.to_vec(),
            };
            args.push(&arg);
            assert_usage_error(&args, flag);
        }
    }
    assert_usage_error(&["netem", "--listen", "127.0.0.1:0"], "upstream");
}

#[test]
fn bench_netem_rejects_every_bad_value() {
    let cases: &[(&str, &[&str])] = &[
        ("mode", &["bogus"]),
        ("ceiling-seconds", &["0", "-1", "NaN"]),
        ("accuracy-seconds", &["0", "1e9"]),
        ("payload", &["15", "65508", "-1"]),
        ("accuracy-payload", &["0", "70000"]),
        ("window", &["0", "65537"]),
        ("batch", &["0", "1025"]),
        ("pps", &["0", "10000001", "NaN"]),
        ("delay", &["-1", "NaN", "60001"]),
        ("spin-us", &["10001"]),
    ];
    for (flag, values) in cases {
        for value in *values {
            let arg = format!("--{flag}={value}");
            assert_usage_error(&["bench", "netem", &arg], flag);
        }
    }
}

/// `petrel netem --json` to an unwritable path must fail at start, not after the
/// session the user wanted recorded (the relay otherwise runs until Ctrl-C).
#[test]
fn netem_unwritable_json_fails_at_start() {
    let mut args = RELAY.to_vec();
    args.extend(["--json", "/nonexistent-dir/relay.json"]);
    let r = run_bounded(&args, Duration::from_secs(5));
    assert!(
        r.code.is_some(),
        "relay kept running with an unwritable --json"
    );
    assert_ne!(r.code, Some(0));
    assert!(
        r.stderr.contains("/nonexistent-dir/relay.json"),
        "{}",
        r.stderr
    );
}

#[test]
fn bench_netem_unwritable_json_fails_before_measuring() {
    let r = run_bounded(
        &[
            "bench",
            "netem",
            "--ceiling-seconds",
            "0.3",
            "--accuracy-seconds",
            "0.3",
            "--json",
            "/nonexistent-dir/bench.json",
        ],
        Duration::from_secs(30),
    );
    assert_ne!(r.code, Some(0));
    assert!(
        r.stderr.contains("/nonexistent-dir/bench.json"),
        "{}",
        r.stderr
    );
    assert!(
        !r.stderr.contains("ceiling:"),
        "measured first: {}",
        r.stderr
    );
}

/// A relay whose upstream is its own listen address would forward into itself, each
/// hop through a fresh route and socket, until `max_routes`: refuse it as a usage error.
#[test]
fn netem_refuses_to_relay_to_itself() {
    let port = UdpSocket::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let addr = format!("127.0.0.1:{port}");
    let r = run_bounded(
        &["netem", "--listen", &addr, "--upstream", &addr],
        Duration::from_secs(5),
    );
    assert_eq!(
        r.code,
        Some(2),
        "{:?} after {:?}: {}",
        r.code,
        r.took,
        r.stderr
    );
    assert!(r.stderr.contains("upstream"), "{}", r.stderr);
}
