//! Edge reflectors and the devices behind them, over loopback
//! (draarl-interconnect §2, §3.8, §5): an [`EdgeServer`] of a centre,
//! ready and with its UDP address bound, and physical devices on their own
//! 127.0.0.x addresses that log in with heartbeats and send and collect
//! Types 4/5.

use std::net::SocketAddr;
use std::time::{Duration, Instant};

use petrel_reflector::codec::interconnect::{NodeId, Offer};
use petrel_reflector::codec::{decode, encode, Header, PacketType};
use petrel_reflector::core::interconnect::{DataPlane, LinkState};
use petrel_reflector::model::NodeCredential;
use petrel_reflector::runtime::interconnect::{
    CentreTrust, EdgeControlConfig, EdgeServer, EdgeServerConfig, DEFAULT_SERVER_NAME,
};
use std::sync::{Arc, Mutex};
use tokio::net::UdpSocket;

/// How long the helpers wait for anything.
pub const WAIT: Duration = Duration::from_secs(10);

/// Waits until `done` holds; fails after [`WAIT`].
pub async fn until(what: &str, done: impl Fn() -> bool) {
    let start = Instant::now();
    while !done() {
        assert!(start.elapsed() < WAIT, "timed out waiting for {what}");
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
}

/// Waits until the centre's data plane `data` has bound `node`'s UDP
/// address (draarl-interconnect §4.5).
pub async fn bound(data: &Arc<Mutex<DataPlane>>, node: &str) {
    let id = NodeId::new(node).unwrap();
    until("the DataBind proof", || {
        data.lock().unwrap().data_address(id).is_some()
    })
    .await;
}

/// The settings of an edge on 127.0.0.1 (device port and `/metrics` on
/// ephemeral ports) of the centre at `control` / `udp`, trusting `pin`,
/// with the local grace `grace` and DataBind every 500 ms.
pub fn edge_config(
    control: SocketAddr,
    udp: SocketAddr,
    credential: &NodeCredential,
    pin: [u8; 32],
    grace: Duration,
) -> EdgeServerConfig {
    let mut cfg = EdgeServerConfig::new(EdgeControlConfig {
        centre: control.to_string(),
        server_name: DEFAULT_SERVER_NAME.to_owned(),
        credential: credential.clone(),
        trust: CentreTrust::Pin(pin),
        offer: Offer::CURRENT,
        heartbeat: Duration::from_millis(500),
    });
    cfg.listen = SocketAddr::from(([127, 0, 0, 1], 0));
    cfg.http_listen = Some(SocketAddr::from(([127, 0, 0, 1], 0)));
    cfg.node.centre_udp = Some(udp);
    cfg.node.grace = grace;
    cfg.node.bind_interval = Duration::from_millis(500);
    cfg
}

/// Starts an edge with `cfg` and waits until it is ready.
pub async fn ready_edge(cfg: EdgeServerConfig) -> EdgeServer {
    let e = EdgeServer::start(cfg).await.unwrap();
    e.wait_for_state(WAIT, |s| s == LinkState::Ready)
        .await
        .expect("edge ready");
    e
}

/// `GET /metrics` of an edge.
pub async fn metrics(addr: SocketAddr) -> String {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let mut s = tokio::net::TcpStream::connect(addr).await.unwrap();
    s.write_all(b"GET /metrics HTTP/1.1\r\nHost: x\r\n\r\n")
        .await
        .unwrap();
    let mut out = String::new();
    s.read_to_string(&mut out).await.unwrap();
    assert!(out.starts_with("HTTP/1.1 200"), "{out}");
    out
}

/// A voice payload of 40 bytes `n`.
pub fn frame(n: u8) -> Vec<u8> {
    vec![n; 40]
}

/// A physical device (DevModel 2) on its own loopback address.
pub struct Device {
    /// Its socket.
    pub sock: UdpSocket,
    /// Account name.
    pub user: &'static str,
    /// SSID.
    pub ssid: u8,
    /// The device password it sends.
    pub password: &'static str,
}

impl Device {
    /// A device `user`-`ssid` on 127.0.0.`ip`, sending `password`.
    pub async fn new(ip: u8, user: &'static str, ssid: u8, password: &'static str) -> Self {
        let sock = UdpSocket::bind(SocketAddr::from(([127, 0, 0, ip], 0)))
            .await
            .unwrap();
        Self {
            sock,
            user,
            ssid,
            password,
        }
    }

    /// A Type `kind` packet with `data` (the password in every packet, as
    /// RFBox sends it).
    pub fn packet(&self, kind: PacketType, data: &[u8]) -> Vec<u8> {
        let mut h = Header::new(kind);
        h.set_username(self.user);
        h.set_password(self.password);
        h.ssid = self.ssid;
        h.dev_model = 2;
        encode(&h, data).unwrap()
    }

    /// Sends a Type `kind` packet with `data` to `to`.
    pub async fn send(&self, to: SocketAddr, kind: PacketType, data: &[u8]) {
        self.sock
            .send_to(&self.packet(kind, data), to)
            .await
            .unwrap();
    }

    /// Heartbeats (24 GPS bytes + a 17-byte MAC) to `to` every 500 ms
    /// until a Type 2 answer comes; the answer's header (success: a
    /// callsign; refusal: none).
    pub async fn login(&self, to: SocketAddr) -> Header {
        let start = Instant::now();
        loop {
            assert!(
                start.elapsed() < WAIT,
                "{} got no heartbeat answer",
                self.user
            );
            self.send(to, PacketType::Heartbeat, &[0; 41]).await;
            let until = Instant::now() + Duration::from_millis(500);
            for p in self.recv_until(until).await {
                let p = decode(&p).unwrap();
                if p.header.packet_type == PacketType::Heartbeat {
                    return p.header;
                }
            }
        }
    }

    /// Everything received until `until`.
    pub async fn recv_until(&self, until: Instant) -> Vec<Vec<u8>> {
        let mut out = Vec::new();
        let mut buf = [0u8; 2048];
        loop {
            let left = until.saturating_duration_since(Instant::now());
            if left.is_zero() {
                return out;
            }
            match tokio::time::timeout(left, self.sock.recv_from(&mut buf)).await {
                Ok(Ok((n, _))) => out.push(buf[..n].to_vec()),
                _ => return out,
            }
        }
    }

    /// The DATA of every Type `kind` packet received within `within`.
    pub async fn received(&self, kind: PacketType, within: Duration) -> Vec<Vec<u8>> {
        self.packets(kind, within)
            .await
            .into_iter()
            .map(|(_, data)| data)
            .collect()
    }

    /// Every Type `kind` packet received within `within`: header and DATA.
    pub async fn packets(&self, kind: PacketType, within: Duration) -> Vec<(Header, Vec<u8>)> {
        self.recv_until(Instant::now() + within)
            .await
            .into_iter()
            .filter_map(|p| {
                let p = decode(&p).ok()?;
                (p.header.packet_type == kind).then(|| (p.header, p.data.to_vec()))
            })
            .collect()
    }
}
