//! Runs one store test body against each backend: SQLite always (a fresh
//! temporary file), PostgreSQL when `PETREL_TEST_PG_URL` names a server (a
//! fresh schema per test, so tests run in parallel; dropped afterwards).
//! With `PETREL_REQUIRE_PG=1` a missing URL fails the PostgreSQL tests
//! instead of skipping them.

use std::future::Future;
use std::sync::atomic::{AtomicU64, Ordering::Relaxed};

use sqlx::{AnyConnection, Connection};

use super::Backend;

/// Server URL for the PostgreSQL runs, e.g. `postgres://petrel:petrel@127.0.0.1/petrel_test`.
pub(super) const PG_URL_ENV: &str = "PETREL_TEST_PG_URL";
/// Set to `1` to turn a missing [`PG_URL_ENV`] into a failure.
pub(super) const REQUIRE_PG_ENV: &str = "PETREL_REQUIRE_PG";

static NEXT: AtomicU64 = AtomicU64::new(0);

fn unique(name: &str) -> String {
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.subsec_nanos());
    format!(
        "petrel_test_{}_{}_{nanos}_{name}",
        std::process::id(),
        NEXT.fetch_add(1, Relaxed)
    )
}

/// Runs `body` with the location of a fresh, empty store on `backend`,
/// then removes that store, even if `body` panicked.
pub(super) async fn run<F, Fut>(backend: Backend, name: &str, body: F)
where
    F: FnOnce(String) -> Fut,
    Fut: Future<Output = ()> + 'static,
{
    match backend {
        Backend::Sqlite => {
            let path = std::env::temp_dir().join(format!("{}.db", unique(name)));
            let location = path.to_string_lossy().into_owned();
            let outcome = contain(body(location.clone())).await;
            for ext in ["", "-wal", "-shm"] {
                let _ = std::fs::remove_file(format!("{location}{ext}"));
            }
            finish(outcome);
        }
        Backend::Postgres => {
            let Some(url) = std::env::var(PG_URL_ENV).ok().filter(|u| !u.is_empty()) else {
                assert!(
                    std::env::var(REQUIRE_PG_ENV).as_deref() != Ok("1"),
                    "{REQUIRE_PG_ENV}=1 but {PG_URL_ENV} is not set"
                );
                eprintln!("skipping {name} on PostgreSQL: {PG_URL_ENV} is not set");
                return;
            };
            sqlx::any::install_default_drivers();
            let schema = unique(name);
            let mut admin = AnyConnection::connect(&url).await.unwrap();
            sqlx::query(&format!("CREATE SCHEMA {schema}"))
                .execute(&mut admin)
                .await
                .unwrap();
            let sep = if url.contains('?') { '&' } else { '?' };
            let location = format!("{url}{sep}options=-c%20search_path%3D{schema}");
            let outcome = contain(body(location)).await;
            sqlx::query(&format!("DROP SCHEMA {schema} CASCADE"))
                .execute(&mut admin)
                .await
                .unwrap();
            admin.close().await.unwrap();
            finish(outcome);
        }
    }
}

/// Runs `fut` to completion, catching a panic so the caller can clean up.
/// A local task, because the store futures are not provably `Send` for
/// every lifetime when passed around as generic test bodies.
async fn contain(fut: impl Future<Output = ()> + 'static) -> Result<(), tokio::task::JoinError> {
    tokio::task::LocalSet::new()
        .run_until(async move { tokio::task::spawn_local(fut).await })
        .await
}

fn finish(outcome: Result<(), tokio::task::JoinError>) {
    if let Err(e) = outcome {
        match e.try_into_panic() {
            Ok(panic) => std::panic::resume_unwind(panic),
            Err(e) => panic!("test body did not finish: {e}"),
        }
    }
}
