//! Steering inside an `SO_REUSEPORT` group: which socket of the group a datagram
//! is delivered to, chosen by its first payload byte instead of the kernel's
//! 4-tuple hash.
//!
//! Linux spreads a group's datagrams by a hash of the 4-tuple, so a server with a
//! few busy peers gets them spread at random: with 4 peers and 2 sockets, one
//! socket serves all 4 in one case of 8 and 3 of them in half the cases. A
//! protocol whose datagrams begin with a connection id the server chose (KCP's
//! `conv`, little-endian, low byte first) can do better: the server picks the id
//! so that its first byte names the socket it wants, and a classic BPF program
//! attached to the group (`SO_ATTACH_REUSEPORT_CBPF`, `socket(7)`, Linux ≥ 4.5)
//! delivers by that byte. The program is three instructions:
//!
//! ```text
//!   ldb [0]           A = first byte of the UDP payload (the kernel runs the
//!                         program with the UDP header pulled off)
//!   mod #group_size   A = A % group_size
//!   ret A             the index of the socket, in the order the group was bound
//! ```
//!
//! A datagram with no payload stops the program at its load, which returns 0:
//! socket 0 gets it. Any byte value lands on some socket of the group, so a
//! sender choosing its first byte chooses only which of our sockets reads it, as
//! choosing its source port already does under the hash.

use std::io;

/// The socket of a group of `group_size` that [`steer_by_first_byte`] delivers a
/// datagram starting with `first` to. `group_size` 0 counts as 1.
pub fn steered_socket(first: u8, group_size: usize) -> usize {
    usize::from(first) % group_size.max(1)
}

/// Attaches the first-byte program (module docs) to the `SO_REUSEPORT` group of
/// `socket`, a bound member of it: from now on a datagram to the group goes to
/// socket [`steered_socket`]`(payload[0], group_size)`, counting sockets in the
/// order they were bound.
///
/// # Errors
/// `group_size` is 0 or above 256 (`InvalidInput`; a byte names at most 256
/// sockets); `setsockopt` failed; `Unsupported` off Linux.
#[cfg(target_os = "linux")]
pub fn steer_by_first_byte<'s, S>(socket: &'s S, group_size: usize) -> io::Result<()>
where
    socket2::SockRef<'s>: From<&'s S>,
{
    use std::os::fd::AsRawFd;

    let modulus = u32::try_from(group_size)
        .ok()
        .filter(|n| (1..=256).contains(n))
        .ok_or_else(|| {
            io::Error::new(
                io::ErrorKind::InvalidInput,
                format!(
                    "a reuseport group steered by one byte has 1 to 256 sockets, not {group_size}"
                ),
            )
        })?;
    let op = |code: u32, k: u32| libc::sock_filter {
        code: code as u16,
        jt: 0,
        jf: 0,
        k,
    };
    let mut program = [
        op(libc::BPF_LD | libc::BPF_B | libc::BPF_ABS, 0),
        op(libc::BPF_ALU | libc::BPF_MOD | libc::BPF_K, modulus),
        op(libc::BPF_RET | libc::BPF_A, 0),
    ];
    let fprog = libc::sock_fprog {
        len: program.len() as u16,
        filter: program.as_mut_ptr(),
    };
    let socket = socket2::SockRef::from(socket);
    // SAFETY: `fprog` points at `program`, which outlives the call; the kernel
    // copies the program and checks it before attaching it, and reads exactly
    // `size_of::<sock_fprog>()` bytes of the option value.
    let rc = unsafe {
        libc::setsockopt(
            socket.as_raw_fd(),
            libc::SOL_SOCKET,
            libc::SO_ATTACH_REUSEPORT_CBPF,
            std::ptr::from_ref(&fprog).cast(),
            std::mem::size_of::<libc::sock_fprog>() as libc::socklen_t,
        )
    };
    if rc == 0 {
        Ok(())
    } else {
        Err(io::Error::last_os_error())
    }
}

/// Off Linux there is no reuseport program: always `Unsupported`.
///
/// # Errors
/// Always.
#[cfg(not(target_os = "linux"))]
pub fn steer_by_first_byte<'s, S>(_socket: &'s S, _group_size: usize) -> io::Result<()>
where
    socket2::SockRef<'s>: From<&'s S>,
{
    Err(io::Error::new(
        io::ErrorKind::Unsupported,
        "reuseport steering needs Linux (SO_ATTACH_REUSEPORT_CBPF)",
    ))
}

#[cfg(all(test, target_os = "linux"))]
mod tests {
    use std::net::UdpSocket;
    use std::time::Duration;

    use super::*;
    use crate::socket::{bind_udp, UdpOptions};

    fn group(size: usize) -> Vec<UdpSocket> {
        let mut options = UdpOptions {
            reuse_port: true,
            ..UdpOptions::new("127.0.0.1:0".parse().unwrap())
        };
        let mut sockets = Vec::new();
        for _ in 0..size {
            let (socket, _) = bind_udp(&options).unwrap();
            options.bind = socket.local_addr().unwrap();
            socket
                .set_read_timeout(Some(Duration::from_millis(20)))
                .unwrap();
            sockets.push(socket);
        }
        sockets
    }

    /// Which sockets of `group` hold a datagram, draining them.
    fn holders(group: &[UdpSocket]) -> Vec<(usize, Vec<u8>)> {
        let mut found = Vec::new();
        let mut buf = [0u8; 64];
        for (i, socket) in group.iter().enumerate() {
            while let Ok(n) = socket.recv(&mut buf) {
                found.push((i, buf[..n].to_vec()));
            }
        }
        found
    }

    #[test]
    fn one_peer_reaches_every_socket_by_its_first_byte() {
        // Without the program, one 4-tuple always hashes to the same socket; with
        // it, the first byte alone decides.
        let sockets = group(3);
        steer_by_first_byte(&sockets[0], 3).unwrap();
        let peer = UdpSocket::bind("127.0.0.1:0").unwrap();
        let to = sockets[0].local_addr().unwrap();
        for first in [0u8, 1, 2, 3, 4, 5, 200, 255] {
            peer.send_to(&[first, 9, 9], to).unwrap();
            let got = holders(&sockets);
            assert_eq!(got, [(steered_socket(first, 3), vec![first, 9, 9])]);
        }
        peer.send_to(&[], to).unwrap();
        assert_eq!(holders(&sockets), [(0, vec![])], "empty: socket 0");
    }

    #[test]
    fn group_sizes_a_byte_cannot_name_are_refused() {
        let sockets = group(2);
        for size in [0, 257] {
            let err = steer_by_first_byte(&sockets[0], size).unwrap_err();
            assert_eq!(err.kind(), io::ErrorKind::InvalidInput, "{size}");
        }
    }
}
