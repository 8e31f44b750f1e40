//! The report's summary and published-vs-Petrel panel: the committed fixture
//! results (from a real run), plus records derived from them the way other
//! benchmarks write theirs (a kcptun peer, a goodput transport, a lossy
//! goodput scenario, reflector stages, the relay's forwarding ceiling), to
//! show that those slot into the panel by their parameters alone.

#![allow(clippy::unwrap_used)]

use std::path::{Path, PathBuf};

use petrel_bench::record::{ResultRecord, Spread};
use petrel_bench::report::published::{compare, figures, parse, Comparison};
use petrel_bench::report::{load_records, render_html, render_report, Skipped};
use serde_json::json;

fn fixtures() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures")
}

fn fixture(case: &str) -> ResultRecord {
    let text = std::fs::read_to_string(fixtures().join(format!("{case}.json"))).unwrap();
    serde_json::from_str(&text).unwrap()
}

fn find<'a, 'b>(rows: &'a [Comparison<'b>], id: &str) -> &'a Comparison<'b> {
    rows.iter().find(|c| c.figure.id == id).unwrap()
}

fn one(v: f64) -> Spread {
    Spread::of(&[v]).unwrap()
}

#[test]
fn fixture_cases_map_to_their_published_rows() {
    let records = load_records(&fixtures()).unwrap();
    let figures = figures().unwrap();
    let rows = compare(figures, &records);
    assert_eq!(rows.len(), figures.len());

    let arq = find(&rows, "arknet-rudp-random-arq-throughput");
    let p = arq.petrel.as_ref().unwrap();
    let record = fixture("rudp-random-arq-1024B-4x16");
    assert_eq!(p.case, record.case);
    assert_eq!(p.value, record.summary["round_trips_per_sec"]);
    // 4 clients × 16 in flight over 2 × 10 ms of emulated delay.
    let limit = p.limit.as_ref().unwrap();
    assert_eq!(limit.value, 3200.0);
    assert!(limit.what.contains("20 ms emulated RTT"), "{}", limit.what);
    assert!(!p.same_machine);

    // Fixed FEC, the 16x1 echo shape, goodput and the reflector did not run.
    for id in [
        "arknet-rudp-random-fixed-throughput",
        "arknet-udp-16x1-throughput",
        "quic-goodput-quinn",
        "draarl-9000-20ms-pps",
    ] {
        assert!(find(&rows, id).petrel.is_none(), "{id}");
    }

    let html = render_html(&records);
    let panel = &html[html.find("<section id=\"published-vs-petrel\">").unwrap()..];
    let panel = &panel[..panel.find("</section>").unwrap()];
    let run = rows.iter().filter(|c| c.petrel.is_some()).count();
    assert_eq!(panel.matches("not run").count(), rows.len() - run);
    assert_eq!(
        panel
            .matches("not like-for-like: different machine (published: Apple M4 Pro")
            .count(),
        run
    );
    assert!(panel.contains("560–572 rt/s"));
    assert!(panel.contains("17.5–17.9 %"), "published 560–572 of 3,200");
}

#[test]
fn without_emulated_delay_the_limit_is_the_same_run_raw_udp_echo() {
    let mut none = fixture("rudp-random-arq-1024B-4x16");
    none.parameters["profile"] = json!("none");
    none.parameters["link"]["delay"] = json!(0.0);
    let udp = fixture("udp-1024B-4x16");
    let records = [udp.clone(), none];
    let rows = compare(figures().unwrap(), &records);
    let p = find(&rows, "arknet-rudp-none-arq-throughput")
        .petrel
        .as_ref()
        .unwrap();
    let limit = p.limit.as_ref().unwrap();
    assert_eq!(limit.value, udp.summary["round_trips_per_sec"].median);
    assert!(limit.what.contains("udp-1024B-4x16"), "{}", limit.what);
}

#[test]
fn qualified_records_match_only_figures_that_name_them() {
    let mut kcptun = fixture("rudp-random-arq-1024B-4x16");
    kcptun.parameters["fec"] = json!("fixed");
    kcptun.parameters["peer"] = json!("kcptun 20240107");
    kcptun.case = "rudp-kcptun-random-fec-fixed-1024B-4x16".into();
    let records = [kcptun];
    let rows = compare(figures().unwrap(), &records);
    assert!(
        find(&rows, "arknet-rudp-random-fixed-throughput")
            .petrel
            .is_none(),
        "a kcptun result is not Petrel's"
    );
    let named = parse(
        "[[figure]]\nid = \"kcptun-random\"\nseed = \"issue 18\"\nsource = \"issue 18\"\nmachine = \"this machine\"\ncase = \"kcptun, random\"\nmetric = \"round_trips_per_sec\"\nunit = \"rt/s\"\nvalue = 2335\nlimit = \"window_rtt\"\n[figure.petrel]\nbenchmark = \"rudp\"\npeer = \"kcptun\"\nprofile = \"random\"\nfec = \"fixed\"\n",
    )
    .unwrap();
    let rows = compare(&named, &records);
    assert_eq!(
        rows[0].petrel.as_ref().unwrap().case,
        "rudp-kcptun-random-fec-fixed-1024B-4x16"
    );
}

/// A goodput record as `bench goodput --transport T` writes it.
fn goodput(transport: &str, mbps: f64) -> ResultRecord {
    let mut r = fixture("udp-1024B-4x16");
    r.benchmark = "goodput".into();
    r.case = format!("{transport}-cubic-p2p-200mbps-4ms-q1000");
    r.parameters = json!({
        "protocol": transport,
        "link_rate_bps": 200_000_000u64,
        "case": {"transport": transport, "cc": "cubic", "profile": "p2p", "bandwidth_bps": 200_000_000u64}
    });
    r.summary.clear();
    r.summary.insert("goodput_mbps".into(), one(mbps));
    r
}

#[test]
fn goodput_peers_slot_in_by_transport_and_lossy_runs_do_not() {
    let mut lossy = goodput("ngtcp2", 30.0);
    lossy.parameters["case"]["loss"] = json!(1.0);
    let records = [goodput("aioquic", 40.0), lossy, goodput("quinn", 150.0)];
    let rows = compare(figures().unwrap(), &records);
    let aioquic = find(&rows, "quic-goodput-aioquic").petrel.as_ref().unwrap();
    assert_eq!(aioquic.value.median, 40.0);
    assert_eq!(aioquic.limit.as_ref().unwrap().value, 200.0);
    assert!(find(&rows, "quic-goodput-ngtcp2").petrel.is_none());
    let quinn = find(&rows, "quic-goodput-quinn").petrel.as_ref().unwrap();
    assert_eq!(quinn.value.median, 150.0);
    let html = render_html(&records);
    // 40 of the 200 Mbit/s link; the published 50.5 of 200.
    assert!(html.contains("20.0 %"), "aioquic share");
    assert!(html.contains("25.2 %"), "published aioquic share");
}

#[test]
fn reflector_stages_match_by_devices_and_interval() {
    let mut reflector = fixture("udp-1024B-4x16");
    reflector.benchmark = "reflector".into();
    reflector.case = "reflector-4500g-20-15ms".into();
    reflector.parameters = json!({"groups": 4500, "interval_ms": [20, 15]});
    reflector.summary.clear();
    reflector.rounds = vec![
        json!({"clients": 9000, "interval_ms": 20, "output_pps": 400000.0, "latency_avg_ms": 4.0}),
        json!({"clients": 9000, "interval_ms": 15, "output_pps": 500000.0, "latency_avg_ms": 6.0}),
    ];
    let mut netem = fixture("udp-1024B-4x16");
    netem.benchmark = "netem".into();
    netem.case = "netem-ceiling".into();
    netem.rounds = vec![json!({"ceiling": {"pps": 800000.0}, "delay_accuracy": null})];
    let records = [reflector, netem];
    let rows = compare(figures().unwrap(), &records);
    let pps = find(&rows, "draarl-9000-20ms-pps").petrel.as_ref().unwrap();
    assert_eq!(pps.value.median, 400_000.0);
    let limit = pps.limit.as_ref().unwrap();
    assert_eq!(limit.value, 800_000.0);
    assert!(limit.what.contains("netem-ceiling"));
    let latency = find(&rows, "draarl-9000-20ms-latency")
        .petrel
        .as_ref()
        .unwrap();
    assert_eq!(latency.value.median, 4.0);
    assert!(latency.limit.is_none());
    assert_eq!(
        find(&rows, "draarl-9000-15ms-pps")
            .petrel
            .as_ref()
            .unwrap()
            .value
            .median,
        500_000.0
    );
    assert!(find(&rows, "draarl-20000-120ms-pps").petrel.is_none());
}

#[test]
fn summary_names_winners_failures_and_skips() {
    let mut records = load_records(&fixtures()).unwrap();
    let failed = records
        .iter_mut()
        .find(|r| r.case == "quic-1024B-4x16")
        .unwrap();
    failed.ok = false;
    failed.errors.insert("drain_timeouts".into(), 2);
    let skipped = [Skipped {
        case: "rudp-kcptun-random-fec-fixed-1024B-4x16".into(),
        reason: "kcptun-client not found".into(),
    }];
    let html = render_report(&records, &skipped);
    let summary = &html[html.find("<section id=\"summary\">").unwrap()..];
    let summary = &summary[..summary.find("</section>").unwrap()];
    assert!(
        html.find("id=\"summary\"") < html.find("<svg"),
        "summary first"
    );
    assert!(summary.contains("7 case(s): 5 echo, 2 rudp"), "{summary}");
    assert!(summary.contains(&records[0].build.git_revision[..12]));
    assert!(summary.contains(&records[0].host.cpu_model));
    // What failed: the not-ok case with its counter, and the skipped one.
    assert!(
        summary.contains(
            "<td>quic-1024B-4x16</td><td class=\"bad\">not ok</td><td>drain_timeouts=2</td>"
        ),
        "{summary}"
    );
    assert!(summary.contains("kcptun-client not found"));
    // What won (a header and two rows): at 1024B-4x16 only rudp is an ok
    // contender besides the raw UDP baseline (quic failed), so no row; kcp
    // against websocket at 1024B-1x1; under random, adaptive FEC against
    // ARQ-only, with their ratio.
    let won = &summary[summary.find("<table class=\"won\">").unwrap()..];
    let won = &won[..won.find("</table>").unwrap()];
    assert_eq!(won.matches("<tr>").count(), 3, "{won}");
    assert!(!won.contains("1024B-4x16</td>"), "{won}");
    let rt = |case: &str| {
        records.iter().find(|r| r.case == case).unwrap().summary["round_trips_per_sec"].median
    };
    let (adaptive, arq) = (
        rt("rudp-random-fec-adaptive-1024B-4x16"),
        rt("rudp-random-arq-1024B-4x16"),
    );
    let (best, next) = if adaptive > arq {
        ("adaptive", "arq")
    } else {
        ("arq", "adaptive")
    };
    let ratio = adaptive.max(arq) / adaptive.min(arq);
    assert!(
        won.contains(&format!("<b>{best}</b>")) && won.contains(&format!("{ratio:.2}× {next}")),
        "{won}"
    );
    assert!(html.contains("NOT all ok"));
}
