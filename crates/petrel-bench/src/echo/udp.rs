//! Raw UDP echo transport: one server socket echoing every datagram to its
//! sender; one connected socket per client.
//!
//! Socket buffers are set with `socket2` before binding and read back; the
//! default request is the published run's (64 KiB send, 4 MiB receive,
//! `specs/benchmarks.md` §A). Linux caps requests at `net.core.wmem_max` /
//! `rmem_max` and reports double the granted value (`socket(7)`), which is
//! why the actual values are recorded. UDP may lose messages, so leftovers
//! count as `lost`.

use std::io;
use std::net::{Ipv4Addr, SocketAddr};
use std::sync::Arc;

use bytes::{Bytes, BytesMut};
use petrel_sys::socket::{bind_udp, UdpOptions};
use tokio::net::UdpSocket;

use super::{BufferRequest, EchoClient, EchoServer, EchoTransport, ServerStats, SocketBuffers};

/// Largest datagram the sockets here read (bytes); above the 65,507-byte
/// payload limit so an oversized datagram shows up as a content error
/// rather than being silently truncated to a valid length.
const RECV_CAPACITY: usize = 65_536;

/// The published run's request: 64 KiB send buffer.
pub const DEFAULT_SEND_BUFFER: usize = 64 * 1024;
/// The published run's request: 4 MiB receive buffer.
pub const DEFAULT_RECV_BUFFER: usize = 4 * 1024 * 1024;

/// Raw UDP over 127.0.0.1.
#[derive(Debug, Clone, Copy)]
pub struct UdpTransport {
    buffers: BufferRequest,
}

impl Default for UdpTransport {
    /// Requests [`DEFAULT_SEND_BUFFER`] and [`DEFAULT_RECV_BUFFER`].
    fn default() -> Self {
        Self::new(BufferRequest {
            send: Some(DEFAULT_SEND_BUFFER),
            recv: Some(DEFAULT_RECV_BUFFER),
        })
    }
}

impl UdpTransport {
    /// UDP with the given buffer requests, applied to server and client sockets.
    pub fn new(buffers: BufferRequest) -> Self {
        Self { buffers }
    }

    fn bind(&self) -> io::Result<(UdpSocket, SocketBuffers)> {
        let (socket, actual) = bind_loopback(self.buffers)?;
        Ok((UdpSocket::from_std(socket)?, actual))
    }
}

/// A non-blocking UDP socket on 127.0.0.1 with `buffers` requested before
/// binding, and the sizes the kernel actually granted. Shared by the
/// UDP-based peer adapters so every UDP transport asks for the same buffers.
pub(super) fn bind_loopback(
    buffers: BufferRequest,
) -> io::Result<(std::net::UdpSocket, SocketBuffers)> {
    bind_udp(&UdpOptions {
        buffers,
        nonblocking: true,
        ..UdpOptions::new(SocketAddr::from((Ipv4Addr::LOCALHOST, 0)))
    })
}

impl EchoTransport for UdpTransport {
    type Client = UdpClient;

    fn name(&self) -> &'static str {
        "udp"
    }

    fn reliable(&self) -> bool {
        false
    }

    fn requested_buffers(&self) -> BufferRequest {
        self.buffers
    }

    async fn start_server(&self) -> io::Result<EchoServer> {
        let (socket, actual) = self.bind()?;
        let addr = socket.local_addr()?;
        let stats = Arc::new(ServerStats::default());
        let task = tokio::spawn(serve(socket, Arc::clone(&stats)));
        Ok(EchoServer::new(addr, task, stats, Some(actual)))
    }

    async fn connect(&self, server: SocketAddr, _client_id: u32) -> io::Result<UdpClient> {
        let (socket, buffers) = self.bind()?;
        socket.connect(server).await?;
        Ok(UdpClient { socket, buffers })
    }
}

async fn serve(socket: UdpSocket, stats: Arc<ServerStats>) {
    let mut buf = vec![0u8; RECV_CAPACITY];
    loop {
        match socket.recv_from(&mut buf).await {
            Ok((n, peer)) => {
                stats.work.apply(&buf[..n]);
                match socket.send_to(&buf[..n], peer).await {
                    Ok(_) => stats.count_echo(),
                    Err(_) => stats.count_error(),
                }
            }
            Err(_) => stats.count_error(),
        }
    }
}

/// One client's connected UDP socket.
#[derive(Debug)]
pub struct UdpClient {
    socket: UdpSocket,
    buffers: SocketBuffers,
}

impl EchoClient for UdpClient {
    async fn send(&self, msg: Bytes) -> io::Result<()> {
        let n = self.socket.send(&msg).await?;
        if n == msg.len() {
            Ok(())
        } else {
            Err(io::Error::new(
                io::ErrorKind::WriteZero,
                "datagram truncated on send",
            ))
        }
    }

    async fn recv(&self) -> io::Result<Bytes> {
        let mut buf = BytesMut::with_capacity(RECV_CAPACITY);
        self.socket.recv_buf(&mut buf).await?;
        Ok(buf.freeze())
    }

    fn socket_buffers(&self) -> Option<SocketBuffers> {
        Some(self.buffers)
    }
}
