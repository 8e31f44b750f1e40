//! Petrel's congestion controllers behind quinn's plug-in traits
//! (`quinn::congestion::Controller` / `ControllerFactory`, quinn 0.11).
//!
//! What lives here: [`PetrelController`], which feeds quinn's per-packet callbacks to
//! any [`petrel_proto::cc::CongestionController`] with the delivery-rate stamps BBR
//! needs (quinn's trait carries none), and [`PetrelControllerFactory`], which builds
//! one per connection from a [`CongestionKind`](petrel_proto::cc::CongestionKind);
//! and [`transport`], the Petrel QUIC transport: quinn server and client endpoints
//! (rustls/ring, a [`SelfSigned`] certificate) running a Petrel or a quinn controller
//! ([`QuicCongestion`]) with windows sized for bulk transfer ([`QuicTransportConfig`]).
//!
//! What does not: the controllers themselves (`petrel_proto::cc`), and pacing. quinn
//! paces with its own token bucket at 1.25·cwnd/srtt and does not read a controller's
//! pacing rate (research notes §3.4), so on quinn only the window of a Petrel
//! controller takes effect; its pacing rate is reported in `metrics()` for qlog.
//!
//! ```no_run
//! use std::sync::Arc;
//! use petrel_proto::cc::CongestionKind;
//! use petrel_quic::PetrelControllerFactory;
//!
//! let mut transport = quinn::TransportConfig::default();
//! transport.congestion_controller_factory(Arc::new(PetrelControllerFactory::new(
//!     CongestionKind::BbrV3,
//! )));
//! ```

#![cfg_attr(test, allow(clippy::unwrap_used))]

mod adapter;
mod factory;
pub mod transport;

pub use adapter::PetrelController;
pub use factory::PetrelControllerFactory;
pub use transport::{QuicCongestion, QuicTransportConfig, SelfSigned};
