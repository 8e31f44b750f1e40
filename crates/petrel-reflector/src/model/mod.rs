//! The bottom layer: the data every other layer speaks in, with no I/O, no
//! threads and no clock. Device identity, the directory view, frames and
//! receiver snapshots, store events, password checks and their verdicts,
//! recordings, and every configuration section with its validation.
//!
//! Everything here depends only on [`crate::codec`] (wire formats) and
//! external crates; [`crate::policy`], [`crate::core`] and
//! [`crate::runtime`] build on it.

mod access_token;
mod app_api_config;
mod app_login;
mod app_login_check;
mod argon2_memory;
pub(crate) mod db_location;
mod device;
mod device_kind;
mod directory;
mod endpoint;
mod endpoint_policy;
mod fanout_config;
mod frame;
mod group_rule;
mod http_config;
mod interconnect_config;
mod node_credential;
mod password;
mod password_check;
mod recording;
mod recording_config;
mod server_config;
mod session_config;
mod session_entry;
mod snapshot;
mod source_prefix;
mod store_event;
mod time_text;
mod verifier_config;
mod web_password;

pub use access_token::{AccessClaims, TokenError, TokenKeys, ACCESS_TOKEN_SECS, TOKEN_ISSUER};
pub(crate) use app_api_config::is_host;
pub use app_api_config::{normalise_origin, AppApiConfig, MIN_JWT_SECRET_CHARS};
pub use app_login::{
    AppAuthRequest, AppGrant, AppReject, AppUser, Routing, RoutingChange, RoutingReject,
    DEV_MODEL_ANDROID, DEV_MODEL_WEB, FALLBACK_GROUP_ID, UDP_GHOST_DEV_MODELS,
};
pub use app_login_check::AppLoginCheck;
pub use argon2_memory::{Argon2Memory, Verdict};
pub use db_location::{redact, Backend};
pub use device::{is_app_ssid, is_reserved_ssid, DeviceKey};
pub use device_kind::DeviceKind;
pub use directory::{DeviceRecord, Directory, Domain, GroupRecord, UserRecord, UNGROUPED};
pub use endpoint::{ConnectionId, Endpoint};
pub use endpoint_policy::EndpointPolicy;
pub use fanout_config::FanoutConfig;
pub use frame::{Frame, FrameKind, Transmit};
pub use group_rule::{sanitise, GroupFacts, OverLimit, GROUP_PRIVATE, GROUP_PUBLIC};
pub use http_config::{HttpConfig, MIN_ADMIN_TOKEN_CHARS};
pub use interconnect_config::InterconnectConfig;
pub use node_credential::{
    generated_node_name, hashes_match, is_node_name, parse_pin, pin_hex, sha256_hex,
    NodeCredential, NodeCredentialError, NodeToken, CREDENTIAL_PREFIX, CREDENTIAL_SECRET_LEN,
    MAX_NODE_NAME_LEN, PIN_SEPARATOR,
};
pub use password::{
    hash_device_password, is_valid_device_password, verify_device_password, HashCost, PasswordError,
};
pub use password_check::PasswordCheck;
pub(crate) use recording::FRAME_MS;
pub use recording::{numbered_path, relative_path, Recording};
pub use recording_config::RecordingConfig;
pub use server_config::ServerConfig;
pub use session_config::SessionConfig;
pub use session_entry::{SessionEntryRecord, SessionEntryWrite};
pub use snapshot::{endpoint_hash, partition_of, Snapshot};
pub use source_prefix::{is_loopback_source, SourcePrefix};
pub use store_event::StoreEvent;
pub use time_text::{legacy_datetime, rfc3339_utc};
pub use verifier_config::VerifierConfig;
pub use web_password::{
    hash_web_password, verify_web_password, WebPasswordError, MAX_WEB_PASSWORD_BYTES,
    WEB_PASSWORD_COST,
};
