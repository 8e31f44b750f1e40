//! RUDP under impairment (`specs/benchmarks.md` §B): the §A echo harness over Petrel
//! RUDP, every datagram passing through the `petrel-netem` relay.
//!
//! Each round starts a fresh relay (seeded `seed + round`, on its own thread), a RUDP
//! echo server behind it and the clients, runs [`crate::echo::run_echo`]
//! for one round, then reads the counters of every endpoint and connection and
//! stops the relay. Per round it records, beyond the echo figures: network
//! overhead = (UDP payload bytes sent by all endpoints / application bytes both
//! ways − 1) × 100 %; ARQ retransmissions per 1000 round trips; the relay's
//! measured loss next to the configured one; the most bytes one route held at once;
//! peak RSS. Endpoint and connection counters cover the whole round (handshake,
//! warm-up, measured interval and drain), so the per-round-trip ratios divide by all
//! round trips of the round, warm-up included.
//!
//! Unlike the loopback suite, this benchmark builds its own tokio runtimes, because
//! the runtime layout (`--io-model`) is one of its parameters.
//!
//! With FEC ([`FecMode::Fixed`] or [`FecMode::Adaptive`], set on every endpoint's
//! `EndpointConfig::fec`) it also records shards recovered per 1000 round trips,
//! unrecoverable groups, parity sent, the largest parity observed, adaptive policy
//! changes, and the FEC retained bytes of all connections sampled every 100 ms
//! (peak) next to the exact per-connection peak.
//!
//! [`run_kcptun_bench`] runs the same echo, relay, profile and seeds with kcptun
//! (kcp-go) as the peer: TCP clients ⇄ `kcptun-client` ⇄ relay ⇄ `kcptun-server`
//! ⇄ TCP echo, kcptun tuned like Petrel ([`kcptun`]).

mod config;
pub mod kcptun;
mod report;
mod transport;

use petrel::EndpointConfig;
use petrel_netem::RelayConfig;
use tokio::runtime::{Builder, Runtime};

pub use crate::record::rudp::{
    FecFigures, KcpSummary, KcptunParameters, KcptunRound, KcptunTuning, RelayFigures,
    RudpParameters, RudpRound,
};
pub use config::{
    FecMode, FecShape, FecShapeError, IoModel, LinkOverrides, RudpBenchConfig, RudpConfigError,
    RudpPeer, MAX_IO_THREADS,
};
pub use kcptun::{run_kcptun_bench, KcptunBenchError, KcptunBenchReport};
pub use report::RudpBenchReport;

use crate::echo::shards::Shards;
use crate::echo::udp::{DEFAULT_RECV_BUFFER, DEFAULT_SEND_BUFFER};
use crate::echo::{run_echo, BufferRequest, EchoConfig, EchoError, EchoErrors, DRAIN_LIMIT};
use crate::measure::peak_rss_bytes;
use crate::record::{RecordError, ResultRecord, Spread};
use transport::ImpairedRudp;

/// Why a run could not produce a result (as opposed to a result that is not `ok`).
#[derive(Debug, thiserror::Error)]
pub enum RudpBenchError {
    /// The configuration cannot run.
    #[error(transparent)]
    Config(#[from] RudpConfigError),
    /// The tokio runtimes could not be built.
    #[error("cannot start a tokio runtime: {0}")]
    Runtime(std::io::Error),
    /// The echo harness failed to set up or a task failed.
    #[error(transparent)]
    Echo(#[from] EchoError),
    /// The relay stopped with an error.
    #[error("relay failed: {0}")]
    Relay(std::io::Error),
    /// The result could not be recorded.
    #[error(transparent)]
    Record(#[from] RecordError),
}

/// Case name, e.g. `rudp-random-arq-1024B-4x16`, `rudp-burst-fec-fixed-10+3-1024B-4x16`
/// (a fixed shape other than 8+2 is named) or, with kcptun as the peer,
/// `kcptun-random-fec-8+2-1024B-4x16`; a runtime layout other than one
/// current-thread runtime is appended (`-shared2`, `-sharded4`).
pub fn case_name(cfg: &RudpBenchConfig) -> String {
    let shape = cfg.fixed_shape();
    let fec = match (cfg.peer, cfg.fec, shape) {
        (_, FecMode::None, _) => "arq".to_owned(),
        (RudpPeer::Kcptun, _, Some(shape)) => format!("fec-{shape}"),
        (RudpPeer::Petrel, _, Some(shape)) if shape != FecShape::DEFAULT => {
            format!("fec-fixed-{shape}")
        }
        (_, other, _) => format!("fec-{other}"),
    };
    let peer = match cfg.peer {
        RudpPeer::Petrel => "rudp",
        RudpPeer::Kcptun => "kcptun",
    };
    let io = match (cfg.io_model, cfg.io_threads) {
        (IoModel::Shared, 1) => String::new(),
        (IoModel::Shared, n) => format!("-shared{n}"),
        (IoModel::Sharded, n) => format!("-sharded{n}"),
    };
    format!(
        "{peer}-{}-{fec}-{}B-{}x{}{io}",
        cfg.profile, cfg.echo.payload, cfg.echo.clients, cfg.echo.window
    )
}

fn runtime(cfg: &RudpBenchConfig) -> std::io::Result<Runtime> {
    if cfg.io_model == IoModel::Shared && cfg.io_threads > 1 {
        Builder::new_multi_thread()
            .worker_threads(cfg.io_threads)
            .enable_all()
            .build()
    } else {
        Builder::new_current_thread().enable_all().build()
    }
}

/// Runs the benchmark with Petrel: `cfg.echo.rounds` rounds, each with a fresh
/// relay, server and clients. Blocking; builds its own runtimes (do not call it
/// from inside one). `cfg.peer` must be [`RudpPeer::Petrel`] (kcptun runs through
/// [`run_kcptun_bench`]).
///
/// # Errors
/// [`RudpBenchError`] when the configuration is invalid or setup fails. Failures
/// during a round (lost echoes, disconnects, …) are counted and make `ok` false.
pub fn run_rudp_bench(cfg: &RudpBenchConfig) -> Result<RudpBenchReport, RudpBenchError> {
    cfg.validate()?;
    if cfg.peer != RudpPeer::Petrel {
        return Err(RudpConfigError::Field {
            field: "peer",
            value: "kcptun".to_owned(),
            range: "petrel here (kcptun runs through run_kcptun_bench)".to_owned(),
        }
        .into());
    }
    let rt = runtime(cfg).map_err(RudpBenchError::Runtime)?;
    let shards = match cfg.io_model {
        IoModel::Sharded => Some(Shards::start(cfg.io_threads).map_err(RudpBenchError::Runtime)?),
        IoModel::Shared => None,
    };
    let shard_handles = shards
        .as_ref()
        .map_or_else(Vec::new, |s| s.handles().to_vec());
    let defaults = EndpointConfig::default();
    let endpoint = EndpointConfig {
        fec: cfg.fec.config(cfg.fec_shape.unwrap_or(FecShape::DEFAULT)),
        // Every client reaches the server from the relay's address, so the server
        // must admit them all from one IP.
        max_connections_per_ip: defaults.max_connections_per_ip.max(cfg.echo.clients),
        max_connections_per_prefix: defaults.max_connections_per_prefix.max(cfg.echo.clients),
        recv_buffer_budget: defaults
            .recv_buffer_budget
            .max(2 * usize::from(defaults.kcp.rcv_wnd) * defaults.kcp.mtu * cfg.echo.clients),
        ..defaults
    };
    let buffers = BufferRequest {
        send: Some(DEFAULT_SEND_BUFFER),
        recv: Some(DEFAULT_RECV_BUFFER),
    };
    let link = cfg.link();
    let relay_base = RelayConfig {
        route: petrel_netem::RouteConfig::symmetric(link.clone()),
        ..RelayConfig::default()
    };
    let params = RudpParameters {
        payload: cfg.echo.payload,
        clients: cfg.echo.clients,
        window: cfg.echo.window,
        warmup_s: cfg.echo.warmup.as_secs_f64(),
        seconds: cfg.echo.measured.as_secs_f64(),
        drain_limit_s: DRAIN_LIMIT.as_secs_f64(),
        rounds: cfg.echo.rounds,
        io_model: cfg.io_model,
        io_threads: cfg.io_threads,
        fec: cfg.fec,
        fec_shape: cfg.fixed_shape(),
        fec_scheme: format!("{:?}", endpoint.fec.scheme),
        fec_group_wait_ms: endpoint.fec.group_wait.as_secs_f64() * 1e3,
        profile: cfg.profile.name().to_owned(),
        link: link.clone(),
        seed: cfg.seed,
        kcp: KcpSummary::from(&endpoint.kcp),
        relay_socket_buffer: relay_base.socket_buffer,
    };
    let case = case_name(cfg);
    let mut record = ResultRecord::begin("rudp", &case, &params)?;
    let one_round = EchoConfig {
        rounds: 1,
        ..cfg.echo.clone()
    };
    let mut rounds = Vec::new();
    let mut errors = EchoErrors::default();
    for round in 0..cfg.echo.rounds {
        let seed = cfg.round_seed(round);
        record.seeds.push(seed);
        let transport = ImpairedRudp::new(
            endpoint.clone(),
            buffers,
            RelayConfig {
                seed,
                ..relay_base.clone()
            },
            shard_handles.clone(),
        );
        let echo = rt.block_on(async {
            let sampler = tokio::spawn(transport.sample_retained());
            let echo = run_echo(&transport, &one_round, &case).await;
            sampler.abort();
            echo
        })?;
        let (totals, relay) = transport.finish().map_err(RudpBenchError::Relay)?;
        record.socket_buffers = record.socket_buffers.or(echo.record.socket_buffers);
        let relay = relay
            .map(|s| RelayFigures::new(&s, &link))
            .ok_or_else(|| RudpBenchError::Relay(std::io::Error::other("relay never started")))?;
        for mut r in echo.rounds {
            r.round = round;
            errors.add(&r.errors);
            let figures = RudpRound::new(
                seed,
                r,
                cfg.echo.payload,
                totals,
                relay.clone(),
                peak_rss_bytes(),
            );
            record.push_round(&figures)?;
            rounds.push(figures);
        }
    }
    drop(shards);
    summarise(&mut record, &rounds);
    record.errors = errors.by_kind();
    record.peak_rss_bytes = peak_rss_bytes();
    record.ok =
        errors.total() == 0 && !rounds.is_empty() && rounds.iter().all(|r| r.echo.round_trips > 0);
    Ok(RudpBenchReport { record, rounds })
}

fn summarise(record: &mut ResultRecord, rounds: &[RudpRound]) {
    let Some(first) = rounds.first() else {
        return;
    };
    for (i, (key, _)) in first.headline().into_iter().enumerate() {
        let values: Vec<f64> = rounds.iter().filter_map(|r| r.headline()[i].1).collect();
        if let Some(spread) = Spread::of(&values) {
            record.summary.insert(key.to_owned(), spread);
        }
    }
}
