//! DraARLv1 wire formats: the 90-byte header, heartbeat, config and voice DATA,
//! the Type 1 app login JSON, the `.raw` recording container, and the Type 0
//! interconnect envelope between centre and edges ([`interconnect`]). Pure functions over byte slices; no
//! I/O, no allocation beyond the returned values.

mod app_login;
mod config;
mod header;
mod heartbeat;
pub mod interconnect;
mod raw;
mod voice;

#[cfg(test)]
mod tests;

pub use app_login::{
    normalize_instance_id, parse_login_request, require_capabilities, AppLoginError,
    AppLoginRequest, AppLoginSuccess, REQUIRED_CAPABILITIES,
};
pub use config::{tag_len, ConfigCommand, ConfigError, Tlv};
pub use header::{
    decode, decode_unframed, encode, encode_into, rewrite_forward, set_reserved, DecodeError,
    EncodeError, ForwardIdentity, Header, Packet, PacketType, CALLSIGN_LEN, HEADER_LEN, MAGIC,
    MAX_DATAGRAM_LEN, MAX_DATA_LEN, PASSWORD_LEN, USERNAME_LEN,
};
pub(crate) use header::{OFF_SSID, OFF_TYPE, OFF_USERNAME};
pub use heartbeat::{Gps, HeartbeatData, HeartbeatError, Mac};
pub use raw::{decode_raw, encode_raw, RawError, RAW_HEADER_LEN};
pub use voice::{merge_frames, split_frames, MergeError, MAX_SUBFRAME_LEN};
