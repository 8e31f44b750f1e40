//! ICMP errors for datagrams a UDP socket sent: `IP_RECVERR` /
//! `IPV6_RECVERR` to queue them, `recvmsg(MSG_ERRQUEUE)` to read them.
//!
//! An unconnected UDP socket normally never learns that a destination
//! answered with ICMP "port unreachable": the kernel drops the error. With
//! [`enable_recv_errors`] it queues each one on the socket's error queue
//! instead, with the destination of the datagram that caused it, and
//! [`recv_errors`] reads them (never blocking). Linux only; elsewhere
//! enabling reports `Ok(false)` and the queue is always empty.
//!
//! A queued error is also reported once as the result of the socket's next
//! ordinary send or receive (by whichever thread calls first), for a
//! datagram that had nothing to do with it: [`is_deferred_error`] tells
//! such a result apart, so the caller retries that datagram once.

use std::io;
use std::net::{IpAddr, SocketAddr};

use socket2::SockRef;

/// One error from the queue (see `ip(7)`, `IP_RECVERR`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct IcmpError {
    /// Destination of the datagram that caused the error, port included.
    pub destination: SocketAddr,
    /// The `errno` the kernel mapped it to (`ECONNREFUSED` for port
    /// unreachable, `EHOSTUNREACH`, `ENETUNREACH`, `EMSGSIZE`, ...).
    pub errno: i32,
    /// Where it came from: ICMP (IPv4), ICMPv6, or the local stack.
    pub origin: ErrorOrigin,
    /// ICMP type and code as received (0 for local errors).
    pub icmp_type: u8,
    /// See `icmp_type`.
    pub icmp_code: u8,
    /// The host that sent the ICMP message (the destination itself, or a
    /// router on the way), when the kernel reports it.
    pub offender: Option<IpAddr>,
}

/// Source of an [`IcmpError`] (`SO_EE_ORIGIN_*`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ErrorOrigin {
    /// An ICMP message (IPv4 or a v4-mapped peer of a dual-stack socket).
    Icmp,
    /// An ICMPv6 message.
    Icmp6,
    /// The local stack (for instance `EMSGSIZE` against the path MTU).
    Local,
    /// Any other origin code.
    Other(u8),
}

impl IcmpError {
    /// Whether the destination said nobody receives there: ICMP destination
    /// unreachable (any code but "fragmentation needed", which is a path
    /// MTU report) or ICMPv6 destination unreachable.
    pub fn is_unreachable(&self) -> bool {
        const ICMP_DEST_UNREACH: u8 = 3;
        const ICMP_FRAG_NEEDED: u8 = 4;
        const ICMP6_DST_UNREACH: u8 = 1;
        match self.origin {
            ErrorOrigin::Icmp => {
                self.icmp_type == ICMP_DEST_UNREACH && self.icmp_code != ICMP_FRAG_NEEDED
            }
            ErrorOrigin::Icmp6 => self.icmp_type == ICMP6_DST_UNREACH,
            ErrorOrigin::Local | ErrorOrigin::Other(_) => false,
        }
    }

    /// Whether this is a *port* unreachable (ICMP type 3 code 3, RFC 792;
    /// ICMPv6 type 1 code 4, RFC 4443 §3.1), which only the destination
    /// host itself sends.
    pub fn is_port_unreachable(&self) -> bool {
        match self.origin {
            ErrorOrigin::Icmp => (self.icmp_type, self.icmp_code) == (3, 3),
            ErrorOrigin::Icmp6 => (self.icmp_type, self.icmp_code) == (1, 4),
            ErrorOrigin::Local | ErrorOrigin::Other(_) => false,
        }
    }

    /// Whether the message came from the destination host itself (an
    /// IPv4-mapped IPv6 address compares as its IPv4 address); false when
    /// the kernel named no offender. A port unreachable from any other host
    /// is forged.
    pub fn offender_is_destination(&self) -> bool {
        let canonical = |ip: IpAddr| ip.to_canonical();
        self.offender
            .is_some_and(|o| canonical(o) == canonical(self.destination.ip()))
    }
}

/// Whether `e`, returned by an ordinary send or receive on a socket with
/// [`enable_recv_errors`], may be an earlier datagram's ICMP error rather
/// than this call's own failure: `ECONNREFUSED`, `EHOSTUNREACH`,
/// `ENETUNREACH` or `EHOSTDOWN`. Retrying the call once is then correct.
pub fn is_deferred_error(e: &io::Error) -> bool {
    matches!(
        e.raw_os_error(),
        Some(libc::ECONNREFUSED | libc::EHOSTUNREACH | libc::ENETUNREACH | libc::EHOSTDOWN)
    )
}

/// Asks the kernel to queue ICMP errors on `socket` (`IP_RECVERR`, and for
/// an IPv6 socket also `IPV6_RECVERR`, so v4-mapped peers of a dual-stack
/// socket are covered). Returns whether it did; `Ok(false)` off Linux.
///
/// # Errors
/// The `setsockopt` failure.
pub fn enable_recv_errors<'s, S>(socket: &'s S) -> io::Result<bool>
where
    SockRef<'s>: From<&'s S>,
{
    let socket = SockRef::from(socket);
    #[cfg(target_os = "linux")]
    {
        if socket.local_addr()?.is_ipv6() {
            set_flag(&socket, libc::IPPROTO_IPV6, libc::IPV6_RECVERR)?;
        }
        set_flag(&socket, libc::IPPROTO_IP, libc::IP_RECVERR)?;
        Ok(true)
    }
    #[cfg(not(target_os = "linux"))]
    {
        let _ = socket;
        Ok(false)
    }
}

#[cfg(target_os = "linux")]
fn set_flag(socket: &SockRef<'_>, level: libc::c_int, name: libc::c_int) -> io::Result<()> {
    use std::os::fd::AsRawFd;

    let on: libc::c_int = 1;
    // SAFETY: `on` is a live c_int and its size is passed; the fd is an open socket.
    let r = unsafe {
        libc::setsockopt(
            socket.as_raw_fd(),
            level,
            name,
            (&on as *const libc::c_int).cast(),
            std::mem::size_of::<libc::c_int>() as libc::socklen_t,
        )
    };
    if r == 0 {
        Ok(())
    } else {
        Err(io::Error::last_os_error())
    }
}

/// Reads up to `max` queued errors of `socket` into `out` without blocking;
/// returns how many were appended (0 when the queue is empty). Errors whose
/// destination has an address family this crate does not map are read and
/// skipped.
///
/// # Errors
/// A `recvmsg` failure other than an empty queue.
pub fn recv_errors<'s, S>(socket: &'s S, out: &mut Vec<IcmpError>, max: usize) -> io::Result<usize>
where
    SockRef<'s>: From<&'s S>,
{
    let socket = SockRef::from(socket);
    let mut n = 0;
    for _ in 0..max {
        match recv_one(&socket)? {
            Some(Some(e)) => {
                out.push(e);
                n += 1;
            }
            Some(None) => {}
            None => break,
        }
    }
    Ok(n)
}

/// One error: `None` when the queue is empty, `Some(None)` for an entry
/// that could not be mapped.
#[cfg(target_os = "linux")]
fn recv_one(socket: &SockRef<'_>) -> io::Result<Option<Option<IcmpError>>> {
    use std::os::fd::AsRawFd;

    // Room for one sock_extended_err with its offender address, aligned.
    let mut control = [0u64; 64];
    let mut name: libc::sockaddr_storage =
        // SAFETY: sockaddr_storage is a plain C struct for which all-zero is valid.
        unsafe { std::mem::zeroed() };
    let mut payload = [0u8; 1];
    let mut iov = libc::iovec {
        iov_base: payload.as_mut_ptr().cast(),
        iov_len: payload.len(),
    };
    // SAFETY: msghdr is a plain C struct for which all-zero is valid.
    let mut msg: libc::msghdr = unsafe { std::mem::zeroed() };
    msg.msg_name = (&mut name as *mut libc::sockaddr_storage).cast();
    msg.msg_namelen = std::mem::size_of::<libc::sockaddr_storage>() as libc::socklen_t;
    msg.msg_iov = &mut iov;
    msg.msg_iovlen = 1;
    msg.msg_control = control.as_mut_ptr().cast();
    msg.msg_controllen = std::mem::size_of_val(&control) as _;
    let r = loop {
        // SAFETY: every pointer in `msg` points to a live local buffer whose
        // size is given; the kernel writes within those sizes.
        let r = unsafe {
            libc::recvmsg(
                socket.as_raw_fd(),
                &mut msg,
                libc::MSG_ERRQUEUE | libc::MSG_DONTWAIT,
            )
        };
        if r >= 0 {
            break r;
        }
        let e = io::Error::last_os_error();
        match e.kind() {
            io::ErrorKind::Interrupted => continue,
            io::ErrorKind::WouldBlock => return Ok(None),
            _ => return Err(e),
        }
    };
    let _ = r;
    // SAFETY: the kernel initialised `msg_namelen` bytes of `name` (at most its size).
    let destination = unsafe { socket2::SockAddr::new(name, msg.msg_namelen) }.as_socket();
    Ok(Some(destination.and_then(|d| parse_control(&msg, d))))
}

#[cfg(not(target_os = "linux"))]
fn recv_one(_socket: &SockRef<'_>) -> io::Result<Option<Option<IcmpError>>> {
    Ok(None)
}

/// The `IP_RECVERR` / `IPV6_RECVERR` control message of `msg`, if any.
#[cfg(target_os = "linux")]
fn parse_control(msg: &libc::msghdr, destination: SocketAddr) -> Option<IcmpError> {
    // SAFETY: `msg` was filled by recvmsg, so its control buffer holds
    // `msg_controllen` bytes of well-formed cmsgs; the CMSG macros stay
    // within it, and each sock_extended_err (with the offender address the
    // kernel places right after it) lies within its cmsg's data.
    unsafe {
        let mut cmsg = libc::CMSG_FIRSTHDR(msg);
        while !cmsg.is_null() {
            let c = &*cmsg;
            let ours = (c.cmsg_level == libc::IPPROTO_IP && c.cmsg_type == libc::IP_RECVERR)
                || (c.cmsg_level == libc::IPPROTO_IPV6 && c.cmsg_type == libc::IPV6_RECVERR);
            let min = libc::CMSG_LEN(std::mem::size_of::<libc::sock_extended_err>() as u32);
            if ours && c.cmsg_len as usize >= min as usize {
                let ee_ptr = libc::CMSG_DATA(cmsg).cast::<libc::sock_extended_err>();
                let ee = std::ptr::read_unaligned(ee_ptr);
                let origin = match ee.ee_origin {
                    libc::SO_EE_ORIGIN_ICMP => ErrorOrigin::Icmp,
                    libc::SO_EE_ORIGIN_ICMP6 => ErrorOrigin::Icmp6,
                    libc::SO_EE_ORIGIN_LOCAL => ErrorOrigin::Local,
                    o => ErrorOrigin::Other(o),
                };
                let offender = if matches!(origin, ErrorOrigin::Icmp | ErrorOrigin::Icmp6) {
                    offender_of(ee_ptr, c.cmsg_len as usize - (min as usize))
                } else {
                    None
                };
                return Some(IcmpError {
                    destination,
                    errno: ee.ee_errno as i32,
                    origin,
                    icmp_type: ee.ee_type,
                    icmp_code: ee.ee_code,
                    offender,
                });
            }
            cmsg = libc::CMSG_NXTHDR(msg, cmsg);
        }
    }
    None
}

/// The offender address after `ee` (`SO_EE_OFFENDER`), if `room` bytes hold it.
///
/// # Safety
/// `ee` points to a sock_extended_err followed by `room` readable bytes.
#[cfg(target_os = "linux")]
unsafe fn offender_of(ee: *const libc::sock_extended_err, room: usize) -> Option<IpAddr> {
    // SAFETY: per this function's contract the bytes after `ee` are readable
    // up to `room`; each read below checks the size it needs first.
    unsafe {
        let sa = libc::SO_EE_OFFENDER(ee).cast_const();
        if room < std::mem::size_of::<libc::sa_family_t>() {
            return None;
        }
        let family = std::ptr::read_unaligned(sa.cast::<libc::sa_family_t>());
        match libc::c_int::from(family) {
            libc::AF_INET if room >= std::mem::size_of::<libc::sockaddr_in>() => {
                let a = std::ptr::read_unaligned(sa.cast::<libc::sockaddr_in>());
                Some(IpAddr::from(u32::from_be(a.sin_addr.s_addr).to_be_bytes()))
            }
            libc::AF_INET6 if room >= std::mem::size_of::<libc::sockaddr_in6>() => {
                let a = std::ptr::read_unaligned(sa.cast::<libc::sockaddr_in6>());
                Some(IpAddr::from(a.sin6_addr.s6_addr))
            }
            _ => None,
        }
    }
}

#[cfg(all(test, target_os = "linux"))]
mod tests {
    use super::*;
    use std::net::UdpSocket;
    use std::time::{Duration, Instant};

    /// Reads the queue until `want` errors arrived or 2 s passed.
    fn wait_errors(sock: &UdpSocket, want: usize) -> Vec<IcmpError> {
        let mut out = Vec::new();
        let deadline = Instant::now() + Duration::from_secs(2);
        while out.len() < want && Instant::now() < deadline {
            recv_errors(sock, &mut out, 16).unwrap();
            std::thread::sleep(Duration::from_millis(5));
        }
        out
    }

    fn closed_port(ip: &str) -> SocketAddr {
        let s = UdpSocket::bind((ip, 0)).unwrap();
        s.local_addr().unwrap()
    }

    #[test]
    fn port_unreachable_on_loopback_names_the_destination() {
        let sock = UdpSocket::bind("127.0.0.1:0").unwrap();
        assert!(enable_recv_errors(&sock).unwrap());
        let mut none = Vec::new();
        assert_eq!(recv_errors(&sock, &mut none, 4).unwrap(), 0);
        let closed = closed_port("127.0.0.1");
        sock.send_to(b"anyone there?", closed).unwrap();
        let errs = wait_errors(&sock, 1);
        assert_eq!(errs.len(), 1, "no error queued");
        let e = errs[0];
        assert_eq!(e.destination, closed);
        assert_eq!(e.errno, libc::ECONNREFUSED);
        assert_eq!(e.origin, ErrorOrigin::Icmp);
        assert_eq!((e.icmp_type, e.icmp_code), (3, 3));
        assert!(e.is_unreachable() && e.is_port_unreachable());
        assert_eq!(e.offender, Some(IpAddr::from([127, 0, 0, 1])));
        assert!(e.offender_is_destination());
        // The error is also reported once to the next ordinary call, which
        // `is_deferred_error` recognises; the queue itself is now empty.
        let mut rest = Vec::new();
        assert_eq!(recv_errors(&sock, &mut rest, 4).unwrap(), 0);
    }

    #[test]
    fn port_unreachable_names_the_destination_host_as_offender() {
        let sock = UdpSocket::bind("127.0.0.1:0").unwrap();
        assert!(enable_recv_errors(&sock).unwrap());
        let closed = closed_port("127.0.0.2");
        sock.send_to(b"anyone there?", closed).unwrap();
        let errs = wait_errors(&sock, 1);
        assert_eq!(errs.len(), 1, "no error queued");
        assert_eq!(errs[0].offender, Some(IpAddr::from([127, 0, 0, 2])));
        assert!(errs[0].is_port_unreachable() && errs[0].offender_is_destination());
        let forged = IcmpError {
            offender: Some(IpAddr::from([127, 0, 0, 66])),
            ..errs[0]
        };
        assert!(!forged.offender_is_destination());
    }

    #[test]
    fn a_socket_without_recverr_queues_nothing() {
        let sock = UdpSocket::bind("127.0.0.1:0").unwrap();
        sock.send_to(b"x", closed_port("127.0.0.1")).unwrap();
        std::thread::sleep(Duration::from_millis(50));
        let mut out = Vec::new();
        assert_eq!(recv_errors(&sock, &mut out, 4).unwrap(), 0);
    }

    #[test]
    fn dual_stack_socket_reports_ipv6_and_v4_mapped_destinations() {
        let Ok(sock) = UdpSocket::bind("[::]:0") else {
            return; // no IPv6 on this host
        };
        assert!(enable_recv_errors(&sock).unwrap());
        if let Ok(s6) = UdpSocket::bind("[::1]:0") {
            let closed6 = s6.local_addr().unwrap();
            drop(s6);
            sock.send_to(b"x", closed6).unwrap();
            let errs = wait_errors(&sock, 1);
            assert_eq!(errs.len(), 1);
            assert_eq!(errs[0].destination, closed6);
            assert_eq!(errs[0].origin, ErrorOrigin::Icmp6);
            assert!(errs[0].is_unreachable());
        }
        let closed4 = closed_port("127.0.0.1");
        let mapped = SocketAddr::from((
            std::net::Ipv4Addr::LOCALHOST.to_ipv6_mapped(),
            closed4.port(),
        ));
        sock.send_to(b"x", mapped).unwrap();
        let errs = wait_errors(&sock, 1);
        assert_eq!(errs.len(), 1);
        assert_eq!(errs[0].destination, mapped);
        assert!(errs[0].is_unreachable());
    }

    #[test]
    fn a_pending_error_fails_the_next_send_once() {
        let sock = UdpSocket::bind("127.0.0.1:0").unwrap();
        enable_recv_errors(&sock).unwrap();
        let rx = UdpSocket::bind("127.0.0.1:0").unwrap();
        rx.set_read_timeout(Some(Duration::from_secs(2))).unwrap();
        let open = rx.local_addr().unwrap();
        sock.send_to(b"a", closed_port("127.0.0.1")).unwrap();
        std::thread::sleep(Duration::from_millis(20));
        let e = sock.send_to(b"b", open).unwrap_err();
        assert!(is_deferred_error(&e), "{e}");
        sock.send_to(b"b", open).unwrap();
        let mut buf = [0u8; 4];
        let (n, _) = rx.recv_from(&mut buf).unwrap();
        assert_eq!(&buf[..n], b"b");
    }

    #[test]
    fn deferred_errors_are_told_apart() {
        let refused = io::Error::from_raw_os_error(libc::ECONNREFUSED);
        assert!(is_deferred_error(&refused));
        assert!(!is_deferred_error(&io::Error::from_raw_os_error(
            libc::ENOBUFS
        )));
    }
}
