//! Persistent store through `sqlx` (runtime queries, no compile-time
//! database) on embedded SQLite (the default, a file created on first open)
//! or a PostgreSQL server, chosen by the location string (see
//! [`Backend::of`]). Versioned migrations, one list per backend; a fresh
//! store gets the public default talkgroup (999, like the reference).
//!
//! One data-access layer serves both backends through `sqlx::Any`: every
//! query is written once in the SQL both accept (`$n` placeholders,
//! `ON CONFLICT`, `RETURNING`, 64-bit integers, `TEXT` and byte strings), so
//! only the DDL in `migrations` differs. The alternative, an enum over two
//! typed pools, would need every query dispatched twice.
//!
//! The hot path never touches it: the server loads a
//! [`Directory`](crate::model::Directory) at start and every reload
//! interval, and persists [`StoreEvent`](crate::model::StoreEvent)s in the
//! background.
//!
//! Concurrent first starts on one PostgreSQL database are serialised by an
//! advisory lock; SQLite is embedded and expects one server per file.
//!
//! Throwaway stores for tests live in `scratch_store.rs`, compiled only
//! for tests and shared with the integration tests (`tests/support`
//! includes the same file); the library does not ship them.

mod accounts;
mod app_groups;
mod app_preferences;
mod events;
mod group_messages;
mod history;
mod location;
mod migrations;
mod nodes;
mod refresh_tokens;
mod session_entries;
mod settings;
mod web_accounts;

#[cfg(test)]
mod app_tests;
#[cfg(test)]
pub(crate) mod harness;
#[cfg(test)]
mod node_tests;
#[cfg(test)]
pub(crate) mod scratch_store;
#[cfg(test)]
mod session_entry_tests;
#[cfg(test)]
mod tests;

pub use crate::model::{redact, Backend};
pub use app_groups::AppGroup;
pub use app_preferences::{PreferenceKey, StoredRouting};
pub use group_messages::GroupMessage;
pub use history::{Pruned, StoredRecording};
pub use nodes::{NodeCredentialRow, NodeRecord};
pub use refresh_tokens::{IssueCleanup, NewRefreshToken, RefreshTokenState};
pub use web_accounts::WebUser;

use std::time::Duration;

use sqlx::any::AnyPoolOptions;
use sqlx::{AnyConnection, AnyPool, ConnectOptions, Connection, Row};
use thiserror::Error;

use crate::model::{HashCost, PasswordError, WEB_PASSWORD_COST};

/// Store failures.
#[derive(Debug, Error)]
pub enum StoreError {
    /// The database could not be opened or migrated. `location` has its
    /// password redacted.
    #[error("opening {location}: {cause}")]
    Open {
        /// The store location, password replaced by `***`.
        location: String,
        /// What the database reported (in the message, not repeated as a
        /// source, so error chains print it once).
        cause: sqlx::Error,
    },
    /// The database reported an error (in the message, not repeated as a
    /// source: sqlx's own message already ends with the database's).
    #[error("database: {0}")]
    Db(sqlx::Error),
    /// A value that must be unique is in use: a user's name or callsign,
    /// a group's name or id. The message says which, e.g.
    /// `a group named "Test" already exists`.
    #[error("{0}")]
    Duplicate(String),
    /// The device password was rejected.
    #[error(transparent)]
    Password(#[from] PasswordError),
    /// A named row does not exist.
    #[error("{0} not found")]
    NotFound(String),
    /// An argument is outside its allowed values.
    #[error("invalid {0}")]
    Invalid(String),
}

impl From<sqlx::Error> for StoreError {
    fn from(e: sqlx::Error) -> Self {
        Self::Db(e)
    }
}

/// Options for opening a store.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StoreOptions {
    /// Id of the public talkgroup created on a fresh store. Default 999.
    pub default_group_id: i64,
    /// Name of that talkgroup. Default `Public`.
    pub default_group_name: String,
    /// Argon2id cost for new device passwords.
    pub hash_cost: HashCost,
    /// bcrypt cost for new web passwords (4–31): [`WEB_PASSWORD_COST`] in
    /// production, lower in tests.
    pub web_password_cost: u32,
}

impl Default for StoreOptions {
    fn default() -> Self {
        Self {
            default_group_id: 999,
            default_group_name: "Public".into(),
            hash_cost: HashCost::default(),
            web_password_cost: WEB_PASSWORD_COST,
        }
    }
}

/// A new account.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NewUser {
    /// Account name (1–32 bytes UTF-8; the wire username).
    pub name: String,
    /// Callsign (1–32 bytes).
    pub callsign: String,
    /// DMR ID (24 bits).
    pub dmrid: u32,
    /// Device password, 6–10 `[A-Za-z0-9]`.
    pub device_password: String,
    /// Group a new device joins; `None` = the store's default group.
    pub default_group_id: Option<i64>,
}

/// Handle to the database.
#[derive(Debug, Clone)]
pub struct Store {
    pool: AnyPool,
    backend: Backend,
    opts: StoreOptions,
}

/// Connections per pool: the writer, the reload task and admin requests.
const POOL_CONNECTIONS: u32 = 4;
/// PostgreSQL advisory lock key held while migrating (ASCII "petrelmg").
const MIGRATION_LOCK: i64 = 0x7065_7472_656c_6d67;
/// How long a query waits for a free or new connection before failing.
const ACQUIRE_TIMEOUT: Duration = Duration::from_secs(10);

impl Store {
    /// Opens the store at `location` and migrates it: a SQLite file path
    /// (created if missing), a `sqlite:` URL, or a `postgres://` URL (the
    /// database must exist; tables are created in the connection's schema).
    pub async fn open(location: &str, opts: StoreOptions) -> Result<Self, StoreError> {
        let open_error = |cause| StoreError::Open {
            location: redact(location),
            cause,
        };
        sqlx::any::install_default_drivers();
        let backend = Backend::of(location);
        let connect = location::connect_options(location).map_err(open_error)?;
        // The pool retries a refused connection until its acquire timeout;
        // one direct attempt first reports a wrong location at once.
        connect
            .connect()
            .await
            .map_err(open_error)?
            .close()
            .await
            .map_err(open_error)?;
        // All connections are opened up front and kept (min = max), so the
        // server's descriptors and memory are fixed from the start instead of
        // growing the first time the writer, a reload and an admin request
        // overlap; a later growth is then a leak, which the soak checks.
        let pool = AnyPoolOptions::new()
            .acquire_timeout(ACQUIRE_TIMEOUT)
            .min_connections(POOL_CONNECTIONS)
            .max_connections(POOL_CONNECTIONS)
            .connect_with(connect)
            .await
            .map_err(open_error)?;
        let store = Self {
            pool,
            backend,
            opts,
        };
        if backend == Backend::Sqlite {
            // Persistent in the file: readers no longer block the writer.
            sqlx::query("PRAGMA journal_mode = WAL")
                .execute(&store.pool)
                .await
                .map_err(open_error)?;
        }
        store.migrate().await.map_err(|e| match e {
            StoreError::Db(cause) => open_error(cause),
            other => other,
        })?;
        Ok(store)
    }

    /// The database behind this store.
    pub fn backend(&self) -> Backend {
        self.backend
    }

    async fn migrate(&self) -> Result<(), StoreError> {
        let mut conn = self.pool.acquire().await?.detach();
        if self.backend == Backend::Postgres {
            // Serialises first starts of several servers on one database.
            // Session-scoped: closing this connection releases it.
            sqlx::query("SELECT pg_advisory_lock($1)")
                .bind(MIGRATION_LOCK)
                .execute(&mut conn)
                .await?;
        }
        let result = self.migrate_on(&mut conn).await;
        conn.close().await?;
        result
    }

    async fn migrate_on(&self, conn: &mut AnyConnection) -> Result<(), StoreError> {
        let (bootstrap, list) = migrations::for_backend(self.backend);
        sqlx::raw_sql(bootstrap).execute(&mut *conn).await?;
        let current: i64 = sqlx::query("SELECT COALESCE(MAX(version), 0) FROM schema_migrations")
            .fetch_one(&mut *conn)
            .await?
            .try_get(0)?;
        for (version, sql) in list.iter().filter(|(v, _)| *v > current) {
            let mut tx = conn.begin().await?;
            sqlx::raw_sql(sql).execute(&mut *tx).await?;
            sqlx::query("INSERT INTO schema_migrations (version) VALUES ($1)")
                .bind(version)
                .execute(&mut *tx)
                .await?;
            if *version == 1 {
                sqlx::query(
                    "INSERT INTO talkgroups (id, name, status, is_virtual) VALUES ($1, $2, 1, 0)",
                )
                .bind(self.opts.default_group_id)
                .bind(&self.opts.default_group_name)
                .execute(&mut *tx)
                .await?;
            }
            tx.commit().await?;
        }
        Ok(())
    }

    /// Schema version after migration.
    pub async fn schema_version(&self) -> Result<i64, StoreError> {
        Ok(sqlx::query("SELECT MAX(version) FROM schema_migrations")
            .fetch_one(&self.pool)
            .await?
            .try_get(0)?)
    }

    /// Closes the pool.
    pub async fn close(&self) {
        self.pool.close().await;
    }
}

/// The wall clock, Unix ms, for the store's own timestamps.
fn now_ms() -> i64 {
    super::wall_clock::unix_ms()
}

fn text_field_ok(s: &str) -> bool {
    !s.is_empty() && s.len() <= 32 && !s.contains('\0')
}
