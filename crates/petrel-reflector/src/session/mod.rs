//! The sans-IO session core: feed it `(now, source, datagram)`, then poll it
//! for replies, fan-out frames and store events. It owns device sessions,
//! authentication, policies and receiver snapshots (draarl-v1 §2.2, §3).
//!
//! It never reads a clock, touches a socket or awaits the database.

mod config;
mod password;
mod replies;
mod snapshot;
mod stats;

#[cfg(test)]
mod tests;

use std::collections::{HashMap, HashSet, VecDeque};
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::{Duration, Instant};

use subtle::ConstantTimeEq;

pub(crate) use config::check;
pub use config::{ConfigRangeError, SessionConfig};
pub use password::{
    hash_device_password, is_valid_device_password, verify_device_password, HashCost, PasswordError,
};
pub use replies::RejectReason;
pub use snapshot::{partition_of, Snapshot};
pub use stats::SessionStats;

use crate::codec::{
    self, ConfigCommand, ForwardIdentity, Header, HeartbeatData, Mac, PacketType, PASSWORD_LEN,
};
use crate::directory::{DeviceRecord, Directory, UNGROUPED};
use crate::policy::{BanCheck, BanLadder, FloorDecision, FloorTable, RateDecision, RateLimiter};

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
}

#[derive(Debug, Clone, Copy)]
struct Session {
    addr: SocketAddr,
    last_seen: Instant,
    group_id: i64,
}

/// The session core. See the module docs.
#[derive(Debug)]
pub struct Reflector {
    cfg: SessionConfig,
    dir: Directory,
    sessions: HashMap<DeviceKey, Session>,
    /// Online devices per group, for snapshot builds.
    members: HashMap<i64, HashSet<DeviceKey>>,
    snapshots: HashMap<i64, Arc<Snapshot>>,
    /// Last verified password per user, so only the first login of a user
    /// pays for Argon2: (PHC string it was checked against, padded password).
    verified: HashMap<i64, (String, [u8; PASSWORD_LEN])>,
    rate: RateLimiter,
    bans: BanLadder,
    floors: FloorTable,
    transmits: VecDeque<Transmit>,
    frames: VecDeque<Frame>,
    events: VecDeque<StoreEvent>,
    next_sweep: Instant,
    /// A wall-clock reading for Type 3 time sync: (instant, Unix ms then).
    wall: Option<(Instant, i64)>,
    stats: SessionStats,
}

impl Reflector {
    /// A core over `dir`. `cfg` must have passed [`SessionConfig::validate`].
    pub fn new(cfg: SessionConfig, dir: Directory, now: Instant) -> Self {
        Self {
            rate: RateLimiter::new(cfg.per_ip_pps, cfg.per_endpoint_pps, cfg.rate_table_max),
            bans: BanLadder::new(cfg.ban_table_max),
            floors: FloorTable::new(Duration::from_millis(cfg.floor_hold_ms)),
            next_sweep: now + cfg.sweep_interval(),
            cfg,
            dir,
            sessions: HashMap::new(),
            members: HashMap::new(),
            snapshots: HashMap::new(),
            verified: HashMap::new(),
            transmits: VecDeque::new(),
            frames: VecDeque::new(),
            events: VecDeque::new(),
            wall: None,
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

    /// Online devices.
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

    fn unix_ms(&self, now: Instant) -> Option<i64> {
        let (at, ms) = self.wall?;
        let ahead =
            i64::try_from(now.saturating_duration_since(at).as_millis()).unwrap_or(i64::MAX);
        let behind =
            i64::try_from(at.saturating_duration_since(now).as_millis()).unwrap_or(i64::MAX);
        Some(ms.saturating_add(ahead).saturating_sub(behind))
    }

    /// Queues a server→device Type 3 packet (spec §2.7: identity from the
    /// store, password empty, DevModel 0, DMRID 0).
    fn send_config(&mut self, now: Instant, dst: SocketAddr, key: DeviceKey, cmd: &ConfigCommand) {
        let cmd = match cmd {
            ConfigCommand::TimeSync(_) => match self.unix_ms(now) {
                Some(ms) => ConfigCommand::TimeSync(ms),
                None => return,
            },
            other => other.clone(),
        };
        let (Some(user), Ok(data)) = (self.dir.user(key.0), cmd.encode()) else {
            return;
        };
        let mut h = Header::new(PacketType::Config);
        h.set_username(&user.name);
        h.set_callsign(&user.callsign);
        h.ssid = key.1;
        if let Ok(payload) = codec::encode(&h, &data) {
            self.stats.config_sent += 1;
            self.transmits.push_back(Transmit { dst, payload });
        }
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
        self.next_sweep
    }

    /// Runs the liveness sweep and table clean-ups if due.
    pub fn handle_timeout(&mut self, now: Instant) {
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
        self.rate.sweep(now);
        self.bans.sweep(now);
        self.floors.sweep(now);
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
            self.move_session(key, group);
        }
        self.stats.snapshot_invalidations += self.snapshots.len() as u64;
        self.snapshots.clear();
        self.verified.retain(|uid, (phc, _)| {
            self.dir
                .user(*uid)
                .and_then(|u| u.device_password_hash.as_deref())
                == Some(phc.as_str())
        });
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

    /// Handles one received datagram from `src` at `now`.
    pub fn handle_datagram(&mut self, now: Instant, src: SocketAddr, datagram: &[u8]) {
        self.stats.received += 1;
        match self.rate.check(src, now) {
            RateDecision::Allow => {}
            RateDecision::Limited => {
                self.stats.rate_limit_drops += 1;
                return;
            }
            RateDecision::TableFull => {
                self.stats.rate_table_full_drops += 1;
                return;
            }
        }
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

    fn reject(&mut self, src: SocketAddr, h: &Header, reason: RejectReason) {
        match reason.code() {
            1 => self.stats.rejects_conflict += 1,
            2 => self.stats.rejects_reserved_ssid += 1,
            _ => self.stats.rejects_auth += 1,
        }
        self.transmits.push_back(Transmit {
            dst: src,
            payload: replies::heartbeat_reject(h, reason),
        });
    }

    fn on_heartbeat(&mut self, now: Instant, src: SocketAddr, h: &Header, data: &[u8]) {
        self.stats.heartbeats += 1;
        if is_reserved_ssid(h.ssid) {
            if h.reserved != 0 {
                self.stats.reserved_tag_drops += 1;
            } else {
                self.reject(src, h, RejectReason::ReservedSsid);
            }
            return;
        }
        let Some(name) = h.username_str().map(str::to_owned) else {
            self.reject(src, h, RejectReason::UserNotFound);
            return;
        };
        let Some(user) = self.dir.user_by_name(&name).cloned() else {
            self.auth_failure(now, src, h, &name, RejectReason::UserNotFound);
            return;
        };
        let key = (user.id, h.ssid);
        let hb = HeartbeatData::parse(data).unwrap_or_default();
        let timeout = self.cfg.offline_timeout();
        let same_endpoint = self.sessions.get(&key).is_some_and(|s| {
            s.addr == src && now.saturating_duration_since(s.last_seen) <= timeout
        });
        if !same_endpoint {
            if let Err(reason) = self.authenticate(now, src, h, &user) {
                self.reject(src, h, reason);
                return;
            }
            if let Some(s) = self.sessions.get(&key) {
                let active = now.saturating_duration_since(s.last_seen) <= timeout;
                let stored_mac = self.dir.device(key.0, key.1).and_then(|r| r.mac);
                let mac_matches = hb.mac.is_some() && hb.mac == stored_mac;
                let android_without_mac = h.dev_model == DEV_MODEL_ANDROID && hb.mac.is_none();
                if active && !mac_matches && !android_without_mac {
                    self.reject(src, h, RejectReason::ConflictOnline);
                    return;
                }
            } else if self.sessions.len() >= self.cfg.max_sessions {
                self.reject(src, h, RejectReason::ServerFull);
                return;
            }
            self.stats.logins += 1;
        }
        let came_online = !self.sessions.contains_key(&key);
        let rec = self.update_device_record(key, &user, h, hb.mac);
        self.go_online(now, key, src, rec.group_id);
        self.transmits.push_back(Transmit {
            dst: src,
            payload: replies::heartbeat_success(h, &user.callsign, data),
        });
        // Link boxes (models 1 and 2) are asked for their settings and get
        // the time when they come online (spec §2.8 flows).
        if came_online && matches!(rec.dev_model, 1 | 2) {
            self.send_config(now, src, key, &ConfigCommand::Query);
            self.send_config(now, src, key, &ConfigCommand::TimeSync(0));
        }
    }

    /// Full password check (spec §3.1 step 2), with the ban ladder of §3.2.
    fn authenticate(
        &mut self,
        now: Instant,
        src: SocketAddr,
        h: &Header,
        user: &crate::directory::UserRecord,
    ) -> Result<(), RejectReason> {
        if let BanCheck::Blocked(_) = self.bans.check(src.ip(), &user.name, now) {
            return Err(RejectReason::TooManyFailures);
        }
        if !user.enabled {
            return Err(RejectReason::UserDisabled);
        }
        let Some(phc) = user.device_password_hash.as_deref() else {
            return Err(RejectReason::PasswordNotSet);
        };
        let pw = h.password_bytes();
        let ok =
            user.approved && is_valid_device_password(pw) && self.password_matches(user.id, phc, h);
        if !ok {
            self.bans.record_failure(src.ip(), &user.name, now);
            return Err(RejectReason::InvalidPassword);
        }
        self.bans.record_success(src.ip(), &user.name);
        Ok(())
    }

    fn password_matches(&mut self, user_id: i64, phc: &str, h: &Header) -> bool {
        if let Some((cached_phc, cached_pw)) = self.verified.get(&user_id) {
            if cached_phc == phc && bool::from(cached_pw.ct_eq(&h.device_password)) {
                return true;
            }
        }
        let ok = verify_device_password(phc, h.password_bytes());
        if ok {
            self.verified
                .insert(user_id, (phc.to_owned(), h.device_password));
        }
        ok
    }

    fn auth_failure(
        &mut self,
        now: Instant,
        src: SocketAddr,
        h: &Header,
        name: &str,
        reason: RejectReason,
    ) {
        if let BanCheck::Blocked(_) = self.bans.check(src.ip(), name, now) {
            self.reject(src, h, RejectReason::TooManyFailures);
            return;
        }
        self.bans.record_failure(src.ip(), name, now);
        self.reject(src, h, reason);
    }

    /// Loads or creates the device record and applies the reported model/MAC
    /// (spec §2.5, §3.1 step 4); emits a store event when it changed.
    fn update_device_record(
        &mut self,
        key: DeviceKey,
        user: &crate::directory::UserRecord,
        h: &Header,
        mac: Option<Mac>,
    ) -> DeviceRecord {
        let model_valid = !(108..=150).contains(&h.dev_model);
        let existing = self.dir.device(key.0, key.1).cloned();
        let mut rec = existing.clone().unwrap_or_else(|| DeviceRecord {
            owner_id: user.id,
            ssid: key.1,
            dev_model: 0,
            dmrid: user.dmrid,
            group_id: self.default_group_for(user),
            disable_send: false,
            disable_recv: false,
            mac: None,
        });
        if model_valid {
            rec.dev_model = h.dev_model;
        }
        if mac.is_some() {
            rec.mac = mac;
        }
        if existing.as_ref() != Some(&rec) {
            self.dir.put_device(rec.clone());
            self.push_event(StoreEvent::DeviceUpsert(rec.clone()));
        }
        rec
    }

    fn default_group_for(&self, user: &crate::directory::UserRecord) -> i64 {
        match self.dir.group(user.default_group_id) {
            Some(g) if g.enabled && !g.is_virtual => g.id,
            _ => UNGROUPED,
        }
    }

    fn go_online(&mut self, now: Instant, key: DeviceKey, src: SocketAddr, group_id: i64) {
        let changed = match self.sessions.get_mut(&key) {
            Some(s) => {
                let moved = s.addr != src;
                s.addr = src;
                s.last_seen = now;
                moved
            }
            None => {
                self.sessions.insert(
                    key,
                    Session {
                        addr: src,
                        last_seen: now,
                        group_id: UNGROUPED,
                    },
                );
                true
            }
        };
        if changed {
            self.invalidate_group(self.sessions.get(&key).map_or(UNGROUPED, |s| s.group_id));
        }
        self.move_session(key, group_id);
    }

    /// Puts an online device's membership under `group_id`, invalidating the
    /// old and new domains if it moved.
    fn move_session(&mut self, key: DeviceKey, group_id: i64) {
        let Some(s) = self.sessions.get_mut(&key) else {
            return;
        };
        let old = std::mem::replace(&mut s.group_id, group_id);
        let present = self
            .members
            .get(&group_id)
            .is_some_and(|m| m.contains(&key));
        if old == group_id && present {
            return;
        }
        if let Some(m) = self.members.get_mut(&old) {
            m.remove(&key);
            if m.is_empty() {
                self.members.remove(&old);
            }
        }
        self.members.entry(group_id).or_default().insert(key);
        self.invalidate_group(old);
        self.invalidate_group(group_id);
    }

    fn drop_session(&mut self, key: DeviceKey) {
        if let Some(s) = self.sessions.remove(&key) {
            if let Some(m) = self.members.get_mut(&s.group_id) {
                m.remove(&key);
                if m.is_empty() {
                    self.members.remove(&s.group_id);
                }
            }
            self.invalidate_group(s.group_id);
        }
    }

    fn invalidate_group(&mut self, group_id: i64) {
        if let Some(d) = self.dir.domain_of(group_id) {
            if self.snapshots.remove(&d.id).is_some() {
                self.stats.snapshot_invalidations += 1;
            }
        }
    }

    /// The online device a Type 3/4/5 packet names, if it came from that
    /// device's authenticated endpoint (spec §9: bind data to the endpoint).
    fn bound_device(&mut self, now: Instant, src: SocketAddr, h: &Header) -> Option<DeviceKey> {
        let user_id = h
            .username_str()
            .and_then(|n| self.dir.user_by_name(n))
            .filter(|u| u.enabled)
            .map(|u| u.id);
        let key = user_id.map(|id| (id, h.ssid));
        let Some(s) = key.and_then(|k| self.sessions.get_mut(&k)) else {
            self.stats.unknown_device_drops += 1;
            return None;
        };
        if s.addr != src {
            self.stats.endpoint_mismatch_drops += 1;
            return None;
        }
        s.last_seen = now;
        key
    }

    fn on_config(&mut self, now: Instant, src: SocketAddr, h: &Header, data: &[u8]) {
        let Some(key) = self.bound_device(now, src, h) else {
            return;
        };
        match ConfigCommand::parse(data) {
            Ok(ConfigCommand::Set(items)) => {
                self.stats.config_packets += 1;
                self.push_event(StoreEvent::DeviceConfig { device: key, items });
                // A time sync acknowledges a report (spec §2.8).
                self.send_config(now, src, key, &ConfigCommand::TimeSync(0));
            }
            Ok(_) => self.stats.config_packets += 1,
            Err(_) => self.stats.config_errors += 1,
        }
    }

    fn on_media(&mut self, now: Instant, src: SocketAddr, h: &Header, datagram: &[u8]) {
        let Some(key) = self.bound_device(now, src, h) else {
            return;
        };
        let Some(rec) = self.dir.device(key.0, key.1) else {
            self.stats.non_forwarding_drops += 1;
            return;
        };
        if rec.disable_send {
            self.stats.send_ban_drops += 1;
            return;
        }
        let Some(domain_id) = self.dir.domain_of(rec.group_id).map(|d| d.id) else {
            self.stats.non_forwarding_drops += 1;
            return;
        };
        let voice = h.packet_type == PacketType::Voice;
        if voice && self.floors.claim(domain_id, key, now) == FloorDecision::Busy {
            self.stats.floor_busy_drops += 1;
            return;
        }
        let (Some(user), Some(rec)) = (self.dir.user(key.0), self.dir.device(key.0, key.1)) else {
            return;
        };
        let id = ForwardIdentity::new(
            &user.name,
            &user.callsign,
            rec.dev_model,
            rec.ssid,
            rec.dmrid,
        );
        let mut packet = datagram.to_vec();
        if !codec::rewrite_forward(&mut packet, &id) {
            return;
        }
        let snapshot = self.snapshot(domain_id);
        if voice {
            self.stats.voice_frames += 1;
        } else {
            self.stats.text_frames += 1;
        }
        self.frames.push_back(Frame {
            created: now,
            packet: packet.into(),
            snapshot,
            exclude: src,
        });
    }

    fn snapshot(&mut self, domain_id: i64) -> Arc<Snapshot> {
        if let Some(s) = self.snapshots.get(&domain_id) {
            self.stats.snapshot_hits += 1;
            return Arc::clone(s);
        }
        self.stats.snapshot_rebuilds += 1;
        let groups = self
            .dir
            .domain_of(domain_id)
            .map(|d| Arc::clone(&d.groups))
            .unwrap_or_else(|| Arc::from(Vec::new()));
        let mut endpoints = Vec::new();
        for g in groups.iter() {
            for key in self.members.get(g).into_iter().flatten() {
                let recv_ok = self
                    .dir
                    .device(key.0, key.1)
                    .is_some_and(|r| !r.disable_recv);
                if let (true, Some(s)) = (recv_ok, self.sessions.get(key)) {
                    endpoints.push(s.addr);
                }
            }
        }
        let snap = Arc::new(Snapshot::build(domain_id, endpoints, self.cfg.partitions));
        self.snapshots.insert(domain_id, Arc::clone(&snap));
        snap
    }
}

/// SSIDs outside the normal device ranges 1–99 and 106–254 (spec §2.6).
/// SSID 0 is not a normal device SSID either, so it is refused the same way.
pub fn is_reserved_ssid(ssid: u8) -> bool {
    matches!(ssid, 0 | 100..=105 | 255)
}
