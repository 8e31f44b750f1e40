//! The endpoint's UDP socket: creation with requested buffer sizes, and the sizes the
//! kernel actually granted.

use std::io;
use std::net::SocketAddr;

use serde::Serialize;
use socket2::{Domain, Protocol, Socket, Type};

/// Socket buffer sizes in bytes: what was asked for and what the kernel granted.
///
/// Linux doubles the requested value for bookkeeping and caps it at
/// `net.core.{r,w}mem_max`, so `actual` can differ from `requested` either way.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize)]
pub struct SocketBuffers {
    /// Requested `SO_SNDBUF`, bytes; `None` = left at the system default.
    pub send_requested: Option<usize>,
    /// `SO_SNDBUF` read back after binding, bytes.
    pub send_actual: usize,
    /// Requested `SO_RCVBUF`, bytes; `None` = left at the system default.
    pub recv_requested: Option<usize>,
    /// `SO_RCVBUF` read back after binding, bytes.
    pub recv_actual: usize,
}

/// Binds a non-blocking UDP socket with the requested buffer sizes.
pub(crate) fn bind(
    addr: SocketAddr,
    send_buffer: Option<usize>,
    recv_buffer: Option<usize>,
) -> io::Result<(tokio::net::UdpSocket, SocketBuffers)> {
    let socket = Socket::new(Domain::for_address(addr), Type::DGRAM, Some(Protocol::UDP))?;
    if let Some(size) = send_buffer {
        socket.set_send_buffer_size(size)?;
    }
    if let Some(size) = recv_buffer {
        socket.set_recv_buffer_size(size)?;
    }
    socket.set_nonblocking(true)?;
    socket.bind(&addr.into())?;
    let buffers = SocketBuffers {
        send_requested: send_buffer,
        send_actual: socket.send_buffer_size()?,
        recv_requested: recv_buffer,
        recv_actual: socket.recv_buffer_size()?,
    };
    let socket = tokio::net::UdpSocket::from_std(socket.into())?;
    Ok((socket, buffers))
}
