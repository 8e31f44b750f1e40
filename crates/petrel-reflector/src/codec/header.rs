//! The fixed 90-byte DraARLv1 header and the datagram envelope rules
//! (draarl-v1 spec §2.1–§2.2): big-endian integers, `DraA` magic, the length
//! field equal to the datagram length, at most 800 bytes, types 1–5.

use thiserror::Error;

/// Length of the fixed header in bytes.
pub const HEADER_LEN: usize = 90;
/// Largest datagram the reflector accepts, in bytes (spec §2.1).
pub const MAX_DATAGRAM_LEN: usize = 800;
/// Largest DATA section, in bytes (800 − 90).
pub const MAX_DATA_LEN: usize = MAX_DATAGRAM_LEN - HEADER_LEN;
/// Magic/version bytes at offset 0: ASCII `DraA`.
pub const MAGIC: [u8; 4] = *b"DraA";
/// Bytes of the username field.
pub const USERNAME_LEN: usize = 32;
/// Bytes of the device password field.
pub const PASSWORD_LEN: usize = 10;
/// Bytes of the callsign field.
pub const CALLSIGN_LEN: usize = 32;

pub(crate) const OFF_LENGTH: usize = 4;
pub(crate) const OFF_USERNAME: usize = 6;
pub(crate) const OFF_PASSWORD: usize = 38;
pub(crate) const OFF_TYPE: usize = 48;
pub(crate) const OFF_DEV_MODEL: usize = 49;
pub(crate) const OFF_SSID: usize = 50;
pub(crate) const OFF_DMRID: usize = 51;
pub(crate) const OFF_CALLSIGN: usize = 54;
pub(crate) const OFF_RESERVED: usize = 86;

/// Packet types accepted by the public decoder (spec §2.3). Type 0 (node
/// envelope) and types ≥ 6 are rejected.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[repr(u8)]
pub enum PacketType {
    /// Type 1: JSON ghost (app) authentication.
    JwtAuth = 1,
    /// Type 2: heartbeat / password login.
    Heartbeat = 2,
    /// Type 3: device configuration TLVs and time sync.
    Config = 3,
    /// Type 4: UTF-8 text, forwarded unchanged.
    Text = 4,
    /// Type 5: Opus 16 kHz mono voice.
    Voice = 5,
}

impl PacketType {
    /// Maps a wire byte to a type; `None` for 0 and ≥ 6.
    pub fn from_u8(v: u8) -> Option<Self> {
        match v {
            1 => Some(Self::JwtAuth),
            2 => Some(Self::Heartbeat),
            3 => Some(Self::Config),
            4 => Some(Self::Text),
            5 => Some(Self::Voice),
            _ => None,
        }
    }
}

/// Why a datagram was not a valid DraARLv1 packet.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
pub enum DecodeError {
    /// Shorter than the 90-byte header.
    #[error("datagram of {0} bytes is shorter than the 90-byte header")]
    TooShort(usize),
    /// Longer than the 800-byte maximum.
    #[error("datagram of {0} bytes exceeds the 800-byte maximum")]
    TooLong(usize),
    /// The first four bytes are not `DraA`.
    #[error("bad magic (expected \"DraA\")")]
    BadMagic,
    /// The header length field differs from the received length.
    #[error("header length {declared} != datagram length {actual}")]
    LengthMismatch {
        /// Value of the length field.
        declared: u16,
        /// Bytes actually received.
        actual: usize,
    },
    /// Type 0, or a type ≥ 6.
    #[error("packet type {0} is not accepted (1..=5)")]
    BadType(u8),
}

/// Why a packet could not be encoded.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
pub enum EncodeError {
    /// DATA would push the datagram past 800 bytes.
    #[error("DATA of {0} bytes exceeds the 710-byte maximum")]
    DataTooLong(usize),
}

/// The decoded 90-byte header. Text fields keep their raw NUL-padded bytes so
/// that encode(decode(x)) is byte-exact; use the `*_str` accessors to read them.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Header {
    /// Account name, UTF-8, NUL-padded.
    pub username: [u8; USERNAME_LEN],
    /// Device password, ASCII, NUL-padded. Meaningful only on Type 2.
    pub device_password: [u8; PASSWORD_LEN],
    /// Packet type.
    pub packet_type: PacketType,
    /// Device model (spec §2.5).
    pub dev_model: u8,
    /// Device sub-id 0–255 (spec §2.6).
    pub ssid: u8,
    /// DMR ID, 24 bits.
    pub dmrid: u32,
    /// Callsign, ASCII, NUL-padded.
    pub callsign: [u8; CALLSIGN_LEN],
    /// Session tag / source group id / 0 (spec §2.1).
    pub reserved: u32,
}

fn trim_nuls(b: &[u8]) -> &[u8] {
    let end = b.iter().rposition(|&c| c != 0).map_or(0, |i| i + 1);
    &b[..end]
}

/// Copies `s` into a NUL-padded field, cutting at a UTF-8 boundary so the
/// field never holds a partial character.
fn fill_field<const N: usize>(s: &str) -> [u8; N] {
    let mut out = [0u8; N];
    let mut end = s.len().min(N);
    while !s.is_char_boundary(end) {
        end -= 1;
    }
    out[..end].copy_from_slice(&s.as_bytes()[..end]);
    out
}

impl Header {
    /// A header of `packet_type` with every other field zero.
    pub fn new(packet_type: PacketType) -> Self {
        Self {
            username: [0; USERNAME_LEN],
            device_password: [0; PASSWORD_LEN],
            packet_type,
            dev_model: 0,
            ssid: 0,
            dmrid: 0,
            callsign: [0; CALLSIGN_LEN],
            reserved: 0,
        }
    }

    /// Username with trailing NULs trimmed, or `None` if not UTF-8.
    pub fn username_str(&self) -> Option<&str> {
        std::str::from_utf8(trim_nuls(&self.username)).ok()
    }

    /// Device password bytes with trailing NULs trimmed.
    pub fn password_bytes(&self) -> &[u8] {
        trim_nuls(&self.device_password)
    }

    /// Callsign with trailing NULs trimmed, or `None` if not UTF-8.
    pub fn callsign_str(&self) -> Option<&str> {
        std::str::from_utf8(trim_nuls(&self.callsign)).ok()
    }

    /// Sets the username, cut to 32 bytes on a character boundary.
    pub fn set_username(&mut self, s: &str) {
        self.username = fill_field(s);
    }

    /// Sets the device password, cut to 10 bytes.
    pub fn set_password(&mut self, s: &str) {
        self.device_password = fill_field(s);
    }

    /// Sets the callsign, cut to 32 bytes.
    pub fn set_callsign(&mut self, s: &str) {
        self.callsign = fill_field(s);
    }

    /// Writes the header for a datagram carrying `data_len` DATA bytes.
    fn write(&self, data_len: usize, out: &mut [u8; HEADER_LEN]) {
        out[..4].copy_from_slice(&MAGIC);
        let total = (HEADER_LEN + data_len) as u16;
        out[OFF_LENGTH..OFF_LENGTH + 2].copy_from_slice(&total.to_be_bytes());
        out[OFF_USERNAME..OFF_PASSWORD].copy_from_slice(&self.username);
        out[OFF_PASSWORD..OFF_TYPE].copy_from_slice(&self.device_password);
        out[OFF_TYPE] = self.packet_type as u8;
        out[OFF_DEV_MODEL] = self.dev_model;
        out[OFF_SSID] = self.ssid;
        let d = (self.dmrid & 0x00ff_ffff).to_be_bytes();
        out[OFF_DMRID..OFF_CALLSIGN].copy_from_slice(&d[1..]);
        out[OFF_CALLSIGN..OFF_RESERVED].copy_from_slice(&self.callsign);
        out[OFF_RESERVED..HEADER_LEN].copy_from_slice(&self.reserved.to_be_bytes());
    }
}

/// A decoded packet borrowing its DATA from the datagram.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Packet<'a> {
    /// The fixed header.
    pub header: Header,
    /// DATA after the header (0–710 bytes).
    pub data: &'a [u8],
}

fn arr<const N: usize>(b: &[u8], off: usize) -> [u8; N] {
    let mut out = [0u8; N];
    out.copy_from_slice(&b[off..off + N]);
    out
}

/// Decodes one datagram, applying the envelope checks of spec §2.2 in order:
/// size ≤ 800, size ≥ 90, magic, exact length, type 1..=5.
pub fn decode(datagram: &[u8]) -> Result<Packet<'_>, DecodeError> {
    let len = datagram.len();
    if len > MAX_DATAGRAM_LEN {
        return Err(DecodeError::TooLong(len));
    }
    if len < HEADER_LEN {
        return Err(DecodeError::TooShort(len));
    }
    if datagram[..4] != MAGIC {
        return Err(DecodeError::BadMagic);
    }
    let declared = u16::from_be_bytes([datagram[OFF_LENGTH], datagram[OFF_LENGTH + 1]]);
    if usize::from(declared) != len {
        return Err(DecodeError::LengthMismatch {
            declared,
            actual: len,
        });
    }
    let packet_type =
        PacketType::from_u8(datagram[OFF_TYPE]).ok_or(DecodeError::BadType(datagram[OFF_TYPE]))?;
    let d = &datagram[OFF_DMRID..OFF_CALLSIGN];
    let header = Header {
        username: arr(datagram, OFF_USERNAME),
        device_password: arr(datagram, OFF_PASSWORD),
        packet_type,
        dev_model: datagram[OFF_DEV_MODEL],
        ssid: datagram[OFF_SSID],
        dmrid: u32::from_be_bytes([0, d[0], d[1], d[2]]),
        callsign: arr(datagram, OFF_CALLSIGN),
        reserved: u32::from_be_bytes(arr(datagram, OFF_RESERVED)),
    };
    Ok(Packet {
        header,
        data: &datagram[HEADER_LEN..],
    })
}

/// Decodes one WebSocket binary frame (`specs/draarl-apps.md` §4.4): at
/// least 90 bytes, the magic and a Type 1..=5, as [`decode`] checks them;
/// unlike a UDP datagram, neither the length field nor the 800-byte cap is
/// checked (DATA is everything after the header).
pub fn decode_unframed(frame: &[u8]) -> Result<Packet<'_>, DecodeError> {
    if frame.len() < HEADER_LEN {
        return Err(DecodeError::TooShort(frame.len()));
    }
    let mut header = [0u8; HEADER_LEN];
    header.copy_from_slice(&frame[..HEADER_LEN]);
    header[OFF_LENGTH..OFF_LENGTH + 2].copy_from_slice(&(HEADER_LEN as u16).to_be_bytes());
    let packet = decode(&header)?;
    Ok(Packet {
        header: packet.header,
        data: &frame[HEADER_LEN..],
    })
}

/// Encodes `header` + `data` into `out` (cleared first). DMRID is masked to 24
/// bits, as the wire field is.
pub fn encode_into(header: &Header, data: &[u8], out: &mut Vec<u8>) -> Result<(), EncodeError> {
    if data.len() > MAX_DATA_LEN {
        return Err(EncodeError::DataTooLong(data.len()));
    }
    let mut h = [0u8; HEADER_LEN];
    header.write(data.len(), &mut h);
    out.clear();
    out.extend_from_slice(&h);
    out.extend_from_slice(data);
    Ok(())
}

/// Encodes `header` + `data` into a new buffer.
pub fn encode(header: &Header, data: &[u8]) -> Result<Vec<u8>, EncodeError> {
    let mut out = Vec::with_capacity(HEADER_LEN + data.len());
    encode_into(header, data, &mut out)?;
    Ok(out)
}

/// Identity written into a forwarded Type 4/5 packet (spec §2.4); every field
/// comes from the store, never from the sender's header.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ForwardIdentity {
    /// Owner's account name.
    pub username: [u8; USERNAME_LEN],
    /// Owner's callsign.
    pub callsign: [u8; CALLSIGN_LEN],
    /// Device model from the device record.
    pub dev_model: u8,
    /// Device SSID.
    pub ssid: u8,
    /// DMR ID from the device record (24 bits).
    pub dmrid: u32,
}

impl ForwardIdentity {
    /// Builds the identity from store values, cutting text fields to size.
    pub fn new(username: &str, callsign: &str, dev_model: u8, ssid: u8, dmrid: u32) -> Self {
        Self {
            username: fill_field(username),
            callsign: fill_field(callsign),
            dev_model,
            ssid,
            dmrid,
        }
    }
}

/// Rewrites a validated Type 4/5 datagram in place for forwarding (spec §2.4):
/// identity from the store, password and Reserved zeroed, DATA untouched.
/// Returns `false` (and leaves `buf` alone) if `buf` is not a valid packet.
pub fn rewrite_forward(buf: &mut [u8], id: &ForwardIdentity) -> bool {
    let packet_type = match decode(buf) {
        Ok(p) => p.header.packet_type,
        Err(_) => return false,
    };
    let h = Header {
        username: id.username,
        device_password: [0; PASSWORD_LEN],
        packet_type,
        dev_model: id.dev_model,
        ssid: id.ssid,
        dmrid: id.dmrid,
        callsign: id.callsign,
        reserved: 0,
    };
    let mut out = [0u8; HEADER_LEN];
    h.write(buf.len() - HEADER_LEN, &mut out);
    buf[..HEADER_LEN].copy_from_slice(&out);
    true
}

/// Writes `reserved` (BE) into bytes 86..90 of `buf`; nothing if `buf` is
/// shorter than a header. For the session-aware copy of a forwarded frame,
/// whose Reserved holds the source group (`specs/draarl-apps.md` §2.7).
pub fn set_reserved(buf: &mut [u8], reserved: u32) {
    if let Some(field) = buf.get_mut(OFF_RESERVED..HEADER_LEN) {
        field.copy_from_slice(&reserved.to_be_bytes());
    }
}

#[cfg(test)]
mod unframed_tests {
    use super::*;

    #[test]
    fn websocket_frames_ignore_the_length_field_only() {
        let mut h = Header::new(PacketType::Voice);
        h.set_username("web");
        let mut frame = encode(&h, &[1, 2, 3]).unwrap();
        frame[OFF_LENGTH] = 0xff;
        assert!(decode(&frame).is_err());
        let p = decode_unframed(&frame).unwrap();
        assert_eq!((p.header, p.data), (h, &[1u8, 2, 3][..]));
        let mut long = frame.clone();
        long.extend(std::iter::repeat_n(9u8, 2000));
        assert_eq!(decode_unframed(&long).unwrap().data.len(), 2003);
        for t in [0u8, 6, 7, 255] {
            let mut bad = frame.clone();
            bad[OFF_TYPE] = t;
            assert_eq!(decode_unframed(&bad).unwrap_err(), DecodeError::BadType(t));
        }
        assert!(decode_unframed(&frame[..89]).is_err());
        let mut magic = frame;
        magic[0] = b'd';
        assert_eq!(decode_unframed(&magic).unwrap_err(), DecodeError::BadMagic);
    }
}
