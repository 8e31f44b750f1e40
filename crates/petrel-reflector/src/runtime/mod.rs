//! The runtime around the sans-IO core: everything that owns a thread, a
//! socket, a lock, a clock or the database.
//!
//! One UDP socket is read by the ingress reader (`shard.rs`), which
//! rate-limits each datagram with the core's [`Ingress`](crate::core::Ingress)
//! front and queues it for the shard thread owning its device; each shard
//! thread runs one [`Reflector`](crate::core::Reflector) over the
//! [`SharedTables`] and carries out what it polls: replies on the socket,
//! frames to the [`fanout`] writers, password checks to the [`verifier`]
//! pool (each answered on that shard's own queue), store events and
//! recordings to the store writer (`store_writer.rs`), which keeps the text
//! history under its byte cap (`text_history.rs`, also the age limit at
//! each reload) and writes recording files under fresh names within their
//! disk quota (`recording_files.rs`). The reader also drains the socket's
//! ICMP errors (`icmp.rs`) and reports unreachable endpoints to every shard.
//! Tokio tasks reload the directory and serve [`http`] (routes and
//! per-request limits; the accept loop in `http_server.rs`, with the
//! connection caps and idle eviction of `http_connections.rs`) with the
//! operator [`dashboard`]; [`stats`] and [`http_stats`] gather the
//! counters. With `[interconnect]`, the centre's TLS control server for
//! edges runs beside them ([`interconnect`], which also holds the edge's
//! control client).

pub mod app_accounts;
pub mod app_auth_stats;
pub mod app_authority;
pub mod app_http;
pub mod authenticated_user;
pub mod dashboard;
pub mod fanout;
pub mod http;
mod http_connections;
mod http_server;
pub mod http_stats;
mod icmp;
pub mod interconnect;
mod radio_routes;
mod recording_files;
pub mod server;
mod server_error;
mod session_revocation;
mod shard;
mod shared_tables;
pub mod stats;
pub mod store;
mod store_writer;
mod text_history;
pub mod verifier;
mod wall_clock;
pub mod websocket;
mod websocket_hub;

pub use icmp::IcmpStats;
pub use radio_routes::RoutingBody;
pub use shared_tables::{SharedTables, DOMAIN_STRIPES};
pub use websocket_hub::{WebSocketHub, WebSocketStats, WRITE_QUEUE};
