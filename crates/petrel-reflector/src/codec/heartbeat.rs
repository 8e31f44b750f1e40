//! Type 2 heartbeat DATA (spec §2.3): an optional 24-byte GPS block (latitude,
//! longitude, altitude as f64 BE) followed by an optional 17-byte ASCII MAC
//! `AA:BB:CC:DD:EE:FF`.

use std::fmt;

use thiserror::Error;

const GPS_LEN: usize = 24;
const MAC_TEXT_LEN: usize = 17;

/// GPS fix carried in a heartbeat. Degrees and metres; the server only logs it.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Gps {
    /// Latitude in degrees.
    pub lat: f64,
    /// Longitude in degrees.
    pub lon: f64,
    /// Altitude in metres.
    pub alt: f64,
}

/// A hardware MAC address.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Mac(pub [u8; 6]);

impl fmt::Display for Mac {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let m = self.0;
        write!(
            f,
            "{:02X}:{:02X}:{:02X}:{:02X}:{:02X}:{:02X}",
            m[0], m[1], m[2], m[3], m[4], m[5]
        )
    }
}

impl Mac {
    /// Parses `AA:BB:CC:DD:EE:FF` (either hex case).
    pub fn parse(text: &[u8]) -> Option<Self> {
        if text.len() != MAC_TEXT_LEN {
            return None;
        }
        let mut out = [0u8; 6];
        for (i, byte) in out.iter_mut().enumerate() {
            let at = i * 3;
            if i < 5 && text[at + 2] != b':' {
                return None;
            }
            let hex = std::str::from_utf8(&text[at..at + 2]).ok()?;
            *byte = u8::from_str_radix(hex, 16).ok()?;
        }
        Some(Self(out))
    }
}

/// Why heartbeat DATA could not be parsed.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
pub enum HeartbeatError {
    /// DATA length is not 0, 17, 24 or 41 bytes.
    #[error("heartbeat DATA of {0} bytes is not 0, 17, 24 or 41")]
    BadLength(usize),
    /// The MAC text is not `AA:BB:CC:DD:EE:FF`.
    #[error("heartbeat MAC is not AA:BB:CC:DD:EE:FF")]
    BadMac,
}

/// Parsed heartbeat DATA.
#[derive(Debug, Clone, Copy, PartialEq, Default)]
pub struct HeartbeatData {
    /// GPS block, if present.
    pub gps: Option<Gps>,
    /// MAC, if present.
    pub mac: Option<Mac>,
}

fn f64_at(b: &[u8], off: usize) -> f64 {
    let mut a = [0u8; 8];
    a.copy_from_slice(&b[off..off + 8]);
    f64::from_be_bytes(a)
}

impl HeartbeatData {
    /// Parses DATA. A MAC without a GPS block is accepted too (17 bytes).
    pub fn parse(data: &[u8]) -> Result<Self, HeartbeatError> {
        let (gps, rest) = match data.len() {
            0 | MAC_TEXT_LEN => (None, data),
            GPS_LEN | 41 => (
                Some(Gps {
                    lat: f64_at(data, 0),
                    lon: f64_at(data, 8),
                    alt: f64_at(data, 16),
                }),
                &data[GPS_LEN..],
            ),
            n => return Err(HeartbeatError::BadLength(n)),
        };
        let mac = if rest.is_empty() {
            None
        } else {
            Some(Mac::parse(rest).ok_or(HeartbeatError::BadMac)?)
        };
        Ok(Self { gps, mac })
    }

    /// Encodes to DATA bytes.
    pub fn encode(&self) -> Vec<u8> {
        let mut out = Vec::with_capacity(GPS_LEN + MAC_TEXT_LEN);
        if let Some(g) = self.gps {
            out.extend_from_slice(&g.lat.to_be_bytes());
            out.extend_from_slice(&g.lon.to_be_bytes());
            out.extend_from_slice(&g.alt.to_be_bytes());
        }
        if let Some(m) = self.mac {
            out.extend_from_slice(m.to_string().as_bytes());
        }
        out
    }
}
