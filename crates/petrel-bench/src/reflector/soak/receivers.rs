//! The soak's receive threads. Like the stage receivers (`receive.rs`), each
//! owns an epoll set (through `mio`, edge-triggered, drained to `EAGAIN`),
//! but devices come and go while they run: a [`Swap`] sent to a thread
//! replaces a device's socket (a login or reconnect) or removes it (a
//! logout). The old socket is drained before it is let go, so a datagram
//! that reached it is still counted; the socket closes once the last
//! reference to it is dropped.
//!
//! Each voice datagram of the measurement is marked in the [`FrameBook`]
//! by (round, group, device).

use std::collections::HashMap;
use std::io::ErrorKind;
use std::os::fd::AsRawFd;
use std::sync::atomic::{AtomicBool, Ordering::Relaxed};
use std::sync::mpsc::Receiver;
use std::sync::Arc;
use std::time::Duration;

use hdrhistogram::Histogram;
use mio::unix::SourceFd;
use mio::{Events, Interest, Poll, Token};

use petrel_reflector::codec::{decode, PacketType};

use super::super::device::{unix_ns, Device, MARKER};
use super::super::LoadError;
use super::book::{FrameBook, Mark};

/// Name of the soak's receive threads.
pub(super) const RECV_THREAD: &str = "lg-soak-recv";
/// Longest a receive thread waits before it looks at its swaps and the stop flag.
const TURN: Duration = Duration::from_millis(20);
/// Readiness events taken per `epoll_wait`.
const EVENTS: usize = 1024;
/// Latency histogram range, µs: 1 µs to 60 s.
const HIST_MAX_US: u64 = 60_000_000;

/// Device `device` now uses `socket`, or none (logged out).
pub(super) struct Swap {
    pub device: usize,
    pub socket: Option<Arc<Device>>,
}

/// What one receive thread counted.
#[derive(Debug)]
pub(super) struct RecvTally {
    pub duplicates: u64,
    pub late: u64,
    pub recv_errors: u64,
    /// Latency of first copies, µs.
    pub hist: Histogram<u64>,
}

impl RecvTally {
    pub(super) fn new() -> Result<Self, LoadError> {
        Ok(Self {
            duplicates: 0,
            late: 0,
            recv_errors: 0,
            hist: Histogram::new_with_bounds(1, HIST_MAX_US, 3)
                .map_err(|e| LoadError::Invalid(e.to_string()))?,
        })
    }

    pub(super) fn merge(&mut self, o: &Self) {
        self.duplicates += o.duplicates;
        self.late += o.late;
        self.recv_errors += o.recv_errors;
        // Same bounds on both sides, so adding cannot fail.
        let _ = self.hist.add(&o.hist);
    }
}

/// The round, group and send time (Unix ns) of a soak voice datagram of `stage`.
pub(super) fn soak_frame(datagram: &[u8], stage: u64) -> Option<(u64, usize, u64)> {
    let p = decode(datagram).ok()?;
    if p.header.packet_type != PacketType::Voice || p.data.len() < 40 || &p.data[..8] != MARKER {
        return None;
    }
    let field = |o: usize| {
        let mut a = [0u8; 8];
        a.copy_from_slice(&p.data[o..o + 8]);
        u64::from_be_bytes(a)
    };
    let group = usize::try_from(field(32)).ok()?;
    (field(8) == stage).then(|| (field(16), group, field(24)))
}

struct Owned {
    token: Token,
    socket: Arc<Device>,
}

/// Receives until `stop`, applying `swaps` as they come.
pub(super) fn receive_loop(
    swaps: &Receiver<Swap>,
    book: &FrameBook,
    stage: u64,
    stop: &AtomicBool,
) -> Result<RecvTally, LoadError> {
    let mut poll = Poll::new()?;
    let mut tally = RecvTally::new()?;
    let mut events = Events::with_capacity(EVENTS);
    let mut owned: HashMap<usize, Owned> = HashMap::new();
    let mut by_token: HashMap<Token, usize> = HashMap::new();
    let mut next_token = 0usize;
    let mut buf = [0u8; 1500];
    while !stop.load(Relaxed) {
        while let Ok(swap) = swaps.try_recv() {
            if let Some(old) = owned.remove(&swap.device) {
                drain(&old.socket, swap.device, book, stage, &mut buf, &mut tally);
                let fd = old.socket.sock.as_raw_fd();
                let _ = poll.registry().deregister(&mut SourceFd(&fd));
                by_token.remove(&old.token);
            }
            if let Some(socket) = swap.socket {
                let token = Token(next_token);
                next_token += 1;
                let fd = socket.sock.as_raw_fd();
                poll.registry()
                    .register(&mut SourceFd(&fd), token, Interest::READABLE)?;
                by_token.insert(token, swap.device);
                owned.insert(swap.device, Owned { token, socket });
            }
        }
        if let Err(e) = poll.poll(&mut events, Some(TURN)) {
            if e.kind() == ErrorKind::Interrupted {
                continue;
            }
            return Err(e.into());
        }
        for ev in &events {
            let Some(&device) = by_token.get(&ev.token()) else {
                continue;
            };
            if let Some(o) = owned.get(&device) {
                drain(&o.socket, device, book, stage, &mut buf, &mut tally);
            }
        }
    }
    Ok(tally)
}

/// Reads `socket` until `EAGAIN`, marking every soak frame.
fn drain(
    socket: &Device,
    device: usize,
    book: &FrameBook,
    stage: u64,
    buf: &mut [u8],
    tally: &mut RecvTally,
) {
    loop {
        match socket.sock.recv(buf) {
            Ok(n) => {
                let now = unix_ns();
                let Some((round, group, sent)) = soak_frame(&buf[..n], stage) else {
                    continue;
                };
                match book.mark(round, group, device) {
                    Mark::New => tally
                        .hist
                        .saturating_record((now.saturating_sub(sent) / 1000).max(1)),
                    Mark::Duplicate => tally.duplicates += 1,
                    Mark::Late => tally.late += 1,
                }
            }
            Err(e) if e.kind() == ErrorKind::WouldBlock => break,
            Err(e) if e.kind() == ErrorKind::Interrupted => {}
            // A pending socket error is consumed by this call; the next
            // datagram raises a fresh edge.
            Err(_) => {
                tally.recv_errors += 1;
                break;
            }
        }
    }
}
