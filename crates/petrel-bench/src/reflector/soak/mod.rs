//! The soak of `petrel bench reflector --soak SECONDS` (issue 14, item 8):
//! the devices of a stage keep talking in several groups for a long time
//! while, on a seeded schedule, they log out and in, switch groups, get
//! banned and unbanned and reconnect from new source ports. Every datagram a
//! frame owed a receiver is either received or attributed to a cause (see
//! [`SoakLoss`](crate::record::reflector_soak::SoakLoss)); the reflector
//! child's RSS and open descriptors are compared from the end of the
//! warm-up to the end. The soak fails on unattributed loss, RSS growth over
//! [`RSS_GROWTH_LIMIT_PCT`] or any descriptor growth.
//!
//! Files, one concern each: the churn schedule (`plan`), carrying out its
//! actions (`actions`), the device timelines and the loss attribution
//! (`ledger`), who received which frame (`book`), the receive threads that
//! follow sockets as they change (`receivers`), and the run itself (`run`).
//! The reflector runs as a child process only: its RSS and descriptors must
//! be its own.

mod actions;
mod book;
mod ledger;
mod plan;
mod receivers;
mod run;

use petrel_sys::range::check_range;

use super::{child, store_setup, LoadConfig, LoadError, ServerProcess};
use crate::record::reflector_soak::SoakResult;

/// Voice and churn run this long before the measurement starts unless
/// [`SoakConfig::warmup_s`] says otherwise, s.
pub const DEFAULT_WARMUP_S: u64 = 10;
/// After a churn action ends, how long a receiver's misses still count as
/// `churn_window`, ms: the admin API answers once the store is written, and
/// the directory reload reaches the shards after it.
pub const SETTLE_AFTER_MS: u64 = 2_000;
/// A round is tallied this long after it was sent, ms (late datagrams after
/// it are counted as `late`).
pub const FINALIZE_MS: u64 = 3_000;
/// The soak fails when the child's RSS grew more than this from the end of
/// the warm-up, %.
pub const RSS_GROWTH_LIMIT_PCT: f64 = 5.0;

/// What a soak runs.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SoakConfig {
    /// Devices, groups, interval, payload and reflector settings
    /// (`duration_s` is not used; `server` must be a child).
    pub load: LoadConfig,
    /// Measured time after the warm-up, s (10–86 400).
    pub soak_s: u64,
    /// Voice and churn before the measurement, s (10–3 600). The RSS and
    /// descriptor baseline is read at its end, so a long soak wants a
    /// warm-up that lets every table and allocator arena of the reflector
    /// reach its steady size under churn (minutes, not seconds).
    pub warmup_s: u64,
    /// Seed of the churn schedule.
    pub seed: u64,
    /// Churn actions started per second (1–1000).
    pub churn_per_s: u32,
}

impl SoakConfig {
    /// Checks the ranges of the stage settings and of the soak's own.
    ///
    /// # Errors
    /// [`LoadError::Invalid`] naming the first parameter out of range.
    pub fn validate(&self) -> Result<(), LoadError> {
        self.load.validate()?;
        let invalid = |e: petrel_sys::range::RangeError| {
            LoadError::Invalid(format!("{}: {}", e.field, e.range))
        };
        check_range("soak", self.soak_s, &(10..=86_400)).map_err(invalid)?;
        check_range("warmup_s", self.warmup_s, &(10..=3_600)).map_err(invalid)?;
        check_range("churn_per_s", self.churn_per_s, &(1..=1000)).map_err(invalid)?;
        // The soak's voice payload also carries the group (bytes 32..40).
        check_range("payload", self.load.payload, &(40..=710))
            .map_err(|e| LoadError::Invalid(format!("{}: {} with --soak", e.field, e.range)))?;
        if self.load.server == ServerProcess::InProcess {
            return Err(LoadError::Invalid(
                "--soak runs the reflector as a child (its RSS and descriptors must be its own)"
                    .into(),
            ));
        }
        Ok(())
    }

    /// Where misses around a churn action start counting as `churn_window`:
    /// this long before the action, ms (frames still on their way when a
    /// socket closes).
    pub fn settle_before_ms(&self) -> u64 {
        self.load.max_frame_age_ms + 500
    }
}

/// Sets up a fresh store and reflector child, logs every device in and runs
/// the soak.
///
/// # Errors
/// [`LoadError`] when `cfg` is out of range, the store or the child cannot
/// be set up, a socket fails, or devices cannot log in at the start.
pub async fn run(cfg: &SoakConfig) -> Result<SoakResult, LoadError> {
    cfg.validate()?;
    let ServerProcess::Child(program) = cfg.load.server.clone() else {
        return Err(LoadError::Invalid("--soak needs a child reflector".into()));
    };
    let db_path = std::env::temp_dir().join(format!("petrel-refl-soak-{}.db", std::process::id()));
    let db = db_path.to_string_lossy().into_owned();
    let result = async {
        let group_ids = store_setup::populate(&cfg.load, &db).await?;
        let (cfg, db) = (cfg.clone(), db.clone());
        tokio::task::spawn_blocking(move || {
            let server = child::ServerChild::start(&program, &db, &cfg.load.fanout())?;
            run::soak(&cfg, &server, &group_ids)
        })
        .await
        .map_err(|e| LoadError::Invalid(e.to_string()))?
    }
    .await;
    for ext in ["", "-wal", "-shm"] {
        let _ = std::fs::remove_file(format!("{db}{ext}"));
    }
    result
}
