//! State the ingress shards share (draarl-v1 §4.1, §4.2): each shard owns
//! the sessions of the devices hashed to it, but a domain's receivers, its
//! floor, the failed-auth ladder of a username (whose SSIDs land on
//! different shards), the Argon2 budget, the verified-password cache (so a
//! user's devices on every shard share one check) and the session count
//! span shards.
//!
//! One mutex guards it. Every voice frame takes it once (floor and snapshot
//! together); logins take it a few times. Snapshots are cached per domain
//! and invalidated per domain, so a change in one domain never rebuilds or
//! drops another's.

use std::collections::HashMap;
use std::net::{IpAddr, SocketAddr};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::time::{Duration, Instant};

use subtle::ConstantTimeEq;

use super::{DeviceKey, SessionConfig, Snapshot};
use crate::codec::PASSWORD_LEN;
use crate::directory::Directory;
use crate::policy::{BanCheck, BanLadder, FloorDecision, FloorTable, TokenBucket};

/// Where an online device receives, as its shard last published it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Member {
    addr: SocketAddr,
    /// False under a receive ban: the device stays online but is left out.
    receives: bool,
}

/// How a snapshot request was served.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum SnapshotSource {
    /// From the cache.
    Cached,
    /// Rebuilt from the members.
    Rebuilt,
}

#[derive(Debug)]
struct Inner {
    /// Online devices per group, with the group they are in.
    members: HashMap<i64, HashMap<DeviceKey, Member>>,
    /// Group each online device is a member of.
    group_of: HashMap<DeviceKey, i64>,
    snapshots: HashMap<i64, Arc<Snapshot>>,
    floors: FloorTable,
    bans: BanLadder,
    password_checks: TokenBucket,
    /// Last verified password per user, so only the first login of a user
    /// pays for Argon2: (PHC string it was checked against, padded password).
    /// At most one entry per user of the directory.
    verified: HashMap<i64, (String, [u8; PASSWORD_LEN])>,
    /// Checks in flight on any shard: (user id, PHC, padded password). At
    /// most the shards' in-flight bounds together.
    checking: Vec<(i64, String, [u8; PASSWORD_LEN])>,
}

/// A user's password as offered in a heartbeat, for the credential cache.
pub(super) struct Credential<'a> {
    pub user_id: i64,
    pub phc: &'a str,
    pub password: &'a [u8; PASSWORD_LEN],
}

impl Credential<'_> {
    fn matches(&self, user_id: i64, phc: &str, password: &[u8; PASSWORD_LEN]) -> bool {
        user_id == self.user_id && phc == self.phc && bool::from(password.ct_eq(self.password))
    }
}

/// Cross-shard state; see the module docs. Cheap to share as `Arc`.
#[derive(Debug)]
pub struct SharedState {
    partitions: usize,
    inner: Mutex<Inner>,
}

impl SharedState {
    /// Empty state for shards running under `cfg` (validated).
    pub fn new(cfg: &SessionConfig, now: Instant) -> Self {
        Self {
            partitions: cfg.partitions,
            inner: Mutex::new(Inner {
                members: HashMap::new(),
                group_of: HashMap::new(),
                snapshots: HashMap::new(),
                floors: FloorTable::new(Duration::from_millis(cfg.floor_hold_ms)),
                bans: BanLadder::new(cfg.ban_table_max),
                password_checks: TokenBucket::new(cfg.password_checks_per_s, now),
                verified: HashMap::new(),
                checking: Vec::new(),
            }),
        }
    }

    fn lock(&self) -> MutexGuard<'_, Inner> {
        self.inner.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Online devices over all shards.
    pub fn online(&self) -> usize {
        self.lock().group_of.len()
    }

    /// Publishes that `key` is online at `addr` in `group_id`; returns the
    /// groups whose domains must be invalidated (none if nothing changed).
    /// `dir` resolves groups to domains.
    pub(super) fn set_member(
        &self,
        dir: &Directory,
        key: DeviceKey,
        group_id: i64,
        member: (SocketAddr, bool),
    ) -> u64 {
        let m = Member {
            addr: member.0,
            receives: member.1,
        };
        let mut g = self.lock();
        let old_group = g.group_of.insert(key, group_id);
        let unchanged = old_group == Some(group_id)
            && g.members.get(&group_id).and_then(|ms| ms.get(&key)) == Some(&m);
        if unchanged {
            return 0;
        }
        let mut invalidated = 0;
        if let Some(old) = old_group {
            g.remove_from(old, key);
            invalidated += g.invalidate(dir, old);
        }
        g.members.entry(group_id).or_default().insert(key, m);
        invalidated + g.invalidate(dir, group_id)
    }

    /// Publishes that `key` went offline; returns the invalidations made.
    pub(super) fn remove_member(&self, dir: &Directory, key: DeviceKey) -> u64 {
        let mut g = self.lock();
        match g.group_of.remove(&key) {
            Some(old) => {
                g.remove_from(old, key);
                g.invalidate(dir, old)
            }
            None => 0,
        }
    }

    /// Drops every cached snapshot (directory reload); returns how many.
    pub(super) fn invalidate_all(&self) -> u64 {
        let mut g = self.lock();
        let n = g.snapshots.len() as u64;
        g.snapshots.clear();
        n
    }

    /// Claims the floor of `domain_id` for a voice frame of `talker` and,
    /// if granted, returns the domain's receivers.
    pub(super) fn voice_targets(
        &self,
        dir: &Directory,
        domain_id: i64,
        talker: DeviceKey,
        now: Instant,
    ) -> Option<(Arc<Snapshot>, SnapshotSource)> {
        let mut g = self.lock();
        if g.floors.claim(domain_id, talker, now) == FloorDecision::Busy {
            return None;
        }
        Some(g.snapshot(dir, domain_id, self.partitions))
    }

    /// The receivers of `domain_id` (text bypasses the floor).
    pub(super) fn targets(
        &self,
        dir: &Directory,
        domain_id: i64,
    ) -> (Arc<Snapshot>, SnapshotSource) {
        self.lock().snapshot(dir, domain_id, self.partitions)
    }

    /// Ban ladder lookup (spec §3.2).
    pub(super) fn ban_check(&self, ip: IpAddr, username: &str, now: Instant) -> BanCheck {
        self.lock().bans.check(ip, username, now)
    }

    /// Counts a failed authentication on the ladder.
    pub(super) fn record_failure(&self, ip: IpAddr, username: &str, now: Instant) {
        self.lock().bans.record_failure(ip, username, now);
    }

    /// Clears the ladder of `(ip, username)` after a success.
    pub(super) fn record_success(&self, ip: IpAddr, username: &str) {
        self.lock().bans.record_success(ip, username);
    }

    /// Takes one Argon2 verification from the per-second budget.
    pub(super) fn take_password_check(&self, now: Instant) -> bool {
        self.lock().password_checks.take(now)
    }

    /// Whether `c` was verified before (against the same PHC string).
    pub(super) fn is_verified(&self, c: &Credential<'_>) -> bool {
        self.lock()
            .verified
            .get(&c.user_id)
            .is_some_and(|(phc, pw)| c.matches(c.user_id, phc, pw))
    }

    /// Remembers `c` as verified.
    pub(super) fn set_verified(&self, c: &Credential<'_>) {
        self.lock()
            .verified
            .insert(c.user_id, (c.phc.to_owned(), *c.password));
    }

    /// Forgets verified passwords whose user or hash changed in `dir`.
    pub(super) fn retain_verified(&self, dir: &Directory) {
        self.lock().verified.retain(|uid, (phc, _)| {
            dir.user(*uid)
                .and_then(|u| u.device_password_hash.as_deref())
                == Some(phc.as_str())
        });
    }

    /// Whether a check of the same credential is in flight on any shard.
    pub(super) fn is_checking(&self, c: &Credential<'_>) -> bool {
        self.lock()
            .checking
            .iter()
            .any(|(uid, phc, pw)| c.matches(*uid, phc, pw))
    }

    /// Password checks in flight on every shard.
    pub(super) fn checks_in_flight(&self) -> usize {
        self.lock().checking.len()
    }

    /// Records that a check of `c` is in flight.
    pub(super) fn begin_check(&self, c: &Credential<'_>) {
        self.lock()
            .checking
            .push((c.user_id, c.phc.to_owned(), *c.password));
    }

    /// Records that one check of `c` ended (answered or abandoned).
    pub(super) fn end_check(&self, c: &Credential<'_>) {
        let mut g = self.lock();
        if let Some(i) = g
            .checking
            .iter()
            .position(|(uid, phc, pw)| c.matches(*uid, phc, pw))
        {
            g.checking.swap_remove(i);
        }
    }

    /// Forgets expired bans and idle floors.
    pub(super) fn sweep(&self, now: Instant) {
        let mut g = self.lock();
        g.bans.sweep(now);
        g.floors.sweep(now);
    }
}

impl Inner {
    fn remove_from(&mut self, group_id: i64, key: DeviceKey) {
        if let Some(ms) = self.members.get_mut(&group_id) {
            ms.remove(&key);
            if ms.is_empty() {
                self.members.remove(&group_id);
            }
        }
    }

    fn invalidate(&mut self, dir: &Directory, group_id: i64) -> u64 {
        dir.domain_of(group_id)
            .and_then(|d| self.snapshots.remove(&d.id))
            .map_or(0, |_| 1)
    }

    fn snapshot(
        &mut self,
        dir: &Directory,
        domain_id: i64,
        partitions: usize,
    ) -> (Arc<Snapshot>, SnapshotSource) {
        if let Some(s) = self.snapshots.get(&domain_id) {
            return (Arc::clone(s), SnapshotSource::Cached);
        }
        let groups = dir
            .domain_of(domain_id)
            .map(|d| Arc::clone(&d.groups))
            .unwrap_or_else(|| Arc::from(Vec::new()));
        let endpoints = groups
            .iter()
            .filter_map(|g| self.members.get(g))
            .flat_map(HashMap::values)
            .filter(|m| m.receives)
            .map(|m| m.addr);
        let snap = Arc::new(Snapshot::build(domain_id, endpoints, partitions));
        self.snapshots.insert(domain_id, Arc::clone(&snap));
        (snap, SnapshotSource::Rebuilt)
    }
}
