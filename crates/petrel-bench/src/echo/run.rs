//! The echo run loop: per client a sender task and a receiver task sharing a
//! bounded in-flight table, plus the measurement around them.

use std::collections::{BTreeMap, HashMap};
use std::io;
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::time::Instant;

use serde::{Deserialize, Serialize};
use tokio::sync::{Notify, Semaphore};
use tokio::task::JoinSet;

use super::message::{self, Header, Phase};
use super::{EchoClient, EchoConfig, EchoConfigError, EchoTransport, DRAIN_LIMIT};
use crate::measure::{peak_rss_bytes, CpuSample, LatencyHistogram, Percentiles};
use crate::record::{RecordError, ResultRecord, SocketBuffers, Spread};
use crate::table::Row;

/// Why an echo run could not produce a result (as opposed to a result that is
/// not `ok`).
#[derive(Debug, thiserror::Error)]
pub enum EchoError {
    /// A parameter is out of range.
    #[error(transparent)]
    Config(#[from] EchoConfigError),
    /// The server or a client could not be set up.
    #[error("cannot {what}: {source}")]
    Setup {
        /// What was being set up.
        what: String,
        /// The I/O error.
        source: io::Error,
    },
    /// The result could not be recorded.
    #[error(transparent)]
    Record(#[from] RecordError),
    /// A harness task panicked or was cancelled.
    #[error("benchmark task failed: {0}")]
    Task(String),
}

/// Error counters of one round (or summed over rounds). Every kind counts
/// against `ok`.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct EchoErrors {
    /// Echoes failing length, magic, phase or body verification.
    pub content: u64,
    /// Echoes arriving after an echo with a higher sequence (reordering).
    pub order: u64,
    /// Valid echoes for another client, or for a sequence not in flight
    /// (duplicates).
    pub unexpected: u64,
    /// `send` calls that failed.
    pub send: u64,
    /// Clients whose `recv` failed (connection closed or reset).
    pub disconnects: u64,
    /// Clients still waiting for echoes when the drain limit expired.
    pub drain_timeouts: u64,
    /// Unreliable transports: messages never echoed.
    pub lost: u64,
    /// Reliable transports: messages still outstanding at the end.
    pub unfinished: u64,
    /// Server-side receive/send/framing failures.
    pub server: u64,
}

impl EchoErrors {
    /// Sum of every kind.
    pub fn total(&self) -> u64 {
        self.by_kind().values().sum()
    }

    /// The counters by kind name, as recorded in [`ResultRecord::errors`].
    pub fn by_kind(&self) -> BTreeMap<String, u64> {
        [
            ("content", self.content),
            ("order", self.order),
            ("unexpected", self.unexpected),
            ("send", self.send),
            ("disconnects", self.disconnects),
            ("drain_timeouts", self.drain_timeouts),
            ("lost", self.lost),
            ("unfinished", self.unfinished),
            ("server", self.server),
        ]
        .into_iter()
        .map(|(k, v)| (k.to_owned(), v))
        .collect()
    }

    fn add(&mut self, o: &EchoErrors) {
        self.content += o.content;
        self.order += o.order;
        self.unexpected += o.unexpected;
        self.send += o.send;
        self.disconnects += o.disconnects;
        self.drain_timeouts += o.drain_timeouts;
        self.lost += o.lost;
        self.unfinished += o.unfinished;
        self.server += o.server;
    }
}

/// Figures of one round.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct EchoRound {
    /// Round index, from 0.
    pub round: u32,
    /// Messages submitted (warm-up and measured).
    pub sent: u64,
    /// Verified echoes of warm-up messages.
    pub warmup_round_trips: u64,
    /// Verified echoes of messages submitted in the measured interval.
    pub round_trips: u64,
    /// Measured interval (s).
    pub measured_s: f64,
    /// Time from the end of the measured interval until the last client
    /// finished draining (s), at most the drain limit.
    pub drain_s: f64,
    /// `round_trips / (measured_s + drain_s)` (round trips/s).
    pub round_trips_per_sec: f64,
    /// RTT from submission to verified echo of measured messages (µs).
    pub rtt: Percentiles,
    /// Process CPU over the measured interval (%; 100 = one core).
    pub cpu_percent: Option<f64>,
    /// Messages the server echoed.
    pub server_echoed: u64,
    /// Error counters.
    pub errors: EchoErrors,
}

/// Every parameter of an echo run, as recorded.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct EchoParameters {
    /// Transport (`--protocol`).
    pub protocol: String,
    /// Message size including header (bytes).
    pub payload: usize,
    /// Clients.
    pub clients: usize,
    /// Messages in flight per client.
    pub window: usize,
    /// Warm-up (s).
    pub warmup_s: f64,
    /// Measured interval (s).
    pub seconds: f64,
    /// Drain limit (s).
    pub drain_limit_s: f64,
    /// Rounds.
    pub rounds: u32,
    /// Tokio runtime flavour: `"current_thread"` or `"multi_thread"`.
    pub runtime: String,
    /// Tokio worker threads.
    pub runtime_workers: usize,
    /// Whether leftovers count as unfinished (reliable) or lost.
    pub reliable: bool,
}

/// The outcome of [`run_echo`]: the record to write and the typed rounds.
#[derive(Debug, Clone)]
pub struct EchoReport {
    /// The JSON result envelope.
    pub record: ResultRecord,
    /// The rounds, typed.
    pub rounds: Vec<EchoRound>,
}

impl EchoReport {
    /// The summary-table row: medians across rounds, errors summed.
    pub fn summary_row(&self) -> Row {
        let median = |key: &str| self.record.summary.get(key).map(|s| s.median);
        Row {
            case: self.record.case.clone(),
            round_trips_per_sec: median("round_trips_per_sec").unwrap_or(0.0),
            p50_us: median("rtt_p50_us"),
            p99_us: median("rtt_p99_us"),
            cpu_percent: median("cpu_percent"),
            errors: self.record.errors.values().sum(),
            ok: self.record.ok,
        }
    }
}

/// Runs the echo benchmark of `specs/benchmarks.md` §A over `transport` on
/// the current tokio runtime and records it as `case`.
///
/// # Errors
/// [`EchoError`] when the configuration is invalid, setup fails or a task
/// panics. Failures during the run are counted in the result instead.
pub async fn run_echo<T: EchoTransport>(
    transport: &T,
    cfg: &EchoConfig,
    case: &str,
) -> Result<EchoReport, EchoError> {
    cfg.validate()?;
    let metrics = tokio::runtime::Handle::current().metrics();
    let runtime = match tokio::runtime::Handle::current().runtime_flavor() {
        tokio::runtime::RuntimeFlavor::CurrentThread => "current_thread",
        _ => "multi_thread",
    };
    let params = EchoParameters {
        protocol: transport.name().to_owned(),
        payload: cfg.payload,
        clients: cfg.clients,
        window: cfg.window,
        warmup_s: cfg.warmup.as_secs_f64(),
        seconds: cfg.measured.as_secs_f64(),
        drain_limit_s: DRAIN_LIMIT.as_secs_f64(),
        rounds: cfg.rounds,
        runtime: runtime.to_owned(),
        runtime_workers: metrics.num_workers(),
        reliable: transport.reliable(),
    };
    let mut record = ResultRecord::begin("echo", case, &params)?;
    let mut rounds = Vec::new();
    let mut totals = EchoErrors::default();
    for round in 0..cfg.rounds {
        let (figures, buffers) = run_round(transport, cfg, round).await?;
        record.socket_buffers = record.socket_buffers.or(buffers);
        totals.add(&figures.errors);
        record.push_round(&figures)?;
        rounds.push(figures);
    }
    let figure =
        |f: fn(&EchoRound) -> Option<f64>| -> Vec<f64> { rounds.iter().filter_map(f).collect() };
    let headline: [(&str, Vec<f64>); 5] = [
        (
            "round_trips_per_sec",
            figure(|r| Some(r.round_trips_per_sec)),
        ),
        ("rtt_p50_us", figure(|r| Some(r.rtt.p50_us as f64))),
        ("rtt_p99_us", figure(|r| Some(r.rtt.p99_us as f64))),
        ("rtt_max_us", figure(|r| Some(r.rtt.max_us as f64))),
        ("cpu_percent", figure(|r| r.cpu_percent)),
    ];
    for (key, values) in headline {
        if let Some(spread) = Spread::of(&values) {
            record.summary.insert(key.to_owned(), spread);
        }
    }
    record.errors = totals.by_kind();
    record.peak_rss_bytes = peak_rss_bytes();
    record.ok = totals.total() == 0 && rounds.iter().all(|r| r.round_trips > 0);
    Ok(EchoReport { record, rounds })
}

/// Submission times of one client's outstanding messages, keyed by sequence.
/// At most `window` entries: the sender inserts only with a permit.
struct Inflight {
    sent_at: HashMap<u64, Instant>,
    /// Set by the sender when it stops submitting.
    closed: bool,
}

struct Shared {
    inflight: Mutex<Inflight>,
    /// One permit per free window slot.
    slots: Semaphore,
    /// Signalled when `closed` is set with nothing outstanding.
    drained: Notify,
}

impl Shared {
    fn lock(&self) -> MutexGuard<'_, Inflight> {
        // A poisoned table only means a harness task panicked; that panic
        // is reported through its JoinHandle, so keep using the data.
        self.inflight.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

#[derive(Clone, Copy)]
struct Timing {
    warm_end: Instant,
    measure_end: Instant,
    drain_end: Instant,
    payload: usize,
}

#[derive(Default)]
struct ClientTally {
    sent: u64,
    warmup_round_trips: u64,
    round_trips: u64,
    hist: LatencyHistogram,
    errors: EchoErrors,
    finished_at: Option<Instant>,
}

async fn run_round<T: EchoTransport>(
    transport: &T,
    cfg: &EchoConfig,
    round: u32,
) -> Result<(EchoRound, Option<SocketBuffers>), EchoError> {
    let setup = |what: String| move |source| EchoError::Setup { what, source };
    let server = transport
        .start_server()
        .await
        .map_err(setup(format!("start {} echo server", transport.name())))?;
    let mut clients = Vec::with_capacity(cfg.clients);
    for id in 0..cfg.clients {
        // `validate` bounds clients to 1024, so the id fits.
        let id = u32::try_from(id).unwrap_or(u32::MAX);
        let client = transport
            .connect(server.local_addr(), id)
            .await
            .map_err(setup(format!("connect {} client {id}", transport.name())))?;
        clients.push((id, Arc::new(client)));
    }
    let requested = transport.requested_buffers();
    let buffers = match (
        server.socket_buffers(),
        clients.first().and_then(|c| c.1.socket_buffers()),
    ) {
        (Some(s), Some(c)) => Some(SocketBuffers {
            requested_send: requested.send,
            requested_recv: requested.recv,
            server_send: s.send,
            server_recv: s.recv,
            client_send: c.send,
            client_recv: c.recv,
        }),
        _ => None,
    };

    let start = Instant::now();
    let warm_end = start + cfg.warmup;
    let measure_end = warm_end + cfg.measured;
    let timing = Timing {
        warm_end,
        measure_end,
        drain_end: measure_end + DRAIN_LIMIT,
        payload: cfg.payload,
    };
    let mut senders = JoinSet::new();
    let mut receivers = JoinSet::new();
    let mut tables = Vec::with_capacity(clients.len());
    for (id, client) in clients {
        let shared = Arc::new(Shared {
            inflight: Mutex::new(Inflight {
                sent_at: HashMap::with_capacity(cfg.window),
                closed: false,
            }),
            slots: Semaphore::new(cfg.window),
            drained: Notify::new(),
        });
        tables.push(Arc::clone(&shared));
        senders.spawn(send_loop(
            Arc::clone(&client),
            Arc::clone(&shared),
            id,
            timing,
        ));
        receivers.spawn(recv_loop(client, shared, id, timing));
    }

    tokio::time::sleep_until(warm_end.into()).await;
    let cpu_start = CpuSample::now();
    tokio::time::sleep_until(measure_end.into()).await;
    let cpu_percent = cpu_start.percent_until(&CpuSample::now());

    let mut tally = ClientTally::default();
    let mut drain_end_seen = measure_end;
    let mut joined_all = join_all(senders).await?;
    joined_all.extend(join_all(receivers).await?);
    for joined in joined_all {
        tally.sent += joined.sent;
        tally.warmup_round_trips += joined.warmup_round_trips;
        tally.round_trips += joined.round_trips;
        tally.hist.merge(&joined.hist);
        tally.errors.add(&joined.errors);
        if let Some(at) = joined.finished_at {
            drain_end_seen = drain_end_seen.max(at);
        }
    }
    let leftovers: u64 = tables.iter().map(|t| t.lock().sent_at.len() as u64).sum();
    if transport.reliable() {
        tally.errors.unfinished += leftovers;
    } else {
        tally.errors.lost += leftovers;
    }
    tally.errors.server = server
        .stats()
        .errors
        .load(std::sync::atomic::Ordering::Relaxed);
    let server_echoed = server
        .stats()
        .echoed
        .load(std::sync::atomic::Ordering::Relaxed);
    drop(server);

    let drain_s = drain_end_seen.duration_since(measure_end).as_secs_f64();
    let measured_s = cfg.measured.as_secs_f64();
    let figures = EchoRound {
        round,
        sent: tally.sent,
        warmup_round_trips: tally.warmup_round_trips,
        round_trips: tally.round_trips,
        measured_s,
        drain_s,
        round_trips_per_sec: tally.round_trips as f64 / (measured_s + drain_s),
        rtt: tally.hist.percentiles(),
        cpu_percent,
        server_echoed,
        errors: tally.errors,
    };
    Ok((figures, buffers))
}

async fn join_all(mut set: JoinSet<ClientTally>) -> Result<Vec<ClientTally>, EchoError> {
    let mut out = Vec::with_capacity(set.len());
    while let Some(joined) = set.join_next().await {
        out.push(joined.map_err(|e| EchoError::Task(e.to_string()))?);
    }
    Ok(out)
}

async fn send_loop<C: EchoClient>(
    client: Arc<C>,
    shared: Arc<Shared>,
    id: u32,
    t: Timing,
) -> ClientTally {
    let mut tally = ClientTally::default();
    let mut seq = 0u64;
    loop {
        let permit = tokio::time::timeout_at(t.measure_end.into(), shared.slots.acquire()).await;
        match permit {
            Ok(Ok(p)) => p.forget(),
            _ => break,
        }
        let now = Instant::now();
        if now >= t.measure_end {
            break;
        }
        let phase = if now < t.warm_end {
            Phase::WarmUp
        } else {
            Phase::Measured
        };
        let msg = message::encode(
            Header {
                phase,
                client_id: id,
                seq,
            },
            t.payload,
        );
        shared.lock().sent_at.insert(seq, Instant::now());
        match client.send(msg).await {
            Ok(()) => tally.sent += 1,
            Err(_) => {
                // The slot stays used: a failing transport winds down rather
                // than spinning on errors.
                tally.errors.send += 1;
                shared.lock().sent_at.remove(&seq);
            }
        }
        seq += 1;
    }
    let mut table = shared.lock();
    table.closed = true;
    if table.sent_at.is_empty() {
        shared.drained.notify_one();
    }
    tally
}

async fn recv_loop<C: EchoClient>(
    client: Arc<C>,
    shared: Arc<Shared>,
    id: u32,
    t: Timing,
) -> ClientTally {
    let mut tally = ClientTally::default();
    let mut highest_seq: Option<u64> = None;
    loop {
        let received = tokio::select! {
            biased;
            r = tokio::time::timeout_at(t.drain_end.into(), client.recv()) => r,
            // Nothing is outstanding and nothing more will be sent, so
            // cancelling `recv` loses no message.
            () = shared.drained.notified() => break,
        };
        let msg = match received {
            Err(_elapsed) => {
                tally.errors.drain_timeouts += 1;
                break;
            }
            Ok(Err(_)) => {
                tally.errors.disconnects += 1;
                break;
            }
            Ok(Ok(msg)) => msg,
        };
        let now = Instant::now();
        let header = match message::verify(&msg, t.payload) {
            Ok(h) => h,
            Err(_) => {
                tally.errors.content += 1;
                continue;
            }
        };
        let mut table = shared.lock();
        let sent_at = if header.client_id == id {
            table.sent_at.remove(&header.seq)
        } else {
            None
        };
        let Some(sent_at) = sent_at else {
            tally.errors.unexpected += 1;
            continue;
        };
        let finished = table.closed && table.sent_at.is_empty();
        drop(table);
        shared.slots.add_permits(1);
        if highest_seq.is_some_and(|h| header.seq < h) {
            tally.errors.order += 1;
        }
        highest_seq = highest_seq.max(Some(header.seq));
        match header.phase {
            Phase::WarmUp => tally.warmup_round_trips += 1,
            Phase::Measured => {
                tally.round_trips += 1;
                tally.hist.record(now.duration_since(sent_at));
            }
        }
        if finished {
            break;
        }
    }
    tally.finished_at = Some(Instant::now().min(t.drain_end));
    tally
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn error_kinds_sum_and_name() {
        let e = EchoErrors {
            content: 1,
            lost: 2,
            server: 3,
            ..Default::default()
        };
        assert_eq!(e.total(), 6);
        let m = e.by_kind();
        assert_eq!(m.len(), 9);
        assert_eq!(m["lost"], 2);
    }
}
