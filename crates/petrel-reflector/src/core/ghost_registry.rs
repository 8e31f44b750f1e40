//! The registry of app ("ghost") sessions, shared by UDP and WebSocket
//! (`specs/draarl-apps.md` §2.4, §2.5, §3.4; draarl-v1 §3.3).
//!
//! A sans-IO table like [`Membership`](super::Membership): every shard
//! reaches it through [`CrossShard::ghosts`](super::CrossShard::ghosts)
//! (a Type 1 login lands on the shard of its source address, the session's
//! later packets on the shard of its username and SSID), and the runtime's
//! WebSocket and radio routes reach the same table.
//!
//! What it keeps, and the rules it enforces:
//! - **Limits.** At most `per_owner` live sessions per account over all
//!   transports and `subscriptions` receive groups per session (TX
//!   included); at most `total` sessions over all accounts, a new one
//!   evicting the session heard least recently when full.
//! - **Replacement.** A login with the same (owner, DevModel, instance)
//!   does not count the old session toward the limit, gets a new id and
//!   tag, and removes the old session first.
//! - **Uniqueness.** One session per tag (32 random bits, non-zero, at most
//!   16 draws), one live UDP session per transport IP:port. A login from an
//!   IP:port held by another session is refused (§2.2 step 7) only if that
//!   session has proved its address (see "Receivers"); one that has not
//!   is displaced, so a login sent from a forged source address, renewed
//!   every 20 s, cannot keep the real client at that address out.
//! - **Receivers.** An index of sessions per receive group, read when a
//!   domain's snapshot is built. A UDP session receives only once a packet
//!   carrying its tag came from its address: the tag went out only in the
//!   success reply, so this proves the address asked for the traffic (a
//!   login with a stolen token sent from a forged address gets nothing
//!   sent there but the reply). Android heartbeats at once after login.
//!
//! Every map is keyed by live sessions only, so each is bounded by `total`.
//! WebSocket sessions removed here (replaced, deleted, expired, evicted)
//! are queued for the runtime to close their connections (bounded the
//! same way).

use std::collections::{BTreeSet, HashMap, VecDeque};
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::{Duration, Instant};

use rand::RngCore;

use crate::codec::{Header, PacketType, USERNAME_LEN};
use crate::model::{AppUser, ConnectionId, Endpoint, Routing};
use crate::policy::TokenBucket;

/// The configured limits of a [`GhostRegistry`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct GhostLimits {
    /// Live sessions per account (§2.4 `MaxSessionsPerOwner`).
    pub per_owner: usize,
    /// Receive groups per session, TX included (§2.4 `MaxSubscriptionsPerSession`).
    pub subscriptions: usize,
    /// Live sessions in all.
    pub total: usize,
    /// Texts per minute per session, sustained, and the burst.
    pub text_per_minute: u32,
    /// Texts a session may send at once.
    pub text_burst: u32,
}

impl GhostLimits {
    /// The limits `cfg` sets (`ghost_*`, and the text budget of devices).
    pub fn of(cfg: &crate::model::SessionConfig) -> Self {
        Self {
            per_owner: cfg.ghost_sessions_per_owner,
            subscriptions: cfg.ghost_subscriptions,
            total: cfg.ghost_sessions_max,
            text_per_minute: cfg.text_per_minute,
            text_burst: cfg.text_burst,
        }
    }
}

/// One live app session.
#[derive(Debug, Clone)]
pub struct GhostSession {
    /// Lower-case UUID v4.
    pub session_id: String,
    /// The session tag: non-zero, unique among live sessions.
    pub tag: u32,
    /// The account.
    pub user: Arc<AppUser>,
    /// 101–104 (UDP) or 105 (WebSocket).
    pub dev_model: u8,
    /// Equal to the DevModel (§2.6 of draarl-v1).
    pub ssid: u8,
    /// Normalised client instance id.
    pub client_instance_id: String,
    /// Normalised capabilities.
    pub capabilities: Vec<String>,
    /// Where the client is.
    pub transport: Endpoint,
    /// TX and RX groups.
    pub routing: Routing,
    /// When it was registered.
    pub created: Instant,
    /// Wall-clock time of `created`, Unix ms (as the caller gave it).
    pub created_unix_ms: i64,
    /// Last accepted packet (liveness, §2.4).
    pub last_seen: Instant,
    /// Last accepted voice frame (PTT-active rule, §3.4 row 4).
    pub last_voice: Option<Instant>,
    /// Registration order, for listings (§3.3: by creation time, then id).
    pub seq: u64,
    /// Whether it receives fan-out: a WebSocket session at once, a UDP
    /// one after its first resolved packet (module docs).
    pub receiving: bool,
    text: TokenBucket,
}

impl GhostSession {
    /// Whether an accepted voice frame came less than `hold` before `now`.
    pub fn ptt_active(&self, now: Instant, hold: Duration) -> bool {
        self.last_voice
            .is_some_and(|v| now.saturating_duration_since(v) < hold)
    }

    /// Wall-clock time of `at`, Unix ms, from the session's own reading.
    pub fn unix_ms_at(&self, at: Instant) -> i64 {
        let ahead =
            i64::try_from(at.saturating_duration_since(self.created).as_millis()).unwrap_or(0);
        self.created_unix_ms.saturating_add(ahead)
    }
}

/// A session to register.
#[derive(Debug, Clone)]
pub struct NewGhost {
    /// The account.
    pub user: Arc<AppUser>,
    /// 101–104 (UDP) or 105 (WebSocket); also the SSID.
    pub dev_model: u8,
    /// Normalised instance id.
    pub client_instance_id: String,
    /// Normalised capabilities.
    pub capabilities: Vec<String>,
    /// Where the client is.
    pub transport: Endpoint,
    /// Sanitised routing (§2.3 "Initial routing").
    pub routing: Routing,
}

/// Why a registration failed (§2.2 step 7).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RegisterError {
    /// The owner holds `active` sessions, the limit is `limit`.
    SessionLimit {
        /// Live sessions of the owner on all transports.
        active: usize,
        /// `per_owner`.
        limit: usize,
    },
    /// The routing has more groups than `subscriptions`.
    SubscriptionLimit {
        /// Groups asked for, TX included.
        requested: usize,
        /// `subscriptions`.
        limit: usize,
    },
    /// Tag allocation failed, or another live UDP session that proved its
    /// address holds the endpoint.
    Failed,
}

impl RegisterError {
    /// The Type 1 reject text (§2.2 step 7) or the `/ws` close reason (§4.2).
    pub fn text(self) -> String {
        match self {
            Self::SessionLimit { active, limit } => {
                format!("ghost_session_limit active={active} limit={limit}")
            }
            Self::SubscriptionLimit { requested, limit } => {
                format!("ghost subscription limit reached: requested={requested} limit={limit}")
            }
            Self::Failed => "ghost_session_registration_failed".to_owned(),
        }
    }
}

/// What a registration did.
#[derive(Debug, Clone)]
pub struct Registered {
    /// The new session.
    pub session: GhostSession,
    /// The session of the same (owner, DevModel, instance) it replaced.
    pub replaced: Option<GhostSession>,
    /// The session evicted from a full registry.
    pub evicted: Option<GhostSession>,
    /// The session of another (owner, DevModel, instance) that held the
    /// new session's IP:port without having proved it (module docs).
    pub displaced: Option<GhostSession>,
}

impl Registered {
    /// Receive groups whose receivers changed.
    pub fn changed_groups(&self) -> Vec<i64> {
        let mut g: Vec<i64> = [
            Some(&self.session),
            self.replaced.as_ref(),
            self.evicted.as_ref(),
            self.displaced.as_ref(),
        ]
        .into_iter()
        .flatten()
        .flat_map(|s| s.routing.rx_group_ids.iter().copied())
        .collect();
        g.sort_unstable();
        g.dedup();
        g
    }
}

/// Why a tagged packet did not resolve to a session (§2.5 "Resolution").
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum UplinkReject {
    /// Step 1: tag 0 or no live session with it (`invalid_tags`).
    InvalidTag,
    /// Step 2: username, SSID or DevModel differ (`identity_rejects`).
    Identity,
    /// Step 3: another transport address (`endpoint_rejects`).
    Endpoint,
    /// Step 4: the session is not a UDP session (`registry_rejects`).
    Registry,
}

/// What the uplink needs of a resolved session.
#[derive(Debug, Clone)]
pub struct GhostUplink {
    /// The session.
    pub session_id: String,
    /// The account.
    pub user: Arc<AppUser>,
    /// DevModel and SSID.
    pub dev_model: u8,
    /// The group its media goes to.
    pub tx_group_id: i64,
    /// Its UDP address (unspecified for a WebSocket session).
    pub addr: SocketAddr,
    /// Its WebSocket connection.
    pub connection: Option<ConnectionId>,
    /// The receive groups of a UDP session this packet made a receiver
    /// (its first resolved one); their snapshots are stale.
    pub now_receiving: Option<Vec<i64>>,
}

/// Why a routing change was refused by the registry (§3.4 rows 2–4).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RoutingError {
    /// Row 2: unknown session, or not the caller's.
    NotFound,
    /// Row 3: TX ≤ 0.
    InvalidTx,
    /// Row 3: an RX group ≤ 0.
    InvalidRx,
    /// Row 3: more groups than the limit.
    SubscriptionLimit {
        /// Groups asked for, TX included.
        requested: usize,
        /// `subscriptions`.
        limit: usize,
    },
    /// Row 4: TX changes while the session is PTT-active.
    PttActive,
}

/// WebSocket connections whose sessions were removed, kept at most this
/// many (oldest dropped) until the runtime takes them.
const CLOSED_QUEUE: usize = 65_536;

/// The app-session table; its rules are in the docs of `core/ghost_registry.rs`
/// (`specs/draarl-apps.md` §2.4).
#[derive(Debug)]
pub struct GhostRegistry {
    limits: GhostLimits,
    sessions: HashMap<String, GhostSession>,
    by_tag: HashMap<u32, String>,
    by_udp: HashMap<SocketAddr, String>,
    by_ws: HashMap<ConnectionId, String>,
    by_instance: HashMap<(i64, u8, String), String>,
    per_owner: HashMap<i64, usize>,
    by_group: HashMap<i64, BTreeSet<String>>,
    closed_ws: VecDeque<ConnectionId>,
    next_seq: u64,
}

impl GhostRegistry {
    /// An empty registry under `limits`.
    pub fn new(limits: GhostLimits) -> Self {
        Self {
            limits,
            sessions: HashMap::new(),
            by_tag: HashMap::new(),
            by_udp: HashMap::new(),
            by_ws: HashMap::new(),
            by_instance: HashMap::new(),
            per_owner: HashMap::new(),
            by_group: HashMap::new(),
            closed_ws: VecDeque::new(),
            next_seq: 0,
        }
    }

    /// The limits it was built with.
    pub fn limits(&self) -> GhostLimits {
        self.limits
    }

    /// Live sessions.
    pub fn len(&self) -> usize {
        self.sessions.len()
    }

    /// Whether there is none.
    pub fn is_empty(&self) -> bool {
        self.sessions.is_empty()
    }

    /// A live session by id (exact, untrimmed).
    pub fn get(&self, session_id: &str) -> Option<&GhostSession> {
        self.sessions.get(session_id)
    }

    /// Live sessions of `user_id`, by creation order.
    pub fn sessions_of(&self, user_id: i64) -> Vec<GhostSession> {
        let mut v: Vec<GhostSession> = self
            .sessions
            .values()
            .filter(|s| s.user.user_id == user_id)
            .cloned()
            .collect();
        v.sort_by(|a, b| (a.seq, &a.session_id).cmp(&(b.seq, &b.session_id)));
        v
    }

    /// Live sessions of `user_id` on all transports.
    pub fn owner_count(&self, user_id: i64) -> usize {
        self.per_owner.get(&user_id).copied().unwrap_or(0)
    }

    /// Sessions subscribed to `group_id`: (UDP, WebSocket).
    pub fn group_counts(&self, group_id: i64) -> (usize, usize) {
        let mut counts = (0, 0);
        for id in self.by_group.get(&group_id).into_iter().flatten() {
            match self.sessions.get(id).map(|s| s.transport) {
                Some(Endpoint::Udp(_)) => counts.0 += 1,
                Some(Endpoint::WebSocket(_)) => counts.1 += 1,
                None => {}
            }
        }
        counts
    }

    /// Sessions subscribed to each group: (group id, UDP, WebSocket),
    /// ascending by group id. A session counts in every group it hears.
    pub fn counts_per_group(&self) -> Vec<(i64, usize, usize)> {
        let mut out: Vec<_> = self
            .by_group
            .keys()
            .map(|&g| {
                let (udp, ws) = self.group_counts(g);
                (g, udp, ws)
            })
            .collect();
        out.sort_unstable();
        out
    }

    /// The sessions subscribed to any of `groups`, each once.
    pub fn receivers(&self, groups: &[i64]) -> Vec<Endpoint> {
        let mut ids: Vec<&String> = groups
            .iter()
            .filter_map(|g| self.by_group.get(g))
            .flatten()
            .collect();
        ids.sort_unstable();
        ids.dedup();
        ids.into_iter()
            .filter_map(|id| self.sessions.get(id))
            .filter(|s| s.receiving)
            .map(|s| s.transport)
            .collect()
    }

    /// Registers `new` at `now` (`unix_ms` on the wall clock), drawing the
    /// tag and session id from `rng`; see the module docs for the rules.
    pub fn register(
        &mut self,
        new: NewGhost,
        now: Instant,
        unix_ms: i64,
        rng: &mut dyn RngCore,
    ) -> Result<Registered, RegisterError> {
        let requested = new.routing.rx_group_ids.len();
        if requested > self.limits.subscriptions {
            return Err(RegisterError::SubscriptionLimit {
                requested,
                limit: self.limits.subscriptions,
            });
        }
        let key = (
            new.user.user_id,
            new.dev_model,
            new.client_instance_id.clone(),
        );
        let old_id = self.by_instance.get(&key).cloned();
        let squatter = match new.transport {
            Endpoint::Udp(addr) => self
                .by_udp
                .get(&addr)
                .filter(|held| Some(*held) != old_id.as_ref())
                .and_then(|held| self.sessions.get(held)),
            Endpoint::WebSocket(_) => None,
        };
        if squatter.is_some_and(|s| s.receiving) {
            return Err(RegisterError::Failed);
        }
        let squatter = squatter.map(|s| (s.session_id.clone(), s.user.user_id));
        let own_squatter = squatter
            .as_ref()
            .is_some_and(|(_, owner)| *owner == new.user.user_id);
        let active = self.owner_count(new.user.user_id)
            - usize::from(old_id.is_some())
            - usize::from(own_squatter);
        if active >= self.limits.per_owner {
            return Err(RegisterError::SessionLimit {
                active,
                limit: self.limits.per_owner,
            });
        }
        let tag = (0..16)
            .map(|_| rng.next_u32())
            .find(|t| *t != 0 && !self.by_tag.contains_key(t))
            .ok_or(RegisterError::Failed)?;
        let mut bytes = [0u8; 16];
        rng.fill_bytes(&mut bytes);
        let session_id = uuid::Builder::from_random_bytes(bytes)
            .into_uuid()
            .hyphenated()
            .to_string();
        if self.sessions.contains_key(&session_id) {
            return Err(RegisterError::Failed);
        }
        let replaced = old_id.and_then(|id| self.remove(&id));
        let displaced = squatter.and_then(|(id, _)| self.remove(&id));
        let evicted = if self.sessions.len() >= self.limits.total {
            self.least_recent().and_then(|id| self.remove(&id))
        } else {
            None
        };
        let session = GhostSession {
            session_id: session_id.clone(),
            tag,
            user: new.user,
            dev_model: new.dev_model,
            ssid: new.dev_model,
            client_instance_id: new.client_instance_id,
            capabilities: new.capabilities,
            transport: new.transport,
            routing: new.routing,
            created: now,
            created_unix_ms: unix_ms,
            last_seen: now,
            last_voice: None,
            seq: self.next_seq,
            receiving: matches!(new.transport, Endpoint::WebSocket(_)),
            text: TokenBucket::with_burst(
                f64::from(self.limits.text_per_minute) / 60.0,
                self.limits.text_burst,
                now,
            ),
        };
        self.next_seq += 1;
        self.insert(session.clone());
        Ok(Registered {
            session,
            replaced,
            evicted,
            displaced,
        })
    }

    fn least_recent(&self) -> Option<String> {
        self.sessions
            .values()
            .min_by_key(|s| (s.last_seen, s.seq))
            .map(|s| s.session_id.clone())
    }

    fn insert(&mut self, s: GhostSession) {
        let id = s.session_id.clone();
        self.by_tag.insert(s.tag, id.clone());
        match s.transport {
            Endpoint::Udp(a) => {
                self.by_udp.insert(a, id.clone());
            }
            Endpoint::WebSocket(c) => {
                self.by_ws.insert(c, id.clone());
            }
        }
        self.by_instance.insert(
            (s.user.user_id, s.dev_model, s.client_instance_id.clone()),
            id.clone(),
        );
        *self.per_owner.entry(s.user.user_id).or_insert(0) += 1;
        for g in &s.routing.rx_group_ids {
            self.by_group.entry(*g).or_default().insert(id.clone());
        }
        self.sessions.insert(id, s);
    }

    /// Removes a session; a WebSocket one is queued for closing.
    pub fn remove(&mut self, session_id: &str) -> Option<GhostSession> {
        let s = self.sessions.remove(session_id)?;
        self.by_tag.remove(&s.tag);
        match s.transport {
            Endpoint::Udp(a) => {
                self.by_udp.remove(&a);
            }
            Endpoint::WebSocket(c) => {
                self.by_ws.remove(&c);
                if self.closed_ws.len() >= CLOSED_QUEUE {
                    self.closed_ws.pop_front();
                }
                self.closed_ws.push_back(c);
            }
        }
        self.by_instance
            .remove(&(s.user.user_id, s.dev_model, s.client_instance_id.clone()));
        if let Some(n) = self.per_owner.get_mut(&s.user.user_id) {
            *n -= 1;
            if *n == 0 {
                self.per_owner.remove(&s.user.user_id);
            }
        }
        self.unindex_groups(session_id, &s.routing.rx_group_ids);
        Some(s)
    }

    fn unindex_groups(&mut self, session_id: &str, groups: &[i64]) {
        for g in groups {
            if let Some(set) = self.by_group.get_mut(g) {
                set.remove(session_id);
                if set.is_empty() {
                    self.by_group.remove(g);
                }
            }
        }
    }

    /// Removes the session on WebSocket connection `conn` (its connection
    /// ended); the connection is not queued for closing.
    pub fn remove_connection(&mut self, conn: ConnectionId) -> Option<GhostSession> {
        let id = self.by_ws.get(&conn)?.clone();
        let s = self.remove(&id);
        if self.closed_ws.back() == Some(&conn) {
            self.closed_ws.pop_back();
        }
        s
    }

    /// The next WebSocket connection whose session was removed.
    pub fn poll_closed(&mut self) -> Option<ConnectionId> {
        self.closed_ws.pop_front()
    }

    /// The session on WebSocket connection `conn`.
    pub fn by_connection(&self, conn: ConnectionId) -> Option<&GhostSession> {
        self.by_ws.get(&conn).and_then(|id| self.sessions.get(id))
    }

    /// Resolves a tagged UDP packet (§2.5 steps 1–4) and, if it resolves,
    /// refreshes the session's liveness.
    pub fn resolve_udp(
        &mut self,
        tag: u32,
        username: &[u8; USERNAME_LEN],
        ssid: u8,
        dev_model: u8,
        src: SocketAddr,
        now: Instant,
    ) -> Result<GhostUplink, UplinkReject> {
        let id = self
            .by_tag
            .get(&tag)
            .filter(|_| tag != 0)
            .ok_or(UplinkReject::InvalidTag)?;
        let s = self.sessions.get_mut(id).ok_or(UplinkReject::Registry)?;
        // The name as the success header carried it (cut to 32 bytes).
        let mut field = Header::new(PacketType::JwtAuth);
        field.set_username(&s.user.username);
        if field.username != *username || s.ssid != ssid || s.dev_model != dev_model {
            return Err(UplinkReject::Identity);
        }
        let addr = match s.transport {
            Endpoint::Udp(a) if a == src => a,
            Endpoint::Udp(_) => return Err(UplinkReject::Endpoint),
            Endpoint::WebSocket(_) => return Err(UplinkReject::Registry),
        };
        s.last_seen = now;
        let now_receiving = (!s.receiving).then(|| s.routing.rx_group_ids.clone());
        s.receiving = true;
        Ok(GhostUplink {
            session_id: s.session_id.clone(),
            user: Arc::clone(&s.user),
            dev_model: s.dev_model,
            tx_group_id: s.routing.tx_group_id,
            addr,
            connection: None,
            now_receiving,
        })
    }

    /// The uplink of WebSocket connection `conn`, refreshing its liveness.
    pub fn resolve_connection(&mut self, conn: ConnectionId, now: Instant) -> Option<GhostUplink> {
        let id = self.by_ws.get(&conn)?;
        let s = self.sessions.get_mut(id)?;
        s.last_seen = now;
        Some(GhostUplink {
            session_id: s.session_id.clone(),
            user: Arc::clone(&s.user),
            dev_model: s.dev_model,
            tx_group_id: s.routing.tx_group_id,
            addr: SocketAddr::from(([0, 0, 0, 0], 0)),
            connection: Some(conn),
            now_receiving: None,
        })
    }

    /// Marks an accepted voice frame of `session_id` at `now`.
    pub fn mark_voice(&mut self, session_id: &str, now: Instant) {
        if let Some(s) = self.sessions.get_mut(session_id) {
            s.last_voice = Some(now);
        }
    }

    /// Takes one text from `session_id`'s budget; false if spent.
    pub fn take_text(&mut self, session_id: &str, now: Instant) -> bool {
        self.sessions
            .get_mut(session_id)
            .is_some_and(|s| s.text.take(now))
    }

    /// Checks a routing change of `session_id` owned by `user_id` (§3.4
    /// rows 2–4, with the PTT window `hold`) and returns the normalised
    /// routing, without applying it.
    pub fn check_routing(
        &self,
        session_id: &str,
        user_id: i64,
        tx: i64,
        rx: &[i64],
        now: Instant,
        hold: Duration,
    ) -> Result<Routing, RoutingError> {
        let s = self
            .sessions
            .get(session_id)
            .filter(|s| s.user.user_id == user_id)
            .ok_or(RoutingError::NotFound)?;
        if tx <= 0 {
            return Err(RoutingError::InvalidTx);
        }
        if rx.iter().any(|g| *g <= 0) {
            return Err(RoutingError::InvalidRx);
        }
        let routing = Routing::new(tx, rx.to_vec());
        if routing.rx_group_ids.len() > self.limits.subscriptions {
            return Err(RoutingError::SubscriptionLimit {
                requested: routing.rx_group_ids.len(),
                limit: self.limits.subscriptions,
            });
        }
        if tx != s.routing.tx_group_id && s.ptt_active(now, hold) {
            return Err(RoutingError::PttActive);
        }
        Ok(routing)
    }

    /// Applies `routing` to `session_id`; returns the groups whose
    /// receivers changed (old and new RX), or `None` if the session is gone.
    pub fn set_routing(&mut self, session_id: &str, routing: Routing) -> Option<Vec<i64>> {
        let s = self.sessions.get_mut(session_id)?;
        let old = std::mem::replace(&mut s.routing, routing.clone());
        self.unindex_groups(session_id, &old.rx_group_ids);
        for g in &routing.rx_group_ids {
            self.by_group
                .entry(*g)
                .or_default()
                .insert(session_id.to_owned());
        }
        let mut changed = old.rx_group_ids;
        changed.extend(routing.rx_group_ids);
        changed.sort_unstable();
        changed.dedup();
        Some(changed)
    }

    /// Removes the sessions not heard for more than `timeout` at `now`.
    pub fn expire(&mut self, now: Instant, timeout: Duration) -> Vec<GhostSession> {
        let stale: Vec<String> = self
            .sessions
            .values()
            .filter(|s| now.saturating_duration_since(s.last_seen) > timeout)
            .map(|s| s.session_id.clone())
            .collect();
        stale.iter().filter_map(|id| self.remove(id)).collect()
    }

    /// Removes every session whose owner `revoked(user_id)` says has lost
    /// its rights (§2.4 "Other removals": permission revocation, e.g. the
    /// user disabled or deleted); WebSocket ones are queued for closing.
    pub fn remove_owners(&mut self, revoked: impl Fn(i64) -> bool) -> Vec<GhostSession> {
        let gone: Vec<String> = self
            .sessions
            .values()
            .filter(|s| revoked(s.user.user_id))
            .map(|s| s.session_id.clone())
            .collect();
        gone.iter().filter_map(|id| self.remove(id)).collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Draws the given values in turn (then zeros).
    struct Script(Vec<u32>);

    impl RngCore for Script {
        fn next_u32(&mut self) -> u32 {
            if self.0.is_empty() {
                0
            } else {
                self.0.remove(0)
            }
        }
        fn next_u64(&mut self) -> u64 {
            u64::from(self.next_u32())
        }
        fn fill_bytes(&mut self, dest: &mut [u8]) {
            // Distinct session ids across every script of a test.
            static NEXT: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(1);
            let n = NEXT.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
            dest.fill(0);
            dest[..8].copy_from_slice(&n.to_be_bytes());
        }
        fn try_fill_bytes(&mut self, dest: &mut [u8]) -> Result<(), rand::Error> {
            self.fill_bytes(dest);
            Ok(())
        }
    }

    fn limits(per_owner: usize, subscriptions: usize, total: usize) -> GhostLimits {
        GhostLimits {
            per_owner,
            subscriptions,
            total,
            text_per_minute: 30,
            text_burst: 5,
        }
    }

    fn alice() -> Arc<AppUser> {
        Arc::new(AppUser {
            user_id: 1,
            username: "alice".into(),
            callsign: "BG7AAA".into(),
            is_admin: false,
        })
    }

    fn ghost(instance: &str, port: u16, tx: i64, rx: &[i64]) -> NewGhost {
        NewGhost {
            user: alice(),
            dev_model: 101,
            client_instance_id: instance.into(),
            capabilities: vec![],
            transport: Endpoint::Udp(SocketAddr::from(([127, 0, 0, 1], port))),
            routing: Routing::new(tx, rx.to_vec()),
        }
    }

    fn name(n: &str) -> [u8; USERNAME_LEN] {
        let mut h = Header::new(PacketType::Heartbeat);
        h.set_username(n);
        h.username
    }

    fn t0() -> Instant {
        crate::test_clock::origin()
    }

    /// Revoking an owner removes all of its sessions, UDP and WebSocket,
    /// queues its WebSocket connections for closing, and keeps the others.
    #[test]
    fn revoked_owners_lose_every_session() {
        let mut r = GhostRegistry::new(limits(8, 16, 100));
        let now = t0();
        let bob = Arc::new(AppUser {
            user_id: 2,
            username: "bob".into(),
            callsign: String::new(),
            is_admin: false,
        });
        r.register(ghost("a", 31001, 1001, &[]), now, 0, &mut Script(vec![21]))
            .unwrap();
        let web = NewGhost {
            transport: Endpoint::WebSocket(7),
            ..ghost("b", 0, 1001, &[])
        };
        r.register(web, now, 0, &mut Script(vec![22])).unwrap();
        let bobs = NewGhost {
            user: bob,
            ..ghost("c", 31003, 1001, &[])
        };
        r.register(bobs, now, 0, &mut Script(vec![23])).unwrap();
        let gone = r.remove_owners(|id| id == 1);
        assert_eq!(gone.len(), 2);
        assert!(gone.iter().all(|s| s.user.user_id == 1));
        assert_eq!((r.len(), r.owner_count(1), r.owner_count(2)), (1, 0, 1));
        assert_eq!(r.poll_closed(), Some(7));
        assert_eq!(r.poll_closed(), None);
        assert_eq!(r.counts_per_group(), [(1001, 1, 0)]);
    }

    #[test]
    fn sessions_count_in_every_group_they_hear() {
        let mut r = GhostRegistry::new(limits(8, 16, 100));
        let now = t0();
        for (instance, port, tag) in [("a", 31001, 21), ("b", 31002, 22)] {
            r.register(
                ghost(instance, port, 1001, &[1002]),
                now,
                0,
                &mut Script(vec![tag]),
            )
            .unwrap();
        }
        assert_eq!(r.counts_per_group(), [(1001, 2, 0), (1002, 2, 0)]);
    }

    #[test]
    fn tags_and_endpoints_are_unique_and_draws_are_bounded() {
        let mut r = GhostRegistry::new(limits(8, 16, 100));
        let now = t0();
        let a = r
            .register(
                ghost("a", 31001, 1001, &[1002]),
                now,
                0,
                &mut Script(vec![0, 11]),
            )
            .unwrap();
        assert_eq!(a.session.tag, 11);
        assert_eq!(a.session.routing.rx_group_ids, vec![1001, 1002]);
        // Not a receiver until a packet with its tag came from its address.
        assert!(r.receivers(&[1002]).is_empty());
        let at = SocketAddr::from(([127, 0, 0, 1], 31001));
        let up = r
            .resolve_udp(11, &name("alice"), 101, 101, at, now)
            .unwrap();
        assert_eq!(up.now_receiving, Some(vec![1001, 1002]));
        assert_eq!(r.receivers(&[1002, 1001]), vec![Endpoint::Udp(at)]);
        let again = r
            .resolve_udp(11, &name("alice"), 101, 101, at, now)
            .unwrap();
        assert_eq!(again.now_receiving, None);
        // Tag 11 is taken: the next draw is used.
        let b = r
            .register(
                ghost("b", 31002, 1002, &[]),
                now,
                0,
                &mut Script(vec![11, 12]),
            )
            .unwrap();
        assert_eq!(b.session.tag, 12);
        assert_eq!(r.group_counts(1002), (2, 0));
        // Another instance on port 31001 is refused.
        assert_eq!(
            r.register(ghost("c", 31001, 1, &[]), now, 0, &mut Script(vec![13]))
                .unwrap_err(),
            RegisterError::Failed
        );
        // Sixteen taken or zero draws fail the login.
        let mut draws = vec![11; 15];
        draws.push(0);
        draws.push(99);
        assert_eq!(
            r.register(ghost("d", 31004, 1, &[]), now, 0, &mut Script(draws))
                .unwrap_err(),
            RegisterError::Failed
        );
        assert_eq!(r.len(), 2);
    }

    #[test]
    fn a_session_that_never_proved_its_address_is_displaced_from_it() {
        let mut r = GhostRegistry::new(limits(8, 16, 100));
        let now = t0();
        let mut squatter = ghost("s", 33001, 1, &[]);
        squatter.user = Arc::new(AppUser {
            user_id: 66,
            username: "mallory".into(),
            callsign: String::new(),
            is_admin: false,
        });
        let s = r.register(squatter, now, 0, &mut Script(vec![5])).unwrap();
        let a = r
            .register(ghost("a", 33001, 1, &[]), now, 0, &mut Script(vec![6]))
            .unwrap();
        assert_eq!(a.displaced.unwrap().session_id, s.session.session_id);
        assert_eq!((r.len(), r.owner_count(66)), (1, 0));
        // Once proven, the address is held against other instances.
        let at = SocketAddr::from(([127, 0, 0, 1], 33001));
        r.resolve_udp(6, &name("alice"), 101, 101, at, now).unwrap();
        assert_eq!(
            r.register(ghost("b", 33001, 1, &[]), now, 0, &mut Script(vec![7]))
                .unwrap_err(),
            RegisterError::Failed
        );
        // An owner at its limit may displace its own unproven session.
        let mut r = GhostRegistry::new(limits(1, 16, 100));
        r.register(ghost("a", 33002, 1, &[]), now, 0, &mut Script(vec![1]))
            .unwrap();
        let b = r
            .register(ghost("b", 33002, 1, &[]), now, 0, &mut Script(vec![2]))
            .unwrap();
        assert!(b.displaced.is_some());
        assert_eq!(r.owner_count(1), 1);
    }

    #[test]
    fn replacement_by_instance_and_limits() {
        let mut r = GhostRegistry::new(limits(2, 2, 100));
        let now = t0();
        let first = r
            .register(ghost("a", 1, 1, &[]), now, 0, &mut Script(vec![1]))
            .unwrap();
        r.register(ghost("b", 2, 1, &[]), now, 0, &mut Script(vec![2]))
            .unwrap();
        // A third instance hits the limit; the same instance from another
        // port replaces its session (new id and tag).
        assert_eq!(
            r.register(ghost("c", 3, 1, &[]), now, 0, &mut Script(vec![3]))
                .unwrap_err(),
            RegisterError::SessionLimit {
                active: 2,
                limit: 2
            }
        );
        let again = r
            .register(ghost("a", 4, 1, &[]), now, 0, &mut Script(vec![4]))
            .unwrap();
        assert_eq!(again.replaced.unwrap().session_id, first.session.session_id);
        assert_ne!(again.session.session_id, first.session.session_id);
        assert_eq!(r.owner_count(1), 2);
        assert!(r.remove(&first.session.session_id).is_none());
        // The old tag no longer resolves.
        assert_eq!(
            r.resolve_udp(
                1,
                &name("alice"),
                101,
                101,
                SocketAddr::from(([127, 0, 0, 1], 1)),
                now
            )
            .unwrap_err(),
            UplinkReject::InvalidTag
        );
        assert_eq!(
            r.register(ghost("e", 5, 1, &[2, 3]), now, 0, &mut Script(vec![5]))
                .unwrap_err(),
            RegisterError::SubscriptionLimit {
                requested: 3,
                limit: 2
            }
        );
    }

    #[test]
    fn a_full_registry_evicts_the_least_recently_heard() {
        let mut r = GhostRegistry::new(limits(8, 16, 2));
        let now = t0();
        let a = r
            .register(ghost("a", 1, 1, &[]), now, 0, &mut Script(vec![1]))
            .unwrap();
        r.register(ghost("b", 2, 1, &[]), now, 0, &mut Script(vec![2]))
            .unwrap();
        let later = now + Duration::from_secs(1);
        r.resolve_udp(
            1,
            &name("alice"),
            101,
            101,
            SocketAddr::from(([127, 0, 0, 1], 1)),
            later,
        )
        .unwrap();
        let c = r
            .register(ghost("c", 3, 1, &[]), later, 0, &mut Script(vec![3]))
            .unwrap();
        assert_eq!(c.evicted.unwrap().tag, 2);
        assert!(r.get(&a.session.session_id).is_some());
        assert_eq!(r.len(), 2);
    }

    #[test]
    fn resolution_steps_and_routing_rules() {
        let mut r = GhostRegistry::new(limits(8, 3, 100));
        let now = t0();
        let at = SocketAddr::from(([127, 0, 0, 1], 32001));
        let s = r
            .register(ghost("a", 32001, 1, &[]), now, 0, &mut Script(vec![7]))
            .unwrap()
            .session;
        assert!(r.resolve_udp(7, &name("alice"), 101, 101, at, now).is_ok());
        assert_eq!(
            r.resolve_udp(0, &name("alice"), 101, 101, at, now)
                .unwrap_err(),
            UplinkReject::InvalidTag
        );
        assert_eq!(
            r.resolve_udp(8, &name("alice"), 101, 101, at, now)
                .unwrap_err(),
            UplinkReject::InvalidTag
        );
        assert_eq!(
            r.resolve_udp(7, &name("mallory"), 101, 101, at, now)
                .unwrap_err(),
            UplinkReject::Identity
        );
        assert_eq!(
            r.resolve_udp(7, &name("alice"), 102, 101, at, now)
                .unwrap_err(),
            UplinkReject::Identity
        );
        let other = SocketAddr::from(([127, 0, 0, 1], 32002));
        assert_eq!(
            r.resolve_udp(7, &name("alice"), 101, 101, other, now)
                .unwrap_err(),
            UplinkReject::Endpoint
        );
        let hold = Duration::from_millis(900);
        let id = s.session_id.as_str();
        assert_eq!(
            r.check_routing(id, 1, 8, &[8, 3, 8], now, hold)
                .unwrap()
                .rx_group_ids,
            vec![3, 8]
        );
        assert_eq!(
            r.check_routing(id, 1, 8, &[1, 2, 3], now, hold),
            Err(RoutingError::SubscriptionLimit {
                requested: 4,
                limit: 3
            })
        );
        assert_eq!(
            r.check_routing(id, 2, 8, &[], now, hold),
            Err(RoutingError::NotFound)
        );
        assert_eq!(
            r.check_routing(id, 1, 0, &[], now, hold),
            Err(RoutingError::InvalidTx)
        );
        assert_eq!(
            r.check_routing(id, 1, 1, &[-1], now, hold),
            Err(RoutingError::InvalidRx)
        );
        r.mark_voice(id, now);
        let soon = now + Duration::from_millis(100);
        assert_eq!(
            r.check_routing(id, 1, 8, &[], soon, hold),
            Err(RoutingError::PttActive)
        );
        // RX-only changes are always allowed; after 900 ms TX may change.
        assert!(r.check_routing(id, 1, 1, &[2], soon, hold).is_ok());
        let late = now + Duration::from_millis(901);
        let routing = r.check_routing(id, 1, 8, &[], late, hold).unwrap();
        assert_eq!(r.set_routing(id, routing), Some(vec![1, 8]));
        assert_eq!(r.group_counts(1), (0, 0));
        assert_eq!(r.group_counts(8), (1, 0));
        // Expiry after more than the timeout without a packet.
        assert!(r.expire(late, Duration::from_secs(20)).is_empty());
        let gone = r.expire(now + Duration::from_millis(20_001), Duration::from_secs(20));
        assert_eq!(gone.len(), 1);
        assert!(r.is_empty());
        assert_eq!(r.group_counts(8), (0, 0));
    }
}
