//! The Opus `.raw` recording container (spec §5.3), little-endian: a 24-byte
//! header (`OPUS`, version 1, 16000 Hz, 1 channel, 960-sample frames, frame
//! count, 6 zero bytes) followed by `[u16 LE length][Opus frame]` records.

use thiserror::Error;

/// Header length in bytes.
pub const RAW_HEADER_LEN: usize = 24;
const MAGIC: [u8; 4] = *b"OPUS";
const VERSION: u16 = 1;
const SAMPLE_RATE_HZ: u32 = 16_000;
const CHANNELS: u16 = 1;
const FRAME_SAMPLES: u16 = 960;

/// Why a `.raw` file could not be read or written.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
pub enum RawError {
    /// Shorter than the 24-byte header.
    #[error("file of {0} bytes is shorter than the 24-byte header")]
    TooShort(usize),
    /// Magic, version or format fields differ from OPUS v1 16 kHz mono 960.
    #[error("not an OPUS v1 16 kHz mono 960-sample recording")]
    BadHeader,
    /// A record runs past the end of the file.
    #[error("frame record {0} is truncated")]
    Truncated(usize),
    /// The header frame count disagrees with the records present.
    #[error("header says {declared} frames, file holds {actual}")]
    CountMismatch {
        /// Header count.
        declared: u32,
        /// Records found.
        actual: usize,
    },
    /// A frame longer than 65535 bytes cannot be written.
    #[error("frame of {0} bytes exceeds 65535")]
    FrameTooLong(usize),
}

/// Encodes frames as a `.raw` recording.
pub fn encode_raw(frames: &[&[u8]]) -> Result<Vec<u8>, RawError> {
    let count = u32::try_from(frames.len()).map_err(|_| RawError::FrameTooLong(usize::MAX))?;
    let mut out =
        Vec::with_capacity(RAW_HEADER_LEN + frames.iter().map(|f| f.len() + 2).sum::<usize>());
    out.extend_from_slice(&MAGIC);
    out.extend_from_slice(&VERSION.to_le_bytes());
    out.extend_from_slice(&SAMPLE_RATE_HZ.to_le_bytes());
    out.extend_from_slice(&CHANNELS.to_le_bytes());
    out.extend_from_slice(&FRAME_SAMPLES.to_le_bytes());
    out.extend_from_slice(&count.to_le_bytes());
    out.extend_from_slice(&[0u8; 6]);
    for f in frames {
        let len = u16::try_from(f.len()).map_err(|_| RawError::FrameTooLong(f.len()))?;
        out.extend_from_slice(&len.to_le_bytes());
        out.extend_from_slice(f);
    }
    Ok(out)
}

/// Decodes a `.raw` recording into its frames.
pub fn decode_raw(file: &[u8]) -> Result<Vec<&[u8]>, RawError> {
    if file.len() < RAW_HEADER_LEN {
        return Err(RawError::TooShort(file.len()));
    }
    let u16_at = |o: usize| u16::from_le_bytes([file[o], file[o + 1]]);
    let u32_at = |o: usize| u32::from_le_bytes([file[o], file[o + 1], file[o + 2], file[o + 3]]);
    if file[..4] != MAGIC
        || u16_at(4) != VERSION
        || u32_at(6) != SAMPLE_RATE_HZ
        || u16_at(10) != CHANNELS
        || u16_at(12) != FRAME_SAMPLES
    {
        return Err(RawError::BadHeader);
    }
    let declared = u32_at(14);
    let mut frames = Vec::new();
    let mut rest = &file[RAW_HEADER_LEN..];
    while !rest.is_empty() {
        let len = match rest {
            [a, b, ..] => usize::from(u16::from_le_bytes([*a, *b])),
            _ => return Err(RawError::Truncated(frames.len())),
        };
        let f = rest
            .get(2..2 + len)
            .ok_or(RawError::Truncated(frames.len()))?;
        frames.push(f);
        rest = &rest[2 + len..];
    }
    if u32::try_from(frames.len()).ok() != Some(declared) {
        return Err(RawError::CountMismatch {
            declared,
            actual: frames.len(),
        });
    }
    Ok(frames)
}
