//! The fan-out engine (draarl-v1 §4.3, with the §9 improvements): a bounded
//! whole-frame queue, one dispatcher and parallel send paths, each sending
//! its partition of a frame's receivers with batched `sendmmsg` on Linux.

mod engine;
mod queue;
mod send;
mod stats;

pub use crate::model::FanoutConfig;
pub use engine::{ConnectionSink, FanoutEngine};
pub use queue::{FrameQueue, Push};
pub use send::{send_to_many, SendBatch, SendReport};
pub use stats::{FanoutStats, FanoutStatsSnapshot};
