//! Why an echo run fails, and its outcome as recorded and tabulated (the
//! recorded fields are [`crate::record::echo`]).

use std::io;

use super::EchoConfigError;
use crate::record::echo::EchoRound;
use crate::record::{RecordError, ResultRecord};
use crate::table::Row;

/// Why an echo run could not produce a result (as opposed to a result that is
/// not `ok`).
#[derive(Debug, thiserror::Error)]
pub enum EchoError {
    /// A parameter is out of range.
    #[error(transparent)]
    Config(#[from] EchoConfigError),
    /// The server or a client could not be set up.
    #[error("cannot {what}: {source}")]
    Setup {
        /// What was being set up.
        what: String,
        /// The I/O error.
        source: io::Error,
    },
    /// The result could not be recorded.
    #[error(transparent)]
    Record(#[from] RecordError),
    /// A harness task panicked or was cancelled.
    #[error("benchmark task failed: {0}")]
    Task(String),
}

/// The outcome of [`run_echo`](super::run_echo): the record to write and the typed rounds.
#[derive(Debug, Clone)]
pub struct EchoReport {
    /// The JSON result envelope.
    pub record: ResultRecord,
    /// The rounds, typed.
    pub rounds: Vec<EchoRound>,
}

impl EchoReport {
    /// The summary-table row: medians across rounds, errors summed.
    pub fn summary_row(&self) -> Row {
        Row::from_record(&self.record)
    }
}
