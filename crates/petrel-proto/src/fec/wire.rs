//! FEC shard framing: Petrel's native header and kcp-go's (with kcptun's
//! crypt-none header).
//!
//! Both framings number shards with a consecutive 32-bit `seq` (data and parity
//! alike) and Reed–Solomon-code the same shard content: `size u16 LE` (= 2 +
//! payload length) followed by the payload, zero-padded to the group's longest
//! shard. That is kcp-go's layout (`fec.go`), kept for native framing too so one
//! decoder serves both.

use super::config::{MAX_DATA_SHARDS, MAX_PARITY_SHARDS};

/// Native header version carried in the high nibble of byte 0.
pub const NATIVE_VERSION: u8 = 1;
const NATIVE_DATA: u8 = 0x10;
const NATIVE_PARITY: u8 = 0x11;
const NATIVE_DATA_NO_PARITY: u8 = 0x12;
/// Byte 0 of a [`super::LossReport`] in native framing.
pub(crate) const NATIVE_REPORT: u8 = 0x18;

/// Native data shard header: `kind u8 | index u8 | seq u32 LE`, in bytes.
pub const NATIVE_DATA_HEADER: usize = 6;
/// Native parity shard header: data header + `data_count u8 | parity_count u8`.
pub const NATIVE_PARITY_HEADER: usize = 8;
/// Bytes an ARQ datagram must leave free below the MTU in native framing: a parity
/// shard is its 8-byte header plus the 2-byte `size` prefix of the longest data
/// shard, so it is 10 bytes longer than that datagram (data shards cost 6).
pub const NATIVE_OVERHEAD: usize = NATIVE_PARITY_HEADER + 2;

/// kcptun's header with `--crypt none`: 16 nonce bytes then CRC-32 (IEEE, LE) of
/// everything after these 20 bytes.
pub const KCPTUN_CRYPT_HEADER: usize = 20;
/// kcp-go FEC header: `seqid u32 | flag u16`, plus `size u16` on data shards.
pub const KCPGO_FEC_HEADER: usize = 6;
const KCPGO_DATA: u16 = 0xF1;
const KCPGO_PARITY: u16 = 0xF2;

/// Largest payload one shard can carry, in bytes (`size` is a u16 that counts itself).
pub const MAX_PAYLOAD: usize = u16::MAX as usize - 2;

/// How shards are framed on the wire.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Framing {
    /// Petrel's versioned header ([`NATIVE_DATA_HEADER`] / [`NATIVE_PARITY_HEADER`]);
    /// group shape travels in parity headers, so groups may be partial.
    Native,
    /// kcp-go / kcptun framing (spec `kcp.md` §2): groups have the fixed shape
    /// `data_shards + parity_shards`; with `crypt_header` every datagram starts with
    /// kcptun's 20-byte crypt-none header.
    KcpGo {
        /// Whether the kcptun crypt-none header is present.
        crypt_header: bool,
    },
}

impl Framing {
    /// Bytes an ARQ datagram must leave free below the path MTU.
    pub fn overhead(&self) -> usize {
        match self {
            Framing::Native => NATIVE_OVERHEAD,
            Framing::KcpGo { crypt_header } => {
                KCPGO_FEC_HEADER
                    + 2
                    + if *crypt_header {
                        KCPTUN_CRYPT_HEADER
                    } else {
                        0
                    }
            }
        }
    }
}

/// Why a datagram was not accepted as an FEC shard.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum WireError {
    /// Shorter than the header it announces.
    #[error("datagram too short ({0} bytes)")]
    TooShort(usize),
    /// Unknown version or kind byte (native) or flag (kcp-go).
    #[error("unknown shard kind {0:#x}")]
    UnknownKind(u16),
    /// kcptun CRC-32 does not match the datagram.
    #[error("crc32 mismatch")]
    BadCrc,
    /// `size` field inconsistent with the datagram length, or a datagram longer
    /// than a shard can be.
    #[error("bad size {0}")]
    BadSize(usize),
    /// Native framing: group shape or shard index outside the crate limits or
    /// contradicting each other.
    #[error("shard index {index} or shape {data}+{parity} out of range")]
    BadShape {
        /// Shard index within its group.
        index: u8,
        /// Announced data shard count.
        data: u8,
        /// Announced parity shard count.
        parity: u8,
    },
}

/// A parsed shard, borrowing the datagram.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Shard<'a> {
    pub seq: u32,
    pub index: u8,
    pub kind: ShardKind,
    /// Data shards: the ARQ datagram. Parity shards: the parity bytes.
    pub body: &'a [u8],
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum ShardKind {
    /// `retained`: whether parity may follow (native `0x12` says it will not).
    Data {
        retained: bool,
    },
    Parity {
        data: u8,
        parity: u8,
    },
}

impl Shard<'_> {
    /// `seq` of the group's first shard: the group's identity.
    pub fn group(&self) -> u32 {
        self.seq.wrapping_sub(u32::from(self.index))
    }
}

fn le16(b: &[u8], at: usize) -> u16 {
    u16::from_le_bytes([b[at], b[at + 1]])
}

fn le32(b: &[u8], at: usize) -> u32 {
    u32::from_le_bytes([b[at], b[at + 1], b[at + 2], b[at + 3]])
}

/// With kcptun's crypt-none header: checks its CRC-32 over everything after
/// the 20 header bytes and returns that rest; without it, `d` as it is.
///
/// # Errors
/// [`WireError::TooShort`] below 20 bytes, [`WireError::BadCrc`].
fn strip_crypt_header(crypt_header: bool, d: &[u8]) -> Result<&[u8], WireError> {
    if !crypt_header {
        return Ok(d);
    }
    if d.len() < KCPTUN_CRYPT_HEADER {
        return Err(WireError::TooShort(d.len()));
    }
    let rest = &d[KCPTUN_CRYPT_HEADER..];
    if crc32fast::hash(rest) != le32(d, 16) {
        return Err(WireError::BadCrc);
    }
    Ok(rest)
}

/// Parses one datagram. `kcp_shape` is the fixed `(data, parity)` of kcp-go mode.
pub(crate) fn parse(
    framing: Framing,
    kcp_shape: (u8, u8),
    d: &[u8],
) -> Result<Shard<'_>, WireError> {
    match framing {
        Framing::Native => parse_native(d),
        Framing::KcpGo { crypt_header } => {
            let d = strip_crypt_header(crypt_header, d)?;
            parse_kcpgo(kcp_shape, d)
        }
    }
}

fn parse_native(d: &[u8]) -> Result<Shard<'_>, WireError> {
    if d.len() < NATIVE_DATA_HEADER {
        return Err(WireError::TooShort(d.len()));
    }
    if d.len() > NATIVE_PARITY_HEADER + MAX_PAYLOAD + 2 {
        return Err(WireError::BadSize(d.len()));
    }
    let (index, seq) = (d[1], le32(d, 2));
    let data = |retained| {
        if d.len() - NATIVE_DATA_HEADER > MAX_PAYLOAD {
            return Err(WireError::BadSize(d.len()));
        }
        if index >= MAX_DATA_SHARDS {
            return Err(WireError::BadShape {
                index,
                data: 0,
                parity: 0,
            });
        }
        Ok(Shard {
            seq,
            index,
            kind: ShardKind::Data { retained },
            body: &d[NATIVE_DATA_HEADER..],
        })
    };
    match d[0] {
        NATIVE_DATA => data(true),
        NATIVE_DATA_NO_PARITY => data(false),
        NATIVE_PARITY => {
            if d.len() < NATIVE_PARITY_HEADER + 2 {
                return Err(WireError::TooShort(d.len()));
            }
            let (data, parity) = (d[6], d[7]);
            if data == 0
                || data > MAX_DATA_SHARDS
                || parity == 0
                || parity > MAX_PARITY_SHARDS
                || index < data
                || index >= data + parity
            {
                return Err(WireError::BadShape {
                    index,
                    data,
                    parity,
                });
            }
            Ok(Shard {
                seq,
                index,
                kind: ShardKind::Parity { data, parity },
                body: &d[NATIVE_PARITY_HEADER..],
            })
        }
        other => Err(WireError::UnknownKind(u16::from(other))),
    }
}

/// The kind comes from the flag, the index from `seqid % (ds + ps)`; a flag that
/// contradicts the index is not an error here but evidence of a shape mismatch,
/// which the decoder's shape check handles (`super::shape`).
fn parse_kcpgo((ds, ps): (u8, u8), d: &[u8]) -> Result<Shard<'_>, WireError> {
    if d.len() < KCPGO_FEC_HEADER + 2 {
        return Err(WireError::TooShort(d.len()));
    }
    let seq = le32(d, 0);
    let n = u32::from(ds) + u32::from(ps);
    // n ≤ 80, so the remainder fits in a u8.
    let index = (seq % n) as u8;
    match le16(d, 4) {
        KCPGO_DATA => {
            let size = usize::from(le16(d, 6));
            let body = &d[KCPGO_FEC_HEADER..];
            if size < 2 || size > body.len() {
                return Err(WireError::BadSize(size));
            }
            Ok(Shard {
                seq,
                index,
                kind: ShardKind::Data { retained: true },
                body: &body[2..size],
            })
        }
        KCPGO_PARITY => Ok(Shard {
            seq,
            index,
            kind: ShardKind::Parity {
                data: ds,
                parity: ps,
            },
            body: &d[KCPGO_FEC_HEADER..],
        }),
        other => Err(WireError::UnknownKind(other)),
    }
}

/// Writes a data shard for `payload` into `out` (cleared first).
pub(crate) fn write_data(
    framing: Framing,
    nonce: [u8; 16],
    seq: u32,
    index: u8,
    retained: bool,
    payload: &[u8],
    out: &mut Vec<u8>,
) {
    out.clear();
    match framing {
        Framing::Native => {
            out.push(if retained {
                NATIVE_DATA
            } else {
                NATIVE_DATA_NO_PARITY
            });
            out.push(index);
            out.extend_from_slice(&seq.to_le_bytes());
            out.extend_from_slice(payload);
        }
        Framing::KcpGo { crypt_header } => {
            let start = crypt_start(crypt_header, nonce, out);
            out.extend_from_slice(&seq.to_le_bytes());
            out.extend_from_slice(&KCPGO_DATA.to_le_bytes());
            // The encoder refuses payloads above MAX_PAYLOAD, so this fits.
            let size = (payload.len() + 2) as u16;
            out.extend_from_slice(&size.to_le_bytes());
            out.extend_from_slice(payload);
            crypt_finish(start, out);
        }
    }
}

/// Appends a native data shard that no parity will follow (`0x12`) to `out`,
/// after whatever `out` already holds (the session's conv prefix): the
/// pass-through framing of a group-less datagram, written without a queue.
pub(crate) fn append_native_ungrouped(seq: u32, payload: &[u8], out: &mut Vec<u8>) {
    out.reserve(NATIVE_DATA_HEADER + payload.len());
    out.push(NATIVE_DATA_NO_PARITY);
    out.push(0);
    out.extend_from_slice(&seq.to_le_bytes());
    out.extend_from_slice(payload);
}

/// Writes a parity shard into `out` (cleared first).
#[allow(clippy::too_many_arguments)]
pub(crate) fn write_parity(
    framing: Framing,
    nonce: [u8; 16],
    seq: u32,
    index: u8,
    data: u8,
    parity: u8,
    body: &[u8],
    out: &mut Vec<u8>,
) {
    out.clear();
    match framing {
        Framing::Native => {
            out.extend_from_slice(&[NATIVE_PARITY, index]);
            out.extend_from_slice(&seq.to_le_bytes());
            out.extend_from_slice(&[data, parity]);
            out.extend_from_slice(body);
        }
        Framing::KcpGo { crypt_header } => {
            let start = crypt_start(crypt_header, nonce, out);
            out.extend_from_slice(&seq.to_le_bytes());
            out.extend_from_slice(&KCPGO_PARITY.to_le_bytes());
            out.extend_from_slice(body);
            crypt_finish(start, out);
        }
    }
}

/// The KCP `conv` a kcp-go datagram carries, the way kcp-go's listener reads it
/// to open a session (kcp-go `sess.go`, `Listener.packetInput`): the crypt-none
/// header (when `crypt_header`) is checked first, then a data shard (flag 0xF1)
/// has the conv after its 8-byte FEC header, a parity shard (0xF2) has none
/// (`Ok(None)`), and anything else is a bare KCP datagram (KCP's `cmd` and `frg`
/// bytes never read as 0xF1/0xF2) with the conv in its first 4 bytes.
///
/// # Errors
/// [`WireError::BadCrc`], or [`WireError::TooShort`] when no 24-byte KCP header
/// follows the headers.
pub fn kcpgo_conv(crypt_header: bool, d: &[u8]) -> Result<Option<u32>, WireError> {
    const KCP_HEADER: usize = 24;
    let d = strip_crypt_header(crypt_header, d)?;
    let at = match d.get(4..6).map(|f| le16(f, 0)) {
        Some(KCPGO_PARITY) => return Ok(None),
        Some(KCPGO_DATA) => KCPGO_FEC_HEADER + 2,
        _ => 0,
    };
    if d.len() < at + KCP_HEADER {
        return Err(WireError::TooShort(d.len()));
    }
    Ok(Some(le32(d, at)))
}

fn crypt_start(crypt_header: bool, nonce: [u8; 16], out: &mut Vec<u8>) -> Option<usize> {
    crypt_header.then(|| {
        out.extend_from_slice(&nonce);
        out.extend_from_slice(&[0; 4]);
        KCPTUN_CRYPT_HEADER
    })
}

fn crypt_finish(start: Option<usize>, out: &mut [u8]) {
    if let Some(start) = start {
        let crc = crc32fast::hash(&out[start..]);
        out[16..20].copy_from_slice(&crc.to_le_bytes());
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn native_round_trip_and_overhead() {
        let mut out = Vec::new();
        write_data(Framing::Native, [0; 16], 77, 3, true, b"hello", &mut out);
        assert_eq!(out.len(), 5 + NATIVE_DATA_HEADER);
        let s = parse(Framing::Native, (0, 0), &out).unwrap();
        assert_eq!(
            (s.seq, s.index, s.group(), s.body),
            (77, 3, 74, &b"hello"[..])
        );
        write_parity(
            Framing::Native,
            [0; 16],
            80,
            6,
            6,
            2,
            &[1, 2, 3, 4],
            &mut out,
        );
        let s = parse(Framing::Native, (0, 0), &out).unwrap();
        assert_eq!(s.kind, ShardKind::Parity { data: 6, parity: 2 });
        assert_eq!(s.group(), 74);
        assert_eq!(
            parse(Framing::Native, (0, 0), &vec![0x10; 70_000]),
            Err(WireError::BadSize(70_000))
        );
        out[6] = 7; // index 6 is then a data index: malformed
        assert!(matches!(
            parse(Framing::Native, (0, 0), &out),
            Err(WireError::BadShape { .. })
        ));
    }

    #[test]
    fn kcpgo_conv_is_read_like_kcp_go_listener() {
        let f = Framing::KcpGo { crypt_header: true };
        let mut kcp = vec![0; 24];
        kcp[..4].copy_from_slice(&0xDEAD_BEEFu32.to_le_bytes());
        kcp[4] = 81;
        let mut out = Vec::new();
        write_data(f, [3; 16], 0, 0, true, &kcp, &mut out);
        assert_eq!(kcpgo_conv(true, &out), Ok(Some(0xDEAD_BEEF)));
        assert_eq!(kcpgo_conv(false, &out[20..]), Ok(Some(0xDEAD_BEEF)));
        assert_eq!(kcpgo_conv(false, &kcp), Ok(Some(0xDEAD_BEEF)));
        assert_eq!(kcpgo_conv(false, &kcp[..23]), Err(WireError::TooShort(23)));
        write_parity(f, [3; 16], 10, 10, 10, 3, &[0; 30], &mut out);
        assert_eq!(kcpgo_conv(true, &out), Ok(None));
        out[30] ^= 1;
        assert_eq!(kcpgo_conv(true, &out), Err(WireError::BadCrc));
    }

    #[test]
    fn kcpgo_crc_and_size_checked() {
        let f = Framing::KcpGo { crypt_header: true };
        let mut out = Vec::new();
        write_data(f, [9; 16], 14, 1, true, &[81; 32], &mut out);
        assert_eq!(out.len(), 20 + 8 + 32);
        assert_eq!(u16::from_le_bytes([out[26], out[27]]), 34);
        let s = parse(f, (10, 3), &out).unwrap();
        assert_eq!((s.index, s.group(), s.body.len()), (1, 13, 32));
        out[40] ^= 1;
        assert_eq!(parse(f, (10, 3), &out), Err(WireError::BadCrc));
        let f = Framing::KcpGo {
            crypt_header: false,
        };
        write_data(f, [0; 16], 0, 0, true, &[1; 4], &mut out);
        out[6] = 200;
        assert_eq!(parse(f, (10, 3), &out), Err(WireError::BadSize(200)));
    }
}
