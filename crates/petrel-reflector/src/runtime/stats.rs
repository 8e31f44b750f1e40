//! The counters of a running server, and where the HTTP endpoint reads them.

use std::sync::atomic::{AtomicU64, Ordering::Relaxed};
use std::sync::{Arc, Mutex, PoisonError};

use petrel_sys::socket::SocketBuffers;

use super::app_auth_stats::{AppAuthStats, AppAuthStatsSnapshot};
use super::fanout::{FanoutStats, FanoutStatsSnapshot};
use super::http_stats::{HttpStats, HttpStatsSnapshot};
use super::icmp::{IcmpCounters, IcmpStats};
use super::interconnect::{
    CentreRouteStats, CentreRoutes, CentreVoiceSnapshot, CentreVoiceSource, ControlServerSnapshot,
    ControlServerStats,
};
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
    /// HTTP endpoint counters (all zero when HTTP is off).
    pub http: HttpStatsSnapshot,
    /// The app login API (all zero without `[apps]`).
    pub app_auth: AppAuthStatsSnapshot,
    /// Stored text history and recording files: sizes and pruning.
    pub history: HistoryStatsSnapshot,
    /// ICMP errors read from the socket.
    pub icmp: IcmpStats,
    /// WebSocket counters (`upgrades`, `writes_dropped`, …), and the
    /// connections open.
    pub websocket: Vec<(&'static str, u64)>,
    /// WebSocket connections open.
    pub websockets_open: usize,
    /// App (ghost) sessions live on every transport.
    pub app_sessions: usize,
    /// The interconnect control server (draarl-interconnect §7 "Control
    /// server"), with `[interconnect] enabled`.
    pub interconnect: Option<ControlServerSnapshot>,
    /// The centre's route sync toward its edges (draarl-interconnect §3.7),
    /// with `[interconnect] enabled`.
    pub interconnect_routes: Option<CentreRouteStats>,
    /// The centre's edge device sessions, speaker leases and relay, with
    /// per-node protection counters (draarl-interconnect §3.8, §3.10,
    /// §5.2, §7), with `[interconnect] enabled`.
    pub interconnect_voice: Option<CentreVoiceSnapshot>,
}

/// Disk use of the text history and the recordings, and what the byte cap,
/// the age limit and the recording quota deleted. Updated by the store
/// writer and the reload task.
#[derive(Debug, Default)]
pub struct HistoryStats {
    pub(crate) text_bytes: AtomicU64,
    pub(crate) messages_pruned_age: AtomicU64,
    pub(crate) messages_pruned_bytes_cap: AtomicU64,
    pub(crate) recording_bytes: AtomicU64,
    pub(crate) recordings_pruned: AtomicU64,
    pub(crate) recording_bytes_pruned: AtomicU64,
    pub(crate) recording_name_collisions: AtomicU64,
}

/// A copy of [`HistoryStats`] at one moment.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct HistoryStatsSnapshot {
    /// Bytes of message text stored now.
    pub text_bytes: u64,
    /// Messages deleted for being older than `message_retention_days`.
    pub messages_pruned_age: u64,
    /// Messages deleted, oldest first, to keep `message_history_max_bytes`.
    pub messages_pruned_bytes_cap: u64,
    /// Bytes of recording files stored now.
    pub recording_bytes: u64,
    /// Recording files deleted, oldest first, to keep `recording.max_total_bytes`.
    pub recordings_pruned: u64,
    /// Bytes those deleted recordings held.
    pub recording_bytes_pruned: u64,
    /// Recordings written under a numbered name because the plain one existed.
    pub recording_name_collisions: u64,
}

impl HistoryStats {
    /// Reads every counter.
    pub fn snapshot(&self) -> HistoryStatsSnapshot {
        HistoryStatsSnapshot {
            text_bytes: self.text_bytes.load(Relaxed),
            messages_pruned_age: self.messages_pruned_age.load(Relaxed),
            messages_pruned_bytes_cap: self.messages_pruned_bytes_cap.load(Relaxed),
            recording_bytes: self.recording_bytes.load(Relaxed),
            recordings_pruned: self.recordings_pruned.load(Relaxed),
            recording_bytes_pruned: self.recording_bytes_pruned.load(Relaxed),
            recording_name_collisions: self.recording_name_collisions.load(Relaxed),
        }
    }
}

impl HistoryStatsSnapshot {
    /// Every counter with its name, for metrics export; the two ending in
    /// `_bytes` are gauges.
    pub fn counters(&self) -> Vec<(&'static str, u64)> {
        vec![
            ("text_bytes", self.text_bytes),
            ("messages_pruned_age", self.messages_pruned_age),
            ("messages_pruned_bytes_cap", self.messages_pruned_bytes_cap),
            ("recording_bytes", self.recording_bytes),
            ("recordings_pruned", self.recordings_pruned),
            ("recording_bytes_pruned", self.recording_bytes_pruned),
            ("recording_name_collisions", self.recording_name_collisions),
        ]
    }
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
    pub(crate) http: Arc<HttpStats>,
    pub(crate) app_auth: Arc<AppAuthStats>,
    pub(crate) history: Arc<HistoryStats>,
    pub(crate) icmp: Arc<IcmpCounters>,
    pub(crate) websockets: Arc<super::websocket_hub::WebSocketHub>,
    pub(crate) interconnect: Option<Arc<ControlServerStats>>,
    pub(crate) interconnect_routes: Option<Arc<Mutex<CentreRoutes>>>,
    pub(crate) interconnect_voice: Option<CentreVoiceSource>,
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
            http: self.http.snapshot(),
            app_auth: self.app_auth.snapshot(),
            history: self.history.snapshot(),
            icmp: self.icmp.snapshot(),
            websocket: self.websockets.stats().counters(),
            websockets_open: self.websockets.open(),
            app_sessions: self.shared.ghosts().len(),
            interconnect: self.interconnect.as_ref().map(|s| s.snapshot()),
            interconnect_routes: self
                .interconnect_routes
                .as_ref()
                .map(|r| r.lock().unwrap_or_else(PoisonError::into_inner).stats()),
            interconnect_voice: self
                .interconnect_voice
                .as_ref()
                .map(CentreVoiceSource::snapshot),
        }
    }
}
