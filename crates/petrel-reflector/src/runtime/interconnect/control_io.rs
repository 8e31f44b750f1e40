//! Reading and writing control frames on a TLS stream
//! (draarl-interconnect §3.1): [`FrameReader`] over the read half (the
//! hello held to 16 KiB, later frames to 4 MiB), [`encode_frame`] for
//! what is written. A bad length or bad JSON ends the connection.

use thiserror::Error;
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt};

use crate::codec::interconnect::{
    encode_frame, ControlMessage, FrameError, FrameReader, MAX_CONTROL_FRAME,
};

/// Bytes read from the stream at a time.
const READ_CHUNK: usize = 16 * 1024;

/// Why a control connection ended.
#[derive(Debug, Error)]
pub enum ControlIoError {
    /// The peer closed the connection.
    #[error("connection closed")]
    Closed,
    /// The stream failed.
    #[error("io: {0}")]
    Io(#[from] std::io::Error),
    /// A frame was malformed (§3.1).
    #[error(transparent)]
    Frame(#[from] FrameError),
}

/// Frames from one read half, with what was read since the last call.
#[derive(Debug)]
pub struct FrameSource<R> {
    read: R,
    reader: FrameReader,
    ready: std::collections::VecDeque<ControlMessage>,
    buf: Vec<u8>,
}

impl<R: AsyncRead + Unpin> FrameSource<R> {
    /// Frames of `read`, the first one held to the hello's limit.
    pub fn new(read: R) -> Self {
        Self {
            read,
            reader: FrameReader::new(),
            ready: std::collections::VecDeque::new(),
            buf: vec![0; READ_CHUNK],
        }
    }

    /// The next frame and the bytes read from the stream to complete it (0
    /// when it was already buffered).
    ///
    /// # Errors
    /// [`ControlIoError`]; the connection is then to be closed.
    pub async fn next(&mut self) -> Result<(ControlMessage, usize), ControlIoError> {
        self.next_admitting(|_| true).await
    }

    /// As [`FrameSource::next`], asking `admit` about each frame at its
    /// length prefix (4 + N bytes); refused frames are skipped unparsed
    /// ([`FrameReader::feed_admitting`]).
    ///
    /// # Errors
    /// [`ControlIoError`]; the connection is then to be closed.
    pub async fn next_admitting(
        &mut self,
        mut admit: impl FnMut(usize) -> bool,
    ) -> Result<(ControlMessage, usize), ControlIoError> {
        let mut read_total = 0;
        loop {
            if let Some(m) = self.ready.pop_front() {
                return Ok((m, read_total));
            }
            let n = self.read.read(&mut self.buf).await?;
            if n == 0 {
                return Err(ControlIoError::Closed);
            }
            read_total += n;
            self.ready
                .extend(self.reader.feed_admitting(&self.buf[..n], &mut admit)?);
        }
    }
}

/// Writes one frame (at most 4 MiB of JSON) and flushes.
///
/// # Errors
/// [`ControlIoError`].
pub async fn write_frame<W: AsyncWrite + Unpin>(
    write: &mut W,
    msg: &ControlMessage,
) -> Result<(), ControlIoError> {
    let bytes = encode_frame(msg, MAX_CONTROL_FRAME)?;
    write.write_all(&bytes).await?;
    write.flush().await?;
    Ok(())
}
