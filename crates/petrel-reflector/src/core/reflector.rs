//! One ingress shard's session core: sessions of its devices, the
//! datagram dispatch, liveness and directory changes (draarl-v1 §2.2, §3).

use std::collections::{BTreeMap, BTreeSet, HashMap, HashSet, VecDeque};
use std::net::SocketAddr;
use std::time::Instant;

use rand::rngs::StdRng;
use rand::{RngCore, SeedableRng};

use super::cross_shard::{CrossShard, LocalTables, Member};
use super::recorder::{Recorder, RecorderStats};
use super::stats::SessionStats;
use super::talk_spurts::{TalkSpurt, TalkSpurts};
use crate::codec::{self, Header, PacketType};
use crate::model::{
    AppLoginCheck, DeviceKey, DeviceKind, DeviceRecord, Directory, Frame, PasswordCheck, Recording,
    SessionConfig, StoreEvent, Transmit, UNGROUPED,
};
use crate::policy::{TokenBucket, UnreachableMemory};

/// Outbound store events kept at most between two polls.
const MAX_PENDING_EVENTS: usize = 4096;
/// New-session reports held for the runtime at most (it polls them every
/// loop turn).
const MAX_NEW_SESSION_REPORTS: usize = 1024;
/// Endpoints an ICMP report ended that one shard remembers at most.
const UNREACHABLE_MEMORY: usize = 4096;
/// How long such an endpoint is remembered: a device whose session a
/// forged report ended logs in again with its next heartbeat, seconds later.
const UNREACHABLE_MEMORY_TTL: std::time::Duration = std::time::Duration::from_secs(600);

/// A Type 1 login waiting for its account check (`core/app_login.rs`).
#[derive(Debug)]
pub(super) struct PendingAppLogin {
    pub(super) src: SocketAddr,
    pub(super) header: Header,
    /// Bytes of the request datagram (the amplification bound).
    pub(super) request_len: usize,
    pub(super) client_instance_id: String,
    pub(super) capabilities: Vec<String>,
    pub(super) started: Instant,
}

#[derive(Debug, Clone)]
pub(super) struct Session {
    pub(super) addr: SocketAddr,
    pub(super) last_seen: Instant,
    pub(super) group_id: i64,
    /// How the session reached the reflector; set once, where the session
    /// is created ([`Reflector::go_online`]'s caller).
    pub(super) kind: DeviceKind,
    /// Type 4 budget of the device (`text_per_minute`, `text_burst`); kept
    /// across logins from new endpoints while the session lasts.
    pub(super) text: TokenBucket,
    /// When this endpoint was first heard at `addr`.
    pub(super) heard_since: Instant,
    /// Whether the endpoint receives fan-out: heard again at least
    /// `receive_after_ms` after `heard_since`, or exempt (see
    /// [`EndpointPolicy`](crate::model::EndpointPolicy)).
    pub(super) receiving: bool,
    /// Whether this endpoint logged in again after an ICMP report had
    /// ended its session: it is alive, so reports for it are trusted only
    /// once it has gone silent, and it receives at once if it did before
    /// the report (see `liveness.rs`).
    pub(super) contradicted_unreachable: bool,
}

/// The random source of session tags and ids; its `Debug` output shows
/// nothing of its state.
pub(super) struct SessionRng(pub(super) Box<dyn RngCore + Send>);

impl std::fmt::Debug for SessionRng {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("SessionRng")
    }
}

/// A heartbeat waiting for its password check.
#[derive(Debug)]
pub(super) struct PendingLogin {
    pub(super) key: DeviceKey,
    pub(super) src: SocketAddr,
    pub(super) header: Header,
    pub(super) data: Vec<u8>,
    /// The hash it is checked against; a different one at completion means
    /// the password changed meanwhile and the result is discarded.
    pub(super) phc: String,
    pub(super) started: Instant,
}

/// The session core of one ingress shard. See the [module docs](super).
#[derive(Debug)]
pub struct Reflector {
    pub(super) cfg: SessionConfig,
    pub(super) dir: Directory,
    /// Sessions of the devices this shard owns.
    pub(super) sessions: HashMap<DeviceKey, Session>,
    /// The same sessions by endpoint (several devices may share one), for
    /// ICMP reports.
    pub(super) by_addr: BTreeSet<(SocketAddr, DeviceKey)>,
    pub(super) shared: Box<dyn CrossShard>,
    /// Logins parked behind a password check, by check id (at most
    /// `password_checks_in_flight` over all shards).
    pub(super) pending_checks: HashMap<u64, PendingLogin>,
    /// Devices with a check in flight.
    pub(super) pending_devices: HashSet<DeviceKey>,
    /// Logins waiting in line for the global Argon2 budget, by ticket (at
    /// most `password_check_queue_max` over all shards).
    pub(super) queued_logins: HashMap<u64, PendingLogin>,
    /// (Device, source) of each login in line.
    pub(super) queued_from: HashSet<(DeviceKey, SocketAddr)>,
    /// When the queued logins are next polled.
    pub(super) next_queue_poll: Instant,
    /// Checks not yet taken by the runtime (a subset of `pending_checks`).
    pub(super) checks_out: VecDeque<PasswordCheck>,
    pub(super) next_check_id: u64,
    pub(super) transmits: VecDeque<Transmit>,
    pub(super) frames: VecDeque<Frame>,
    pub(super) events: VecDeque<StoreEvent>,
    pub(super) next_sweep: Instant,
    /// A wall-clock reading for Type 3 time sync: (instant, Unix ms then).
    pub(super) wall: Option<(Instant, i64)>,
    pub(super) recorder: Option<Recorder>,
    /// Talk spurts for the dashboard's "last heard".
    pub(super) spurts: TalkSpurts,
    /// Endpoints an ICMP report took offline lately.
    pub(super) unreachable: UnreachableMemory,
    /// Type 1 logins waiting for the account store, by check id (at most
    /// `app_logins_in_flight`; ids grow, so the first is the oldest).
    pub(super) pending_app: BTreeMap<u64, PendingAppLogin>,
    /// App login checks not yet taken by the runtime (a subset of `pending_app`).
    pub(super) app_checks_out: VecDeque<AppLoginCheck>,
    pub(super) next_app_id: u64,
    /// Devices whose session began, or moved to a new endpoint, not yet
    /// polled (at most [`MAX_NEW_SESSION_REPORTS`]; more are counted in
    /// `new_session_reports_dropped`).
    pub(super) new_sessions: VecDeque<DeviceKey>,
    /// Draws session tags and ids: a CSPRNG seeded from the OS.
    pub(super) rng: SessionRng,
    pub(super) stats: SessionStats,
}

impl Reflector {
    /// A single-shard core over `dir`. `cfg` must have passed
    /// [`SessionConfig::validate`].
    pub fn new(cfg: SessionConfig, dir: Directory, now: Instant) -> Self {
        let shared = Box::new(LocalTables::new(&cfg, now));
        Self::shard(cfg, dir, now, shared)
    }

    /// One shard among those reaching the cross-shard state through
    /// `shared`. `cfg.password_checks_in_flight` and `cfg.max_sessions`
    /// count every shard's checks and sessions. Check ids are this shard's
    /// own: the runtime answers each check on the queue of the shard that
    /// emitted it.
    pub fn shard(
        cfg: SessionConfig,
        dir: Directory,
        now: Instant,
        shared: Box<dyn CrossShard>,
    ) -> Self {
        Self {
            next_sweep: now + cfg.sweep_interval(),
            cfg,
            dir,
            sessions: HashMap::new(),
            by_addr: BTreeSet::new(),
            shared,
            pending_checks: HashMap::new(),
            pending_devices: HashSet::new(),
            queued_logins: HashMap::new(),
            queued_from: HashSet::new(),
            next_queue_poll: now,
            checks_out: VecDeque::new(),
            next_check_id: 0,
            transmits: VecDeque::new(),
            frames: VecDeque::new(),
            events: VecDeque::new(),
            wall: None,
            recorder: None,
            spurts: TalkSpurts::default(),
            unreachable: UnreachableMemory::new(UNREACHABLE_MEMORY, UNREACHABLE_MEMORY_TTL),
            pending_app: BTreeMap::new(),
            app_checks_out: VecDeque::new(),
            next_app_id: 0,
            new_sessions: VecDeque::new(),
            rng: SessionRng(Box::new(StdRng::from_entropy())),
            stats: SessionStats::default(),
        }
    }

    /// Draws session tags and ids from `rng` instead of the OS-seeded
    /// CSPRNG (deterministic tests and fuzzing).
    pub fn with_rng(mut self, rng: Box<dyn RngCore + Send>) -> Self {
        self.rng = SessionRng(rng);
        self
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

    /// Whether a device is online, and at which endpoint. A device whose
    /// endpoint was evicted from a full prefix is not (its session, still
    /// counted in [`Reflector::online`], ends at its next heartbeat).
    pub fn session_addr(&self, key: DeviceKey) -> Option<SocketAddr> {
        self.sessions
            .get(&key)
            .filter(|s| self.shared.holds_endpoint(key, s.addr))
            .map(|s| s.addr)
    }

    /// Whether an online device receives fan-out (see
    /// [`EndpointPolicy`](crate::model::EndpointPolicy)); `None` if offline
    /// or evicted as for [`Reflector::session_addr`].
    pub fn session_receives(&self, key: DeviceKey) -> Option<bool> {
        self.sessions
            .get(&key)
            .filter(|s| self.shared.holds_endpoint(key, s.addr))
            .map(|s| s.receiving)
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

    /// Next device whose session began here or moved to a new endpoint: a
    /// centre revokes the session its edges may hold for the same device,
    /// so one device has one session across nodes (draarl-interconnect
    /// §3.8, `session_migrated`).
    pub fn poll_new_session(&mut self) -> Option<DeviceKey> {
        self.new_sessions.pop_front()
    }

    /// Ends the session of `key` here because the device logged in through
    /// an edge of this centre (draarl-interconnect §3.8: the later login
    /// replaces the earlier one); whether there was one.
    pub fn end_migrated_session(&mut self, key: DeviceKey) -> bool {
        if !self.sessions.contains_key(&key) {
            return false;
        }
        self.drop_session(key);
        self.stats.sessions_migrated += 1;
        true
    }

    pub(super) fn report_new_session(&mut self, key: DeviceKey) {
        if self.new_sessions.len() >= MAX_NEW_SESSION_REPORTS {
            self.stats.new_session_reports_dropped += 1;
            return;
        }
        self.new_sessions.push_back(key);
    }

    /// Next talk spurt that started or ended (see `talk_spurts.rs`).
    pub fn poll_talk_spurt(&mut self) -> Option<TalkSpurt> {
        self.spurts.poll()
    }

    /// When [`Reflector::handle_timeout`] should next run.
    pub fn poll_timeout(&self) -> Instant {
        let rec = self.recorder.as_ref().and_then(Recorder::next_deadline);
        let queue = (!self.queued_logins.is_empty()).then_some(self.next_queue_poll);
        [rec, queue, self.spurts.next_deadline()]
            .into_iter()
            .flatten()
            .fold(self.next_sweep, Instant::min)
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

    /// Ends idle recordings and talk spurts, starts the checks of queued logins whose turn
    /// came, and runs the liveness sweep and table clean-ups if due.
    pub fn handle_timeout(&mut self, now: Instant) {
        if let Some(r) = self.recorder.as_mut() {
            r.tick(now);
        }
        self.spurts.tick(now, &mut self.stats);
        self.poll_queued_logins(now);
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
        let gone = self.shared.ghosts().expire(now, timeout);
        if !gone.is_empty() {
            self.stats.ghost_sessions_expired += gone.len() as u64;
            let mut groups: Vec<i64> = gone
                .iter()
                .flat_map(|s| s.routing.rx_group_ids.iter().copied())
                .collect();
            groups.sort_unstable();
            groups.dedup();
            self.stats.snapshot_invalidations += self.shared.invalidate_groups(&self.dir, &groups);
        }
        self.expire_password_checks(now);
        self.expire_app_logins(now);
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
        self.shared.logins().retain_verified(&self.dir);
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

    /// Handles one datagram from `src` at `now` that passed the [`Ingress`](super::Ingress)
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
        let h = &packet.header;
        if h.packet_type != PacketType::JwtAuth && Self::is_app_path(h.ssid) {
            return self.on_app_packet(now, src, h, packet.data, datagram);
        }
        match packet.header.packet_type {
            PacketType::JwtAuth => self.on_app_login(now, src, &packet.header, packet.data),
            PacketType::Heartbeat => self.on_heartbeat(now, src, &packet.header, packet.data),
            PacketType::Config => self.on_config(now, src, &packet.header, packet.data),
            PacketType::Text | PacketType::Voice => {
                self.on_media(now, src, &packet.header, datagram)
            }
        }
    }

    pub(super) fn push_event(&mut self, e: StoreEvent) {
        if self.events.len() >= MAX_PENDING_EVENTS {
            self.stats.store_events_dropped += 1;
            return;
        }
        self.events.push_back(e);
    }

    /// Marks `key` online at `src` (heard now) in `group_id`; a new
    /// session is of `kind`. A new endpoint starts not receiving unless
    /// exempt; one heard again late enough starts receiving (see
    /// `liveness.rs`).
    pub(super) fn go_online(
        &mut self,
        now: Instant,
        key: DeviceKey,
        src: SocketAddr,
        group_id: i64,
        kind: DeviceKind,
    ) {
        let at_once = self.cfg.endpoints.receive_after_ms == 0 || self.cfg.endpoints.exempt(src);
        // A new session, or one at a new endpoint (a device back from an
        // edge whose session here was not ended).
        let mut moved = false;
        match self.sessions.get_mut(&key) {
            Some(s) if s.addr == src => s.last_seen = now,
            Some(s) => {
                moved = true;
                self.by_addr.remove(&(s.addr, key));
                self.by_addr.insert((src, key));
                s.addr = src;
                s.last_seen = now;
                s.group_id = group_id;
                s.heard_since = now;
                s.receiving = at_once;
                let was = self.unreachable.take(src, now);
                s.contradicted_unreachable = was.is_some();
                s.receiving |= was == Some(true);
                self.stats.unreachable_contradicted += u64::from(was.is_some());
            }
            None => {
                moved = true;
                let was = self.unreachable.take(src, now);
                self.stats.unreachable_contradicted += u64::from(was.is_some());
                self.by_addr.insert((src, key));
                self.sessions.insert(
                    key,
                    Session {
                        addr: src,
                        last_seen: now,
                        group_id,
                        kind,
                        text: TokenBucket::with_burst(
                            f64::from(self.cfg.text_per_minute) / 60.0,
                            self.cfg.text_burst,
                            now,
                        ),
                        heard_since: now,
                        receiving: at_once || was == Some(true),
                        contradicted_unreachable: was.is_some(),
                    },
                );
            }
        }
        if moved {
            self.report_new_session(key);
        }
        self.heard(now, key);
        self.move_session(key, group_id);
    }

    /// Puts an online device under `group_id` and publishes its endpoint and
    /// receive ban to the shared members; the shared state invalidates the
    /// old and new domains only if something changed.
    pub(super) fn move_session(&mut self, key: DeviceKey, group_id: i64) {
        let Some(s) = self.sessions.get_mut(&key) else {
            return;
        };
        s.group_id = group_id;
        let receives = s.receiving
            && self
                .dir
                .device(key.0, key.1)
                .is_some_and(|r| !r.disable_recv);
        let member = Member {
            addr: s.addr,
            kind: s.kind,
            receives,
        };
        self.stats.snapshot_invalidations +=
            self.shared.set_member(&self.dir, key, group_id, member);
    }

    pub(super) fn drop_session(&mut self, key: DeviceKey) {
        if let Some(s) = self.sessions.remove(&key) {
            self.spurts.end(key, &mut self.stats);
            self.by_addr.remove(&(s.addr, key));
            self.stats.snapshot_invalidations += self.shared.remove_member(&self.dir, key);
        }
    }
}
