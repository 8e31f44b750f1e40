//! Throwaway stores for this crate's unit tests (`runtime::store::tests`,
//! which include this file by path) and its integration tests (through
//! `tests/support/mod.rs`). Test-only: the library does not ship it.
//!
//! A [`ScratchStore`] is a fresh, empty store location: a new temporary
//! SQLite file, or a new schema in the PostgreSQL database named by
//! [`PG_URL_ENV`] (one schema per test, so tests run in parallel on one
//! database). [`ScratchStore::remove`] deletes it again.

use std::path::PathBuf;
use std::sync::atomic::{AtomicU64, Ordering::Relaxed};

use sqlx::{AnyConnection, Connection};
use thiserror::Error;

use super::{Backend, Store, StoreOptions};

/// Server URL for the PostgreSQL runs, e.g.
/// `postgres://petrel:petrel@127.0.0.1/petrel_test`; the role needs
/// `CREATE` on that database. Unset or empty: PostgreSQL runs are skipped.
pub const PG_URL_ENV: &str = "PETREL_TEST_PG_URL";
/// Set to `1` to turn a missing [`PG_URL_ENV`] into an error instead of a skip.
pub const REQUIRE_PG_ENV: &str = "PETREL_REQUIRE_PG";

/// Why a scratch store could not be created or removed.
#[derive(Debug, Error)]
pub enum ScratchError {
    /// [`REQUIRE_PG_ENV`] is `1` but [`PG_URL_ENV`] is not set.
    #[error("{REQUIRE_PG_ENV}=1 but {PG_URL_ENV} is not set")]
    PgRequired,
    /// The PostgreSQL server refused the connection or a schema statement.
    #[error("postgres scratch schema {schema}: {cause}")]
    Postgres {
        /// The schema being created or dropped.
        schema: String,
        /// What the server reported.
        cause: sqlx::Error,
    },
}

/// A fresh, empty store location on one backend.
#[derive(Debug)]
pub struct ScratchStore {
    location: String,
    place: Place,
}

#[derive(Debug)]
enum Place {
    Sqlite(PathBuf),
    Postgres { admin_url: String, schema: String },
}

static NEXT: AtomicU64 = AtomicU64::new(0);

/// A name unique in this process and, through the pid and clock, among
/// concurrent test processes; `label` is reduced to `[a-z0-9_]` (it ends
/// up in SQL as an identifier) and cut to keep within PostgreSQL's 63 bytes.
fn unique(label: &str) -> String {
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.subsec_nanos());
    let label: String = label
        .chars()
        .map(|c| match c.to_ascii_lowercase() {
            c @ ('a'..='z' | '0'..='9') => c,
            _ => '_',
        })
        .take(24)
        .collect();
    format!(
        "petrel_test_{}_{}_{nanos}_{label}",
        std::process::id(),
        NEXT.fetch_add(1, Relaxed)
    )
}

impl ScratchStore {
    /// Creates a fresh location on `backend`, `label` naming it for
    /// debugging. `Ok(None)` when `backend` is PostgreSQL and [`PG_URL_ENV`]
    /// is unset (the caller skips), unless [`REQUIRE_PG_ENV`] is `1`.
    pub async fn create(backend: Backend, label: &str) -> Result<Option<Self>, ScratchError> {
        let name = unique(label);
        match backend {
            Backend::Sqlite => {
                let path = std::env::temp_dir().join(format!("{name}.db"));
                Ok(Some(Self {
                    location: path.to_string_lossy().into_owned(),
                    place: Place::Sqlite(path),
                }))
            }
            Backend::Postgres => {
                let Some(url) = std::env::var(PG_URL_ENV).ok().filter(|u| !u.is_empty()) else {
                    return if std::env::var(REQUIRE_PG_ENV).as_deref() == Ok("1") {
                        Err(ScratchError::PgRequired)
                    } else {
                        Ok(None)
                    };
                };
                admin(&url, &format!("CREATE SCHEMA {name}"), &name).await?;
                let sep = if url.contains('?') { '&' } else { '?' };
                Ok(Some(Self {
                    location: format!("{url}{sep}options=-c%20search_path%3D{name}"),
                    place: Place::Postgres {
                        admin_url: url,
                        schema: name,
                    },
                }))
            }
        }
    }

    /// A fresh SQLite store under `label`, opened with default options. The
    /// caller closes the store, then [`remove`](Self::remove)s the location.
    pub async fn open_sqlite(label: &str) -> (Self, Store) {
        let scratch = Self::create(Backend::Sqlite, label).await.unwrap().unwrap();
        let store = Store::open(scratch.location(), StoreOptions::default())
            .await
            .unwrap();
        (scratch, store)
    }

    /// The location to pass to `Store::open` or a
    /// server config: a file path, or the URL with `search_path` set to the
    /// scratch schema.
    pub fn location(&self) -> &str {
        &self.location
    }

    /// Deletes the store: the SQLite file with its `-wal` and `-shm`
    /// companions (best effort: a file
    /// that cannot be removed is left behind), or the schema with everything in it.
    pub async fn remove(self) -> Result<(), ScratchError> {
        match self.place {
            Place::Sqlite(path) => {
                let path = path.to_string_lossy();
                for ext in ["", "-wal", "-shm"] {
                    let _ = std::fs::remove_file(format!("{path}{ext}"));
                }
                Ok(())
            }
            Place::Postgres { admin_url, schema } => {
                admin(
                    &admin_url,
                    &format!("DROP SCHEMA {schema} CASCADE"),
                    &schema,
                )
                .await
            }
        }
    }
}

async fn admin(url: &str, statement: &str, schema: &str) -> Result<(), ScratchError> {
    let fail = |cause| ScratchError::Postgres {
        schema: schema.to_owned(),
        cause,
    };
    sqlx::any::install_default_drivers();
    let mut conn = AnyConnection::connect(url).await.map_err(fail)?;
    sqlx::query(statement)
        .execute(&mut conn)
        .await
        .map_err(fail)?;
    conn.close().await.map_err(fail)
}
