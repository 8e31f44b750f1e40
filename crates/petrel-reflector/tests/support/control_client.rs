//! The interconnect control plane from the outside (draarl-interconnect
//! §3.1–§3.2): a centre on loopback that knows nodes by static token, raw
//! TLS clients pinned to its certificate (optionally from a chosen
//! loopback address), the `node_enroll` hello and a hand-made
//! authentication, and waiting on the centre's counters.

use std::net::{IpAddr, SocketAddr};
use std::time::{Duration, Instant};

use petrel_reflector::codec::interconnect::ControlMessage;
use petrel_reflector::model::{InterconnectConfig, NodeCredential};
use petrel_reflector::runtime::interconnect::{
    CentreTrust, ControlServer, ControlServerSnapshot, NodeAuthority, TlsIdentity,
};
use rustls::pki_types::ServerName;
use tokio::net::{TcpSocket, TcpStream};
use tokio_rustls::client::TlsStream;
use tokio_rustls::TlsConnector;

/// A node credential whose 32-byte secret is `fill` repeated.
pub fn credential(node: &str, fill: u8) -> NodeCredential {
    NodeCredential::new(node, &[fill; 32]).unwrap()
}

/// `[interconnect]` enabled on a free loopback port.
pub fn loopback_cfg() -> InterconnectConfig {
    InterconnectConfig {
        enabled: true,
        control_listen: SocketAddr::from(([127, 0, 0, 1], 0)),
        ..InterconnectConfig::default()
    }
}

/// A centre on `cfg` checking credentials with `authority`.
pub async fn centre_with(
    cfg: &InterconnectConfig,
    identity: &TlsIdentity,
    authority: NodeAuthority,
) -> ControlServer {
    ControlServer::bind(cfg, identity.server_config().unwrap(), authority, None)
        .await
        .unwrap()
}

/// A centre on `cfg` knowing `nodes` as static tokens.
pub async fn centre(
    cfg: &InterconnectConfig,
    identity: &TlsIdentity,
    nodes: &[&NodeCredential],
) -> ControlServer {
    let mut authority = NodeAuthority::default();
    for c in nodes {
        authority = authority.with_static_token(c.node_id(), c.expose());
    }
    centre_with(cfg, identity, authority).await
}

/// Polls the centre's counters until `done` holds; fails after `within`.
pub async fn stats_when(
    server: &ControlServer,
    within: Duration,
    done: impl Fn(&ControlServerSnapshot) -> bool,
) -> ControlServerSnapshot {
    let start = Instant::now();
    loop {
        let s = server.stats();
        if done(&s) {
            return s;
        }
        assert!(start.elapsed() < within, "timed out waiting: {s:?}");
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
}

/// TLS 1.3 over `tcp`, accepting only the certificate pinned by `pin`.
pub async fn tls_over(tcp: TcpStream, pin: [u8; 32]) -> TlsStream<TcpStream> {
    let cfg = CentreTrust::Pin(pin).client_config().unwrap();
    TlsConnector::from(cfg)
        .connect(ServerName::try_from("localhost").unwrap(), tcp)
        .await
        .unwrap()
}

/// A raw TLS client of `addr` pinned to `pin`, for speaking the handshake
/// by hand.
pub async fn tls_connect(addr: SocketAddr, pin: [u8; 32]) -> TlsStream<TcpStream> {
    tls_over(TcpStream::connect(addr).await.unwrap(), pin).await
}

/// A TCP connection to `addr` from the loopback address `from`.
pub async fn connect_from(from: impl Into<IpAddr>, addr: SocketAddr) -> TcpStream {
    let sock = TcpSocket::new_v4().unwrap();
    sock.bind(SocketAddr::new(from.into(), 0)).unwrap();
    sock.connect(addr).await.unwrap()
}

/// The edge's `node_enroll` hello (§3.2 step 1), features 0x17, required 7.
pub fn hello(node: &str, token: &str) -> ControlMessage {
    ControlMessage {
        node_id: node.to_owned(),
        token: token.to_owned(),
        min_protocol: 1,
        max_protocol: 1,
        features: 0x17,
        required_features: 7,
        ..ControlMessage::new("node_enroll")
    }
}

/// Connects to `addr` (certificate pinned by `pin`) and authenticates
/// `cred` by hand (§3.2); the stream and the `node_auth_ok` answer.
pub async fn authenticate(
    addr: SocketAddr,
    pin: [u8; 32],
    cred: &NodeCredential,
) -> (TlsStream<TcpStream>, ControlMessage) {
    use petrel_reflector::codec::interconnect::{encode_frame, MAX_HELLO_FRAME};
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let mut tls = tls_connect(addr, pin).await;
    let frame = encode_frame(&hello(cred.node_id(), cred.expose()), MAX_HELLO_FRAME).unwrap();
    tls.write_all(&frame).await.unwrap();
    let mut len = [0u8; 4];
    tls.read_exact(&mut len).await.unwrap();
    let mut body = vec![0u8; u32::from_be_bytes(len) as usize];
    tls.read_exact(&mut body).await.unwrap();
    let ok: ControlMessage = serde_json::from_slice(&body).unwrap();
    assert_eq!(ok.kind, "node_auth_ok", "{ok:?}");
    (tls, ok)
}
