//! What an app (ghost) login needs from the account store, and what it
//! gets back (`specs/draarl-apps.md` §2.2 steps 4–6, §3.4, §4.2).
//!
//! This is the contract between the session side (the Type 1 handshake in
//! the core, the WebSocket upgrade in the runtime, the radio routing API)
//! and the account side (access tokens, users, routing preferences). The
//! session side never reads tokens or tables itself: it hands an
//! [`AppAuthRequest`] to an
//! [`AppAuthority`](crate::runtime::app_authority::AppAuthority) and acts on
//! the [`AppGrant`] or [`AppReject`] it returns.

use std::fmt;

/// Device model of the Android app (§2.1).
pub const DEV_MODEL_ANDROID: u8 = 101;
/// Device models a UDP ghost may log in with (§2.2 step 5).
pub const UDP_GHOST_DEV_MODELS: std::ops::RangeInclusive<u8> = 101..=104;
/// Device model and SSID of the web client's WebSocket sessions (§4.2).
pub const DEV_MODEL_WEB: u8 = 105;
/// TX group of last resort (correction 5): used when the user's last group
/// for the device model is missing or disabled.
pub const FALLBACK_GROUP_ID: i64 = 999;

/// A session's routing: the group it talks to and the groups it hears.
///
/// Invariant (§2.3): `rx_group_ids` is ascending, without duplicates, and
/// contains `tx_group_id`; every id is positive. [`Routing::new`] builds it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Routing {
    pub tx_group_id: i64,
    pub rx_group_ids: Vec<i64>,
}

impl Routing {
    /// `tx` and `rx` with TX added to RX, sorted and deduplicated. The
    /// caller checks positivity and the subscription limit (§3.4 step 3).
    pub fn new(tx_group_id: i64, mut rx_group_ids: Vec<i64>) -> Self {
        rx_group_ids.push(tx_group_id);
        rx_group_ids.sort_unstable();
        rx_group_ids.dedup();
        Self {
            tx_group_id,
            rx_group_ids,
        }
    }
}

/// The account an app session belongs to.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AppUser {
    /// `users.id`: the session owner (the per-owner limit counts by it).
    pub user_id: i64,
    /// `users.name`: the header Username of every packet of the session.
    pub username: String,
    /// `users.callsign`, possibly empty.
    pub callsign: String,
    /// Whether the account has the admin role (group access rule, §3.4).
    pub is_admin: bool,
}

/// One app login to authorise: §2.2 steps 4–6 for UDP, §4.2 rows 5–9 for
/// WebSocket. Steps 1–3 (JSON shape, instance id, capabilities) are the
/// session side's and have passed.
#[derive(Clone)]
pub struct AppAuthRequest {
    /// The access token as the client sent it.
    pub token: String,
    /// 101–104 for UDP ghosts, 105 for WebSocket.
    pub dev_model: u8,
    /// Normalised (lower-case, hyphenated) client instance id.
    pub client_instance_id: String,
}

impl fmt::Debug for AppAuthRequest {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("AppAuthRequest")
            .field("token", &"<hidden>")
            .field("dev_model", &self.dev_model)
            .field("client_instance_id", &self.client_instance_id)
            .finish()
    }
}

/// An authorised app login: the user and the sanitised initial routing
/// (§2.3 "Initial routing"), already saved if sanitising changed it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AppGrant {
    pub user: AppUser,
    pub routing: Routing,
}

/// Why an app login was refused, in §2.2 check order.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum AppReject {
    /// Step 4: bad signature, algorithm, issuer, `token_use` or expiry.
    InvalidToken,
    /// Step 4: no user with the token's `username`.
    UserNotFound,
    /// Step 4: `status ≠ 1`.
    UserDisabled,
    /// Step 4: `approval_status ≠ 1` (admins are not exempt).
    UserNotApproved,
    /// Step 6: the routing preference cannot be loaded, created or
    /// sanitised (store error, or a stored routing over the limit).
    PreferenceUnavailable,
}

impl AppReject {
    /// `DATA[0]` of the Type 1 reject (§2.2).
    pub fn udp_code(self) -> u8 {
        match self {
            Self::InvalidToken | Self::PreferenceUnavailable => 1,
            Self::UserNotFound => 2,
            Self::UserDisabled => 3,
            Self::UserNotApproved => 4,
        }
    }

    /// The text after the code byte of the Type 1 reject (§2.2).
    pub fn udp_text(self) -> &'static str {
        match self {
            Self::InvalidToken => "Invalid or expired token",
            Self::UserNotFound => "User not found",
            Self::UserDisabled => "User is disabled",
            Self::UserNotApproved => "User is not approved",
            Self::PreferenceUnavailable => "client_preference_unavailable",
        }
    }

    /// The plain-text body of the pre-upgrade 401 of `/ws` (§4.2 rows 5–9).
    pub fn ws_text(self) -> &'static str {
        match self {
            Self::InvalidToken => "invalid_token",
            Self::UserNotFound => "user_not_found",
            Self::UserDisabled => "user_disabled",
            Self::UserNotApproved => "user_not_approved",
            Self::PreferenceUnavailable => "client_preference_unavailable",
        }
    }
}

/// A routing change asked for through `PUT /api/radio/sessions/:id/routing`,
/// after the session side's checks (§3.4 rows 1–4).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RoutingChange {
    pub user: AppUser,
    pub dev_model: u8,
    pub client_instance_id: String,
    pub requested: Routing,
}

/// Why a routing change was refused (§3.4 rows 5–7).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RoutingReject {
    /// Row 5: 404 `group_not_found`.
    GroupNotFound,
    /// Row 6: 403 `group_forbidden`.
    GroupForbidden,
    /// Row 7: 500 `routing_update_failed`.
    UpdateFailed,
}
