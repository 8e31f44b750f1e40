//! What one load stage runs ([`LoadConfig`]), where the reflector under test
//! runs ([`ServerProcess`]), and why a stage fails ([`LoadError`]).

use petrel_reflector::model::FanoutConfig;
use petrel_reflector::runtime::server::ServerError;
use petrel_reflector::runtime::store::StoreError;
use petrel_sys::range::{check_range, RangeError};
use thiserror::Error;

/// Most UDP ghost receivers of one stage.
pub const MAX_GHOSTS: usize = 5000;
/// Most WebSocket receivers of one stage.
pub const MAX_WS: usize = 2000;

/// Load-generator parameters.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LoadConfig {
    /// Simulated devices, 2–20000.
    pub devices: usize,
    /// Groups (= simultaneous speakers), 1–1024, at most devices / 2.
    pub groups: usize,
    /// Voice interval per speaker, ms (≥ 10).
    pub interval_ms: u64,
    /// Voice DATA bytes, 32–710.
    pub payload: usize,
    /// Measurement time, s (1–600).
    pub duration_s: u64,
    /// Reflector send paths.
    pub writers: usize,
    /// Reflector frame-age limit, ms.
    pub max_frame_age_ms: u64,
    /// Android-style UDP ghost receivers (draarl-apps §2), 0–5000, logged
    /// in through the reflector's HTTP login and Type 1; spread over the
    /// groups like the devices.
    pub ghosts: usize,
    /// Web-style WebSocket receivers (draarl-apps §4), 0–2000, logged in
    /// the same way; spread over the groups like the devices.
    pub ws: usize,
    /// Where the reflector under test runs.
    pub server: ServerProcess,
}

/// Where the reflector under test runs.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub enum ServerProcess {
    /// In this process: its CPU is its threads' (`refl-*`), but its RSS
    /// cannot be told apart from the load generator's.
    #[default]
    InProcess,
    /// A child process, `<program> reflector serve` (the `petrel` binary),
    /// measured from `/proc/<child pid>`: CPU and RSS are the reflector's alone.
    Child(std::path::PathBuf),
}

impl Default for LoadConfig {
    fn default() -> Self {
        Self {
            devices: 100,
            groups: 1,
            interval_ms: 120,
            payload: 320,
            duration_s: 5,
            writers: 2,
            max_frame_age_ms: 120,
            ghosts: 0,
            ws: 0,
            server: ServerProcess::InProcess,
        }
    }
}

/// Why a run failed.
#[derive(Debug, Error)]
pub enum LoadError {
    /// A parameter is out of range.
    #[error("invalid parameter: {0}")]
    Invalid(String),
    /// Store setup failed.
    #[error("store: {0}")]
    Store(#[from] StoreError),
    /// The reflector failed to start.
    #[error("server: {0}")]
    Server(#[from] ServerError),
    /// A socket failed.
    #[error("io: {0}")]
    Io(#[from] std::io::Error),
    /// Devices did not authenticate.
    #[error("{0} devices failed to log in")]
    Login(usize),
    /// Devices did not authenticate through a stage's nodes; `counters`
    /// names each node's nonzero login counters, to say where they stopped.
    #[error("{failed} devices failed to log in (login counters per node: {counters})")]
    NodeLogin {
        /// Devices that were not logged in.
        failed: usize,
        /// `node: name=value …; node: …`.
        counters: String,
    },
}

impl LoadConfig {
    /// Checks parameter ranges.
    ///
    /// # Errors
    /// [`LoadError::Invalid`] naming the first parameter out of range.
    pub fn validate(&self) -> Result<(), LoadError> {
        let bad = |m: &str| Err(LoadError::Invalid(m.into()));
        // Shown as `{field}: {range}`, e.g. `devices: 2..=20000`.
        let out_of_range = |e: RangeError| LoadError::Invalid(format!("{}: {}", e.field, e.range));
        check_range("devices", self.devices, &(2..=20_000)).map_err(out_of_range)?;
        // `groups * 2 <= devices` is `groups <= devices / 2` without the overflow.
        check_range("groups", self.groups, &(1..=(self.devices / 2).min(1024))).map_err(|e| {
            LoadError::Invalid(format!("{}: {} (at most devices/2)", e.field, e.range))
        })?;
        if self.interval_ms < 10 {
            return bad("interval_ms: >= 10");
        }
        check_range("payload", self.payload, &(32..=710)).map_err(out_of_range)?;
        check_range("duration_s", self.duration_s, &(1..=600)).map_err(out_of_range)?;
        check_range("ghosts", self.ghosts, &(0..=MAX_GHOSTS)).map_err(out_of_range)?;
        check_range("ws", self.ws, &(0..=MAX_WS)).map_err(out_of_range)?;
        // The reflector's own ranges, checked before any stage starts.
        self.fanout()
            .validate()
            .map_err(|e| LoadError::Invalid(e.to_string()))
    }

    /// The reflector's fan-out settings for this stage.
    pub(super) fn fanout(&self) -> FanoutConfig {
        FanoutConfig {
            writers: self.writers,
            max_frame_age_ms: self.max_frame_age_ms,
            ..FanoutConfig::default()
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn range_errors_render_the_checked_range() {
        let ok = LoadConfig::default();
        ok.validate().unwrap();
        let msg = |c: LoadConfig| c.validate().unwrap_err().to_string();
        assert_eq!(
            msg(LoadConfig {
                devices: 1,
                ..ok.clone()
            }),
            "invalid parameter: devices: 2..=20000"
        );
        assert_eq!(
            msg(LoadConfig {
                groups: 51,
                ..ok.clone()
            }),
            "invalid parameter: groups: 1..=50 (at most devices/2)"
        );
        assert_eq!(
            msg(LoadConfig {
                payload: 711,
                ..ok.clone()
            }),
            "invalid parameter: payload: 32..=710"
        );
        assert_eq!(
            msg(LoadConfig {
                duration_s: 0,
                ..ok
            }),
            "invalid parameter: duration_s: 1..=600"
        );
    }
}
