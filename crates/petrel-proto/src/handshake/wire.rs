//! Encoders and decoders for native control datagrams.
//!
//! The byte layouts are documented in the [module docs](super). Decoders
//! never panic and never allocate more than the datagram they were given.

use thiserror::Error;

use super::params::{
    check, ConfigError, FecDescriptor, DATA_SHARDS_RANGE, MTU_RANGE, PARITY_SHARDS_RANGE, WND_RANGE,
};

/// `magic` bytes 4..8 of every native control datagram.
pub const MAGIC: [u8; 4] = *b"PTRL";
/// The native protocol version this crate speaks.
pub const VERSION: u8 = 1;
/// Versions this crate speaks, as offered in VERSION-NEGOTIATION.
pub const SUPPORTED_VERSIONS: [u8; 1] = [VERSION];
/// `version` value reserved for VERSION-NEGOTIATION (like QUIC's version 0).
pub const VERSION_NEGOTIATION: u8 = 0;
/// Common header: zero conv (4) + magic (4) + version (1) + type (1), bytes.
pub const HEADER_LEN: usize = 10;
/// Size of the `params` block, bytes.
pub const PARAMS_LEN: usize = 9;
/// Size of a cookie, bytes: timestamp (4) + truncated HMAC-SHA256 tag (16).
pub const COOKIE_LEN: usize = 20;
/// An INITIAL is padded to at least this many bytes, so that every reply the
/// server sends before the cookie is validated (RETRY 38 B,
/// VERSION-NEGOTIATION 20 B) is smaller than the request.
pub const MIN_INITIAL_LEN: usize = 96;
/// Unpadded INITIAL: header + nonce + params + cookie length byte.
const INITIAL_BASE_LEN: usize = HEADER_LEN + 8 + PARAMS_LEN + 1;
/// RETRY length, bytes.
pub const RETRY_LEN: usize = HEADER_LEN + 8 + COOKIE_LEN;
/// ACCEPT length, bytes.
pub const ACCEPT_LEN: usize = HEADER_LEN + 8 + 4 + 8 + PARAMS_LEN;
/// KEEPALIVE / KEEPALIVE-ACK / CLOSE / CLOSE-ACK length, bytes.
pub const CONN_CONTROL_LEN: usize = HEADER_LEN + 4 + 8;
/// Most versions a VERSION-NEGOTIATION may list (bounded by the request size).
pub const MAX_OFFERED_VERSIONS: usize = 16;

const T_INITIAL: u8 = 1;
const T_RETRY: u8 = 2;
const T_ACCEPT: u8 = 3;
const T_KEEPALIVE: u8 = 4;
const T_KEEPALIVE_ACK: u8 = 5;
const T_CLOSE: u8 = 6;
const T_CLOSE_ACK: u8 = 7;
const T_VERSION_NEGOTIATION: u8 = 0;
/// Byte offset of `type`; part of the version-independent invariants.
pub(crate) const TYPE_OFFSET: usize = 9;
/// INITIAL's type value; invariant across versions so an unknown-version
/// INITIAL can be answered with VERSION-NEGOTIATION.
pub(crate) const INITIAL_TYPE: u8 = T_INITIAL;

/// Why a control datagram could not be decoded.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
pub enum WireError {
    /// Shorter than the message needs.
    #[error("truncated: need {need} bytes, got {got}")]
    Truncated {
        /// Bytes the message needs.
        need: usize,
        /// Bytes present.
        got: usize,
    },
    /// Length differs from the message's fixed length.
    #[error("bad length for {message}: expected {expected} bytes, got {got}")]
    BadLength {
        /// Message name.
        message: &'static str,
        /// Its fixed length.
        expected: usize,
        /// Bytes present.
        got: usize,
    },
    /// The leading conv is not 0, so this is not native control.
    #[error("not a native control datagram (leading conv is non-zero)")]
    NotControl,
    /// Bytes 4..8 are not `PTRL`.
    #[error("bad magic")]
    BadMagic,
    /// A version this crate does not speak.
    #[error("unsupported version {0}")]
    UnsupportedVersion(u8),
    /// An unknown `type` byte (native) or `flag` byte (legacy).
    #[error("unknown message type {0}")]
    UnknownType(u8),
    /// An out-of-range parameter or an unknown FEC kind.
    #[error("invalid parameters: {0}")]
    InvalidParams(ConfigError),
    /// INITIAL's cookie length is neither 0 nor [`COOKIE_LEN`].
    #[error("bad cookie length {0}")]
    BadCookieLength(u8),
    /// VERSION-NEGOTIATION lists no version or more than [`MAX_OFFERED_VERSIONS`].
    #[error("bad version list length {0}")]
    BadVersionCount(u8),
}

/// Parameters one side announces: its mtu (bytes), windows (segments) and FEC.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct WireParams {
    /// UDP payload limit, bytes.
    pub mtu: u16,
    /// Sender's KCP send window, segments.
    pub snd_wnd: u16,
    /// Sender's KCP receive window, segments.
    pub rcv_wnd: u16,
    /// Requested (INITIAL) or granted (ACCEPT) FEC framing.
    pub fec: FecDescriptor,
}

/// A stateless cookie as carried on the wire (opaque to the client).
pub type Cookie = [u8; COOKIE_LEN];

/// Identifies an established native connection in its control datagrams.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct ConnRef {
    /// The connection's conv (never 0).
    pub conv: u32,
    /// The 64-bit per-connection token from ACCEPT.
    pub token: u64,
}

/// A native control message (version [`VERSION`], or VERSION-NEGOTIATION).
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum NativeMessage {
    /// Client → server: open a connection; echoes a cookie after RETRY.
    Initial {
        /// Client-chosen random nonce; echoed by every server reply.
        nonce: u64,
        /// What the client asks for.
        params: WireParams,
        /// The cookie from RETRY, if any.
        cookie: Option<Cookie>,
        /// Total encoded length (padding included), bytes; ≥ [`MIN_INITIAL_LEN`].
        len: usize,
    },
    /// Server → client: prove you receive at your address; echo this cookie.
    Retry {
        /// The INITIAL's nonce.
        nonce: u64,
        /// Cookie to echo.
        cookie: Cookie,
    },
    /// Server → client: connection accepted.
    Accept {
        /// The INITIAL's nonce.
        nonce: u64,
        /// Server-chosen conv (never 0).
        conv: u32,
        /// Per-connection token both sides put in later control datagrams.
        token: u64,
        /// Server's mtu (the connection uses the min), windows and granted FEC.
        params: WireParams,
    },
    /// Server → client: the INITIAL's version is unknown; these are spoken.
    VersionNegotiation {
        /// The INITIAL's nonce.
        nonce: u64,
        /// Versions the server speaks (1..=[`MAX_OFFERED_VERSIONS`] entries).
        versions: Vec<u8>,
    },
    /// Liveness probe.
    Keepalive(ConnRef),
    /// Answer to a valid KEEPALIVE.
    KeepaliveAck(ConnRef),
    /// Sender has flushed its data and wants to close.
    Close(ConnRef),
    /// Answer to CLOSE, sent after the answering side flushed its data.
    CloseAck(ConnRef),
}

pub(crate) struct Reader<'a> {
    buf: &'a [u8],
    pos: usize,
}

impl<'a> Reader<'a> {
    pub(crate) fn new(buf: &'a [u8], pos: usize) -> Self {
        Self { buf, pos }
    }
    fn take<const N: usize>(&mut self) -> Result<[u8; N], WireError> {
        let end = self.pos + N;
        let bytes = self.buf.get(self.pos..end).ok_or(WireError::Truncated {
            need: end,
            got: self.buf.len(),
        })?;
        let mut out = [0u8; N];
        out.copy_from_slice(bytes);
        self.pos = end;
        Ok(out)
    }
    pub(crate) fn u8(&mut self) -> Result<u8, WireError> {
        Ok(self.take::<1>()?[0])
    }
    fn u16(&mut self) -> Result<u16, WireError> {
        Ok(u16::from_le_bytes(self.take()?))
    }
    pub(crate) fn u32(&mut self) -> Result<u32, WireError> {
        Ok(u32::from_le_bytes(self.take()?))
    }
    fn u64(&mut self) -> Result<u64, WireError> {
        Ok(u64::from_le_bytes(self.take()?))
    }
}

pub(crate) fn exact(message: &'static str, expected: usize, got: usize) -> Result<(), WireError> {
    if expected == got {
        Ok(())
    } else {
        Err(WireError::BadLength {
            message,
            expected,
            got,
        })
    }
}

fn put_header(out: &mut Vec<u8>, version: u8, ty: u8) {
    out.extend_from_slice(&0u32.to_le_bytes());
    out.extend_from_slice(&MAGIC);
    out.push(version);
    out.push(ty);
}

fn put_params(out: &mut Vec<u8>, p: &WireParams) {
    out.extend_from_slice(&p.mtu.to_le_bytes());
    out.extend_from_slice(&p.snd_wnd.to_le_bytes());
    out.extend_from_slice(&p.rcv_wnd.to_le_bytes());
    let (kind, a, b) = match p.fec {
        FecDescriptor::None => (0, 0, 0),
        FecDescriptor::Fixed { data, parity } => (1, data, parity),
        FecDescriptor::Adaptive {
            max_data,
            max_parity,
        } => (2, max_data, max_parity),
    };
    out.extend_from_slice(&[kind, a, b]);
}

fn read_params(r: &mut Reader<'_>) -> Result<WireParams, WireError> {
    let mtu = r.u16()?;
    let snd_wnd = r.u16()?;
    let rcv_wnd = r.u16()?;
    let [kind, a, b] = r.take::<3>()?;
    let bad = WireError::InvalidParams;
    check("mtu", mtu, &MTU_RANGE).map_err(bad)?;
    check("snd_wnd", snd_wnd, &WND_RANGE).map_err(bad)?;
    check("rcv_wnd", rcv_wnd, &WND_RANGE).map_err(bad)?;
    let fec = match kind {
        0 => FecDescriptor::None,
        1 => FecDescriptor::Fixed { data: a, parity: b },
        2 => FecDescriptor::Adaptive {
            max_data: a,
            max_parity: b,
        },
        _ => {
            return Err(bad(ConfigError {
                field: "fec.kind",
                value: kind.to_string(),
                allowed: "0 (none), 1 (fixed), 2 (adaptive)".into(),
            }))
        }
    };
    if kind != 0 {
        check("fec.data", a, &DATA_SHARDS_RANGE).map_err(bad)?;
        check("fec.parity", b, &PARITY_SHARDS_RANGE).map_err(bad)?;
    }
    Ok(WireParams {
        mtu,
        snd_wnd,
        rcv_wnd,
        fec,
    })
}

/// Reads the version-independent prefix: checks conv 0 and magic, returns
/// `(version, type)`.
fn read_header(datagram: &[u8]) -> Result<(u8, u8), WireError> {
    let mut r = Reader::new(datagram, 0);
    if r.u32()? != 0 {
        return Err(WireError::NotControl);
    }
    if r.take::<4>()? != MAGIC {
        return Err(WireError::BadMagic);
    }
    Ok((r.u8()?, r.u8()?))
}

/// Reads the nonce of an INITIAL of any version (bytes 10..18 are invariant).
pub(crate) fn read_invariant_nonce(datagram: &[u8]) -> Option<u64> {
    Reader::new(datagram, HEADER_LEN).u64().ok()
}

impl NativeMessage {
    /// Appends the encoding to `out`. Out-of-range values are encoded as given
    /// (the peer's decoder rejects them); callers hold validated configs.
    pub fn encode(&self, out: &mut Vec<u8>) {
        match self {
            Self::Initial {
                nonce,
                params,
                cookie,
                len,
            } => {
                let start = out.len();
                put_header(out, VERSION, T_INITIAL);
                out.extend_from_slice(&nonce.to_le_bytes());
                put_params(out, params);
                match cookie {
                    Some(c) => {
                        out.push(COOKIE_LEN as u8);
                        out.extend_from_slice(c);
                    }
                    None => out.push(0),
                }
                let target = start + (*len).max(MIN_INITIAL_LEN);
                out.resize(target.max(out.len()), 0);
            }
            Self::Retry { nonce, cookie } => {
                put_header(out, VERSION, T_RETRY);
                out.extend_from_slice(&nonce.to_le_bytes());
                out.extend_from_slice(cookie);
            }
            Self::Accept {
                nonce,
                conv,
                token,
                params,
            } => {
                put_header(out, VERSION, T_ACCEPT);
                out.extend_from_slice(&nonce.to_le_bytes());
                out.extend_from_slice(&conv.to_le_bytes());
                out.extend_from_slice(&token.to_le_bytes());
                put_params(out, params);
            }
            Self::VersionNegotiation { nonce, versions } => {
                put_header(out, VERSION_NEGOTIATION, T_VERSION_NEGOTIATION);
                out.extend_from_slice(&nonce.to_le_bytes());
                out.push(versions.len() as u8);
                out.extend_from_slice(versions);
            }
            Self::Keepalive(c) => put_conn(out, T_KEEPALIVE, c),
            Self::KeepaliveAck(c) => put_conn(out, T_KEEPALIVE_ACK, c),
            Self::Close(c) => put_conn(out, T_CLOSE, c),
            Self::CloseAck(c) => put_conn(out, T_CLOSE_ACK, c),
        }
    }

    /// Decodes one native control datagram.
    ///
    /// # Errors
    /// [`WireError`] for anything that is not a well-formed message of a
    /// supported version; [`WireError::UnsupportedVersion`] lets the server
    /// answer with VERSION-NEGOTIATION.
    pub fn decode(datagram: &[u8]) -> Result<Self, WireError> {
        let (version, ty) = read_header(datagram)?;
        let mut r = Reader::new(datagram, HEADER_LEN);
        let len = datagram.len();
        if version == VERSION_NEGOTIATION {
            if ty != T_VERSION_NEGOTIATION {
                return Err(WireError::UnknownType(ty));
            }
            let nonce = r.u64()?;
            let count = r.u8()?;
            if count == 0 || usize::from(count) > MAX_OFFERED_VERSIONS {
                return Err(WireError::BadVersionCount(count));
            }
            exact(
                "VERSION-NEGOTIATION",
                HEADER_LEN + 9 + usize::from(count),
                len,
            )?;
            let versions = datagram[HEADER_LEN + 9..].to_vec();
            return Ok(Self::VersionNegotiation { nonce, versions });
        }
        if version != VERSION {
            return Err(WireError::UnsupportedVersion(version));
        }
        match ty {
            T_INITIAL => {
                if len < MIN_INITIAL_LEN {
                    return Err(WireError::Truncated {
                        need: MIN_INITIAL_LEN,
                        got: len,
                    });
                }
                let nonce = r.u64()?;
                let params = read_params(&mut r)?;
                let cookie = match r.u8()? {
                    0 => None,
                    n if usize::from(n) == COOKIE_LEN => Some(r.take::<COOKIE_LEN>()?),
                    n => return Err(WireError::BadCookieLength(n)),
                };
                Ok(Self::Initial {
                    nonce,
                    params,
                    cookie,
                    len,
                })
            }
            T_RETRY => {
                exact("RETRY", RETRY_LEN, len)?;
                Ok(Self::Retry {
                    nonce: r.u64()?,
                    cookie: r.take()?,
                })
            }
            T_ACCEPT => {
                exact("ACCEPT", ACCEPT_LEN, len)?;
                let nonce = r.u64()?;
                let conv = r.u32()?;
                let token = r.u64()?;
                let params = read_params(&mut r)?;
                Ok(Self::Accept {
                    nonce,
                    conv,
                    token,
                    params,
                })
            }
            T_KEEPALIVE | T_KEEPALIVE_ACK | T_CLOSE | T_CLOSE_ACK => {
                exact("connection control", CONN_CONTROL_LEN, len)?;
                let c = ConnRef {
                    conv: r.u32()?,
                    token: r.u64()?,
                };
                Ok(match ty {
                    T_KEEPALIVE => Self::Keepalive(c),
                    T_KEEPALIVE_ACK => Self::KeepaliveAck(c),
                    T_CLOSE => Self::Close(c),
                    _ => Self::CloseAck(c),
                })
            }
            other => Err(WireError::UnknownType(other)),
        }
    }
}

// The anti-amplification rule depends on these: every pre-validation reply
// fits in the padded INITIAL that caused it.
const _: () = assert!(INITIAL_BASE_LEN + COOKIE_LEN <= MIN_INITIAL_LEN);
const _: () = assert!(RETRY_LEN <= MIN_INITIAL_LEN);
const _: () = assert!(HEADER_LEN + 9 + SUPPORTED_VERSIONS.len() <= MIN_INITIAL_LEN);

fn put_conn(out: &mut Vec<u8>, ty: u8, c: &ConnRef) {
    put_header(out, VERSION, ty);
    out.extend_from_slice(&c.conv.to_le_bytes());
    out.extend_from_slice(&c.token.to_le_bytes());
}
