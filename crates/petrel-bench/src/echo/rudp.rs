//! Petrel RUDP echo transport: a Petrel [`Endpoint`] server echoing every message on
//! every accepted connection; one endpoint (one socket) and connection per client.
//!
//! Uses the native handshake and the default [`KcpConfig`](petrel::KcpConfig) (nodelay,
//! interval 10 ms, windows 128 / 512, MTU 1200). RUDP is reliable, so leftovers after the
//! drain count as `unfinished`.

use std::io;
use std::net::{Ipv4Addr, SocketAddr};
use std::sync::Arc;

use bytes::Bytes;
use petrel::{Connection, Endpoint, EndpointConfig};

use super::{BufferRequest, EchoClient, EchoServer, EchoTransport, ServerStats, SocketBuffers};

/// Petrel RUDP over 127.0.0.1.
#[derive(Debug, Clone)]
pub struct RudpTransport {
    buffers: BufferRequest,
    config: EndpointConfig,
}

impl RudpTransport {
    /// RUDP with `config` (its `accept_incoming` is set per role) and the given socket
    /// buffer requests, applied to server and client sockets.
    pub fn new(config: EndpointConfig, buffers: BufferRequest) -> Self {
        Self { buffers, config }
    }

    /// The server gets one socket shard per worker of the runtime it starts on
    /// (`bench echo --io-threads N`), so its drivers can use every worker; each
    /// client keeps its one socket.
    fn endpoint_config(&self, server: bool) -> EndpointConfig {
        let io_threads = if server {
            tokio::runtime::Handle::current()
                .metrics()
                .num_workers()
                .clamp(1, petrel::MAX_IO_THREADS)
        } else {
            self.config.io_threads
        };
        EndpointConfig {
            accept_incoming: server,
            send_buffer: self.buffers.send,
            recv_buffer: self.buffers.recv,
            io_threads,
            ..self.config.clone()
        }
    }
}

/// The buffers `endpoint`'s socket asked for and was granted.
pub(crate) fn buffers_of(endpoint: &Endpoint) -> SocketBuffers {
    let b = endpoint.socket_buffers();
    SocketBuffers {
        send_requested: b.send_requested,
        send_actual: b.send_actual,
        recv_requested: b.recv_requested,
        recv_actual: b.recv_actual,
    }
}

fn to_io(err: impl std::error::Error + Send + Sync + 'static) -> io::Error {
    io::Error::other(err)
}

impl EchoTransport for RudpTransport {
    type Client = RudpClient;

    fn name(&self) -> &'static str {
        "rudp"
    }

    fn reliable(&self) -> bool {
        true
    }

    fn requested_buffers(&self) -> BufferRequest {
        self.buffers
    }

    async fn start_server(&self) -> io::Result<EchoServer> {
        let endpoint = Endpoint::bind(
            SocketAddr::from((Ipv4Addr::LOCALHOST, 0)),
            self.endpoint_config(true),
        )
        .await?;
        let addr = endpoint.local_addr();
        let buffers = buffers_of(&endpoint);
        let reader = endpoint.stats_reader();
        let stats = Arc::new(ServerStats::default());
        let task = tokio::spawn(serve(endpoint, Arc::clone(&stats)));
        Ok(EchoServer::new(addr, task, stats, Some(buffers)).with_endpoint_stats(reader))
    }

    async fn connect(&self, server: SocketAddr, _client_id: u32) -> io::Result<RudpClient> {
        let endpoint = Endpoint::bind(
            SocketAddr::from((Ipv4Addr::LOCALHOST, 0)),
            self.endpoint_config(false),
        )
        .await?;
        let conn = endpoint.connect(server).await.map_err(to_io)?;
        Ok(RudpClient {
            buffers: buffers_of(&endpoint),
            conn,
            _endpoint: endpoint,
        })
    }
}

async fn serve(endpoint: Endpoint, stats: Arc<ServerStats>) {
    let mut tasks = tokio::task::JoinSet::new();
    while let Some(conn) = endpoint.accept().await {
        let stats = Arc::clone(&stats);
        tasks.spawn(echo_connection(conn, stats));
    }
}

/// Echoes every message of one server-side connection until it ends.
pub(crate) async fn echo_connection(conn: Connection, stats: Arc<ServerStats>) {
    while let Ok(Some(msg)) = conn.recv().await {
        stats.work.apply(&msg);
        match conn.send(msg).await {
            Ok(()) => stats.count_echo(),
            Err(_) => {
                stats.count_error();
                break;
            }
        }
    }
}

/// One client's endpoint and connection.
#[derive(Debug)]
pub struct RudpClient {
    conn: Connection,
    buffers: SocketBuffers,
    _endpoint: Endpoint,
}

impl EchoClient for RudpClient {
    async fn send(&self, msg: Bytes) -> io::Result<()> {
        self.conn.send(msg).await.map_err(to_io)
    }

    async fn recv(&self) -> io::Result<Bytes> {
        match self.conn.recv().await {
            Ok(Some(msg)) => Ok(msg),
            Ok(None) => Err(io::Error::new(
                io::ErrorKind::UnexpectedEof,
                "server closed the connection",
            )),
            Err(e) => Err(to_io(e)),
        }
    }

    fn socket_buffers(&self) -> Option<SocketBuffers> {
        Some(self.buffers)
    }
}
