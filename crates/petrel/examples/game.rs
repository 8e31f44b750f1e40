//! A game-style server and many clients over Petrel RUDP on loopback: each client
//! sends one small input message per tick (its move), the server applies every
//! input it has and sends each client the whole world state once per tick.
//!
//! Run with `cargo run -p petrel --example game` (16 clients, 50 ticks of 20 ms:
//! one second of play, then a few seconds while the server's closes wait for
//! the clients' acknowledgements). The tuning is the one the guide gives for games: small
//! windows (a tick's messages are few and small, and the receive-buffer budget
//! reserves `2 × rcv_wnd × mtu` bytes per connection), and a fixed FEC group of
//! 2 data + 1 parity, which protects sparse traffic at once instead of after a
//! retransmission timeout. It prints, per client, the last state it saw and the
//! connection's retransmissions and FEC recoveries.
//!
//! Messages (little-endian):
//! - input, client → server: `tick: u32, dx: i8, dy: i8`;
//! - state, server → client: `tick: u32, players: u16`, then per player
//!   `id: u16, x: i32, y: i32`.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use bytes::{BufMut, Bytes, BytesMut};
use petrel::{Connection, Endpoint, EndpointConfig, FecConfig, FecScheme, KcpConfig};
use tokio::sync::Mutex;

/// Clients in the game.
const CLIENTS: u16 = 16;
/// Ticks each client plays.
const TICKS: u32 = 50;
/// Length of one tick.
const TICK: Duration = Duration::from_millis(20);

type Error = Box<dyn std::error::Error + Send + Sync>;

/// Small windows and a 2+1 FEC group: the game profile.
fn game_config(server: bool) -> EndpointConfig {
    let base = if server {
        EndpointConfig::server()
    } else {
        EndpointConfig::default()
    };
    EndpointConfig {
        kcp: KcpConfig {
            snd_wnd: 32,
            rcv_wnd: 32,
            ..KcpConfig::default()
        },
        fec: FecConfig {
            scheme: FecScheme::Fixed {
                data_shards: 2,
                parity_shards: 1,
            },
            ..FecConfig::default()
        },
        ..base
    }
}

/// One player's position.
type World = BTreeMap<u16, (i32, i32)>;

fn encode_state(tick: u32, world: &World) -> Bytes {
    let mut out = BytesMut::with_capacity(6 + world.len() * 10);
    out.put_u32_le(tick);
    out.put_u16_le(world.len() as u16);
    for (&id, &(x, y)) in world {
        out.put_u16_le(id);
        out.put_i32_le(x);
        out.put_i32_le(y);
    }
    out.freeze()
}

/// `(tick, players)` of a state message, or `None` when it is malformed.
fn decode_state(msg: &[u8]) -> Option<(u32, usize)> {
    let tick = u32::from_le_bytes(msg.get(0..4)?.try_into().ok()?);
    let players = usize::from(u16::from_le_bytes(msg.get(4..6)?.try_into().ok()?));
    (msg.len() == 6 + players * 10).then_some((tick, players))
}

/// Runs the server until every client has disconnected; returns the ticks it
/// broadcast.
async fn serve(endpoint: Endpoint) -> Result<u32, Error> {
    let world = Arc::new(Mutex::new(World::new()));
    let mut players: Vec<Connection> = Vec::new();
    // Everyone joins before the first tick (a real server would let them join late).
    while players.len() < usize::from(CLIENTS) {
        let conn = endpoint.accept().await.ok_or("endpoint closed")?;
        let id = players.len() as u16;
        world.lock().await.insert(id, (0, 0));
        // One task per player applies its inputs as they come.
        let (inputs, world) = (conn.clone(), Arc::clone(&world));
        tokio::spawn(async move {
            while let Ok(Some(msg)) = inputs.recv().await {
                if let [_, _, _, _, dx, dy] = msg[..] {
                    let mut world = world.lock().await;
                    let pos = world.entry(id).or_default();
                    pos.0 += i32::from(dx as i8);
                    pos.1 += i32::from(dy as i8);
                }
            }
        });
        players.push(conn);
    }
    let mut interval = tokio::time::interval(TICK);
    let mut tick = 0;
    while tick < TICKS {
        interval.tick().await;
        tick += 1;
        let state = encode_state(tick, &*world.lock().await);
        for conn in &players {
            // `Bytes` clones share one buffer: one encoding for every player.
            conn.send(state.clone()).await?;
        }
    }
    // Close every connection at once: each close waits for the peer's
    // acknowledgement, so one after another would take 16 round trips of it.
    let mut closes = tokio::task::JoinSet::new();
    for conn in players {
        closes.spawn(async move { conn.close().await });
    }
    while let Some(closed) = closes.join_next().await {
        closed??;
    }
    Ok(tick)
}

/// What one client saw.
struct Played {
    /// Tick of the last state received.
    last_tick: u32,
    /// Players in the last state received.
    players: usize,
    /// A line for the console.
    summary: String,
}

/// One client: moves one step right per tick until the server closes.
async fn play(server: std::net::SocketAddr, id: u16) -> Result<Played, Error> {
    let endpoint = Endpoint::bind("127.0.0.1:0".parse()?, game_config(false)).await?;
    let conn = endpoint.connect(server).await?;
    let sender = conn.clone();
    let inputs = tokio::spawn(async move {
        let mut interval = tokio::time::interval(TICK);
        for tick in 1..=TICKS {
            interval.tick().await;
            let mut msg = BytesMut::with_capacity(6);
            msg.put_u32_le(tick);
            msg.put_i8(1);
            msg.put_i8(0);
            if sender.send(msg.freeze()).await.is_err() {
                break;
            }
        }
    });
    let mut last = (0, 0);
    while let Ok(Some(msg)) = conn.recv().await {
        last = decode_state(&msg).ok_or("malformed state")?;
    }
    // The server closed the game: inputs still due go nowhere (a send to a
    // closed peer waits for window space until the idle timeout).
    inputs.abort();
    let stats = conn.stats();
    let recovered = stats.fec.map_or(0, |f| f.decoder.shards_recovered);
    let summary = format!(
        "client {id:2}: last state tick {:2} with {} players; retransmissions {}, FEC recoveries {}",
        last.0,
        last.1,
        stats.kcp.retransmissions_timeout + stats.kcp.retransmissions_fast,
        recovered,
    );
    Ok(Played {
        last_tick: last.0,
        players: last.1,
        summary,
    })
}

/// Plays one game; returns the ticks the server sent and what each client saw.
async fn run() -> Result<(u32, Vec<Played>), Error> {
    let endpoint = Endpoint::bind("127.0.0.1:0".parse()?, game_config(true)).await?;
    let addr = endpoint.local_addr();
    let server = tokio::spawn(serve(endpoint));
    let clients: Vec<_> = (0..CLIENTS)
        .map(|id| tokio::spawn(play(addr, id)))
        .collect();
    let mut played = Vec::new();
    for client in clients {
        let client = client.await??;
        println!("{}", client.summary);
        played.push(client);
    }
    let ticks = server.await??;
    println!("server: {ticks} ticks to {CLIENTS} clients");
    Ok((ticks, played))
}

#[tokio::main]
async fn main() -> Result<(), Error> {
    let (_, played) = tokio::time::timeout(Duration::from_secs(30), run()).await??;
    let complete = |c: &Played| c.last_tick == TICKS && c.players == usize::from(CLIENTS);
    if !played.iter().all(complete) {
        return Err("a client missed the last state or a player".into());
    }
    Ok(())
}

#[cfg(test)]
#[allow(clippy::unwrap_used)] // a test fails loudly
mod tests {
    use super::{run, CLIENTS, TICKS};

    #[tokio::test]
    async fn every_client_hears_every_tick_with_every_player() {
        let (ticks, played) = run().await.expect("the game runs");
        assert_eq!(ticks, TICKS);
        assert_eq!(played.len(), usize::from(CLIENTS));
        for client in &played {
            assert_eq!(client.last_tick, TICKS, "{}", client.summary);
            assert_eq!(client.players, usize::from(CLIENTS), "{}", client.summary);
        }
    }
}
