//! Every field of every benchmark's JSON result, in one place.
//!
//! A result file is one [`ResultRecord`] (the envelope: schema version,
//! benchmark, case, command line, build and git revision, host, socket
//! buffers, summary, errors, verdict). Its `parameters` object and each
//! element of its `rounds` array are written from the typed structs of one
//! file per benchmark kind:
//!
//! | `benchmark` | `parameters` | one element of `rounds` |
//! |---|---|---|
//! | `echo` | [`echo::EchoParameters`] | [`echo::EchoRound`] |
//! | `rudp` | [`rudp::RudpParameters`] | [`rudp::RudpRound`] |
//! | `rudp` (kcptun peer) | [`rudp::KcptunParameters`] | [`rudp::KcptunRound`] |
//! | `goodput` | [`goodput::GoodputParameters`] | [`goodput::GoodputRound`] |
//! | `idle` | [`idle::IdleParameters`] | [`idle::IdleReport`] |
//! | `netem` | [`netem::NetemParameters`] | [`netem::NetemRound`] |
//! | `reflector` | [`reflector::ReflectorParameters`] | [`reflector::LoadResult`] |
//! | `reflector-soak` | [`reflector_soak::SoakParameters`] | [`reflector_soak::SoakResult`] |
//! | `reflector-cluster` | [`reflector_cluster::ClusterParameters`] | [`reflector_cluster::ClusterStage`] |
//!
//! Petrel endpoints' I/O counters ([`endpoint_io::EndpointIo`]) appear in echo
//! rounds (`server_io`) and goodput sender stats (`sender_io`, `receiver_io`).
//!
//! Every field's doc comment gives its unit. The same schema, as tables, is
//! `crates/petrel-bench/RESULTS.md`; a test fails when a field is missing there.
//!
//! These modules hold only data: the runners that fill them (and their
//! constructors) live with each benchmark, so nothing here imports a benchmark
//! module. Types owned by other crates (`petrel_netem`'s link and relay
//! counters) appear as they serialise there.

mod envelope;

pub mod echo;
pub mod endpoint_io;
pub mod goodput;
pub mod idle;
pub mod netem;
pub mod reflector;
pub mod reflector_cluster;
pub mod reflector_soak;
pub mod rudp;

pub use envelope::{
    rfc3339_utc, BuildInfo, HostInfo, Percentiles, RecordError, ResultRecord, Spread,
    SCHEMA_VERSION,
};
pub use petrel_sys::socket::ServerClientBuffers;
