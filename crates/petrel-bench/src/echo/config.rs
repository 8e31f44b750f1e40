//! Echo benchmark parameters and their validation.

use std::time::Duration;

use petrel_sys::range::{check_range, check_range_in, check_secs, RangeError};

use super::message::HEADER_LEN;

/// Largest payload (bytes): the largest UDP payload over IPv4
/// (65,535 − 20 IP − 8 UDP), the same bound for every protocol so cases
/// compare like with like.
pub const MAX_PAYLOAD: usize = 65_507;
/// Most clients one run may start.
pub const MAX_CLIENTS: usize = 1024;
/// Most messages one client may keep in flight.
pub const MAX_WINDOW: usize = 4096;
/// Longest warm-up or measured interval.
pub const MAX_INTERVAL: Duration = Duration::from_secs(3600);
/// Shortest measured interval: 1 ms, the resolution the flag is worth
/// giving in (a shorter one measures nothing).
pub const MIN_MEASURED: Duration = Duration::from_millis(1);
/// Most rounds one run may repeat.
pub const MAX_ROUNDS: u32 = 100;

/// Parameters of one echo run (`specs/benchmarks.md` §A). `Default` is the
/// spec's defaults: 1024 B, 1 client, window 1, plus 1 s warm-up, 3 s
/// measured, 1 round.
#[derive(Debug, Clone, PartialEq)]
pub struct EchoConfig {
    /// Message size including the 16-byte header (bytes), 16..=65507.
    pub payload: usize,
    /// Concurrent clients, 1..=1024.
    pub clients: usize,
    /// Messages in flight per client, 1..=4096.
    pub window: usize,
    /// Warm-up before measuring, 0..=3600 s.
    pub warmup: Duration,
    /// Measured interval, 0.001..=3600 s.
    pub measured: Duration,
    /// Independent repetitions (fresh server and clients each), 1..=100.
    pub rounds: u32,
}

impl Default for EchoConfig {
    fn default() -> Self {
        Self {
            payload: 1024,
            clients: 1,
            window: 1,
            warmup: Duration::from_secs(1),
            measured: Duration::from_secs(3),
            rounds: 1,
        }
    }
}

/// A parameter outside its allowed range.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("invalid --{field} = {value}: must be in {range}")]
pub struct EchoConfigError {
    /// The offending field, as named on the command line (the message puts
    /// `--` before it).
    pub field: &'static str,
    /// The value given.
    pub value: String,
    /// The allowed range, rendered from the range that was checked.
    pub range: String,
}

impl From<RangeError> for EchoConfigError {
    fn from(e: RangeError) -> Self {
        Self {
            field: e.field,
            value: e.value,
            range: e.range,
        }
    }
}

impl EchoConfig {
    /// Checks every field against its documented range.
    ///
    /// # Errors
    /// The first [`EchoConfigError`], naming the field and range.
    pub fn validate(&self) -> Result<(), EchoConfigError> {
        check_range_in(
            "payload",
            self.payload,
            &(HEADER_LEN..=MAX_PAYLOAD),
            "bytes",
        )?;
        check_range("clients", self.clients, &(1..=MAX_CLIENTS))?;
        check_range("window", self.window, &(1..=MAX_WINDOW))?;
        // Both are given in seconds (`--warmup`, `--seconds`), so the
        // errors render in seconds.
        check_secs("warmup", self.warmup, &(Duration::ZERO..=MAX_INTERVAL))?;
        check_secs("seconds", self.measured, &(MIN_MEASURED..=MAX_INTERVAL))?;
        check_range("rounds", self.rounds, &(1..=MAX_ROUNDS))?;
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn default_is_valid_and_matches_the_spec() {
        let c = EchoConfig::default();
        assert_eq!((c.payload, c.clients, c.window), (1024, 1, 1));
        assert_eq!(c.validate(), Ok(()));
    }

    #[test]
    fn each_bound_names_its_field() {
        let cases: [(&str, EchoConfig); 7] = [
            (
                "payload",
                EchoConfig {
                    payload: 15,
                    ..Default::default()
                },
            ),
            (
                "payload",
                EchoConfig {
                    payload: 65_508,
                    ..Default::default()
                },
            ),
            (
                "clients",
                EchoConfig {
                    clients: 0,
                    ..Default::default()
                },
            ),
            (
                "window",
                EchoConfig {
                    window: 0,
                    ..Default::default()
                },
            ),
            (
                "seconds",
                EchoConfig {
                    measured: Duration::ZERO,
                    ..Default::default()
                },
            ),
            (
                "warmup",
                EchoConfig {
                    warmup: Duration::from_secs(3601),
                    ..Default::default()
                },
            ),
            (
                "rounds",
                EchoConfig {
                    rounds: 0,
                    ..Default::default()
                },
            ),
        ];
        for (field, cfg) in cases {
            let err = cfg.validate().unwrap_err();
            assert_eq!(err.field, field);
            assert!(err.to_string().contains(field), "{err}");
        }
        let err = EchoConfig {
            payload: 15,
            ..Default::default()
        }
        .validate()
        .unwrap_err();
        assert_eq!(
            err.to_string(),
            "invalid --payload = 15 bytes: must be in 16..=65507 bytes"
        );
        let err = EchoConfig {
            measured: Duration::ZERO,
            ..Default::default()
        }
        .validate()
        .unwrap_err();
        assert_eq!(
            err.to_string(),
            "invalid --seconds = 0 s: must be in 0.001..=3600 s"
        );
        let edge = EchoConfig {
            payload: 16,
            warmup: Duration::ZERO,
            ..Default::default()
        };
        assert_eq!(edge.validate(), Ok(()));
    }
}
