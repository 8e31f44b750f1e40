//! The echo transport of one kcptun round: TCP clients ⇄ `kcptun-client` ⇄
//! impairment relay ⇄ `kcptun-server` ⇄ TCP echo target, and what the round
//! needs at its end (the relay's counters, both processes' SNMP rows and CPU).

use std::io;
use std::net::{Ipv4Addr, SocketAddr, UdpSocket};
use std::path::PathBuf;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::time::{Duration, Instant};

use petrel_netem::{Relay, RelayConfig, RelayStats};
use tokio::net::TcpListener;
use tokio::sync::oneshot;

use super::process::{KcptunBinaries, KcptunChild};
use crate::echo::tcp::{self, TcpClient, TcpTransport};
use crate::echo::{EchoServer, EchoTransport, ServerStats};

/// How long a kcptun process may take to bind its socket.
const START_LIMIT: Duration = Duration::from_secs(5);
/// Attempts at starting `kcptun-server` on a free port (another process may take
/// the port between the probe and kcptun's bind).
const SERVER_ATTEMPTS: usize = 3;

/// Both processes and the relay between them.
#[derive(Debug, Default)]
struct Running {
    relay: Option<Relay>,
    client: Option<KcptunChild>,
    server: Option<KcptunChild>,
}

/// The processes of a round, handed over by [`KcptunEcho::finish`].
#[derive(Debug)]
pub(crate) struct Finished {
    /// The relay's counters.
    pub relay: Option<RelayStats>,
    /// `kcptun-client`, still running.
    pub client: Option<KcptunChild>,
    /// `kcptun-server`, still running.
    pub server: Option<KcptunChild>,
}

/// Where the echo's measured interval starts: when the last client connected.
type Origin = Arc<Mutex<Option<oneshot::Sender<Instant>>>>;

/// kcptun under test for one round. Create one per round: it starts one pair of
/// processes and one relay.
#[derive(Debug)]
pub(crate) struct KcptunEcho {
    binaries: KcptunBinaries,
    /// Flags of both processes.
    common: Vec<String>,
    /// `--conn` of `kcptun-client`.
    conn: usize,
    /// SNMP log paths (client, server), when they can be written.
    snmp: Option<(PathBuf, PathBuf)>,
    snmp_period_s: u64,
    relay: RelayConfig,
    clients: usize,
    connected: AtomicUsize,
    origin: Origin,
    running: Arc<Mutex<Running>>,
}

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(PoisonError::into_inner)
}

/// The settings of one round.
#[derive(Debug)]
pub(crate) struct RoundSetup {
    pub binaries: KcptunBinaries,
    pub common: Vec<String>,
    pub conn: usize,
    pub snmp: Option<(PathBuf, PathBuf)>,
    pub snmp_period_s: u64,
    pub relay: RelayConfig,
    pub clients: usize,
}

impl KcptunEcho {
    /// The transport and the receiver of the instant its last client connected.
    pub(crate) fn new(setup: RoundSetup) -> (Self, oneshot::Receiver<Instant>) {
        let (tx, rx) = oneshot::channel();
        let echo = Self {
            binaries: setup.binaries,
            common: setup.common,
            conn: setup.conn,
            snmp: setup.snmp,
            snmp_period_s: setup.snmp_period_s,
            relay: setup.relay,
            clients: setup.clients,
            connected: AtomicUsize::new(0),
            origin: Arc::new(Mutex::new(Some(tx))),
            running: Arc::default(),
        };
        (echo, rx)
    }

    /// Process ids of `kcptun-client` and `kcptun-server` once started.
    pub(crate) fn pids(&self) -> Option<(u32, u32)> {
        let r = lock(&self.running);
        Some((r.client.as_ref()?.pid(), r.server.as_ref()?.pid()))
    }

    /// Stops the relay and hands over its counters and both processes.
    ///
    /// # Errors
    /// The relay's failure, if its thread stopped with one.
    pub(crate) fn finish(self) -> io::Result<Finished> {
        let r = std::mem::take(&mut *lock(&self.running));
        let relay = r
            .relay
            .map(Relay::stop)
            .transpose()
            .map_err(io::Error::other)?;
        Ok(Finished {
            relay,
            client: r.client,
            server: r.server,
        })
    }

    /// `--snmplog path --snmpperiod S`, or nothing without a log path.
    fn snmp_args(&self, path: Option<&PathBuf>) -> Vec<String> {
        match path {
            Some(path) => vec![
                "--snmplog".to_owned(),
                path.to_string_lossy().into_owned(),
                "--snmpperiod".to_owned(),
                self.snmp_period_s.to_string(),
            ],
            None => Vec::new(),
        }
    }

    /// Starts `kcptun-server` in front of `target`, the relay in front of it, and
    /// `kcptun-client` dialling the relay; returns the client's TCP address.
    /// Blocking (bounded by [`START_LIMIT`] per process).
    fn start_processes(&self, target: SocketAddr) -> io::Result<SocketAddr> {
        let mut server = None;
        let mut last_error = None;
        for _ in 0..SERVER_ATTEMPTS {
            let port = UdpSocket::bind((Ipv4Addr::LOCALHOST, 0))?
                .local_addr()?
                .port();
            let mut args = vec![
                "--listen".to_owned(),
                format!("127.0.0.1:{port}"),
                "--target".to_owned(),
                target.to_string(),
            ];
            args.extend(self.common.iter().cloned());
            args.extend(self.snmp_args(self.snmp.as_ref().map(|(_, server)| server)));
            let mut child = KcptunChild::spawn("kcptun-server", &self.binaries.server, &args)?;
            match child.wait_udp_bound(port, START_LIMIT) {
                Ok(()) => {
                    server = Some((child, port));
                    break;
                }
                Err(e) => last_error = Some(e),
            }
        }
        let Some((server, port)) = server else {
            return Err(
                last_error.unwrap_or_else(|| io::Error::other("kcptun-server did not start"))
            );
        };
        let relay = Relay::start(RelayConfig {
            upstream: SocketAddr::from((Ipv4Addr::LOCALHOST, port)),
            ..self.relay.clone()
        })
        .map_err(io::Error::other)?;
        let mut args = vec![
            "--localaddr".to_owned(),
            "127.0.0.1:0".to_owned(),
            "--remoteaddr".to_owned(),
            relay.local_addr().to_string(),
            "--conn".to_owned(),
            self.conn.to_string(),
        ];
        args.extend(self.common.iter().cloned());
        args.extend(self.snmp_args(self.snmp.as_ref().map(|(client, _)| client)));
        let mut running = lock(&self.running);
        running.server = Some(server);
        running.relay = Some(relay);
        let mut client = KcptunChild::spawn("kcptun-client", &self.binaries.client, &args)?;
        let listening = client.wait_listening(START_LIMIT);
        running.client = Some(client);
        listening
    }
}

impl EchoTransport for KcptunEcho {
    type Client = TcpClient;

    fn name(&self) -> &'static str {
        "kcptun"
    }

    fn reliable(&self) -> bool {
        true
    }

    async fn start_server(&self) -> io::Result<EchoServer> {
        let stats = Arc::new(ServerStats::default());
        let listener = TcpListener::bind((Ipv4Addr::LOCALHOST, 0)).await?;
        let target = listener.local_addr()?;
        let task = tokio::spawn(tcp::accept_loop(listener, Arc::clone(&stats)));
        // Starting the processes blocks this (current-thread) runtime for a few
        // tens of ms, bounded by START_LIMIT; no other task has work yet.
        let client_addr = self.start_processes(target);
        match client_addr {
            Ok(addr) => Ok(EchoServer::new(addr, task, stats, None)),
            Err(e) => {
                task.abort();
                Err(e)
            }
        }
    }

    async fn connect(&self, server: SocketAddr, client_id: u32) -> io::Result<TcpClient> {
        let client = TcpTransport.connect(server, client_id).await?;
        if self.connected.fetch_add(1, Ordering::Relaxed) + 1 == self.clients {
            if let Some(tx) = lock(&self.origin).take() {
                // A dropped receiver only means nobody samples CPU.
                let _ = tx.send(Instant::now());
            }
        }
        Ok(client)
    }
}
