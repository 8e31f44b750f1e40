//! The centre's speaker-lease table (draarl-interconnect §3.10): one lease
//! per communication domain makes voice half-duplex across nodes.
//!
//! ```text
//!  claim(owner, domain, lease_id)
//!    ├ not authorised (owner/epoch/control session, route domain, send) ─▶ deny, retry 0
//!    ├ lease dead (now ≥ expiry or > 900 ms since last voice) ─▶ deleted
//!    ├ live, other owner ─▶ deny, retry = min(last voice + 900 ms, expiry) − now
//!    ├ same owner, lease_id ≠ 0 and ≠ current ─▶ deny, retry 450 ms
//!    └ grant (keep or mint id), last voice = now, expiry = now + 1200 ms, ttl 1200
//!  voice(owner, domain, lease_id): live ∧ same owner ∧ same id ─▶ accepted, refreshes both
//!  release exact (owner + id) │ release_session │ release_node (node disconnect) │ sweep dead
//! ```
//!
//! The longest over (Petrel's rule, not the reference's): a centre's
//! shards cut a centre-direct talker's over after `floor_max_talk_s` and
//! hold it off the domain for `floor_holdoff_ms` (`policy/floor.rs`), and
//! the centre's local floor does the same to an edge talker's frames it
//! delivers to its own devices. Without the same limit here an edge
//! talker would keep its lease — and be heard on every edge — while the
//! centre's own devices stopped hearing it. With a [`TalkLimit`] the lease
//! ends when its owner has held it for `max_talk` (the voice frame that
//! reaches it is refused, §3.10 claims of that owner are denied for
//! `holdoff`, others may claim at once), so an over ends everywhere at the
//! same time: the lease starts when the first frame is granted, before the
//! centre's local floor sees that frame, so it is always the lease that
//! ends the over first.
//!
//! ```text
//!  claim or voice of the owner, held ≥ max_talk ─▶ lease deleted, owner barred until now + holdoff
//!  claim of a barred owner ─▶ deny, retry = bar end − now
//! ```
//!
//! Claims are not voice (Petrel's rule, on top of §3.10, where a renewal
//! refreshes the lease like a frame): a lease also dies when no voice
//! frame was accepted under it for [`SILENT_LEASE_LIMIT`] (from its grant
//! or its last frame), however often its owner renews; and when a lease
//! that carried no frame, or died of that limit, had kept another claimant
//! waiting, its owner may not claim that domain again for
//! [`SILENT_LEASE_HOLDOFF`] or until another owner has taken it. An honest
//! edge claims for a frame it already holds and sends it on the grant, so
//! neither rule touches it; an edge that only claims can no longer hold a
//! floor — it held one for ever under the reference's rules.
//!
//! Centre-local devices and scheduled broadcasts compete in the same table
//! with the node id `center`. The authorisation check needs the device
//! session owner table and the route; the runtime computes it and passes
//! the result.

use std::collections::{HashMap, HashSet};
use std::time::{Duration, Instant};

use crate::codec::interconnect::messages::SpeakerLease;
use crate::codec::interconnect::{NodeId, Subtype};

use super::control_send::{reliable, ControlSend};
use super::outbound::MessageIds;

/// Lease time to live from a grant or an accepted voice frame (§3.10).
pub const LEASE_TTL: Duration = Duration::from_millis(1200);
/// A lease dies this long after its last accepted voice frame (§3.10).
pub const LEASE_IDLE_TIMEOUT: Duration = Duration::from_millis(900);
/// The edge renews a held lease when this little is left (§3.10).
pub const LEASE_RENEW_BEFORE: Duration = Duration::from_millis(450);
/// A lease with no voice frame accepted for this long is dead, renewed or
/// not (Petrel's rule, see the module docs): twice the ttl, so the §11
/// timeline (a renewal at 800 ms, the next frame at 1600 ms) still holds.
pub const SILENT_LEASE_LIMIT: Duration = Duration::from_millis(2400);
/// How long the owner of a lease that ended silent while another claimant
/// waited may not claim that domain again, unless another owner takes it
/// first (Petrel's rule): longer than a denied contender's retry delay
/// (at most [`LEASE_TTL`]), so the contender gets the floor first.
pub const SILENT_LEASE_HOLDOFF: Duration = Duration::from_secs(2);
/// `retry_after_ms` when the same owner claims with another lease id
/// (§3.10).
pub const LEASE_MISMATCH_RETRY: Duration = Duration::from_millis(450);

/// The `action` values of 0x28 SpeakerLease (§3.5).
pub mod lease_action {
    /// Edge → centre: claim or renew.
    pub const CLAIM: &str = "claim";
    /// Centre → edge: granted.
    pub const GRANT: &str = "grant";
    /// Centre → edge: denied (with `retry_after_ms`).
    pub const DENY: &str = "deny";
    /// Edge → centre: give up (never sent by the reference edge).
    pub const RELEASE: &str = "release";
}

/// The longest lease one owner may hold without a pause, and how long it
/// is then refused the domain (the single node's `floor_max_talk_s` and
/// `floor_holdoff_ms`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TalkLimit {
    /// Longest over.
    pub max_talk: Duration,
    /// How long its owner is refused the domain, counted from the cut.
    pub holdoff: Duration,
}

/// Who holds a lease: a device session through one control session of one
/// node (`center` for centre-local talkers).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct LeaseOwner {
    /// The node.
    pub node: NodeId,
    /// Its control (node) session id.
    pub control_session: u64,
    /// The device session.
    pub session_id: u64,
    /// Its epoch.
    pub session_epoch: u64,
}

/// The centre's answer to a claim.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LeaseDecision {
    /// Granted: the lease id and its ttl (1200 ms).
    Grant {
        /// Lease id (never 0).
        lease_id: u64,
        /// Time to live, ms.
        ttl_ms: u32,
    },
    /// Denied: retry after this many ms (0 for an unauthorised claim).
    Deny {
        /// Retry after, ms.
        retry_after_ms: u32,
    },
}

/// Why a voice frame's lease was refused.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LeaseReject {
    /// No live lease in the domain.
    NoLease,
    /// The lease belongs to another owner.
    NotOwner,
    /// The frame carries another lease id.
    WrongLeaseId,
    /// The owner held the lease for the [`TalkLimit`]: it just ended.
    TalkLimit,
}

/// Counters of the lease table (§7 "lease grants" and the rest).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct LeaseCounters {
    /// Grants (new and kept leases).
    pub grants: u64,
    /// Denials.
    pub denies: u64,
    /// Voice frames accepted.
    pub voice_accepted: u64,
    /// Voice frames refused.
    pub voice_refused: u64,
    /// Dead leases deleted.
    pub expired: u64,
    /// Leases released (exact release, session, node).
    pub released: u64,
    /// Live leases evicted because the table was full.
    pub evictions: u64,
    /// Claims without a request id, ignored.
    pub invalid_claims: u64,
    /// Leases ended at the [`TalkLimit`].
    pub talk_limit_cuts: u64,
    /// Claims denied because their owner was cut at the limit lately.
    pub holdoff_denies: u64,
    /// Leases that carried no frame, or died of [`SILENT_LEASE_LIMIT`],
    /// while another claimant waited (their owner is held off for
    /// [`SILENT_LEASE_HOLDOFF`]).
    pub silent_leases: u64,
}

#[derive(Debug, Clone)]
struct Lease {
    owner: LeaseOwner,
    lease_id: u64,
    /// When the lease was granted (the over began).
    since: Instant,
    last_voice: Instant,
    expiry: Instant,
    /// The grant, or the last accepted voice frame (renewals do not move
    /// it).
    last_frame: Instant,
    /// Whether a voice frame was accepted under it.
    voiced: bool,
    /// Whether another owner's claim was denied while it lived.
    contended: bool,
}

/// Whether `a` and `b` are the same talker (the same device session on
/// the same node) for the hold-off.
fn same_talker(a: &LeaseOwner, b: &LeaseOwner) -> bool {
    a.node == b.node && a.session_id == b.session_id
}

impl Lease {
    fn dead(&self, now: Instant) -> bool {
        now >= self.expiry
            || now.saturating_duration_since(self.last_voice) > LEASE_IDLE_TIMEOUT
            || now.saturating_duration_since(self.last_frame) > SILENT_LEASE_LIMIT
    }
}

fn ms(d: Duration) -> u32 {
    u32::try_from(d.as_millis()).unwrap_or(u32::MAX)
}

/// The centre's per-domain lease table.
#[derive(Debug)]
pub struct LeaseTable {
    leases: HashMap<u64, Lease>,
    /// Per domain, the owner last cut at the talk limit (or whose silent
    /// lease kept a claimant waiting) and the end of its hold-off (at most `max_domains` entries, swept once over).
    barred: HashMap<u64, (LeaseOwner, Instant)>,
    /// The domains of `barred` whose bar is a silent lease's (lifted when
    /// another owner takes the domain); a subset of its keys.
    silent_bars: HashSet<u64>,
    talk_limit: Option<TalkLimit>,
    max_domains: usize,
    counters: LeaseCounters,
}

impl LeaseTable {
    /// An empty table holding leases for at most `max_domains` domains
    /// (when full, dead leases go first, then the one expiring soonest).
    pub fn new(max_domains: usize) -> Self {
        Self {
            leases: HashMap::new(),
            barred: HashMap::new(),
            silent_bars: HashSet::new(),
            talk_limit: None,
            max_domains: max_domains.max(1),
            counters: LeaseCounters::default(),
        }
    }

    /// Sets the longest over (`None`: none, as in §3.10); see the module
    /// docs.
    pub fn set_talk_limit(&mut self, limit: Option<TalkLimit>) {
        self.talk_limit = limit;
    }

    /// Ends `domain`'s lease if it reached the talk limit at `now`, barring
    /// its owner; the bar's end when it did.
    fn cut_at_limit(&mut self, now: Instant, domain: u64) -> Option<Instant> {
        let limit = self.talk_limit?;
        let l = self.leases.get(&domain)?;
        if now.saturating_duration_since(l.since) < limit.max_talk {
            return None;
        }
        let owner = l.owner;
        self.leases.remove(&domain);
        let until = now + limit.holdoff;
        self.bar(now, domain, owner, until);
        self.counters.talk_limit_cuts += 1;
        Some(until)
    }

    /// Removes `domain`'s lease if it is dead; one that carried no frame,
    /// or died of the silent limit, while another claimant waited bars its
    /// owner for [`SILENT_LEASE_HOLDOFF`] (lifted when another owner takes
    /// the domain).
    fn remove_if_dead(&mut self, now: Instant, domain: u64) {
        let Some(l) = self.leases.get(&domain).filter(|l| l.dead(now)) else {
            return;
        };
        // It died of the silent limit when that came before the idle
        // timeout and the expiry; or it never carried a frame.
        let silent_end = l.last_frame + SILENT_LEASE_LIMIT;
        let silent =
            !l.voiced || (silent_end < l.last_voice + LEASE_IDLE_TIMEOUT && silent_end < l.expiry);
        let (owner, contended) = (l.owner, l.contended);
        self.leases.remove(&domain);
        self.counters.expired += 1;
        if silent && contended {
            self.counters.silent_leases += 1;
            self.bar(now, domain, owner, now + SILENT_LEASE_HOLDOFF);
            self.silent_bars.insert(domain);
        }
    }

    /// Bars `owner` from claiming `domain` until `until` (one bar per
    /// domain; the table is bounded by `max_domains`, the bar ending
    /// first evicted).
    fn bar(&mut self, now: Instant, domain: u64, owner: LeaseOwner, until: Instant) {
        if self.barred.len() >= self.max_domains && !self.barred.contains_key(&domain) {
            self.barred.retain(|_, (_, end)| now < *end);
            if self.barred.len() >= self.max_domains {
                if let Some(d) = self
                    .barred
                    .iter()
                    .min_by_key(|(_, (_, end))| *end)
                    .map(|(d, _)| *d)
                {
                    self.barred.remove(&d);
                }
            }
        }
        self.barred.insert(domain, (owner, until));
        self.silent_bars.remove(&domain);
    }

    /// The end of `owner`'s hold-off in `domain`, if it is barred at `now`.
    fn barred_until(&self, now: Instant, owner: &LeaseOwner, domain: u64) -> Option<Instant> {
        self.barred
            .get(&domain)
            .filter(|(who, until)| same_talker(who, owner) && now < *until)
            .map(|(_, until)| *until)
    }

    /// The counters.
    pub fn counters(&self) -> &LeaseCounters {
        &self.counters
    }

    /// Domains with a lease entry (live or not yet swept).
    pub fn len(&self) -> usize {
        self.leases.len()
    }

    /// Whether no lease is held.
    pub fn is_empty(&self) -> bool {
        self.leases.is_empty()
    }

    /// The live lease of `domain` at `now`: (owner, lease id).
    pub fn holder(&self, now: Instant, domain: u64) -> Option<(LeaseOwner, u64)> {
        self.leases
            .get(&domain)
            .filter(|l| !l.dead(now))
            .map(|l| (l.owner, l.lease_id))
    }

    fn make_room(&mut self, now: Instant) {
        if self.leases.len() < self.max_domains {
            return;
        }
        self.sweep(now);
        if self.leases.len() < self.max_domains {
            return;
        }
        if let Some(d) = self
            .leases
            .iter()
            .min_by_key(|(_, l)| l.expiry)
            .map(|(d, _)| *d)
        {
            self.leases.remove(&d);
            self.counters.evictions += 1;
        }
    }

    /// Decides a claim by `owner` for `domain` (§3.10). `lease_id` is the
    /// claim's (0 for a new claim, the held id for a renewal);
    /// `authorised` is the runtime's check that `owner` owns the device
    /// session with that epoch through this control session and that its
    /// route is in `domain` with sending allowed. Lease ids come from the
    /// centre's MessageID counter.
    pub fn claim(
        &mut self,
        ids: &mut MessageIds,
        now: Instant,
        owner: LeaseOwner,
        domain: u64,
        lease_id: u64,
        authorised: bool,
    ) -> LeaseDecision {
        if !authorised {
            self.counters.denies += 1;
            return LeaseDecision::Deny { retry_after_ms: 0 };
        }
        self.remove_if_dead(now, domain);
        if self.leases.get(&domain).is_some_and(|l| l.owner == owner) {
            self.cut_at_limit(now, domain);
        }
        if let Some(until) = self.barred_until(now, &owner, domain) {
            self.counters.denies += 1;
            self.counters.holdoff_denies += 1;
            return LeaseDecision::Deny {
                retry_after_ms: ms(until.saturating_duration_since(now)),
            };
        }
        if let Some(l) = self.leases.get_mut(&domain) {
            if l.owner != owner {
                let until = (l.last_voice + LEASE_IDLE_TIMEOUT)
                    .min(l.last_frame + SILENT_LEASE_LIMIT)
                    .min(l.expiry);
                l.contended = true;
                self.counters.denies += 1;
                return LeaseDecision::Deny {
                    retry_after_ms: ms(until.saturating_duration_since(now)),
                };
            }
            if lease_id != 0 && lease_id != l.lease_id {
                self.counters.denies += 1;
                return LeaseDecision::Deny {
                    retry_after_ms: ms(LEASE_MISMATCH_RETRY),
                };
            }
            l.last_voice = now;
            l.expiry = now + LEASE_TTL;
            self.counters.grants += 1;
            return LeaseDecision::Grant {
                lease_id: l.lease_id,
                ttl_ms: ms(LEASE_TTL),
            };
        }
        if self.silent_bars.remove(&domain) {
            self.barred.remove(&domain);
        }
        self.make_room(now);
        let lease_id = ids.next_id();
        self.leases.insert(
            domain,
            Lease {
                owner,
                lease_id,
                since: now,
                last_voice: now,
                expiry: now + LEASE_TTL,
                last_frame: now,
                voiced: false,
                contended: false,
            },
        );
        self.counters.grants += 1;
        LeaseDecision::Grant {
            lease_id,
            ttl_ms: ms(LEASE_TTL),
        }
    }

    /// Handles a 0x28 claim from `node`'s control session
    /// `control_session` and builds the grant or deny to send back (the
    /// request id echoed); `None` for a message that is not a claim with a
    /// request id (counted), or a release (applied, no answer).
    pub fn handle_message(
        &mut self,
        ids: &mut MessageIds,
        now: Instant,
        node: NodeId,
        control_session: u64,
        msg: &SpeakerLease,
        authorised: bool,
    ) -> Option<ControlSend> {
        let owner = LeaseOwner {
            node,
            control_session,
            session_id: msg.session_id,
            session_epoch: msg.session_epoch,
        };
        if msg.action == lease_action::RELEASE {
            self.release(owner, msg.domain_id, msg.lease_id);
            return None;
        }
        if msg.action != lease_action::CLAIM || msg.request_id == 0 {
            self.counters.invalid_claims += 1;
            return None;
        }
        let decision = self.claim(ids, now, owner, msg.domain_id, msg.lease_id, authorised);
        let mut reply = SpeakerLease {
            action: String::new(),
            request_id: msg.request_id,
            session_id: msg.session_id,
            session_epoch: msg.session_epoch,
            domain_id: msg.domain_id,
            ..SpeakerLease::default()
        };
        match decision {
            LeaseDecision::Grant { lease_id, ttl_ms } => {
                reply.action = lease_action::GRANT.to_owned();
                reply.lease_id = lease_id;
                reply.ttl_ms = ttl_ms;
            }
            LeaseDecision::Deny { retry_after_ms } => {
                reply.action = lease_action::DENY.to_owned();
                reply.retry_after_ms = retry_after_ms;
            }
        }
        Some(ControlSend::json(
            Subtype::SPEAKER_LEASE,
            reliable(),
            ids.next_id(),
            0,
            0,
            &reply,
        ))
    }

    /// Checks the lease of an upstream Type 5 frame (§3.10) and, when it is
    /// the live lease of `owner` with id `lease_id`, refreshes its last
    /// voice and expiry.
    ///
    /// # Errors
    /// [`LeaseReject`]; nothing changes.
    pub fn voice(
        &mut self,
        now: Instant,
        owner: LeaseOwner,
        domain: u64,
        lease_id: u64,
    ) -> Result<(), LeaseReject> {
        let owned = self
            .leases
            .get(&domain)
            .is_some_and(|l| !l.dead(now) && l.owner == owner && l.lease_id == lease_id);
        if owned && self.cut_at_limit(now, domain).is_some() {
            self.counters.voice_refused += 1;
            return Err(LeaseReject::TalkLimit);
        }
        let verdict = match self.leases.get_mut(&domain) {
            Some(l) if !l.dead(now) => {
                if l.owner != owner {
                    Err(LeaseReject::NotOwner)
                } else if l.lease_id != lease_id {
                    Err(LeaseReject::WrongLeaseId)
                } else {
                    l.last_voice = now;
                    l.expiry = now + LEASE_TTL;
                    l.last_frame = now;
                    l.voiced = true;
                    Ok(())
                }
            }
            _ => Err(LeaseReject::NoLease),
        };
        match verdict {
            Ok(()) => self.counters.voice_accepted += 1,
            Err(_) => self.counters.voice_refused += 1,
        }
        verdict
    }

    /// Whether a text frame's lease id is acceptable: text carries lease
    /// id 0 (§3.10).
    pub fn text_lease_ok(lease_id: u64) -> bool {
        lease_id == 0
    }

    /// Releases the lease of `domain` if `owner` holds it with exactly
    /// `lease_id`; whether it did.
    pub fn release(&mut self, owner: LeaseOwner, domain: u64, lease_id: u64) -> bool {
        let hit = self
            .leases
            .get(&domain)
            .is_some_and(|l| l.owner == owner && l.lease_id == lease_id);
        if hit {
            self.leases.remove(&domain);
            self.counters.released += 1;
        }
        hit
    }

    fn release_where(&mut self, f: impl Fn(&LeaseOwner) -> bool) -> usize {
        let before = self.leases.len();
        self.leases.retain(|_, l| !f(&l.owner));
        let n = before - self.leases.len();
        self.counters.released += n as u64;
        n
    }

    /// Releases every lease of device session `session_id` (session
    /// removed, or its route changed epoch, domain or disabled sending);
    /// how many.
    pub fn release_session(&mut self, node: NodeId, session_id: u64) -> usize {
        self.release_where(|o| o.node == node && o.session_id == session_id)
    }

    /// Releases every lease held through `node`'s control session
    /// `control_session` (the node disconnected, §6.2); how many.
    pub fn release_node(&mut self, node: NodeId, control_session: u64) -> usize {
        self.release_where(|o| o.node == node && o.control_session == control_session)
    }

    /// Deletes dead leases; how many. Call now and then (e.g. every
    /// second) so idle domains do not linger.
    pub fn sweep(&mut self, now: Instant) -> usize {
        self.barred.retain(|_, (_, until)| now < *until);
        let barred = &self.barred;
        self.silent_bars.retain(|d| barred.contains_key(d));
        let dead: Vec<u64> = (self.leases.iter())
            .filter(|(_, l)| l.dead(now))
            .map(|(d, _)| *d)
            .collect();
        for &domain in &dead {
            self.remove_if_dead(now, domain);
        }
        dead.len()
    }
}
