//! Findings of the adversarial review of command-line values: huge numbers
//! are quoted as given (and cut), `--json` refuses non-regular files before
//! anything runs, and store errors say what failed once, without passwords.
//!
//! Every child runs under a time limit and is killed (by its own handle) past it.

#![allow(clippy::unwrap_used)]

use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

/// Exit code (None if it had to be killed) and stderr.
fn run_bounded(args: &[&str], limit: Duration) -> (Option<i32>, String) {
    let start = Instant::now();
    let mut child = Command::new(env!("CARGO_BIN_EXE_petrel"))
        .args(args)
        .stdin(Stdio::null())
        .stdout(Stdio::null())
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
    if code.is_none() {
        child.kill().unwrap();
    }
    let out = child.wait_with_output().unwrap();
    (code, String::from_utf8_lossy(&out.stderr).into_owned())
}

#[test]
fn huge_numbers_are_quoted_as_given_and_cut() {
    let digits = "9".repeat(300);
    let cases: [&[&str]; 8] = [
        &["bench", "echo", "--payload", &digits],
        &["bench", "rudp", "--clients", "1e300"],
        &["bench", "echo", "--seconds", "1e300"],
        &["bench", "echo", "--warmup", &digits],
        &["bench", "rudp", "--loss", "1e300"],
        &["bench", "rudp", "--delay-ms", &digits],
        &["bench", "goodput", "--size-mb", "1e300"],
        &[
            "netem",
            "--listen",
            "127.0.0.1:0",
            "--upstream",
            "127.0.0.1:9",
            "--delay",
            &digits,
        ],
    ];
    for args in cases {
        let (code, stderr) = run_bounded(args, Duration::from_secs(20));
        assert_eq!(code, Some(2), "{args:?}: {stderr}");
        assert!(
            !stderr.contains("0000000000"),
            "{args:?} reformatted: {stderr}"
        );
        assert!(
            !stderr.contains(&"9".repeat(41)),
            "{args:?} not cut: {stderr}"
        );
        assert!(stderr.contains("..="), "{args:?} gives no range: {stderr}");
        assert!(
            stderr.contains("'1e300'") || stderr.contains("(300 characters)"),
            "{args:?} does not quote the input: {stderr}"
        );
    }
}

#[test]
fn json_to_a_fifo_or_directory_is_a_usage_error_before_running() {
    let dir = std::env::temp_dir();
    let fifo = dir.join(format!("petrel-cli-fifo-{}", std::process::id()));
    assert!(Command::new("mkfifo")
        .arg(&fifo)
        .status()
        .unwrap()
        .success());
    let fifo_s = fifo.to_str().unwrap().to_owned();
    let dir_s = dir.to_str().unwrap().to_owned();
    for target in [&fifo_s, &dir_s, &"/dev/null".to_owned()] {
        let cases: [&[&str]; 4] = [
            &[
                "bench",
                "echo",
                "--seconds",
                "0.1",
                "--warmup",
                "0",
                "--json",
                target,
            ],
            &["bench", "rudp", "--seconds", "0.1", "--json", target],
            &[
                "bench",
                "idle",
                "--connections",
                "1",
                "--seconds",
                "0.1",
                "--json",
                target,
            ],
            &["bench", "netem", "--json", target],
        ];
        for args in cases {
            let (code, stderr) = run_bounded(args, Duration::from_secs(10));
            assert_eq!(code, Some(2), "{args:?}: {stderr}");
            assert!(stderr.contains("not a regular file"), "{args:?}: {stderr}");
        }
    }
    std::fs::remove_file(&fifo).unwrap();
}

#[test]
fn store_open_errors_say_opening_once_and_hide_the_password() {
    let (code, stderr) = run_bounded(
        &[
            "reflector",
            "serve",
            "--listen",
            "127.0.0.1:0",
            "--db",
            "/nonexistent/dir/x.db",
        ],
        Duration::from_secs(20),
    );
    assert_eq!(code, Some(1), "{stderr}");
    assert_eq!(stderr.matches("opening").count(), 1, "{stderr}");
    assert!(stderr.contains("/nonexistent/dir/x.db"), "{stderr}");

    // An upper-case scheme is a PostgreSQL URL (nothing listens on port 1),
    // not a SQLite file named `POSTGRES:`.
    let (code, stderr) = run_bounded(
        &[
            "reflector",
            "serve",
            "--listen",
            "127.0.0.1:0",
            "--db",
            "POSTGRES://petrel:s3cret@127.0.0.1:1/db",
        ],
        Duration::from_secs(20),
    );
    assert_eq!(code, Some(1), "{stderr}");
    assert!(!stderr.contains("s3cret"), "{stderr}");
    assert!(
        stderr.contains("POSTGRES://petrel:***@127.0.0.1:1/db"),
        "{stderr}"
    );
    assert_eq!(stderr.matches("opening").count(), 1, "{stderr}");
    assert!(!std::path::Path::new("POSTGRES:").exists());
}
