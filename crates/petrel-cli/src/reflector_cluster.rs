//! `petrel bench reflector --edges N --layout L`: the stages against a
//! centre and N edges as child processes (issue 15 item 6,
//! draarl-interconnect §9), each followed by the same stage on one
//! single-node reflector unless `--no-baseline`, recorded as benchmark
//! `reflector-cluster` and printed as `CLUSTER`, `NODE`, `GENERATOR` and
//! `COST` lines. The devices of every stage are split over load-generator
//! processes (`--devices-per-process` and the open-files limit).
//! With `--soak SECONDS`, one level and one interval run once for that long
//! (no churn: the churn soak is the single node's).

use std::path::Path;
use std::process::ExitCode;

use anyhow::Context;
use petrel_bench::record::reflector_cluster::{ClusterParameters, ClusterStage};
use petrel_bench::record::ResultRecord;
use petrel_bench::reflector::cluster::{self, ClusterConfig};

use crate::reflector::{finish_record, runtime, say, ReflectorBenchArgs};

/// Device counts without `--levels`.
const DEFAULT_LEVELS: [usize; 2] = [100, 500];

/// Runs the cluster stages of `args` (which has `--edges`): exit 0 when
/// every stage ran and every missing datagram was attributed, 1 when a
/// stage failed or some were not, 2 for invalid arguments.
pub fn run(args: &ReflectorBenchArgs, edges: usize) -> anyhow::Result<ExitCode> {
    let levels = args
        .levels
        .clone()
        .unwrap_or_else(|| DEFAULT_LEVELS.to_vec());
    let duration_s = match args.soak {
        Some(s) if levels.len() != 1 || args.interval_ms.len() != 1 => {
            eprintln!(
                "error: --soak {s} with --edges runs one stage: give --levels and --interval-ms one value each"
            );
            return Ok(ExitCode::from(2));
        }
        Some(s) => s,
        None => args.duration_s,
    };
    let server = args.server()?;
    let devices_per_process = args
        .devices_per_process
        .map(|n| usize::try_from(n).unwrap_or(usize::MAX));
    let stages: Vec<Vec<ClusterConfig>> = levels
        .iter()
        .map(|&devices| {
            args.interval_ms
                .iter()
                .map(|&interval_ms| ClusterConfig {
                    load: args.load_config(devices, interval_ms, duration_s, &server),
                    edges,
                    layout: args.layout,
                    devices_per_process,
                })
                .collect()
        })
        .collect();
    let invalid = stages.iter().flatten().find_map(|c| c.validate().err());
    if let Some(e) = invalid
        .map(|e| e.to_string())
        .or(args.check_stages(&levels).err())
    {
        eprintln!("error: {e}");
        return Ok(ExitCode::from(2));
    }
    let params = ClusterParameters {
        stages: args.parameters(&levels, duration_s),
        edges,
        layout: args.layout.name().to_owned(),
        baseline: !args.no_baseline,
        devices_per_process,
    };
    let intervals: Vec<String> = args.interval_ms.iter().map(u64::to_string).collect();
    let case = format!(
        "reflector-cluster-{}-{edges}e-{}g-{}ms",
        args.layout,
        params.stages.groups,
        intervals.join("-")
    );
    let mut record = ResultRecord::begin("reflector-cluster", &case, &params)?;
    let to_stdout = args.json.as_deref() == Some(Path::new("-"));
    let outcome = runtime()?.block_on(bench(&stages, !args.no_baseline, to_stdout, &mut record));
    finish_record(record, outcome, args.json.as_deref())
}

/// Runs each level's intervals (slowest first) until a cluster stage loses
/// packets; each cluster stage is followed by its single-node stage when
/// `baseline`. The unattributed datagrams of all stages go into the
/// record's `errors`; any at all fail the run (exit 1) once every stage
/// has run.
async fn bench(
    levels: &[Vec<ClusterConfig>],
    baseline: bool,
    to_stderr: bool,
    record: &mut ResultRecord,
) -> anyhow::Result<()> {
    let show = |s: &ClusterStage| {
        say(to_stderr, &s.cluster_line());
        for line in s.node_lines().into_iter().chain(s.generator_lines()) {
            say(to_stderr, &line);
        }
    };
    let mut unattributed = 0;
    for stages in levels {
        for cfg in stages {
            let what = format!(
                "{} stage with {} devices at {} ms",
                cfg.layout, cfg.load.devices, cfg.load.interval_ms
            );
            let mut stage = cluster::run_cluster(cfg)
                .await
                .with_context(|| what.clone())?;
            show(&stage);
            let single = if baseline {
                let s = cluster::run_single(&cfg.load, cfg.devices_per_process)
                    .await
                    .with_context(|| format!("single-node {what}"))?;
                show(&s);
                stage.compare_with(&s);
                say(to_stderr, &stage.cost_line(&s));
                Some(s)
            } else {
                None
            };
            unattributed += stage.loss.unattributed;
            let lost = stage.load.loss_pct > 0.0;
            record.push_round(&stage)?;
            if let Some(s) = single {
                unattributed += s.loss.unattributed;
                record.push_round(&s)?;
            }
            record
                .errors
                .insert("unattributed_loss".into(), unattributed);
            if lost {
                break;
            }
        }
    }
    if unattributed > 0 {
        anyhow::bail!(
            "{unattributed} missing datagrams that no node counter explains (unattributed= on the CLUSTER lines)"
        );
    }
    Ok(())
}
