//! Batched send: `sendmmsg(2)` for many datagrams, `UDP_SEGMENT` (GSO) for one
//! payload split in segments, one `send_to` per datagram where neither exists.

use std::io;
use std::net::SocketAddr;

use socket2::{SockAddr, SockRef};

use super::{MAX_GSO_SEGMENTS, MAX_UDP_PAYLOAD};

/// One datagram to send: its payload and where to.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Transmit<'a> {
    /// Destination; `None` on a connected socket.
    pub destination: Option<SocketAddr>,
    /// The datagram's payload.
    pub payload: &'a [u8],
}

/// What [`SendBatch::send_to_each`] sent and why the rest failed.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct SendReport {
    /// Datagrams attempted (one per target).
    pub attempted: u64,
    /// Datagrams the kernel accepted.
    pub sent: u64,
    /// Datagrams that failed (each counted once, then skipped).
    pub errors: u64,
    /// Failures with `ENOBUFS`.
    pub enobufs: u64,
    /// Failures with `EAGAIN` (a full buffer on a non-blocking socket).
    pub would_block: u64,
    /// Failures with `EMSGSIZE`.
    pub message_too_large: u64,
    /// Sends that reported an earlier datagram's ICMP error
    /// ([`is_deferred_error`](crate::error_queue::is_deferred_error)); the
    /// target was tried once more and is counted by that try.
    pub deferred_errors: u64,
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

/// Reusable scratch for batched sends of up to `capacity` datagrams per system
/// call, and the socket's GSO state. Steady-state sends do not allocate.
///
/// Use one per socket (the GSO state is the socket's) and per thread.
pub struct SendBatch {
    capacity: usize,
    gso: bool,
    calls: u64,
    dests: Vec<Option<SockAddr>>,
    targets: Vec<SocketAddr>,
    #[cfg(target_os = "linux")]
    hdrs: Vec<libc::mmsghdr>,
    #[cfg(target_os = "linux")]
    iovs: Vec<libc::iovec>,
}

// SAFETY: `hdrs` and `iovs` hold raw pointers only while one method runs (they
// are cleared before it returns) and Rust code never dereferences them, so moving
// the struct to another thread cannot create shared mutable access.
unsafe impl Send for SendBatch {}

impl std::fmt::Debug for SendBatch {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SendBatch")
            .field("capacity", &self.capacity)
            .field("gso", &self.gso)
            .finish_non_exhaustive()
    }
}

impl SendBatch {
    /// Scratch for up to `capacity` datagrams per system call (at least 1).
    pub fn new(capacity: usize) -> Self {
        let capacity = capacity.max(1);
        Self {
            capacity,
            gso: cfg!(target_os = "linux"),
            calls: 0,
            dests: Vec::with_capacity(capacity),
            targets: Vec::new(),
            #[cfg(target_os = "linux")]
            hdrs: Vec::with_capacity(capacity),
            #[cfg(target_os = "linux")]
            iovs: Vec::with_capacity(capacity),
        }
    }

    /// Datagrams per system call.
    pub fn capacity(&self) -> usize {
        self.capacity
    }

    /// System calls this batch made that the kernel accepted (`sendmmsg`, GSO
    /// `sendmsg`, `sendto` for a single datagram, or one `send_to` per datagram
    /// where those are missing), since it
    /// was created: with the datagrams sent, the batching actually achieved.
    pub fn system_calls(&self) -> u64 {
        self.calls
    }

    /// Whether [`SendBatch::send_segments`] still uses GSO (false off Linux and
    /// after the kernel refused it once).
    pub fn gso_enabled(&self) -> bool {
        self.gso
    }

    /// Turns GSO for [`SendBatch::send_segments`] off, or back on where the platform
    /// has it (a kernel that refuses it turns it off again on the next send). For
    /// comparing both paths, and for paths whose MTU is below the segment size.
    pub fn set_gso(&mut self, enabled: bool) {
        self.gso = enabled && cfg!(target_os = "linux");
    }

    /// Sends `datagrams` in order, `capacity` per system call.
    ///
    /// # Errors
    /// The first datagram was refused (see the [module docs](super) on partial
    /// sends); `Ok(n)` with `n < datagrams.len()` when the kernel stopped later.
    pub fn send<'s, S>(&mut self, socket: &'s S, datagrams: &[Transmit<'_>]) -> io::Result<usize>
    where
        SockRef<'s>: From<&'s S>,
    {
        let socket = SockRef::from(socket);
        self.send_indexed(
            &socket,
            datagrams.len(),
            |i| datagrams[i].payload,
            |i| datagrams[i].destination,
        )
    }

    /// Sends every payload to `destination` (`None` on a connected socket), in
    /// order, `capacity` per system call.
    ///
    /// # Errors
    /// As [`SendBatch::send`].
    pub fn send_to<'s, S, P: AsRef<[u8]>>(
        &mut self,
        socket: &'s S,
        payloads: &[P],
        destination: Option<SocketAddr>,
    ) -> io::Result<usize>
    where
        SockRef<'s>: From<&'s S>,
    {
        let socket = SockRef::from(socket);
        self.send_indexed(
            &socket,
            payloads.len(),
            |i| payloads[i].as_ref(),
            |_| destination,
        )
    }

    /// Sends `payloads[i]` to `destinations[i]`, in order, `capacity` per system
    /// call: [`SendBatch::send`] for payloads kept in separate buffers. Only the
    /// first `min(payloads.len(), destinations.len())` are sent.
    ///
    /// # Errors
    /// As [`SendBatch::send`].
    pub fn send_slices<'s, S, P: AsRef<[u8]>>(
        &mut self,
        socket: &'s S,
        payloads: &[P],
        destinations: &[SocketAddr],
    ) -> io::Result<usize>
    where
        SockRef<'s>: From<&'s S>,
    {
        let socket = SockRef::from(socket);
        self.send_indexed(
            &socket,
            payloads.len().min(destinations.len()),
            |i| payloads[i].as_ref(),
            |i| Some(destinations[i]),
        )
    }

    /// Sends `payload` to every target, `capacity` per system call; a target the
    /// kernel refuses is counted by cause and skipped, so every target is tried once.
    pub fn send_to_each<'s, S>(
        &mut self,
        socket: &'s S,
        payload: &[u8],
        targets: impl IntoIterator<Item = SocketAddr>,
    ) -> SendReport
    where
        SockRef<'s>: From<&'s S>,
    {
        let socket = SockRef::from(socket);
        let mut targets_buf = std::mem::take(&mut self.targets);
        targets_buf.clear();
        targets_buf.extend(targets);
        let mut report = SendReport {
            attempted: targets_buf.len() as u64,
            ..SendReport::default()
        };
        let mut off = 0;
        // With `IP_RECVERR` an earlier datagram's ICMP error is reported by
        // whichever send comes next: the target it lands on is tried once more.
        let mut retried = None;
        while off < targets_buf.len() {
            let rest = &targets_buf[off..];
            match self.send_indexed(&socket, rest.len(), |_| payload, |i| Some(rest[i])) {
                // The kernel reports at least one datagram or an error; should it
                // ever report none, count the target as failed rather than retry
                // it forever.
                Ok(0) => {
                    report.errors += 1;
                    off += 1;
                }
                Ok(n) => {
                    report.sent += n as u64;
                    off += n;
                }
                Err(e) if retried != Some(off) && crate::error_queue::is_deferred_error(&e) => {
                    report.deferred_errors += 1;
                    retried = Some(off);
                }
                Err(e) => {
                    report.record_error(&e);
                    off += 1;
                }
            }
        }
        self.targets = targets_buf;
        report
    }

    /// Sends `payload` to `destination` (`None` on a connected socket) as
    /// `⌈len / segment_size⌉` datagrams of `segment_size` bytes (the last may be
    /// shorter): by GSO, at most [`MAX_GSO_SEGMENTS`] and [`MAX_UDP_PAYLOAD`]
    /// bytes per system call, where the kernel has it; else as a batch. Returns the
    /// segments sent; an empty payload sends nothing.
    ///
    /// A receiver sees separate datagrams either way, unless it enabled GRO
    /// ([`enable_gro`](super::enable_gro)).
    ///
    /// # Errors
    /// `InvalidInput` for a zero `segment_size`; otherwise as [`SendBatch::send`],
    /// counted in segments.
    pub fn send_segments<'s, S>(
        &mut self,
        socket: &'s S,
        destination: Option<SocketAddr>,
        payload: &[u8],
        segment_size: usize,
    ) -> io::Result<usize>
    where
        SockRef<'s>: From<&'s S>,
    {
        if segment_size == 0 {
            return Err(io::Error::new(
                io::ErrorKind::InvalidInput,
                "segment_size must be at least 1 byte",
            ));
        }
        let socket = SockRef::from(socket);
        let total = payload.len().div_ceil(segment_size);
        let segment = |i: usize| {
            let start = i * segment_size;
            &payload[start..payload.len().min(start + segment_size)]
        };
        #[cfg(target_os = "linux")]
        let (sent, done) = self.send_gso(&socket, destination, payload, segment_size, total)?;
        #[cfg(not(target_os = "linux"))]
        let (sent, done) = (0, total == 0);
        if done {
            return Ok(sent);
        }
        match self.send_indexed(
            &socket,
            total - sent,
            |i| segment(sent + i),
            |_| destination,
        ) {
            Ok(n) => Ok(sent + n),
            Err(_) if sent > 0 => Ok(sent),
            Err(e) => Err(e),
        }
    }

    /// Sends `segments` to `destination` (`None` on a connected socket), in order,
    /// as one train of datagrams: by GSO when every segment but the last has the
    /// length of the first and the last is not longer — one `sendmsg` per
    /// [`MAX_GSO_SEGMENTS`] segments ([`MAX_UDP_PAYLOAD`] bytes), gathered from
    /// the segments' own buffers with one iovec each, so nothing is copied —
    /// otherwise, or where GSO is off, `capacity` per `sendmmsg`. Returns the
    /// segments sent.
    ///
    /// # Errors
    /// As [`SendBatch::send`], counted in segments.
    pub fn send_train<'s, S, P: AsRef<[u8]>>(
        &mut self,
        socket: &'s S,
        destination: Option<SocketAddr>,
        segments: &[P],
    ) -> io::Result<usize>
    where
        SockRef<'s>: From<&'s S>,
    {
        let socket = SockRef::from(socket);
        #[cfg(target_os = "linux")]
        let sent = self.send_train_gso(&socket, destination, segments)?;
        #[cfg(not(target_os = "linux"))]
        let sent = 0;
        if sent == segments.len() {
            return Ok(sent);
        }
        match self.send_indexed(
            &socket,
            segments.len() - sent,
            |i| segments[sent + i].as_ref(),
            |_| destination,
        ) {
            Ok(n) => Ok(sent + n),
            Err(_) if sent > 0 => Ok(sent),
            Err(e) => Err(e),
        }
    }

    /// The GSO part of [`SendBatch::send_train`]: the segments sent by GSO before
    /// it finished, stopped (the next call reports why) or was found unusable
    /// (uneven sizes, GSO off or refused: the caller sends the rest as a batch).
    #[cfg(target_os = "linux")]
    fn send_train_gso<P: AsRef<[u8]>>(
        &mut self,
        socket: &socket2::Socket,
        destination: Option<SocketAddr>,
        segments: &[P],
    ) -> io::Result<usize> {
        let Some(first) = segments.first() else {
            return Ok(0);
        };
        let size = first.as_ref().len();
        let even = segments.iter().enumerate().all(|(i, s)| {
            s.as_ref().len() == size || (i + 1 == segments.len() && s.as_ref().len() <= size)
        });
        let per_call = MAX_GSO_SEGMENTS.min(MAX_UDP_PAYLOAD / size.max(1));
        if !self.gso || !even || segments.len() < 2 || per_call < 2 || size == 0 {
            return Ok(0);
        }
        let dest = destination.map(SockAddr::from);
        let mut sent = 0;
        while sent < segments.len() {
            let k = per_call.min(segments.len() - sent);
            self.iovs.clear();
            self.iovs
                .extend(segments[sent..sent + k].iter().map(|s| libc::iovec {
                    // sendmsg only reads through this pointer.
                    iov_base: s.as_ref().as_ptr() as *mut libc::c_void,
                    iov_len: s.as_ref().len(),
                }));
            // per_call ≥ 2 bounds size by MAX_UDP_PAYLOAD / 2, within u16.
            let gso_size = (k > 1).then_some(size as u16);
            let r = sys::sendmsg_gathered(socket, dest.as_ref(), &mut self.iovs, gso_size);
            // Drop the pointers into the segments before their borrow ends.
            self.iovs.clear();
            match r {
                Ok(()) => {
                    self.calls += 1;
                    sent += k;
                }
                Err(e) if matches!(e.raw_os_error(), Some(libc::EIO | libc::EINVAL)) => {
                    self.gso = false;
                    return Ok(sent);
                }
                Err(e) if sent == 0 => return Err(e),
                Err(_) => return Ok(sent),
            }
        }
        Ok(sent)
    }

    /// GSO sends of whole chunks while the kernel takes them. Returns the segments
    /// sent and whether the call is finished: `false` leaves the rest to the batch
    /// path (GSO off, just refused, or no help with one segment per call); `true`
    /// after everything went out or the kernel stopped part-way.
    #[cfg(target_os = "linux")]
    fn send_gso(
        &mut self,
        socket: &socket2::Socket,
        destination: Option<SocketAddr>,
        payload: &[u8],
        segment_size: usize,
        total: usize,
    ) -> io::Result<(usize, bool)> {
        let per_call = MAX_GSO_SEGMENTS.min(MAX_UDP_PAYLOAD / segment_size);
        if total == 0 {
            return Ok((0, true));
        }
        if !self.gso || total < 2 || per_call < 2 {
            return Ok((0, false));
        }
        let dest = destination.map(SockAddr::from);
        let mut sent = 0;
        while sent < total {
            let k = per_call.min(total - sent);
            let start = sent * segment_size;
            let chunk = &payload[start..payload.len().min(start + k * segment_size)];
            // per_call ≥ 2 bounds segment_size by MAX_UDP_PAYLOAD / 2, within u16.
            let gso_size = (k > 1).then_some(segment_size as u16);
            match sys::sendmsg_segments(socket, dest.as_ref(), chunk, gso_size) {
                Ok(()) => {
                    self.calls += 1;
                    sent += k;
                }
                Err(e) if matches!(e.raw_os_error(), Some(libc::EIO | libc::EINVAL)) => {
                    self.gso = false;
                    return Ok((sent, false));
                }
                Err(e) if sent == 0 => return Err(e),
                Err(_) => return Ok((sent, true)),
            }
        }
        Ok((sent, true))
    }

    /// Sends datagram `i` = (`payload(i)`, `dest(i)`) for `i` in `0..n`, in order,
    /// `capacity` per system call, until all are sent or the kernel stops.
    fn send_indexed<'p>(
        &mut self,
        socket: &socket2::Socket,
        n: usize,
        payload: impl Fn(usize) -> &'p [u8],
        dest: impl Fn(usize) -> Option<SocketAddr>,
    ) -> io::Result<usize> {
        let mut sent = 0;
        while sent < n {
            let k = self.capacity.min(n - sent);
            self.dests.clear();
            self.dests
                .extend((sent..sent + k).map(|i| dest(i).map(SockAddr::from)));
            let r = self.send_chunk(socket, |j| payload(sent + j));
            match r {
                Ok(m) => {
                    sent += m;
                    if m < k {
                        break;
                    }
                }
                Err(e) if sent == 0 => return Err(e),
                Err(_) => break,
            }
        }
        Ok(sent)
    }

    /// One `sendmmsg` of the datagrams whose destinations are in `self.dests`
    /// (one `sendto` when there is one).
    #[cfg(target_os = "linux")]
    fn send_chunk<'p>(
        &mut self,
        socket: &socket2::Socket,
        payload: impl Fn(usize) -> &'p [u8],
    ) -> io::Result<usize> {
        use std::os::fd::AsRawFd;

        let k = self.dests.len();
        if k == 1 {
            // One datagram: `sendto` takes a shorter kernel path than a one-message
            // `sendmmsg` (it shows in a window-1 echo's round trip).
            let r = loop {
                let r = match &self.dests[0] {
                    Some(a) => socket.send_to(payload(0), a),
                    None => socket.send(payload(0)),
                };
                match r {
                    Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
                    r => break r,
                }
            };
            if r.is_ok() {
                self.calls += 1;
            }
            return r.map(|_| 1);
        }
        self.iovs.clear();
        self.iovs.extend((0..k).map(|j| {
            let p = payload(j);
            libc::iovec {
                // sendmmsg only reads through this pointer.
                iov_base: p.as_ptr() as *mut libc::c_void,
                iov_len: p.len(),
            }
        }));
        self.hdrs.clear();
        for (dest, iov) in self.dests.iter().zip(self.iovs.iter_mut()) {
            // SAFETY: mmsghdr is a plain C struct of integers and pointers, for
            // which all-zero is a valid value.
            let mut h: libc::mmsghdr = unsafe { std::mem::zeroed() };
            if let Some(a) = dest {
                h.msg_hdr.msg_name = a.as_ptr() as *mut libc::c_void;
                h.msg_hdr.msg_namelen = a.len();
            }
            h.msg_hdr.msg_iov = iov;
            h.msg_hdr.msg_iovlen = 1;
            self.hdrs.push(h);
        }
        let fd = socket.as_raw_fd();
        let r = loop {
            // SAFETY: the `k` headers point to iovecs in `self.iovs`, addresses in
            // `self.dests` and payloads borrowed by the caller, all alive and
            // unmoved for the call; `fd` is an open socket borrowed from `socket`.
            let r = unsafe { libc::sendmmsg(fd, self.hdrs.as_mut_ptr(), k as libc::c_uint, 0) };
            if r >= 0 {
                self.calls += 1;
                break Ok(r as usize);
            }
            let e = io::Error::last_os_error();
            if e.kind() != io::ErrorKind::Interrupted {
                break Err(e);
            }
        };
        // Drop the pointers into the payloads before their borrow ends.
        self.hdrs.clear();
        self.iovs.clear();
        r
    }

    /// One `send_to` per datagram whose destination is in `self.dests`.
    #[cfg(not(target_os = "linux"))]
    fn send_chunk<'p>(
        &mut self,
        socket: &socket2::Socket,
        payload: impl Fn(usize) -> &'p [u8],
    ) -> io::Result<usize> {
        for (j, dest) in self.dests.iter().enumerate() {
            let r = match dest {
                Some(a) => socket.send_to(payload(j), a),
                None => socket.send(payload(j)),
            };
            if let Err(e) = r {
                return if j == 0 { Err(e) } else { Ok(j) };
            }
            self.calls += 1;
        }
        Ok(self.dests.len())
    }
}

#[cfg(target_os = "linux")]
mod sys {
    use std::io;
    use std::os::fd::AsRawFd;

    use socket2::SockAddr;

    /// One `sendmsg` of `chunk`, split by the kernel into `gso_size`-byte datagrams
    /// when `gso_size` is set (`UDP_SEGMENT` control message, `udp(7)`).
    pub(super) fn sendmsg_segments(
        socket: &socket2::Socket,
        dest: Option<&SockAddr>,
        chunk: &[u8],
        gso_size: Option<u16>,
    ) -> io::Result<()> {
        let mut iov = [libc::iovec {
            // sendmsg only reads through this pointer.
            iov_base: chunk.as_ptr() as *mut libc::c_void,
            iov_len: chunk.len(),
        }];
        sendmsg_gathered(socket, dest, &mut iov, gso_size)
    }

    /// One `sendmsg` of the bytes the iovecs point to, in order, as one payload
    /// split into `gso_size`-byte datagrams when `gso_size` is set.
    pub(super) fn sendmsg_gathered(
        socket: &socket2::Socket,
        dest: Option<&SockAddr>,
        iovs: &mut [libc::iovec],
        gso_size: Option<u16>,
    ) -> io::Result<()> {
        // Room for one cmsghdr plus a u16, 8-byte aligned as cmsghdr requires.
        let mut control = [0u64; 4];
        // SAFETY: msghdr is a plain C struct for which all-zero is a valid value.
        let mut msg: libc::msghdr = unsafe { std::mem::zeroed() };
        if let Some(a) = dest {
            msg.msg_name = a.as_ptr() as *mut libc::c_void;
            msg.msg_namelen = a.len();
        }
        msg.msg_iov = iovs.as_mut_ptr();
        msg.msg_iovlen = iovs.len() as _;
        if let Some(size) = gso_size {
            // SAFETY: CMSG_SPACE/CMSG_LEN are arithmetic on a constant length.
            let (space, len) = unsafe {
                (
                    libc::CMSG_SPACE(std::mem::size_of::<u16>() as libc::c_uint),
                    libc::CMSG_LEN(std::mem::size_of::<u16>() as libc::c_uint),
                )
            };
            debug_assert!(space as usize <= std::mem::size_of_val(&control));
            msg.msg_control = control.as_mut_ptr().cast();
            msg.msg_controllen = space as _;
            // SAFETY: `msg_control` points to `control`, large enough and aligned
            // for one cmsghdr with a u16 payload (checked above), so the first
            // header and its data lie inside it; the data may be unaligned for
            // u16, hence write_unaligned.
            unsafe {
                let cmsg = libc::CMSG_FIRSTHDR(&msg);
                (*cmsg).cmsg_level = libc::SOL_UDP;
                (*cmsg).cmsg_type = libc::UDP_SEGMENT;
                (*cmsg).cmsg_len = len as _;
                std::ptr::write_unaligned(libc::CMSG_DATA(cmsg).cast::<u16>(), size);
            }
        }
        let fd = socket.as_raw_fd();
        loop {
            // SAFETY: `msg` points to `iovs`, `control` and `dest`, and the iovecs
            // to buffers the caller keeps alive for the call; `fd` is an open socket.
            let r = unsafe { libc::sendmsg(fd, &msg, 0) };
            if r >= 0 {
                return Ok(());
            }
            let e = io::Error::last_os_error();
            if e.kind() != io::ErrorKind::Interrupted {
                return Err(e);
            }
        }
    }
}
