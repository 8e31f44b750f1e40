//! FEC configuration, its validation and its 8-byte descriptor for handshakes.

use std::time::Duration;

use petrel_sys::range::{check_range, check_range_in, RangeError};

/// Largest `data_shards` (or `max_data`) a Petrel group may have, in packets.
///
/// Bounds the decoder's per-group state; kcp-go mode uses the same bound.
pub const MAX_DATA_SHARDS: u8 = 64;
/// Largest `parity_shards` (or `max_parity`) a Petrel group may have, in packets.
pub const MAX_PARITY_SHARDS: u8 = 16;

/// Which FEC scheme an endpoint runs.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum FecScheme {
    /// No FEC: the layer is a pass-through (native framing still adds its header).
    None,
    /// Every group carries exactly `parity_shards` parity shards (groups of up to
    /// `data_shards` datagrams). The reference report's fixed mode is 8+2.
    Fixed {
        /// Data shards per full group, in packets (1..=64).
        data_shards: u8,
        /// Parity shards per group, in packets (0..=16).
        parity_shards: u8,
    },
    /// Parity per group chosen from the receiver's loss reports, see
    /// [`super::ParityPolicy`].
    Adaptive {
        /// Data shards per full group, in packets (1..=64).
        max_data: u8,
        /// Upper bound on parity shards per group, in packets (1..=16).
        max_parity: u8,
        /// Target probability that a group is unrecoverable (1e-9..=0.1).
        target: f64,
    },
}

impl FecScheme {
    /// The reference report's adaptive mode: 8 data shards, up to 4 parity, target 1e-3.
    pub const ADAPTIVE_DEFAULT: FecScheme = FecScheme::Adaptive {
        max_data: 8,
        max_parity: 4,
        target: 1e-3,
    };

    /// Data shards of a full group, in packets (1 for [`FecScheme::None`]).
    pub fn data_shards(&self) -> u8 {
        match *self {
            FecScheme::None => 1,
            FecScheme::Fixed { data_shards, .. } => data_shards,
            FecScheme::Adaptive { max_data, .. } => max_data,
        }
    }

    /// Most parity shards a group can carry, in packets.
    pub fn max_parity(&self) -> u8 {
        match *self {
            FecScheme::None => 0,
            FecScheme::Fixed { parity_shards, .. } => parity_shards,
            FecScheme::Adaptive { max_parity, .. } => max_parity,
        }
    }
}

impl Default for FecScheme {
    /// Fixed 8+2, the reference report's fixed mode.
    fn default() -> Self {
        FecScheme::Fixed {
            data_shards: 8,
            parity_shards: 2,
        }
    }
}

/// Complete FEC configuration of one endpoint (both directions).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct FecConfig {
    /// The scheme; default fixed 8+2.
    pub scheme: FecScheme,
    /// How long an open group waits for more datagrams before it is closed and its
    /// parity sent, even if not full. Default 2 ms; range 0..=65 ms. Data shards are
    /// never delayed by it: they leave at once, only parity waits.
    pub group_wait: Duration,
    /// Retained-memory budget of this endpoint, in bytes (default 1 MiB; range
    /// 16 KiB..=64 MiB), shared by all its connections through one
    /// [`super::FecBudget`]; also each transmit and delivery queue's byte bound.
    /// The decoder releases its oldest incomplete groups when it is full, the
    /// encoder closes its group early or sends without parity.
    pub budget: usize,
    /// How long the decoder keeps a group waiting for shards, measured from the
    /// group's first shard. Default 500 ms (recovery later than that only races ARQ
    /// retransmission); range 1 ms..=60 s. Local: not part of the descriptor.
    pub group_expiry: Duration,
}

impl Default for FecConfig {
    fn default() -> Self {
        FecConfig {
            scheme: FecScheme::default(),
            group_wait: Duration::from_millis(2),
            budget: 1 << 20,
            group_expiry: Duration::from_millis(500),
        }
    }
}

/// A configuration value outside its allowed range.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum ConfigError {
    /// The named field is outside `range`.
    #[error("fec config: `{field}` = {value} is outside {range}")]
    OutOfRange {
        /// Field name as in [`FecConfig`] / [`FecScheme`].
        field: &'static str,
        /// The rejected value, formatted.
        value: String,
        /// The allowed range or rule, rendered (from the checked range where there
        /// is one).
        range: String,
    },
    /// A descriptor was not 8 bytes or carried an unknown scheme tag.
    #[error("fec descriptor: {0}")]
    BadDescriptor(&'static str),
}

impl From<RangeError> for ConfigError {
    fn from(e: RangeError) -> Self {
        Self::OutOfRange {
            field: e.field,
            value: e.value,
            range: e.range,
        }
    }
}

impl FecConfig {
    /// Checks every field against its documented range.
    ///
    /// # Errors
    /// [`ConfigError::OutOfRange`] naming the first bad field.
    pub fn validate(&self) -> Result<(), ConfigError> {
        let ms = Duration::from_millis;
        match self.scheme {
            FecScheme::None => {}
            FecScheme::Fixed {
                data_shards,
                parity_shards,
            } => {
                check_range("data_shards", data_shards, &(1..=MAX_DATA_SHARDS))?;
                check_range("parity_shards", parity_shards, &(0..=MAX_PARITY_SHARDS))?;
            }
            FecScheme::Adaptive {
                max_data,
                max_parity,
                target,
            } => {
                check_range("max_data", max_data, &(1..=MAX_DATA_SHARDS))?;
                check_range("max_parity", max_parity, &(1..=MAX_PARITY_SHARDS))?;
                check_range("target", target, &(1e-9..=0.1))?;
            }
        }
        check_range("group_wait", self.group_wait, &(Duration::ZERO..=ms(65)))?;
        check_range_in("budget", self.budget, &(16 << 10..=64 << 20), "bytes")?;
        check_range(
            "group_expiry",
            self.group_expiry,
            &(ms(1)..=Duration::from_secs(60)),
        )?;
        Ok(())
    }

    /// Encodes scheme, group_wait and budget in the 8-byte descriptor a handshake
    /// announces:
    ///
    /// | byte | field |
    /// |---:|---|
    /// | 0 | scheme: 0 none, 1 fixed, 2 adaptive |
    /// | 1 | data_shards / max_data |
    /// | 2 | parity_shards / max_parity |
    /// | 3 | adaptive target as deci-decades: `round(-10·log10(target))` (30 = 1e-3) |
    /// | 4–5 | group_wait in µs, u16 LE |
    /// | 6–7 | budget in KiB, u16 LE (0 means 64 MiB) |
    ///
    /// The target and budget are quantised; [`FecConfig::decode_descriptor`] of this
    /// value gives the nearest representable configuration.
    pub fn encode_descriptor(&self) -> [u8; 8] {
        let (tag, d, p, t) = match self.scheme {
            FecScheme::None => (0, 0, 0, 0),
            FecScheme::Fixed {
                data_shards,
                parity_shards,
            } => (1, data_shards, parity_shards, 0),
            FecScheme::Adaptive {
                max_data,
                max_parity,
                target,
            } => {
                let dd = (-10.0 * target.log10()).round().clamp(10.0, 90.0);
                (2, max_data, max_parity, dd as u8)
            }
        };
        let wait_us = u16::try_from(self.group_wait.as_micros()).unwrap_or(u16::MAX);
        let budget_kib = (self.budget >> 10).min(usize::from(u16::MAX) + 1);
        let budget_kib = u16::try_from(budget_kib).unwrap_or(0);
        let w = wait_us.to_le_bytes();
        let b = budget_kib.to_le_bytes();
        [tag, d, p, t, w[0], w[1], b[0], b[1]]
    }

    /// Decodes and validates an 8-byte descriptor; `group_expiry` is left at its
    /// default because it is a local choice.
    ///
    /// # Errors
    /// [`ConfigError::BadDescriptor`] for a wrong length or tag, or the
    /// [`FecConfig::validate`] error of the decoded values.
    pub fn decode_descriptor(bytes: &[u8]) -> Result<FecConfig, ConfigError> {
        let b: &[u8; 8] = bytes
            .try_into()
            .map_err(|_| ConfigError::BadDescriptor("length is not 8 bytes"))?;
        let scheme = match b[0] {
            0 => FecScheme::None,
            1 => FecScheme::Fixed {
                data_shards: b[1],
                parity_shards: b[2],
            },
            2 => FecScheme::Adaptive {
                max_data: b[1],
                max_parity: b[2],
                target: 10f64.powf(-f64::from(b[3]) / 10.0),
            },
            _ => return Err(ConfigError::BadDescriptor("unknown scheme tag")),
        };
        let budget_kib = match u16::from_le_bytes([b[6], b[7]]) {
            0 => 1 << 16,
            k => usize::from(k),
        };
        let cfg = FecConfig {
            scheme,
            group_wait: Duration::from_micros(u64::from(u16::from_le_bytes([b[4], b[5]]))),
            budget: budget_kib << 10,
            ..FecConfig::default()
        };
        cfg.validate()?;
        Ok(cfg)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn defaults_are_valid_and_documented() {
        let c = FecConfig::default();
        c.validate().unwrap();
        assert_eq!(c.group_wait, Duration::from_millis(2));
        assert_eq!(c.budget, 1 << 20);
        assert_eq!(c.scheme.data_shards(), 8);
        assert_eq!(c.scheme.max_parity(), 2);
    }

    #[test]
    fn validate_names_the_field() {
        let mut c = FecConfig {
            scheme: FecScheme::Fixed {
                data_shards: 0,
                parity_shards: 2,
            },
            ..FecConfig::default()
        };
        let e = c.validate().unwrap_err().to_string();
        assert!(e.contains("data_shards") && e.contains("1..=64"), "{e}");
        c.scheme = FecScheme::Adaptive {
            max_data: 8,
            max_parity: 4,
            target: 0.5,
        };
        assert!(c.validate().unwrap_err().to_string().contains("target"));
        c.scheme = FecScheme::ADAPTIVE_DEFAULT;
        c.budget = 10;
        assert!(c.validate().unwrap_err().to_string().contains("budget"));
    }

    #[test]
    fn descriptor_round_trips() {
        for scheme in [
            FecScheme::None,
            FecScheme::default(),
            FecScheme::ADAPTIVE_DEFAULT,
            FecScheme::Fixed {
                data_shards: 10,
                parity_shards: 3,
            },
        ] {
            let c = FecConfig {
                scheme,
                budget: 64 << 20,
                ..FecConfig::default()
            };
            let d = c.encode_descriptor();
            let back = FecConfig::decode_descriptor(&d).unwrap();
            assert_eq!(back.group_wait, c.group_wait);
            assert_eq!(back.budget, c.budget);
            match (back.scheme, scheme) {
                (FecScheme::Adaptive { target: a, .. }, FecScheme::Adaptive { target: b, .. }) => {
                    assert!((a - b).abs() / b < 0.01)
                }
                (a, b) => assert_eq!(a, b),
            }
        }
        assert!(FecConfig::decode_descriptor(&[9; 8]).is_err());
        assert!(FecConfig::decode_descriptor(&[1; 7]).is_err());
    }
}
