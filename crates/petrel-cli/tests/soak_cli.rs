//! `petrel bench reflector --soak`: a 60 s soak with churn against a
//! reflector child, and its usage errors.
//!
//! The soak here runs 500 devices in 5 groups rather than the default 5000
//! in 10: `cargo test` runs the unoptimised binary, which at 5000 devices
//! (about 41 000 datagrams/s of fan-out) would need both cores of a CI
//! runner for the reflector and its receivers alone. The churn (its action
//! mix, rates and holds) does not depend on the device count, so the
//! smaller run exercises every kind of action tens of times; the 5000-device
//! runs are the ones in the note.

#![allow(clippy::unwrap_used)]

mod support;

use support::{assert_usage_errors, petrel};

#[test]
fn a_60_s_soak_attributes_every_lost_datagram_and_keeps_rss_and_fds() {
    let out = petrel(&[
        "bench",
        "reflector",
        "--soak",
        "60",
        "--levels",
        "500",
        "--groups",
        "5",
        "--seed",
        "14",
        "--json",
        "-",
    ]);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(0), "{stderr}");
    let json: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(json["benchmark"], "reflector-soak");
    assert_eq!(json["ok"], true, "{json}");
    let r = &json["rounds"][0];
    let n = |k: &str| r[k].as_u64().unwrap();
    assert!(n("frames_sent") > 0, "{r}");
    assert_eq!(n("expected") - n("received"), n("missing"), "{r}");
    let loss = r["loss"].as_object().unwrap();
    let attributed: u64 = loss.values().map(|v| v.as_u64().unwrap()).sum();
    assert_eq!(attributed, n("missing"), "{r}");
    assert_eq!(r["loss"]["unattributed"], 0, "{r}");
    assert_eq!(n("misdelivered"), 0, "{r}");
    // Every kind of churn happened.
    for kind in [
        "logouts",
        "logins",
        "group_switches",
        "recv_bans",
        "unbans",
        "reconnects",
    ] {
        assert!(r["churn"][kind].as_u64().unwrap() > 0, "{kind}: {r}");
    }
    assert_eq!(r["churn"]["admin_errors"], 0, "{r}");
    assert!(n("server_fds_end") <= n("server_fds_start"), "{r}");
    assert!(r["server_rss_growth_pct"].as_f64().unwrap() <= 5.0, "{r}");
    assert!(stderr.contains("SOAK frames_sent="), "{stderr}");
    assert!(
        stderr
            .lines()
            .any(|l| l.starts_with("SOAK ") && l.ends_with(" ok=true")),
        "{stderr}"
    );
}

#[test]
fn soak_usage_errors_name_the_problem() {
    let cases: [(&[&str], &str); 5] = [
        (&["--soak", "5"], "soak: 10..=86400"),
        (&["--soak", "60", "--levels", "4,8"], "one value"),
        (&["--soak", "60", "--interval-ms", "60,30"], "one value"),
        (&["--soak", "60", "--in-process"], "child"),
        (&["--soak", "60", "--payload", "32"], "payload: 40..=710"),
    ];
    assert_usage_errors(&["bench", "reflector", "--levels", "20"], &cases);
    // Soak-only flags need --soak.
    let out = petrel(&["bench", "reflector", "--seed", "3"]);
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("--soak"));
}
