//! The reflector's configuration file: one section per layer, each
//! validated by its own type; the server's own fields are checked here.

use std::net::SocketAddr;

use serde::Deserialize;

use petrel_sys::range::{check_range, check_range_in, RangeError};

use super::app_api_config::{AppApiConfig, MIN_JWT_SECRET_CHARS};
use super::db_location::redact;
use super::fanout_config::FanoutConfig;
use super::http_config::{HttpConfig, MIN_ADMIN_TOKEN_CHARS};
use super::interconnect_config::InterconnectConfig;
use super::recording_config::RecordingConfig;
use super::session_config::SessionConfig;

/// Server configuration: the TOML file's shape, with documented defaults.
/// Its `Debug` output redacts the database password and the admin token.
#[derive(Clone, PartialEq, Eq, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct ServerConfig {
    /// UDP listen address. Default `0.0.0.0:60050` (the reference's port).
    pub listen: SocketAddr,
    /// Store location: a SQLite file path (created on first start), a
    /// `sqlite:` URL or a `postgres://user:password@host/db` URL (see
    /// `Store::open`). Default `petrel-reflector.db`. The password is
    /// redacted wherever the location is printed.
    pub db: String,
    /// Public talkgroup created on a fresh store. Default 999.
    pub default_group_id: i64,
    /// Directory reload period, ms (reference: 10 000), 1000–3600000.
    pub reload_interval_ms: u64,
    /// Text history kept, days (reference `comm.retention_days`: 30), 1–3650.
    pub message_retention_days: u32,
    /// Text history kept at most, bytes of message text (64 KiB–1 TiB);
    /// beyond it the oldest messages are deleted first (counted in
    /// `history_messages_pruned_bytes_cap`). Default 256 MiB.
    pub message_history_max_bytes: u64,
    /// Requested SO_RCVBUF and SO_SNDBUF, bytes (reference: 4 MiB), 64 KiB–256 MiB.
    pub socket_buffer_bytes: usize,
    /// Ingress shards (reference `UDP.IngressWorkers`), 1–64. Default 2.
    /// Each runs the session core for the devices whose username + SSID
    /// hash to it.
    pub ingress_workers: usize,
    /// Datagrams queued for the shards in total, divided equally with at
    /// least 64 each (reference: 4096), 64–1048576; a full shard queue drops
    /// and counts.
    pub ingress_queue: usize,
    /// Session-core policy.
    pub session: SessionConfig,
    /// Fan-out engine.
    pub fanout: FanoutConfig,
    /// Voice recording (off by default).
    pub recording: RecordingConfig,
    /// TCP address of `/healthz`, `/metrics` and the admin API; `None`
    /// disables HTTP. Default `127.0.0.1:9000` (the reference's web port).
    pub http_listen: Option<SocketAddr>,
    /// Bearer token for the admin API, at least
    /// [`MIN_ADMIN_TOKEN_CHARS`] characters (a shorter one, including `""`,
    /// is a configuration error naming `admin_token`). Unset disables the
    /// admin routes (404): the admin API is never open without a token.
    pub admin_token: Option<String>,
    /// HTTP server limits.
    pub http: HttpConfig,
    /// Whether `POST /api/auth/login` needs a solved captcha
    /// (`specs/draarl-apps.md` §1.3 step 2). Default `true`; `false` for
    /// private deployments and tests. Used with `[apps]`.
    pub login_captcha: bool,
    /// Secret of the app access tokens (HS256, §1.4), at least
    /// [`MIN_JWT_SECRET_CHARS`] characters (a shorter one is a configuration
    /// error naming `jwt_secret`; the secret is never printed). Unset: a
    /// secret is generated once from the OS's CSPRNG and kept in the store.
    /// Used with `[apps]`.
    pub jwt_secret: Option<String>,
    /// The app clients' HTTP API (login, tokens, start-up routes, radio
    /// routes, `/ws`) and their Type 1 logins; on by default. `None` (from
    /// code) or `[apps] enabled = false` serves none of it.
    pub apps: Option<AppApiConfig>,
    /// The centre's control plane for edges (draarl-interconnect §2, §3);
    /// off by default.
    pub interconnect: InterconnectConfig,
}

impl Default for ServerConfig {
    fn default() -> Self {
        Self {
            listen: SocketAddr::from(([0, 0, 0, 0], 60050)),
            db: "petrel-reflector.db".into(),
            default_group_id: 999,
            reload_interval_ms: 10_000,
            message_retention_days: 30,
            message_history_max_bytes: 256 << 20,
            socket_buffer_bytes: 4 << 20,
            ingress_workers: 2,
            ingress_queue: 4096,
            session: SessionConfig::default(),
            fanout: FanoutConfig::default(),
            recording: RecordingConfig::default(),
            http_listen: Some(SocketAddr::from(([127, 0, 0, 1], 9000))),
            admin_token: None,
            http: HttpConfig::default(),
            login_captcha: true,
            jwt_secret: None,
            apps: Some(AppApiConfig::default()),
            interconnect: InterconnectConfig::default(),
        }
    }
}

impl std::fmt::Debug for ServerConfig {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ServerConfig")
            .field("listen", &self.listen)
            .field("db", &redact(&self.db))
            .field("default_group_id", &self.default_group_id)
            .field("reload_interval_ms", &self.reload_interval_ms)
            .field("message_retention_days", &self.message_retention_days)
            .field("message_history_max_bytes", &self.message_history_max_bytes)
            .field("socket_buffer_bytes", &self.socket_buffer_bytes)
            .field("ingress_workers", &self.ingress_workers)
            .field("ingress_queue", &self.ingress_queue)
            .field("session", &self.session)
            .field("fanout", &self.fanout)
            .field("recording", &self.recording)
            .field("http_listen", &self.http_listen)
            .field("admin_token", &self.admin_token.as_ref().map(|_| "***"))
            .field("http", &self.http)
            .field("login_captcha", &self.login_captcha)
            .field("jwt_secret", &self.jwt_secret.as_ref().map(|_| "***"))
            .field("apps", &self.apps)
            .field("interconnect", &self.interconnect)
            .finish()
    }
}

impl ServerConfig {
    /// Checks every field against its range, and the admin token's length
    /// (`admin_token = 3 characters is outside 16..=1024 characters`; the
    /// token itself is never printed).
    pub fn validate(&self) -> Result<(), RangeError> {
        check_range("default_group_id", self.default_group_id, &(1..=i64::MAX))?;
        check_range(
            "message_history_max_bytes",
            self.message_history_max_bytes,
            &(64 << 10..=1 << 40),
        )?;
        if let Some(token) = &self.admin_token {
            check_range_in(
                "admin_token",
                token.chars().count(),
                &(MIN_ADMIN_TOKEN_CHARS..=1024),
                "characters",
            )?;
        }
        check_range(
            "reload_interval_ms",
            self.reload_interval_ms,
            &(1_000..=3_600_000),
        )?;
        check_range(
            "socket_buffer_bytes",
            self.socket_buffer_bytes,
            &(64 << 10..=256 << 20),
        )?;
        check_range("ingress_workers", self.ingress_workers, &(1..=64))?;
        check_range("ingress_queue", self.ingress_queue, &(64..=1 << 20))?;
        self.session.validate()?;
        self.fanout.validate()?;
        self.recording.validate()?;
        if let Some(secret) = &self.jwt_secret {
            check_range_in(
                "jwt_secret",
                secret.chars().count(),
                &(MIN_JWT_SECRET_CHARS..=4096),
                "characters",
            )?;
        }
        if let Some(apps) = &self.apps {
            apps.validate()?;
        }
        self.interconnect.validate()?;
        self.http.validate()
    }

    /// The session-core policy the server runs: `session` with its receiver
    /// snapshots partitioned for the `fanout.writers` send paths (so the
    /// writer count is configured once, under `[fanout]`).
    pub fn session_policy(&self) -> SessionConfig {
        SessionConfig {
            partitions: self.fanout.writers,
            ..self.session.clone()
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn example_config_equals_defaults() {
        let text = include_str!("../../reflector.example.toml");
        let cfg: ServerConfig = toml::from_str(text).unwrap();
        assert_eq!(cfg, ServerConfig::default());
        assert!(cfg.validate().is_ok());
    }

    #[test]
    fn debug_output_redacts_secrets() {
        let cfg = ServerConfig {
            db: "postgres://petrel:hunter2secret@db.example/petrel".into(),
            admin_token: Some("token-0123456789abcdef".into()),
            jwt_secret: Some("jwt-secret-0123456789abcdef0123456789".into()),
            ..ServerConfig::default()
        };
        let text = format!("{cfg:?}");
        assert!(!text.contains("hunter2secret"), "{text}");
        assert!(!text.contains("token-0123456789abcdef"), "{text}");
        assert!(!text.contains("jwt-secret"), "{text}");
        assert!(text.contains("db.example") && text.contains("ingress_workers: 2"));
    }

    #[test]
    fn unknown_keys_and_bad_ranges_are_errors() {
        assert!(toml::from_str::<ServerConfig>("listen_port = 1").is_err());
        let cfg: ServerConfig = toml::from_str("[fanout]\nframe_queue = 0").unwrap();
        assert_eq!(cfg.validate().unwrap_err().field, "frame_queue");
    }

    #[test]
    fn short_or_empty_admin_token_is_a_config_error_without_the_token() {
        for token in ["", "short-token", "0123456789abcde"] {
            let cfg = ServerConfig {
                admin_token: Some(token.into()),
                ..ServerConfig::default()
            };
            let e = cfg.validate().unwrap_err();
            assert_eq!(e.field, "admin_token");
            let text = e.to_string();
            assert!(text.contains("outside 16..=1024 characters"), "{text}");
            assert!(token.is_empty() || !text.contains(token), "{text}");
        }
        let cfg = ServerConfig {
            admin_token: Some("0123456789abcdef".into()),
            ..ServerConfig::default()
        };
        assert!(cfg.validate().is_ok());
    }

    #[test]
    fn short_jwt_secret_and_bad_apps_section_are_config_errors() {
        let cfg: ServerConfig = toml::from_str(
            "login_captcha = false\njwt_secret = \"too-short\"\n[apps]\npublic_host = \"radio.example.com\"",
        )
        .unwrap();
        assert!(!cfg.login_captcha);
        let e = cfg.validate().unwrap_err();
        assert_eq!(e.field, "jwt_secret");
        assert!(!e.to_string().contains("too-short"));
        let cfg: ServerConfig =
            toml::from_str("[apps]\npublic_host = \"http://radio.example.com\"").unwrap();
        assert_eq!(cfg.validate().unwrap_err().field, "apps.public_host");
        // The app API is on by default, publishing the host the client
        // reached and the UDP listen port.
        let cfg = ServerConfig::default();
        assert!(cfg.apps.as_ref().is_some_and(|a| a.enabled));
        assert!(cfg.validate().is_ok());
    }
}
