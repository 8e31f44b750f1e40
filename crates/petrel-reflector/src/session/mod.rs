//! The sans-IO session core: feed it `(now, source, datagram)`, then poll it
//! for replies, fan-out frames, store events and password checks (which the
//! runtime runs elsewhere and reports back). It owns device sessions,
//! authentication, policies and receiver snapshots (draarl-v1 §2.2, §3).
//!
//! Ingress is sharded (§4.1): an [`Ingress`] front rate-limits each datagram
//! and picks the shard owning its device (username + SSID); each shard is
//! one [`Reflector`] with the sessions of its devices; what spans shards
//! (domain receivers and snapshots, floors, the ban ladder, the Argon2
//! budget) lives in one [`SharedState`]. With one shard the same types run
//! single-threaded.
//!
//! It never reads a clock, touches a socket, awaits the database or runs Argon2.

mod auth;
mod config;
mod forward;
mod ingress;
mod login;
mod password;
mod replies;
mod shared;
mod snapshot;
mod stats;

#[cfg(test)]
mod tests;

use std::collections::{HashMap, HashSet, VecDeque};
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Instant;

pub use auth::PasswordCheck;
pub(crate) use config::check;
pub use config::{ConfigRangeError, SessionConfig};
pub use ingress::{shard_of, Ingress, IngressStats};
pub use password::{
    hash_device_password, is_valid_device_password, verify_device_password, HashCost, PasswordError,
};
pub use replies::RejectReason;
pub use shared::SharedState;
pub use snapshot::{partition_of, Snapshot};
pub use stats::SessionStats;

use crate::codec::{self, PacketType};
use crate::directory::{DeviceRecord, Directory, UNGROUPED};
use crate::recording::{Recorder, RecorderStats, Recording};

/// Device model of the Android app, which may log in without a MAC (spec §3.5).
const DEV_MODEL_ANDROID: u8 = 101;
/// Outbound store events kept at most between two polls.
const MAX_PENDING_EVENTS: usize = 4096;

/// Device identity: (owner user id, SSID).
pub type DeviceKey = (i64, u8);

/// A datagram to send to one address.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Transmit {
    /// Destination.
    pub dst: SocketAddr,
    /// Encoded datagram.
    pub payload: Vec<u8>,
}

/// One forwarded packet with its receivers, the unit of the fan-out queue.
#[derive(Debug, Clone)]
pub struct Frame {
    /// When the core planned it; the fan-out engine drops frames older than its max age.
    pub created: Instant,
    /// The rewritten datagram, shared by every target.
    pub packet: Arc<[u8]>,
    /// Receivers of the sender's domain.
    pub snapshot: Arc<Snapshot>,
    /// The sender's endpoint, skipped at send time.
    pub exclude: SocketAddr,
}

/// A change the runtime should persist.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum StoreEvent {
    /// Insert a device row (first login), or update its model and MAC. The
    /// group and bans of an existing row are left alone: the store owns them.
    DeviceUpsert(DeviceRecord),
    /// An admin moved a device to another group (0 = ungrouped).
    DeviceGroup {
        /// Device identity.
        device: DeviceKey,
        /// New group id.
        group_id: i64,
    },
    /// A device reported its Type 3 configuration.
    DeviceConfig {
        /// Device identity.
        device: DeviceKey,
        /// Items as reported.
        items: Vec<codec::Tlv>,
    },
    /// A text message was forwarded; kept as channel history (spec §5.3:
    /// text is stored whether or not voice recording is on).
    Text {
        /// Sender.
        device: DeviceKey,
        /// Sender's group when it was sent.
        group_id: i64,
        /// Wall-clock time, Unix ms (0 if the core has no wall clock).
        unix_ms: i64,
        /// DATA as received (UTF-8 by convention, stored unchanged).
        text: Vec<u8>,
    },
}

#[derive(Debug, Clone, Copy)]
struct Session {
    addr: SocketAddr,
    last_seen: Instant,
    group_id: i64,
}

/// The session core of one ingress shard. See the module docs.
#[derive(Debug)]
pub struct Reflector {
    cfg: SessionConfig,
    dir: Directory,
    /// Sessions of the devices this shard owns.
    sessions: HashMap<DeviceKey, Session>,
    shared: Arc<SharedState>,
    /// Logins parked behind a password check, by check id (at most
    /// `password_checks_in_flight` over all shards).
    pending_checks: HashMap<u64, auth::PendingLogin>,
    /// Devices with a check in flight.
    pending_devices: HashSet<DeviceKey>,
    /// Checks not yet taken by the runtime (a subset of `pending_checks`).
    checks_out: VecDeque<PasswordCheck>,
    next_check_id: u64,
    /// Step between this shard's check ids (the number of shards).
    check_id_stride: u64,
    transmits: VecDeque<Transmit>,
    frames: VecDeque<Frame>,
    events: VecDeque<StoreEvent>,
    next_sweep: Instant,
    /// A wall-clock reading for Type 3 time sync: (instant, Unix ms then).
    wall: Option<(Instant, i64)>,
    recorder: Option<Recorder>,
    stats: SessionStats,
}

impl Reflector {
    /// A single-shard core over `dir`. `cfg` must have passed
    /// [`SessionConfig::validate`].
    pub fn new(cfg: SessionConfig, dir: Directory, now: Instant) -> Self {
        let shared = Arc::new(SharedState::new(&cfg, now));
        Self::shard(cfg, dir, now, shared)
    }

    /// One shard among those sharing `shared`. `cfg.password_checks_in_flight`
    /// and `cfg.max_sessions` count every shard's checks and sessions. Give
    /// shards distinct check ids with [`Reflector::with_check_ids`].
    pub fn shard(
        cfg: SessionConfig,
        dir: Directory,
        now: Instant,
        shared: Arc<SharedState>,
    ) -> Self {
        Self {
            next_sweep: now + cfg.sweep_interval(),
            cfg,
            dir,
            sessions: HashMap::new(),
            shared,
            pending_checks: HashMap::new(),
            pending_devices: HashSet::new(),
            checks_out: VecDeque::new(),
            next_check_id: 0,
            check_id_stride: 1,
            transmits: VecDeque::new(),
            frames: VecDeque::new(),
            events: VecDeque::new(),
            wall: None,
            recorder: None,
            stats: SessionStats::default(),
        }
    }

    /// Counters so far.
    pub fn stats(&self) -> &SessionStats {
        &self.stats
    }

    /// The directory the core routes by.
    pub fn directory(&self) -> &Directory {
        &self.dir
    }

    /// Online devices of this shard.
    pub fn online(&self) -> usize {
        self.sessions.len()
    }

    /// Whether a device is online, and at which endpoint.
    pub fn session_addr(&self, key: DeviceKey) -> Option<SocketAddr> {
        self.sessions.get(&key).map(|s| s.addr)
    }

    /// Tells the core that `now` is `unix_ms` on the wall clock; needed for
    /// Type 3 time sync, which is skipped until this has been called.
    pub fn set_wall_clock(&mut self, now: Instant, unix_ms: i64) {
        self.wall = Some((now, unix_ms));
    }

    /// Next reply to send.
    pub fn poll_transmit(&mut self) -> Option<Transmit> {
        self.transmits.pop_front()
    }

    /// Next frame to fan out.
    pub fn poll_frame(&mut self) -> Option<Frame> {
        self.frames.pop_front()
    }

    /// Next change to persist.
    pub fn poll_event(&mut self) -> Option<StoreEvent> {
        self.events.pop_front()
    }

    /// When [`Reflector::handle_timeout`] should next run.
    pub fn poll_timeout(&self) -> Instant {
        let rec = self.recorder.as_ref().and_then(Recorder::next_deadline);
        rec.map_or(self.next_sweep, |r| r.min(self.next_sweep))
    }

    /// Numbers this shard's password checks `first`, `first + stride`, … so
    /// that a result from a pool shared by `stride` shards finds its shard
    /// as `id % stride` (`first` < `stride`).
    pub fn with_check_ids(mut self, first: u64, stride: u64) -> Self {
        self.next_check_id = first;
        self.check_id_stride = stride.max(1);
        self
    }

    /// Records voice with `recorder` (spec §5.3).
    pub fn with_recorder(mut self, recorder: Recorder) -> Self {
        self.recorder = Some(recorder);
        self
    }

    /// Next finished recording, if recording is on.
    pub fn poll_recording(&mut self) -> Option<Recording> {
        self.recorder.as_mut().and_then(Recorder::poll)
    }

    /// Recorder counters, if recording is on.
    pub fn recorder_stats(&self) -> Option<&RecorderStats> {
        self.recorder.as_ref().map(Recorder::stats)
    }

    /// Ends idle recordings, and runs the liveness sweep and table clean-ups if due.
    pub fn handle_timeout(&mut self, now: Instant) {
        if let Some(r) = self.recorder.as_mut() {
            r.tick(now);
        }
        if now < self.next_sweep {
            return;
        }
        self.next_sweep = now + self.cfg.sweep_interval();
        let timeout = self.cfg.offline_timeout();
        let expired: Vec<DeviceKey> = self
            .sessions
            .iter()
            .filter(|(_, s)| now.saturating_duration_since(s.last_seen) > timeout)
            .map(|(k, _)| *k)
            .collect();
        for key in expired {
            self.stats.sessions_expired += 1;
            self.drop_session(key);
        }
        self.expire_password_checks(now);
        self.shared.sweep(now);
    }

    /// Replaces the directory (periodic reload from the store). Devices
    /// created in memory but not yet persisted are kept; sessions stay up and
    /// follow their device's new group; every snapshot is rebuilt lazily.
    pub fn replace_directory(&mut self, mut dir: Directory) {
        let pending: Vec<DeviceRecord> = self.dir.devices_missing_from(&dir).cloned().collect();
        for rec in pending {
            dir.put_device(rec);
        }
        self.dir = dir;
        let keys: Vec<DeviceKey> = self.sessions.keys().copied().collect();
        for key in keys {
            let group = self
                .dir
                .device(key.0, key.1)
                .map_or(UNGROUPED, |r| r.group_id);
            // Also republishes a changed receive ban.
            self.move_session(key, group);
        }
        self.stats.snapshot_invalidations += self.shared.invalidate_all();
        self.shared.retain_verified(&self.dir);
    }

    /// Moves a device to `group_id` now (admin action), invalidating only the
    /// old and new domains. Returns `false` if the device is unknown.
    pub fn set_device_group(&mut self, key: DeviceKey, group_id: i64) -> bool {
        let Some(mut rec) = self.dir.device(key.0, key.1).cloned() else {
            return false;
        };
        rec.group_id = group_id;
        self.dir.put_device(rec);
        self.push_event(StoreEvent::DeviceGroup {
            device: key,
            group_id,
        });
        if self.sessions.contains_key(&key) {
            self.move_session(key, group_id);
        }
        true
    }

    /// Handles one datagram from `src` at `now` that passed the [`Ingress`]
    /// rate limits and belongs to this shard.
    pub fn handle_datagram(&mut self, now: Instant, src: SocketAddr, datagram: &[u8]) {
        self.stats.received += 1;
        let packet = match codec::decode(datagram) {
            Ok(p) => p,
            Err(_) => {
                self.stats.decode_errors += 1;
                return;
            }
        };
        match packet.header.packet_type {
            PacketType::JwtAuth => self.stats.ghost_auth_unsupported += 1,
            PacketType::Heartbeat => self.on_heartbeat(now, src, &packet.header, packet.data),
            PacketType::Config => self.on_config(now, src, &packet.header, packet.data),
            PacketType::Text | PacketType::Voice => {
                self.on_media(now, src, &packet.header, datagram)
            }
        }
    }

    fn push_event(&mut self, e: StoreEvent) {
        if self.events.len() >= MAX_PENDING_EVENTS {
            self.stats.store_events_dropped += 1;
            return;
        }
        self.events.push_back(e);
    }

    fn go_online(&mut self, now: Instant, key: DeviceKey, src: SocketAddr, group_id: i64) {
        let s = self.sessions.entry(key).or_insert(Session {
            addr: src,
            last_seen: now,
            group_id,
        });
        s.addr = src;
        s.last_seen = now;
        self.move_session(key, group_id);
    }

    /// Puts an online device under `group_id` and publishes its endpoint and
    /// receive ban to the shared members; the shared state invalidates the
    /// old and new domains only if something changed.
    fn move_session(&mut self, key: DeviceKey, group_id: i64) {
        let Some(s) = self.sessions.get_mut(&key) else {
            return;
        };
        s.group_id = group_id;
        let receives = self
            .dir
            .device(key.0, key.1)
            .is_some_and(|r| !r.disable_recv);
        self.stats.snapshot_invalidations +=
            self.shared
                .set_member(&self.dir, key, group_id, (s.addr, receives));
    }

    fn drop_session(&mut self, key: DeviceKey) {
        if self.sessions.remove(&key).is_some() {
            self.stats.snapshot_invalidations += self.shared.remove_member(&self.dir, key);
        }
    }
}

/// SSIDs outside the normal device ranges 1–99 and 106–254 (spec §2.6).
/// SSID 0 is not a normal device SSID either, so it is refused the same way.
pub fn is_reserved_ssid(ssid: u8) -> bool {
    matches!(ssid, 0 | 100..=105 | 255)
}
