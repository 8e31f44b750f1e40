//! The `[apps]` section: what the HTTP API of the app clients needs
//! (`specs/draarl-apps.md` §1, §1.5, §3.8): the published UDP access
//! point, the origin allow-list, and the bounds of the login tables.
//!
//! The app API is on by default (`enabled = false` turns it off: then the
//! reflector serves no app routes, no Type 1 logins and no `/ws`, and
//! everything under `/api/` stays the admin API). The top-level keys
//! `login_captcha` and `jwt_secret` of [`ServerConfig`](super::ServerConfig)
//! apply while it is on.

use serde::Deserialize;

use petrel_sys::range::{check_range, check_range_in, RangeError};

/// Fewest characters of a configured `jwt_secret` (§1.4).
pub const MIN_JWT_SECRET_CHARS: usize = 32;

/// Settings of the app API.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct AppApiConfig {
    /// Whether the app API is served. Default `true`.
    pub enabled: bool,
    /// Host name or IP literal the apps send UDP to (`/api/access-points`,
    /// §3.8): no scheme, no port, 1–253 characters. Default `""`: the host
    /// the client reached the HTTP API at (its `Host` header), which is right
    /// whenever one name serves both HTTP and UDP; set it when they differ.
    pub public_host: String,
    /// UDP port published with `public_host` (0–65535). Default 0: the
    /// reflector's UDP listen port.
    pub public_port: u16,
    /// The access point's `id` (`^[a-z0-9](?:[a-z0-9_-]{0,62}[a-z0-9])?$`).
    /// Default `center`.
    pub access_point_id: String,
    /// The access point's `display_name` (1–100 characters). Default `中心直连`.
    pub display_name: String,
    /// The access point's `region`, omitted when empty (≤ 100 characters).
    pub region: String,
    /// The access point's `network`, omitted when empty (≤ 100 characters).
    pub network: String,
    /// Origins (`scheme://host[:port]`) allowed to call the API from a
    /// browser (§1.1 origin guard), compared case-insensitively with a
    /// trailing `/` ignored; at most 64. Requests with neither `Origin` nor
    /// `Referer` (the Android app) always pass. Default none.
    pub allowed_origins: Vec<String>,
    /// Pending captchas kept (16–1000000); when full the oldest is
    /// dropped (counted). Default 4096.
    pub captcha_max: usize,
    /// Captchas per source prefix (/24, /64) per minute (1–100000), with
    /// `captcha_burst` at once; beyond it 429 (§1.2: 5 per 10 s, 30 per
    /// minute). Default 30.
    pub captcha_per_minute: u32,
    /// Captchas per source prefix at once (1–100000). Default 5.
    pub captcha_burst: u32,
    /// Logins per source prefix per minute (1–100000); beyond it 429.
    /// Default 20.
    pub login_per_minute: u32,
    /// Logins per source prefix at once (1–100000). Default 10.
    pub login_burst: u32,
    /// Source prefixes tracked by the captcha and login limits each
    /// (16–1000000); when full the least recently seen is evicted
    /// (counted). Default 4096.
    pub limit_table_max: usize,
    /// Refresh tokens kept per user, revoked ones included (2–1000); a new
    /// one beyond it evicts the oldest (counted). Default 20.
    pub refresh_tokens_per_user: u32,
    /// Routing preferences kept per user (1–10000); a new one beyond it
    /// evicts the least recently used (counted). Default 32.
    pub preferences_per_user: u32,
    /// Largest number of groups of a session's routing, TX included
    /// (1–256, reference `MaxSubscriptionsPerSession`). Default 16.
    pub max_subscriptions: u32,
    /// WebSocket sessions (`/ws`) open at once (1–1000000); a new one
    /// beyond it evicts the idlest (longest since its client's last frame)
    /// with close code 1008 `websocket_sessions_full` (counted). Upgraded
    /// connections have left the `[http]` connection caps, so this bounds
    /// them. Default 4096.
    pub max_websocket_sessions: usize,
}

impl Default for AppApiConfig {
    fn default() -> Self {
        Self {
            enabled: true,
            public_host: String::new(),
            public_port: 0,
            access_point_id: "center".into(),
            display_name: "中心直连".into(),
            region: String::new(),
            network: String::new(),
            allowed_origins: Vec::new(),
            captcha_max: 4096,
            captcha_per_minute: 30,
            captcha_burst: 5,
            login_per_minute: 20,
            login_burst: 10,
            limit_table_max: 4096,
            refresh_tokens_per_user: 20,
            preferences_per_user: 32,
            max_subscriptions: 16,
            max_websocket_sessions: 4096,
        }
    }
}

/// A configuration value that is not well formed: displays as
/// `{field} = {value:?} is outside {what}`.
fn invalid(field: &'static str, value: &str, what: &str) -> RangeError {
    RangeError {
        field,
        value: format!("{value:?}"),
        range: what.to_owned(),
    }
}

impl AppApiConfig {
    /// Checks every field: ranges, the access point's host, id and labels
    /// (§3.8 "Reference validation"), and each allowed origin.
    pub fn validate(&self) -> Result<(), RangeError> {
        if !self.public_host.is_empty() && !is_host(&self.public_host) {
            return Err(invalid(
                "apps.public_host",
                &self.public_host,
                "a host name or IP literal without scheme or port",
            ));
        }
        if !is_access_point_id(&self.access_point_id) {
            return Err(invalid(
                "apps.access_point_id",
                &self.access_point_id,
                "^[a-z0-9](?:[a-z0-9_-]{0,62}[a-z0-9])?$",
            ));
        }
        check_range_in(
            "apps.display_name",
            self.display_name.chars().count(),
            &(1..=100),
            "characters",
        )?;
        check_range_in(
            "apps.region",
            self.region.chars().count(),
            &(0..=100),
            "characters",
        )?;
        check_range_in(
            "apps.network",
            self.network.chars().count(),
            &(0..=100),
            "characters",
        )?;
        check_range(
            "apps.allowed_origins",
            self.allowed_origins.len(),
            &(0..=64),
        )?;
        if let Some(bad) = self
            .allowed_origins
            .iter()
            .find(|o| normalise_origin(o).is_none())
        {
            return Err(invalid(
                "apps.allowed_origins",
                bad,
                "http(s)://host[:port]",
            ));
        }
        check_range("apps.captcha_max", self.captcha_max, &(16..=1_000_000))?;
        check_range(
            "apps.captcha_per_minute",
            self.captcha_per_minute,
            &(1..=100_000),
        )?;
        check_range("apps.captcha_burst", self.captcha_burst, &(1..=100_000))?;
        check_range(
            "apps.login_per_minute",
            self.login_per_minute,
            &(1..=100_000),
        )?;
        check_range("apps.login_burst", self.login_burst, &(1..=100_000))?;
        check_range(
            "apps.limit_table_max",
            self.limit_table_max,
            &(16..=1_000_000),
        )?;
        check_range(
            "apps.refresh_tokens_per_user",
            self.refresh_tokens_per_user,
            &(2..=1000),
        )?;
        check_range(
            "apps.preferences_per_user",
            self.preferences_per_user,
            &(1..=10_000),
        )?;
        check_range("apps.max_subscriptions", self.max_subscriptions, &(1..=256))?;
        check_range(
            "apps.max_websocket_sessions",
            self.max_websocket_sessions,
            &(1..=1_000_000),
        )
    }
}

/// Whether `s` is a host name (letters, digits, `-`, `.`; labels of 1–63)
/// or an IP literal, with no scheme, path or port.
pub(crate) fn is_host(s: &str) -> bool {
    if s.parse::<std::net::IpAddr>().is_ok() {
        return true;
    }
    !s.is_empty()
        && s.len() <= 253
        && s.split('.').all(|label| {
            !label.is_empty()
                && label.len() <= 63
                && !label.starts_with('-')
                && !label.ends_with('-')
                && label
                    .bytes()
                    .all(|b| b.is_ascii_alphanumeric() || b == b'-')
        })
}

/// Whether `s` is a valid access point id (§3.8).
fn is_access_point_id(s: &str) -> bool {
    let b = s.as_bytes();
    let edge = |c: &u8| c.is_ascii_lowercase() || c.is_ascii_digit();
    let inner = |c: &u8| edge(c) || *c == b'_' || *c == b'-';
    match b {
        [] => false,
        [only] => edge(only),
        [first, mid @ .., last] => {
            b.len() <= 64 && edge(first) && edge(last) && mid.iter().all(inner)
        }
    }
}

/// `origin` as compared by the origin guard: lower case, without a
/// trailing `/`, if it is `http(s)://host[:port]` with nothing after.
pub fn normalise_origin(origin: &str) -> Option<String> {
    let o = origin.trim().trim_end_matches('/').to_ascii_lowercase();
    let rest = o
        .strip_prefix("http://")
        .or_else(|| o.strip_prefix("https://"))?;
    if rest.is_empty() || rest.contains(['/', '?', '#', '@', ' ']) {
        return None;
    }
    Some(o)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn with(f: impl FnOnce(&mut AppApiConfig)) -> Result<(), RangeError> {
        let mut c = AppApiConfig {
            public_host: "radio.example.com".into(),
            ..AppApiConfig::default()
        };
        f(&mut c);
        c.validate()
    }

    #[test]
    fn access_point_validation_follows_the_reference() {
        assert!(with(|_| {}).is_ok());
        assert!(with(|c| c.public_host = "192.0.2.7".into()).is_ok());
        // Empty: the host the client reached the API at.
        assert!(with(|c| c.public_host = String::new()).is_ok());
        for bad in ["https://radio.example.com", "radio.example.com:60050"] {
            let e = with(|c| c.public_host = bad.into()).unwrap_err();
            assert_eq!(e.field, "apps.public_host", "{bad}");
        }
        assert_eq!(
            with(|c| c.access_point_id = "center/internal".into())
                .unwrap_err()
                .field,
            "apps.access_point_id"
        );
        assert!(with(|c| c.access_point_id = "edge_1-a".into()).is_ok());
        // 0: the UDP listen port.
        assert!(with(|c| c.public_port = 0).is_ok());
        assert!(with(|c| c.region = "福建省 福州市".into()).is_ok());
    }

    #[test]
    fn origins_are_normalised_or_refused() {
        assert_eq!(
            normalise_origin("HTTP://LocalHost:9001/").as_deref(),
            Some("http://localhost:9001")
        );
        assert_eq!(normalise_origin("http://localhost:9001/radio"), None);
        assert_eq!(normalise_origin("ftp://x"), None);
        assert!(with(|c| c.allowed_origins = vec!["localhost:9001".into()]).is_err());
        assert!(with(|c| c.allowed_origins = vec!["https://app.example.com".into()]).is_ok());
    }
}
