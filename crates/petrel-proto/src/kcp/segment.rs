//! The KCP segment codec: a 24-byte little-endian header followed by `len` payload
//! bytes, several segments per datagram (`specs/kcp.md` §1, reference `ikcp.c`
//! `ikcp_encode_seg` / `ikcp_input`).
//!
//! The codec is pure: it neither allocates nor keeps state. Decoding never panics;
//! every malformed input is a [`DecodeError`].

use thiserror::Error;

/// Size of the segment header in bytes (`IKCP_OVERHEAD`).
pub const HEADER_LEN: usize = 24;

/// Segment command (`cmd` byte).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Command {
    /// 81: data (`IKCP_CMD_PUSH`).
    Push,
    /// 82: acknowledgement of one segment (`IKCP_CMD_ACK`).
    Ack,
    /// 83: window probe, "ask" (`IKCP_CMD_WASK`).
    WindowAsk,
    /// 84: window size, "tell" (`IKCP_CMD_WINS`).
    WindowTell,
}

impl Command {
    /// The wire value of the command.
    pub const fn to_u8(self) -> u8 {
        match self {
            Self::Push => 81,
            Self::Ack => 82,
            Self::WindowAsk => 83,
            Self::WindowTell => 84,
        }
    }

    /// The command for a wire value, `None` for anything but 81–84.
    pub const fn from_u8(value: u8) -> Option<Self> {
        match value {
            81 => Some(Self::Push),
            82 => Some(Self::Ack),
            83 => Some(Self::WindowAsk),
            84 => Some(Self::WindowTell),
            _ => None,
        }
    }
}

/// A decoded segment header. `len` is the payload length in bytes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Header {
    /// Conversation id; both peers must agree.
    pub conv: u32,
    /// What the segment is.
    pub cmd: Command,
    /// Fragments still to come in this message (message mode), counting down to 0.
    pub frg: u8,
    /// The sender's free receive window, in segments.
    pub wnd: u16,
    /// Sender timestamp in ms; an ACK echoes the acknowledged segment's `ts`.
    pub ts: u32,
    /// Sequence number; for an ACK, the sn being acknowledged.
    pub sn: u32,
    /// Every segment below `una` has been received (cumulative ack).
    pub una: u32,
    /// Payload length in bytes.
    pub len: u32,
}

/// Why a datagram could not be decoded.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Error)]
pub enum DecodeError {
    /// Fewer than [`HEADER_LEN`] bytes where a header should start.
    #[error("segment header truncated: {available} bytes left, a header needs 24")]
    HeaderTruncated {
        /// Bytes left in the datagram at that point.
        available: usize,
    },
    /// The `cmd` byte is not 81–84.
    #[error("unknown segment command {0} (expected 81-84)")]
    UnknownCommand(u8),
    /// The header announces more payload than the datagram holds.
    #[error("segment payload truncated: header says {len} bytes, {available} left")]
    PayloadTruncated {
        /// The header's `len`.
        len: u32,
        /// Bytes left after the header.
        available: usize,
    },
    /// The datagram holds no bytes at all.
    #[error("empty datagram")]
    Empty,
}

/// One segment borrowed from a datagram.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Segment<'a> {
    /// The decoded header; `header.len == payload.len()`.
    pub header: Header,
    /// The payload bytes.
    pub payload: &'a [u8],
}

fn read_u32(b: &[u8], at: usize) -> u32 {
    u32::from_le_bytes([b[at], b[at + 1], b[at + 2], b[at + 3]])
}

impl Header {
    /// Appends the 24-byte header to `out`.
    pub fn encode(&self, out: &mut Vec<u8>) {
        out.extend_from_slice(&self.conv.to_le_bytes());
        out.push(self.cmd.to_u8());
        out.push(self.frg);
        out.extend_from_slice(&self.wnd.to_le_bytes());
        out.extend_from_slice(&self.ts.to_le_bytes());
        out.extend_from_slice(&self.sn.to_le_bytes());
        out.extend_from_slice(&self.una.to_le_bytes());
        out.extend_from_slice(&self.len.to_le_bytes());
    }

    /// Decodes the header at the start of `buf` (the payload is not checked).
    ///
    /// # Errors
    /// [`DecodeError::HeaderTruncated`] below 24 bytes, [`DecodeError::UnknownCommand`].
    pub fn decode(buf: &[u8]) -> Result<Self, DecodeError> {
        if buf.len() < HEADER_LEN {
            return Err(DecodeError::HeaderTruncated {
                available: buf.len(),
            });
        }
        let cmd = Command::from_u8(buf[4]).ok_or(DecodeError::UnknownCommand(buf[4]))?;
        Ok(Self {
            conv: read_u32(buf, 0),
            cmd,
            frg: buf[5],
            wnd: u16::from_le_bytes([buf[6], buf[7]]),
            ts: read_u32(buf, 8),
            sn: read_u32(buf, 12),
            una: read_u32(buf, 16),
            len: read_u32(buf, 20),
        })
    }
}

/// Appends one segment (header with `len` set from `payload`, then the payload) to `out`.
///
/// The caller keeps `payload.len()` within `u32` (KCP payloads are at most one mss).
pub fn encode_segment(header: &Header, payload: &[u8], out: &mut Vec<u8>) {
    let header = Header {
        len: u32::try_from(payload.len()).unwrap_or(u32::MAX),
        ..*header
    };
    header.encode(out);
    out.extend_from_slice(payload);
}

/// Iterates over the segments of one datagram. After the first error it yields
/// nothing more. An empty datagram yields [`DecodeError::Empty`].
#[derive(Debug, Clone)]
pub struct Segments<'a> {
    rest: &'a [u8],
    started: bool,
    failed: bool,
}

/// Splits a datagram into its segments, parsing until the datagram is exhausted.
pub fn segments(datagram: &[u8]) -> Segments<'_> {
    Segments {
        rest: datagram,
        started: false,
        failed: false,
    }
}

impl<'a> Iterator for Segments<'a> {
    type Item = Result<Segment<'a>, DecodeError>;

    fn next(&mut self) -> Option<Self::Item> {
        if self.failed {
            return None;
        }
        if self.rest.is_empty() {
            if self.started {
                return None;
            }
            self.failed = true;
            return Some(Err(DecodeError::Empty));
        }
        self.started = true;
        let result = Header::decode(self.rest).and_then(|header| {
            let body = &self.rest[HEADER_LEN..];
            // `len` is attacker-controlled: compare in u64 so no cast can wrap.
            if u64::from(header.len) > body.len() as u64 {
                return Err(DecodeError::PayloadTruncated {
                    len: header.len,
                    available: body.len(),
                });
            }
            let (payload, rest) = body.split_at(header.len as usize);
            self.rest = rest;
            Ok(Segment { header, payload })
        });
        if result.is_err() {
            self.failed = true;
        }
        Some(result)
    }
}

/// Reads the `conv` of a datagram without decoding it (for demultiplexing).
/// `None` if the datagram is shorter than one header.
pub fn peek_conv(datagram: &[u8]) -> Option<u32> {
    (datagram.len() >= HEADER_LEN).then(|| read_u32(datagram, 0))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn header(cmd: Command, len: u32) -> Header {
        Header {
            conv: 0x0102_0304,
            cmd,
            frg: 3,
            wnd: 512,
            ts: 0xA0B0_C0D0,
            sn: 7,
            una: 5,
            len,
        }
    }

    #[test]
    fn header_layout_matches_reference() {
        let mut out = Vec::new();
        encode_segment(&header(Command::Push, 0), b"hi", &mut out);
        assert_eq!(
            out,
            [
                4, 3, 2, 1, 81, 3, 0, 2, 0xD0, 0xC0, 0xB0, 0xA0, 7, 0, 0, 0, 5, 0, 0, 0, 2, 0, 0,
                0, b'h', b'i'
            ]
        );
    }

    #[test]
    fn several_segments_per_datagram() {
        let mut out = Vec::new();
        encode_segment(&header(Command::Ack, 0), &[], &mut out);
        encode_segment(&header(Command::Push, 0), b"abc", &mut out);
        let segs: Vec<_> = segments(&out).collect::<Result<_, _>>().unwrap();
        assert_eq!(segs.len(), 2);
        assert_eq!(segs[0].header.cmd, Command::Ack);
        assert_eq!(segs[1].payload, b"abc");
    }

    #[test]
    fn malformed_inputs_are_errors() {
        assert_eq!(segments(&[]).next(), Some(Err(DecodeError::Empty)));
        assert_eq!(
            segments(&[0; 23]).next(),
            Some(Err(DecodeError::HeaderTruncated { available: 23 }))
        );
        let mut out = Vec::new();
        encode_segment(&header(Command::Push, 0), b"abc", &mut out);
        out[4] = 99;
        assert_eq!(
            segments(&out).next(),
            Some(Err(DecodeError::UnknownCommand(99)))
        );
        out[4] = 81;
        out.pop();
        assert_eq!(
            segments(&out).next(),
            Some(Err(DecodeError::PayloadTruncated {
                len: 3,
                available: 2
            }))
        );
        let mut trailing = Vec::new();
        encode_segment(&header(Command::Ack, 0), &[], &mut trailing);
        trailing.push(0);
        let all: Vec<_> = segments(&trailing).collect();
        assert_eq!(all.len(), 2);
        assert!(all[1].is_err());
    }

    #[test]
    fn peek_conv_reads_first_four_bytes() {
        let mut out = Vec::new();
        encode_segment(&header(Command::Push, 0), &[], &mut out);
        assert_eq!(peek_conv(&out), Some(0x0102_0304));
        assert_eq!(peek_conv(&out[..23]), None);
    }
}
