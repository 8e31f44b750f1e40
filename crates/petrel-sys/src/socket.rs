//! UDP socket creation with requested buffer sizes, and the sizes the kernel granted.
//!
//! A buffer size is a request: Linux doubles the value for its bookkeeping
//! (`socket(7)`) and caps it at `net.core.{w,r}mem_max`, so the granted size is read
//! back rather than assumed. [`SocketBuffers`] records both for one socket;
//! [`ServerClientBuffers`] records a server socket and a client socket that were
//! asked for the same sizes, in the flat JSON layout of the benchmark result files.

use std::io;
use std::net::SocketAddr;

use serde::{Deserialize, Serialize};
use socket2::{Domain, Protocol, SockRef, Socket, Type};

/// Requested `SO_SNDBUF` / `SO_RCVBUF`, bytes; `None` keeps the system default.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct BufferRequest {
    /// `SO_SNDBUF` to ask for, bytes.
    pub send: Option<usize>,
    /// `SO_RCVBUF` to ask for, bytes.
    pub recv: Option<usize>,
}

impl BufferRequest {
    /// The same size for both directions.
    pub fn both(bytes: usize) -> Self {
        Self {
            send: Some(bytes),
            recv: Some(bytes),
        }
    }
}

/// What to do when the kernel refuses a buffer size (it clamps silently; refusals
/// are rare, e.g. a size above `i32::MAX`).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum OnRefusal {
    /// Return the error: the caller asked for a size and must know it failed.
    #[default]
    Fail,
    /// Keep the system default and carry on; the granted size shows what happened.
    Ignore,
}

/// Socket buffer sizes of one socket, bytes: what was asked for and what the kernel
/// actually granted (read back after setting).
///
/// JSON: `{"send_requested", "send_actual", "recv_requested", "recv_actual"}`.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct SocketBuffers {
    /// `SO_SNDBUF` requested; `None` = left at the system default.
    pub send_requested: Option<usize>,
    /// `SO_SNDBUF` granted: read back after setting.
    pub send_actual: usize,
    /// `SO_RCVBUF` requested; `None` = left at the system default.
    pub recv_requested: Option<usize>,
    /// `SO_RCVBUF` granted: read back after setting.
    pub recv_actual: usize,
}

/// The buffers of a server socket and a client socket asked for the same sizes
/// (the benchmarks record one of each).
///
/// Serialised flat, in the layout result files have always used:
/// `{"requested_send", "requested_recv", "server_send", "server_recv",
/// "client_send", "client_recv"}` (the requested sizes are the server's).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(from = "FlatPair", into = "FlatPair")]
pub struct ServerClientBuffers {
    /// The server's socket.
    pub server: SocketBuffers,
    /// The (first) client's socket.
    pub client: SocketBuffers,
}

#[derive(Serialize, Deserialize)]
struct FlatPair {
    requested_send: Option<usize>,
    requested_recv: Option<usize>,
    server_send: usize,
    server_recv: usize,
    client_send: usize,
    client_recv: usize,
}

impl From<ServerClientBuffers> for FlatPair {
    fn from(p: ServerClientBuffers) -> Self {
        Self {
            requested_send: p.server.send_requested,
            requested_recv: p.server.recv_requested,
            server_send: p.server.send_actual,
            server_recv: p.server.recv_actual,
            client_send: p.client.send_actual,
            client_recv: p.client.recv_actual,
        }
    }
}

impl From<FlatPair> for ServerClientBuffers {
    fn from(f: FlatPair) -> Self {
        let side = |send, recv| SocketBuffers {
            send_requested: f.requested_send,
            send_actual: send,
            recv_requested: f.requested_recv,
            recv_actual: recv,
        };
        Self {
            server: side(f.server_send, f.server_recv),
            client: side(f.client_send, f.client_recv),
        }
    }
}

/// How to create a UDP socket: address, buffers, blocking mode.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct UdpOptions {
    /// Local address to bind.
    pub bind: SocketAddr,
    /// Buffer sizes to ask for.
    pub buffers: BufferRequest,
    /// Whether a refused buffer size fails the call.
    pub on_refusal: OnRefusal,
    /// Non-blocking mode (needed by tokio, mio and epoll users).
    pub nonblocking: bool,
    /// For an IPv6 `bind`, also accept IPv4-mapped peers (`IPV6_V6ONLY` off).
    /// Ignored for IPv4.
    pub dual_stack: bool,
    /// `SO_REUSEPORT` (Unix): several sockets may bind the same address, and the
    /// kernel spreads incoming datagrams over them by a hash of the 4-tuple, so
    /// every datagram of one peer address lands on the same socket. Every socket
    /// of such a group must set it, the first included.
    pub reuse_port: bool,
}

impl UdpOptions {
    /// Blocking, system-default buffers, refusals fail, IPv6 only for IPv6.
    pub fn new(bind: SocketAddr) -> Self {
        Self {
            bind,
            buffers: BufferRequest::default(),
            on_refusal: OnRefusal::Fail,
            nonblocking: false,
            dual_stack: false,
            reuse_port: false,
        }
    }
}

/// Creates and binds a UDP socket per `options` and reports its buffers.
///
/// Order: `IPV6_V6ONLY` (IPv6 only), `SO_REUSEPORT` (if asked), buffer sizes,
/// blocking mode, `bind`, read-back.
/// The result converts into a tokio or mio socket with `from_std`.
///
/// # Errors
/// Socket creation or `bind` failed, or a buffer size was refused with
/// [`OnRefusal::Fail`].
pub fn bind_udp(options: &UdpOptions) -> io::Result<(std::net::UdpSocket, SocketBuffers)> {
    let socket = Socket::new(
        Domain::for_address(options.bind),
        Type::DGRAM,
        Some(Protocol::UDP),
    )?;
    if options.bind.is_ipv6() && options.dual_stack {
        socket.set_only_v6(false)?;
    }
    if options.reuse_port {
        set_reuse_port(&socket)?;
    }
    let requested = request(&socket, options.buffers, options.on_refusal)?;
    socket.set_nonblocking(options.nonblocking)?;
    socket.bind(&options.bind.into())?;
    let buffers = read_back(&socket, requested)?;
    Ok((socket.into(), buffers))
}

/// Applies `request` to an existing socket (std, tokio, mio or socket2) and reports
/// the granted sizes.
///
/// # Errors
/// A buffer size was refused with [`OnRefusal::Fail`], or reading it back failed.
pub fn set_buffers<'s, S>(
    socket: &'s S,
    request: BufferRequest,
    on_refusal: OnRefusal,
) -> io::Result<SocketBuffers>
where
    SockRef<'s>: From<&'s S>,
{
    let socket = SockRef::from(socket);
    let requested = self::request(&socket, request, on_refusal)?;
    read_back(&socket, requested)
}

/// The buffer sizes of an existing socket, with nothing requested.
///
/// # Errors
/// `getsockopt` failed (not a socket).
pub fn buffers_of<'s, S>(socket: &'s S) -> io::Result<SocketBuffers>
where
    SockRef<'s>: From<&'s S>,
{
    read_back(&SockRef::from(socket), BufferRequest::default())
}

#[cfg(unix)]
fn set_reuse_port(socket: &Socket) -> io::Result<()> {
    socket.set_reuse_port(true)
}

#[cfg(not(unix))]
fn set_reuse_port(_: &Socket) -> io::Result<()> {
    Err(io::Error::new(
        io::ErrorKind::Unsupported,
        "SO_REUSEPORT is not available on this platform",
    ))
}

fn request(
    socket: &Socket,
    request: BufferRequest,
    on_refusal: OnRefusal,
) -> io::Result<BufferRequest> {
    let apply = |size: Option<usize>, set: fn(&Socket, usize) -> io::Result<()>| match (
        size.map(|s| set(socket, s)),
        on_refusal,
    ) {
        (Some(Err(e)), OnRefusal::Fail) => Err(e),
        _ => Ok(()),
    };
    apply(request.send, Socket::set_send_buffer_size)?;
    apply(request.recv, Socket::set_recv_buffer_size)?;
    Ok(request)
}

fn read_back(socket: &Socket, requested: BufferRequest) -> io::Result<SocketBuffers> {
    Ok(SocketBuffers {
        send_requested: requested.send,
        send_actual: socket.send_buffer_size()?,
        recv_requested: requested.recv,
        recv_actual: socket.recv_buffer_size()?,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn granted_sizes_are_read_back() {
        let mut options = UdpOptions::new("127.0.0.1:0".parse().unwrap());
        options.buffers = BufferRequest {
            send: Some(64 * 1024),
            recv: Some(1024 * 1024),
        };
        options.nonblocking = true;
        let (socket, b) = bind_udp(&options).unwrap();
        assert_eq!(b.send_requested, Some(64 * 1024));
        assert_eq!(b.recv_requested, Some(1024 * 1024));
        // Linux grants twice the request (capped at wmem_max / rmem_max).
        assert!(b.send_actual >= 64 * 1024, "{b:?}");
        assert!(b.recv_actual > 0, "{b:?}");
        assert_eq!(buffers_of(&socket).unwrap().send_actual, b.send_actual);
        let mut buf = [0u8; 8];
        let e = socket.recv_from(&mut buf).unwrap_err();
        assert_eq!(e.kind(), io::ErrorKind::WouldBlock);
    }

    #[test]
    fn reuse_port_lets_two_sockets_share_an_address() {
        let mut options = UdpOptions::new("127.0.0.1:0".parse().unwrap());
        options.reuse_port = true;
        let (first, _) = bind_udp(&options).unwrap();
        options.bind = first.local_addr().unwrap();
        let (second, _) = bind_udp(&options).unwrap();
        assert_eq!(second.local_addr().unwrap(), options.bind);
        // Without the option on the newcomer the address is taken.
        options.reuse_port = false;
        assert!(bind_udp(&options).is_err());
    }

    #[test]
    fn set_buffers_on_an_existing_socket() {
        let socket = std::net::UdpSocket::bind("127.0.0.1:0").unwrap();
        let b = set_buffers(&socket, BufferRequest::both(256 << 10), OnRefusal::Ignore).unwrap();
        assert_eq!(b.recv_requested, Some(256 << 10));
        assert!(b.recv_actual > 0);
    }

    #[test]
    fn dual_stack_ipv6_accepts_ipv4_peers() {
        let mut options = UdpOptions::new("[::]:0".parse().unwrap());
        options.dual_stack = true;
        // Hosts without IPv6 cannot run this; nothing to check there.
        let Ok((rx, _)) = bind_udp(&options) else {
            return;
        };
        let port = rx.local_addr().unwrap().port();
        let tx = std::net::UdpSocket::bind("127.0.0.1:0").unwrap();
        tx.send_to(b"v4", ("127.0.0.1", port)).unwrap();
        rx.set_read_timeout(Some(std::time::Duration::from_secs(2)))
            .unwrap();
        let mut buf = [0u8; 8];
        assert_eq!(rx.recv_from(&mut buf).unwrap().0, 2);
    }

    #[test]
    fn server_client_json_keeps_the_result_file_layout() {
        let side = |send, recv| SocketBuffers {
            send_requested: Some(1000),
            send_actual: send,
            recv_requested: None,
            recv_actual: recv,
        };
        let pair = ServerClientBuffers {
            server: side(2000, 3000),
            client: side(4000, 5000),
        };
        let json = serde_json::to_value(pair).unwrap();
        assert_eq!(
            json,
            serde_json::json!({
                "requested_send": 1000, "requested_recv": null,
                "server_send": 2000, "server_recv": 3000,
                "client_send": 4000, "client_recv": 5000,
            })
        );
        let back: ServerClientBuffers = serde_json::from_value(json).unwrap();
        assert_eq!(back, pair);
    }
}
