//! Petrel's tokio runtime for reliable UDP: [`Endpoint`] and [`Connection`].
//!
//! A thin layer over the sans-IO state machines of `petrel-proto` (one
//! `petrel_proto::session::Session` per connection: KCP, optional FEC, keepalive and
//! close; see [`EndpointConfig::fec`]): it owns the UDP socket, routes datagrams to
//! connections, sends and receives many datagrams per system call through one I/O
//! driver per socket shard, sleeps until each connection's next deadline
//! (an idle connection has none, so it costs no wake-ups), and exposes an async message
//! API with backpressure.
//!
//! ```no_run
//! use bytes::Bytes;
//! use petrel::{Endpoint, EndpointConfig};
//!
//! # async fn demo() -> Result<(), Box<dyn std::error::Error>> {
//! let server = Endpoint::bind("127.0.0.1:7000".parse()?, EndpointConfig::server()).await?;
//! tokio::spawn(async move {
//!     while let Some(conn) = server.accept().await {
//!         tokio::spawn(async move {
//!             while let Ok(Some(msg)) = conn.recv().await {
//!                 if conn.send(msg).await.is_err() {
//!                     break;
//!                 }
//!             }
//!         });
//!     }
//! });
//!
//! let client = Endpoint::bind("127.0.0.1:0".parse()?, EndpointConfig::default()).await?;
//! let conn = client.connect("127.0.0.1:7000".parse()?).await?;
//! conn.send(Bytes::from_static(b"hello")).await?;
//! assert_eq!(conn.recv().await?.as_deref(), Some(&b"hello"[..]));
//! conn.close().await?;
//! # Ok(())
//! # }
//! ```
//!
//! What lives here: the sockets, the I/O drivers (batched send and receive, waiting on
//! a full socket buffer), the datagram router, per-connection timer tasks, the
//! application handles, and smux v1 stream multiplexing over a connection (what
//! kcptun runs over kcp-go, see [`Mode::KcpGo`]). What does not: protocol logic (`petrel-proto`), system calls
//! and socket creation (`petrel-sys`), impairment (`petrel-netem`), benchmarks
//! (`petrel-bench`).
//!
//! Modules, bottom to top (each imports only those before it): `config`, `error`,
//! `stats`; `io` (the socket shards, the handshake send queue, counters); `limits`
//! (per-prefix keys, the repeated-reply limiter); `connection_state` (one
//! connection's state, its shard's ready set, its timer task); `client_connect` (a
//! client handshake in progress); `router` (connections by peer and conv, the server
//! handshake); `driver` (one I/O task per socket shard: batched receive, dispatch,
//! flush of dirty connections, batched send — its file opens with the pipeline);
//! `connection_handle` (the application's [`Connection`]); `endpoint` (the public
//! [`Endpoint`]); [`smux`] (smux v1 streams over a `Connection`, for kcptun peers).

mod client_connect;
mod config;
mod connection_handle;
mod connection_state;
mod driver;
mod endpoint;
mod error;
mod io;
mod limits;
mod router;
pub mod smux;
mod stats;

pub use config::{
    ConfigError, EndpointConfig, Mode, DEFAULT_BUSY_POLL, MAX_BUSY_POLL, MAX_IO_THREADS,
};
pub use connection_handle::Connection;
pub use endpoint::{Endpoint, StatsReader};
pub use error::{ConnectError, ConnectionError};
pub use petrel_proto::fec::{FecConfig, FecScheme, ShapeMismatch};
pub use petrel_proto::handshake::{ControlConfig, HandshakeStats};
pub use petrel_proto::kcp::{KcpConfig, KcpPreset, KcpStats};
pub use petrel_proto::session::FecStats;
pub use petrel_sys::SocketBuffers;
pub use stats::{ConnectionStats, EndpointStats};
