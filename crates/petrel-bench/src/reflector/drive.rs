//! One stage against a running reflector: every device logs in, the receive
//! and heartbeat threads start, one speaker per group sends voice on the
//! absolute schedule (warm-up rounds first), and the figures are taken.

use std::net::SocketAddr;
use std::sync::atomic::{AtomicBool, Ordering::Relaxed};
use std::time::{Duration, Instant};

use petrel_reflector::codec::{encode_into, PacketType};
use petrel_sys::proc::{load_avg_1m, rss_bytes};

use super::cpu::{cpu_between, CpuSample};
use super::device::{login_all, make_device, unix_ns, Device, MARKER};
use super::receive::{self, RECV_THREAD};
use super::schedule::{heartbeat_loop, Schedule};
use super::{LoadConfig, LoadError, LoadResult};

/// Rounds sent before the measurement, with stage id 0 (not counted).
const WARMUP_ROUNDS: u64 = 8;
/// Receive threads, each owning an epoll set of its share of the devices.
const RECEIVER_THREADS: usize = 2;
/// Name of the heartbeat thread.
const HEARTBEAT_THREAD: &str = "lg-heartbeat";

/// Runs one stage against the reflector at `server`; `server_pid` is its
/// process when it is a child.
pub(super) fn drive(
    cfg: &LoadConfig,
    server: SocketAddr,
    server_pid: Option<u32>,
) -> Result<LoadResult, LoadError> {
    let devices: Vec<Device> = (0..cfg.devices)
        .map(|i| make_device(i, server))
        .collect::<Result<_, _>>()?;
    let t0 = Instant::now();
    let failed = login_all(&devices);
    if failed > 0 {
        return Err(LoadError::Login(failed));
    }
    let connect_per_s = cfg.devices as f64 / t0.elapsed().as_secs_f64();
    for d in &devices {
        d.sock.set_nonblocking(true)?;
    }
    let per = devices.len().div_ceil(RECEIVER_THREADS);
    let polls: Vec<_> = devices
        .chunks(per)
        .map(|c| receive::register(c).map(|p| (p, c)))
        .collect::<Result<_, _>>()?;

    let host_load_1m = load_avg_1m().unwrap_or(0.0);
    let stage = unix_ns();
    let stop = AtomicBool::new(false);
    let speakers: Vec<usize> = (0..cfg.groups).collect();
    let group_size = |g: usize| (cfg.devices - g).div_ceil(cfg.groups) as u64;
    let interval = Duration::from_millis(cfg.interval_ms);
    let pid = std::process::id();
    let mut sent = 0u64;
    let mut expected = 0u64;
    let mut samples = None;
    let tally = std::thread::scope(|s| -> Result<receive::Tally, LoadError> {
        let stop = &stop;
        let mut receivers = Vec::with_capacity(polls.len());
        for (poll, chunk) in polls {
            receivers.push(
                std::thread::Builder::new()
                    .name(RECV_THREAD.into())
                    .spawn_scoped(s, move || receive::receive_loop(poll, chunk, stage, stop))?,
            );
        }
        let devs = &devices;
        std::thread::Builder::new()
            .name(HEARTBEAT_THREAD.into())
            .spawn_scoped(s, move || heartbeat_loop(devs, stop))?;
        // Stops the receive and heartbeat threads on every exit path
        // (including `?` below) before the scope joins them.
        struct StopOnDrop<'a>(&'a AtomicBool);
        impl Drop for StopOnDrop<'_> {
            fn drop(&mut self) {
                self.0.store(true, Relaxed);
            }
        }
        let stopper = StopOnDrop(stop);

        let mut payload = vec![0u8; cfg.payload];
        payload[..8].copy_from_slice(MARKER);
        let mut packet = Vec::with_capacity(90 + cfg.payload);
        let mut schedule = Schedule::new(Instant::now(), interval);
        let rounds = WARMUP_ROUNDS + cfg.duration_s * 1000 / cfg.interval_ms.max(1);
        let mut first = None;
        for k in 0..rounds {
            if k == WARMUP_ROUNDS {
                std::thread::sleep(Duration::from_secs(1));
                first = Some(CpuSample::take(pid, server_pid));
                schedule.restart(Instant::now(), k);
            }
            if let Some(wait) = schedule.due(k).checked_duration_since(Instant::now()) {
                std::thread::sleep(wait);
            }
            let stage_id = if k < WARMUP_ROUNDS { 0 } else { stage };
            for &g in &speakers {
                let d = &devices[g];
                payload[8..16].copy_from_slice(&stage_id.to_be_bytes());
                payload[16..24].copy_from_slice(&k.to_be_bytes());
                payload[24..32].copy_from_slice(&unix_ns().to_be_bytes());
                let mut h = d.header.clone();
                h.packet_type = PacketType::Voice;
                encode_into(&h, &payload, &mut packet)
                    .map_err(|e| LoadError::Invalid(e.to_string()))?;
                if d.sock.send(&packet).is_ok() && k >= WARMUP_ROUNDS {
                    sent += 1;
                    expected += group_size(g) - 1;
                }
            }
        }
        std::thread::sleep(Duration::from_secs(1));
        // Sampled while the receive threads still run: an exited thread's CPU
        // time leaves /proc/<pid>/task with it.
        let last = CpuSample::take(pid, server_pid);
        samples = first.map(|f| (f, last));
        drop(stopper);
        let mut total = receive::Tally::new()?;
        for r in receivers {
            let t = r
                .join()
                .map_err(|_| LoadError::Invalid("receive thread panicked".into()))??;
            total.merge(&t);
        }
        Ok(total)
    })?;
    let received = tally.received;
    let hist = &tally.hist;
    let measure_s = (cfg.duration_s as f64).max(1e-9);
    let packet_bytes = 90 + cfg.payload;
    let mut r = LoadResult {
        clients: cfg.devices,
        groups: cfg.groups,
        packet_bytes,
        interval_ms: cfg.interval_ms,
        sent,
        expected,
        received,
        loss_pct: if expected == 0 {
            0.0
        } else {
            100.0 * (expected as f64 - received as f64) / expected as f64
        },
        output_pps: received as f64 / measure_s,
        output_mbps: received as f64 * packet_bytes as f64 * 8.0 / measure_s / 1e6,
        latency_avg_ms: hist.mean() / 1000.0,
        latency_p95_ms: hist.value_at_quantile(0.95) as f64 / 1000.0,
        latency_p99_ms: hist.value_at_quantile(0.99) as f64 / 1000.0,
        latency_max_ms: hist.max() as f64 / 1000.0,
        process_rss_mb: rss_bytes(pid).unwrap_or(0) as f64 / (1024.0 * 1024.0),
        server_rss_mb: server_pid
            .and_then(rss_bytes)
            .map(|b| b as f64 / (1024.0 * 1024.0)),
        server_process: if server_pid.is_some() {
            "child"
        } else {
            "in-process"
        }
        .to_owned(),
        connect_per_s,
        host_load_1m,
        recv_errors: tally.recv_errors,
        ..LoadResult::default()
    };
    if let Some((a, b)) = samples {
        cpu_between(&mut r, &a, &b);
    }
    Ok(r)
}
