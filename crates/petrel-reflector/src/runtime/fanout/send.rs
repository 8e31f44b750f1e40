//! Sending one datagram to many targets. On Linux, targets go out in batches
//! through `sendmmsg(2)` (one syscall per batch, one shared iovec); elsewhere
//! one `send_to` per target.

use std::io;
use std::net::{SocketAddr, UdpSocket};

/// What one call sent and why the rest failed.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct SendReport {
    /// Datagrams attempted (targets minus the excluded sender).
    pub attempted: u64,
    /// Datagrams the kernel accepted.
    pub sent: u64,
    /// Datagrams that failed.
    pub errors: u64,
    /// Failures with ENOBUFS.
    pub enobufs: u64,
    /// Failures with EAGAIN.
    pub would_block: u64,
    /// Failures with EMSGSIZE.
    pub message_too_large: u64,
}

impl SendReport {
    fn record_error(&mut self, e: &io::Error) {
        self.errors += 1;
        match e.raw_os_error() {
            Some(libc::ENOBUFS) => self.enobufs += 1,
            Some(libc::EMSGSIZE) => self.message_too_large += 1,
            _ if e.kind() == io::ErrorKind::WouldBlock => self.would_block += 1,
            _ => {}
        }
    }
}

/// Buffers reused by [`send_to_many`] so that steady-state sends do not
/// allocate. Holds raw pointers while a call runs, so it stays on one thread.
pub struct SendScratch {
    targets: Vec<SocketAddr>,
    #[cfg(target_os = "linux")]
    addrs: Vec<socket2::SockAddr>,
    #[cfg(target_os = "linux")]
    msgs: Vec<libc::mmsghdr>,
}

impl std::fmt::Debug for SendScratch {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SendScratch")
            .field("capacity", &self.targets.capacity())
            .finish_non_exhaustive()
    }
}

impl SendScratch {
    /// Scratch sized for `batch` datagrams per call.
    pub fn new(batch: usize) -> Self {
        Self {
            targets: Vec::with_capacity(batch),
            #[cfg(target_os = "linux")]
            addrs: Vec::with_capacity(batch),
            #[cfg(target_os = "linux")]
            msgs: Vec::with_capacity(batch),
        }
    }
}

/// Sends `payload` to every target except `exclude`, `batch` per syscall.
pub fn send_to_many(
    sock: &UdpSocket,
    payload: &[u8],
    targets: &[SocketAddr],
    exclude: SocketAddr,
    batch: usize,
    scratch: &mut SendScratch,
) -> SendReport {
    let mut report = SendReport::default();
    for chunk in targets.chunks(batch.max(1)) {
        scratch.targets.clear();
        scratch
            .targets
            .extend(chunk.iter().copied().filter(|a| *a != exclude));
        report.attempted += scratch.targets.len() as u64;
        imp::send_batch(sock, payload, scratch, &mut report);
    }
    report
}

#[cfg(target_os = "linux")]
mod imp {
    use std::io;
    use std::net::UdpSocket;
    use std::os::fd::AsRawFd;

    use socket2::SockAddr;

    use super::{SendReport, SendScratch};

    pub(super) fn send_batch(
        sock: &UdpSocket,
        payload: &[u8],
        scratch: &mut SendScratch,
        report: &mut SendReport,
    ) {
        if scratch.targets.is_empty() {
            return;
        }
        let SendScratch {
            targets,
            addrs,
            msgs,
        } = scratch;
        addrs.clear();
        addrs.extend(targets.iter().map(|a| SockAddr::from(*a)));
        // The kernel only reads through iov_base; the cast to *mut is what the
        // C struct requires.
        let mut iov = libc::iovec {
            iov_base: payload.as_ptr() as *mut libc::c_void,
            iov_len: payload.len(),
        };
        msgs.clear();
        msgs.extend(addrs.iter().map(|a| {
            // SAFETY: mmsghdr is a plain C struct of integers and pointers,
            // for which all-zero is a valid value.
            let mut m: libc::mmsghdr = unsafe { std::mem::zeroed() };
            m.msg_hdr.msg_name = a.as_ptr() as *mut libc::c_void;
            m.msg_hdr.msg_namelen = a.len();
            m.msg_hdr.msg_iov = &mut iov;
            m.msg_hdr.msg_iovlen = 1;
            m
        }));
        let fd = sock.as_raw_fd();
        let mut off = 0;
        while off < msgs.len() {
            let rest = &mut msgs[off..];
            let n = rest.len().min(libc::c_uint::MAX as usize) as libc::c_uint;
            // SAFETY: `rest` points at `n` initialised mmsghdr entries whose
            // name and iovec pointers borrow `addrs`, `iov` and `payload`,
            // all alive for the duration of the call; `fd` is an open socket
            // owned by `sock`.
            let r = unsafe { libc::sendmmsg(fd, rest.as_mut_ptr(), n, 0) };
            if r < 0 {
                let e = io::Error::last_os_error();
                if e.kind() == io::ErrorKind::Interrupted {
                    continue;
                }
                // The first message of the batch failed: count it, skip it.
                report.record_error(&e);
                off += 1;
            } else {
                report.sent += r as u64;
                off += r as usize;
            }
        }
        // Drop the pointers into `iov` before it goes out of scope.
        msgs.clear();
    }
}

#[cfg(not(target_os = "linux"))]
mod imp {
    use std::net::UdpSocket;

    use super::{SendReport, SendScratch};

    pub(super) fn send_batch(
        sock: &UdpSocket,
        payload: &[u8],
        scratch: &mut SendScratch,
        report: &mut SendReport,
    ) {
        for t in &scratch.targets {
            match sock.send_to(payload, t) {
                Ok(_) => report.sent += 1,
                Err(e) => report.record_error(&e),
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;

    #[test]
    fn batches_reach_every_target_but_the_excluded_one() {
        let tx = UdpSocket::bind("127.0.0.1:0").unwrap();
        let rxs: Vec<UdpSocket> = (0..10)
            .map(|_| UdpSocket::bind("127.0.0.1:0").unwrap())
            .collect();
        let targets: Vec<SocketAddr> = rxs.iter().map(|s| s.local_addr().unwrap()).collect();
        let mut scratch = SendScratch::new(8);
        let r = send_to_many(&tx, b"hello", &targets, targets[3], 4, &mut scratch);
        assert_eq!((r.attempted, r.sent, r.errors), (9, 9, 0));
        for (i, s) in rxs.iter().enumerate() {
            s.set_read_timeout(Some(Duration::from_millis(if i == 3 { 50 } else { 2000 })))
                .unwrap();
            let mut buf = [0u8; 16];
            let got = s.recv_from(&mut buf);
            if i == 3 {
                assert!(got.is_err());
            } else {
                assert_eq!(&buf[..got.unwrap().0], b"hello");
            }
        }
    }

    #[test]
    fn oversized_datagram_is_counted_not_fatal() {
        let tx = UdpSocket::bind("127.0.0.1:0").unwrap();
        let rx = UdpSocket::bind("127.0.0.1:0").unwrap();
        let big = vec![0u8; 70_000];
        let mut scratch = SendScratch::new(8);
        let r = send_to_many(
            &tx,
            &big,
            &[rx.local_addr().unwrap()],
            "0.0.0.0:0".parse().unwrap(),
            8,
            &mut scratch,
        );
        assert_eq!((r.sent, r.errors, r.message_too_large), (0, 1, 1));
    }
}
