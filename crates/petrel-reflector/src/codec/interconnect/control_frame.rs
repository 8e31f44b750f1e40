//! Control-plane framing (draarl-interconnect §3.1): a 4-byte big-endian
//! length N, then N bytes of UTF-8 JSON (one [`ControlMessage`]). N must be
//! 1..=4 MiB, and 1..=16 KiB for the first frame (the hello). A bad length
//! or bad JSON closes the connection.
//!
//! ```text
//!  bytes ─▶ FrameReader::feed ─▶ [len:u32 BE | JSON] … ─▶ ControlMessage, …
//!            holds at most one partial frame (≤ 4 + limit bytes)
//!  FrameReader::feed_admitting: admit(4 + N) at the length prefix; a refused
//!            frame's N bytes are skipped, never buffered nor parsed
//! ```

use thiserror::Error;

use super::control_message::ControlMessage;

/// Largest first frame (the hello), in bytes.
pub const MAX_HELLO_FRAME: usize = 16 * 1024;
/// Largest later frame, in bytes.
pub const MAX_CONTROL_FRAME: usize = 4 * 1024 * 1024;

/// Why a frame was refused (the connection is then closed).
#[derive(Debug, Clone, PartialEq, Eq, Error)]
pub enum FrameError {
    /// N = 0.
    #[error("empty control frame")]
    Empty,
    /// N above the limit.
    #[error("control frame of {len} bytes exceeds {max}")]
    TooLong {
        /// The length prefix.
        len: usize,
        /// The limit in force.
        max: usize,
    },
    /// Not a JSON object of the ControlMessage shape.
    #[error("malformed control frame JSON: {0}")]
    Json(String),
}

/// Encodes `msg` as one frame no longer than `max` bytes of JSON.
///
/// # Errors
/// [`FrameError::TooLong`] past `max`.
pub fn encode_frame(msg: &ControlMessage, max: usize) -> Result<Vec<u8>, FrameError> {
    let json = serde_json::to_vec(msg).map_err(|e| FrameError::Json(e.to_string()))?;
    if json.len() > max {
        return Err(FrameError::TooLong {
            len: json.len(),
            max,
        });
    }
    let mut out = Vec::with_capacity(4 + json.len());
    out.extend_from_slice(&(json.len() as u32).to_be_bytes());
    out.extend_from_slice(&json);
    Ok(out)
}

/// Reassembles frames from a byte stream. The first frame is held to
/// [`MAX_HELLO_FRAME`], later ones to [`MAX_CONTROL_FRAME`].
#[derive(Debug)]
pub struct FrameReader {
    buf: Vec<u8>,
    frames: u64,
    failed: bool,
    /// Body bytes of a refused frame still to discard.
    skip: usize,
    /// The partial frame in `buf` was admitted already.
    admitted: bool,
}

impl Default for FrameReader {
    fn default() -> Self {
        Self::new()
    }
}

impl FrameReader {
    /// A reader expecting the hello first.
    pub fn new() -> Self {
        Self {
            buf: Vec::new(),
            frames: 0,
            failed: false,
            skip: 0,
            admitted: false,
        }
    }

    fn limit(&self) -> usize {
        if self.frames == 0 {
            MAX_HELLO_FRAME
        } else {
            MAX_CONTROL_FRAME
        }
    }

    /// Bytes of a partial frame held.
    pub fn buffered(&self) -> usize {
        self.buf.len()
    }

    /// Feeds `input` and returns the frames it completed, in order.
    ///
    /// # Errors
    /// The first [`FrameError`]; the reader then refuses everything (the
    /// connection is to be closed).
    pub fn feed(&mut self, input: &[u8]) -> Result<Vec<ControlMessage>, FrameError> {
        self.feed_admitting(input, &mut |_| true)
    }

    /// As [`FrameReader::feed`], but asks `admit` about each frame once its
    /// length prefix is read and valid, with the frame's length in bytes
    /// (4 + N). A refused frame's body is discarded as it arrives, without
    /// being buffered or parsed (malformed JSON in it goes unnoticed).
    ///
    /// # Errors
    /// As [`FrameReader::feed`].
    pub fn feed_admitting(
        &mut self,
        mut input: &[u8],
        admit: &mut dyn FnMut(usize) -> bool,
    ) -> Result<Vec<ControlMessage>, FrameError> {
        let mut out = Vec::new();
        while !self.failed && !input.is_empty() {
            if self.skip > 0 {
                let take = self.skip.min(input.len());
                input = &input[take..];
                self.skip -= take;
                continue;
            }
            if self.buf.len() < 4 {
                let take = (4 - self.buf.len()).min(input.len());
                self.buf.extend_from_slice(&input[..take]);
                input = &input[take..];
                if self.buf.len() < 4 {
                    break;
                }
            }
            let n =
                u32::from_be_bytes([self.buf[0], self.buf[1], self.buf[2], self.buf[3]]) as usize;
            let check = if n == 0 {
                Err(FrameError::Empty)
            } else if n > self.limit() {
                Err(FrameError::TooLong {
                    len: n,
                    max: self.limit(),
                })
            } else {
                Ok(())
            };
            if let Err(e) = check {
                self.failed = true;
                self.buf = Vec::new();
                return Err(e);
            }
            if !self.admitted {
                if !admit(4 + n) {
                    self.buf.clear();
                    self.frames += 1;
                    self.skip = n;
                    continue;
                }
                self.admitted = true;
            }
            let want = 4 + n - self.buf.len();
            let take = want.min(input.len());
            self.buf.extend_from_slice(&input[..take]);
            input = &input[take..];
            if self.buf.len() < 4 + n {
                break;
            }
            let parsed = serde_json::from_slice::<ControlMessage>(&self.buf[4..]);
            self.buf.clear();
            self.admitted = false;
            self.frames += 1;
            match parsed {
                Ok(m) => out.push(m),
                Err(e) => {
                    self.failed = true;
                    return Err(FrameError::Json(e.to_string()));
                }
            }
        }
        if self.failed {
            return Err(FrameError::Json("reader closed after an error".to_owned()));
        }
        Ok(out)
    }
}
