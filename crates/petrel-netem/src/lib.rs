//! Petrel's network impairment emulator: a seeded link model and a UDP relay.
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
