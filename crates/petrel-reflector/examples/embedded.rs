//! A DraARLv1 reflector embedded in another program: the program keeps its own
//! account list, writes it into the reflector's store, starts the reflector on
//! loopback inside its own tokio runtime, logs two link boxes in over UDP, has
//! one talk to the other, reads the counters and the HTTP health check, and
//! shuts the reflector down.
//!
//! Run with `cargo run -p petrel-reflector --example embedded` (about a second;
//! loopback only; the SQLite store is a scratch file removed at the end).
//!
//! The store is not pluggable: `runtime::store::Store` is one concrete type over
//! SQLite or PostgreSQL, chosen by the location string (`ServerConfig::db`), and
//! the server opens it itself. A program with its own user database does what
//! this one does: it writes its accounts through the `Store` API (`add_user`,
//! `set_device_password`, `set_user_enabled`, `add_group`, …) and asks the running
//! reflector to pick the changes up with `ServerHandle::reload_now` (the reflector
//! also reloads every `reload_interval_ms`).

use std::net::SocketAddr;
use std::time::Duration;

use petrel_reflector::codec::{decode, encode, merge_frames, Header, PacketType};
use petrel_reflector::model::ServerConfig;
use petrel_reflector::runtime::server::ServerHandle;
use petrel_reflector::runtime::store::{NewUser, Store, StoreOptions};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpStream, UdpSocket};

type Error = Box<dyn std::error::Error + Send + Sync>;

/// An account as the host program keeps it.
struct HostAccount {
    name: &'static str,
    callsign: &'static str,
    dmrid: u32,
    device_password: &'static str,
}

/// The host program's accounts.
const ACCOUNTS: [HostAccount; 2] = [
    HostAccount {
        name: "alice",
        callsign: "BA1AAA",
        dmrid: 4_600_001,
        device_password: "Pass1234",
    },
    HostAccount {
        name: "bob",
        callsign: "BA1BBB",
        dmrid: 4_600_002,
        device_password: "Pass5678",
    },
];

/// Writes the host's accounts into the reflector store at `db` (created on
/// first open, with the public talkgroup 999 every new device joins).
async fn sync_accounts(db: &str) -> Result<(), Error> {
    let store = Store::open(db, StoreOptions::default()).await?;
    for account in &ACCOUNTS {
        store
            .add_user(&NewUser {
                name: account.name.into(),
                callsign: account.callsign.into(),
                dmrid: account.dmrid,
                device_password: account.device_password.into(),
                default_group_id: None,
            })
            .await?;
    }
    store.close().await;
    Ok(())
}

/// A link box: one UDP socket, logged in by a Type 2 heartbeat.
struct LinkBox {
    sock: UdpSocket,
    reflector: SocketAddr,
    account: &'static HostAccount,
}

impl LinkBox {
    async fn log_in(account: &'static HostAccount, reflector: SocketAddr) -> Result<Self, Error> {
        let sock = UdpSocket::bind("127.0.0.1:0").await?;
        let device = Self {
            sock,
            reflector,
            account,
        };
        // Heartbeat data: 24 bytes of GPS (none here), then the MAC address.
        let mut data = vec![0u8; 24];
        data.extend_from_slice(format!("02:00:00:00:00:{:02X}", account.dmrid % 256).as_bytes());
        device.send(PacketType::Heartbeat, &data).await?;
        let reply = device.recv(PacketType::Heartbeat).await?;
        let header = decode(&reply)?.header;
        // An accepted login carries the account's callsign; a rejection an empty one.
        match header.callsign_str() {
            Some(callsign) if !callsign.is_empty() => Ok(device),
            _ => Err(format!("{} was refused", account.name).into()),
        }
    }

    async fn send(&self, packet_type: PacketType, data: &[u8]) -> Result<(), Error> {
        let mut header = Header::new(packet_type);
        header.set_username(self.account.name);
        header.set_password(self.account.device_password);
        header.ssid = 1;
        header.dev_model = 2;
        self.sock
            .send_to(&encode(&header, data)?, self.reflector)
            .await?;
        Ok(())
    }

    /// The next datagram of `packet_type`, within 2 s.
    async fn recv(&self, packet_type: PacketType) -> Result<Vec<u8>, Error> {
        let mut buf = vec![0u8; 2048];
        tokio::time::timeout(Duration::from_secs(2), async {
            loop {
                let n = self.sock.recv(&mut buf).await?;
                if decode(&buf[..n]).is_ok_and(|p| p.header.packet_type == packet_type) {
                    return Ok::<_, Error>(buf[..n].to_vec());
                }
            }
        })
        .await?
    }
}

/// `GET path` on the reflector's HTTP port; the whole response.
async fn http_get(addr: SocketAddr, path: &str) -> Result<String, Error> {
    let mut tcp = TcpStream::connect(addr).await?;
    tcp.write_all(
        format!("GET {path} HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n\r\n").as_bytes(),
    )
    .await?;
    let mut response = String::new();
    tokio::time::timeout(Duration::from_secs(5), tcp.read_to_string(&mut response)).await??;
    Ok(response)
}

/// What the run showed.
struct Outcome {
    /// The voice bob received, as sent by alice.
    heard: Vec<u8>,
    /// The voice alice sent.
    spoken: Vec<u8>,
    /// Devices online when the voice went out.
    online: usize,
    /// Datagrams the fan-out sent.
    fanout_sent: u64,
    /// Whether `/healthz` answered `ok`.
    healthy: bool,
}

async fn run(db: &str) -> Result<Outcome, Error> {
    sync_accounts(db).await?;
    let server = ServerHandle::start(ServerConfig {
        listen: "127.0.0.1:0".parse()?,
        http_listen: Some("127.0.0.1:0".parse()?),
        db: db.to_owned(),
        ..ServerConfig::default()
    })
    .await?;
    let reflector = server.local_addr();
    println!(
        "reflector on udp {reflector}, http {:?}",
        server.http_addr()
    );

    let alice = LinkBox::log_in(&ACCOUNTS[0], reflector).await?;
    let bob = LinkBox::log_in(&ACCOUNTS[1], reflector).await?;
    // Two Opus frames, length-prefixed, as a link box merges them.
    let spoken = merge_frames([&[0x11u8; 40][..], &[0x22u8; 38][..]])?;
    alice.send(PacketType::Voice, &spoken).await?;
    let voice = bob.recv(PacketType::Voice).await?;
    let packet = decode(&voice)?;
    println!(
        "bob heard {} bytes of voice from {} ({})",
        packet.data.len(),
        packet.header.username_str().unwrap_or("?"),
        packet.header.callsign_str().unwrap_or("?"),
    );
    let heard = packet.data.to_vec();

    // The send path counts a batch once the kernel has taken it, which can be
    // just after bob already read it: give the counter up to a second.
    let mut stats = server.stats();
    for _ in 0..100 {
        if stats.fanout.sent > 0 {
            break;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
        stats = server.stats();
    }
    println!(
        "online {}, fan-out frames accepted {}, datagrams sent {}",
        stats.online, stats.fanout.frames_accepted, stats.fanout.sent
    );
    let healthy = match server.http_addr() {
        Some(addr) => http_get(addr, "/healthz").await?.trim_end().ends_with("ok"),
        None => false,
    };
    println!("/healthz: {}", if healthy { "ok" } else { "not ok" });
    server.shutdown().await;
    Ok(Outcome {
        heard,
        spoken,
        online: stats.online,
        fanout_sent: stats.fanout.sent,
        healthy,
    })
}

/// A scratch SQLite file; it and its journal files are removed on drop.
struct ScratchDb(std::path::PathBuf);

impl ScratchDb {
    fn new(name: &str) -> Self {
        Self(std::env::temp_dir().join(format!("{name}-{}.db", std::process::id())))
    }

    fn location(&self) -> String {
        self.0.display().to_string()
    }
}

impl Drop for ScratchDb {
    fn drop(&mut self) {
        for suffix in ["", "-wal", "-shm", "-journal"] {
            let mut path = self.0.clone().into_os_string();
            path.push(suffix);
            let _ = std::fs::remove_file(path);
        }
    }
}

#[tokio::main]
async fn main() -> Result<(), Error> {
    let db = ScratchDb::new("petrel-embedded-example");
    let outcome = tokio::time::timeout(Duration::from_secs(30), run(&db.location())).await??;
    if outcome.heard != outcome.spoken {
        return Err("the voice arrived altered".into());
    }
    if outcome.online != 2 || outcome.fanout_sent == 0 || !outcome.healthy {
        return Err("the reflector did not carry the voice or answer /healthz".into());
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::{run, ScratchDb};

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn the_embedded_reflector_carries_voice_and_answers_health_checks() {
        let db = ScratchDb::new("petrel-embedded-example-test");
        let outcome = run(&db.location()).await.expect("the example runs");
        assert_eq!(outcome.heard, outcome.spoken);
        assert_eq!(outcome.online, 2);
        assert!(outcome.fanout_sent >= 1);
        assert!(outcome.healthy);
    }
}
