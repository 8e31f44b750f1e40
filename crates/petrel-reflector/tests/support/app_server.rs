//! A server with the app API (`[apps]`, `specs/draarl-apps.md` §1, §3–§5)
//! over a real, seeded store: accounts with web passwords, public groups
//! 1001 and 1002 and private group 2001 (bob's, when bob is seeded), `jwt_secret` = [`SECRET`],
//! the origin [`ORIGIN`] allowed, no login captcha and an HTTP rate limit
//! no test reaches.

use std::net::SocketAddr;

use petrel_reflector::model::{AppApiConfig, HttpConfig, ServerConfig};
use petrel_reflector::runtime::server::ServerHandle;
use petrel_reflector::runtime::store::Store;

use super::{account, serve, Env};

/// The JWT signing secret of the app servers (≥ 32 characters).
pub const SECRET: &str = "jwt-secret-for-tests-0123456789abcdef";
/// Every seeded account's web password.
pub const PASSWORD: &str = "web-pass-1";
/// The browser origin the app servers allow (§1.5).
pub const ORIGIN: &str = "http://localhost:9001";

/// Opens `env`'s store with the cheapest hashing costs and adds
/// `users` (callsign `BA1AA<i>`, web password [`PASSWORD`]) and the groups
/// of the module docs.
pub fn open_app_store(env: &Env, users: &[&str]) -> Store {
    env.rt.block_on(async {
        let s = super::open_cheap(&env.db).await;
        for (i, n) in users.iter().enumerate() {
            s.add_user(&account(n, format!("BA1AA{i}"), 0, "Secret12"))
                .await
                .unwrap();
            s.set_web_password(n, PASSWORD).await.unwrap();
        }
        for (id, n) in [(1001, "A"), (1002, "B"), (2001, "P")] {
            s.add_group(n, false, Some(id)).await.unwrap();
        }
        if users.contains(&"bob") {
            s.set_group_access(2001, true, Some("bob")).await.unwrap();
        }
        s
    })
}

/// The settings of the module docs over the store at `db`.
pub fn app_config(db: &str) -> ServerConfig {
    ServerConfig {
        http_listen: Some("127.0.0.1:0".parse().unwrap()),
        http: HttpConfig {
            per_ip_rps: 10_000,
            per_ip_burst: 10_000,
            ..HttpConfig::default()
        },
        login_captcha: false,
        jwt_secret: Some(SECRET.into()),
        apps: Some(AppApiConfig {
            public_host: "radio.example.com".into(),
            public_port: 60050,
            allowed_origins: vec![ORIGIN.into()],
            ..AppApiConfig::default()
        }),
        ..super::udp_config(db)
    }
}

/// Starts [`app_config`] adjusted by `tune` over `store`'s location, runs
/// `body` with the server, its HTTP address and the store; then shuts the
/// server down and closes the store, also when `body` panicked.
pub fn serve_app<R>(
    env: &Env,
    store: Store,
    tune: impl FnOnce(&mut ServerConfig),
    body: impl FnOnce(&ServerHandle, SocketAddr, &Store) -> R,
) -> R {
    let mut cfg = app_config(&env.db);
    tune(&mut cfg);
    let outcome = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
        serve(env, cfg, None, |srv| {
            body(srv, srv.http_addr().unwrap(), &store)
        })
    }));
    env.rt.block_on(store.close());
    outcome.unwrap_or_else(|p| std::panic::resume_unwind(p))
}
