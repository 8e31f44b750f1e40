//! A real centre and its edges over loopback (draarl-interconnect §2,
//! §3.6): a `ServerHandle` centre with `[interconnect]` over the test's
//! store, seeded with the accounts of [`USERS`] (device password [`PW`],
//! default group 999) and enrolled edges, and ready [`EdgeServer`]s of it;
//! devices talk at a device's cadence.

use std::net::SocketAddr;
use std::time::Duration;

use petrel_reflector::codec::PacketType;
use petrel_reflector::model::{Backend, InterconnectConfig, NodeToken, ServerConfig};
use petrel_reflector::runtime::interconnect::{add_edge_node, EdgeServer, EdgeServerConfig};
use petrel_reflector::runtime::server::ServerHandle;
use petrel_reflector::runtime::store::Store;

use super::edge_devices::{bound, edge_config, frame, ready_edge, Device};
use super::Env;

/// The device password of every account.
pub const PW: &str = "Secret12";
/// Reconnecting to a centre that was away takes up to the 5 s backoff cap
/// plus the snapshot (§6.1).
pub const RECONNECT: Duration = Duration::from_secs(30);
/// The accounts: name, callsign, DMR id.
pub const USERS: [(&str, &str, u32); 6] = [
    ("alice", "BA1AA", 4_600_001),
    ("bob", "BA1BB", 4_600_002),
    ("carol", "BA1CC", 4_600_003),
    ("dave", "BA1DD", 4_600_004),
    ("erin", "BA1EE", 4_600_005),
    ("mallory", "BA1MM", 4_600_006),
];
/// How long a device listens for what should not come.
pub const QUIET: Duration = Duration::from_millis(150);
/// Past the speaker lease's idle timeout (900 ms) and its TTL (1200 ms).
pub const FLOOR_IDLE: Duration = Duration::from_millis(1500);
/// How long a device listens for what should come.
pub const SETTLE: Duration = Duration::from_millis(600);

/// `[interconnect]` on, its control port at `control`.
pub fn interconnect(control: SocketAddr) -> InterconnectConfig {
    InterconnectConfig {
        enabled: true,
        control_listen: control,
        ..InterconnectConfig::default()
    }
}

/// A centre's settings over `env`'s store: devices on `udp`, edges on
/// `control`.
pub fn centre_config(env: &Env, udp: SocketAddr, control: SocketAddr) -> ServerConfig {
    ServerConfig {
        listen: udp,
        interconnect: interconnect(control),
        ..super::udp_config(&env.db)
    }
}

/// `env`'s store, opened cheaply, with the accounts of [`USERS`].
pub async fn seeded_store(env: &Env) -> Store {
    let store = super::open_cheap(&env.db).await;
    super::add_users(
        &store,
        USERS
            .iter()
            .map(|(n, c, d)| super::account(n, (*c).to_owned(), *d, PW)),
    )
    .await;
    store
}

/// Enrols the edges `nodes` in `store`, closes it and starts a centre on
/// ephemeral loopback ports; the centre and the edges' tokens.
pub async fn start_centre(
    env: &Env,
    store: Store,
    nodes: &[&str],
) -> (ServerHandle, Vec<NodeToken>) {
    let loopback = SocketAddr::from(([127, 0, 0, 1], 0));
    let mut tokens = Vec::new();
    for n in nodes {
        tokens.push(
            add_edge_node(&store, Some(n), &interconnect(loopback))
                .await
                .unwrap(),
        );
    }
    store.close().await;
    let server = ServerHandle::start(centre_config(env, loopback, loopback))
        .await
        .unwrap();
    (server, tokens)
}

/// A centre over `env`'s store with the accounts of [`USERS`] and the
/// enrolled edges `nodes`; their tokens.
pub async fn centre(env: &Env, nodes: &[&str]) -> (ServerHandle, Vec<NodeToken>) {
    start_centre(env, seeded_store(env).await, nodes).await
}

/// The settings of an edge of `server` with `token` and the grace `grace`.
pub fn edge_cfg(server: &ServerHandle, token: &NodeToken, grace: Duration) -> EdgeServerConfig {
    edge_config(
        server.control_addr().unwrap(),
        server.local_addr(),
        &token.credential,
        token.pin.unwrap(),
        grace,
    )
}

/// A ready edge of `server`.
pub async fn edge(server: &ServerHandle, token: &NodeToken) -> EdgeServer {
    ready_edge(edge_cfg(server, token, Duration::from_secs(15))).await
}

/// A ready edge of `server` whose UDP address the centre has bound (§4.5).
pub async fn bound_edge(server: &ServerHandle, token: &NodeToken) -> EdgeServer {
    let e = edge(server, token).await;
    let data = server.control_server().unwrap().data_plane();
    bound(&data, token.credential.node_id()).await;
    e
}

/// Runs `body` on a fresh SQLite store `name`.
pub fn on_sqlite(name: &str, body: impl FnOnce(&Env)) {
    super::run(Backend::Sqlite, name, body).expect("SQLite is always available");
}

/// Sends `frames` as voice from `d` to `to`, 120 ms apart (a device's
/// cadence: two 60 ms Opus frames per packet, draarl-v1 §8).
pub async fn talk(d: &Device, to: SocketAddr, frames: impl IntoIterator<Item = u8>) {
    for n in frames {
        d.send(to, PacketType::Voice, &frame(n)).await;
        tokio::time::sleep(Duration::from_millis(120)).await;
    }
}

/// The voice payloads `r` as [`frame`]s.
pub fn frames(r: std::ops::RangeInclusive<u8>) -> Vec<Vec<u8>> {
    r.map(frame).collect()
}

/// The centre's interconnect counter `name` (`/metrics` without its
/// prefix); panics when `server` is no centre or has no such counter, so
/// a misspelt name cannot pass as 0.
pub fn centre_counter(server: &ServerHandle, name: &str) -> u64 {
    let stats = server.stats();
    let snap = stats.interconnect_voice.expect("a centre");
    snap.counters
        .iter()
        .find(|(n, _)| n == name)
        .unwrap_or_else(|| panic!("no counter {name}"))
        .1
}
