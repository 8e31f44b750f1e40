//! KCP echo transport through `tokio_kcp`, the KCP crate a Rust user would
//! pick: one `KcpListener` on one server socket, one UDP socket and
//! `KcpStream` per client, message mode (one KCP message per echo message).
//!
//! Tuned like Petrel's default [`KcpConfig`](petrel::KcpConfig) so the
//! comparison is of implementations, not settings: nodelay on, interval
//! 10 ms, fast resend after 2 duplicate acks, congestion window off (`nc`),
//! MTU 1200 bytes, send/receive windows 128/512 packets, writes and acks
//! flushed at once (`flush_write`, `flush_acks_input`; Petrel's
//! `ack_nodelay`). Socket buffers are requested as for raw UDP.
//!
//! `KcpStream` needs `&mut self` to send and to receive, so each client
//! runs a driver task that owns the stream and talks to the harness over
//! two bounded channels of [`CHANNEL_CAPACITY`] messages. Reliable:
//! leftovers count as `unfinished`.

use std::io;
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use tokio::net::UdpSocket;
use tokio::sync::{mpsc, Mutex};
use tokio::task::{JoinHandle, JoinSet};
use tokio_kcp::{KcpConfig, KcpListener, KcpNoDelayConfig, KcpStream};

use super::udp::bind_loopback;
use super::{
    peers, BufferRequest, EchoClient, EchoServer, EchoTransport, ServerStats, SocketBuffers,
};

/// Messages buffered between a client's driver task and the harness, each way.
pub const CHANNEL_CAPACITY: usize = 256;

/// Receive buffer (bytes): larger than any valid message, so `tokio_kcp`
/// hands over every message whole (it splits a message only when the
/// buffer is too small).
const RECV_CAPACITY: usize = 65_536;

/// `tokio_kcp` over 127.0.0.1, configured like Petrel's RUDP defaults.
#[derive(Debug, Clone, Copy)]
pub struct KcpTransport {
    buffers: BufferRequest,
}

impl KcpTransport {
    /// `tokio_kcp` with the given socket buffer requests, applied to server
    /// and client sockets.
    pub fn new(buffers: BufferRequest) -> Self {
        Self { buffers }
    }
}

/// The configuration described in the module docs.
pub fn kcp_config() -> KcpConfig {
    KcpConfig {
        mtu: 1200,
        nodelay: KcpNoDelayConfig {
            nodelay: true,
            interval: 10,
            resend: 2,
            nc: true,
        },
        wnd_size: (128, 512),
        session_expire: Duration::from_secs(90),
        flush_write: true,
        flush_acks_input: true,
        stream: false,
        allow_recv_empty_packet: false,
    }
}

/// `tokio_kcp` errors are `kcp::Error`, which converts into `io::Error`.
fn to_io(e: impl Into<io::Error>) -> io::Error {
    e.into()
}

impl EchoTransport for KcpTransport {
    type Client = KcpClient;

    fn name(&self) -> &'static str {
        "kcp"
    }

    fn reliable(&self) -> bool {
        true
    }

    fn peer(&self) -> Option<&'static str> {
        Some(peers::KCP)
    }

    fn requested_buffers(&self) -> BufferRequest {
        self.buffers
    }

    async fn start_server(&self) -> io::Result<EchoServer> {
        let (socket, actual) = bind_loopback(self.buffers)?;
        let socket = UdpSocket::from_std(socket)?;
        let addr = socket.local_addr()?;
        let listener = KcpListener::from_socket(kcp_config(), socket)
            .await
            .map_err(to_io)?;
        let stats = Arc::new(ServerStats::default());
        let task = tokio::spawn(accept_loop(listener, Arc::clone(&stats)));
        Ok(EchoServer::new(addr, task, stats, Some(actual)))
    }

    async fn connect(&self, server: SocketAddr, _client_id: u32) -> io::Result<KcpClient> {
        let (socket, buffers) = bind_loopback(self.buffers)?;
        let socket = UdpSocket::from_std(socket)?;
        let stream = KcpStream::connect_with_socket(&kcp_config(), socket, server)
            .await
            .map_err(to_io)?;
        let (out_tx, out_rx) = mpsc::channel(CHANNEL_CAPACITY);
        let (in_tx, in_rx) = mpsc::channel(CHANNEL_CAPACITY);
        let driver = tokio::spawn(drive(stream, out_rx, in_tx));
        Ok(KcpClient {
            out_tx,
            in_rx: Mutex::new(in_rx),
            buffers,
            driver,
        })
    }
}

async fn accept_loop(mut listener: KcpListener, stats: Arc<ServerStats>) {
    let mut sessions = JoinSet::new();
    loop {
        tokio::select! {
            accepted = listener.accept() => match accepted {
                Ok((stream, _)) => {
                    sessions.spawn(echo_session(stream, Arc::clone(&stats)));
                }
                Err(_) => stats.count_error(),
            },
            Some(_) = sessions.join_next(), if !sessions.is_empty() => {}
        }
    }
}

async fn echo_session(mut stream: KcpStream, stats: Arc<ServerStats>) {
    let mut buf = vec![0u8; RECV_CAPACITY];
    loop {
        let n = match stream.recv(&mut buf).await {
            Ok(0) => return,
            Ok(n) => n,
            Err(_) => {
                stats.count_error();
                return;
            }
        };
        stats.work.apply(&buf[..n]);
        match stream.send(&buf[..n]).await {
            Ok(sent) if sent == n => stats.count_echo(),
            _ => {
                stats.count_error();
                return;
            }
        }
    }
}

/// Owns one client's stream: sends what the harness submits, forwards what
/// arrives. Ends when the harness drops the client or the stream fails (the
/// failure is forwarded, so the harness counts a disconnect).
async fn drive(
    mut stream: KcpStream,
    mut out_rx: mpsc::Receiver<Bytes>,
    in_tx: mpsc::Sender<io::Result<Bytes>>,
) {
    let mut buf = vec![0u8; RECV_CAPACITY];
    loop {
        let received = tokio::select! {
            msg = out_rx.recv() => {
                let Some(msg) = msg else { return };
                match stream.send(&msg).await {
                    Ok(n) if n == msg.len() => continue,
                    Ok(_) => Err(io::Error::new(io::ErrorKind::WriteZero, "message truncated on send")),
                    Err(e) => Err(to_io(e)),
                }
            }
            r = stream.recv(&mut buf) => match r {
                Ok(0) => Err(io::Error::new(io::ErrorKind::UnexpectedEof, "session closed")),
                Ok(n) => Ok(Bytes::copy_from_slice(&buf[..n])),
                Err(e) => Err(to_io(e)),
            },
        };
        let failed = received.is_err();
        if in_tx.send(received).await.is_err() || failed {
            return;
        }
    }
}

/// One client's KCP session, reached through its driver task.
#[derive(Debug)]
pub struct KcpClient {
    out_tx: mpsc::Sender<Bytes>,
    in_rx: Mutex<mpsc::Receiver<io::Result<Bytes>>>,
    buffers: SocketBuffers,
    driver: JoinHandle<()>,
}

impl Drop for KcpClient {
    fn drop(&mut self) {
        self.driver.abort();
    }
}

fn closed() -> io::Error {
    io::Error::new(io::ErrorKind::BrokenPipe, "KCP driver task ended")
}

impl EchoClient for KcpClient {
    async fn send(&self, msg: Bytes) -> io::Result<()> {
        self.out_tx.send(msg).await.map_err(|_| closed())
    }

    async fn recv(&self) -> io::Result<Bytes> {
        self.in_rx
            .lock()
            .await
            .recv()
            .await
            .unwrap_or_else(|| Err(closed()))
    }

    fn socket_buffers(&self) -> Option<SocketBuffers> {
        Some(self.buffers)
    }
}
