//! Running the `petrel` binary from the CLI integration tests.

use std::process::{Command, Output};

/// Runs `petrel args…` to completion and returns its output.
pub fn petrel(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_petrel"))
        .args(args)
        .output()
        .unwrap()
}

/// For each `(extra, needle)`: `petrel base… extra…` exits 2 and its stderr
/// contains `needle`.
// Each test binary compiles its own copy; not every one checks usage errors.
#[allow(dead_code)]
pub fn assert_usage_errors(base: &[&str], cases: &[(&[&str], &str)]) {
    for (extra, needle) in cases {
        let args = [base, extra].concat();
        let out = petrel(&args);
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{args:?}: {stderr}");
        assert!(stderr.contains(needle), "{args:?}: {stderr}");
    }
}
