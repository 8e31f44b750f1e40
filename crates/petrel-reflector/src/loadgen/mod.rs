//! A small fan-out load generator after draarl-v1 §7 / benchmarks §D: every
//! simulated device binds its own 127.x.y.z address, logs in with real
//! heartbeats, then one speaker per group sends voice on an absolute
//! schedule with a marker, stage id, sequence and send time in the payload.
//!
//! It starts its own reflector on a fresh temporary store, as a child process
//! ([`ServerProcess::Child`], measured from `/proc/<child pid>`) or
//! in-process. CPU is reported three ways, because they differ: the
//! reflector's (the child, or the `refl-*` threads), the load generator's
//! threads (its receive threads `lg-recv` also separately), and the whole
//! host from `/proc/stat` — the last includes loopback delivery in softirq
//! context and anything else running on the machine. RSS: the child's, and
//! this process's.
//!
//! Not here: the reflector itself ([`crate::server`]).

mod child;
mod procstat;
mod receive;
mod result;

use std::net::{Ipv4Addr, SocketAddr, SocketAddrV4, UdpSocket};
use std::sync::atomic::{AtomicBool, Ordering::Relaxed};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use thiserror::Error;

pub use procstat::{
    clock_ticks_per_s, host_cpu, load_avg_1m, parse_proc_stat, rss_bytes, thread_cpu_ns, HostCpu,
};
pub use result::LoadResult;

use crate::codec::{decode, encode, Header, PacketType};
use crate::fanout::FanoutConfig;
use crate::server::{ServerConfig, ServerError, ServerHandle};
use crate::store::{NewUser, Store, StoreError, StoreOptions};

const MARKER: &[u8; 8] = b"DRABENCH";
const PASSWORD: &str = "Bench123";
/// Devices per user: SSIDs 1–99 and 106–254.
const DEVICES_PER_USER: usize = 248;
const WARMUP_ROUNDS: u64 = 8;
const RECEIVER_THREADS: usize = 2;
/// Name prefixes of the load generator's threads, for per-thread CPU.
const RECV_THREAD: &str = "lg-recv";
const HEARTBEAT_THREAD: &str = "lg-heartbeat";

/// Load-generator parameters.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LoadConfig {
    /// Simulated devices, 2–20000.
    pub devices: usize,
    /// Groups (= simultaneous speakers), 1–1024, at most devices / 2.
    pub groups: usize,
    /// Voice interval per speaker, ms (≥ 10).
    pub interval_ms: u64,
    /// Voice DATA bytes, 32–710.
    pub payload: usize,
    /// Measurement time, s (1–600).
    pub duration_s: u64,
    /// Reflector send paths.
    pub writers: usize,
    /// Reflector frame-age limit, ms.
    pub max_frame_age_ms: u64,
    /// Where the reflector under test runs.
    pub server: ServerProcess,
}

/// Where the reflector under test runs.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub enum ServerProcess {
    /// In this process: its CPU is its threads' (`refl-*`), but its RSS
    /// cannot be told apart from the load generator's.
    #[default]
    InProcess,
    /// A child process, `<program> reflector serve` (the `petrel` binary),
    /// measured from `/proc/<child pid>`: CPU and RSS are the reflector's alone.
    Child(std::path::PathBuf),
}

impl Default for LoadConfig {
    fn default() -> Self {
        Self {
            devices: 100,
            groups: 1,
            interval_ms: 120,
            payload: 320,
            duration_s: 5,
            writers: 2,
            max_frame_age_ms: 120,
            server: ServerProcess::InProcess,
        }
    }
}

/// Why a run failed.
#[derive(Debug, Error)]
pub enum LoadError {
    /// A parameter is out of range.
    #[error("invalid parameter: {0}")]
    Invalid(String),
    /// Store setup failed.
    #[error("store: {0}")]
    Store(#[from] StoreError),
    /// The reflector failed to start.
    #[error("server: {0}")]
    Server(#[from] ServerError),
    /// A socket failed.
    #[error("io: {0}")]
    Io(#[from] std::io::Error),
    /// Devices did not authenticate.
    #[error("{0} devices failed to log in")]
    Login(usize),
}

impl LoadConfig {
    /// Checks parameter ranges.
    pub fn validate(&self) -> Result<(), LoadError> {
        let bad = |m: &str| Err(LoadError::Invalid(m.into()));
        if !(2..=20_000).contains(&self.devices) {
            return bad("devices: 2..=20000");
        }
        if self.groups == 0 || self.groups > 1024 || self.groups * 2 > self.devices {
            return bad("groups: 1..=1024 and at most devices/2");
        }
        if self.interval_ms < 10 {
            return bad("interval_ms: >= 10");
        }
        if !(32..=710).contains(&self.payload) {
            return bad("payload: 32..=710");
        }
        if !(1..=600).contains(&self.duration_s) {
            return bad("duration_s: 1..=600");
        }
        // The reflector's own ranges, checked before any stage starts.
        FanoutConfig {
            writers: self.writers,
            max_frame_age_ms: self.max_frame_age_ms,
            ..FanoutConfig::default()
        }
        .validate()
        .map_err(|e| LoadError::Invalid(e.to_string()))
    }
}

/// Address of device `i` (n = i + 1): 127.(64 + n/254²).(1 + (n/254) mod 254).(1 + n mod 254).
pub fn device_ip(i: usize) -> Ipv4Addr {
    let n = i + 1;
    Ipv4Addr::new(
        127,
        (64 + n / (254 * 254)) as u8,
        (1 + (n / 254) % 254) as u8,
        (1 + n % 254) as u8,
    )
}

fn ssid_of(i: usize) -> u8 {
    let k = i % DEVICES_PER_USER;
    if k < 99 {
        (k + 1) as u8
    } else {
        (k - 99 + 106) as u8
    }
}

fn user_of(i: usize) -> String {
    format!("bench{:04}", i / DEVICES_PER_USER)
}

fn unix_ns() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| u64::try_from(d.as_nanos()).unwrap_or(u64::MAX))
}

struct Device {
    sock: UdpSocket,
    header: Header,
    heartbeat: Vec<u8>,
}

fn make_device(i: usize, server: SocketAddr) -> Result<Device, LoadError> {
    let sock = UdpSocket::bind(SocketAddrV4::new(device_ip(i), 0))?;
    let s2 = socket2::SockRef::from(&sock);
    let _ = s2.set_recv_buffer_size(256 << 10);
    sock.connect(server)?;
    let mut header = Header::new(PacketType::Heartbeat);
    header.set_username(&user_of(i));
    header.set_password(PASSWORD);
    header.ssid = ssid_of(i);
    header.dev_model = 2;
    let n = (i + 1) as u32;
    let mut data = vec![0u8; 24];
    let b = n.to_be_bytes();
    data.extend_from_slice(
        format!("02:42:{:02X}:{:02X}:{:02X}:{:02X}", b[0], b[1], b[2], b[3]).as_bytes(),
    );
    let heartbeat = encode(&header, &data).map_err(|e| LoadError::Invalid(e.to_string()))?;
    Ok(Device {
        sock,
        header,
        heartbeat,
    })
}

/// Pause before the next attempt after a reject (e.g. `server_busy` while the
/// first device of a user has its password checked).
const LOGIN_RETRY_PAUSE: Duration = Duration::from_millis(250);
/// How long a device keeps retrying rejected logins. The reflector answers
/// `server_busy` while its Argon2 budget (10 checks/s by default) works
/// through the users; a real device simply heartbeats again, so only a
/// device still refused after this long counts as failed.
const LOGIN_DEADLINE: Duration = Duration::from_secs(30);

/// Heartbeats until one is answered with a callsign: up to 4 unanswered
/// heartbeats, each waiting 2.5 s for a reply (§7.2); a reject is retried
/// after a short pause until [`LOGIN_DEADLINE`].
fn login(d: &Device) -> bool {
    let _ = d.sock.set_read_timeout(Some(Duration::from_millis(2500)));
    let mut buf = [0u8; 1500];
    let started = Instant::now();
    let mut unanswered = 0;
    while unanswered < 4 && started.elapsed() < LOGIN_DEADLINE {
        if d.sock.send(&d.heartbeat).is_err() {
            unanswered += 1;
            continue;
        }
        // The heartbeat reply, skipping Type 3 pushes: accepted (a callsign) or not.
        let mut accepted = None;
        while let Ok(n) = d.sock.recv(&mut buf) {
            if let Ok(p) = decode(&buf[..n]) {
                if p.header.packet_type == PacketType::Heartbeat {
                    accepted = Some(p.header.callsign_str().is_some_and(|c| !c.is_empty()));
                    break;
                }
            }
        }
        match accepted {
            Some(true) => return true,
            Some(false) => std::thread::sleep(LOGIN_RETRY_PAUSE),
            None => unanswered += 1,
        }
    }
    false
}

/// Sets up a fresh store and reflector, logs every device in, and runs one stage.
pub async fn run(cfg: &LoadConfig) -> Result<LoadResult, LoadError> {
    cfg.validate()?;
    let db_path = std::env::temp_dir().join(format!("petrel-refl-bench-{}.db", std::process::id()));
    let db = db_path.to_string_lossy().into_owned();
    let result = run_with_db(cfg, &db).await;
    for ext in ["", "-wal", "-shm"] {
        let _ = std::fs::remove_file(format!("{db}{ext}"));
    }
    result
}

async fn run_with_db(cfg: &LoadConfig, db: &str) -> Result<LoadResult, LoadError> {
    let store = Store::open(db, StoreOptions::default()).await?;
    let users = cfg.devices.div_ceil(DEVICES_PER_USER);
    for u in 0..users {
        store
            .add_user(&NewUser {
                name: format!("bench{u:04}"),
                callsign: format!("BT{u:05}"),
                dmrid: 9_000_000 + u as u32,
                device_password: PASSWORD.into(),
                default_group_id: None,
            })
            .await?;
    }
    let mut group_ids = Vec::with_capacity(cfg.groups);
    for g in 0..cfg.groups {
        group_ids.push(
            store
                .add_group(&format!("bench-{g:04}"), false, None)
                .await?,
        );
    }
    for i in 0..cfg.devices {
        store
            .set_device_group(&user_of(i), ssid_of(i), group_ids[i % cfg.groups])
            .await?;
    }
    store.close().await;

    let fanout = FanoutConfig {
        writers: cfg.writers,
        max_frame_age_ms: cfg.max_frame_age_ms,
        ..FanoutConfig::default()
    };
    let (res, counters) = match &cfg.server {
        ServerProcess::InProcess => {
            let server = ServerHandle::start(ServerConfig {
                listen: SocketAddr::from(([127, 0, 0, 1], 0)),
                db: db.into(),
                fanout,
                http_listen: None,
                ..ServerConfig::default()
            })
            .await?;
            let (at, cfg2) = (server.local_addr(), cfg.clone());
            let res = tokio::task::spawn_blocking(move || drive(&cfg2, at, None))
                .await
                .map_err(|e| LoadError::Invalid(e.to_string()))?;
            let f = server.stats().fanout;
            server.shutdown().await;
            let counters = child::FanoutCounters {
                frames_dropped: f.frames_dropped,
                frames_expired: f.frames_expired,
                queue_high_water: f.queue_high_water,
                max_dispatch_ns: f.max_dispatch_ns,
            };
            (res, counters)
        }
        ServerProcess::Child(program) => {
            let (program, db, cfg2) = (program.clone(), db.to_owned(), cfg.clone());
            tokio::task::spawn_blocking(move || {
                let server = child::ServerChild::start(&program, &db, &fanout)?;
                let res = drive(&cfg2, server.udp, Some(server.pid()));
                let counters = server.fanout()?;
                Ok::<_, LoadError>((res, counters))
            })
            .await
            .map_err(|e| LoadError::Invalid(e.to_string()))??
        }
    };
    res.map(|mut r| {
        r.frames_dropped = counters.frames_dropped + counters.frames_expired;
        r.frames_expired = counters.frames_expired;
        r.queue_high_water = counters.queue_high_water;
        r.max_dispatch_ms = counters.max_dispatch_ns as f64 / 1e6;
        r
    })
}

/// CPU counters at one instant.
#[derive(Debug, Clone, Copy)]
struct CpuSample {
    at: Instant,
    server_ns: u64,
    loadgen_ns: u64,
    recv_ns: u64,
    host: HostCpu,
}

impl CpuSample {
    /// `pid` is this process; `server` the reflector child, if it is one.
    fn take(pid: u32, server: Option<u32>) -> Self {
        let process_ns = thread_cpu_ns(pid, "").unwrap_or(0);
        let (server_ns, loadgen_ns) = match server {
            Some(child) => (thread_cpu_ns(child, "").unwrap_or(0), process_ns),
            None => {
                let refl = thread_cpu_ns(pid, "refl-").unwrap_or(0);
                (refl, process_ns.saturating_sub(refl))
            }
        };
        Self {
            at: Instant::now(),
            server_ns,
            loadgen_ns,
            recv_ns: thread_cpu_ns(pid, RECV_THREAD).unwrap_or(0),
            host: host_cpu().unwrap_or_default(),
        }
    }
}

/// Fills the CPU fields of `r` from two samples.
fn cpu_between(r: &mut LoadResult, a: &CpuSample, b: &CpuSample) {
    let wall = b.at.duration_since(a.at).as_secs_f64().max(1e-9);
    let cores = |ns: u64| ns as f64 / 1e9 / wall;
    r.server_cpu_cores = cores(b.server_ns.saturating_sub(a.server_ns));
    r.loadgen_cpu_cores = cores(b.loadgen_ns.saturating_sub(a.loadgen_ns));
    r.loadgen_recv_cpu_cores = cores(b.recv_ns.saturating_sub(a.recv_ns));
    let hz = clock_ticks_per_s() as f64;
    let ticks = |x: u64, y: u64| y.saturating_sub(x) as f64 / hz / wall;
    r.host_busy_cores = ticks(a.host.busy, b.host.busy);
    r.host_softirq_cores = ticks(a.host.softirq, b.host.softirq);
    r.host_steal_cores = ticks(a.host.steal, b.host.steal);
    r.host_cpus = b.host.cpus;
}

/// Runs one stage against the reflector at `server`; `server_pid` is its
/// process when it is a child.
fn drive(
    cfg: &LoadConfig,
    server: SocketAddr,
    server_pid: Option<u32>,
) -> Result<LoadResult, LoadError> {
    let devices: Vec<Device> = (0..cfg.devices)
        .map(|i| make_device(i, server))
        .collect::<Result<_, _>>()?;
    let t0 = Instant::now();
    let failed = std::thread::scope(|s| {
        let chunks: Vec<&[Device]> = devices.chunks(devices.len().div_ceil(8)).collect();
        let handles: Vec<_> = chunks
            .into_iter()
            .map(|c| s.spawn(move || c.iter().filter(|d| !login(d)).count()))
            .collect();
        handles
            .into_iter()
            .map(|h| h.join().unwrap_or(usize::MAX))
            .sum::<usize>()
    });
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
                crate::codec::encode_into(&h, &payload, &mut packet)
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
        },
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

/// The speakers' absolute schedule: round `k` is due at a fixed offset from
/// a start, so a late round does not delay the next ones. After the pause
/// between warm-up and measurement the schedule restarts; otherwise every
/// round due during the pause would go out at once, a burst of frames the
/// reflector must queue (and would age out) that no real talker sends.
#[derive(Debug, Clone, Copy)]
struct Schedule {
    start: Instant,
    first_round: u64,
    interval: Duration,
}

impl Schedule {
    fn new(start: Instant, interval: Duration) -> Self {
        Self {
            start,
            first_round: 0,
            interval,
        }
    }

    /// Round `k` is due at `now`, the later rounds one interval apart.
    fn restart(&mut self, now: Instant, k: u64) {
        self.start = now;
        self.first_round = k;
    }

    fn due(&self, k: u64) -> Instant {
        let n = u32::try_from(k.saturating_sub(self.first_round)).unwrap_or(u32::MAX);
        self.start + self.interval * n
    }
}

/// Keeps every device online (the reflector drops devices after 20 s): each
/// device heartbeats every 2 s, the devices spread evenly over that period
/// (like real devices, whose phases differ; §7.2 staggers them by SSID), so
/// the reflector never sees every heartbeat of a stage in one burst.
fn heartbeat_loop(devices: &[Device], stop: &AtomicBool) {
    const PERIOD: Duration = Duration::from_secs(2);
    const TICK: Duration = Duration::from_millis(10);
    if devices.is_empty() {
        return;
    }
    let start = Instant::now();
    let n = devices.len().max(1);
    // Device i is due at start + (k + 1) × PERIOD + i × PERIOD / n.
    let mut next = 0usize;
    let mut round = 1u32;
    while !stop.load(Relaxed) {
        let elapsed = start.elapsed();
        loop {
            let due = PERIOD * round + PERIOD.mul_f64(next as f64 / n as f64);
            if due > elapsed {
                break;
            }
            let _ = devices[next].sock.send(&devices[next].heartbeat);
            next += 1;
            if next == devices.len() {
                next = 0;
                round += 1;
            }
        }
        std::thread::sleep(TICK);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn schedule_restarts_without_a_catch_up_burst() {
        let t0 = Instant::now();
        let ms = Duration::from_millis;
        let mut s = Schedule::new(t0, ms(30));
        assert_eq!(s.due(0), t0);
        assert_eq!(s.due(7), t0 + ms(210));
        // One second of pause after round 7: round 8 is due at the restart,
        // not 1 s in the past with 33 overdue rounds behind it.
        let resume = t0 + ms(1_210);
        s.restart(resume, 8);
        assert_eq!(s.due(8), resume);
        assert_eq!(s.due(9), resume + ms(30));
        assert!((8..50).all(|k| s.due(k) >= resume));
    }
}
