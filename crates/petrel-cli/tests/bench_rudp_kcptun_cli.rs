//! `petrel bench rudp --peer kcptun` as a user runs it: a short kcptun case
//! through the `random` profile with 8+2 FEC, the skip line where kcptun is not
//! installed, the error where it is required, and the arguments kcptun refuses.
//!
//! The kcptun case needs `kcptun-client`/`kcptun-server` in `PATH`; without them
//! it is skipped with a message, unless `PETREL_REQUIRE_KCPTUN` is set (CI).

#![allow(clippy::unwrap_used)]

mod support;

use std::process::{Command, Output};

use support::{assert_usage_errors, petrel};

fn kcptun_installed() -> bool {
    let found = ["kcptun-client", "kcptun-server"].iter().all(|name| {
        std::env::var_os("PATH")
            .is_some_and(|path| std::env::split_paths(&path).any(|dir| dir.join(name).is_file()))
    });
    if !found {
        let msg = "SKIPPED: kcptun not in PATH (install: apt install kcptun)";
        assert!(std::env::var_os("PETREL_REQUIRE_KCPTUN").is_none(), "{msg}");
        eprintln!("{msg}");
    }
    found
}

/// `petrel args…` with an empty `PATH` (so no kcptun) and `require` as
/// `PETREL_REQUIRE_KCPTUN`.
fn petrel_without_kcptun(args: &[&str], require: Option<&str>) -> Output {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_petrel"));
    cmd.args(args)
        .env("PATH", "/nonexistent")
        .env_remove("PETREL_REQUIRE_KCPTUN");
    if let Some(v) = require {
        cmd.env("PETREL_REQUIRE_KCPTUN", v);
    }
    cmd.output().unwrap()
}

const SHORT: [&str; 8] = [
    "--seconds",
    "1",
    "--warmup",
    "0.5",
    "--rounds",
    "1",
    "--profile",
    "random",
];

#[test]
fn random_with_fec_8_2_echoes_and_recovers_through_kcptun() {
    if !kcptun_installed() {
        return;
    }
    let args = [
        &["bench", "rudp", "--peer", "kcptun", "--fec", "fixed"][..],
        &SHORT,
        &["--json", "-"],
    ]
    .concat();
    let out = petrel(&args);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(0), "{stderr}");
    let json: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(json["benchmark"], "rudp");
    assert_eq!(json["case"], "kcptun-random-fec-8+2-1024B-4x16");
    assert_eq!(json["ok"], true, "{json:#}");
    assert!(json["parameters"]["peer"]
        .as_str()
        .unwrap()
        .starts_with("kcptun "));
    // Tuned like Petrel's defaults, and recorded.
    let tuning = &json["parameters"]["tuning"];
    assert_eq!(tuning["crypt"], "none");
    assert_eq!(tuning["compression"], false);
    assert_eq!(
        (&tuning["mtu"], &tuning["snd_wnd"]),
        (&1200.into(), &128.into())
    );
    assert_eq!(
        (&tuning["data_shards"], &tuning["parity_shards"]),
        (&8.into(), &2.into())
    );
    assert_eq!(json["parameters"]["fec_shape"]["data_shards"], 8);
    let rt_s = json["summary"]["round_trips_per_sec"]["median"]
        .as_f64()
        .unwrap();
    assert!(rt_s > 0.0, "{rt_s}");
    let round = &json["rounds"][0];
    assert!(round["snmp_error"].is_null(), "{round:#}");
    // 5 % loss each way over thousands of packets: 8+2 groups repair some of it.
    let recovered = round["fec_recoveries"].as_u64().unwrap();
    assert!(recovered > 0, "{round:#}");
    assert_eq!(
        recovered,
        round["client_snmp"]["FECRecovered"].as_u64().unwrap()
            + round["server_snmp"]["FECRecovered"].as_u64().unwrap()
    );
    assert!(round["children_cpu_percent"].as_f64().unwrap() > 0.0);
    // The same relay as Petrel's rows: the loss it measured is near the profile's.
    let loss = round["relay"]["measured_loss"].as_f64().unwrap();
    assert!((0.02..=0.09).contains(&loss), "{loss}");
    // The table (on stderr with --json -) shows kcptun's CPU and flags.
    assert!(
        stderr.contains("kcptun CPU % (client + server)"),
        "{stderr}"
    );
    assert!(stderr.contains("mode manual (nodelay 1 interval 10 ms resend 2 nc 1)"));
}

#[test]
fn missing_kcptun_is_one_skip_line_or_an_error_when_required() {
    let args = [
        &["bench", "rudp", "--peer", "kcptun", "--fec", "fixed"][..],
        &SHORT,
    ]
    .concat();
    let out = petrel_without_kcptun(&args, None);
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert_eq!(out.status.code(), Some(0), "{stdout}");
    assert_eq!(
        stdout,
        "kcptun not installed: skipped kcptun-random-fec-8+2-1024B-4x16 (apt install kcptun)\n"
    );

    let out = petrel_without_kcptun(&args, Some("1"));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{stderr}");
    assert!(stderr.contains("kcptun not installed"), "{stderr}");

    // The default suite checks before running anything, so this ends at once.
    let out_dir = std::path::PathBuf::from(env!("CARGO_TARGET_TMPDIR"))
        .join(format!("kcptun-required-{}", std::process::id()));
    let out = petrel_without_kcptun(
        &["bench", "--out-dir", out_dir.to_str().unwrap()],
        Some("1"),
    );
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{stderr}");
    assert!(stderr.contains("kcptun not installed"), "{stderr}");
    let _ = std::fs::remove_dir_all(&out_dir);
}

#[test]
fn arguments_kcptun_cannot_take_are_refused() {
    let cases: [(&[&str], &str); 5] = [
        (&["--peer", "kcptun", "--fec", "adaptive"], "fec"),
        (&["--peer", "kcptun", "--io-threads", "2"], "io-model"),
        (&["--fec-shape", "10+3"], "fec-shape"),
        (&["--fec", "fixed", "--fec-shape", "0+2"], "fec-shape"),
        (&["--fec", "fixed", "--fec-shape", "8-2"], "fec-shape"),
    ];
    assert_usage_errors(
        &["bench", "rudp", "--seconds", "0.1", "--warmup", "0"],
        &cases,
    );
}
