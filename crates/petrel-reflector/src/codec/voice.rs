//! Type 5 voice DATA (spec §2.3, §8): either one raw Opus frame or merged
//! frames, each `[u16 BE length][frame]`. The reflector never decodes Opus.

use thiserror::Error;

/// Largest sub-frame length the receivers accept (Android treats a first
/// length of 0 or > 1000 as "single frame", spec §8.1).
pub const MAX_SUBFRAME_LEN: usize = 1000;

/// Splits voice DATA into Opus frames. The payload is read as merged when it
/// parses exactly, end to end, as length-prefixed frames of 1..=1000 bytes;
/// otherwise it is one frame. An empty payload yields no frames.
pub fn split_frames(data: &[u8]) -> Vec<&[u8]> {
    let mut frames = Vec::new();
    let mut rest = data;
    while !rest.is_empty() {
        let len = match rest {
            [a, b, ..] => usize::from(u16::from_be_bytes([*a, *b])),
            _ => break,
        };
        if len == 0 || len > MAX_SUBFRAME_LEN || rest.len() < 2 + len {
            break;
        }
        frames.push(&rest[2..2 + len]);
        rest = &rest[2 + len..];
    }
    if rest.is_empty() && !frames.is_empty() {
        frames
    } else if data.is_empty() {
        Vec::new()
    } else {
        vec![data]
    }
}

/// Why frames could not be merged.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
pub enum MergeError {
    /// A frame was empty or longer than 1000 bytes.
    #[error("frame of {0} bytes is outside 1..=1000")]
    BadFrameLen(usize),
}

/// Merges frames into length-prefixed DATA.
pub fn merge_frames<'a>(frames: impl IntoIterator<Item = &'a [u8]>) -> Result<Vec<u8>, MergeError> {
    let mut out = Vec::new();
    for f in frames {
        if f.is_empty() || f.len() > MAX_SUBFRAME_LEN {
            return Err(MergeError::BadFrameLen(f.len()));
        }
        out.extend_from_slice(&(f.len() as u16).to_be_bytes());
        out.extend_from_slice(f);
    }
    Ok(out)
}
