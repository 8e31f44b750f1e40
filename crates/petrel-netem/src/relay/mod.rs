//! The relay runtime: `client ⇄ relay ⇄ server` over real UDP sockets, one route (one
//! upstream socket, like a NAT mapping) per client address, each route running the
//! sans-IO [`Route`](crate::Route) model on a dedicated thread.

mod engine;
mod report;
mod routes;
mod spin;

use std::io;
use std::net::{SocketAddr, UdpSocket};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::Duration;

use petrel_sys::range::{check_range, check_range_in};

use crate::config::{ConfigError, RouteConfig};

pub use report::{DirectionReport, Lateness, RelayStats, RouteReport};

/// Relay settings. `Default`: listen on `127.0.0.1:0` (an ephemeral port), upstream
/// unset (`0.0.0.0:0`, rejected by [`RelayConfig::validate`]), no impairment, seed 42,
/// 1024 routes expiring after 60 s idle, batches of 32 datagrams, 100 µs spin, 4 MiB socket buffers.
#[derive(Debug, Clone, PartialEq)]
pub struct RelayConfig {
    /// Where clients send.
    pub listen: SocketAddr,
    /// The server every route forwards to.
    pub upstream: SocketAddr,
    /// Conditions of every route.
    pub route: RouteConfig,
    /// Seed of every route's random streams (see [`crate::stream_rng`]).
    pub seed: u64,
    /// Most client addresses served at once; datagrams from further clients are
    /// dropped and counted in [`RelayStats::routes_rejected`] until routes
    /// expire. Range 1..=65536.
    pub max_routes: usize,
    /// A route that holds nothing and has seen no packet for this long is removed
    /// and its upstream socket closed, as a NAT mapping times out; its counters stay
    /// in the totals. `None`: routes live until the relay stops. Range 10 ms..=1 day.
    pub route_idle_timeout: Option<Duration>,
    /// Datagrams per `recvmmsg`/`sendmmsg` call. 1 makes every call carry one
    /// datagram (the unbatched baseline). Range 1..=1024.
    pub batch: usize,
    /// How long before a deadline the thread stops sleeping and polls without
    /// blocking, to absorb wake-up latency; spinning is capped at about 1/10 of a core
    /// (when the budget is spent the thread sleeps to the deadline). Range 0..=10 ms.
    pub spin: Duration,
    /// `SO_RCVBUF`/`SO_SNDBUF` requested for every socket, in bytes (the kernel may
    /// cap it at `net.core.rmem_max`/`wmem_max`). Range 4096..=1 GiB.
    pub socket_buffer: usize,
}

impl Default for RelayConfig {
    fn default() -> Self {
        Self {
            listen: SocketAddr::from(([127, 0, 0, 1], 0)),
            upstream: SocketAddr::from(([0, 0, 0, 0], 0)),
            route: RouteConfig::default(),
            seed: 42,
            max_routes: 1024,
            route_idle_timeout: Some(Duration::from_secs(60)),
            batch: 32,
            spin: Duration::from_micros(100),
            socket_buffer: 4 << 20,
        }
    }
}

impl RelayConfig {
    /// The defaults with `listen` and `upstream` set.
    pub fn new(listen: SocketAddr, upstream: SocketAddr) -> Self {
        Self {
            listen,
            upstream,
            ..Self::default()
        }
    }

    /// Whether `upstream` is the relay's own listen socket. Every datagram would come
    /// back as a new client, each hop opening a route and a socket, until `max_routes`.
    fn relays_to_itself(&self) -> bool {
        let (l, u) = (self.listen, self.upstream);
        l.port() == u.port()
            && (l.ip() == u.ip() || (l.ip().is_unspecified() && u.ip().is_loopback()))
    }

    /// Checks every field's range and the route conditions.
    ///
    /// # Errors
    /// The first field out of range.
    pub fn validate(&self) -> Result<(), ConfigError> {
        let err = |field, value: String, rule: &str| ConfigError::new(field, value, rule);
        if self.upstream.port() == 0 || self.upstream.ip().is_unspecified() {
            return Err(err(
                "upstream",
                self.upstream.to_string(),
                "a server address with a non-zero port",
            ));
        }
        if self.relays_to_itself() {
            return Err(err(
                "upstream",
                self.upstream.to_string(),
                "an address other than the relay's own listen address",
            ));
        }
        let ms = Duration::from_millis;
        check_range("max_routes", self.max_routes, &(1..=65_536))?;
        if let Some(idle) = self.route_idle_timeout {
            check_range(
                "route_idle_timeout",
                idle,
                &(ms(10)..=Duration::from_secs(86_400)),
            )?;
        }
        check_range("batch", self.batch, &(1..=1024))?;
        check_range("spin", self.spin, &(Duration::ZERO..=ms(10)))?;
        check_range_in(
            "socket_buffer",
            self.socket_buffer,
            &(4096..=1 << 30),
            "bytes",
        )?;
        self.route.validate()
    }
}

/// Why a relay could not start or stopped abnormally.
#[derive(Debug, thiserror::Error)]
pub enum RelayError {
    /// A configuration field is out of range.
    #[error(transparent)]
    Config(#[from] ConfigError),
    /// The listen socket could not be bound.
    #[error("cannot bind {addr}: {source}")]
    Bind {
        /// The listen address.
        addr: SocketAddr,
        /// The OS error.
        source: io::Error,
    },
    /// A system call the relay cannot run without failed.
    #[error("{context}: {source}")]
    Io {
        /// What was being done.
        context: &'static str,
        /// The OS error.
        source: io::Error,
    },
    /// The relay thread panicked (a bug).
    #[error("relay thread panicked")]
    Panicked,
}

pub(crate) struct Shared {
    stop: AtomicBool,
    stats: Mutex<RelayStats>,
}

/// A running relay. Dropping it stops it; [`Relay::stop`] also returns the final
/// counters.
#[derive(Debug)]
pub struct Relay {
    local_addr: SocketAddr,
    shared: Arc<Shared>,
    waker: std::os::unix::net::UnixDatagram,
    thread: Option<JoinHandle<Result<RelayStats, RelayError>>>,
}

impl std::fmt::Debug for Shared {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Shared")
            .field("stop", &self.stop)
            .finish_non_exhaustive()
    }
}

impl Relay {
    /// Validates `config`, binds the listen socket and starts the relay thread.
    ///
    /// # Errors
    /// [`RelayError::Config`] for a bad field, [`RelayError::Bind`] when the listen
    /// address is taken, [`RelayError::Io`] when epoll or the thread cannot be set up.
    pub fn start(config: RelayConfig) -> Result<Relay, RelayError> {
        config.validate()?;
        let listen = UdpSocket::bind(config.listen).map_err(|source| RelayError::Bind {
            addr: config.listen,
            source,
        })?;
        let local_addr = listen.local_addr().map_err(io_err("listen address"))?;
        let (waker, wake_rx) =
            std::os::unix::net::UnixDatagram::pair().map_err(io_err("waker socket pair"))?;
        let shared = Arc::new(Shared {
            stop: AtomicBool::new(false),
            stats: Mutex::new(RelayStats::empty(config.max_routes)),
        });
        let engine = engine::Engine::new(config, listen, wake_rx, Arc::clone(&shared))?;
        let thread = std::thread::Builder::new()
            .name("petrel-netem".into())
            .spawn(move || engine.run())
            .map_err(io_err("spawn relay thread"))?;
        Ok(Relay {
            local_addr,
            shared,
            waker,
            thread: Some(thread),
        })
    }

    /// The address clients send to (the bound listen address).
    pub fn local_addr(&self) -> SocketAddr {
        self.local_addr
    }

    /// The latest counters; the relay thread refreshes them every 50 ms while
    /// traffic flows, so they may be up to 50 ms old.
    pub fn stats(&self) -> RelayStats {
        self.shared
            .stats
            .lock()
            .map_or_else(|p| p.into_inner().clone(), |s| s.clone())
    }

    /// Stops the relay (packets still held are discarded) and returns the final
    /// counters.
    ///
    /// # Errors
    /// The error that ended the relay thread, if one did.
    pub fn stop(mut self) -> Result<RelayStats, RelayError> {
        self.shutdown()
    }

    fn shutdown(&mut self) -> Result<RelayStats, RelayError> {
        self.shared.stop.store(true, Ordering::SeqCst);
        // A failed wake-up only delays the stop until the thread's next wake.
        let _ = self.waker.send(&[1]);
        match self.thread.take() {
            Some(t) => t.join().map_err(|_| RelayError::Panicked)?,
            None => Ok(self.stats()),
        }
    }
}

impl Drop for Relay {
    fn drop(&mut self) {
        // Errors surface through `stop`; a dropped relay has nobody to report to.
        let _ = self.shutdown();
    }
}

fn io_err(context: &'static str) -> impl Fn(io::Error) -> RelayError {
    move |source| RelayError::Io { context, source }
}
