//! The cross-shard tables shared by the shard threads (see
//! [`crate::core::CrossShard`] for what they hold and why).
//!
//! Locks follow the tables' traffic, so that no lock is taken by every
//! voice frame of every domain:
//! - domains are spread over [`DOMAIN_STRIPES`] stripes, each a
//!   [`DomainCache`] behind its own mutex; a voice frame locks the stripe of
//!   its own domain once (floor and cached snapshot together), so talkers
//!   of different domains run in parallel and talkers of one domain are
//!   serialised exactly as far as the floor requires;
//! - the [`Membership`] has one mutex, taken when a device comes online,
//!   moves or leaves, and for a snapshot rebuild;
//! - the [`LoginGuard`] has one mutex, taken by logins only;
//! - the [`GhostRegistry`] (app sessions) has one mutex, taken by app
//!   logins, by each packet of an app session, by the radio routes and
//!   for a snapshot rebuild.
//!
//! Lock order is stripe, then membership, then app sessions; a change of
//! either releases its lock before it invalidates stripes. A rebuild therefore either
//! reads the membership after a change, or is dropped by that change's
//! invalidation, which waits for the stripe the rebuild holds.

use std::net::SocketAddr;
use std::ops::DerefMut;
use std::sync::{Arc, Mutex, MutexGuard, OnceLock, PoisonError};
use std::time::Instant;

use crate::core::{
    CrossShard, DomainCache, EndpointClaim, EndpointLimit, GhostLimits, GhostRegistry,
    GroupSessions, LoginGuard, Member, Membership, SnapshotSource,
};
use crate::model::{DeviceKey, Directory, EndpointPolicy, SessionConfig, Snapshot};
use crate::policy::FloorDecision;

/// Domain stripes. Enough that distinct busy domains rarely share one;
/// each is a few words when empty.
pub const DOMAIN_STRIPES: usize = 64;

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(PoisonError::into_inner)
}

/// Endpoints that accounts hold on other nodes: a centre's edge sessions
/// (draarl-interconnect §3.8), which the account cap of a direct login
/// counts with the endpoints held here.
pub trait EndpointsElsewhere: Send + Sync + std::fmt::Debug {
    /// Endpoints of `key`'s account held on other nodes, other than `key`'s
    /// own (a direct login ends that device's session elsewhere). Takes
    /// only its own locks, and none of [`SharedTables`]'s.
    fn of_account_except(&self, key: DeviceKey) -> usize;
}

/// The tables shared by every shard; each shard holds a clone of the `Arc`
/// (which implements [`CrossShard`]).
#[derive(Debug)]
pub struct SharedTables {
    partitions: usize,
    stripes: Box<[Mutex<DomainCache>]>,
    membership: Mutex<Membership>,
    logins: Mutex<LoginGuard>,
    ghosts: Mutex<GhostRegistry>,
    /// Set once on a centre; a single node counts only its own endpoints.
    elsewhere: OnceLock<Arc<dyn EndpointsElsewhere>>,
}

impl SharedTables {
    /// Empty tables for shards running under `cfg` (validated).
    pub fn new(cfg: &SessionConfig, now: Instant) -> Self {
        Self {
            partitions: cfg.partitions,
            stripes: (0..DOMAIN_STRIPES)
                .map(|_| Mutex::new(DomainCache::new(cfg)))
                .collect(),
            membership: Mutex::new(Membership::default()),
            logins: Mutex::new(LoginGuard::new(cfg, now)),
            ghosts: Mutex::new(GhostRegistry::new(GhostLimits::of(cfg))),
            elsewhere: OnceLock::new(),
        }
    }

    /// Makes the endpoint caps of direct logins count the accounts'
    /// endpoints on other nodes as well (a centre with edges). Only the
    /// first call has an effect: a node has one set of edges.
    pub fn count_endpoints_elsewhere(&self, elsewhere: Arc<dyn EndpointsElsewhere>) {
        let _first = self.elsewhere.set(elsewhere);
    }

    /// The app-session registry. Release it before invalidating snapshots
    /// (lock order: stripe, membership, app sessions).
    pub fn ghosts(&self) -> MutexGuard<'_, GhostRegistry> {
        lock(&self.ghosts)
    }

    /// The login-path tables (ban ladder, Argon2 budget, verified cache,
    /// checks in flight), for logins handled outside a shard: the
    /// centre's proxied device authentication (draarl-interconnect §3.8)
    /// shares them with direct logins. Hold it briefly; take no other
    /// table's lock while holding it.
    pub fn login_guard(&self) -> MutexGuard<'_, LoginGuard> {
        lock(&self.logins)
    }

    /// Drops every cached snapshot; returns how many. For changes made
    /// outside a shard (the radio routes), which have no directory to map
    /// groups to domains.
    pub fn invalidate_every_domain(&self) -> u64 {
        self.stripes.iter().map(|s| lock(s).invalidate_all()).sum()
    }

    /// Endpoints of `key`'s account online here (counted under the
    /// endpoint caps), other than `key`'s own.
    pub fn endpoints_of_account_except(&self, key: DeviceKey) -> usize {
        lock(&self.membership).endpoints_of_account_except(key)
    }

    /// Online devices over all shards.
    pub fn online(&self) -> usize {
        lock(&self.membership).online()
    }

    /// Online sessions per group and kind: devices from
    /// [`Membership::sessions_per_group`], app sessions from
    /// [`GhostRegistry::counts_per_group`]; ascending by group id.
    pub fn sessions_per_group(&self) -> Vec<GroupSessions> {
        let mut per_group = lock(&self.membership).sessions_per_group();
        for (group_id, udp, ws) in lock(&self.ghosts).counts_per_group() {
            match per_group.binary_search_by_key(&group_id, |g| g.group_id) {
                Ok(i) => {
                    per_group[i].ghost += udp;
                    per_group[i].websocket += ws;
                }
                Err(i) => per_group.insert(
                    i,
                    GroupSessions {
                        group_id,
                        udp: 0,
                        ghost: udp,
                        websocket: ws,
                    },
                ),
            }
        }
        per_group
    }

    /// App and device sessions online per group over all shards (what
    /// `GET /api/radio/groups/stats` reports).
    pub fn online_per_group(&self) -> std::collections::HashMap<i64, u64> {
        self.sessions_per_group()
            .into_iter()
            .map(|g| (g.group_id, (g.udp + g.ghost + g.websocket) as u64))
            .collect()
    }

    fn stripe(&self, domain_id: i64) -> MutexGuard<'_, DomainCache> {
        let i = domain_id.rem_euclid(self.stripes.len() as i64) as usize;
        lock(&self.stripes[i])
    }

    fn invalidate_groups(&self, dir: &Directory, groups: &[i64]) -> u64 {
        groups
            .iter()
            .filter_map(|g| dir.domain_of(*g))
            .map(|d| self.stripe(d.id).invalidate(d.id))
            .sum()
    }

    fn snapshot(
        &self,
        stripe: &mut DomainCache,
        dir: &Directory,
        domain_id: i64,
    ) -> (Arc<Snapshot>, SnapshotSource) {
        stripe.snapshot_or(domain_id, || {
            let membership = lock(&self.membership);
            let ghosts = lock(&self.ghosts);
            membership.snapshot(dir, &ghosts, domain_id, self.partitions)
        })
    }
}

impl CrossShard for Arc<SharedTables> {
    fn online(&self) -> usize {
        SharedTables::online(self)
    }

    fn set_member(
        &mut self,
        dir: &Directory,
        key: DeviceKey,
        group_id: i64,
        member: Member,
    ) -> u64 {
        let changed = lock(&self.membership).set(key, group_id, member);
        self.invalidate_groups(dir, &changed)
    }

    fn remove_member(&mut self, dir: &Directory, key: DeviceKey) -> u64 {
        let old = lock(&self.membership).remove(key);
        old.map_or(0, |g| self.invalidate_groups(dir, &[g]))
    }

    fn claim_endpoint(
        &mut self,
        dir: &Directory,
        key: DeviceKey,
        addr: SocketAddr,
        policy: &EndpointPolicy,
        now: Instant,
    ) -> Result<EndpointClaim, EndpointLimit> {
        // Counted before the membership lock is taken: the centre's tables
        // take that lock while holding theirs.
        let elsewhere = self.elsewhere.get().map_or(0, |e| e.of_account_except(key));
        let claimed = lock(&self.membership).claim(key, addr, policy, now, elsewhere)?;
        let Some((victim, group)) = claimed else {
            return Ok(EndpointClaim::default());
        };
        Ok(EndpointClaim {
            evicted: Some(victim),
            invalidations: self.invalidate_groups(dir, &Vec::from_iter(group)),
        })
    }

    fn renew_endpoint(&mut self, key: DeviceKey, addr: SocketAddr, now: Instant) -> bool {
        lock(&self.membership).renew(key, addr, now)
    }

    fn holds_endpoint(&self, key: DeviceKey, addr: SocketAddr) -> bool {
        lock(&self.membership).holds(key, addr)
    }

    fn invalidate_all(&mut self) -> u64 {
        self.invalidate_every_domain()
    }

    fn voice_targets(
        &mut self,
        dir: &Directory,
        domain_id: i64,
        talker: DeviceKey,
        now: Instant,
    ) -> Result<(Arc<Snapshot>, SnapshotSource), FloorDecision> {
        let mut stripe = self.stripe(domain_id);
        match stripe.claim_floor(domain_id, talker, now) {
            FloorDecision::Granted => Ok(self.snapshot(&mut stripe, dir, domain_id)),
            refused => Err(refused),
        }
    }

    fn targets(&mut self, dir: &Directory, domain_id: i64) -> (Arc<Snapshot>, SnapshotSource) {
        let mut stripe = self.stripe(domain_id);
        self.snapshot(&mut stripe, dir, domain_id)
    }

    fn logins(&mut self) -> Box<dyn DerefMut<Target = LoginGuard> + '_> {
        Box::new(lock(&self.logins))
    }

    fn ghosts(&mut self) -> Box<dyn DerefMut<Target = GhostRegistry> + '_> {
        Box::new(lock(&self.ghosts))
    }

    fn invalidate_groups(&mut self, dir: &Directory, groups: &[i64]) -> u64 {
        SharedTables::invalidate_groups(self, dir, groups)
    }

    fn sweep(&mut self, now: Instant) {
        lock(&self.logins).sweep(now);
        for s in self.stripes.iter() {
            lock(s).sweep(now);
        }
    }
}

#[cfg(test)]
mod tests;

/// Physical devices are one source of the app API's online counts.
impl super::app_http::GroupPresence for SharedTables {
    fn online_per_group(&self) -> std::collections::HashMap<i64, u64> {
        SharedTables::online_per_group(self)
    }
}
