//! `petrel bench reflector --edges 3 --layout cross`: a centre and three
//! edges as child processes, devices logged in through the edges, every
//! missing datagram attributed, then the same load on one single node
//! (issue 15 item 6); the same with the devices split over three
//! load-generator processes; and the usage errors of `--edges` and
//! `--layout`.

#![allow(clippy::unwrap_used)]

mod support;

use support::{assert_usage_errors, petrel};

#[test]
fn cross_layout_on_three_edges_attributes_every_missing_datagram() {
    let out = petrel(&[
        "bench",
        "reflector",
        "--edges",
        "3",
        "--layout",
        "cross",
        "--levels",
        "60",
        "--groups",
        "2",
        "--duration-s",
        "2",
        "--json",
        "-",
    ]);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(0), "{stderr}");
    let json: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(json["benchmark"], "reflector-cluster");
    assert_eq!(json["parameters"]["layout"], "cross");
    assert_eq!(json["errors"]["unattributed_loss"], 0, "{json}");
    let rounds = json["rounds"].as_array().unwrap();
    assert_eq!(rounds.len(), 2, "{json}");
    let (cluster, single) = (&rounds[0], &rounds[1]);
    assert_eq!(cluster["layout"], "cross");
    assert_eq!(single["layout"], "single");
    for stage in [cluster, single] {
        let load = &stage["load"];
        let n = |k: &str| load[k].as_u64().unwrap();
        // 60 devices in 2 groups of 30: 29 receivers per speaker packet.
        assert!(n("sent") > 0, "{stage}");
        assert_eq!(n("expected"), n("sent") * 29, "{stage}");
        let loss = &stage["loss"];
        let part = |k: &str| loss[k].as_u64().unwrap();
        assert_eq!(part("missing"), n("expected") - n("received"), "{stage}");
        assert_eq!(part("unattributed"), 0, "{stage}");
        assert_eq!(stage["receipts_out_of_range"], 0, "{stage}");
        assert!(
            stage["cost_us_per_packet"].as_f64().unwrap() > 0.0,
            "{stage}"
        );
    }
    let nodes = cluster["nodes"].as_array().unwrap();
    let names: Vec<&str> = nodes.iter().map(|n| n["name"].as_str().unwrap()).collect();
    assert_eq!(names, ["centre", "edge-a", "edge-b", "edge-c"]);
    let devices: Vec<u64> = nodes
        .iter()
        .map(|n| n["devices"].as_u64().unwrap())
        .collect();
    // cross: the 2 speakers on edge-a; positions 1, 3, … on edge-b, 2, 4, … on edge-c.
    assert_eq!(devices, [0, 2, 30, 28]);
    for n in nodes {
        assert!(n["peak_rss_mb"].as_f64().unwrap() > 0.0, "{n}");
    }
    // The receivers' edges did the fan-out.
    for n in &nodes[2..] {
        assert!(n["cpu_s"].as_f64().unwrap() > 0.0, "{n}");
    }
    assert!(
        cluster["cost_ratio_to_single"].as_f64().unwrap() > 0.0,
        "{cluster}"
    );
    assert!(
        stderr.contains("CLUSTER layout=cross edges=3 clients=60"),
        "{stderr}"
    );
    assert_eq!(
        stderr
            .lines()
            .filter(|l| l.starts_with("NODE layout=cross"))
            .count(),
        4,
        "{stderr}"
    );
    assert!(stderr.contains("CLUSTER layout=single edges=0"), "{stderr}");
    assert!(
        stderr
            .lines()
            .any(|l| l.starts_with("COST layout=cross") && l.contains(" ratio=")),
        "{stderr}"
    );
    // 60 sockets fit in one load generator, in both stages.
    for stage in [cluster, single] {
        let gens = stage["generators"].as_array().unwrap();
        assert_eq!(gens.len(), 1, "{stage}");
        assert_eq!(gens[0]["devices"], 60, "{stage}");
    }
}

#[test]
fn devices_split_over_three_generators_count_every_datagram_once() {
    let out = petrel(&[
        "bench",
        "reflector",
        "--edges",
        "3",
        "--layout",
        "cross",
        "--levels",
        "60",
        "--groups",
        "2",
        "--duration-s",
        "2",
        "--devices-per-process",
        "25",
        "--no-baseline",
        "--json",
        "-",
    ]);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(0), "{stderr}");
    let json: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(json["parameters"]["devices_per_process"], 25, "{json}");
    let rounds = json["rounds"].as_array().unwrap();
    assert_eq!(rounds.len(), 1, "{json}");
    let stage = &rounds[0];
    // 60 devices, at most 25 per process: three generators of 20.
    let gens = stage["generators"].as_array().unwrap();
    let names: Vec<&str> = gens.iter().map(|g| g["name"].as_str().unwrap()).collect();
    assert_eq!(names, ["gen-0", "gen-1", "gen-2"], "{stage}");
    for g in gens {
        assert_eq!(g["devices"], 20, "{g}");
        assert!(g["cpu_s"].as_f64().unwrap() > 0.0, "{g}");
        assert!(g["peak_rss_mb"].as_f64().unwrap() > 0.0, "{g}");
    }
    let load = &stage["load"];
    let n = |k: &str| load[k].as_u64().unwrap();
    // Both speakers are in gen-0; their receivers in all three generators.
    // Every receipt lands once: expected = sent × 29, and nothing is
    // received twice (received ≤ expected), nothing unexplained.
    assert!(n("sent") > 0, "{stage}");
    assert_eq!(n("expected"), n("sent") * 29, "{stage}");
    assert!(n("received") <= n("expected"), "{stage}");
    assert!(n("received") > n("expected") / 2, "{stage}");
    assert_eq!(stage["loss"]["unattributed"], 0, "{stage}");
    assert_eq!(stage["receipts_out_of_range"], 0, "{stage}");
    assert!(load["latency_max_ms"].as_f64().unwrap() > 0.0, "{stage}");
    assert!(load["loadgen_cpu_cores"].as_f64().unwrap() > 0.0, "{stage}");
    // The generators' CPU is not a node's: the nodes are the centre and
    // the three edges only.
    assert_eq!(stage["nodes"].as_array().unwrap().len(), 4, "{stage}");
    assert_eq!(
        stderr
            .lines()
            .filter(|l| l.starts_with("GENERATOR layout=cross"))
            .count(),
        3,
        "{stderr}"
    );
    assert!(stderr.contains(" generators=3 "), "{stderr}");
}

#[test]
fn edges_usage_errors_name_the_problem() {
    let base = ["bench", "reflector", "--levels", "60", "--groups", "2"];
    let cases: &[(&[&str], &str)] = &[
        (
            &["--edges", "1", "--layout", "cross"],
            "layout cross needs at least 2 edges",
        ),
        (&["--edges", "17"], "edges: 1..=16"),
        (&["--edges", "3", "--layout", "ring"], "unknown layout"),
        (&["--layout", "local"], "--edges"),
        (&["--edges", "3", "--ghosts", "5"], "--ghosts"),
        (&["--edges", "3", "--in-process"], "--in-process"),
        (&["--devices-per-process", "5"], "--edges"),
        (
            &["--edges", "3", "--devices-per-process", "0"],
            "devices-per-process",
        ),
        (
            &["--edges", "3", "--soak", "60", "--interval-ms", "120,60"],
            "one stage",
        ),
    ];
    assert_usage_errors(&base, cases);
}
