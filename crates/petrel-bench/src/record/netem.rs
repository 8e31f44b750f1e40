//! The emulator benchmark (`benchmark` = `"netem"`, `petrel bench netem`):
//! its parameters and its one round. The measurements' own fields are
//! `petrel_netem::bench`'s ([`CeilingConfig`], [`AccuracyConfig`],
//! [`CeilingResult`], [`AccuracyResult`]), recorded as they serialise there.

use petrel_netem::bench::{AccuracyConfig, AccuracyResult, CeilingConfig, CeilingResult};
use serde::{Deserialize, Serialize};

/// Which measurements ran.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum NetemMode {
    /// The forwarding ceiling only.
    Ceiling,
    /// The delay accuracy only.
    Accuracy,
    /// Both.
    Both,
}

/// Every parameter of `petrel bench netem`, as recorded in `parameters`.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct NetemParameters {
    /// Which measurements ran.
    pub mode: NetemMode,
    /// Forwarding-ceiling parameters (recorded even when it did not run).
    pub ceiling: CeilingConfig,
    /// Delay-accuracy parameters (recorded even when it did not run).
    pub accuracy: AccuracyConfig,
    /// `/proc/loadavg` at the start (the 1, 5 and 15-minute load averages,
    /// runnable/total tasks, last pid): the machine may be shared, and load
    /// moves the numbers.
    pub loadavg_at_start: Option<String>,
}

/// The one round of `petrel bench netem`: whichever measurements ran.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct NetemRound {
    /// The forwarding ceiling, when it ran.
    pub ceiling: Option<CeilingResult>,
    /// The delay accuracy, when it ran.
    pub delay_accuracy: Option<AccuracyResult>,
}
