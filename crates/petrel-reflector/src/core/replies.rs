//! Heartbeat replies (draarl-v1 §2.7) and the Type 1 app-login reject
//! (`specs/draarl-apps.md` §2.2), as a single node and an edge send them.

use crate::codec::{encode, Header, PacketType, CALLSIGN_LEN, MAX_DATA_LEN, PASSWORD_LEN};

/// Why a heartbeat login was refused; the wire status code and reason text.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RejectReason {
    /// Code 1: the device is online at another address.
    ConflictOnline,
    /// Code 2: SSID 0, 100–105 or 255.
    ReservedSsid,
    /// Code 3: no such account.
    UserNotFound,
    /// Code 3: account disabled.
    UserDisabled,
    /// Code 3: wrong password, or the account is not approved (on purpose).
    InvalidPassword,
    /// Code 3: the account has no device password.
    PasswordNotSet,
    /// Code 3: the (IP, username) pair is banned for repeated failures.
    TooManyFailures,
    /// Code 3: the session table is full (Petrel-specific reason).
    ServerFull,
    /// Code 3: the password-check budget is spent; retry later (Petrel-specific).
    ServerBusy,
    /// Code 3: the account has `max_per_account` endpoints online
    /// (Petrel-specific; see [`EndpointPolicy`](crate::model::EndpointPolicy)).
    AccountEndpointLimit,
    /// Code 3: the source's /24 or /64 has `max_per_prefix` endpoints
    /// online (Petrel-specific).
    PrefixEndpointLimit,
}

impl RejectReason {
    /// Status byte.
    pub fn code(self) -> u8 {
        match self {
            Self::ConflictOnline => 1,
            Self::ReservedSsid => 2,
            _ => 3,
        }
    }

    /// ASCII reason after the status byte.
    pub fn text(self) -> &'static str {
        match self {
            Self::ConflictOnline => "device_conflict_online",
            Self::ReservedSsid => "reserved_ssid",
            Self::UserNotFound => "user_not_found",
            Self::UserDisabled => "user_disabled",
            Self::InvalidPassword => "invalid_password",
            Self::PasswordNotSet => "device_password_not_set",
            Self::TooManyFailures => "too_many_failures",
            Self::ServerFull => "server_full",
            Self::ServerBusy => "server_busy",
            Self::AccountEndpointLimit => "too_many_devices",
            Self::PrefixEndpointLimit => "too_many_devices_from_network",
        }
    }
}

/// Success: the request echoed with the callsign filled in, Reserved 0 and,
/// unlike the reference, the password zeroed (spec §9: no client needs it).
pub(crate) fn heartbeat_success(req: &Header, callsign: &str, data: &[u8]) -> Vec<u8> {
    let mut h = req.clone();
    h.packet_type = PacketType::Heartbeat;
    h.device_password = [0; PASSWORD_LEN];
    h.set_callsign(callsign);
    h.reserved = 0;
    // Clients detect success by a non-empty callsign; never send an empty one.
    if h.callsign == [0; CALLSIGN_LEN] {
        h.set_callsign("-");
    }
    let data = &data[..data.len().min(MAX_DATA_LEN)];
    encode(&h, data).unwrap_or_default()
}

/// Reject: identity echoed, password and callsign empty, DATA = code + reason.
pub(crate) fn heartbeat_reject(req: &Header, reason: RejectReason) -> Vec<u8> {
    let mut h = req.clone();
    h.packet_type = PacketType::Heartbeat;
    reject_with_type(&h, reason)
}

/// A reject in a reply of `req`'s own Type (`specs/draarl-apps.md`
/// correction 3): identity echoed, password and callsign empty, Reserved
/// 0, DATA = code + reason.
pub(crate) fn reject_with_type(req: &Header, reason: RejectReason) -> Vec<u8> {
    let mut h = req.clone();
    h.device_password = [0; PASSWORD_LEN];
    h.callsign = [0; CALLSIGN_LEN];
    h.reserved = 0;
    let mut data = vec![reason.code()];
    data.extend_from_slice(reason.text().as_bytes());
    encode(&h, &data).unwrap_or_default()
}

/// A Type 1 app-login reject (`specs/draarl-apps.md` §2.2 "Reject
/// header"): the request's username, empty password and callsign,
/// DevModel echoed, SSID = DevModel, DMRID 0, Reserved 0; DATA = `code`
/// then `text`. `None` if `text` does not fit a datagram.
pub(crate) fn app_login_reject(req: &Header, code: u8, text: &str) -> Option<Vec<u8>> {
    let mut h = Header::new(PacketType::JwtAuth);
    h.username = req.username;
    h.device_password = [0; PASSWORD_LEN];
    h.callsign = [0; CALLSIGN_LEN];
    h.dev_model = req.dev_model;
    h.ssid = req.dev_model;
    let mut data = Vec::with_capacity(1 + text.len());
    data.push(code);
    data.extend_from_slice(text.as_bytes());
    encode(&h, &data).ok()
}
