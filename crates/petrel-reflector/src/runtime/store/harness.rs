//! Runs one store test body against each backend through
//! [`ScratchStore`](super::scratch_store::ScratchStore): SQLite always,
//! PostgreSQL when `PETREL_TEST_PG_URL` names a server (skipped otherwise,
//! a failure with `PETREL_REQUIRE_PG=1`).

use std::future::Future;

/// Declares one `#[tokio::test]` per backend for each named test body of
/// the calling module: `sqlite::<name>` and `postgres::<name>`, each
/// running the body through [`run`].
macro_rules! on_every_backend {
    ($($name:ident),* $(,)?) => {
        mod sqlite {
            $(
                #[tokio::test]
                async fn $name() {
                    $crate::runtime::store::harness::run(
                        $crate::model::Backend::Sqlite,
                        stringify!($name),
                        super::$name,
                    )
                    .await;
                }
            )*
        }
        mod postgres {
            $(
                #[tokio::test]
                async fn $name() {
                    $crate::runtime::store::harness::run(
                        $crate::model::Backend::Postgres,
                        stringify!($name),
                        super::$name,
                    )
                    .await;
                }
            )*
        }
    };
}
pub(crate) use on_every_backend;

use sqlx::ConnectOptions;

use super::scratch_store::ScratchStore;
use super::StoreOptions;
use crate::model::{Backend, HashCost};

/// Store options with the cheapest password hashes (Argon2id 64 KiB, one
/// pass; bcrypt cost 4), so tests that create users stay fast.
pub(crate) fn cheap_options() -> StoreOptions {
    StoreOptions {
        hash_cost: HashCost {
            m_cost_kib: 64,
            t_cost: 1,
            p_cost: 1,
        },
        web_password_cost: 4,
        ..StoreOptions::default()
    }
}

/// A connection to the store at `db` with the migrations up to and
/// including `version` applied and recorded, as an older Petrel left it;
/// for migration tests, which then add rows and open the store.
pub(crate) async fn store_at_schema(db: &str, version: i64) -> sqlx::AnyConnection {
    let backend = Backend::of(db);
    let mut conn = super::location::connect_options(db)
        .unwrap()
        .connect()
        .await
        .unwrap();
    let (bootstrap, list) = super::migrations::for_backend(backend);
    sqlx::raw_sql(bootstrap).execute(&mut conn).await.unwrap();
    for (v, sql) in list.iter().filter(|(v, _)| *v <= version) {
        sqlx::raw_sql(sql).execute(&mut conn).await.unwrap();
        sqlx::query("INSERT INTO schema_migrations (version) VALUES ($1)")
            .bind(v)
            .execute(&mut conn)
            .await
            .unwrap();
    }
    conn
}

/// Runs `body` with the location of a fresh, empty store on `backend`,
/// then removes that store, even if `body` panicked.
pub(crate) async fn run<F, Fut>(backend: Backend, name: &str, body: F)
where
    F: FnOnce(String) -> Fut,
    Fut: Future<Output = ()> + 'static,
{
    let Some(scratch) = ScratchStore::create(backend, name).await.unwrap() else {
        eprintln!("skipping {name} on PostgreSQL: PETREL_TEST_PG_URL is not set");
        return;
    };
    let outcome = contain(body(scratch.location().to_owned())).await;
    scratch.remove().await.unwrap();
    if let Err(e) = outcome {
        match e.try_into_panic() {
            Ok(panic) => std::panic::resume_unwind(panic),
            Err(e) => panic!("test body did not finish: {e}"),
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
