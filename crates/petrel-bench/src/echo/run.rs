//! The echo run loop: per client a sender task and a receiver task sharing a
//! bounded in-flight table, plus the measurement around them.

use std::collections::HashMap;
use std::future::Future;
use std::io;
use std::net::SocketAddr;
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::time::Instant;

use tokio::runtime::Handle;
use tokio::sync::{Notify, Semaphore};
use tokio::task::JoinSet;

use super::message::{self, Header, Phase};
use super::report::{EchoError, EchoReport};
use super::{EchoClient, EchoConfig, EchoTransport, SocketBuffers, DRAIN_LIMIT};
use crate::measure::{endpoint_io, peak_rss_bytes, CpuSample, LatencyHistogram};
use crate::record::echo::{EchoErrors, EchoIoModel, EchoParameters, EchoRound};
use crate::record::{RecordError, ResultRecord, ServerClientBuffers, Spread};

/// What an echo run does beyond [`EchoConfig`].
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct EchoOptions {
    /// Work rounds the server does per echo ([`super::work`]), 0..=[`super::work::MAX_WORK`].
    pub work: u32,
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
    run_echo_with(transport, cfg, case, EchoOptions::default()).await
}

/// [`run_echo`] with [`EchoOptions`] (the server's work per echo), every
/// task on the current tokio runtime (the `shared` I/O model).
///
/// # Errors
/// As [`run_echo`].
pub async fn run_echo_with<T: EchoTransport>(
    transport: &T,
    cfg: &EchoConfig,
    case: &str,
    opts: EchoOptions,
) -> Result<EchoReport, EchoError> {
    let connect = |addr: SocketAddr, id: u32| transport.connect(addr, id);
    run(transport, cfg, case, opts, connect, &[]).await
}

/// [`run_echo_with`] in the `sharded` I/O model: the server and the harness's
/// timing run on the current (current-thread) runtime, the clients (their
/// sockets, connection tasks, and the harness's send and receive tasks) on
/// `shards` single-thread runtimes, client `i` on shard `i % shards.len()`.
/// The transport is cloned into each shard to connect there, so a socket is
/// registered with the shard's reactor.
///
/// # Errors
/// As [`run_echo`]; [`EchoError::Task`] if a shard's connect task fails.
pub async fn run_echo_sharded<T: EchoTransport + Clone + 'static>(
    transport: &T,
    cfg: &EchoConfig,
    case: &str,
    opts: EchoOptions,
    shards: &[Handle],
) -> Result<EchoReport, EchoError> {
    let connect = |addr: SocketAddr, id: u32| {
        let t = transport.clone();
        let shard = shards.get(id as usize % shards.len().max(1)).cloned();
        async move {
            match shard {
                Some(shard) => shard
                    .spawn(async move { t.connect(addr, id).await })
                    .await
                    .map_err(io::Error::other)?,
                None => t.connect(addr, id).await,
            }
        }
    };
    run(transport, cfg, case, opts, connect, shards).await
}

async fn run<T, F, Fut>(
    transport: &T,
    cfg: &EchoConfig,
    case: &str,
    opts: EchoOptions,
    mut connect: F,
    shards: &[Handle],
) -> Result<EchoReport, EchoError>
where
    T: EchoTransport,
    F: FnMut(SocketAddr, u32) -> Fut,
    Fut: Future<Output = io::Result<T::Client>>,
{
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
        peer: transport.peer().map(str::to_owned),
        io_model: if shards.is_empty() {
            EchoIoModel::Shared
        } else {
            EchoIoModel::Sharded
        },
        shards: shards.len(),
        work: opts.work.min(super::work::MAX_WORK),
    };
    let mut record = ResultRecord::begin("echo", case, &params)?;
    let mut rounds = Vec::new();
    let mut totals = EchoErrors::default();
    for round in 0..cfg.rounds {
        let (figures, buffers) =
            run_round(transport, cfg, round, opts, &mut connect, shards).await?;
        record.socket_buffers = record.socket_buffers.or(buffers);
        totals.add(&figures.errors);
        record.push_round(&figures)?;
        rounds.push(figures);
    }
    if let Some(tls) = transport.tls_session() {
        // Known only once a client has connected: recorded after the rounds.
        let value = serde_json::to_value(&tls).map_err(|source| RecordError::Serialize {
            what: "parameters",
            source,
        })?;
        if let Some(obj) = record.parameters.as_object_mut() {
            obj.insert("tls".into(), value);
        }
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

/// Submission time and phase of one client's outstanding messages, keyed by
/// sequence. At most `window` entries: the sender inserts only with a permit.
struct Inflight {
    sent_at: HashMap<u64, (Instant, Phase)>,
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

async fn run_round<T, F, Fut>(
    transport: &T,
    cfg: &EchoConfig,
    round: u32,
    opts: EchoOptions,
    connect: &mut F,
    shards: &[Handle],
) -> Result<(EchoRound, Option<ServerClientBuffers>), EchoError>
where
    T: EchoTransport,
    F: FnMut(SocketAddr, u32) -> Fut,
    Fut: Future<Output = io::Result<T::Client>>,
{
    let setup = |what: String| move |source| EchoError::Setup { what, source };
    let server = transport
        .start_server()
        .await
        .map_err(setup(format!("start {} echo server", transport.name())))?;
    server.stats().work.set(opts.work);
    let mut clients = Vec::with_capacity(cfg.clients);
    for id in 0..cfg.clients {
        // `validate` bounds clients to 1024, so the id fits.
        let id = u32::try_from(id).unwrap_or(u32::MAX);
        let client = connect(server.local_addr(), id)
            .await
            .map_err(setup(format!("connect {} client {id}", transport.name())))?;
        clients.push((id, Arc::new(client)));
    }
    let requested = transport.requested_buffers();
    let buffers = match (
        server.socket_buffers(),
        clients.first().and_then(|c| c.1.socket_buffers()),
    ) {
        // The record states what the transport asked for (an adapter that
        // only reads its socket back reports nothing requested).
        (Some(s), Some(c)) => {
            let asked = |b: SocketBuffers| SocketBuffers {
                send_requested: requested.send,
                recv_requested: requested.recv,
                ..b
            };
            Some(ServerClientBuffers {
                server: asked(s),
                client: asked(c),
            })
        }
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
        let sender = send_loop(Arc::clone(&client), Arc::clone(&shared), id, timing);
        let receiver = recv_loop(client, shared, id, timing);
        match shards.get(id as usize % shards.len().max(1)) {
            Some(shard) => {
                senders.spawn_on(sender, shard);
                receivers.spawn_on(receiver, shard);
            }
            None => {
                senders.spawn(sender);
                receivers.spawn(receiver);
            }
        }
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
    let server_io = server
        .endpoint_stats()
        .map(|stats| endpoint_io(&stats, 2 * server_echoed));
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
        server_io,
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
        shared.lock().sent_at.insert(seq, (Instant::now(), phase));
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
    // One timer for the whole run rather than one per received message.
    let drain_limit = tokio::time::sleep_until(t.drain_end.into());
    tokio::pin!(drain_limit);
    loop {
        let received = tokio::select! {
            biased;
            r = client.recv() => r,
            // Nothing is outstanding and nothing more will be sent, so
            // cancelling `recv` loses no message.
            () = shared.drained.notified() => break,
            () = &mut drain_limit => {
                tally.errors.drain_timeouts += 1;
                break;
            }
        };
        let msg = match received {
            Err(_) => {
                tally.errors.disconnects += 1;
                break;
            }
            Ok(msg) => msg,
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
        let entry = if header.client_id == id {
            table.sent_at.get(&header.seq).copied()
        } else {
            None
        };
        let Some((sent_at, phase)) = entry else {
            tally.errors.unexpected += 1;
            continue;
        };
        if phase != header.phase {
            // Like a body mismatch: the message stays outstanding.
            tally.errors.content += 1;
            continue;
        }
        table.sent_at.remove(&header.seq);
        let finished = table.closed && table.sent_at.is_empty();
        drop(table);
        shared.slots.add_permits(1);
        if highest_seq.is_some_and(|h| header.seq < h) {
            tally.errors.order += 1;
        }
        highest_seq = highest_seq.max(Some(header.seq));
        match phase {
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
