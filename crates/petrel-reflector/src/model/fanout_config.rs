//! Fan-out configuration with the reference's defaults (draarl-v1 §4.3).

use serde::Deserialize;

use petrel_sys::range::{check_range, RangeError};

/// Fan-out knobs.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct FanoutConfig {
    /// Parallel send paths (reference `UDP.SendWorkers`), 1–32. Default 2.
    pub writers: usize,
    /// Whole frames queued at most (reference `UDP.FrameQueueSize`), 1–4096. Default 64.
    pub frame_queue: usize,
    /// Frames older than this are dropped unsent, ms (reference `MaxFrameAgeMS`), 1–10000. Default 500.
    pub max_frame_age_ms: u64,
    /// Datagrams per `sendmmsg` call, 1–1024. Default 64.
    pub batch: usize,
}

impl Default for FanoutConfig {
    fn default() -> Self {
        Self {
            writers: 2,
            frame_queue: 64,
            max_frame_age_ms: 500,
            batch: 64,
        }
    }
}

impl FanoutConfig {
    /// Checks every field against its range.
    pub fn validate(&self) -> Result<(), RangeError> {
        check_range("writers", self.writers, &(1..=32))?;
        check_range("frame_queue", self.frame_queue, &(1..=4096))?;
        check_range("max_frame_age_ms", self.max_frame_age_ms, &(1..=10_000))?;
        check_range("batch", self.batch, &(1..=1024))
    }
}
