//! ICMP errors on the reflector's socket: the reader drains the socket's
//! error queue (`IP_RECVERR`, enabled by the server at bind) and tells
//! every shard which endpoints are unreachable, so their sessions end
//! within one loop turn of each thread (see
//! [`Reflector::handle_unreachable`](crate::core::Reflector::handle_unreachable),
//! which also says how the core copes with forged reports). A port
//! unreachable that does not come from the destination host itself is
//! forged on its face and dropped here (`offender_mismatch`).
//! The system calls are `petrel-sys`'s [`error_queue`](petrel_sys::error_queue).

use std::net::{SocketAddr, UdpSocket};
use std::sync::atomic::{AtomicU64, Ordering::Relaxed};
use std::sync::mpsc::{SyncSender, TrySendError};
use std::time::{Duration, Instant};

use petrel_sys::error_queue::{recv_errors, IcmpError};

/// How often the reader drains the error queue at most, besides right
/// after a receive reported an error (well inside the 1 s an unreachable
/// endpoint may keep receiving).
const CHECK_EVERY: Duration = Duration::from_millis(20);
/// Errors read per drain at most (the queue itself is bounded by the
/// socket's receive buffer).
const DRAIN_MAX: usize = 256;
/// Unreachable reports queued per shard.
pub(super) const REPORT_QUEUE: usize = 1024;

/// An unreachable endpoint, as read at `at`.
pub(super) type Report = (Instant, SocketAddr);

/// ICMP counters, shared with the stats reader.
#[derive(Debug, Default)]
pub(crate) struct IcmpCounters {
    errors: AtomicU64,
    unreachable: AtomicU64,
    offender_mismatch: AtomicU64,
    reports_dropped: AtomicU64,
    read_failures: AtomicU64,
}

/// A copy of the ICMP counters.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct IcmpStats {
    /// Errors read from the socket's error queue.
    pub errors: u64,
    /// Of those, destination unreachable (port, host, network), reported to the shards.
    pub unreachable: u64,
    /// Port unreachables not sent by the destination host (RFC 792: only
    /// the destination sends them), dropped as forged.
    pub offender_mismatch: u64,
    /// Reports not delivered to a shard because its queue was full.
    pub reports_dropped: u64,
    /// Reads of the error queue that failed.
    pub read_failures: u64,
}

impl IcmpCounters {
    pub(crate) fn snapshot(&self) -> IcmpStats {
        IcmpStats {
            errors: self.errors.load(Relaxed),
            unreachable: self.unreachable.load(Relaxed),
            offender_mismatch: self.offender_mismatch.load(Relaxed),
            reports_dropped: self.reports_dropped.load(Relaxed),
            read_failures: self.read_failures.load(Relaxed),
        }
    }
}

impl IcmpStats {
    /// Every counter with its name, for metrics export.
    pub fn counters(&self) -> Vec<(&'static str, u64)> {
        vec![
            ("errors", self.errors),
            ("unreachable", self.unreachable),
            ("offender_mismatch", self.offender_mismatch),
            ("reports_dropped", self.reports_dropped),
            ("read_failures", self.read_failures),
        ]
    }
}

/// The reader's side: when to drain, and where reports go.
pub(super) struct IcmpWatch {
    pub(super) shards: Vec<SyncSender<Report>>,
    pub(super) counters: std::sync::Arc<IcmpCounters>,
    next_check: Instant,
    buf: Vec<IcmpError>,
}

impl IcmpWatch {
    pub(super) fn new(
        shards: Vec<SyncSender<Report>>,
        counters: std::sync::Arc<IcmpCounters>,
    ) -> Self {
        Self {
            shards,
            counters,
            next_check: Instant::now(),
            buf: Vec::with_capacity(DRAIN_MAX),
        }
    }

    /// Drains the error queue if due at `now` (or at once if `now_due`,
    /// after a receive reported an error) and reports each unreachable
    /// destination to every shard.
    pub(super) fn poll(&mut self, sock: &UdpSocket, now: Instant, now_due: bool) {
        if !now_due && now < self.next_check {
            return;
        }
        self.next_check = now + CHECK_EVERY;
        self.buf.clear();
        if let Err(e) = recv_errors(sock, &mut self.buf, DRAIN_MAX) {
            self.counters.read_failures.fetch_add(1, Relaxed);
            tracing::debug!(error = %e, "reading the socket error queue");
        }
        for e in &self.buf {
            self.counters.errors.fetch_add(1, Relaxed);
            if !e.is_unreachable() {
                continue;
            }
            if e.is_port_unreachable() && !e.offender_is_destination() {
                self.counters.offender_mismatch.fetch_add(1, Relaxed);
                continue;
            }
            self.counters.unreachable.fetch_add(1, Relaxed);
            for shard in &self.shards {
                if let Err(TrySendError::Full(_)) = shard.try_send((now, e.destination)) {
                    self.counters.reports_dropped.fetch_add(1, Relaxed);
                }
            }
        }
    }
}
