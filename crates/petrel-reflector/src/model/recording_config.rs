//! Voice recording settings (draarl-v1 §5.3).

use serde::Deserialize;

use petrel_sys::range::{check_range, RangeError};

/// Recording settings; defaults are the reference's `comm.*` site settings.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct RecordingConfig {
    /// Record voice at all. Default false.
    pub enabled: bool,
    /// Directory for `.raw` files. Default `recordings`.
    pub dir: String,
    /// Recordings shorter than this are discarded, ms. Default 500.
    pub min_duration_ms: u64,
    /// Recordings are split at this length, s (1–3600). Default 300.
    pub max_duration_s: u64,
    /// Silence that ends a recording, ms (100–10000). Default 600.
    pub gap_ms: u64,
    /// Talkers recorded at once (1–4096), split evenly between ingress
    /// shards (at least 1 each). Default 64.
    pub max_active: usize,
    /// Disk quota for the recording files the store lists, bytes (1 MiB–
    /// 64 TiB); beyond it the oldest recordings are deleted first (counted
    /// in `history_recordings_pruned`). Default 4 GiB.
    pub max_total_bytes: u64,
}

impl Default for RecordingConfig {
    fn default() -> Self {
        Self {
            enabled: false,
            dir: "recordings".into(),
            min_duration_ms: 500,
            max_duration_s: 300,
            gap_ms: 600,
            max_active: 64,
            max_total_bytes: 4 << 30,
        }
    }
}

impl RecordingConfig {
    /// Checks every field against its range.
    pub fn validate(&self) -> Result<(), RangeError> {
        check_range(
            "recording.min_duration_ms",
            self.min_duration_ms,
            &(0..=3_600_000),
        )?;
        check_range("recording.max_duration_s", self.max_duration_s, &(1..=3600))?;
        check_range("recording.gap_ms", self.gap_ms, &(100..=10_000))?;
        check_range("recording.max_active", self.max_active, &(1..=4096))?;
        check_range(
            "recording.max_total_bytes",
            self.max_total_bytes,
            &(1 << 20..=64 << 40),
        )
    }

    /// The share of one of `shards` recorders: `max_active` divided evenly,
    /// at least 1 each.
    pub fn per_shard(&self, shards: usize) -> Self {
        Self {
            max_active: (self.max_active / shards.max(1)).max(1),
            ..self.clone()
        }
    }
}
