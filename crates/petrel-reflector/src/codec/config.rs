//! Type 3 configuration DATA (spec §2.8): query (0x01), set/report (0x02) with
//! `[type u8][len u8][value]` TLVs, and time sync (0x03, Unix ms as i64 BE).

use thiserror::Error;

/// Known TLV tags and their value lengths in bytes (spec §2.8 table).
const KNOWN_TAGS: [(u8, usize); 21] = [
    (0x01, 8), // rx_freq u64 Hz
    (0x02, 8), // tx_freq u64 Hz
    (0x03, 4), // rx_ctcss f32
    (0x04, 4), // tx_ctcss f32
    (0x05, 1), // sql_level
    (0x06, 1), // power_level
    (0x07, 1), // tx_bandwidth
    (0x08, 1), // rx_tone_mode
    (0x09, 8), // rx_tone_value ASCII
    (0x0A, 1), // tx_tone_mode
    (0x0B, 8), // tx_tone_value ASCII
    (0x0C, 1), // rf_guard_enabled
    (0x0D, 2), // rf_guard_single_tx_limit_s
    (0x0E, 2), // rf_guard_window_s
    (0x0F, 2), // rf_guard_max_tx_in_window_s
    (0x10, 8), // timestamp i64 ms
    (0x11, 1), // adc_gain_db
    (0x12, 1), // adc_volume
    (0x13, 1), // dac_volume
    (0x14, 1), // sql_active_high
    (0x15, 1), // ptt_active_high
];

/// Value length of a known tag, `None` for tags outside 0x01–0x15.
pub fn tag_len(tag: u8) -> Option<usize> {
    KNOWN_TAGS.iter().find(|(t, _)| *t == tag).map(|(_, l)| *l)
}

/// One configuration item. Unknown tags are kept verbatim so a newer device's
/// report survives a round trip.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Tlv {
    /// Tag byte (0x01–0x15 are defined).
    pub tag: u8,
    /// Raw value bytes (≤ 255).
    pub value: Vec<u8>,
}

/// A Type 3 command.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ConfigCommand {
    /// 0x01: the server asks the device for its configuration.
    Query,
    /// 0x02: set (server→device) or report (device→server).
    Set(Vec<Tlv>),
    /// 0x03: time sync, Unix time in ms.
    TimeSync(i64),
}

/// Why Type 3 DATA could not be parsed.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
pub enum ConfigError {
    /// DATA was empty.
    #[error("config DATA is empty")]
    Empty,
    /// `DATA[0]` is not 0x01, 0x02 or 0x03.
    #[error("unknown config command {0:#04x}")]
    UnknownCommand(u8),
    /// DATA ended inside a field.
    #[error("config DATA truncated")]
    Truncated,
    /// A known tag had the wrong value length.
    #[error("config tag {tag:#04x} has length {len}, expected {expected}")]
    BadLength {
        /// Tag byte.
        tag: u8,
        /// Length on the wire.
        len: usize,
        /// Length the spec defines.
        expected: usize,
    },
    /// The item count disagrees with the TLVs present, or exceeds 255.
    #[error("config item count {declared} does not match {actual} items")]
    CountMismatch {
        /// `DATA[1]`.
        declared: usize,
        /// Items found or given.
        actual: usize,
    },
    /// A value longer than 255 bytes cannot be encoded.
    #[error("config value of {0} bytes exceeds 255")]
    ValueTooLong(usize),
}

impl ConfigCommand {
    /// Parses Type 3 DATA. Trailing bytes after the declared items are an error.
    pub fn parse(data: &[u8]) -> Result<Self, ConfigError> {
        let (&cmd, rest) = data.split_first().ok_or(ConfigError::Empty)?;
        match cmd {
            0x01 => Ok(Self::Query),
            0x03 => {
                let ms = rest.get(1..9).ok_or(ConfigError::Truncated)?;
                let mut a = [0u8; 8];
                a.copy_from_slice(ms);
                Ok(Self::TimeSync(i64::from_be_bytes(a)))
            }
            0x02 => {
                let (&count, mut body) = rest.split_first().ok_or(ConfigError::Truncated)?;
                let mut items = Vec::with_capacity(usize::from(count));
                while !body.is_empty() {
                    let (tag, len) = match body {
                        [t, l, ..] => (*t, usize::from(*l)),
                        _ => return Err(ConfigError::Truncated),
                    };
                    let value = body.get(2..2 + len).ok_or(ConfigError::Truncated)?;
                    if let Some(expected) = tag_len(tag) {
                        if expected != len {
                            return Err(ConfigError::BadLength { tag, len, expected });
                        }
                    }
                    items.push(Tlv {
                        tag,
                        value: value.to_vec(),
                    });
                    body = &body[2 + len..];
                }
                if items.len() != usize::from(count) {
                    return Err(ConfigError::CountMismatch {
                        declared: usize::from(count),
                        actual: items.len(),
                    });
                }
                Ok(Self::Set(items))
            }
            other => Err(ConfigError::UnknownCommand(other)),
        }
    }

    /// Encodes to Type 3 DATA.
    pub fn encode(&self) -> Result<Vec<u8>, ConfigError> {
        match self {
            Self::Query => Ok(vec![0x01]),
            Self::TimeSync(ms) => {
                let mut out = vec![0x03, 0];
                out.extend_from_slice(&ms.to_be_bytes());
                Ok(out)
            }
            Self::Set(items) => {
                let count = u8::try_from(items.len()).map_err(|_| ConfigError::CountMismatch {
                    declared: 255,
                    actual: items.len(),
                })?;
                let mut out = vec![0x02, count];
                for t in items {
                    let len = u8::try_from(t.value.len())
                        .map_err(|_| ConfigError::ValueTooLong(t.value.len()))?;
                    out.push(t.tag);
                    out.push(len);
                    out.extend_from_slice(&t.value);
                }
                Ok(out)
            }
        }
    }
}
