//! What the stage driver and its load-generator processes say to each other
//! ([`super::generator_pool`] ↔ [`super::generator_child`]): one JSON object
//! per line, the driver on the child's stdin, the child on its stdout.
//!
//! 1. driver → child: [`GeneratorSpec`] (its devices, where each logs in,
//!    the stage's schedule and receipts);
//! 2. child → driver: [`Report::LoggedIn`] once every device has tried to
//!    log in (its heartbeats and receive threads run from then on);
//! 3. driver → child: [`Command::Warmup`] then [`Command::Measure`], each
//!    with the wall-clock instant its first round is due, the same for every
//!    child; the child answers [`Report::Warmed`] and [`Report::Sent`];
//! 4. driver → child: [`Command::Stop`]; child → driver: [`Report::Tally`],
//!    then it exits.
//!
//! A child that cannot go on says [`Report::Failed`] and exits 1.

use std::io::{BufRead, Read};
use std::net::SocketAddr;

use serde::de::DeserializeOwned;
use serde::{Deserialize, Serialize};

use super::receipts::{ReceiptShape, ReceiptSnapshot};
use super::LoadError;

/// Longest line either side reads (a spec of 20 000 devices is ~0.6 MB; a
/// tally with the largest receipts ~200 MB).
pub(super) const MAX_LINE: u64 = 256 << 20;

/// One generator's share of a stage.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub(super) struct GeneratorSpec {
    /// Index of its first device among the stage's.
    pub first: usize,
    /// Where each of its devices logs in, in device order.
    pub entries: Vec<SocketAddr>,
    /// Each of its devices' receipt row, in device order.
    pub rows: Vec<usize>,
    /// Devices of the whole stage.
    pub devices: usize,
    /// Groups (device `i` is in group `i mod groups`; `0..groups` speak).
    pub groups: usize,
    /// Voice interval, ms.
    pub interval_ms: u64,
    /// Voice DATA bytes.
    pub payload: usize,
    /// The stage id in the measured frames.
    pub stage: u64,
    /// Warm-up rounds, sent with stage id 0.
    pub warmup_rounds: u64,
    /// Measured rounds.
    pub measured_rounds: u64,
    /// The stage's receipts, if it keeps them.
    pub receipts: Option<ReceiptShape>,
    /// Logins it starts per second at most (`None`: as fast as answered).
    pub login_per_s: Option<u32>,
}

/// Driver → generator.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "cmd", rename_all = "snake_case")]
pub(super) enum Command {
    /// Send the warm-up rounds, the first at this Unix time, ns.
    Warmup {
        /// When round 0 is due.
        at_unix_ns: u64,
    },
    /// Send the measured rounds, the first at this Unix time, ns.
    Measure {
        /// When the first measured round is due.
        at_unix_ns: u64,
    },
    /// Stop receiving and report the tally.
    Stop,
}

/// Generator → driver.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "report", rename_all = "snake_case")]
pub(super) enum Report {
    /// Every device tried to log in; `failed` did not make it.
    LoggedIn {
        /// Devices refused or unanswered.
        failed: usize,
    },
    /// The warm-up rounds went out.
    Warmed,
    /// The measured rounds went out.
    Sent {
        /// Voice frames its speakers sent.
        sent: u64,
        /// Datagrams those frames owe the stage's receivers.
        expected: u64,
    },
    /// What its receivers counted.
    Tally(GeneratorTally),
    /// It cannot go on.
    Failed {
        /// Why.
        error: String,
    },
}

/// One generator's receive counts over the stage.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub(super) struct GeneratorTally {
    /// Marked voice frames of the stage received.
    pub received: u64,
    /// `recv` failures.
    pub recv_errors: u64,
    /// Frames with the wrong Reserved.
    pub wrong_reserved: u64,
    /// Latency histogram, µs: (bucket value, count) of every recorded bucket.
    pub latency_us: Vec<(u64, u64)>,
    /// Its receipts, when the stage keeps them.
    pub receipts: Option<ReceiptSnapshot>,
}

/// Reads one line of `input` (at most [`MAX_LINE`] bytes) as a `T`; `None`
/// at the end of input.
///
/// # Errors
/// [`LoadError`] when reading fails or the line is too long or not a `T`.
pub(super) fn read_message<T: DeserializeOwned>(
    input: &mut impl BufRead,
) -> Result<Option<T>, LoadError> {
    let mut line = String::new();
    let n = input.by_ref().take(MAX_LINE).read_line(&mut line)?;
    if n == 0 {
        return Ok(None);
    }
    if !line.ends_with('\n') && n as u64 >= MAX_LINE {
        return Err(LoadError::Invalid(format!(
            "a generator message longer than {MAX_LINE} bytes"
        )));
    }
    serde_json::from_str(line.trim_end())
        .map(Some)
        .map_err(|e| LoadError::Invalid(format!("a generator message: {e}")))
}

/// `message` as one JSON line.
pub(super) fn line_of<T: Serialize>(message: &T) -> Result<String, LoadError> {
    let mut s = serde_json::to_string(message)
        .map_err(|e| LoadError::Invalid(format!("encoding a generator message: {e}")))?;
    s.push('\n');
    Ok(s)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn messages_round_trip_one_per_line() {
        let spec = GeneratorSpec {
            first: 20,
            entries: vec![SocketAddr::from(([127, 0, 0, 1], 4000)); 2],
            rows: vec![1, 2],
            devices: 60,
            groups: 2,
            interval_ms: 120,
            payload: 320,
            stage: 7,
            warmup_rounds: 8,
            measured_rounds: 16,
            receipts: Some(ReceiptShape {
                nodes: 3,
                groups: 2,
                first_round: 8,
                rounds: 16,
            }),
            login_per_s: Some(200),
        };
        let mut text = line_of(&spec).unwrap();
        text += &line_of(&Command::Measure { at_unix_ns: 5 }).unwrap();
        text += &line_of(&Report::Sent {
            sent: 3,
            expected: 87,
        })
        .unwrap();
        let mut input = text.as_bytes();
        assert_eq!(
            read_message::<GeneratorSpec>(&mut input).unwrap(),
            Some(spec)
        );
        assert_eq!(
            read_message::<Command>(&mut input).unwrap(),
            Some(Command::Measure { at_unix_ns: 5 })
        );
        assert_eq!(
            read_message::<Report>(&mut input).unwrap(),
            Some(Report::Sent {
                sent: 3,
                expected: 87
            })
        );
        assert_eq!(read_message::<Report>(&mut input).unwrap(), None);
        let mut junk = "{\"cmd\":\"dance\"}\n".as_bytes();
        assert!(read_message::<Command>(&mut junk).is_err());
    }
}
