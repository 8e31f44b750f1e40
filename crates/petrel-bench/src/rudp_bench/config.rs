//! Parameters of the RUDP-under-impairment benchmark and their validation.

use std::fmt;
use std::time::Duration;

use petrel::{FecConfig, FecScheme};
use petrel_netem::{LinkConfig, Profile, MAX_DELAY};
use petrel_proto::fec::{MAX_DATA_SHARDS, MAX_PARITY_SHARDS};
use petrel_sys::range::{check_range, RangeError};
use serde::Serialize;

use crate::echo::{EchoConfig, EchoConfigError};
pub use crate::record::rudp::{FecMode, FecShape, IoModel};

/// Most runtimes `io_threads` may ask for.
pub const MAX_IO_THREADS: usize = 64;

impl FecShape {
    /// 8 data + 2 parity, the reference report's fixed mode and `--fec-shape`'s
    /// default.
    pub const DEFAULT: FecShape = FecShape {
        data_shards: 8,
        parity_shards: 2,
    };
}

/// A `--fec-shape` that is not `D+P` with D in 1..=64 and P in 1..=16.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("invalid fec-shape {0:?}: must be D+P, data shards 1..={MAX_DATA_SHARDS}, parity shards 1..={MAX_PARITY_SHARDS} (e.g. 8+2)")]
pub struct FecShapeError(pub String);

impl std::str::FromStr for FecShape {
    type Err = FecShapeError;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        let bad = || FecShapeError(s.to_owned());
        let (d, p) = s.split_once('+').ok_or_else(bad)?;
        let shape = FecShape {
            data_shards: d.trim().parse().map_err(|_| bad())?,
            parity_shards: p.trim().parse().map_err(|_| bad())?,
        };
        let ok = (1..=MAX_DATA_SHARDS).contains(&shape.data_shards)
            && (1..=MAX_PARITY_SHARDS).contains(&shape.parity_shards);
        ok.then_some(shape).ok_or_else(bad)
    }
}

/// Which implementation carries the echo (`--peer`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum RudpPeer {
    /// Petrel RUDP endpoints in this process.
    #[default]
    Petrel,
    /// `kcptun-client` and `kcptun-server` child processes (kcp-go with its FEC and
    /// smux) carrying TCP echo traffic.
    Kcptun,
}

impl FecMode {
    /// The FEC setting of every endpoint: `petrel`'s defaults with this scheme;
    /// `shape` is the group of [`FecMode::Fixed`].
    pub fn config(self, shape: FecShape) -> FecConfig {
        let scheme = match self {
            FecMode::None => FecScheme::None,
            FecMode::Fixed => FecScheme::Fixed {
                data_shards: shape.data_shards,
                parity_shards: shape.parity_shards,
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
    /// Group shape with [`FecMode::Fixed`]; `None` is [`FecShape::DEFAULT`]. Refused
    /// with any other mode.
    pub fec_shape: Option<FecShape>,
    /// The implementation under test.
    pub peer: RudpPeer,
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
            fec_shape: None,
            peer: RudpPeer::Petrel,
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
    #[error("invalid --{field} = {value}: must be {range}")]
    Field {
        /// The field, as named on the command line (the message puts `--`
        /// before it).
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
        if self.fec_shape.is_some() && self.fec != FecMode::Fixed {
            return Err(field(
                "fec",
                self.fec,
                "fixed when --fec-shape is given (the shape of a fixed group)",
            ));
        }
        if self.peer == RudpPeer::Kcptun {
            if self.fec == FecMode::Adaptive {
                return Err(field("fec", self.fec, "none or fixed with --peer kcptun"));
            }
            if (self.io_model, self.io_threads) != (IoModel::Shared, 1) {
                return Err(field(
                    "io-model",
                    format!("{:?} x{}", self.io_model, self.io_threads),
                    "shared with --io-threads 1 with --peer kcptun (its I/O runs in its own processes)",
                ));
            }
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

    /// The fixed-FEC group shape: `fec_shape` or [`FecShape::DEFAULT`] with
    /// [`FecMode::Fixed`], `None` with any other mode.
    pub fn fixed_shape(&self) -> Option<FecShape> {
        (self.fec == FecMode::Fixed).then(|| self.fec_shape.unwrap_or(FecShape::DEFAULT))
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
        let cases: [(&str, RudpBenchConfig); 9] = [
            (
                "fec-shape",
                RudpBenchConfig {
                    fec: FecMode::Adaptive,
                    fec_shape: Some(FecShape::DEFAULT),
                    ..Default::default()
                },
            ),
            (
                "fec",
                RudpBenchConfig {
                    peer: RudpPeer::Kcptun,
                    fec: FecMode::Adaptive,
                    ..Default::default()
                },
            ),
            (
                "io-model",
                RudpBenchConfig {
                    peer: RudpPeer::Kcptun,
                    io_threads: 2,
                    ..Default::default()
                },
            ),
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
    fn fec_shapes_parse_within_the_shard_limits() {
        let shape: FecShape = "10+3".parse().unwrap();
        assert_eq!((shape.data_shards, shape.parity_shards), (10, 3));
        assert_eq!(shape.to_string(), "10+3");
        for bad in [
            "8", "8+", "+2", "0+2", "8+0", "65+2", "8+17", "a+b", "8+2+1",
        ] {
            let err = bad.parse::<FecShape>().unwrap_err();
            assert!(err.to_string().contains("fec-shape"), "{bad}: {err}");
        }
        let fixed = RudpBenchConfig {
            fec: FecMode::Fixed,
            ..Default::default()
        };
        assert_eq!(fixed.fixed_shape(), Some(FecShape::DEFAULT));
        assert_eq!(RudpBenchConfig::default().fixed_shape(), None);
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
