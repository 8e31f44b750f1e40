//! The only unsafe code of the crate: thin, safe wrappers over Linux `epoll`, `ppoll`,
//! `recvmmsg`, `sendmmsg` and `prctl(PR_SET_TIMERSLACK)`.
//!
//! `ppoll` on the epoll descriptor gives a nanosecond-resolution wait (epoll_wait's
//! timeout is in whole ms); the events are then read with a zero-timeout `epoll_wait`.

use std::io;
use std::mem;
use std::net::SocketAddr;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};
use std::time::Duration;

use socket2::SockAddr;

/// Largest UDP payload read (IPv6 jumbograms aside, no datagram is larger).
pub(crate) const MAX_DATAGRAM: usize = 65_535;

fn cvt(ret: libc::c_int) -> io::Result<libc::c_int> {
    if ret < 0 {
        Err(io::Error::last_os_error())
    } else {
        Ok(ret)
    }
}

/// Asks the kernel to wake this thread within 1 ns of its timers instead of the
/// default 50 µs slack. Best effort: failure only costs accuracy.
pub(crate) fn tighten_timer_slack() {
    // SAFETY: PR_SET_TIMERSLACK takes one integer argument and touches no memory.
    unsafe {
        libc::prctl(libc::PR_SET_TIMERSLACK, 1 as libc::c_ulong);
    }
}

/// User + system CPU time of this whole process so far.
pub(crate) fn process_cpu_time() -> Duration {
    cpu_time(libc::RUSAGE_SELF)
}

/// User + system CPU time of the calling thread so far.
pub(crate) fn thread_cpu_time() -> Duration {
    cpu_time(libc::RUSAGE_THREAD)
}

fn cpu_time(who: libc::c_int) -> Duration {
    // SAFETY: all-zero bytes are a valid rusage, which getrusage then fills.
    let mut ru: libc::rusage = unsafe { mem::zeroed() };
    // SAFETY: `ru` is a valid, writable rusage for the call.
    if unsafe { libc::getrusage(who, &mut ru) } != 0 {
        return Duration::ZERO;
    }
    let tv = |t: libc::timeval| {
        Duration::from_secs(t.tv_sec.max(0) as u64) + Duration::from_micros(t.tv_usec.max(0) as u64)
    };
    tv(ru.ru_utime) + tv(ru.ru_stime)
}

/// A level-triggered epoll instance; tokens are caller-chosen `u64`s.
#[derive(Debug)]
pub(crate) struct Epoll {
    fd: OwnedFd,
    events: Vec<libc::epoll_event>,
}

impl Epoll {
    pub(crate) fn new(max_events: usize) -> io::Result<Self> {
        // SAFETY: no pointers; the returned descriptor is checked and then owned.
        let fd = cvt(unsafe { libc::epoll_create1(libc::EPOLL_CLOEXEC) })?;
        // SAFETY: `fd` is a fresh descriptor that nothing else owns.
        let fd = unsafe { OwnedFd::from_raw_fd(fd) };
        Ok(Self {
            fd,
            events: vec![libc::epoll_event { events: 0, u64: 0 }; max_events.max(1)],
        })
    }

    pub(crate) fn add(&self, fd: RawFd, token: u64) -> io::Result<()> {
        let mut ev = libc::epoll_event {
            events: libc::EPOLLIN as u32,
            u64: token,
        };
        // SAFETY: `ev` is a valid epoll_event for the duration of the call.
        cvt(unsafe { libc::epoll_ctl(self.fd.as_raw_fd(), libc::EPOLL_CTL_ADD, fd, &mut ev) })?;
        Ok(())
    }

    /// Waits up to `timeout` (`None`: until an event) and replaces `ready` with the
    /// ready tokens.
    pub(crate) fn wait(
        &mut self,
        timeout: Option<Duration>,
        ready: &mut Vec<u64>,
    ) -> io::Result<()> {
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

/// Buffers for one `recvmmsg` call of up to `batch` datagrams.
pub(crate) struct RecvBatch {
    bufs: Vec<Box<[u8]>>,
    addrs: Vec<libc::sockaddr_storage>,
    hdrs: Vec<libc::mmsghdr>,
    iovs: Vec<libc::iovec>,
    filled: usize,
}

// SAFETY: the raw pointers inside the headers only ever point into buffers this
// struct owns (or, for sending, into data borrowed for one call), are rewritten
// before every system call and never dereferenced by Rust code, so moving the
// struct to another thread cannot create shared mutable access.
unsafe impl Send for RecvBatch {}
// SAFETY: as for `RecvBatch`.
unsafe impl Send for SendBatch {}

impl std::fmt::Debug for RecvBatch {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RecvBatch")
            .field("batch", &self.bufs.len())
            .field("filled", &self.filled)
            .finish()
    }
}

/// One datagram of a [`RecvBatch`].
pub(crate) struct Received<'a> {
    pub(crate) source: Option<SocketAddr>,
    pub(crate) data: &'a [u8],
    pub(crate) truncated: bool,
}

impl RecvBatch {
    pub(crate) fn new(batch: usize) -> Self {
        let batch = batch.max(1);
        // SAFETY: sockaddr_storage, mmsghdr and iovec are plain C structs for which
        // all-zero bytes are a valid value.
        let (addr, hdr, iov) = unsafe {
            (
                mem::zeroed::<libc::sockaddr_storage>(),
                mem::zeroed::<libc::mmsghdr>(),
                mem::zeroed::<libc::iovec>(),
            )
        };
        Self {
            bufs: (0..batch)
                .map(|_| vec![0u8; MAX_DATAGRAM].into_boxed_slice())
                .collect(),
            addrs: vec![addr; batch],
            hdrs: vec![hdr; batch],
            iovs: vec![iov; batch],
            filled: 0,
        }
    }

    /// Reads up to `batch` datagrams without blocking; `Ok(0)` when none is waiting.
    pub(crate) fn recv(&mut self, fd: RawFd) -> io::Result<usize> {
        self.filled = 0;
        for i in 0..self.bufs.len() {
            self.iovs[i] = libc::iovec {
                iov_base: self.bufs[i].as_mut_ptr().cast(),
                iov_len: self.bufs[i].len(),
            };
            let hdr = &mut self.hdrs[i];
            hdr.msg_hdr.msg_name = (&mut self.addrs[i] as *mut libc::sockaddr_storage).cast();
            hdr.msg_hdr.msg_namelen = mem::size_of::<libc::sockaddr_storage>() as u32;
            hdr.msg_hdr.msg_iov = &mut self.iovs[i];
            hdr.msg_hdr.msg_iovlen = 1;
            hdr.msg_hdr.msg_control = std::ptr::null_mut();
            hdr.msg_hdr.msg_controllen = 0;
            hdr.msg_hdr.msg_flags = 0;
            hdr.msg_len = 0;
        }
        // SAFETY: every header points to its own iovec, buffer and address storage,
        // all owned by `self` and not moved during the call; lengths match.
        let n = unsafe {
            libc::recvmmsg(
                fd,
                self.hdrs.as_mut_ptr(),
                self.hdrs.len() as u32,
                libc::MSG_DONTWAIT,
                std::ptr::null_mut(),
            )
        };
        match cvt(n) {
            Ok(n) => {
                self.filled = n as usize;
                Ok(self.filled)
            }
            Err(e) if e.kind() == io::ErrorKind::WouldBlock => Ok(0),
            Err(e) => Err(e),
        }
    }

    /// The `i`-th datagram of the last [`RecvBatch::recv`].
    pub(crate) fn get(&self, i: usize) -> Option<Received<'_>> {
        if i >= self.filled {
            return None;
        }
        let hdr = &self.hdrs[i];
        let len = (hdr.msg_len as usize).min(self.bufs[i].len());
        // SAFETY: the kernel initialised `msg_namelen` bytes of this storage.
        let addr = unsafe { SockAddr::new(self.addrs[i], hdr.msg_hdr.msg_namelen) };
        Some(Received {
            source: addr.as_socket(),
            data: &self.bufs[i][..len],
            truncated: hdr.msg_hdr.msg_flags & libc::MSG_TRUNC != 0,
        })
    }
}

/// Scratch headers for `sendmmsg` of up to `batch` datagrams.
pub(crate) struct SendBatch {
    hdrs: Vec<libc::mmsghdr>,
    iovs: Vec<libc::iovec>,
}

impl std::fmt::Debug for SendBatch {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SendBatch")
            .field("batch", &self.hdrs.len())
            .finish()
    }
}

impl SendBatch {
    pub(crate) fn new(batch: usize) -> Self {
        let batch = batch.max(1);
        // SAFETY: all-zero bytes are a valid mmsghdr and iovec.
        let (hdr, iov) = unsafe { (mem::zeroed::<libc::mmsghdr>(), mem::zeroed::<libc::iovec>()) };
        Self {
            hdrs: vec![hdr; batch],
            iovs: vec![iov; batch],
        }
    }

    /// Sends the first `min(batch, packets.len())` datagrams without blocking, all to
    /// `dest` (`None` on a connected socket). Returns how many the kernel took; an
    /// error means the first unsent datagram failed.
    pub(crate) fn send(
        &mut self,
        fd: RawFd,
        packets: &[Vec<u8>],
        dest: Option<&SockAddr>,
    ) -> io::Result<usize> {
        let n = packets.len().min(self.hdrs.len());
        if n == 0 {
            return Ok(0);
        }
        let (name, namelen) = dest.map_or((std::ptr::null_mut(), 0), |a| {
            (a.as_ptr() as *mut libc::c_void, a.len())
        });
        for (i, data) in packets[..n].iter().enumerate() {
            self.iovs[i] = libc::iovec {
                // sendmmsg only reads through this pointer.
                iov_base: data.as_ptr() as *mut libc::c_void,
                iov_len: data.len(),
            };
            let hdr = &mut self.hdrs[i];
            hdr.msg_hdr.msg_name = name;
            hdr.msg_hdr.msg_namelen = namelen;
            hdr.msg_hdr.msg_iov = &mut self.iovs[i];
            hdr.msg_hdr.msg_iovlen = 1;
            hdr.msg_hdr.msg_control = std::ptr::null_mut();
            hdr.msg_hdr.msg_controllen = 0;
            hdr.msg_hdr.msg_flags = 0;
            hdr.msg_len = 0;
        }
        // SAFETY: the first `n` headers point to iovecs in `self` and to data borrowed
        // from `packets` and to `dest`, all alive and unmoved for the call.
        let sent =
            unsafe { libc::sendmmsg(fd, self.hdrs.as_mut_ptr(), n as u32, libc::MSG_DONTWAIT) };
        cvt(sent).map(|s| s as usize)
    }
}
