//! Runs an integration test once per store backend: on a fresh SQLite
//! file, and on a fresh PostgreSQL schema when `PETREL_TEST_PG_URL` is set
//! (`PETREL_REQUIRE_PG=1` turns a missing URL into a failure, as CI sets
//! it). The store is removed afterwards, pass or fail.
//!
//! A test file writes its bodies as `fn name(env: &Env)` and lists them in
//! [`on_every_backend!`], which makes `sqlite::name` and `postgres::name`.

use std::panic::{catch_unwind, resume_unwind, AssertUnwindSafe};

use petrel_reflector::model::Backend;
use tokio::runtime::Runtime;

use super::ScratchStore;

/// What a test body gets: a runtime and the location of its own empty store.
pub struct Env {
    /// The runtime the test drives the server and store with.
    pub rt: Runtime,
    /// The store's location (SQLite path or PostgreSQL URL with schema).
    pub db: String,
    /// Unique per test and backend, for other scratch paths.
    pub label: String,
    /// The backend `db` is on.
    pub backend: Backend,
}

/// Runs `body` on a fresh store on `backend` and removes the store
/// afterwards, also when `body` panicked. `None` (with a message) when
/// `backend` is PostgreSQL and no server is configured.
pub fn run<R>(backend: Backend, name: &str, body: impl FnOnce(&Env) -> R) -> Option<R> {
    let rt = Runtime::new().unwrap();
    let Some(scratch) = rt.block_on(ScratchStore::create(backend, name)).unwrap() else {
        eprintln!("skipping {name} on PostgreSQL: PETREL_TEST_PG_URL is not set");
        return None;
    };
    let env = Env {
        rt,
        db: scratch.location().to_owned(),
        label: format!("{name}-{backend:?}-{}", std::process::id()),
        backend,
    };
    let outcome = catch_unwind(AssertUnwindSafe(|| body(&env)));
    env.rt.block_on(scratch.remove()).unwrap();
    Some(outcome.unwrap_or_else(|panic| resume_unwind(panic)))
}

/// One `#[test]` per backend for each named body `fn name(env: &Env)`:
/// `sqlite::name` and `postgres::name`.
macro_rules! on_every_backend {
    ($($name:ident),* $(,)?) => {
        on_every_backend!(@in sqlite, Sqlite, $($name),*);
        on_every_backend!(@in postgres, Postgres, $($name),*);
    };
    (@in $module:ident, $backend:ident, $($name:ident),*) => {
        mod $module {
            $(
                #[test]
                fn $name() {
                    $crate::support::run(
                        $crate::support::Backend::$backend,
                        stringify!($name),
                        super::$name,
                    );
                }
            )*
        }
    };
}
