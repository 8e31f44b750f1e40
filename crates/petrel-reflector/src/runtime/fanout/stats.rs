//! Fan-out counters (draarl-v1 §4.5 `fanout`), shared between threads.

use std::sync::atomic::{AtomicU64, Ordering::Relaxed};

/// Atomic counters updated by the engine's threads.
#[derive(Debug, Default)]
pub struct FanoutStats {
    pub(crate) frames_accepted: AtomicU64,
    pub(crate) frames_dropped: AtomicU64,
    pub(crate) text_frames_dropped: AtomicU64,
    pub(crate) frames_expired: AtomicU64,
    pub(crate) frames_sent: AtomicU64,
    pub(crate) targets_attempted: AtomicU64,
    pub(crate) sent: AtomicU64,
    pub(crate) write_errors: AtomicU64,
    pub(crate) enobufs: AtomicU64,
    pub(crate) would_block: AtomicU64,
    pub(crate) message_too_large: AtomicU64,
    pub(crate) deferred_errors: AtomicU64,
    pub(crate) queue_high_water: AtomicU64,
    pub(crate) max_dispatch_ns: AtomicU64,
}

/// A copy of the counters at one moment.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct FanoutStatsSnapshot {
    /// Frames submitted to the queue.
    pub frames_accepted: u64,
    /// Whole voice frames evicted because the voice queue was full.
    pub frames_dropped: u64,
    /// Text frames evicted because the text queue was full (text never
    /// evicts voice).
    pub text_frames_dropped: u64,
    /// Whole frames dropped for exceeding the max age.
    pub frames_expired: u64,
    /// Frames dispatched to every send path.
    pub frames_sent: u64,
    /// Datagrams attempted.
    pub targets_attempted: u64,
    /// Datagrams the kernel accepted.
    pub sent: u64,
    /// Datagrams that failed (all causes).
    pub write_errors: u64,
    /// Failures with ENOBUFS.
    pub enobufs: u64,
    /// Failures with EAGAIN/EWOULDBLOCK.
    pub would_block: u64,
    /// Failures with EMSGSIZE.
    pub message_too_large: u64,
    /// Sends that reported an earlier datagram's ICMP error and were
    /// retried once (the socket has `IP_RECVERR` on).
    pub deferred_errors: u64,
    /// Most frames queued at once.
    pub queue_high_water: u64,
    /// Longest time to dispatch one frame to all send paths, ns.
    pub max_dispatch_ns: u64,
}

impl FanoutStats {
    /// Reads every counter.
    pub fn snapshot(&self) -> FanoutStatsSnapshot {
        FanoutStatsSnapshot {
            frames_accepted: self.frames_accepted.load(Relaxed),
            frames_dropped: self.frames_dropped.load(Relaxed),
            text_frames_dropped: self.text_frames_dropped.load(Relaxed),
            frames_expired: self.frames_expired.load(Relaxed),
            frames_sent: self.frames_sent.load(Relaxed),
            targets_attempted: self.targets_attempted.load(Relaxed),
            sent: self.sent.load(Relaxed),
            write_errors: self.write_errors.load(Relaxed),
            enobufs: self.enobufs.load(Relaxed),
            would_block: self.would_block.load(Relaxed),
            message_too_large: self.message_too_large.load(Relaxed),
            deferred_errors: self.deferred_errors.load(Relaxed),
            queue_high_water: self.queue_high_water.load(Relaxed),
            max_dispatch_ns: self.max_dispatch_ns.load(Relaxed),
        }
    }
}

impl FanoutStatsSnapshot {
    /// Every counter with its name, for metrics export.
    pub fn counters(&self) -> Vec<(&'static str, u64)> {
        vec![
            ("frames_accepted", self.frames_accepted),
            ("frames_dropped", self.frames_dropped),
            ("text_frames_dropped", self.text_frames_dropped),
            ("frames_expired", self.frames_expired),
            ("frames_sent", self.frames_sent),
            ("targets_attempted", self.targets_attempted),
            ("sent", self.sent),
            ("write_errors", self.write_errors),
            ("enobufs", self.enobufs),
            ("would_block", self.would_block),
            ("message_too_large", self.message_too_large),
            ("deferred_errors", self.deferred_errors),
            ("queue_high_water", self.queue_high_water),
            ("max_dispatch_ns", self.max_dispatch_ns),
        ]
    }
}
