//! `petrel reflector …`: run the DraARLv1 reflector and manage its store, and
//! `petrel bench reflector` (see [`ReflectorBenchArgs`]).

use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::time::Duration;

use anyhow::Context;
use clap::{Args, Subcommand};
use petrel_bench::record::reflector::ReflectorParameters;
use petrel_bench::record::ResultRecord;
use petrel_bench::reflector::{LoadConfig, ServerProcess};
use petrel_reflector::codec::interconnect::Offer;
use petrel_reflector::model::{InterconnectConfig, NodeToken, ServerConfig};
use petrel_reflector::runtime::interconnect::{
    add_edge_node, CentreTrust, EdgeControlConfig, EdgeServer, EdgeServerConfig,
    DEFAULT_CENTRE_UDP_PORT, DEFAULT_SERVER_NAME, HEARTBEAT_INTERVAL,
};
use petrel_reflector::runtime::server::ServerHandle;
use petrel_reflector::runtime::store::{NewUser, Store, StoreOptions};

const DEFAULT_DB: &str = "petrel-reflector.db";

/// DraARLv1 voice reflector.
#[derive(Debug, Args)]
pub struct ReflectorArgs {
    #[command(subcommand)]
    command: ReflectorCommand,
}

#[derive(Debug, Subcommand)]
enum ReflectorCommand {
    /// Run the reflector (creates the SQLite store or the PostgreSQL tables on first start).
    Serve(ServeArgs),
    /// Manage accounts.
    #[command(subcommand)]
    User(UserCommand),
    /// Manage talkgroups.
    #[command(subcommand)]
    Group(GroupCommand),
    /// Manage devices.
    #[command(subcommand)]
    Device(DeviceCommand),
    /// Manage the edge nodes of a centre (draarl-interconnect §3.3).
    #[command(subcommand)]
    Edge(EdgeCommand),
    /// Log one device in to a running reflector by heartbeat and print
    /// the answer: its callsign, or the reject reason (exit 1).
    Login(crate::reflector_login::LoginArgs),
    /// Print a group's text history, newest first.
    Messages {
        #[command(flatten)]
        db: DbArg,
        /// Group id.
        #[arg(long)]
        group: i64,
        /// Messages to show (at most 1000).
        #[arg(long, default_value_t = 20)]
        limit: u32,
    },
}

#[derive(Debug, Args)]
struct ServeArgs {
    /// TOML config file; flags override it. Without it, built-in defaults.
    /// An edge reads only its `[session.endpoints]` (the fan-out admission
    /// rules of its devices).
    #[arg(long)]
    config: Option<PathBuf>,
    /// UDP listen address [default: 0.0.0.0:60050].
    #[arg(long)]
    listen: Option<SocketAddr>,
    /// Store: SQLite file or postgres://user:password@host/db URL
    /// [default: petrel-reflector.db].
    #[arg(long)]
    db: Option<String>,
    /// `centre` (the default: the full reflector; it accepts edges when
    /// `[interconnect] enabled`) or `edge` (no store: serves devices on
    /// --listen with sessions the centre grants, connected to the centre's
    /// control plane with --centre and --node-token, voice to and from the
    /// centre's UDP port --centre-udp).
    #[arg(long, default_value = "centre")]
    role: Role,
    /// HTTP address (GET /metrics, /healthz; a centre also serves its
    /// dashboard and admin API there). Overrides the config's http_listen.
    #[arg(long)]
    http: Option<SocketAddr>,
    /// Edge: the centre's control address, HOST:PORT (e.g. centre.example:60100).
    #[arg(long, required_if_eq("role", "edge"))]
    centre: Option<String>,
    /// Edge: the node token `petrel reflector edge add` printed. Visible in
    /// the process list: prefer --node-token-file.
    #[arg(long, conflicts_with = "node_token_file")]
    node_token: Option<String>,
    /// Edge: a file whose first line is the node token.
    #[arg(long)]
    node_token_file: Option<PathBuf>,
    /// Edge: PEM CA certificates to verify the centre with, for a token
    /// without a certificate pin (a centre with configured certificates).
    #[arg(long)]
    centre_ca: Option<PathBuf>,
    /// Edge: the TLS server name checked with --centre-ca.
    #[arg(long, default_value = DEFAULT_SERVER_NAME)]
    centre_name: String,
    /// Edge: the centre's UDP address for voice and the DataBind proof,
    /// HOST:PORT [default: the --centre host, port 60050].
    #[arg(long)]
    centre_udp: Option<String>,
    /// Edge: seconds without a packet before a device session ends
    /// (DeviceSessionTimeoutSeconds).
    #[arg(long, default_value_t = 20, value_parser = clap::value_parser!(u64).range(5..=300))]
    device_timeout_secs: u64,
    /// Edge: renew a grant this many seconds before it ends
    /// (GrantRenewBeforeSeconds).
    #[arg(long, default_value_t = 30, value_parser = clap::value_parser!(u64).range(5..=90))]
    renew_before_secs: u64,
    /// Edge: seconds the devices keep talking locally after the centre is
    /// lost (DisconnectedLocalGraceSeconds).
    #[arg(long, default_value_t = 15, value_parser = clap::value_parser!(u64).range(5..=120))]
    local_grace_secs: u64,
    /// Edge: fan-out send threads [default: CPUs, 2 to 8].
    #[arg(long, value_parser = clap::value_parser!(u64).range(1..=32))]
    writers: Option<u64>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
enum Role {
    /// The full reflector.
    Centre,
    /// An edge of a centre.
    Edge,
}

#[derive(Debug, Subcommand)]
enum EdgeCommand {
    /// Add an edge node and print its node token (once: only its hash is
    /// stored). The token pins the centre's certificate: the generated one
    /// kept in the store, or `[interconnect] tls_cert_file` of --config.
    Add {
        #[command(flatten)]
        db: DbArg,
        /// Node id: 1-32 characters of A-Z a-z 0-9 _ - (not `center`)
        /// [default: edge- and 24 random hex digits].
        name: Option<String>,
        /// The centre's config file, for its `[interconnect]` section
        /// (certificate files, max_nodes).
        #[arg(long)]
        config: Option<PathBuf>,
    },
    /// List the edge nodes.
    List {
        #[command(flatten)]
        db: DbArg,
    },
    /// Remove an edge node (its token stops working at its next connect).
    Remove {
        #[command(flatten)]
        db: DbArg,
        /// Node id.
        name: String,
    },
    /// Disable or enable an edge node (a disabled node is refused).
    Disable {
        #[command(flatten)]
        db: DbArg,
        /// Node id.
        name: String,
        /// `false` to enable it again.
        #[arg(long, action = clap::ArgAction::Set, default_value_t = true)]
        disabled: bool,
    },
}

#[derive(Debug, Args)]
struct DbArg {
    /// Store: SQLite file or postgres://user:password@host/db URL.
    #[arg(long, default_value = DEFAULT_DB)]
    db: String,
}

#[derive(Debug, Subcommand)]
enum UserCommand {
    /// Create an account with its device password.
    Add {
        #[command(flatten)]
        db: DbArg,
        /// Account name (the username devices send).
        #[arg(long)]
        name: String,
        /// Callsign written into replies and forwarded packets.
        #[arg(long)]
        callsign: String,
        /// Device password, 6-10 characters [A-Za-z0-9].
        #[arg(long)]
        device_password: String,
        /// DMR ID (24 bits).
        #[arg(long, default_value_t = 0)]
        dmrid: u32,
        /// Group new devices join [default: the store's public group].
        #[arg(long)]
        default_group: Option<i64>,
        /// Web/app login password (bcrypt; separate from the device
        /// password). Without it the account cannot log in to the apps until
        /// `user passwd` sets one.
        #[arg(long)]
        password: Option<String>,
        /// Give the account the admin role (every group is usable, approval
        /// not needed on approved routes).
        #[arg(long)]
        admin: bool,
    },
    /// Set an account's web/app login password, read from `--password` or,
    /// without it, from the first line of standard input (never echoed).
    Passwd {
        #[command(flatten)]
        db: DbArg,
        /// Account name.
        name: String,
        /// New web password (1-72 bytes); prefer standard input, which keeps
        /// it out of the process list and shell history.
        #[arg(long)]
        password: Option<String>,
    },
    /// Replace an account's device password.
    Password {
        #[command(flatten)]
        db: DbArg,
        /// Account name.
        #[arg(long)]
        name: String,
        /// New device password.
        #[arg(long)]
        device_password: String,
    },
}

#[derive(Debug, Subcommand)]
enum GroupCommand {
    /// Create a talkgroup; prints its id.
    Add {
        #[command(flatten)]
        db: DbArg,
        /// Group name.
        #[arg(long)]
        name: String,
        /// A virtual group whose links join other groups into one domain.
        #[arg(long = "virtual")]
        is_virtual: bool,
        /// Fixed id [default: next free].
        #[arg(long)]
        id: Option<i64>,
    },
    /// Link a group into a virtual group (their members hear each other).
    Link {
        #[command(flatten)]
        db: DbArg,
        /// Virtual link group id.
        #[arg(long)]
        link: i64,
        /// Target group id.
        #[arg(long)]
        target: i64,
    },
    /// Enable or disable a group.
    Enable {
        #[command(flatten)]
        db: DbArg,
        /// Group id.
        #[arg(long)]
        id: i64,
        /// `true` to enable, `false` to disable.
        #[arg(long, action = clap::ArgAction::Set)]
        enabled: bool,
    },
}

#[derive(Debug, Subcommand)]
enum DeviceCommand {
    /// Put a device (user + SSID) into a group; 0 = ungrouped.
    Group {
        #[command(flatten)]
        db: DbArg,
        /// Owner account name.
        #[arg(long)]
        user: String,
        /// Device SSID (1-99, 106-254).
        #[arg(long)]
        ssid: u8,
        /// Group id.
        #[arg(long)]
        group: i64,
    },
    /// Set a device's send and receive bans.
    Ban {
        #[command(flatten)]
        db: DbArg,
        /// Owner account name.
        #[arg(long)]
        user: String,
        /// Device SSID.
        #[arg(long)]
        ssid: u8,
        /// Drop the device's voice and text.
        #[arg(long, action = clap::ArgAction::Set)]
        send: bool,
        /// Leave the device out of fan-out.
        #[arg(long, action = clap::ArgAction::Set)]
        recv: bool,
    },
}

pub(crate) fn runtime() -> anyhow::Result<tokio::runtime::Runtime> {
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .context("starting the tokio runtime")
}

/// The store's open error already reads `opening <location>: <cause>`;
/// a context on top would say "opening" twice.
async fn open(db: &str) -> anyhow::Result<Store> {
    Ok(Store::open(db, StoreOptions::default()).await?)
}

/// The first line of standard input without its line end; an error if it
/// is empty. When standard input is a terminal, its echo is off while the
/// line is typed, so the password never shows.
fn read_password_line() -> anyhow::Result<String> {
    let mut line = String::new();
    let fd = libc::STDIN_FILENO;
    // SAFETY: `termios` is plain data that `tcgetattr` fills in; both calls
    // only read or set the terminal attributes of standard input.
    let saved = unsafe {
        let mut t: libc::termios = std::mem::zeroed();
        (libc::isatty(fd) == 1 && libc::tcgetattr(fd, &mut t) == 0).then_some(t)
    };
    if let Some(t) = saved {
        eprint!("web password: ");
        let mut quiet = t;
        quiet.c_lflag &= !libc::ECHO;
        // SAFETY: as above; `quiet` is a copy of the current attributes.
        unsafe { libc::tcsetattr(fd, libc::TCSANOW, &quiet) };
    }
    let read = std::io::stdin().read_line(&mut line);
    if let Some(t) = saved {
        // SAFETY: restores the attributes read above.
        unsafe { libc::tcsetattr(fd, libc::TCSANOW, &t) };
        eprintln!();
    }
    read.context("reading the password from standard input")?;
    let pw = line.trim_end_matches(['\n', '\r']).to_owned();
    anyhow::ensure!(!pw.is_empty(), "no password on standard input");
    Ok(pw)
}

/// Runs `petrel reflector …`.
pub fn run(args: ReflectorArgs) -> anyhow::Result<ExitCode> {
    if let ReflectorCommand::Login(login) = args.command {
        return crate::reflector_login::run(login);
    }
    runtime()?.block_on(manage(args.command))?;
    Ok(ExitCode::SUCCESS)
}

async fn manage(command: ReflectorCommand) -> anyhow::Result<()> {
    match command {
        ReflectorCommand::Serve(a) if a.role == Role::Edge => serve_edge(a).await?,
        ReflectorCommand::Serve(a) => serve(a).await?,
        ReflectorCommand::Edge(c) => manage_edges(c).await?,
        // Answered in `run`, without the runtime.
        ReflectorCommand::Login(_) => {}
        ReflectorCommand::User(UserCommand::Add {
            db,
            name,
            callsign,
            device_password,
            dmrid,
            default_group,
            password,
            admin,
        }) => {
            let store = open(&db.db).await?;
            let id = store
                .add_user(&NewUser {
                    name: name.clone(),
                    callsign: callsign.clone(),
                    dmrid,
                    device_password,
                    default_group_id: default_group,
                })
                .await?;
            if let Some(pw) = password {
                store.set_web_password(&name, &pw).await?;
            }
            if admin {
                store.set_user_roles(&name, "admin").await?;
            }
            let role = if admin { "admin" } else { "user" };
            println!("user {id}: {name}, callsign {callsign}, role {role}");
        }
        ReflectorCommand::User(UserCommand::Passwd { db, name, password }) => {
            let password = match password {
                Some(p) => p,
                None => read_password_line()?,
            };
            open(&db.db)
                .await?
                .set_web_password(&name, &password)
                .await?;
            println!("web password of {name} set");
        }
        ReflectorCommand::User(UserCommand::Password {
            db,
            name,
            device_password,
        }) => {
            open(&db.db)
                .await?
                .set_device_password(&name, &device_password)
                .await?;
        }
        ReflectorCommand::Group(GroupCommand::Add {
            db,
            name,
            is_virtual,
            id,
        }) => {
            let id = open(&db.db).await?.add_group(&name, is_virtual, id).await?;
            println!("group {id}");
        }
        ReflectorCommand::Group(GroupCommand::Link { db, link, target }) => {
            open(&db.db).await?.link_groups(link, target).await?;
        }
        ReflectorCommand::Group(GroupCommand::Enable { db, id, enabled }) => {
            open(&db.db).await?.set_group_enabled(id, enabled).await?;
        }
        ReflectorCommand::Messages { db, group, limit } => {
            let store = open(&db.db).await?;
            for (ms, user, ssid, text) in store.recent_messages(group, limit).await? {
                println!("{ms} {user}-{ssid}: {}", String::from_utf8_lossy(&text));
            }
        }
        ReflectorCommand::Device(DeviceCommand::Group {
            db,
            user,
            ssid,
            group,
        }) => {
            open(&db.db)
                .await?
                .set_device_group(&user, ssid, group)
                .await?;
        }
        ReflectorCommand::Device(DeviceCommand::Ban {
            db,
            user,
            ssid,
            send,
            recv,
        }) => {
            open(&db.db)
                .await?
                .set_device_bans(&user, ssid, send, recv)
                .await?;
        }
    }
    Ok(())
}

async fn manage_edges(command: EdgeCommand) -> anyhow::Result<()> {
    match command {
        EdgeCommand::Add { db, name, config } => {
            let cfg = match &config {
                Some(p) => read_config(p)?.interconnect,
                None => InterconnectConfig::default(),
            };
            let store = open(&db.db).await?;
            let token = add_edge_node(&store, name.as_deref(), &cfg).await?;
            println!(
                "edge node {} added; its node token (shown once, keep it secret):",
                token.credential.node_id()
            );
            println!("{}", token.expose());
        }
        EdgeCommand::List { db } => {
            for n in open(&db.db).await?.nodes().await? {
                let state = if n.disabled { "disabled" } else { "enabled" };
                println!(
                    "{} {state} added {}",
                    n.node_id,
                    petrel_reflector::model::rfc3339_utc(n.created_at_ms)
                );
            }
        }
        EdgeCommand::Remove { db, name } => {
            open(&db.db).await?.remove_node(&name).await?;
            println!("edge node {name} removed");
        }
        EdgeCommand::Disable { db, name, disabled } => {
            open(&db.db)
                .await?
                .set_node_disabled(&name, disabled)
                .await?;
            let state = if disabled { "disabled" } else { "enabled" };
            println!("edge node {name} {state}");
        }
    }
    Ok(())
}

/// Reads a TOML config file.
fn read_config(p: &Path) -> anyhow::Result<ServerConfig> {
    let text = std::fs::read_to_string(p).with_context(|| format!("reading {}", p.display()))?;
    // The parser's own message quotes the offending line, which may hold
    // a database password: report the position and the reason only.
    toml::from_str::<ServerConfig>(&text).map_err(|e| {
        let line = e
            .span()
            .map_or(0, |s| text[..s.start].matches('\n').count() + 1);
        anyhow::anyhow!("parsing {}, line {line}: {}", p.display(), e.message())
    })
}

fn init_logging() {
    let _ = tracing_subscriber::fmt()
        .with_writer(std::io::stderr)
        .with_ansi(std::io::IsTerminal::is_terminal(&std::io::stderr()))
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_default_env()
                .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("info")),
        )
        .try_init();
}

/// The centre's UDP address: `given`, else the host of `centre` (the
/// control address, HOST:PORT) with port 60050 (draarl-interconnect §2).
async fn centre_udp(centre: &str, given: Option<&str>) -> anyhow::Result<SocketAddr> {
    let text = match given {
        Some(g) => g.to_owned(),
        None => {
            let host = centre
                .rsplit_once(':')
                .map_or(centre, |(h, _)| h)
                .to_owned();
            format!("{host}:{DEFAULT_CENTRE_UDP_PORT}")
        }
    };
    let first = tokio::net::lookup_host(&text)
        .await
        .with_context(|| format!("resolving the centre's UDP address {text}"))?
        .next();
    first.with_context(|| format!("{text} resolves to no address"))
}

/// `serve --role edge`: the edge reflector (draarl-interconnect §1, §2):
/// devices on --listen, sessions from the centre's grants, until stopped
/// (the log says `edge connected as <id>, session <n>` and `edge ready`).
async fn serve_edge(a: ServeArgs) -> anyhow::Result<()> {
    init_logging();
    let text = match (&a.node_token, &a.node_token_file) {
        (Some(t), _) => t.clone(),
        (None, Some(p)) => std::fs::read_to_string(p)
            .with_context(|| format!("reading {}", p.display()))?
            .lines()
            .next()
            .unwrap_or_default()
            .trim()
            .to_owned(),
        (None, None) => anyhow::bail!("--role edge needs --node-token or --node-token-file"),
    };
    let token = NodeToken::parse(&text).map_err(|e| anyhow::anyhow!("node token: {e}"))?;
    let trust = match (token.pin, &a.centre_ca) {
        (Some(pin), _) => CentreTrust::Pin(pin),
        (None, Some(ca)) => CentreTrust::from_ca_file(&ca.to_string_lossy())?,
        (None, None) => {
            anyhow::bail!("the node token has no certificate pin: give --centre-ca")
        }
    };
    let centre = a.centre.context("--role edge needs --centre HOST:PORT")?;
    let udp = centre_udp(&centre, a.centre_udp.as_deref()).await?;
    let stop = StopSignals::install()?;
    let mut cfg = EdgeServerConfig::new(EdgeControlConfig {
        centre,
        server_name: a.centre_name,
        credential: token.credential,
        trust,
        offer: Offer::CURRENT,
        heartbeat: HEARTBEAT_INTERVAL,
    });
    if let Some(l) = a.listen {
        cfg.listen = l;
    }
    cfg.http_listen = a.http;
    cfg.node.centre_udp = Some(udp);
    cfg.node.grace = Duration::from_secs(a.local_grace_secs);
    cfg.node.devices.sessions.device_timeout = Duration::from_secs(a.device_timeout_secs);
    cfg.node.devices.sessions.renew_before = Duration::from_secs(a.renew_before_secs);
    if let Some(p) = &a.config {
        cfg.node.devices.sessions.endpoints = read_config(p)?.session.endpoints;
    }
    let cpus = std::thread::available_parallelism().map_or(2, usize::from);
    cfg.fanout.writers = a
        .writers
        .map_or(cpus.clamp(2, 8), |w| usize::try_from(w).unwrap_or(2));
    let edge = EdgeServer::start(cfg).await?;
    match edge.http_addr() {
        Some(h) => println!(
            "edge started on {} (pid {}), metrics on http://{h}/metrics",
            edge.local_addr(),
            std::process::id()
        ),
        None => println!(
            "edge started on {} (pid {})",
            edge.local_addr(),
            std::process::id()
        ),
    }
    stop.wait().await;
    let stats = edge.stats();
    edge.shutdown().await;
    println!(
        "stopped: {} connects, {} sessions, {} frames upstream, {} downstream",
        stats.control.connects,
        stats.sessions,
        stats.device.upstream_frames,
        stats.device.downstream_frames
    );
    Ok(())
}

async fn serve(a: ServeArgs) -> anyhow::Result<()> {
    init_logging();
    let mut cfg = match &a.config {
        Some(p) => read_config(p)?,
        None => ServerConfig::default(),
    };
    if let Some(l) = a.listen {
        cfg.listen = l;
    }
    if let Some(db) = a.db {
        cfg.db = db;
    }
    if let Some(h) = a.http {
        cfg.http_listen = Some(h);
    }
    // Before the start-up line, so a stop sent as soon as it is read is not fatal.
    let stop = StopSignals::install()?;
    // A `ServerError`'s message already ends with its source's; kept as an
    // error chain, `{:#}` would print the source a second time.
    let server = ServerHandle::start(cfg)
        .await
        .map_err(|e| anyhow::anyhow!("{e}"))?;
    println!(
        "reflector listening on udp {} (pid {})",
        server.local_addr(),
        std::process::id()
    );
    if let Some(http) = server.http_addr() {
        println!("reflector http on {http}");
    }
    if let Some(control) = server.control_addr() {
        println!("reflector interconnect control on tcp {control}");
    }
    stop.wait().await;
    let stats = server.stats();
    server.shutdown().await;
    println!(
        "stopped: {} datagrams in, {} logins, {} frames out, {} datagrams sent, {} frames dropped, {} expired",
        stats.session.received,
        stats.session.logins,
        stats.fanout.frames_sent,
        stats.fanout.sent,
        stats.fanout.frames_dropped,
        stats.fanout.frames_expired
    );
    Ok(())
}

/// SIGINT (Ctrl-C) and SIGTERM (`kill PID`, a service manager's stop), which
/// both end the reflector the same way.
struct StopSignals {
    interrupt: tokio::signal::unix::Signal,
    terminate: tokio::signal::unix::Signal,
}

impl StopSignals {
    /// Installs the handlers; from here on neither signal kills the process,
    /// it is kept until [`StopSignals::wait`].
    fn install() -> anyhow::Result<Self> {
        use tokio::signal::unix::{signal, SignalKind};
        Ok(Self {
            interrupt: signal(SignalKind::interrupt()).context("installing the SIGINT handler")?,
            terminate: signal(SignalKind::terminate()).context("installing the SIGTERM handler")?,
        })
    }

    async fn wait(mut self) {
        tokio::select! {
            _ = self.interrupt.recv() => {}
            _ = self.terminate.recv() => {}
        }
    }
}

/// `petrel bench reflector`: fan-out load against a reflector (a child process by default)
/// (draarl-v1 §7, benchmarks §D), one stage per device level and interval,
/// stopping once loss exceeds 5 %; with `--soak`, one long run with churn
/// instead (see `reflector_soak.rs`).
#[derive(Debug, Args)]
pub struct ReflectorBenchArgs {
    /// Device counts to run, ascending (each device binds its own 127.x.y.z)
    /// [default: 100,500,1000; with --soak one count, 5000].
    #[arg(long, value_delimiter = ',')]
    pub levels: Option<Vec<usize>>,
    /// Groups, which is also the number of simultaneous speakers
    /// [default: 1; with --soak 10].
    #[arg(long)]
    pub groups: Option<usize>,
    /// Voice interval per speaker, ms. A comma list, slowest first (e.g.
    /// 120,60,40,30), searches each level for its fastest zero-loss interval:
    /// after a stage with loss, the level's faster intervals are skipped and
    /// a FASTEST line reports the last zero-loss stage.
    #[arg(long, value_delimiter = ',', default_value = "120")]
    pub interval_ms: Vec<u64>,
    /// Voice DATA bytes (32-710).
    #[arg(long, default_value_t = 320)]
    pub payload: usize,
    /// Measurement time per stage, s.
    #[arg(long, default_value_t = 5)]
    pub duration_s: u64,
    /// Reflector send paths.
    #[arg(long, default_value_t = 2)]
    pub writers: usize,
    /// Reflector frame-age limit, ms (120 in the reference benchmarks).
    #[arg(long, default_value_t = 120)]
    pub max_frame_age_ms: u64,
    /// Android-style UDP ghost receivers added to each stage (0-5000): app
    /// accounts log in through the reflector's HTTP login and Type 1, and
    /// listen in the groups like devices (draarl-apps §2).
    #[arg(long, default_value_t = 0)]
    pub ghosts: usize,
    /// Web-style WebSocket receivers added to each stage (0-2000), logged
    /// in the same way over `/ws` (draarl-apps §4).
    #[arg(long, default_value_t = 0)]
    pub ws: usize,
    /// Write the JSON result (one round per stage) to FILE (`-` for stdout;
    /// the RESULT lines then go to stderr).
    #[arg(long, value_name = "FILE")]
    pub json: Option<PathBuf>,
    /// Run the reflector inside this process instead of as a child
    /// `petrel reflector serve` (its RSS is then not separable from the
    /// load generator's).
    #[arg(long)]
    pub in_process: bool,
    /// Soak instead of stages: keep the devices talking for SECONDS (after a
    /// 10 s warm-up) while they log out and in, switch groups, get banned and
    /// unbanned and reconnect from new ports; attribute every lost datagram
    /// and compare the reflector's RSS and descriptors from start to end.
    /// Exit 1 on unattributed loss, RSS growth over 5 % or descriptor growth.
    #[arg(long, value_name = "SECONDS")]
    pub soak: Option<u64>,
    /// Seconds of voice and churn before the soak's measurement starts
    /// (10–3600); RSS and descriptors are compared from its end.
    #[arg(long, default_value_t = petrel_bench::reflector::soak::DEFAULT_WARMUP_S, requires = "soak")]
    pub warmup_s: u64,
    /// Seed of the soak's churn schedule.
    #[arg(long, default_value_t = 1, requires = "soak")]
    pub seed: u64,
    /// Churn actions the soak starts per second.
    #[arg(long, default_value_t = 5, requires = "soak")]
    pub churn_per_s: u32,
    /// Run each stage against a centre and N edge nodes, every node a child
    /// process on loopback with its own UDP port (the centre gets no
    /// devices; draarl-interconnect §9), each followed by the same stage on
    /// one single-node reflector; per node CPU, RSS and drop counters, cost
    /// per delivered packet, every missing datagram attributed (exit 1 when
    /// one is not). With --soak SECONDS: one stage that long (no churn).
    #[arg(long, value_name = "N")]
    pub edges: Option<usize>,
    /// With --edges: which edge each device logs in through: `local` (all
    /// on the first), `distributed` (position p in its group on edge p mod
    /// N) or `cross` (speakers on the first edge, the others on the rest).
    #[arg(long, default_value = "cross", requires = "edges")]
    pub layout: petrel_bench::reflector::cluster_layout::Layout,
    /// With --edges: skip the single-node stage after each cluster stage.
    #[arg(long, requires = "edges")]
    pub no_baseline: bool,
    /// With --edges: most devices one load-generator process holds (each
    /// device is a socket). The devices of a stage are split over as many
    /// generator processes as this and the open-files limit (raised to
    /// the hard limit, less a headroom) need [default: the limit alone].
    #[arg(long, value_name = "N", requires = "edges", value_parser = clap::value_parser!(u64).range(1..=20_000))]
    pub devices_per_process: Option<u64>,
}

impl ReflectorBenchArgs {
    /// Where the reflector under test runs: this binary as a child, or in
    /// this process with `--in-process`.
    pub(crate) fn server(&self) -> anyhow::Result<ServerProcess> {
        Ok(if self.in_process {
            ServerProcess::InProcess
        } else {
            ServerProcess::Child(std::env::current_exe().context("locating the petrel binary")?)
        })
    }

    /// One stage's settings: `devices` at `interval_ms`, measured for
    /// `duration_s`, on `server`.
    pub(crate) fn load_config(
        &self,
        devices: usize,
        interval_ms: u64,
        duration_s: u64,
        server: &ServerProcess,
    ) -> LoadConfig {
        LoadConfig {
            devices,
            groups: self.groups.unwrap_or(1),
            interval_ms,
            payload: self.payload,
            duration_s,
            writers: self.writers,
            max_frame_age_ms: self.max_frame_age_ms,
            ghosts: self.ghosts,
            ws: self.ws,
            server: server.clone(),
        }
    }

    /// The usage errors every staged run shares: at least one level and
    /// interval, intervals slowest first, a writable `--json` target.
    pub(crate) fn check_stages(&self, levels: &[usize]) -> Result<(), String> {
        if levels.is_empty() || self.interval_ms.is_empty() {
            return Err("--levels and --interval-ms need at least one value".into());
        }
        if self.interval_ms.windows(2).any(|w| w[0] <= w[1]) {
            return Err(format!(
                "--interval-ms must list intervals slowest first (strictly decreasing), got {:?}",
                self.interval_ms
            ));
        }
        crate::args::check_json_target(self.json.as_deref()).map_err(|e| e.to_string())
    }

    /// The recorded parameters of stages over `levels`, `duration_s` each.
    pub(crate) fn parameters(&self, levels: &[usize], duration_s: u64) -> ReflectorParameters {
        ReflectorParameters {
            levels: levels.to_vec(),
            groups: self.groups.unwrap_or(1),
            interval_ms: self.interval_ms.clone(),
            payload: self.payload,
            duration_s,
            writers: self.writers,
            max_frame_age_ms: self.max_frame_age_ms,
            in_process: self.in_process,
            ghosts: self.ghosts,
            ws: self.ws,
        }
    }
}

/// Runs `petrel bench reflector` without `--soak` (the soak is
/// `reflector_soak::run`): exit 0 when every stage ran, 1 when one failed, 2
/// for invalid arguments.
pub fn run_bench(args: ReflectorBenchArgs) -> anyhow::Result<ExitCode> {
    let levels_arg = args.levels.clone().unwrap_or_else(|| vec![100, 500, 1000]);
    let groups = args.groups.unwrap_or(1);
    let server = args.server()?;
    let levels: Vec<Vec<LoadConfig>> = levels_arg
        .iter()
        .map(|&devices| {
            args.interval_ms
                .iter()
                .map(|&interval_ms| {
                    args.load_config(devices, interval_ms, args.duration_s, &server)
                })
                .collect()
        })
        .collect();
    let invalid = levels.iter().flatten().find_map(|c| c.validate().err());
    if let Some(e) = invalid {
        eprintln!("error: {e}");
        return Ok(ExitCode::from(2));
    }
    if let Err(e) = args.check_stages(&levels_arg) {
        eprintln!("error: {e}");
        return Ok(ExitCode::from(2));
    }
    let params = args.parameters(&levels_arg, args.duration_s);
    let intervals: Vec<String> = args.interval_ms.iter().map(u64::to_string).collect();
    let case = format!("reflector-{groups}g-{}ms", intervals.join("-"));
    let mut record = ResultRecord::begin("reflector", &case, &params)?;
    let to_stdout = args.json.as_deref() == Some(Path::new("-"));
    let outcome = runtime()?.block_on(bench(&levels, to_stdout, &mut record));
    finish_record(record, outcome, args.json.as_deref())
}

/// Ends a staged run: `record` gets this process's peak RSS and `ok` from
/// `outcome`, and is written to `json` (`-`: stdout) if given; then the
/// run's error, or exit 0.
pub(crate) fn finish_record(
    mut record: ResultRecord,
    outcome: anyhow::Result<()>,
    json: Option<&Path>,
) -> anyhow::Result<ExitCode> {
    record.peak_rss_bytes = petrel_bench::measure::peak_rss_bytes();
    record.ok = outcome.is_ok();
    match json {
        Some(path) if path == Path::new("-") => println!("{}", record.to_json()?),
        Some(path) => record.write_json(path)?,
        None => {}
    }
    outcome?;
    Ok(ExitCode::SUCCESS)
}

/// Prints a result line on stdout, or on stderr when stdout carries the
/// JSON record.
pub(crate) fn say(to_stderr: bool, line: &str) {
    if to_stderr {
        eprintln!("{line}");
    } else {
        println!("{line}");
    }
}

/// Runs each level's intervals (slowest first) until one loses packets,
/// then the next level unless the level's slowest interval lost over 5 %.
async fn bench(
    levels: &[Vec<LoadConfig>],
    to_stderr: bool,
    record: &mut ResultRecord,
) -> anyhow::Result<()> {
    let say = |line: String| say(to_stderr, &line);
    for stages in levels {
        let mut fastest = None;
        let mut slowest_loss = 0.0;
        for (i, cfg) in stages.iter().enumerate() {
            let r = petrel_bench::reflector::run(cfg).await.with_context(|| {
                format!(
                    "stage with {} devices at {} ms",
                    cfg.devices, cfg.interval_ms
                )
            })?;
            say(r.result_line());
            record.push_round(&r)?;
            if i == 0 {
                slowest_loss = r.loss_pct;
            }
            if r.loss_pct > 0.0 {
                break;
            }
            fastest = Some(r);
        }
        if stages.len() > 1 {
            let devices = stages.first().map_or(0, |c| c.devices);
            say(match fastest {
                Some(r) => format!(
                    "FASTEST clients={devices} zero_loss_interval={}ms output_pps={:.0} latency_avg_ms={:.3} latency_p99_ms={:.3} server_cpu_cores={:.3} server_rss_mb={} process_rss_mb={:.1}{}",
                    r.interval_ms, r.output_pps, r.latency_avg_ms, r.latency_p99_ms, r.server_cpu_cores,
                    r.server_rss_mb.map_or_else(|| "na".to_owned(), |m| format!("{m:.1}")), r.process_rss_mb,
                    r.kind_fields()
                ),
                None => format!("FASTEST clients={devices} zero_loss_interval=none"),
            });
        }
        if slowest_loss > 5.0 {
            eprintln!("loss above 5 %; not escalating further");
            break;
        }
    }
    Ok(())
}
