//! Parameters of the RUDP-under-impairment benchmark and their validation.

use std::fmt;
use std::time::Duration;

use petrel::{FecConfig, FecScheme};
use petrel_netem::{LinkConfig, Profile, MAX_DELAY};
use petrel_sys::range::{check_range, RangeError};
use serde::Serialize;

use crate::echo::{EchoConfig, EchoConfigError};
pub use crate::record::rudp::{FecMode, IoModel};

/// Most runtimes `io_threads` may ask for.
pub const MAX_IO_THREADS: usize = 64;

impl FecMode {
    /// The FEC setting of every endpoint: `petrel`'s defaults with this scheme.
    pub fn config(self) -> FecConfig {
        let scheme = match self {
            FecMode::None => FecScheme::None,
            FecMode::Fixed => FecScheme::Fixed {
                data_shards: 8,
                parity_shards: 2,
            },
            FecMode::Adaptive => FecScheme::ADAPTIVE_DEFAULT,
        };
        FecConfig {
            scheme,
            ..FecConfig::default()
        }
    }
}

impl fmt::Display for FecMode {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            FecMode::None => "none",
            FecMode::Fixed => "fixed",
            FecMode::Adaptive => "adaptive",
        })
    }
}

/// Field-by-field overrides of a profile's link conditions (both directions).
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize)]
pub struct LinkOverrides {
    /// Random loss per packet, fraction 0.0..=1.0.
    pub loss: Option<f64>,
    /// One-way delay.
    pub delay: Option<Duration>,
    /// Duplication probability per packet, fraction 0.0..=1.0.
    pub duplicate: Option<f64>,
    /// Probability per packet of the reorder extra delay, fraction 0.0..=1.0.
    pub reorder: Option<f64>,
}

impl LinkOverrides {
    /// `profile`'s conditions with these overrides applied.
    pub fn apply(&self, profile: Profile) -> LinkConfig {
        let mut link = profile.link();
        if let Some(v) = self.loss {
            link.random_loss = v;
        }
        if let Some(v) = self.delay {
            link.delay = v;
        }
        if let Some(v) = self.duplicate {
            link.duplicate = v;
        }
        if let Some(v) = self.reorder {
            link.reorder = v;
        }
        link
    }
}

/// Everything a `petrel bench rudp` run needs. `Default` is `specs/benchmarks.md` §B:
/// 4 clients × 16 in flight × 1024 B, 2 s warm-up, 3 s measured, 3 rounds from seed
/// 42, profile `none`, ARQ only, one current-thread runtime.
#[derive(Debug, Clone, PartialEq)]
pub struct RudpBenchConfig {
    /// Payload, clients, window, warm-up, measured interval and rounds.
    pub echo: EchoConfig,
    /// Runtime layout.
    pub io_model: IoModel,
    /// Workers of the shared runtime, or number of shard runtimes; 1..=64.
    pub io_threads: usize,
    /// FEC of every connection.
    pub fec: FecMode,
    /// Named impairment of both directions; `none`, `random`, `burst` or `soak`.
    pub profile: Profile,
    /// Overrides of the profile.
    pub overrides: LinkOverrides,
    /// Seed of round 0; round `i` seeds the relay with `seed + i`.
    pub seed: u64,
}

impl Default for RudpBenchConfig {
    fn default() -> Self {
        Self {
            echo: EchoConfig {
                payload: 1024,
                clients: 4,
                window: 16,
                warmup: Duration::from_secs(2),
                measured: Duration::from_secs(3),
                rounds: 3,
            },
            io_model: IoModel::Shared,
            io_threads: 1,
            fec: FecMode::None,
            profile: Profile::None,
            overrides: LinkOverrides::default(),
            seed: 42,
        }
    }
}

/// Why a configuration cannot run.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum RudpConfigError {
    /// An echo parameter is out of range.
    #[error(transparent)]
    Echo(#[from] EchoConfigError),
    /// Another field is out of range.
    #[error("invalid {field} = {value}: must be {range}")]
    Field {
        /// The field, as named on the command line.
        field: &'static str,
        /// The value given.
        value: String,
        /// The allowed range.
        range: String,
    },
}

fn field(field: &'static str, value: impl fmt::Display, range: &str) -> RudpConfigError {
    RudpConfigError::Field {
        field,
        value: value.to_string(),
        range: range.to_owned(),
    }
}

/// `e` as a [`RudpConfigError::Field`] whose range reads `{before} {range}`.
fn out_of_range(e: RangeError, before: &str) -> RudpConfigError {
    RudpConfigError::Field {
        field: e.field,
        value: e.value,
        range: format!("{before} {}", e.range),
    }
}

fn check_fraction(name: &'static str, v: Option<f64>) -> Result<(), RudpConfigError> {
    // Checked as the percentage the flag takes; NaN and ±inf fall outside.
    match v {
        Some(v) => check_range(name, v * 100.0, &(0.0..=100.0))
            .map_err(|e| out_of_range(e, "a percentage in")),
        None => Ok(()),
    }
}

impl RudpBenchConfig {
    /// Checks every field.
    ///
    /// # Errors
    /// The first field out of range, naming it and its range.
    pub fn validate(&self) -> Result<(), RudpConfigError> {
        self.echo.validate()?;
        check_range("io-threads", self.io_threads, &(1..=MAX_IO_THREADS))
            .map_err(|e| out_of_range(e, "in"))?;
        if self.io_model == IoModel::Sharded && self.io_threads > self.echo.clients {
            return Err(field(
                "io-threads",
                self.io_threads,
                "at most --clients with --io-model sharded (each shard owns ≥ 1 client)",
            ));
        }
        if !matches!(
            self.profile,
            Profile::None | Profile::Random | Profile::Burst | Profile::Soak
        ) {
            return Err(field(
                "profile",
                self.profile,
                "one of none, random, burst, soak",
            ));
        }
        check_fraction("loss", self.overrides.loss)?;
        check_fraction("duplicate", self.overrides.duplicate)?;
        check_fraction("reorder", self.overrides.reorder)?;
        if let Some(d) = self.overrides.delay {
            check_range("delay-ms", d, &(Duration::ZERO..=MAX_DELAY))
                .map_err(|e| out_of_range(e, "in"))?;
        }
        if self.seed.checked_add(u64::from(self.echo.rounds)).is_none() {
            return Err(field("seed", self.seed, "at most 2^64 - 1 - rounds"));
        }
        Ok(())
    }

    /// Link conditions of each direction: the profile with the overrides applied.
    pub fn link(&self) -> LinkConfig {
        self.overrides.apply(self.profile)
    }

    /// Relay seed of round `round` (`seed + round`).
    pub fn round_seed(&self, round: u32) -> u64 {
        self.seed.wrapping_add(u64::from(round))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn default_is_the_spec_and_valid() {
        let c = RudpBenchConfig::default();
        assert_eq!(
            (c.echo.clients, c.echo.window, c.echo.payload),
            (4, 16, 1024)
        );
        assert_eq!((c.echo.rounds, c.seed), (3, 42));
        assert_eq!(c.validate(), Ok(()));
    }

    #[test]
    fn bad_fields_are_named() {
        let cases: [(&str, RudpBenchConfig); 6] = [
            (
                "io-threads",
                RudpBenchConfig {
                    io_threads: 0,
                    ..Default::default()
                },
            ),
            (
                "io-threads",
                RudpBenchConfig {
                    io_model: IoModel::Sharded,
                    io_threads: 5,
                    ..Default::default()
                },
            ),
            (
                "profile",
                RudpBenchConfig {
                    profile: Profile::P2p,
                    ..Default::default()
                },
            ),
            (
                "loss",
                RudpBenchConfig {
                    overrides: LinkOverrides {
                        loss: Some(1.5),
                        ..Default::default()
                    },
                    ..Default::default()
                },
            ),
            (
                "delay-ms",
                RudpBenchConfig {
                    overrides: LinkOverrides {
                        delay: Some(Duration::from_secs(61)),
                        ..Default::default()
                    },
                    ..Default::default()
                },
            ),
            (
                "seed",
                RudpBenchConfig {
                    seed: u64::MAX,
                    ..Default::default()
                },
            ),
        ];
        for (name, cfg) in cases {
            let err = cfg.validate().unwrap_err();
            assert!(err.to_string().contains(name), "{name}: {err}");
        }
    }

    #[test]
    fn overrides_replace_profile_fields_only() {
        let c = RudpBenchConfig {
            profile: Profile::Random,
            overrides: LinkOverrides {
                loss: Some(0.1),
                delay: Some(Duration::from_millis(3)),
                ..Default::default()
            },
            ..Default::default()
        };
        let link = c.link();
        assert_eq!(link.random_loss, 0.1);
        assert_eq!(link.delay, Duration::from_millis(3));
        assert_eq!(link.duplicate, Profile::Random.link().duplicate);
        assert_eq!(c.round_seed(2), 44);
    }
}
