//! Measurements of the relay itself (`petrel bench netem`): its forwarding ceiling and
//! its delay accuracy, on loopback, with the load generator and the sink in one
//! thread so that the relay thread keeps a core of its own even on a 2-core machine.
//!
//! Topology: generator socket → relay → sink socket, one route. Both measurements
//! are bounded in time.

use std::io;
use std::net::{SocketAddr, UdpSocket};
use std::time::{Duration, Instant};

use hdrhistogram::Histogram;
use petrel_sys::batch::{RecvBatch, SendBatch};
use petrel_sys::proc::process_cpu_time;
use petrel_sys::range::{check_range, check_range_in, RangeError};
use petrel_sys::socket::{set_buffers, BufferRequest, OnRefusal};
use serde::Serialize;

use crate::config::{LinkConfig, RouteConfig, MAX_DELAY};
use crate::relay::{Lateness, Relay, RelayConfig, RelayError, RelayStats};

/// Why a measurement could not run.
#[derive(Debug, thiserror::Error)]
pub enum BenchError {
    /// The relay failed to start or stop.
    #[error(transparent)]
    Relay(#[from] RelayError),
    /// A generator or sink socket operation failed.
    #[error("{context}: {source}")]
    Io {
        /// What was being done.
        context: &'static str,
        /// The OS error.
        source: io::Error,
    },
    /// A parameter is out of range.
    #[error("invalid {0}")]
    Range(#[from] RangeError),
    /// A parameter breaks a rule other than a range.
    #[error("invalid {0}")]
    Parameter(&'static str),
}

fn io_err(context: &'static str) -> impl Fn(io::Error) -> BenchError {
    move |source| BenchError::Io { context, source }
}

/// Forwarding ceiling parameters. `Default`: 1200-byte datagrams, 5 s, 512 in
/// flight, batches of 32.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct CeilingConfig {
    /// UDP payload per datagram, bytes (16..=65507).
    pub payload: usize,
    /// Measured duration.
    #[serde(serialize_with = "ser_secs")]
    pub duration: Duration,
    /// Datagrams in flight (sent, not yet received by the sink): the generator runs
    /// closed-loop so that the measured rate is the relay's, not a queue overflow.
    pub window: usize,
    /// Datagrams per `sendmmsg`/`recvmmsg` call in the generator *and* the relay (1 =
    /// unbatched).
    pub batch: usize,
}

impl Default for CeilingConfig {
    fn default() -> Self {
        Self {
            payload: 1200,
            duration: Duration::from_secs(5),
            window: 512,
            batch: 32,
        }
    }
}

/// Forwarding ceiling result.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct CeilingResult {
    /// Datagrams sent by the generator.
    pub sent: u64,
    /// Datagrams that reached the sink.
    pub received: u64,
    /// Datagrams given up on after 50 ms without progress (`sent - received`).
    pub lost: u64,
    /// Measured time, s.
    pub seconds: f64,
    /// Received datagrams per second.
    pub pps: f64,
    /// Received UDP payload in Gbit/s.
    pub gbit_per_s: f64,
    /// CPU time of the process (relay + generator + sink threads) over the measured
    /// interval, in seconds of one core.
    pub cpu_seconds: f64,
    /// The relay's counters at the end.
    pub relay: RelayStats,
}

/// Delay accuracy parameters. `Default`: 100 000 pps of 200-byte datagrams, 10 ms
/// one-way delay, 3 s, batches of 32, 100 µs spin.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct AccuracyConfig {
    /// Offered rate, datagrams per second (1..=10 000 000).
    pub pps: u64,
    /// UDP payload per datagram, bytes (16..=65507).
    pub payload: usize,
    /// Configured one-way delay of the relay's upstream direction.
    #[serde(serialize_with = "ser_ms")]
    pub delay: Duration,
    /// Measured duration.
    #[serde(serialize_with = "ser_secs")]
    pub duration: Duration,
    /// Datagrams per system call, as [`CeilingConfig::batch`].
    pub batch: usize,
    /// The relay's [`RelayConfig::spin`], µs (0..=10 000).
    pub spin_us: u64,
}

impl Default for AccuracyConfig {
    fn default() -> Self {
        Self {
            pps: 100_000,
            payload: 200,
            delay: Duration::from_millis(10),
            duration: Duration::from_secs(3),
            batch: 32,
            spin_us: 100,
        }
    }
}

/// Delay accuracy result.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct AccuracyResult {
    /// Datagrams sent.
    pub sent: u64,
    /// Datagrams received by the sink.
    pub received: u64,
    /// Achieved offered rate, datagrams per second.
    pub offered_pps: f64,
    /// CPU time of the process over the measured interval, in seconds of one core.
    pub cpu_seconds: f64,
    /// The relay's own measure: actual send time − scheduled send time.
    pub relay_lateness: Lateness,
    /// End to end: (sink receive time − generator send time) − configured delay, in
    /// µs; includes both sockets and the generator loop's own latency.
    pub end_to_end_excess: Lateness,
    /// The relay's counters at the end.
    pub relay: RelayStats,
}

fn ser_secs<S: serde::Serializer>(d: &Duration, s: S) -> Result<S::Ok, S::Error> {
    s.serialize_f64(d.as_secs_f64())
}

fn ser_ms<S: serde::Serializer>(d: &Duration, s: S) -> Result<S::Ok, S::Error> {
    s.serialize_f64(d.as_secs_f64() * 1e3)
}

/// A generator socket, a sink socket and a relay between them.
struct Rig {
    tx: UdpSocket,
    rx: UdpSocket,
    relay: Relay,
    send: SendBatch,
    recv: RecvBatch,
}

impl Rig {
    fn new(link: LinkConfig, batch: usize, spin: Duration) -> Result<Rig, BenchError> {
        let rx = UdpSocket::bind("127.0.0.1:0").map_err(io_err("bind sink"))?;
        let tx = UdpSocket::bind("127.0.0.1:0").map_err(io_err("bind generator"))?;
        let mut cfg = RelayConfig::new(
            SocketAddr::from(([127, 0, 0, 1], 0)),
            rx.local_addr().map_err(io_err("sink address"))?,
        );
        cfg.route = RouteConfig::symmetric(link);
        cfg.batch = batch;
        cfg.spin = spin;
        let relay = Relay::start(cfg)?;
        for s in [&tx, &rx] {
            s.set_nonblocking(true).map_err(io_err("socket options"))?;
            // Best effort, as in the relay.
            set_buffers(s, BufferRequest::both(4 << 20), OnRefusal::Ignore)
                .map_err(io_err("socket options"))?;
        }
        tx.connect(relay.local_addr())
            .map_err(io_err("connect generator"))?;
        Ok(Rig {
            tx,
            rx,
            relay,
            send: SendBatch::new(batch),
            recv: RecvBatch::new(batch),
        })
    }

    /// Sends up to `packets.len()` datagrams; returns how many left.
    fn send(&mut self, packets: &[Vec<u8>]) -> Result<usize, BenchError> {
        let packets = &packets[..packets.len().min(self.send.capacity())];
        match self.send.send_to(&self.tx, packets, None) {
            Ok(n) => Ok(n),
            Err(e) if e.kind() == io::ErrorKind::WouldBlock => Ok(0),
            Err(e) => Err(io_err("generator send")(e)),
        }
    }

    /// Reads what the sink has, calling `each` with every datagram.
    fn drain(&mut self, mut each: impl FnMut(&[u8])) -> Result<u64, BenchError> {
        let mut total = 0;
        loop {
            let n = match self.recv.recv(&self.rx) {
                Ok(n) => n,
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => 0,
                Err(e) => return Err(io_err("sink receive")(e)),
            };
            for i in 0..n {
                if let Some(d) = self.recv.get(i) {
                    each(d.data);
                }
            }
            total += n as u64;
            if n == 0 {
                return Ok(total);
            }
        }
    }
}

fn check(payload: usize, batch: usize) -> Result<(), BenchError> {
    check_range_in("payload", payload, &(16..=65_507), "bytes")?;
    check_range("batch", batch, &(1..=1024))?;
    Ok(())
}

/// Measures the relay's forwarding rate with no impairment.
///
/// # Errors
/// [`BenchError`] when a parameter is out of range or a socket or the relay fails.
pub fn forwarding_ceiling(cfg: &CeilingConfig) -> Result<CeilingResult, BenchError> {
    check(cfg.payload, cfg.batch)?;
    if cfg.window == 0 {
        return Err(BenchError::Parameter("window: must be at least 1"));
    }
    let mut rig = Rig::new(
        LinkConfig::default(),
        cfg.batch,
        RelayConfig::default().spin,
    )?;
    let packets = vec![vec![0xA5u8; cfg.payload]; cfg.batch];
    let (mut sent, mut received, mut lost) = (0u64, 0u64, 0u64);
    let start = Instant::now();
    let end = start + cfg.duration;
    let mut last_progress = start;
    let cpu_start = process_cpu_time().unwrap_or_default();
    while Instant::now() < end {
        let in_flight = (sent - received - lost) as usize;
        let room = cfg.window.saturating_sub(in_flight).min(cfg.batch);
        if room > 0 {
            sent += rig.send(&packets[..room])? as u64;
        }
        let got = rig.drain(|_| ())?;
        received += got;
        let now = Instant::now();
        if got > 0 {
            last_progress = now;
        } else if now - last_progress > Duration::from_millis(50) {
            lost = sent - received;
            last_progress = now;
        }
    }
    let seconds = start.elapsed().as_secs_f64();
    let cpu_seconds = (process_cpu_time()
        .unwrap_or_default()
        .saturating_sub(cpu_start))
    .as_secs_f64();
    std::thread::sleep(Duration::from_millis(50));
    received += rig.drain(|_| ())?;
    let relay = rig.relay.stop()?;
    Ok(CeilingResult {
        sent,
        received,
        lost: sent - received,
        seconds,
        pps: received as f64 / seconds,
        gbit_per_s: received as f64 * cfg.payload as f64 * 8.0 / seconds / 1e9,
        cpu_seconds,
        relay,
    })
}

/// Measures scheduled-vs-actual send time at `pps` through a `delay` link.
///
/// # Errors
/// [`BenchError`] when a parameter is out of range or a socket or the relay fails.
pub fn delay_accuracy(cfg: &AccuracyConfig) -> Result<AccuracyResult, BenchError> {
    check(cfg.payload, cfg.batch)?;
    check_range("pps", cfg.pps, &(1..=10_000_000))?;
    check_range("delay", cfg.delay, &(Duration::ZERO..=MAX_DELAY))?;
    let link = LinkConfig {
        delay: cfg.delay,
        ..LinkConfig::default()
    };
    let mut rig = Rig::new(link, cfg.batch, Duration::from_micros(cfg.spin_us))?;
    let mut excess = Histogram::<u64>::new_with_bounds(1, 60_000_000_000, 3)
        .map_err(|_| BenchError::Parameter("histogram bounds"))?;
    let mut packets = vec![vec![0u8; cfg.payload]; cfg.batch];
    let delay_ns = cfg.delay.as_nanos() as i128;
    let start = Instant::now();
    let end = start + cfg.duration;
    let cpu_start = process_cpu_time().unwrap_or_default();
    let (mut sent, mut received) = (0u64, 0u64);
    let mut record = |data: &[u8]| {
        let now = Instant::now();
        if let Some(stamp) = data.get(..8) {
            let sent_ns = u64::from_be_bytes(stamp.try_into().unwrap_or([0; 8]));
            let rx_ns = now.duration_since(start).as_nanos() as i128;
            let e = (rx_ns - i128::from(sent_ns) - delay_ns).max(0);
            excess.saturating_record(u64::try_from(e).unwrap_or(u64::MAX));
        }
    };
    loop {
        let now = Instant::now();
        if now >= end {
            break;
        }
        let due =
            (now.duration_since(start).as_nanos() * u128::from(cfg.pps) / 1_000_000_000) as u64;
        let mut behind = due.saturating_sub(sent) as usize;
        while behind > 0 {
            let n = behind.min(cfg.batch);
            let stamp = (Instant::now().duration_since(start).as_nanos() as u64).to_be_bytes();
            for p in &mut packets[..n] {
                p[..8].copy_from_slice(&stamp);
            }
            let k = rig.send(&packets[..n])?;
            if k == 0 {
                break;
            }
            sent += k as u64;
            behind -= k;
        }
        received += rig.drain(&mut record)?;
        std::thread::sleep(Duration::from_micros(50));
    }
    let offered_pps = sent as f64 / start.elapsed().as_secs_f64();
    let cpu_seconds = (process_cpu_time()
        .unwrap_or_default()
        .saturating_sub(cpu_start))
    .as_secs_f64();
    let settle = Instant::now() + cfg.delay + Duration::from_millis(100);
    while Instant::now() < settle {
        received += rig.drain(&mut record)?;
        std::thread::sleep(Duration::from_micros(50));
    }
    let relay = rig.relay.stop()?;
    Ok(AccuracyResult {
        sent,
        received,
        offered_pps,
        cpu_seconds,
        relay_lateness: relay.lateness,
        end_to_end_excess: Lateness::from_ns(&excess),
        relay,
    })
}
