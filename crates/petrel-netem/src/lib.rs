//! Petrel's network impairment emulator (`specs/netem.md`): a seeded, deterministic
//! link model and a UDP relay that applies it between real programs.
//!
//! # What lives here
//!
//! - **The link model, sans-IO** ([`Link`], [`Route`]): per direction and per route —
//!   random loss, periodic burst loss (K of every N), Gilbert–Elliott loss (netem's
//!   "gemodel"), their combination, fixed delay ± uniform jitter, duplication,
//!   reordering (a share of packets gets extra delay), serialization at a bit rate
//!   with drop-tail queue limits in packets and bytes, and a per-route capacity
//!   (default 8 MiB / 8192 packets). It is fed `(now, packet)` and polled for due
//!   packets and the next deadline; it never reads a clock. Each route direction
//!   draws from its own ChaCha8 stream derived from one seed ([`stream_rng`]), so a
//!   run is reproducible packet for packet.
//! - **Configuration and profiles** ([`LinkConfig`], [`RouteConfig`], [`Profile`]):
//!   `none`, `random`, `burst`, `soak`, `p2p`, each overridable field by field.
//! - **Counters** ([`LinkStats`], [`RelayStats`]): in, forwarded, dropped by cause,
//!   duplicated, reordered, queue peaks, configured vs observed loss and rate;
//!   all `serde::Serialize`.
//! - **The relay runtime** ([`Relay`]): `client ⇄ relay ⇄ server` on real sockets, one
//!   route (one upstream socket, like a NAT) per client address, bounded by
//!   [`RelayConfig::max_routes`]. Started and stopped in-process by tests and
//!   benchmarks; the `petrel netem` command wraps it.
//! - **Measurements of the relay** ([`bench`](mod@bench)): forwarding ceiling and delay accuracy,
//!   behind `petrel bench netem`.
//!
//! ```no_run
//! use petrel_netem::{Profile, Relay, RelayConfig};
//!
//! # fn main() -> Result<(), petrel_netem::RelayError> {
//! let server = "127.0.0.1:5000".parse().unwrap();
//! let mut config = RelayConfig::new("127.0.0.1:0".parse().unwrap(), server);
//! config.route = Profile::Random.route();
//! config.seed = 42;
//! let relay = Relay::start(config)?;
//! // ... point the client at relay.local_addr() and run it ...
//! let stats = relay.stop()?;
//! println!("upstream loss {:.2} %", stats.upstream_total.observed_loss() * 100.0);
//! # Ok(())
//! # }
//! ```
//!
//! Not here: the CLI (`petrel-cli`), transport benchmarks that *use* the relay
//! (`petrel-bench`), the system calls themselves (`epoll`, `recvmmsg`, `sendmmsg`,
//! CPU time: `petrel-sys`, so this crate has no `unsafe`), and kernel `tc netem` (unavailable on the machines this is built
//! for — the reason this crate exists).
//!
//! # Order of conditions
//!
//! Per packet: loss (burst, Gilbert–Elliott, random; every enabled condition steps
//! its state once per packet so each keeps its own pattern, and the first that hits
//! names the drop cause), then duplication (the copy goes through everything below on
//! its own), then the drop-tail queue and serialization at `rate_bps`, then the route
//! capacity, then `delay ± jitter (+ reorder_delay)`. Release time = serialization
//! finish + drawn delay. This is Linux netem's order (loss and duplication before
//! delay) with ns-3 point-to-point serialization in front of the propagation delay.
//!
//! # Timing design and its limits
//!
//! The relay runs on one dedicated thread (not tokio: tokio's timer wheel ticks at
//! 1 ms, which alone would break the ≤ 1 ms p99 bar). A min-heap keeps each link's
//! next deadline. The thread sleeps in `ppoll` on its epoll descriptor, with
//! nanosecond timeouts and the thread's timer slack set to 1 ns, until
//! [`RelayConfig::spin`] (default 100 µs, which covers `ppoll`'s overshoot with
//! 1 ns slack; `petrel bench netem` measures it) before the earliest deadline, then polls
//! sockets without blocking until the deadline passes and sends what is due with
//! `sendmmsg`. Reads use `recvmmsg`, at most 4 batches per socket per turn so a flood
//! cannot hold back due packets. With no traffic the thread blocks without timeout
//! and uses no CPU; with sparse traffic it spins at most `spin` per deadline.
//!
//! Limits: one thread forwards everything, so the ceiling is one core's worth of
//! system calls (see `petrel bench netem`); a heavily loaded machine delays the
//! thread itself, which shows up as lateness (scheduled vs actual send time,
//! [`RelayStats::lateness`]); arrival times are taken when a batch is read, so a
//! packet that waited in the socket buffer is scheduled from when the relay saw it;
//! when the socket send buffer is full the datagram is dropped and counted
//! (`send_dropped`) rather than queued again. Linux only (epoll, `recvmmsg`).
//! Routes expire after [`RelayConfig::route_idle_timeout`] without traffic (like a
//! NAT mapping; a client that comes back gets a new route and upstream port).
#![cfg_attr(test, allow(clippy::unwrap_used))]

pub mod bench;
mod config;
mod link;
mod profile;
mod relay;
mod route;
mod stats;

pub use config::{
    BurstLoss, ConfigError, GilbertElliott, LinkConfig, RouteCapacity, RouteConfig, MAX_DELAY,
};
pub use link::{Link, Packet, Room, Transmit, Verdict};
pub use profile::{Profile, UnknownProfile};
pub use relay::{
    DirectionReport, Lateness, Relay, RelayConfig, RelayError, RelayStats, RouteReport,
};
pub use route::{stream_rng, Direction, Route};
pub use stats::{DropCause, DropCounters, LinkStats};
