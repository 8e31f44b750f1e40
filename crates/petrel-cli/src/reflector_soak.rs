//! `petrel bench reflector --soak SECONDS`: one long run with churn against a
//! reflector child (issue 14, item 8), recorded as benchmark
//! `reflector-soak`, printed as one `SOAK key=value` line.

use std::path::Path;
use std::process::ExitCode;

use anyhow::Context;
use petrel_bench::record::reflector_soak::{SoakParameters, SoakResult};
use petrel_bench::record::ResultRecord;
use petrel_bench::reflector::soak::{self, SoakConfig, SETTLE_AFTER_MS};
use petrel_bench::reflector::LoadConfig;

use crate::reflector::ReflectorBenchArgs;

/// Devices of a soak without `--levels`.
const DEFAULT_DEVICES: usize = 5000;
/// Groups of a soak without `--groups`.
const DEFAULT_GROUPS: usize = 10;

/// Runs the soak: exit 0 when it passed, 1 when it failed (unattributed
/// loss, RSS or descriptor growth) or could not run, 2 for invalid arguments.
pub fn run(args: &ReflectorBenchArgs, seconds: u64) -> anyhow::Result<ExitCode> {
    let devices = match args.levels.as_deref() {
        None => DEFAULT_DEVICES,
        Some(&[one]) => one,
        Some(_) => {
            eprintln!("error: --soak runs one device count: give --levels one value");
            return Ok(ExitCode::from(2));
        }
    };
    if args.ghosts > 0 || args.ws > 0 {
        eprintln!("error: --soak runs physical devices only: drop --ghosts and --ws");
        return Ok(ExitCode::from(2));
    }
    let interval_ms = match args.interval_ms.as_slice() {
        &[one] => one,
        _ => {
            eprintln!("error: --soak runs one interval: give --interval-ms one value");
            return Ok(ExitCode::from(2));
        }
    };
    let server = args.server()?;
    let cfg = SoakConfig {
        load: LoadConfig {
            groups: args.groups.unwrap_or(DEFAULT_GROUPS),
            ..args.load_config(devices, interval_ms, args.duration_s, &server)
        },
        soak_s: seconds,
        warmup_s: args.warmup_s,
        seed: args.seed,
        churn_per_s: args.churn_per_s,
    };
    if let Err(e) = cfg.validate() {
        eprintln!("error: {e}");
        return Ok(ExitCode::from(2));
    }
    if let Err(e) = crate::args::check_json_target(args.json.as_deref()) {
        eprintln!("error: {e}");
        return Ok(ExitCode::from(2));
    }
    let params = SoakParameters {
        devices,
        groups: cfg.load.groups,
        interval_ms,
        payload: cfg.load.payload,
        soak_s: seconds,
        warmup_s: cfg.warmup_s,
        seed: cfg.seed,
        churn_per_s: cfg.churn_per_s,
        settle_ms: SETTLE_AFTER_MS,
        writers: cfg.load.writers,
        max_frame_age_ms: cfg.load.max_frame_age_ms,
    };
    let case = format!(
        "reflector-soak-{devices}d-{}g-{interval_ms}ms-{seconds}s",
        cfg.load.groups
    );
    let mut record = ResultRecord::begin("reflector-soak", &case, &params)?;
    record.seeds = vec![cfg.seed];
    let to_stdout = args.json.as_deref() == Some(Path::new("-"));
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .context("starting the tokio runtime")?;
    let outcome = runtime.block_on(soak::run(&cfg));
    record.peak_rss_bytes = petrel_bench::measure::peak_rss_bytes();
    let passed = match &outcome {
        Ok(r) => {
            let line = soak_line(r);
            if to_stdout {
                eprintln!("{line}");
            } else {
                println!("{line}");
            }
            for f in &r.failures {
                eprintln!("soak failed: {f}");
            }
            record.push_round(r)?;
            record
                .errors
                .insert("unattributed_loss".into(), r.loss.unattributed);
            record
                .errors
                .insert("soak_failures".into(), r.failures.len() as u64);
            r.failures.is_empty()
        }
        Err(_) => false,
    };
    record.ok = passed;
    match &args.json {
        Some(path) if path == Path::new("-") => println!("{}", record.to_json()?),
        Some(path) => record.write_json(path)?,
        None => {}
    }
    outcome.context("soak")?;
    Ok(if passed {
        ExitCode::SUCCESS
    } else {
        ExitCode::from(1)
    })
}

/// The `SOAK key=value …` line; it ends with the verdict, `ok=true` when
/// the soak passed (no failures; the exit code is 0 then).
fn soak_line(r: &SoakResult) -> String {
    let l = &r.loss;
    let c = &r.churn;
    format!(
        "SOAK frames_sent={} expected={} received={} missing={} loss_pct={:.4} frames_expired={} frames_dropped={} floor_talk_limit={} ban_send={} ban_recv={} offline={} not_yet_receiving={} churn_window={} reflector_send_errors={} receive_buffer_drops={} unattributed={} received_in_churn={} misdelivered={} duplicates={} late={} logouts={} logins={} login_failures={} group_switches={} recv_bans={} send_bans={} unbans={} reconnects={} admin_errors={} reloads_skipped={} rss_start_mb={:.1} rss_end_mb={:.1} rss_growth_pct={:.2} fds_start={} fds_end={} latency_p99_ms={:.3} ok={}",
        r.frames_sent, r.expected, r.received, r.missing, r.loss_pct,
        l.frames_expired, l.frames_dropped, l.floor_talk_limit, l.ban_send, l.ban_recv, l.offline, l.not_yet_receiving,
        l.churn_window, l.reflector_send_errors, l.receive_buffer_drops, l.unattributed,
        r.received_in_churn, r.misdelivered, r.duplicates, r.late,
        c.logouts, c.logins, c.login_failures, c.group_switches, c.recv_bans, c.send_bans, c.unbans,
        c.reconnects, c.admin_errors, r.reflector_reloads_skipped,
        r.server_rss_start_mb, r.server_rss_end_mb, r.server_rss_growth_pct,
        r.server_fds_start, r.server_fds_end, r.latency_p99_ms, r.failures.is_empty()
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_soak_line_ends_with_its_verdict() {
        let passed = SoakResult::default();
        assert!(soak_line(&passed).starts_with("SOAK frames_sent=0 "));
        assert!(soak_line(&passed).ends_with(" ok=true"));
        let failed = SoakResult {
            failures: vec!["unattributed loss".into()],
            ..SoakResult::default()
        };
        assert!(soak_line(&failed).ends_with(" ok=false"));
    }
}
