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

use super::scratch_store::ScratchStore;
use crate::model::Backend;

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
