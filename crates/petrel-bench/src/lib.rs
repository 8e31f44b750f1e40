//! Petrel's benchmarks: load generators, measurement and JSON results
//! (`specs/benchmarks.md`).
//!
//! What lives here:
//! - [`record`]: every field of every benchmark's JSON result, in one place:
//!   the envelope (build, host, command line, parameters, rounds,
//!   min/median/max, errors, `ok`) and one file of typed parameter and round
//!   structs per benchmark (`RESULTS.md` lists them with units);
//! - [`measure`]: process CPU % (`getrusage`), peak RSS, HDR-histogram
//!   latency percentiles in µs;
//! - [`echo`]: the closed-loop loopback echo benchmark (§A), generic over a
//!   small transport trait, with raw UDP, TCP, Petrel RUDP, peer-library
//!   (WebSocket, KCP, QUIC) and TLS (TCP + rustls, WebSocket over rustls)
//!   adapters, server work per echo, and the sharded layout's client runtimes;
//! - [`rudp_bench`]: RUDP under impairment (§B), the echo harness through
//!   the `petrel-netem` relay; it builds its own runtimes because the runtime
//!   layout is one of its parameters; kcptun (`kcptun-client`/`-server` child
//!   processes, TCP echo behind them) runs through the same relay as the peer;
//! - [`goodput`]: bulk goodput of one connection over loopback or the `p2p`
//!   emulated link (§C), for RUDP, QUIC (Petrel or quinn controllers) and TCP,
//!   and for QUIC peers run as child processes (aioquic, the ngtcp2 examples, alone
//!   or against Petrel QUIC); random loss, RTT under load, CPU per GB, and the
//!   named BBR scenarios with their expected outcomes;
//! - [`idle`]: what N established, quiet connections cost (CPU, wake-ups, memory);
//! - [`reflector`]: the reflector fan-out load generator (§D), which runs
//!   the reflector under test in-process or as a `petrel reflector serve` child,
//!   and its soak with churn ([`reflector::soak`]: logouts, logins, group
//!   switches, bans, reconnects; every lost datagram attributed; the child's
//!   RSS and descriptors from start to end);
//! - [`table`]: the side-by-side summary table;
//! - [`ratios`]: RUDP against its baselines, FEC against ARQ-only and Petrel
//!   against kcptun, from the cases of one run;
//! - [`matrix`]: the TOML case matrix of `petrel bench matrix` (echo, rudp,
//!   goodput and reflector cases, options allow-listed per kind), each round's
//!   command line and time budget, and the merge of per-round results into one
//!   record per case;
//! - [`report`]: the self-contained HTML report rendered from a directory of
//!   result files: a one-screen summary, the seeds' published figures
//!   (`data/published.toml`) next to Petrel's for the same case, charts and
//!   tables.
//!
//! What does not: the transports themselves (`petrel`), the impairment
//! emulator (`petrel-netem`), the reflector (`petrel-reflector`), socket
//! creation with buffer sizes and the `/proc` readers (`petrel-sys`), the tokio
//! runtime of the loopback suite and the command line (`petrel-cli` builds
//! both).

#![cfg_attr(test, allow(clippy::unwrap_used))]

pub mod echo;
pub mod goodput;
pub mod idle;
pub mod matrix;
pub mod measure;
pub mod ratios;
pub mod record;
pub mod reflector;
pub mod report;
pub mod rudp_bench;
pub mod table;
