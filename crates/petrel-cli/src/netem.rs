//! `petrel netem` (the standalone impairment relay) and `petrel bench netem`.

use std::io::Write;
use std::net::{SocketAddr, ToSocketAddrs};
use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant, SystemTime};

use anyhow::Context;
use petrel_bench::measure::peak_rss_bytes;
use petrel_bench::record::netem::{NetemMode, NetemParameters, NetemRound};
use petrel_bench::record::{ResultRecord, Spread};
use petrel_netem::bench::{AccuracyConfig, CeilingConfig};
use petrel_netem::{BurstLoss, GilbertElliott, LinkStats, Profile, Relay, RelayConfig, RelayStats};
use serde::Serialize;

use crate::args::{millis, percent, seconds, FullRange, Quoted, Whole};

/// Relay UDP between clients and one server, impairing each client's traffic (one
/// route and one upstream socket per client address). Percentages are 0–100; rates
/// take k/m/g suffixes (`200mbit`, `1g`) or plain bit/s. Flags override the profile.
#[derive(Debug, clap::Args)]
pub struct NetemArgs {
    /// Address clients send to, e.g. 127.0.0.1:4000.
    #[arg(long, value_parser = Quoted(resolve))]
    listen: SocketAddr,
    /// The server's address, e.g. 127.0.0.1:5000.
    #[arg(long, value_parser = Quoted(resolve))]
    upstream: SocketAddr,
    /// Starting conditions: none, random, burst, soak, p2p.
    #[arg(long, default_value = "none", value_parser = Quoted(parse_profile))]
    profile: Profile,
    /// Random loss per packet, percent.
    #[arg(long, value_name = "PCT", value_parser = Quoted(percent), allow_negative_numbers = true)]
    loss: Option<f64>,
    /// Periodic burst loss: drop K consecutive packets of every N.
    #[arg(long, value_name = "K/N", value_parser = Quoted(parse_burst))]
    burst: Option<BurstLoss>,
    /// Gilbert–Elliott loss, percent: p(good→bad),p(bad→good),loss in good,loss in bad.
    #[arg(long, value_name = "P,R,GOOD,BAD", value_parser = Quoted(parse_gilbert))]
    gilbert: Option<GilbertElliott>,
    /// One-way delay, ms.
    #[arg(long, value_name = "MS", value_parser = Quoted(millis), allow_negative_numbers = true)]
    delay: Option<Duration>,
    /// Jitter (uniform ±), ms.
    #[arg(long, value_name = "MS", value_parser = Quoted(millis), allow_negative_numbers = true)]
    jitter: Option<Duration>,
    /// Duplication per packet, percent.
    #[arg(long, value_name = "PCT", value_parser = Quoted(percent), allow_negative_numbers = true)]
    duplicate: Option<f64>,
    /// Share of packets delayed by --reorder-delay extra, percent.
    #[arg(long, value_name = "PCT", value_parser = Quoted(percent), allow_negative_numbers = true)]
    reorder: Option<f64>,
    /// Extra delay of reordered packets, ms.
    #[arg(long, value_name = "MS", value_parser = Quoted(millis), allow_negative_numbers = true)]
    reorder_delay: Option<Duration>,
    /// Bandwidth (serialization rate), bit/s with optional k/m/g suffix.
    #[arg(long, value_name = "RATE", value_parser = Quoted(parse_rate), allow_negative_numbers = true)]
    rate: Option<u64>,
    /// Drop-tail queue limit, packets.
    #[arg(long, value_name = "PACKETS", value_parser = Whole::<u32>::new(1, u32::MAX))]
    queue_packets: Option<u32>,
    /// Drop-tail queue limit, bytes.
    #[arg(long, value_name = "BYTES", value_parser = Whole::<u32>::new(1, u32::MAX))]
    queue_bytes: Option<u32>,
    /// Most bytes one route holds (default 8 MiB).
    #[arg(long, value_name = "BYTES", value_parser = Whole::<u32>::new(1, u32::MAX))]
    capacity_bytes: Option<u32>,
    /// Most packets one route holds (default 8192).
    #[arg(long, value_name = "PACKETS", value_parser = Whole::<u32>::new(1, u32::MAX))]
    capacity_packets: Option<u32>,
    /// Most client addresses served at once.
    #[arg(long, default_value_t = 1024, value_parser = Whole::<u32>::new(1, 65536))]
    max_routes: u32,
    /// Seed of every route's random streams.
    #[arg(long, default_value_t = 42, value_parser = u64::full_range())]
    seed: u64,
    /// Remove a route after S seconds without traffic (0 = never).
    #[arg(long, value_name = "S", default_value = "60", value_parser = Quoted(idle_timeout))]
    route_idle_timeout: Duration,
    /// Stop sleeping this long before a deadline and poll instead, µs: covers the
    /// wake-up overshoot; costs up to this much CPU per deadline with sparse traffic.
    #[arg(long, default_value_t = 100, value_parser = Whole::<u64>::new(0, 10_000))]
    spin_us: u64,
    /// Print counters every S seconds (and rewrite --json).
    #[arg(long, value_name = "S", value_parser = Quoted(seconds))]
    stats_interval: Option<Duration>,
    /// Write the final counters as JSON to FILE ("-" for stdout).
    #[arg(long, value_name = "FILE")]
    json: Option<PathBuf>,
}

fn resolve(s: &str) -> Result<SocketAddr, String> {
    s.to_socket_addrs()
        .map_err(|e| format!("{e}"))?
        .next()
        .ok_or_else(|| "no address".to_owned())
}

fn parse_profile(s: &str) -> Result<Profile, String> {
    s.parse()
        .map_err(|e: petrel_netem::UnknownProfile| e.to_string())
}

/// Seconds, where 0 means "never".
fn idle_timeout(s: &str) -> Result<Duration, String> {
    if s.trim_end_matches('s') == "0" {
        Ok(Duration::ZERO)
    } else {
        seconds(s)
    }
}

fn parse_burst(s: &str) -> Result<BurstLoss, String> {
    let (k, n) = s.split_once('/').ok_or("expected K/N, e.g. 3/100")?;
    let k: u32 = k.trim().parse().map_err(|_| "K is not a whole number")?;
    let n: u32 = n.trim().parse().map_err(|_| "N is not a whole number")?;
    if n == 0 || k > n {
        return Err("need 0 <= K <= N and N >= 1".to_owned());
    }
    Ok(BurstLoss { k, n })
}

fn parse_gilbert(s: &str) -> Result<GilbertElliott, String> {
    let v = s.split(',').map(percent).collect::<Result<Vec<_>, _>>()?;
    match v[..] {
        [p, r, good, bad] => Ok(GilbertElliott {
            p_good_to_bad: p,
            p_bad_to_good: r,
            loss_good: good,
            loss_bad: bad,
        }),
        _ => Err("expected four percentages: P,R,GOOD,BAD".to_owned()),
    }
}

fn parse_rate(s: &str) -> Result<u64, String> {
    let lower = s.to_ascii_lowercase();
    let t = lower
        .trim_end_matches("bit/s")
        .trim_end_matches("bps")
        .trim_end_matches("bit");
    let (num, mult) = match t.chars().last() {
        Some('k') => (&t[..t.len() - 1], 1e3),
        Some('m') => (&t[..t.len() - 1], 1e6),
        Some('g') => (&t[..t.len() - 1], 1e9),
        _ => (t, 1.0),
    };
    let v: f64 = num.parse().map_err(|_| "not a rate, e.g. 200mbit")?;
    let bps = v * mult;
    if bps.is_finite() && (1.0..=1e12).contains(&bps) {
        Ok(bps.round() as u64)
    } else {
        Err("must be between 1 bit/s and 1000 Gbit/s".to_owned())
    }
}

fn relay_config(a: &NetemArgs) -> RelayConfig {
    let mut link = a.profile.link();
    link.random_loss = a.loss.unwrap_or(link.random_loss);
    link.burst = a.burst.or(link.burst);
    link.gilbert = a.gilbert.or(link.gilbert);
    link.delay = a.delay.unwrap_or(link.delay);
    link.jitter = a.jitter.unwrap_or(link.jitter);
    link.duplicate = a.duplicate.unwrap_or(link.duplicate);
    link.reorder = a.reorder.unwrap_or(link.reorder);
    link.reorder_delay = a.reorder_delay.unwrap_or(link.reorder_delay);
    link.rate_bps = a.rate.or(link.rate_bps);
    link.queue_packets = a.queue_packets.map(|q| q as usize).or(link.queue_packets);
    link.queue_bytes = a.queue_bytes.map(|q| q as usize).or(link.queue_bytes);
    let mut cfg = RelayConfig::new(a.listen, a.upstream);
    cfg.route = petrel_netem::RouteConfig::symmetric(link);
    if let Some(b) = a.capacity_bytes {
        cfg.route.capacity.bytes = b as usize;
    }
    if let Some(p) = a.capacity_packets {
        cfg.route.capacity.packets = p as usize;
    }
    cfg.seed = a.seed;
    cfg.max_routes = a.max_routes as usize;
    cfg.route_idle_timeout = Some(a.route_idle_timeout).filter(|t| !t.is_zero());
    cfg.spin = Duration::from_micros(a.spin_us);
    cfg
}

fn direction_line(s: &LinkStats) -> String {
    let d = &s.dropped;
    format!(
        "in={} fwd={} drop[random={} burst={} gilbert={} queue={} capacity={}] dup={} reord={} loss={:.2}% qpeak={}p/{}B",
        s.in_packets, s.forwarded_packets, d.random, d.burst, d.gilbert, d.queue, d.capacity,
        s.duplicated, s.reordered, s.observed_loss() * 100.0, s.queue_peak_packets, s.queue_peak_bytes
    )
}

fn print_stats(s: &RelayStats) {
    eprintln!(
        "[{:.1}s] routes={} expired={} rejected={} lateness p50={:.0}µs p99={:.0}µs max={:.0}µs",
        s.uptime_ms / 1e3,
        s.routes.len(),
        s.routes_expired,
        s.routes_rejected,
        s.lateness.p50_us,
        s.lateness.p99_us,
        s.lateness.max_us
    );
    eprintln!("  upstream   {}", direction_line(&s.upstream_total));
    eprintln!("  downstream {}", direction_line(&s.downstream_total));
    // Per-route lines only while they stay readable; the JSON always has every route.
    if (2..=8).contains(&s.routes.len()) {
        for r in &s.routes {
            eprintln!("  route {} {}", r.index, r.client);
            eprintln!("    upstream   {}", direction_line(&r.upstream.stats));
            eprintln!("    downstream {}", direction_line(&r.downstream.stats));
        }
    }
}

fn write_json(path: &PathBuf, value: &impl Serialize) -> anyhow::Result<()> {
    let text = serde_json::to_string_pretty(value)?;
    if path.as_os_str() == "-" {
        writeln!(std::io::stdout(), "{text}")?;
    } else {
        std::fs::write(path, text + "\n").with_context(|| format!("writing {}", path.display()))?;
    }
    Ok(())
}

#[derive(Serialize)]
struct RelayReport<'a> {
    schema_version: u32,
    command: Vec<String>,
    start_time: String,
    profile: Profile,
    seed: u64,
    route: &'a petrel_netem::RouteConfig,
    stats: &'a RelayStats,
}

/// Runs the relay until SIGINT/SIGTERM, then prints (and writes) the final counters.
/// Exit code 2 for a configuration error.
pub fn run(args: NetemArgs) -> anyhow::Result<ExitCode> {
    let cfg = relay_config(&args);
    if let Err(e) = cfg.validate() {
        eprintln!("error: {e}");
        return Ok(ExitCode::from(2));
    }
    if let Err(e) = crate::args::check_json_target(args.json.as_deref()) {
        eprintln!("error: {e}");
        return Ok(ExitCode::from(2));
    }
    let stop = Arc::new(AtomicBool::new(false));
    for sig in [signal_hook::consts::SIGINT, signal_hook::consts::SIGTERM] {
        signal_hook::flag::register(sig, Arc::clone(&stop)).context("installing signal handler")?;
    }
    let start_time = humantime::format_rfc3339_seconds(SystemTime::now()).to_string();
    let relay = Relay::start(cfg.clone())?;
    eprintln!(
        "petrel netem: {} -> {} profile={} seed={} (Ctrl-C to stop)",
        relay.local_addr(),
        cfg.upstream,
        args.profile,
        cfg.seed
    );
    let save = |path: &PathBuf, stats: &RelayStats| {
        let report = RelayReport {
            schema_version: 1,
            command: std::env::args().collect(),
            start_time: start_time.clone(),
            profile: args.profile,
            seed: cfg.seed,
            route: &cfg.route,
            stats,
        };
        write_json(path, &report)
    };
    let mut next = args.stats_interval.map(|i| Instant::now() + i);
    while !stop.load(Ordering::SeqCst) {
        std::thread::sleep(Duration::from_millis(50));
        if let (Some(at), Some(every)) = (next, args.stats_interval) {
            if Instant::now() >= at {
                let s = relay.stats();
                print_stats(&s);
                if let Some(path) = &args.json {
                    if path.as_os_str() != "-" {
                        save(path, &s)?;
                    }
                }
                next = Some(at + every);
            }
        }
    }
    let last = relay.stop()?;
    eprintln!("petrel netem: stopped; final counters:");
    print_stats(&last);
    if let Some(path) = &args.json {
        save(path, &last)?;
    }
    Ok(ExitCode::SUCCESS)
}

/// Measures the relay: forwarding ceiling (no impairment) and delay accuracy.
#[derive(Debug, clap::Args)]
pub struct NetemBenchArgs {
    /// Which measurement(s) to run.
    #[arg(long, value_enum, default_value = "both")]
    mode: BenchMode,
    /// Ceiling: measured seconds.
    #[arg(long, default_value = "5", value_parser = Quoted(seconds))]
    ceiling_seconds: Duration,
    /// Ceiling: UDP payload, bytes.
    #[arg(long, default_value_t = 1200, value_parser = Whole::<u16>::new(16, 65507))]
    payload: u16,
    /// Ceiling: datagrams in flight.
    #[arg(long, default_value_t = 512, value_parser = Whole::<u32>::new(1, 65536))]
    window: u32,
    /// Datagrams per recvmmsg/sendmmsg call (1 = unbatched), generator and relay.
    #[arg(long, default_value_t = 32, value_parser = Whole::<u16>::new(1, 1024))]
    batch: u16,
    /// Accuracy: offered datagrams per second.
    #[arg(long, default_value_t = 100_000, value_parser = Whole::<u64>::new(1, 10_000_000))]
    pps: u64,
    /// Accuracy: configured one-way delay, ms.
    #[arg(long, default_value = "10", value_parser = Quoted(millis), allow_negative_numbers = true)]
    delay: Duration,
    /// Accuracy: UDP payload, bytes.
    #[arg(long, default_value_t = 200, value_parser = Whole::<u16>::new(16, 65507))]
    accuracy_payload: u16,
    /// Accuracy: the relay stops sleeping this long before a deadline and polls, µs.
    #[arg(long, default_value_t = 100, value_parser = Whole::<u64>::new(0, 10_000))]
    spin_us: u64,
    /// Accuracy: measured seconds.
    #[arg(long, default_value = "3", value_parser = Quoted(seconds))]
    accuracy_seconds: Duration,
    /// Write results as JSON to FILE ("-" for stdout).
    #[arg(long, value_name = "FILE")]
    json: Option<PathBuf>,
}

fn mode_name(mode: BenchMode) -> &'static str {
    match mode {
        BenchMode::Ceiling => "ceiling",
        BenchMode::Accuracy => "accuracy",
        BenchMode::Both => "both",
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
enum BenchMode {
    Ceiling,
    Accuracy,
    Both,
}

impl From<BenchMode> for NetemMode {
    fn from(mode: BenchMode) -> Self {
        match mode {
            BenchMode::Ceiling => NetemMode::Ceiling,
            BenchMode::Accuracy => NetemMode::Accuracy,
            BenchMode::Both => NetemMode::Both,
        }
    }
}

/// `petrel bench netem`: runs the measurements, prints a summary, writes JSON.
/// Exit code 0 when every measurement ran and moved traffic, 1 otherwise.
pub fn run_bench(args: NetemBenchArgs) -> anyhow::Result<ExitCode> {
    if let Err(e) = crate::args::check_json_target(args.json.as_deref()) {
        eprintln!("error: {e}");
        return Ok(ExitCode::from(2));
    }
    let loadavg_at_start = petrel_sys::proc::loadavg_line();
    let batch = usize::from(args.batch);
    let ceiling_cfg = CeilingConfig {
        payload: usize::from(args.payload),
        duration: args.ceiling_seconds,
        window: args.window as usize,
        batch,
    };
    let accuracy_cfg = AccuracyConfig {
        pps: args.pps,
        payload: usize::from(args.accuracy_payload),
        delay: args.delay,
        duration: args.accuracy_seconds,
        batch,
        spin_us: args.spin_us,
    };
    let mut ok = true;
    let ceiling = if args.mode != BenchMode::Accuracy {
        let r = petrel_netem::bench::forwarding_ceiling(&ceiling_cfg)?;
        eprintln!(
            "ceiling: {:.0} pps, {:.3} Gbit/s of {} B datagrams over {:.1} s (sent {}, lost {}, batch {}, \
             CPU {:.2} s of which relay thread {:.2} s = {:.0} pps per relay core)",
            r.pps, r.gbit_per_s, ceiling_cfg.payload, r.seconds, r.sent, r.lost, batch, r.cpu_seconds,
            r.relay.thread_cpu_ms / 1e3,
            r.relay.upstream_total.forwarded_packets as f64 / (r.relay.thread_cpu_ms / 1e3).max(1e-9)
        );
        ok &= r.received > 0;
        Some(r)
    } else {
        None
    };
    let delay_accuracy = if args.mode != BenchMode::Ceiling {
        let r = petrel_netem::bench::delay_accuracy(&accuracy_cfg)?;
        let (l, e) = (&r.relay_lateness, &r.end_to_end_excess);
        eprintln!(
            "delay accuracy at {:.0} pps, {} ms: relay lateness p50={:.1}µs p99={:.1}µs max={:.1}µs; \
             end-to-end excess p50={:.1}µs p99={:.1}µs max={:.1}µs (received {}/{}, CPU {:.2} s)",
            r.offered_pps, accuracy_cfg.delay.as_millis(), l.p50_us, l.p99_us, l.max_us,
            e.p50_us, e.p99_us, e.max_us, r.received, r.sent, r.cpu_seconds
        );
        ok &= r.received > 0;
        Some(r)
    } else {
        None
    };
    let parameters = NetemParameters {
        mode: args.mode.into(),
        ceiling: ceiling_cfg,
        accuracy: accuracy_cfg,
        loadavg_at_start,
    };
    let mut record = ResultRecord::begin(
        "netem",
        &format!("netem-{}", mode_name(args.mode)),
        &parameters,
    )?;
    let headline = [
        ("ceiling_pps", ceiling.as_ref().map(|c| c.pps)),
        ("ceiling_gbit_per_s", ceiling.as_ref().map(|c| c.gbit_per_s)),
        (
            "relay_lateness_p99_us",
            delay_accuracy.as_ref().map(|a| a.relay_lateness.p99_us),
        ),
        (
            "end_to_end_excess_p99_us",
            delay_accuracy.as_ref().map(|a| a.end_to_end_excess.p99_us),
        ),
    ];
    for (key, value) in headline {
        if let Some(spread) = value.and_then(|v| Spread::of(&[v])) {
            record.summary.insert(key.to_owned(), spread);
        }
    }
    let silent = |received: Option<u64>| u64::from(received == Some(0));
    record.errors.insert(
        "ceiling_no_traffic".to_owned(),
        silent(ceiling.as_ref().map(|c| c.received)),
    );
    record.errors.insert(
        "accuracy_no_traffic".to_owned(),
        silent(delay_accuracy.as_ref().map(|a| a.received)),
    );
    record.push_round(&NetemRound {
        ceiling,
        delay_accuracy,
    })?;
    record.peak_rss_bytes = peak_rss_bytes();
    record.ok = ok;
    if let Some(path) = &args.json {
        write_json(path, &record)?;
    }
    Ok(if ok {
        ExitCode::SUCCESS
    } else {
        ExitCode::FAILURE
    })
}
