//! Fan-out configuration with the reference's defaults (draarl-v1 §4.3).

use serde::Deserialize;

use petrel_sys::range::{check_range, RangeError};

/// Fan-out knobs.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct FanoutConfig {
    /// Parallel send paths (reference `UDP.SendWorkers`), 1–32. Default 2.
    pub writers: usize,
    /// Whole voice frames queued at most (reference `UDP.FrameQueueSize`), 1–4096. Default 64.
    pub frame_queue: usize,
    /// Text frames queued at most, apart from voice (1–4096): a full text
    /// queue evicts its oldest text, never a voice frame. Default 16.
    pub text_queue: usize,
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
            text_queue: 16,
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
        check_range("text_queue", self.text_queue, &(1..=4096))?;
        check_range("max_frame_age_ms", self.max_frame_age_ms, &(1..=10_000))?;
        check_range("batch", self.batch, &(1..=1024))
    }
}
