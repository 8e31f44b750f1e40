//! Helpers shared by the integration tests (each test crate uses a part),
//! one concern per file: [`backends`] (run a test once per store backend),
//! [`fake_authority`] (an in-memory account store for app sessions),
//! [`ghost_client`] (Type 1 ghosts and physical devices over UDP),
//! [`app_server`] (a server with `[apps]` over a seeded real store),
//! [`app_client`] (the app clients' HTTP calls), [`ws_client`] (`/ws`
//! sessions), [`control_client`] (the interconnect control port),
//! [`raw_edge`] (a hand-driven edge of a centre), [`edge_devices`]
//! (edge reflectors and the devices behind them) and [`cluster`] (a real
//! centre with enrolled edges); this
//! file holds scratch stores, seeding accounts, starting a server,
//! heartbeats and raw UDP/HTTP reads.
#![allow(dead_code, unused_macros)]

#[path = "../../src/runtime/store/scratch_store.rs"]
mod scratch_store;

#[macro_use]
pub mod backends;
pub mod app_client;
pub mod app_server;
pub mod cluster;
pub mod control_client;
pub mod edge_devices;
pub mod fake_authority;
pub mod ghost_client;
pub mod raw_edge;
pub mod ws_client;

pub use backends::{run, Env};
pub use petrel_reflector::model::Backend;
pub use scratch_store::ScratchStore;

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream, UdpSocket};
use std::panic::{catch_unwind, resume_unwind, AssertUnwindSafe};
use std::sync::Arc;
use std::time::{Duration, Instant};

use petrel_reflector::codec::{decode, encode, Header, PacketType};
use petrel_reflector::model::{HashCost, ServerConfig};
use petrel_reflector::runtime::app_authority::AppAuthority;
use petrel_reflector::runtime::server::ServerHandle;
use petrel_reflector::runtime::store::{NewUser, Store, StoreOptions};
use tokio::runtime::Runtime;

/// An account with device password `password` and no default group.
pub fn account(name: &str, callsign: String, dmrid: u32, password: &str) -> NewUser {
    NewUser {
        name: name.into(),
        callsign,
        dmrid,
        device_password: password.into(),
        default_group_id: None,
    }
}

/// The cheapest hashing costs: Argon2 with 64 KiB, one pass, one lane
/// for device passwords, bcrypt cost 4 for web passwords; seeding accounts
/// is fast.
pub fn cheap_options() -> StoreOptions {
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

/// Opens the store at `db` with [`cheap_options`].
pub async fn open_cheap(db: &str) -> Store {
    Store::open(db, cheap_options()).await.unwrap()
}

/// Adds `users` to `store`.
pub async fn add_users(store: &Store, users: impl IntoIterator<Item = NewUser>) {
    for user in users {
        store.add_user(&user).await.unwrap();
    }
}

/// Opens the store at `db` cheaply, adds `users` and closes it.
pub fn seed_users(rt: &Runtime, db: &str, users: impl IntoIterator<Item = NewUser>) {
    rt.block_on(async {
        let store = open_cheap(db).await;
        add_users(&store, users).await;
        store.close().await;
    });
}

/// Default settings over the store at `db`: UDP on an ephemeral loopback
/// port, no HTTP endpoint.
pub fn udp_config(db: &str) -> ServerConfig {
    ServerConfig {
        listen: "127.0.0.1:0".parse().unwrap(),
        db: db.to_owned(),
        http_listen: None,
        ..ServerConfig::default()
    }
}

/// Starts a server with `config` (and `authority` for app sessions, when
/// given) on `env`'s runtime, runs `body` and shuts the server down, also
/// when `body` panicked.
pub fn serve<R>(
    env: &Env,
    config: ServerConfig,
    authority: Option<Arc<dyn AppAuthority>>,
    body: impl FnOnce(&ServerHandle) -> R,
) -> R {
    let srv = env
        .rt
        .block_on(ServerHandle::start_with_apps(config, authority))
        .unwrap();
    let outcome = catch_unwind(AssertUnwindSafe(|| body(&srv)));
    env.rt.block_on(srv.shutdown());
    outcome.unwrap_or_else(|p| resume_unwind(p))
}

/// Seeds `users` into `env`'s empty store, then [`serve`]s `config(db)`
/// without an app authority.
pub fn with_seeded_server<R>(
    env: &Env,
    users: impl IntoIterator<Item = NewUser>,
    config: impl FnOnce(&str) -> ServerConfig,
    body: impl FnOnce(&ServerHandle) -> R,
) -> R {
    seed_users(&env.rt, &env.db, users);
    serve(env, config(&env.db), None, body)
}

/// [`with_seeded_server`] on a fresh SQLite store `name`, for the tests
/// that exercise the UDP and HTTP edges rather than the store.
pub fn with_sqlite_server<R>(
    name: &str,
    users: impl IntoIterator<Item = NewUser>,
    config: impl FnOnce(&str) -> ServerConfig,
    body: impl FnOnce(&ServerHandle) -> R,
) -> R {
    run(Backend::Sqlite, name, |env| {
        with_seeded_server(env, users, config, body)
    })
    .expect("SQLite is always available")
}

/// A heartbeat of `name`-`ssid` with `password` and `data` (draarl-v1 §2.3).
pub fn heartbeat(name: &str, ssid: u8, password: &str, data: &[u8]) -> Vec<u8> {
    let mut h = Header::new(PacketType::Heartbeat);
    h.set_username(name);
    h.set_password(password);
    h.ssid = ssid;
    encode(&h, data).unwrap()
}

/// The next datagram of type `t` on `sock`, skipping others for up to 2 s;
/// `None` once a read fails (the socket's timeout) or the 2 s are over.
pub fn recv_type(sock: &UdpSocket, t: PacketType) -> Option<Vec<u8>> {
    let mut buf = [0u8; 2048];
    let deadline = Instant::now() + Duration::from_secs(2);
    while Instant::now() < deadline {
        match sock.recv_from(&mut buf) {
            Ok((n, _)) => {
                if decode(&buf[..n]).is_ok_and(|p| p.header.packet_type == t) {
                    return Some(buf[..n].to_vec());
                }
            }
            Err(_) => return None,
        }
    }
    None
}

/// A TCP connection to `addr` with a 5 s read timeout.
pub fn connect(addr: SocketAddr) -> TcpStream {
    let s = TcpStream::connect(addr).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
    s
}

/// Sends `req` and returns the status code (0 if there is none) and the
/// whole answer.
pub fn http(addr: SocketAddr, req: &str) -> (u16, String) {
    let mut s = connect(addr);
    s.write_all(req.as_bytes()).unwrap();
    read_answer(&mut s)
}

/// Reads until the peer closes; the status code (0 if there is none) and
/// the whole answer.
pub fn read_answer(s: &mut TcpStream) -> (u16, String) {
    let mut out = Vec::new();
    let _ = s.read_to_end(&mut out);
    let out = String::from_utf8_lossy(&out).into_owned();
    let code = out
        .split_whitespace()
        .nth(1)
        .and_then(|c| c.parse().ok())
        .unwrap_or(0);
    (code, out)
}
