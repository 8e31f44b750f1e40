//! The Type 0 envelope (draarl-interconnect §4.1–§4.2): a 90-byte DraARLv1
//! outer header (`DraA`, length, SourceNodeID in the username field, Type 0,
//! `NOD0` in Reserved), a 53-byte sub-header, the payload and an
//! HMAC-SHA256 tag over everything before it. All integers big-endian.
//!
//! ```text
//!  0    4    6            38      48 49      86    90 91 92   94      102     110      118     126    134 135   139 143   143+P
//!  DraA len  SourceNodeID  0×10    0  0×37    NOD0  1  sub flg epoch   projver sessionid msgid   sentms hop keyep  P   payload | tag(32)
//! ```
//!
//! [`peek`] is the cheap shape test of §4.3 step 1 (and yields the lookup
//! key of step 2); [`open`] is the full decode with the tag check (step 3)
//! in the order §4.1 lists the rejections; [`seal`] writes one.

use thiserror::Error;

use super::node_id::{NodeId, NODE_ID_LEN};
use super::node_key::{NodeKey, TAG_LEN};

/// ASCII `DraA` at offset 0.
pub const ENVELOPE_MAGIC: [u8; 4] = *b"DraA";
/// ASCII `NOD0` at offset 86.
pub const NODE_MAGIC: [u8; 4] = *b"NOD0";
/// The only protocol version (offset 90).
pub const PROTOCOL_VERSION: u8 = 1;
/// Envelope bytes besides the payload: 143 before it, 32 of tag after it.
pub const ENVELOPE_OVERHEAD: usize = OFF_PAYLOAD + TAG_LEN;
/// Largest hop count a decoder accepts (§4.1; 0 upstream, 1 downstream).
pub const MAX_HOP_COUNT: u8 = 2;

const OFF_LENGTH: usize = 4;
const OFF_SOURCE: usize = 6;
const OFF_PASSWORD: usize = 38;
const OFF_TYPE: usize = 48;
const OFF_NODE_MAGIC: usize = 86;
const OFF_VERSION: usize = 90;
const OFF_SUBTYPE: usize = 91;
const OFF_FLAGS: usize = 92;
const OFF_EPOCH: usize = 94;
const OFF_PROJECTION: usize = 102;
const OFF_SESSION: usize = 110;
const OFF_MESSAGE: usize = 118;
const OFF_SENT_AT: usize = 126;
const OFF_HOP: usize = 134;
const OFF_KEY_EPOCH: usize = 135;
const OFF_PAYLOAD_LEN: usize = 139;
const OFF_PAYLOAD: usize = 143;

/// Which size limit an envelope is held to (§4.1).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Channel {
    /// A UDP datagram: at most 1400 bytes (payload ≤ 1225).
    Udp,
    /// Inside a `type0` control frame: at most 65 535 bytes (payload ≤ 65 360).
    Control,
}

impl Channel {
    /// Largest envelope on this channel, in bytes.
    pub const fn max_len(self) -> usize {
        match self {
            Channel::Udp => 1400,
            Channel::Control => 65_535,
        }
    }

    /// Largest payload on this channel, in bytes.
    pub const fn max_payload(self) -> usize {
        self.max_len() - ENVELOPE_OVERHEAD
    }
}

/// The envelope subtype (offset 91; §3.5). Unknown values are kept so the
/// receiver can apply its own rule (drop, or close on CRITICAL).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Subtype(pub u8);

impl Subtype {
    /// 0x01, reserved (the handshake is JSON, §3.2).
    pub const NODE_ENROLL: Subtype = Subtype(0x01);
    /// 0x03, reserved.
    pub const NODE_AUTH: Subtype = Subtype(0x03);
    /// 0x05, edge → centre heartbeat.
    pub const HEARTBEAT: Subtype = Subtype(0x05);
    /// 0x06, data-address binding (request, challenge, proof; §4.5).
    pub const DATA_BIND: Subtype = Subtype(0x06);
    /// 0x07, credential rotation.
    pub const CREDENTIAL: Subtype = Subtype(0x07);
    /// 0x10, route snapshot begin.
    pub const ROUTE_SNAPSHOT_BEGIN: Subtype = Subtype(0x10);
    /// 0x11, route snapshot chunk.
    pub const ROUTE_SNAPSHOT_CHUNK: Subtype = Subtype(0x11);
    /// 0x12, route snapshot commit.
    pub const ROUTE_SNAPSHOT_COMMIT: Subtype = Subtype(0x12);
    /// 0x13, route delta.
    pub const ROUTE_DELTA: Subtype = Subtype(0x13);
    /// 0x14, route ACK.
    pub const ROUTE_ACK: Subtype = Subtype(0x14);
    /// 0x15, route resync request.
    pub const ROUTE_RESYNC_REQUEST: Subtype = Subtype(0x15);
    /// 0x20, device authentication proxying.
    pub const DEVICE_AUTH: Subtype = Subtype(0x20);
    /// 0x21, device session renew.
    pub const DEVICE_SESSION_RENEW: Subtype = Subtype(0x21);
    /// 0x22, device session report.
    pub const DEVICE_SESSION_REPORT: Subtype = Subtype(0x22);
    /// 0x23, device session revoke.
    pub const DEVICE_SESSION_REVOKE: Subtype = Subtype(0x23);
    /// 0x24, device configuration.
    pub const DEVICE_CONFIG: Subtype = Subtype(0x24);
    /// 0x25, device session confirmation.
    pub const DEVICE_SESSION_CONFIRM: Subtype = Subtype(0x25);
    /// 0x28, speaker lease.
    pub const SPEAKER_LEASE: Subtype = Subtype(0x28);
    /// 0x30, relay edge → centre (§4.6).
    pub const RELAY_UPSTREAM: Subtype = Subtype(0x30);
    /// 0x31, relay centre → edge (§4.6).
    pub const RELAY_DOWNSTREAM: Subtype = Subtype(0x31);

    /// Whether §3.5 defines this subtype.
    pub fn is_known(self) -> bool {
        matches!(
            self.0,
            0x01 | 0x03
                | 0x05
                | 0x06
                | 0x07
                | 0x10..=0x15
                | 0x20..=0x25
                | 0x28
                | 0x30
                | 0x31
        )
    }

    /// Whether this is one of the two relay subtypes (0x30, 0x31).
    pub fn is_relay(self) -> bool {
        self == Self::RELAY_UPSTREAM || self == Self::RELAY_DOWNSTREAM
    }
}

/// Envelope flags (offset 92; draarl-v1 §6.3). Informational except
/// [`Flags::CRITICAL`] (§3.4).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash)]
pub struct Flags(pub u16);

impl Flags {
    /// 0x01, reliable: the receiver acknowledges.
    pub const ACK: Flags = Flags(0x01);
    /// 0x02, never set (payloads are not encrypted, §4.2).
    pub const ENCRYPTED: Flags = Flags(0x02);
    /// 0x04, part of a chunked transfer.
    pub const CHUNKED: Flags = Flags(0x04);
    /// 0x08, control message.
    pub const CONTROL: Flags = Flags(0x08);
    /// 0x10, an unknown subtype with this flag closes the control session.
    pub const CRITICAL: Flags = Flags(0x10);

    /// Whether every bit of `other` is set.
    pub fn contains(self, other: Flags) -> bool {
        self.0 & other.0 == other.0
    }

    /// The union of both.
    pub fn with(self, other: Flags) -> Flags {
        Flags(self.0 | other.0)
    }
}

/// Every envelope field except the payload.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct EnvelopeHeader {
    /// SourceNodeID: the edge's node id, or `center`.
    pub source: NodeId,
    /// Subtype (§3.5).
    pub subtype: Subtype,
    /// Flags.
    pub flags: Flags,
    /// ClusterEpoch (centre start time in Unix ns; 0 upstream).
    pub cluster_epoch: u64,
    /// ProjectionVersion (the sending edge's, or the target edge's downstream).
    pub projection_version: u64,
    /// NodeSessionID: the control session id from `node_auth_ok`.
    pub node_session_id: u64,
    /// MessageID (non-zero; §4.4 replay window).
    pub message_id: u64,
    /// SentAtMillis, Unix ms (signed).
    pub sent_at_ms: i64,
    /// HopCount, 0..=2.
    pub hop_count: u8,
    /// KeyEpoch (always 1 in practice, §3.2).
    pub key_epoch: u32,
}

/// A decoded envelope borrowing its payload from the datagram.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Envelope<'a> {
    /// The fields.
    pub header: EnvelopeHeader,
    /// The payload bytes (not encrypted).
    pub payload: &'a [u8],
}

/// What [`peek`] reads from a datagram shaped like Type 0 (§4.3 steps 1–2).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Shape {
    /// SourceNodeID, or `None` if the field is empty.
    pub source: Option<NodeId>,
    /// NodeSessionID at offset 110.
    pub node_session_id: u64,
}

/// Why a datagram is not a valid envelope, in the order [`open`] checks.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
pub enum EnvelopeError {
    /// Shorter than the 175-byte minimum.
    #[error("envelope of {0} bytes is shorter than 175 bytes")]
    TooShort(usize),
    /// Longer than the channel's limit.
    #[error("envelope of {len} bytes exceeds the {max}-byte limit")]
    TooLong {
        /// Bytes received.
        len: usize,
        /// The channel's limit.
        max: usize,
    },
    /// The first four bytes are not `DraA`.
    #[error("bad magic (expected \"DraA\")")]
    BadMagic,
    /// The length field differs from the received length.
    #[error("length field {declared} != envelope length {actual}")]
    LengthMismatch {
        /// The length field.
        declared: u16,
        /// Bytes received.
        actual: usize,
    },
    /// Byte 48 is not 0.
    #[error("packet type {0} is not Type 0")]
    NotType0(u8),
    /// Bytes 86..90 are not `NOD0`.
    #[error("missing NOD0 marker")]
    MissingNodeMagic,
    /// SourceNodeID starts with NUL.
    #[error("empty source node id")]
    EmptySource,
    /// Protocol version other than 1.
    #[error("protocol version {0} is not 1")]
    BadVersion(u8),
    /// The payload length field disagrees with the envelope length.
    #[error("payload length {declared} does not fit an envelope of {len} bytes")]
    PayloadLengthMismatch {
        /// The payload length field.
        declared: u32,
        /// Bytes received.
        len: usize,
    },
    /// The HMAC-SHA256 tag does not match (§4.2).
    #[error("bad HMAC tag")]
    BadTag,
    /// HopCount above 2 (checked after the tag).
    #[error("hop count {0} exceeds 2")]
    HopCountTooHigh(u8),
}

/// Why an envelope could not be written.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
pub enum SealError {
    /// The payload does not fit the channel's limit.
    #[error("payload of {len} bytes exceeds the {max}-byte limit")]
    PayloadTooLong {
        /// Payload bytes.
        len: usize,
        /// Largest payload on the channel.
        max: usize,
    },
    /// MessageID 0 is never valid (§3.4).
    #[error("message id 0 is not valid")]
    ZeroMessageId,
    /// HopCount above 2.
    #[error("hop count {0} exceeds 2")]
    HopCountTooHigh(u8),
}

fn be_u64(b: &[u8], off: usize) -> u64 {
    let mut a = [0u8; 8];
    a.copy_from_slice(&b[off..off + 8]);
    u64::from_be_bytes(a)
}

fn be_u32(b: &[u8], off: usize) -> u32 {
    let mut a = [0u8; 4];
    a.copy_from_slice(&b[off..off + 4]);
    u32::from_be_bytes(a)
}

fn source_field(b: &[u8]) -> &[u8] {
    &b[OFF_SOURCE..OFF_SOURCE + NODE_ID_LEN]
}

/// The shape test of §4.3 step 1: at least 175 bytes, `DraA`, byte 48 = 0
/// and `NOD0`. `None` means "not Type 0" (the datagram belongs to the
/// device path). Reads nothing beyond the fixed header.
pub fn peek(datagram: &[u8]) -> Option<Shape> {
    if datagram.len() < ENVELOPE_OVERHEAD
        || datagram[..4] != ENVELOPE_MAGIC
        || datagram[OFF_TYPE] != 0
        || datagram[OFF_NODE_MAGIC..OFF_NODE_MAGIC + 4] != NODE_MAGIC
    {
        return None;
    }
    Some(Shape {
        source: NodeId::from_field(source_field(datagram)).ok(),
        node_session_id: be_u64(datagram, OFF_SESSION),
    })
}

/// Whether `datagram` is a Type 0 envelope cut short: fewer than the
/// 175-byte minimum, yet `DraA`, byte 48 = 0 and `NOD0` in place (so at
/// least 90 bytes). [`peek`] leaves it to the device path, which has no
/// Type 0; the data plane counts and drops it instead (§4.3 step 1).
pub fn is_truncated_envelope(datagram: &[u8]) -> bool {
    datagram.len() < ENVELOPE_OVERHEAD
        && datagram.len() >= OFF_NODE_MAGIC + 4
        && datagram[..4] == ENVELOPE_MAGIC
        && datagram[OFF_TYPE] == 0
        && datagram[OFF_NODE_MAGIC..OFF_NODE_MAGIC + 4] == NODE_MAGIC
}

/// The MessageID (offset 118) of a datagram shaped like Type 0 ([`peek`]),
/// unchecked: for the informational `message_id` of a `type0` frame
/// wrapping an envelope sealed earlier (§3.1).
pub fn peek_message_id(datagram: &[u8]) -> Option<u64> {
    peek(datagram).map(|_| be_u64(datagram, OFF_MESSAGE))
}

/// Decodes `datagram` and checks its tag with `key`, rejecting in the order
/// of §4.1: length bounds, magic, length field, Type 0, `NOD0`, empty
/// source, version, payload length, tag, hop count.
///
/// # Errors
/// The first [`EnvelopeError`] found.
pub fn open<'a>(
    datagram: &'a [u8],
    key: &NodeKey,
    channel: Channel,
) -> Result<Envelope<'a>, EnvelopeError> {
    let len = datagram.len();
    if len < ENVELOPE_OVERHEAD {
        return Err(EnvelopeError::TooShort(len));
    }
    if len > channel.max_len() {
        return Err(EnvelopeError::TooLong {
            len,
            max: channel.max_len(),
        });
    }
    if datagram[..4] != ENVELOPE_MAGIC {
        return Err(EnvelopeError::BadMagic);
    }
    let declared = u16::from_be_bytes([datagram[OFF_LENGTH], datagram[OFF_LENGTH + 1]]);
    if usize::from(declared) != len {
        return Err(EnvelopeError::LengthMismatch {
            declared,
            actual: len,
        });
    }
    if datagram[OFF_TYPE] != 0 {
        return Err(EnvelopeError::NotType0(datagram[OFF_TYPE]));
    }
    if datagram[OFF_NODE_MAGIC..OFF_NODE_MAGIC + 4] != NODE_MAGIC {
        return Err(EnvelopeError::MissingNodeMagic);
    }
    let source =
        NodeId::from_field(source_field(datagram)).map_err(|_| EnvelopeError::EmptySource)?;
    if datagram[OFF_VERSION] != PROTOCOL_VERSION {
        return Err(EnvelopeError::BadVersion(datagram[OFF_VERSION]));
    }
    let declared_payload = be_u32(datagram, OFF_PAYLOAD_LEN);
    let payload_len = len - ENVELOPE_OVERHEAD;
    if u64::from(declared_payload) != payload_len as u64 {
        return Err(EnvelopeError::PayloadLengthMismatch {
            declared: declared_payload,
            len,
        });
    }
    let tag_at = OFF_PAYLOAD + payload_len;
    if !key.verify(&datagram[..tag_at], &datagram[tag_at..]) {
        return Err(EnvelopeError::BadTag);
    }
    let hop_count = datagram[OFF_HOP];
    if hop_count > MAX_HOP_COUNT {
        return Err(EnvelopeError::HopCountTooHigh(hop_count));
    }
    Ok(Envelope {
        header: EnvelopeHeader {
            source,
            subtype: Subtype(datagram[OFF_SUBTYPE]),
            flags: Flags(u16::from_be_bytes([
                datagram[OFF_FLAGS],
                datagram[OFF_FLAGS + 1],
            ])),
            cluster_epoch: be_u64(datagram, OFF_EPOCH),
            projection_version: be_u64(datagram, OFF_PROJECTION),
            node_session_id: be_u64(datagram, OFF_SESSION),
            message_id: be_u64(datagram, OFF_MESSAGE),
            sent_at_ms: be_u64(datagram, OFF_SENT_AT) as i64,
            hop_count,
            key_epoch: be_u32(datagram, OFF_KEY_EPOCH),
        },
        payload: &datagram[OFF_PAYLOAD..tag_at],
    })
}

/// Writes the envelope for `header` and `payload`, tagged with `key`, into
/// `out` (cleared first; one allocation at most, sized exactly).
///
/// # Errors
/// [`SealError`] for a payload over the channel's limit, MessageID 0 or a
/// hop count above 2; `out` is then empty.
pub fn seal_into(
    header: &EnvelopeHeader,
    payload: &[u8],
    key: &NodeKey,
    channel: Channel,
    out: &mut Vec<u8>,
) -> Result<(), SealError> {
    out.clear();
    if payload.len() > channel.max_payload() {
        return Err(SealError::PayloadTooLong {
            len: payload.len(),
            max: channel.max_payload(),
        });
    }
    if header.message_id == 0 {
        return Err(SealError::ZeroMessageId);
    }
    if header.hop_count > MAX_HOP_COUNT {
        return Err(SealError::HopCountTooHigh(header.hop_count));
    }
    let total = ENVELOPE_OVERHEAD + payload.len();
    out.reserve_exact(total);
    out.extend_from_slice(&ENVELOPE_MAGIC);
    out.extend_from_slice(&(total as u16).to_be_bytes());
    out.extend_from_slice(header.source.field());
    out.resize(OFF_NODE_MAGIC, 0);
    debug_assert_eq!(out.len(), OFF_NODE_MAGIC);
    debug_assert!(out[OFF_PASSWORD..OFF_NODE_MAGIC].iter().all(|&b| b == 0));
    out.extend_from_slice(&NODE_MAGIC);
    out.push(PROTOCOL_VERSION);
    out.push(header.subtype.0);
    out.extend_from_slice(&header.flags.0.to_be_bytes());
    out.extend_from_slice(&header.cluster_epoch.to_be_bytes());
    out.extend_from_slice(&header.projection_version.to_be_bytes());
    out.extend_from_slice(&header.node_session_id.to_be_bytes());
    out.extend_from_slice(&header.message_id.to_be_bytes());
    out.extend_from_slice(&header.sent_at_ms.to_be_bytes());
    out.push(header.hop_count);
    out.extend_from_slice(&header.key_epoch.to_be_bytes());
    out.extend_from_slice(&(payload.len() as u32).to_be_bytes());
    out.extend_from_slice(payload);
    let tag = key.tag(out);
    out.extend_from_slice(&tag);
    Ok(())
}

/// [`seal_into`] a new vector.
///
/// # Errors
/// See [`seal_into`].
pub fn seal(
    header: &EnvelopeHeader,
    payload: &[u8],
    key: &NodeKey,
    channel: Channel,
) -> Result<Vec<u8>, SealError> {
    let mut out = Vec::new();
    seal_into(header, payload, key, channel, &mut out)?;
    Ok(out)
}

/// Whether an envelope sent at `sent_at_ms` is outside `±limit_ms` of the
/// wall clock `now_ms` (§4.3 step 5: ±2 s on UDP, ±30 s over TLS, §3.4).
/// Exactly `limit_ms` away is still fresh.
pub fn is_expired(sent_at_ms: i64, now_ms: i64, limit_ms: u64) -> bool {
    now_ms.abs_diff(sent_at_ms) > limit_ms
}
