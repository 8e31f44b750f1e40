//! State the ingress shards share (draarl-v1 §4.1, §4.2), as sans-IO tables
//! and the port through which a shard reaches them.
//!
//! Each shard owns the sessions of the devices hashed to it, but some state
//! spans shards: a domain's receivers and its floor (talkers of one domain
//! sit on any shard), the failed-auth ladder of a username (whose SSIDs land
//! on different shards), the Argon2 budget, the verified-password cache (so
//! a user's devices on every shard share one check) and the session count.
//!
//! The tables are plain data with `&mut self` methods, split by how often
//! they are touched:
//! - [`DomainCache`]: per domain, the cached receiver [`Snapshot`] and the
//!   floor. The voice path touches only this, for the frame's own domain.
//! - [`Membership`]: which online device receives where, and the
//!   per-account and per-network endpoint caps. Touched when a device
//!   comes online, moves or leaves, and when a snapshot is rebuilt.
//! - [`LoginGuard`]: the ban ladder, the Argon2 budget (per source prefix,
//!   per prefix and user, and global), the verified cache
//!   and the checks in flight. Touched by logins only.
//!
//! A shard reaches them through [`CrossShard`], given to it at construction,
//! so who owns the tables is the runtime's choice: [`LocalTables`] owns them
//! outright for a single shard (and for tests); the server's
//! [`SharedTables`](crate::runtime::SharedTables) shares them between shards
//! running in parallel, with one lock per stripe of domains, so voice frames
//! of different domains never wait for each other and no lock is taken by
//! every frame of every domain.
//!
//! Snapshots are cached per domain and invalidated per domain, so a change in
//! one domain never rebuilds or drops another's. The order "update the
//! membership, then invalidate the domain" and "rebuild while holding the
//! domain" is what keeps a concurrent owner consistent: a rebuild either
//! sees a change or is invalidated after it.

use std::collections::HashMap;
use std::net::{IpAddr, SocketAddr};
use std::ops::DerefMut;
use std::sync::Arc;
use std::time::{Duration, Instant};

use subtle::ConstantTimeEq;

use super::endpoint_caps::{EndpointCaps, EndpointLimit};
use super::ghost_registry::{GhostLimits, GhostRegistry};
use crate::codec::PASSWORD_LEN;
use crate::model::{DeviceKey, DeviceKind, Directory, EndpointPolicy, SessionConfig, Snapshot};
use crate::policy::{
    BanCheck, BanLadder, BudgetDecision, FloorConfig, FloorDecision, FloorTable, PasswordBudget,
    PasswordBudgetConfig, TicketState,
};

/// Where an online device receives, as its shard last published it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Member {
    /// The device's endpoint.
    pub addr: SocketAddr,
    /// How the device's session reached the reflector.
    pub kind: DeviceKind,
    /// False under a receive ban: the device stays online but is left out.
    pub receives: bool,
}

/// How a snapshot request was served.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SnapshotSource {
    /// From the cache.
    Cached,
    /// Rebuilt from the members.
    Rebuilt,
}

/// The shared state as one shard sees it; see the module docs. Counts
/// returned are snapshot invalidations made.
pub trait CrossShard: std::fmt::Debug + Send {
    /// Online devices over all shards.
    fn online(&self) -> usize;

    /// Publishes that `key` is online at `member` in `group_id`; `dir`
    /// resolves groups to domains. Invalidates the old and new domains,
    /// only if something changed.
    fn set_member(&mut self, dir: &Directory, key: DeviceKey, group_id: i64, member: Member)
        -> u64;

    /// Publishes that `key` went offline (and frees its endpoint entry).
    fn remove_member(&mut self, dir: &Directory, key: DeviceKey) -> u64;

    /// Admits `key` at endpoint `addr`, heard at `now`, under the caps of
    /// `policy`, or says which cap is full; see [`EndpointCaps::claim`]. A
    /// device evicted to make room stops receiving at once (its shard ends
    /// its session at its next heartbeat or at the liveness timeout).
    fn claim_endpoint(
        &mut self,
        dir: &Directory,
        key: DeviceKey,
        addr: SocketAddr,
        policy: &EndpointPolicy,
        now: Instant,
    ) -> Result<EndpointClaim, EndpointLimit>;

    /// Records that `key` was heard at `addr` at `now`; false if it holds
    /// no endpoint entry there (it was evicted from a full prefix).
    fn renew_endpoint(&mut self, key: DeviceKey, addr: SocketAddr, now: Instant) -> bool;

    /// Whether `key` holds an endpoint entry at `addr`.
    fn holds_endpoint(&self, key: DeviceKey, addr: SocketAddr) -> bool;

    /// Drops every cached snapshot (directory reload).
    fn invalidate_all(&mut self) -> u64;

    /// Claims the floor of `domain_id` for a voice frame of `talker` and,
    /// if granted, returns the domain's receivers; otherwise why not
    /// (never [`FloorDecision::Granted`]).
    fn voice_targets(
        &mut self,
        dir: &Directory,
        domain_id: i64,
        talker: DeviceKey,
        now: Instant,
    ) -> Result<(Arc<Snapshot>, SnapshotSource), FloorDecision>;

    /// The receivers of `domain_id` (text bypasses the floor).
    fn targets(&mut self, dir: &Directory, domain_id: i64) -> (Arc<Snapshot>, SnapshotSource);

    /// The login-path tables, for the duration of the returned borrow.
    fn logins(&mut self) -> Box<dyn DerefMut<Target = LoginGuard> + '_>;

    /// The app-session registry, for the duration of the returned borrow.
    /// Nothing else of the port may be called while it is held (a snapshot
    /// rebuild reads the registry under the domain's lock).
    fn ghosts(&mut self) -> Box<dyn DerefMut<Target = GhostRegistry> + '_>;

    /// Drops the snapshots of the domains of `groups` (an app session came,
    /// moved or left).
    fn invalidate_groups(&mut self, dir: &Directory, groups: &[i64]) -> u64;

    /// Forgets expired bans and idle floors.
    fn sweep(&mut self, now: Instant);
}

/// What [`CrossShard::claim_endpoint`] did besides admitting the device.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct EndpointClaim {
    /// The device evicted from a full prefix to make room, if any.
    pub evicted: Option<DeviceKey>,
    /// Snapshot invalidations the eviction made.
    pub invalidations: u64,
}

/// Online sessions of one group, by [`DeviceKind`].
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct GroupSessions {
    /// The group.
    pub group_id: i64,
    /// Devices logged in with a password over UDP (draarl-v1 §3.1).
    pub udp: usize,
    /// UDP ghost sessions (§3.3).
    pub ghost: usize,
    /// WebSocket sessions (§4.4).
    pub websocket: usize,
}

/// Online devices per group, the group of each online device, and the
/// endpoint caps. Bounded by the devices online (at most `max_sessions`).
#[derive(Debug, Default)]
pub struct Membership {
    members: HashMap<i64, HashMap<DeviceKey, Member>>,
    group_of: HashMap<DeviceKey, i64>,
    caps: EndpointCaps,
}

impl Membership {
    /// Admits `key` at `addr`, heard at `now`, under the caps of `policy`,
    /// with `elsewhere` endpoints of its account held on other nodes
    /// ([`EndpointCaps::claim_counting`]). Returns the device evicted to make
    /// room, and its group if that changed: the device stops receiving at
    /// once and stays counted online until its shard ends its session.
    pub fn claim(
        &mut self,
        key: DeviceKey,
        addr: SocketAddr,
        policy: &EndpointPolicy,
        now: Instant,
        elsewhere: usize,
    ) -> Result<Option<(DeviceKey, Option<i64>)>, EndpointLimit> {
        let evicted = self
            .caps
            .claim_counting(key, addr, policy, now, elsewhere)?;
        Ok(evicted.map(|victim| (victim, self.stop_receiving(victim))))
    }

    /// Leaves `key` out of its group's receivers; returns the group if
    /// that changed it.
    fn stop_receiving(&mut self, key: DeviceKey) -> Option<i64> {
        let group = *self.group_of.get(&key)?;
        let member = self.members.get_mut(&group)?.get_mut(&key)?;
        if !member.receives {
            return None;
        }
        member.receives = false;
        Some(group)
    }

    /// Whether `key` holds an endpoint entry at `addr` ([`EndpointCaps::holds`]).
    pub fn holds(&self, key: DeviceKey, addr: SocketAddr) -> bool {
        self.caps.holds(key, addr)
    }

    /// Counted endpoints of `key`'s account other than `key`'s own
    /// ([`EndpointCaps::of_account_except`]).
    pub fn endpoints_of_account_except(&self, key: DeviceKey) -> usize {
        self.caps.of_account_except(key)
    }

    /// Records that `key` was heard at `addr` ([`EndpointCaps::renew`]).
    pub fn renew(&mut self, key: DeviceKey, addr: SocketAddr, now: Instant) -> bool {
        self.caps.renew(key, addr, now)
    }

    /// Online devices.
    pub fn online(&self) -> usize {
        self.group_of.len()
    }

    /// Online sessions per group and kind, ascending by group id; groups
    /// with no session online are left out.
    pub fn sessions_per_group(&self) -> Vec<GroupSessions> {
        let mut out: Vec<GroupSessions> = self
            .members
            .iter()
            .map(|(&group_id, ms)| {
                let mut g = GroupSessions {
                    group_id,
                    ..GroupSessions::default()
                };
                for m in ms.values() {
                    *match m.kind {
                        DeviceKind::Udp => &mut g.udp,
                        DeviceKind::Ghost => &mut g.ghost,
                        DeviceKind::WebSocket => &mut g.websocket,
                    } += 1;
                }
                g
            })
            .collect();
        out.sort_unstable_by_key(|g| g.group_id);
        out
    }

    /// Puts `key` in `group_id` at `member`. Returns the groups whose
    /// domains changed: none if nothing did, else the old group (if any)
    /// and the new one. A device that holds no endpoint entry at
    /// `member.addr` (evicted from a full prefix) does not receive.
    pub fn set(&mut self, key: DeviceKey, group_id: i64, mut member: Member) -> Vec<i64> {
        member.receives &= self.caps.holds(key, member.addr);
        let old_group = self.group_of.insert(key, group_id);
        let unchanged = old_group == Some(group_id)
            && self.members.get(&group_id).and_then(|ms| ms.get(&key)) == Some(&member);
        if unchanged {
            return Vec::new();
        }
        let mut changed = Vec::with_capacity(2);
        if let Some(old) = old_group {
            self.remove_from(old, key);
            changed.push(old);
        }
        self.members
            .entry(group_id)
            .or_default()
            .insert(key, member);
        changed.push(group_id);
        changed
    }

    /// Takes `key` out and frees its endpoint entry; returns the group it was in.
    pub fn remove(&mut self, key: DeviceKey) -> Option<i64> {
        self.caps.release(key);
        let old = self.group_of.remove(&key)?;
        self.remove_from(old, key);
        Some(old)
    }

    fn remove_from(&mut self, group_id: i64, key: DeviceKey) {
        if let Some(ms) = self.members.get_mut(&group_id) {
            ms.remove(&key);
            if ms.is_empty() {
                self.members.remove(&group_id);
            }
        }
    }

    /// The receivers of `domain_id` now, physical devices and the app
    /// sessions of `ghosts`, partitioned for `partitions` send paths.
    pub fn snapshot(
        &self,
        dir: &Directory,
        ghosts: &GhostRegistry,
        domain_id: i64,
        partitions: usize,
    ) -> Snapshot {
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
        let sessions = ghosts.receivers(&groups);
        Snapshot::build_with_sessions(domain_id, endpoints, sessions, partitions)
    }
}

/// Per-domain hot state: the cached receiver snapshot and the floor.
/// Bounded by the number of domains.
#[derive(Debug)]
pub struct DomainCache {
    snapshots: HashMap<i64, Arc<Snapshot>>,
    floors: FloorTable,
}

impl DomainCache {
    /// Empty, with the floor hold time of `cfg`.
    pub fn new(cfg: &SessionConfig) -> Self {
        Self {
            snapshots: HashMap::new(),
            floors: FloorTable::new(FloorConfig {
                hold: Duration::from_millis(cfg.floor_hold_ms),
                max_talk: Duration::from_secs(cfg.floor_max_talk_s),
                holdoff: Duration::from_millis(cfg.floor_holdoff_ms),
            }),
        }
    }

    /// Claims or renews the floor of `domain_id` for `talker` ([`FloorTable::claim`]).
    pub fn claim_floor(
        &mut self,
        domain_id: i64,
        talker: DeviceKey,
        now: Instant,
    ) -> FloorDecision {
        self.floors.claim(domain_id, talker, now)
    }

    /// The cached snapshot of `domain_id`, or one built by `build` and cached.
    pub fn snapshot_or(
        &mut self,
        domain_id: i64,
        build: impl FnOnce() -> Snapshot,
    ) -> (Arc<Snapshot>, SnapshotSource) {
        if let Some(s) = self.snapshots.get(&domain_id) {
            return (Arc::clone(s), SnapshotSource::Cached);
        }
        let snap = Arc::new(build());
        self.snapshots.insert(domain_id, Arc::clone(&snap));
        (snap, SnapshotSource::Rebuilt)
    }

    /// Drops the snapshot of `domain_id`; 1 if there was one.
    pub fn invalidate(&mut self, domain_id: i64) -> u64 {
        self.snapshots.remove(&domain_id).map_or(0, |_| 1)
    }

    /// Drops every snapshot; returns how many.
    pub fn invalidate_all(&mut self) -> u64 {
        let n = self.snapshots.len() as u64;
        self.snapshots.clear();
        n
    }

    /// Forgets idle floors.
    pub fn sweep(&mut self, now: Instant) {
        self.floors.sweep(now);
    }
}

/// A user's password as offered in a heartbeat, for the credential cache.
/// Its `Debug` output hides the password.
#[derive(Clone, Copy)]
pub struct Credential<'a> {
    /// Owner of the password.
    pub user_id: i64,
    /// The PHC string it is checked against.
    pub phc: &'a str,
    /// The padded password.
    pub password: &'a [u8; PASSWORD_LEN],
}

impl std::fmt::Debug for Credential<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Credential")
            .field("user_id", &self.user_id)
            .finish_non_exhaustive()
    }
}

impl Credential<'_> {
    fn matches(&self, user_id: i64, phc: &str, password: &[u8; PASSWORD_LEN]) -> bool {
        user_id == self.user_id && phc == self.phc && bool::from(password.ct_eq(self.password))
    }
}

/// Login-path state shared by every shard (draarl-v1 §3.1, §3.2).
pub struct LoginGuard {
    bans: BanLadder,
    budget: PasswordBudget,
    /// Last verified password per user, so only the first login of a user
    /// pays for Argon2: (PHC string it was checked against, padded password).
    /// At most one entry per user of the directory.
    verified: HashMap<i64, (String, [u8; PASSWORD_LEN])>,
    /// Checks in flight on any shard: (user id, PHC, padded password). At
    /// most `password_checks_in_flight` (checked before each is added).
    checking: Vec<(i64, String, [u8; PASSWORD_LEN])>,
    /// `password_checks_in_flight`.
    max_in_flight: usize,
}

impl std::fmt::Debug for LoginGuard {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("LoginGuard")
            .field("bans", &self.bans)
            .field("verified_users", &self.verified.len())
            .field("checking", &self.checking.len())
            .finish_non_exhaustive()
    }
}

impl LoginGuard {
    /// Empty tables for `cfg` (validated).
    pub fn new(cfg: &SessionConfig, now: Instant) -> Self {
        Self {
            bans: BanLadder::new(cfg.ban_table_max),
            budget: PasswordBudget::new(
                &PasswordBudgetConfig {
                    global_per_s: cfg.password_checks_per_s,
                    prefix_per_min: cfg.prefix_password_checks_per_min,
                    prefix_burst: cfg.prefix_password_checks_burst,
                    prefix_user_per_min: cfg.prefix_user_password_checks_per_min,
                    prefix_user_burst: cfg.prefix_user_password_checks_burst,
                    table_max: cfg.password_budget_table_max,
                    queue_per_prefix: cfg.password_check_queue_per_prefix,
                    queue_max: cfg.password_check_queue_max,
                },
                now,
            ),
            verified: HashMap::new(),
            checking: Vec::new(),
            max_in_flight: cfg.password_checks_in_flight,
        }
    }

    /// Ban ladder lookup (spec §3.2).
    pub fn ban_check(&self, ip: IpAddr, username: &str, now: Instant) -> BanCheck {
        self.bans.check(ip, username, now)
    }

    /// Counts a failed authentication on the ladder; returns whether a
    /// record was evicted to make room for it.
    pub fn record_failure(&mut self, ip: IpAddr, username: &str, now: Instant) -> bool {
        self.bans.record_failure(ip, username, now)
    }

    /// Clears the ladder of `(ip, username)` after a success.
    pub fn record_success(&mut self, ip: IpAddr, username: &str) {
        self.bans.record_success(ip, username);
    }

    /// Takes one Argon2 verification of user `user_id`'s password from
    /// source `ip` out of the per-prefix, per-prefix-and-user and global
    /// budgets (all or none), or puts it in line for the global budget
    /// ([`PasswordBudget::take`]), and returns how many per-prefix entries
    /// and tickets in line were evicted to track it.
    pub fn take_password_check(
        &mut self,
        ip: IpAddr,
        user_id: i64,
        now: Instant,
    ) -> (BudgetDecision, u64) {
        let before = self.budget.evictions() + self.budget.line_evictions();
        let free = self.max_in_flight.saturating_sub(self.checking.len());
        let decision = self.budget.take(ip, user_id, now, free);
        let after = self.budget.evictions() + self.budget.line_evictions();
        (decision, after - before)
    }

    /// Where the queued check `ticket` stands at `now`, after granting
    /// tickets in line as far as the global budget and the free slots for
    /// checks in flight allow.
    pub fn poll_queued_check(&mut self, ticket: u64, now: Instant) -> TicketState {
        let free = self.max_in_flight.saturating_sub(self.checking.len());
        self.budget.schedule(now, free);
        self.budget.claim(ticket)
    }

    /// Gives up the queued check `ticket`.
    pub fn cancel_queued_check(&mut self, ticket: u64) {
        self.budget.cancel(ticket);
    }

    /// Whether `c` was verified before (against the same PHC string).
    pub fn is_verified(&self, c: &Credential<'_>) -> bool {
        self.verified
            .get(&c.user_id)
            .is_some_and(|(phc, pw)| c.matches(c.user_id, phc, pw))
    }

    /// Remembers `c` as verified.
    pub fn set_verified(&mut self, c: &Credential<'_>) {
        self.verified
            .insert(c.user_id, (c.phc.to_owned(), *c.password));
    }

    /// Forgets verified passwords whose user or hash changed in `dir`.
    pub fn retain_verified(&mut self, dir: &Directory) {
        self.verified.retain(|uid, (phc, _)| {
            dir.user(*uid)
                .and_then(|u| u.device_password_hash.as_deref())
                == Some(phc.as_str())
        });
    }

    /// Whether a check of the same credential is in flight on any shard.
    pub fn is_checking(&self, c: &Credential<'_>) -> bool {
        self.checking
            .iter()
            .any(|(uid, phc, pw)| c.matches(*uid, phc, pw))
    }

    /// Password checks in flight on every shard.
    pub fn checks_in_flight(&self) -> usize {
        self.checking.len()
    }

    /// Records that a check of `c` is in flight.
    pub fn begin_check(&mut self, c: &Credential<'_>) {
        self.checking
            .push((c.user_id, c.phc.to_owned(), *c.password));
    }

    /// Records that one check of `c` ended (answered or abandoned).
    pub fn end_check(&mut self, c: &Credential<'_>) {
        if let Some(i) = self
            .checking
            .iter()
            .position(|(uid, phc, pw)| c.matches(*uid, phc, pw))
        {
            self.checking.swap_remove(i);
        }
    }

    /// Forgets expired bans and idle per-prefix budgets.
    pub fn sweep(&mut self, now: Instant) {
        self.bans.sweep(now);
        self.budget.sweep(now);
    }
}

/// The shared tables owned by one shard: the single-shard arrangement (and
/// what tests drive).
#[derive(Debug)]
pub struct LocalTables {
    partitions: usize,
    membership: Membership,
    domains: DomainCache,
    logins: LoginGuard,
    ghosts: GhostRegistry,
}

impl LocalTables {
    /// Empty tables for a shard running under `cfg` (validated).
    pub fn new(cfg: &SessionConfig, now: Instant) -> Self {
        Self {
            partitions: cfg.partitions,
            membership: Membership::default(),
            domains: DomainCache::new(cfg),
            logins: LoginGuard::new(cfg, now),
            ghosts: GhostRegistry::new(GhostLimits::of(cfg)),
        }
    }
}

impl CrossShard for LocalTables {
    fn online(&self) -> usize {
        self.membership.online()
    }

    fn set_member(
        &mut self,
        dir: &Directory,
        key: DeviceKey,
        group_id: i64,
        member: Member,
    ) -> u64 {
        let changed = self.membership.set(key, group_id, member);
        self.invalidate_groups(dir, &changed)
    }

    fn remove_member(&mut self, dir: &Directory, key: DeviceKey) -> u64 {
        match self.membership.remove(key) {
            Some(old) => self.invalidate_groups(dir, &[old]),
            None => 0,
        }
    }

    fn invalidate_groups(&mut self, dir: &Directory, groups: &[i64]) -> u64 {
        groups
            .iter()
            .filter_map(|g| dir.domain_of(*g))
            .map(|d| self.domains.invalidate(d.id))
            .sum()
    }

    fn claim_endpoint(
        &mut self,
        dir: &Directory,
        key: DeviceKey,
        addr: SocketAddr,
        policy: &EndpointPolicy,
        now: Instant,
    ) -> Result<EndpointClaim, EndpointLimit> {
        let Some((victim, group)) = self.membership.claim(key, addr, policy, now, 0)? else {
            return Ok(EndpointClaim::default());
        };
        Ok(EndpointClaim {
            evicted: Some(victim),
            invalidations: self.invalidate_groups(dir, &Vec::from_iter(group)),
        })
    }

    fn renew_endpoint(&mut self, key: DeviceKey, addr: SocketAddr, now: Instant) -> bool {
        self.membership.renew(key, addr, now)
    }

    fn holds_endpoint(&self, key: DeviceKey, addr: SocketAddr) -> bool {
        self.membership.holds(key, addr)
    }

    fn invalidate_all(&mut self) -> u64 {
        self.domains.invalidate_all()
    }

    fn voice_targets(
        &mut self,
        dir: &Directory,
        domain_id: i64,
        talker: DeviceKey,
        now: Instant,
    ) -> Result<(Arc<Snapshot>, SnapshotSource), FloorDecision> {
        match self.domains.claim_floor(domain_id, talker, now) {
            FloorDecision::Granted => Ok(self.targets(dir, domain_id)),
            refused => Err(refused),
        }
    }

    fn targets(&mut self, dir: &Directory, domain_id: i64) -> (Arc<Snapshot>, SnapshotSource) {
        let (membership, ghosts, partitions) = (&self.membership, &self.ghosts, self.partitions);
        self.domains.snapshot_or(domain_id, || {
            membership.snapshot(dir, ghosts, domain_id, partitions)
        })
    }

    fn logins(&mut self) -> Box<dyn DerefMut<Target = LoginGuard> + '_> {
        Box::new(&mut self.logins)
    }

    fn ghosts(&mut self) -> Box<dyn DerefMut<Target = GhostRegistry> + '_> {
        Box::new(&mut self.ghosts)
    }

    fn sweep(&mut self, now: Instant) {
        self.logins.sweep(now);
        self.domains.sweep(now);
    }
}
