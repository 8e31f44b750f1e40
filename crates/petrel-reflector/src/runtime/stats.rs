//! The counters of a running server, and where the HTTP endpoint reads them.

use std::sync::atomic::{AtomicU64, Ordering::Relaxed};
use std::sync::{Arc, Mutex, PoisonError};

use petrel_sys::socket::SocketBuffers;

use super::fanout::{FanoutStats, FanoutStatsSnapshot};
use super::icmp::{IcmpCounters, IcmpStats};
use super::shared_tables::SharedTables;
use super::verifier::{PasswordVerifier, VerifierStats};
use crate::core::{IngressStats, RecorderStats, SessionStats};

/// Counters of a running server.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ServerStats {
    /// Reader counters (rate limits, full shard queues).
    pub ingress: IngressStats,
    /// Ingress shards running.
    pub ingress_workers: usize,
    /// Session-core counters, summed over shards.
    pub session: SessionStats,
    /// Fan-out counters.
    pub fanout: FanoutStatsSnapshot,
    /// Devices online.
    pub online: usize,
    /// Directory reloads dropped because the reader had not taken the previous one.
    pub reloads_skipped: u64,
    /// Store writes that failed.
    pub store_errors: u64,
    /// Store events and recordings dropped because the writer's queue (4096) was full.
    pub store_events_dropped: u64,
    /// Recorder counters, summed over shards (all zero when recording is off).
    pub recording: RecorderStats,
    /// The Argon2 verifier pool shared by the shards.
    pub password_checks: VerifierStats,
    /// Socket buffer sizes: both directions request `socket_buffer_bytes`.
    pub socket: SocketBuffers,
    /// ICMP errors read from the socket.
    pub icmp: IcmpStats,
}

/// What one shard publishes every 10 ms.
#[derive(Debug, Default)]
pub(crate) struct Published {
    pub(crate) session: SessionStats,
    pub(crate) recording: RecorderStats,
}

/// Where a running server's counters are read from (cheap to clone).
#[derive(Debug, Clone)]
pub(crate) struct StatsSource {
    pub(crate) ingress: Arc<Mutex<IngressStats>>,
    pub(crate) shards: Vec<Arc<Mutex<Published>>>,
    pub(crate) shared: Arc<SharedTables>,
    pub(crate) socket: SocketBuffers,
    pub(crate) verifier: Arc<PasswordVerifier>,
    pub(crate) fanout: Arc<FanoutStats>,
    pub(crate) reloads_skipped: Arc<AtomicU64>,
    pub(crate) store_errors: Arc<AtomicU64>,
    pub(crate) store_events_dropped: Arc<AtomicU64>,
    pub(crate) icmp: Arc<IcmpCounters>,
}

impl StatsSource {
    pub(crate) fn read(&self) -> ServerStats {
        let mut session = SessionStats::default();
        let mut recording = RecorderStats::default();
        for shard in &self.shards {
            let p = shard.lock().unwrap_or_else(PoisonError::into_inner);
            session.add(&p.session);
            recording.add(&p.recording);
        }
        ServerStats {
            ingress: self
                .ingress
                .lock()
                .unwrap_or_else(PoisonError::into_inner)
                .clone(),
            ingress_workers: self.shards.len(),
            session,
            fanout: self.fanout.snapshot(),
            online: self.shared.online(),
            reloads_skipped: self.reloads_skipped.load(Relaxed),
            store_errors: self.store_errors.load(Relaxed),
            store_events_dropped: self.store_events_dropped.load(Relaxed),
            recording,
            password_checks: self.verifier.stats(),
            socket: self.socket,
            icmp: self.icmp.snapshot(),
        }
    }
}
