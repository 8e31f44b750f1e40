//! The Rust snippets of Petrel's user guide (`docs/src/`), compiled and run as
//! doc tests: `cargo test -p petrel-guide --doc` (which `docs/check.sh` and
//! `cargo test --workspace` run).
//!
//! Each chapter is included whole with `include_str!`, so every Rust code block
//! of a chapter (and every block without a language, which rustdoc takes for
//! Rust) is a test, with the workspace's crates as its dependencies. This is
//! what `mdbook test` does, without its weak point: `mdbook test -L
//! target/debug/deps` fails when that directory holds two builds of one crate,
//! which a workspace's `target/` usually does. The crate compiles to nothing
//! outside `cargo test --doc`. Adding a chapter to `docs/src/SUMMARY.md` means
//! adding it here; `tests/chapters.rs` fails until it is.

#[cfg(doctest)]
#[doc = include_str!("../../../docs/src/introduction.md")]
pub struct Introduction;

#[cfg(doctest)]
#[doc = include_str!("../../../docs/src/getting-started.md")]
pub struct GettingStarted;

#[cfg(doctest)]
#[doc = include_str!("../../../docs/src/examples.md")]
pub struct Examples;

#[cfg(doctest)]
#[doc = include_str!("../../../docs/src/rudp/README.md")]
pub struct RudpReadme;

#[cfg(doctest)]
#[doc = include_str!("../../../docs/src/rudp/handshakes.md")]
pub struct RudpHandshakes;

#[cfg(doctest)]
#[doc = include_str!("../../../docs/src/rudp/fec.md")]
pub struct RudpFec;

#[cfg(doctest)]
#[doc = include_str!("../../../docs/src/rudp/congestion.md")]
pub struct RudpCongestion;

#[cfg(doctest)]
#[doc = include_str!("../../../docs/src/rudp/tuning.md")]
pub struct RudpTuning;

#[cfg(doctest)]
#[doc = include_str!("../../../docs/src/rudp/interop.md")]
pub struct RudpInterop;

#[cfg(doctest)]
#[doc = include_str!("../../../docs/src/rudp/quic.md")]
pub struct RudpQuic;

#[cfg(doctest)]
#[doc = include_str!("../../../docs/src/netem.md")]
pub struct Netem;

#[cfg(doctest)]
#[doc = include_str!("../../../docs/src/reflector/README.md")]
pub struct ReflectorReadme;

#[cfg(doctest)]
#[doc = include_str!("../../../docs/src/reflector/install.md")]
pub struct ReflectorInstall;

#[cfg(doctest)]
#[doc = include_str!("../../../docs/src/reflector/configure.md")]
pub struct ReflectorConfigure;

#[cfg(doctest)]
#[doc = include_str!("../../../docs/src/reflector/users.md")]
pub struct ReflectorUsers;

#[cfg(doctest)]
#[doc = include_str!("../../../docs/src/reflector/apps.md")]
pub struct ReflectorApps;

#[cfg(doctest)]
#[doc = include_str!("../../../docs/src/reflector/postgres.md")]
pub struct ReflectorPostgres;

#[cfg(doctest)]
#[doc = include_str!("../../../docs/src/reflector/metrics.md")]
pub struct ReflectorMetrics;

#[cfg(doctest)]
#[doc = include_str!("../../../docs/src/reflector/security.md")]
pub struct ReflectorSecurity;

#[cfg(doctest)]
#[doc = include_str!("../../../docs/src/reflector/centre-edge.md")]
pub struct ReflectorCentreEdge;

#[cfg(doctest)]
#[doc = include_str!("../../../docs/src/reflector/embedding.md")]
pub struct ReflectorEmbedding;

#[cfg(doctest)]
#[doc = include_str!("../../../docs/src/benchmarks/README.md")]
pub struct BenchmarksReadme;

#[cfg(doctest)]
#[doc = include_str!("../../../docs/src/benchmarks/running.md")]
pub struct BenchmarksRunning;

#[cfg(doctest)]
#[doc = include_str!("../../../docs/src/benchmarks/results.md")]
pub struct BenchmarksResults;

#[cfg(doctest)]
#[doc = include_str!("../../../docs/src/benchmarks/comparing.md")]
pub struct BenchmarksComparing;

#[cfg(doctest)]
#[doc = include_str!("../../../docs/src/contributing/README.md")]
pub struct ContributingReadme;

#[cfg(doctest)]
#[doc = include_str!("../../../docs/src/contributing/controller.md")]
pub struct ContributingController;

#[cfg(doctest)]
#[doc = include_str!("../../../docs/src/contributing/benchmark.md")]
pub struct ContributingBenchmark;

#[cfg(doctest)]
#[doc = include_str!("../../../docs/src/contributing/guide.md")]
pub struct ContributingGuide;
