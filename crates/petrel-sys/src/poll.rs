//! Readiness waits with nanosecond timeouts: a level-triggered `epoll(7)` set
//! waited on through `ppoll(2)` (Linux only).
//!
//! `epoll_wait`'s timeout is in whole milliseconds, too coarse for a relay that
//! releases packets at sub-millisecond deadlines; `ppoll` on the epoll descriptor
//! waits with a `timespec`, and the events are then read with a zero-timeout
//! `epoll_wait`.

use std::io;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};
use std::time::Duration;

fn cvt(ret: libc::c_int) -> io::Result<libc::c_int> {
    if ret < 0 {
        Err(io::Error::last_os_error())
    } else {
        Ok(ret)
    }
}

/// A level-triggered epoll set watching for readability; tokens are caller-chosen
/// `u64`s.
#[derive(Debug)]
pub struct Epoll {
    fd: OwnedFd,
    events: Vec<libc::epoll_event>,
}

impl Epoll {
    /// A new set reporting up to `max_events` (at least 1) ready tokens per wait.
    ///
    /// # Errors
    /// `epoll_create1` failed (descriptor limit).
    pub fn new(max_events: usize) -> io::Result<Self> {
        // SAFETY: no pointers; the returned descriptor is checked and then owned.
        let fd = cvt(unsafe { libc::epoll_create1(libc::EPOLL_CLOEXEC) })?;
        // SAFETY: `fd` is a fresh descriptor that nothing else owns.
        let fd = unsafe { OwnedFd::from_raw_fd(fd) };
        Ok(Self {
            fd,
            events: vec![libc::epoll_event { events: 0, u64: 0 }; max_events.max(1)],
        })
    }

    /// Watches `fd` for readability, reported as `token`.
    ///
    /// # Errors
    /// `epoll_ctl` failed (bad or already-added descriptor).
    pub fn add(&self, fd: RawFd, token: u64) -> io::Result<()> {
        let mut ev = libc::epoll_event {
            events: libc::EPOLLIN as u32,
            u64: token,
        };
        // SAFETY: `ev` is a valid epoll_event for the duration of the call.
        cvt(unsafe { libc::epoll_ctl(self.fd.as_raw_fd(), libc::EPOLL_CTL_ADD, fd, &mut ev) })?;
        Ok(())
    }

    /// Waits up to `timeout` (`None`: until an event) and replaces `ready` with the
    /// ready tokens (empty on timeout or a signal).
    ///
    /// # Errors
    /// `ppoll` or `epoll_wait` failed for another reason than a signal.
    pub fn wait(&mut self, timeout: Option<Duration>, ready: &mut Vec<u64>) -> io::Result<()> {
        ready.clear();
        let mut pfd = libc::pollfd {
            fd: self.fd.as_raw_fd(),
            events: libc::POLLIN,
            revents: 0,
        };
        let ts = timeout.map(|d| libc::timespec {
            tv_sec: d.as_secs().min(i64::MAX as u64) as libc::time_t,
            tv_nsec: libc::c_long::from(d.subsec_nanos()),
        });
        let ts_ptr = ts.as_ref().map_or(std::ptr::null(), |t| t as *const _);
        // SAFETY: one valid pollfd; `ts_ptr` is null or points to `ts`, alive here.
        let polled = unsafe { libc::ppoll(&mut pfd, 1, ts_ptr, std::ptr::null()) };
        if polled < 0 {
            let e = io::Error::last_os_error();
            return if e.kind() == io::ErrorKind::Interrupted {
                Ok(())
            } else {
                Err(e)
            };
        }
        if polled == 0 {
            return Ok(());
        }
        // SAFETY: `events` has `len` initialised entries the kernel may overwrite.
        let n = unsafe {
            libc::epoll_wait(
                self.fd.as_raw_fd(),
                self.events.as_mut_ptr(),
                self.events.len() as libc::c_int,
                0,
            )
        };
        match cvt(n) {
            Ok(n) => {
                ready.extend(self.events[..n as usize].iter().map(|e| e.u64));
                Ok(())
            }
            Err(e) if e.kind() == io::ErrorKind::Interrupted => Ok(()),
            Err(e) => Err(e),
        }
    }
}

#[cfg(test)]
mod tests {
    use std::net::UdpSocket;
    use std::time::Instant;

    use super::*;

    #[test]
    fn reports_the_ready_socket_and_times_out_finely() {
        let a = UdpSocket::bind("127.0.0.1:0").unwrap();
        let b = UdpSocket::bind("127.0.0.1:0").unwrap();
        let mut ep = Epoll::new(4).unwrap();
        ep.add(a.as_raw_fd(), 1).unwrap();
        ep.add(b.as_raw_fd(), 2).unwrap();
        let mut ready = Vec::new();
        let t = Instant::now();
        ep.wait(Some(Duration::from_micros(300)), &mut ready)
            .unwrap();
        assert!(ready.is_empty());
        assert!(t.elapsed() < Duration::from_millis(500));
        a.send_to(b"x", b.local_addr().unwrap()).unwrap();
        ep.wait(Some(Duration::from_secs(2)), &mut ready).unwrap();
        assert_eq!(ready, vec![2]);
    }
}
