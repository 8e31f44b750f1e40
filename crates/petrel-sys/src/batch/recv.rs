//! Batched receive: `recvmmsg(2)`, with the `UDP_GRO` segment size of each
//! coalesced datagram train; one `recv_from` per call where `recvmmsg` is missing.

use std::io;
use std::net::SocketAddr;

use socket2::{SockAddr, SockRef};

/// Bytes per receive slot: the largest UDP payload of any IP version (IPv6
/// jumbograms aside) and the most a GRO train holds, so nothing is ever truncated.
const SLOT_BYTES: usize = u16::MAX as usize;
/// Distance between slots: whole pages, so a small datagram touches one page.
const SLOT_STRIDE: usize = 1 << 16;

/// Asks the kernel to coalesce consecutive datagrams of one flow into one read
/// (`UDP_GRO`, Linux ≥ 5.0). [`Received::segment_size`] then tells how to split
/// them. Returns whether the kernel accepted; `false` off Linux.
///
/// # Errors
/// None: a kernel without `UDP_GRO` is reported as `Ok(false)`.
pub fn enable_gro<'s, S>(socket: &'s S) -> io::Result<bool>
where
    SockRef<'s>: From<&'s S>,
{
    #[cfg(target_os = "linux")]
    {
        use std::os::fd::AsRawFd;

        let socket = SockRef::from(socket);
        let on: libc::c_int = 1;
        // SAFETY: `on` is a live c_int and its size is passed; `fd` is an open socket.
        let r = unsafe {
            libc::setsockopt(
                socket.as_raw_fd(),
                libc::SOL_UDP,
                libc::UDP_GRO,
                (&on as *const libc::c_int).cast(),
                std::mem::size_of::<libc::c_int>() as libc::socklen_t,
            )
        };
        Ok(r == 0)
    }
    #[cfg(not(target_os = "linux"))]
    {
        let _ = SockRef::from(socket);
        Ok(false)
    }
}

/// One read of a [`RecvBatch`]: a datagram, or with GRO a train of datagrams from
/// one source.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Received<'a> {
    /// The sender; `None` for an address family this crate does not map.
    pub source: Option<SocketAddr>,
    /// The bytes read: one datagram, or `data.len() / segment_size` (rounded up)
    /// datagrams when `segment_size` is set.
    pub data: &'a [u8],
    /// The datagram was longer than its 65 535-byte slot and cut (not possible
    /// without IPv6 jumbograms; reported rather than assumed).
    pub truncated: bool,
    /// With GRO: the size of each coalesced datagram (the last may be shorter).
    pub segment_size: Option<usize>,
}

impl<'a> Received<'a> {
    /// The individual datagrams: `data` split at `segment_size`, or `data` alone.
    pub fn datagrams(&self) -> std::slice::Chunks<'a, u8> {
        let size = self.segment_size.unwrap_or(self.data.len()).max(1);
        self.data.chunks(size)
    }
}

/// Buffers for reading up to `batch` datagrams (or GRO trains) per system call,
/// each into its own 65 535-byte slot. Reuse it: reads do not allocate. On Linux
/// the slots are an anonymous mapping, so a page costs resident memory only once
/// a read has written into it: an endpoint that only ever reads small datagrams
/// holds a page per slot, not 64 KiB.
pub struct RecvBatch {
    bufs: SlotMemory,
    slots: usize,
    lens: Vec<usize>,
    sources: Vec<Option<SocketAddr>>,
    truncated: Vec<bool>,
    segments: Vec<Option<usize>>,
    filled: usize,
    #[cfg(target_os = "linux")]
    sys: sys::Headers,
}

impl std::fmt::Debug for RecvBatch {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RecvBatch")
            .field("batch", &self.slots)
            .field("filled", &self.filled)
            .finish()
    }
}

impl RecvBatch {
    /// Room for `batch` reads per call (at least 1).
    ///
    /// # Panics
    /// When `batch` slots of 64 KiB exceed the address space.
    pub fn new(batch: usize) -> Self {
        let batch = batch.max(1);
        Self {
            bufs: SlotMemory::new(
                batch
                    .checked_mul(SLOT_STRIDE)
                    .expect("receive batch too large to map"),
            ),
            slots: batch,
            lens: vec![0; batch],
            sources: vec![None; batch],
            truncated: vec![false; batch],
            segments: vec![None; batch],
            filled: 0,
            #[cfg(target_os = "linux")]
            sys: sys::Headers::new(batch),
        }
    }

    /// Reads what is waiting, up to `batch` reads, and returns how many (≥ 1).
    /// On a blocking socket waits for the first only (`MSG_WAITFORONE`).
    ///
    /// # Errors
    /// `WouldBlock` when nothing is waiting on a non-blocking socket (or the
    /// timeout of a blocking one passed); any other error of `recvmmsg`.
    pub fn recv<'s, S>(&mut self, socket: &'s S) -> io::Result<usize>
    where
        SockRef<'s>: From<&'s S>,
    {
        self.filled = 0;
        let socket = SockRef::from(socket);
        #[cfg(target_os = "linux")]
        let n = self.sys.recv(
            &socket,
            &mut self.bufs,
            &mut self.lens,
            &mut self.sources,
            &mut self.truncated,
            &mut self.segments,
        )?;
        #[cfg(not(target_os = "linux"))]
        let n = {
            // SAFETY: `[u8]` and `[MaybeUninit<u8>]` have the same layout, and
            // recv_from only writes initialised bytes into the slice.
            let buf = unsafe {
                &mut *(std::ptr::from_mut::<[u8]>(&mut self.bufs[..SLOT_BYTES])
                    as *mut [std::mem::MaybeUninit<u8>])
            };
            let (len, addr) = socket.recv_from(buf)?;
            self.lens[0] = len.min(SLOT_BYTES);
            self.sources[0] = addr.as_socket();
            self.truncated[0] = len > SLOT_BYTES;
            self.segments[0] = None;
            1
        };
        self.filled = n;
        Ok(n)
    }

    /// Whether the last [`RecvBatch::recv`] emptied the socket's receive queue:
    /// `recvmmsg` stops short of the batch when the next read would block
    /// (`MSG_DONTWAIT`, or `MSG_WAITFORONE` after the first read), so a short
    /// batch says the queue was empty at that moment, as a `WouldBlock` read
    /// would, without that extra system call. Always `false` where reads go one
    /// by one (not Linux) and for a batch of one, whose full read says nothing
    /// of the rest.
    ///
    /// Only for sockets whose reads do not fail: a pending socket error also
    /// stops a batch short (the next call reports it; recvmmsg(2)) while
    /// datagrams may still be queued, and a UDP socket has one when it is
    /// connected or has `IP_RECVERR` on and an ICMP error came back (ip(7)).
    /// An unconnected socket without `IP_RECVERR`, such as a Petrel endpoint's,
    /// never has one.
    pub fn drained(&self) -> bool {
        cfg!(target_os = "linux") && self.filled < self.slots
    }

    /// The `i`-th read of the last [`RecvBatch::recv`]; `None` past the count.
    pub fn get(&self, i: usize) -> Option<Received<'_>> {
        (i < self.filled).then(|| Received {
            source: self.sources[i],
            data: &self.bufs[i * SLOT_STRIDE..][..self.lens[i]],
            truncated: self.truncated[i],
            segment_size: self.segments[i],
        })
    }

    /// The reads of the last [`RecvBatch::recv`], in arrival order.
    pub fn iter(&self) -> impl Iterator<Item = Received<'_>> + '_ {
        (0..self.filled).filter_map(|i| self.get(i))
    }
}

/// Zeroed memory for the receive slots: an anonymous private mapping on Linux
/// (mmap(2): its pages read as zero and take resident memory only when first
/// written), a vector elsewhere.
struct SlotMemory {
    #[cfg(target_os = "linux")]
    ptr: std::ptr::NonNull<u8>,
    #[cfg(target_os = "linux")]
    len: usize,
    #[cfg(not(target_os = "linux"))]
    bytes: Vec<u8>,
}

#[cfg(target_os = "linux")]
impl SlotMemory {
    fn new(len: usize) -> Self {
        // SAFETY: an anonymous private mapping at an address of the kernel's
        // choosing touches no existing memory; the result is checked below.
        let p = unsafe {
            libc::mmap(
                std::ptr::null_mut(),
                len,
                libc::PROT_READ | libc::PROT_WRITE,
                libc::MAP_PRIVATE | libc::MAP_ANONYMOUS,
                -1,
                0,
            )
        };
        match std::ptr::NonNull::new(p.cast::<u8>()) {
            Some(ptr) if p != libc::MAP_FAILED => Self { ptr, len },
            // Out of address space: what a failed allocation does.
            _ => std::alloc::handle_alloc_error(
                std::alloc::Layout::from_size_align(len, 1)
                    .unwrap_or(std::alloc::Layout::new::<u8>()),
            ),
        }
    }
}

#[cfg(target_os = "linux")]
impl Drop for SlotMemory {
    fn drop(&mut self) {
        // SAFETY: `ptr` and `len` are the mapping made in `new`, unmapped once.
        unsafe { libc::munmap(self.ptr.as_ptr().cast(), self.len) };
    }
}

// SAFETY: the mapping is owned by this value alone, like a `Vec<u8>`'s buffer.
#[cfg(target_os = "linux")]
unsafe impl Send for SlotMemory {}
// SAFETY: shared access only reads, through `&[u8]`.
#[cfg(target_os = "linux")]
unsafe impl Sync for SlotMemory {}

#[cfg(not(target_os = "linux"))]
impl SlotMemory {
    fn new(len: usize) -> Self {
        Self {
            bytes: vec![0; len],
        }
    }
}

#[cfg(target_os = "linux")]
impl std::ops::Deref for SlotMemory {
    type Target = [u8];
    fn deref(&self) -> &[u8] {
        // SAFETY: the mapping is `len` readable bytes (zero or written by reads)
        // that live as long as `self`.
        unsafe { std::slice::from_raw_parts(self.ptr.as_ptr(), self.len) }
    }
}

#[cfg(target_os = "linux")]
impl std::ops::DerefMut for SlotMemory {
    fn deref_mut(&mut self) -> &mut [u8] {
        // SAFETY: as in `deref`, and `&mut self` makes this the only access.
        unsafe { std::slice::from_raw_parts_mut(self.ptr.as_ptr(), self.len) }
    }
}

#[cfg(not(target_os = "linux"))]
impl std::ops::Deref for SlotMemory {
    type Target = [u8];
    fn deref(&self) -> &[u8] {
        &self.bytes
    }
}

#[cfg(not(target_os = "linux"))]
impl std::ops::DerefMut for SlotMemory {
    fn deref_mut(&mut self) -> &mut [u8] {
        &mut self.bytes
    }
}

/// The address of a filled `sockaddr_storage` of `len` bytes.
#[cfg(target_os = "linux")]
fn socket_addr(storage: &libc::sockaddr_storage, len: libc::socklen_t) -> Option<SocketAddr> {
    // SAFETY: the kernel initialised `len` bytes of this storage (at most its size).
    unsafe { SockAddr::new(*storage, len) }.as_socket()
}

#[cfg(target_os = "linux")]
mod sys {
    use std::io;
    use std::mem;
    use std::net::SocketAddr;
    use std::os::fd::AsRawFd;

    /// Control space per read: one cmsghdr with an int (`UDP_GRO`), 8-byte aligned,
    /// with room to spare for options the caller may have enabled.
    const CONTROL_WORDS: usize = 16;

    /// The raw `recvmmsg` arguments, rebuilt before every call.
    pub(super) struct Headers {
        hdrs: Vec<libc::mmsghdr>,
        iovs: Vec<libc::iovec>,
        addrs: Vec<libc::sockaddr_storage>,
        control: Vec<[u64; CONTROL_WORDS]>,
    }

    // SAFETY: the raw pointers in `hdrs` and `iovs` only ever point into buffers the
    // owning `RecvBatch` holds, are rewritten before every system call and are
    // never dereferenced by Rust code, so moving them to another thread cannot
    // create shared mutable access.
    unsafe impl Send for Headers {}

    impl Headers {
        pub(super) fn new(batch: usize) -> Self {
            // SAFETY: sockaddr_storage, mmsghdr and iovec are plain C structs for
            // which all-zero bytes are a valid value.
            let (addr, hdr, iov) = unsafe {
                (
                    mem::zeroed::<libc::sockaddr_storage>(),
                    mem::zeroed::<libc::mmsghdr>(),
                    mem::zeroed::<libc::iovec>(),
                )
            };
            Self {
                hdrs: vec![hdr; batch],
                iovs: vec![iov; batch],
                addrs: vec![addr; batch],
                control: vec![[0; CONTROL_WORDS]; batch],
            }
        }

        pub(super) fn recv(
            &mut self,
            socket: &socket2::Socket,
            bufs: &mut [u8],
            lens: &mut [usize],
            sources: &mut [Option<SocketAddr>],
            truncated: &mut [bool],
            segments: &mut [Option<usize>],
        ) -> io::Result<usize> {
            for (i, buf) in bufs.chunks_exact_mut(super::SLOT_STRIDE).enumerate() {
                self.iovs[i] = libc::iovec {
                    iov_base: buf.as_mut_ptr().cast(),
                    iov_len: super::SLOT_BYTES,
                };
                let h = &mut self.hdrs[i];
                h.msg_hdr.msg_name = (&mut self.addrs[i] as *mut libc::sockaddr_storage).cast();
                h.msg_hdr.msg_namelen = mem::size_of::<libc::sockaddr_storage>() as libc::socklen_t;
                h.msg_hdr.msg_iov = &mut self.iovs[i];
                h.msg_hdr.msg_iovlen = 1;
                h.msg_hdr.msg_control = self.control[i].as_mut_ptr().cast();
                h.msg_hdr.msg_controllen = mem::size_of::<[u64; CONTROL_WORDS]>() as _;
                h.msg_hdr.msg_flags = 0;
                h.msg_len = 0;
            }
            let fd = socket.as_raw_fd();
            let n = loop {
                // SAFETY: every header points to its own iovec, buffer, address
                // storage and control space, all owned by the caller's RecvBatch
                // and not moved during the call; each iovec lies inside its slot.
                let r = unsafe {
                    libc::recvmmsg(
                        fd,
                        self.hdrs.as_mut_ptr(),
                        self.hdrs.len() as libc::c_uint,
                        libc::MSG_WAITFORONE,
                        std::ptr::null_mut(),
                    )
                };
                if r >= 0 {
                    break r as usize;
                }
                let e = io::Error::last_os_error();
                if e.kind() != io::ErrorKind::Interrupted {
                    return Err(e);
                }
            };
            for i in 0..n {
                let h = &self.hdrs[i].msg_hdr;
                lens[i] = (self.hdrs[i].msg_len as usize).min(super::SLOT_BYTES);
                sources[i] = super::socket_addr(&self.addrs[i], h.msg_namelen);
                truncated[i] = h.msg_flags & libc::MSG_TRUNC != 0;
                segments[i] = gro_segment_size(h);
            }
            Ok(n)
        }
    }

    /// The `UDP_GRO` control message of a received header, if any.
    fn gro_segment_size(h: &libc::msghdr) -> Option<usize> {
        // SAFETY: `h` was filled by recvmmsg: msg_control points to our control
        // space and msg_controllen is the length the kernel wrote, so the CMSG_*
        // walk stays inside it; the data is read unaligned.
        unsafe {
            let mut cmsg = libc::CMSG_FIRSTHDR(h);
            while !cmsg.is_null() {
                if (*cmsg).cmsg_level == libc::SOL_UDP && (*cmsg).cmsg_type == libc::UDP_GRO {
                    let size =
                        std::ptr::read_unaligned(libc::CMSG_DATA(cmsg).cast::<libc::c_int>());
                    return usize::try_from(size).ok().filter(|&s| s > 0);
                }
                cmsg = libc::CMSG_NXTHDR(h, cmsg);
            }
        }
        None
    }
}
