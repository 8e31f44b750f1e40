//! The receive side of the load generator. Each receive thread owns an epoll
//! instance (through `mio`) holding its share of the device sockets and
//! wakes only for sockets with datagrams queued, draining each one until
//! `EAGAIN` (mio registrations are edge-triggered). The previous design
//! polled every socket with a non-blocking `recv` each turn: with 1000–5000
//! devices that was thousands of mostly-`EAGAIN` syscalls per turn, taking
//! the CPU the reflector was meant to be measured on.
//!
//! Latency is taken when `recv` returns (draarl-v1 §7.3: receive time −
//! embedded send time, one host clock). Each thread keeps its own histogram,
//! merged once at the end, so there is no lock on the receive path.

use std::io::ErrorKind;
use std::os::fd::AsRawFd;
use std::sync::atomic::{AtomicBool, Ordering::Relaxed};
use std::time::Duration;

use hdrhistogram::Histogram;
use mio::unix::SourceFd;
use mio::{Events, Interest, Poll, Token};

use petrel_reflector::codec::{decode, PacketType};

use super::device::{unix_ns, Device, MARKER};
use super::receipts::FrameReceipts;
use super::LoadError;

/// Name of the receive threads, for their per-thread CPU.
pub(super) const RECV_THREAD: &str = "lg-recv";
/// Longest a receive thread sleeps in `epoll_wait` before it looks at the
/// stop flag again.
const STOP_CHECK: Duration = Duration::from_millis(50);
/// Readiness events taken per `epoll_wait`.
const EVENTS: usize = 1024;
/// Latency histogram range, µs: 1 µs to 60 s, 3 significant digits.
const HIST_MAX_US: u64 = 60_000_000;

/// What one receive thread counted.
#[derive(Debug)]
pub(super) struct Tally {
    /// Marked voice packets of the current stage.
    pub received: u64,
    /// Their latency, µs.
    pub hist: Histogram<u64>,
    /// `recv` failures other than `EAGAIN`/`EINTR` (e.g. ICMP-reported
    /// errors on the connected socket).
    pub recv_errors: u64,
    /// Marked frames whose Reserved was not what the receiver must see:
    /// the source group for app sessions, 0 for physical devices
    /// (draarl-apps §2.7).
    pub wrong_reserved: u64,
}

impl Tally {
    pub(super) fn new() -> Result<Self, LoadError> {
        Ok(Self {
            received: 0,
            hist: Histogram::new_with_bounds(1, HIST_MAX_US, 3)
                .map_err(|e| LoadError::Invalid(e.to_string()))?,
            recv_errors: 0,
            wrong_reserved: 0,
        })
    }

    /// Counts `datagram` if it is a marked voice frame of `stage`: its
    /// latency, and whether its Reserved is `reserved`; returns its round.
    pub(super) fn count(&mut self, datagram: &[u8], stage: u64, reserved: u32) -> Option<u64> {
        let now = unix_ns();
        let (sent, r, round) = stage_frame(datagram, stage)?;
        self.received += 1;
        self.wrong_reserved += u64::from(r != reserved);
        self.hist
            .saturating_record((now.saturating_sub(sent) / 1000).max(1));
        Some(round)
    }

    /// Adds another thread's counts.
    pub(super) fn merge(&mut self, other: &Self) {
        self.received += other.received;
        self.recv_errors += other.recv_errors;
        self.wrong_reserved += other.wrong_reserved;
        // Same bounds on both sides, so adding cannot fail.
        let _ = self.hist.add(&other.hist);
    }
}

/// An epoll instance watching `devices` for readability (token = index).
pub(super) fn register(devices: &[Device]) -> Result<Poll, LoadError> {
    let poll = Poll::new()?;
    for (i, d) in devices.iter().enumerate() {
        let fd = d.sock.as_raw_fd();
        poll.registry()
            .register(&mut SourceFd(&fd), Token(i), Interest::READABLE)?;
    }
    Ok(poll)
}

/// Receives until `stop`; `poll` must come from [`register`] on the same
/// `devices`, whose sockets are non-blocking. Each counted frame is also
/// marked in `receipts`, if given, in its device's receipt row.
pub(super) fn receive_loop(
    mut poll: Poll,
    devices: &[Device],
    stage: u64,
    stop: &AtomicBool,
    receipts: Option<&FrameReceipts>,
) -> Result<Tally, LoadError> {
    let mut tally = Tally::new()?;
    let mut events = Events::with_capacity(EVENTS);
    let mut buf = [0u8; 1500];
    while !stop.load(Relaxed) {
        if let Err(e) = poll.poll(&mut events, Some(STOP_CHECK)) {
            if e.kind() == ErrorKind::Interrupted {
                continue;
            }
            return Err(e.into());
        }
        for ev in &events {
            let Some(d) = devices.get(ev.token().0) else {
                continue;
            };
            loop {
                match d.sock.recv(&mut buf) {
                    Ok(n) => {
                        let round = tally.count(&buf[..n], stage, d.downlink_reserved);
                        if let (Some(round), Some(r)) = (round, receipts) {
                            r.mark(d.receipt_row, round);
                        }
                    }
                    Err(e) if e.kind() == ErrorKind::WouldBlock => break,
                    Err(e) if e.kind() == ErrorKind::Interrupted => {}
                    // A pending socket error is consumed by this call; the
                    // next datagram raises a fresh edge, so nothing is stranded.
                    Err(_) => {
                        tally.recv_errors += 1;
                        break;
                    }
                }
            }
        }
    }
    Ok(tally)
}

/// The embedded send time (Unix ns), the header's Reserved and the round of
/// a marked voice packet of `stage`.
fn stage_frame(datagram: &[u8], stage: u64) -> Option<(u64, u32, u64)> {
    let p = decode(datagram).ok()?;
    if p.header.packet_type != PacketType::Voice || p.data.len() < 32 || &p.data[..8] != MARKER {
        return None;
    }
    let field = |o: usize| {
        let mut a = [0u8; 8];
        a.copy_from_slice(&p.data[o..o + 8]);
        u64::from_be_bytes(a)
    };
    (field(8) == stage).then(|| (field(24), p.header.reserved, field(16)))
}
