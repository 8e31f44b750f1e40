//! One stage against a running reflector: every device logs in, the receive
//! and heartbeat threads start, one speaker per group sends voice on the
//! absolute schedule (warm-up rounds first), and the figures are taken.

use std::net::SocketAddr;
use std::sync::atomic::{AtomicBool, Ordering::Relaxed};
use std::time::{Duration, Instant};

use petrel_sys::proc::{load_avg_1m, rss_bytes};

use super::apps::{self, in_group};
use super::cpu::{cpu_between, CpuSample};
use super::device::{encode_voice, make_device, unix_ns, Device, MARKER};
use super::receive::{self, Tally, RECV_THREAD};
use super::schedule::{heartbeat_loop, login_keeping_alive, Schedule};
use super::stage_probe::StageProbe;
use super::ws_client::{self, WS_THREAD};
use super::{LoadConfig, LoadError, LoadResult, ReceiverKindResult};

/// Rounds sent before the measurement, with stage id 0 (not counted).
pub(super) const WARMUP_ROUNDS: u64 = 8;
/// Receive threads, each owning an epoll set of its share of the devices.
pub(super) const RECEIVER_THREADS: usize = 2;
/// Name of the heartbeat thread.
const HEARTBEAT_THREAD: &str = "lg-heartbeat";

/// The reflector a stage runs against.
#[derive(Debug, Clone)]
pub(super) struct Target {
    /// Its UDP address.
    pub(super) udp: SocketAddr,
    /// Its HTTP address, for the app receivers' logins.
    pub(super) http: Option<SocketAddr>,
    /// Its process when it is a child.
    pub(super) pid: Option<u32>,
    /// The store ids of the stage's groups, by group index.
    pub(super) group_ids: Vec<i64>,
}

/// Measured rounds of a stage of `cfg` (after the warm-up rounds): one
/// frame per speaker each.
pub(super) fn measured_rounds(cfg: &LoadConfig) -> u64 {
    cfg.duration_s * 1000 / cfg.interval_ms.max(1)
}

/// Runs one stage against the reflector `target`, with what `probe` adds:
/// the devices' entry addresses, frame receipts, and readings when the
/// measurement starts and ends.
pub(super) fn drive(
    cfg: &LoadConfig,
    target: &Target,
    probe: &dyn StageProbe,
) -> Result<LoadResult, LoadError> {
    let (server, server_pid) = (target.udp, target.pid);
    let devices: Vec<Device> = (0..cfg.devices)
        .map(|i| {
            let mut d = make_device(i, probe.entry(i).unwrap_or(server))?;
            d.receipt_row = probe.receipt_row(i);
            Ok(d)
        })
        .collect::<Result<_, LoadError>>()?;
    let receipts = probe.receipts();
    let t0 = Instant::now();
    let failed = login_keeping_alive(&devices, None);
    if failed > 0 {
        return Err(LoadError::Login(failed));
    }
    let connect_per_s = cfg.devices as f64 / t0.elapsed().as_secs_f64();
    let app = match target.http {
        Some(http) if cfg.ghosts + cfg.ws > 0 => {
            apps::log_in(cfg, server, http, &target.group_ids)?
        }
        _ if cfg.ghosts + cfg.ws > 0 => {
            return Err(LoadError::Invalid(
                "app receivers need the reflector's HTTP address".into(),
            ))
        }
        _ => apps::AppReceivers {
            ghosts: Vec::new(),
            ws: Vec::new(),
        },
    };
    for d in devices.iter().chain(&app.ghosts) {
        d.sock.set_nonblocking(true)?;
    }
    let per = devices.len().div_ceil(RECEIVER_THREADS);
    let polls: Vec<_> = devices
        .chunks(per)
        .map(|c| receive::register(c).map(|p| (p, c)))
        .collect::<Result<_, _>>()?;
    let ghost_poll = if app.ghosts.is_empty() {
        None
    } else {
        Some(receive::register(&app.ghosts)?)
    };

    let host_load_1m = load_avg_1m().unwrap_or(0.0);
    let stage = unix_ns();
    let stop = AtomicBool::new(false);
    let speakers: Vec<usize> = (0..cfg.groups).collect();
    let group_size = |g: usize| in_group(cfg.devices, g, cfg.groups);
    // Per sent packet of group g: devices (the speaker excluded), ghosts
    // and WebSocket receivers in g.
    let mut expected_kind = [0u64; 3];
    let interval = Duration::from_millis(cfg.interval_ms);
    let pid = std::process::id();
    let mut sent = 0u64;
    let mut samples = None;
    let tally = std::thread::scope(|s| -> Result<[Option<Tally>; 3], LoadError> {
        let stop = &stop;
        let mut receivers = Vec::with_capacity(polls.len());
        for (poll, chunk) in polls {
            receivers.push(
                std::thread::Builder::new()
                    .name(RECV_THREAD.into())
                    .spawn_scoped(s, move || {
                        receive::receive_loop(poll, chunk, stage, stop, receipts)
                    })?,
            );
        }
        let ghost_receiver = match ghost_poll {
            Some(poll) => {
                let ghosts = &app.ghosts;
                Some(
                    std::thread::Builder::new()
                        .name(RECV_THREAD.into())
                        .spawn_scoped(s, move || {
                            receive::receive_loop(poll, ghosts, stage, stop, None)
                        })?,
                )
            }
            None => None,
        };
        let ws_receiver = if app.ws.is_empty() {
            None
        } else {
            let (ready_tx, ready_rx) = std::sync::mpsc::channel();
            let (plans, http) = (&app.ws, target.http);
            let handle = std::thread::Builder::new()
                .name(WS_THREAD.into())
                .spawn_scoped(s, move || match http {
                    Some(http) => ws_client::run(http, plans, stage, &ready_tx, stop),
                    None => Err(LoadError::Invalid("no HTTP address".into())),
                })?;
            match ready_rx.recv() {
                Ok(Ok(())) => {}
                Ok(Err(e)) => {
                    stop.store(true, Relaxed);
                    return Err(LoadError::Invalid(e));
                }
                Err(_) => {
                    stop.store(true, Relaxed);
                    return Err(LoadError::Invalid(
                        "WebSocket receivers did not start".into(),
                    ));
                }
            }
            Some(handle)
        };
        let devs = &devices;
        std::thread::Builder::new()
            .name(HEARTBEAT_THREAD.into())
            .spawn_scoped(s, move || heartbeat_loop(devs, stop, None))?;
        if !app.ghosts.is_empty() {
            let ghosts = &app.ghosts;
            std::thread::Builder::new()
                .name(HEARTBEAT_THREAD.into())
                .spawn_scoped(s, move || heartbeat_loop(ghosts, stop, None))?;
        }
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
        let rounds = WARMUP_ROUNDS + measured_rounds(cfg);
        let mut first = None;
        for k in 0..rounds {
            if k == WARMUP_ROUNDS {
                std::thread::sleep(Duration::from_secs(1));
                first = Some(CpuSample::take(pid, server_pid));
                probe.begin()?;
                schedule.restart(Instant::now(), k);
            }
            if let Some(wait) = schedule.due(k).checked_duration_since(Instant::now()) {
                std::thread::sleep(wait);
            }
            let stage_id = if k < WARMUP_ROUNDS { 0 } else { stage };
            for &g in &speakers {
                let d = &devices[g];
                encode_voice(d, &mut payload, stage_id, k, &mut packet)?;
                if d.sock.send(&packet).is_ok() && k >= WARMUP_ROUNDS {
                    if let Some(r) = receipts {
                        r.mark_sent(g, k);
                    }
                    sent += 1;
                    expected_kind[0] += group_size(g) - 1;
                    expected_kind[1] += in_group(cfg.ghosts, g, cfg.groups);
                    expected_kind[2] += in_group(cfg.ws, g, cfg.groups);
                }
            }
        }
        std::thread::sleep(Duration::from_secs(1));
        // Sampled while the receive threads still run: an exited thread's CPU
        // time leaves /proc/<pid>/task with it.
        let last = CpuSample::take(pid, server_pid);
        probe.end()?;
        samples = first.map(|f| (f, last));
        drop(stopper);
        let join = |r: std::thread::ScopedJoinHandle<'_, Result<Tally, LoadError>>| {
            r.join()
                .map_err(|_| LoadError::Invalid("receive thread panicked".into()))?
        };
        let mut total = Tally::new()?;
        for r in receivers {
            total.merge(&join(r)?);
        }
        let ghosts = ghost_receiver.map(join).transpose()?;
        let ws = ws_receiver.map(join).transpose()?;
        Ok([Some(total), ghosts, ws])
    })?;
    let kinds: Vec<ReceiverKindResult> = [
        ("device", cfg.devices),
        ("ghost", cfg.ghosts),
        ("websocket", cfg.ws),
    ]
    .iter()
    .zip(&tally)
    .zip(expected_kind)
    .filter_map(|((&(kind, receivers), t), expected)| {
        t.as_ref()
            .map(|t| kind_result(kind, receivers, expected, t))
    })
    .collect();
    let mut tally = tally.into_iter().flatten();
    let mut all = tally
        .next()
        .ok_or_else(|| LoadError::Invalid("no tally".into()))?;
    for t in tally {
        all.merge(&t);
    }
    let tally = all;
    let expected: u64 = expected_kind.iter().sum();
    let mut r = LoadResult {
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
        by_kind: if kinds.len() > 1 { kinds } else { Vec::new() },
        ..stage_result(cfg, sent, expected, &tally)
    };
    if let Some((a, b)) = samples {
        cpu_between(&mut r, &a, &b);
    }
    Ok(r)
}

/// A stage's delivery figures from its sends, the datagrams its receivers
/// were owed and what they received; the process and host fields default.
pub(super) fn stage_result(
    cfg: &LoadConfig,
    sent: u64,
    expected: u64,
    tally: &Tally,
) -> LoadResult {
    let hist = &tally.hist;
    let measure_s = (cfg.duration_s as f64).max(1e-9);
    let packet_bytes = 90 + cfg.payload;
    let received = tally.received;
    LoadResult {
        clients: cfg.devices,
        groups: cfg.groups,
        packet_bytes,
        interval_ms: cfg.interval_ms,
        sent,
        expected,
        received,
        loss_pct: loss_pct(expected, received),
        output_pps: received as f64 / measure_s,
        output_mbps: received as f64 * packet_bytes as f64 * 8.0 / measure_s / 1e6,
        latency_avg_ms: hist.mean() / 1000.0,
        latency_p50_ms: hist.value_at_quantile(0.50) as f64 / 1000.0,
        latency_p95_ms: hist.value_at_quantile(0.95) as f64 / 1000.0,
        latency_p99_ms: hist.value_at_quantile(0.99) as f64 / 1000.0,
        latency_max_ms: hist.max() as f64 / 1000.0,
        recv_errors: tally.recv_errors,
        ..LoadResult::default()
    }
}

/// The loss and latency of one kind of receiver.
fn kind_result(kind: &str, receivers: usize, expected: u64, t: &Tally) -> ReceiverKindResult {
    ReceiverKindResult {
        kind: kind.to_owned(),
        receivers,
        expected,
        received: t.received,
        loss_pct: loss_pct(expected, t.received),
        latency_avg_ms: t.hist.mean() / 1000.0,
        latency_p99_ms: t.hist.value_at_quantile(0.99) as f64 / 1000.0,
        latency_max_ms: t.hist.max() as f64 / 1000.0,
        wrong_reserved: t.wrong_reserved,
    }
}

/// 100 × (expected − received) / expected; 0 when nothing was expected.
pub(super) fn loss_pct(expected: u64, received: u64) -> f64 {
    if expected == 0 {
        0.0
    } else {
        100.0 * (expected as f64 - received as f64) / expected as f64
    }
}
