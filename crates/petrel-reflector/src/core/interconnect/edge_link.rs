//! What an edge's device traffic may do while its link to the centre is
//! not ready (draarl-interconnect §3.6, §6.1): only a ready link relays
//! upstream and authenticates; for a grace period after losing the centre
//! existing sessions keep working locally, with an edge-local per-domain
//! half-duplex lock; then they are removed (`control_unavailable`). While
//! a new connection is attached but not ready, packets are dropped (fail
//! closed).
//!
//! ```text
//!  Starting ──attached──▶ Attached ──ready──▶ Ready ──not_ready (resync)──▶ Attached
//!                            │                   │
//!                            └────detached───────┴──▶ Disconnected (lost at: first loss since ready)
//!  Disconnected ──attached──▶ Attached (the grace keeps running; removal waits while attached)
//!  Disconnected ∧ now − lost ≥ grace (15 s) ──handle_timeout → true, once──▶ Expired
//!                                              (remove every session: control_unavailable)
//!
//!  packet policy:  Ready → normal │ Disconnected < grace → local only, no upstream, no auth
//!                  voice then takes the local floor: first talker wins, freed after 900 ms idle
//!                  Starting / Attached / Expired → drop
//! ```
//!
//! The grace counts from the first loss since the link was last ready: a
//! reconnection that fails before becoming ready does not restart it.

use std::collections::HashMap;
use std::time::{Duration, Instant};

/// Default `DisconnectedLocalGraceSeconds` (§2, §6.1: 15 s, 5–120).
pub const DISCONNECTED_LOCAL_GRACE: Duration = Duration::from_secs(15);
/// An edge-local floor is free after this long without voice (§6.1).
pub const LOCAL_FLOOR_IDLE: Duration = Duration::from_millis(900);

/// The link's state.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LinkState {
    /// Never ready since start: the edge serves nothing (§6.1).
    Starting,
    /// Connected, confirming sessions or waiting for the snapshot.
    Attached,
    /// Ready (§3.6 step 6).
    Ready,
    /// Lost the centre at the instant given; the grace period runs.
    Disconnected(Instant),
    /// Lost the centre and the grace period ended.
    Expired,
}

/// What may be done with a device packet of an existing session.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PacketPolicy {
    /// The normal path: local fan-out, upstream relay, speaker lease,
    /// renewals.
    Normal,
    /// Local fan-out only (no upstream, no renew); voice also needs
    /// [`EdgeLink::local_voice`].
    LocalOnly,
    /// Drop (fail closed).
    Drop,
}

/// Counters of the link policy.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct EdgeLinkCounters {
    /// Packets dropped because the link was starting, attached but not
    /// ready, or past the grace period.
    pub fail_closed_drops: u64,
    /// Voice frames allowed locally during the grace period.
    pub local_voice: u64,
    /// Voice frames dropped because another session held the local floor.
    pub local_floor_drops: u64,
    /// Grace periods that ran out.
    pub grace_expiries: u64,
    /// Local floors evicted because the table was full.
    pub floor_evictions: u64,
}

/// The edge's link policy.
#[derive(Debug)]
pub struct EdgeLink {
    attached: bool,
    ready: bool,
    lost_at: Option<Instant>,
    expired: bool,
    grace: Duration,
    floors: HashMap<u64, (u64, Instant)>,
    max_domains: usize,
    counters: EdgeLinkCounters,
}

impl EdgeLink {
    /// A link that has not connected yet, with the grace period `grace`
    /// ([`DISCONNECTED_LOCAL_GRACE`] by default) and local floors for at
    /// most `max_domains` domains (when full, the least recently used
    /// floor goes).
    pub fn new(grace: Duration, max_domains: usize) -> Self {
        Self {
            attached: false,
            ready: false,
            lost_at: None,
            expired: false,
            grace,
            floors: HashMap::new(),
            max_domains: max_domains.max(1),
            counters: EdgeLinkCounters::default(),
        }
    }

    /// The state.
    pub fn state(&self) -> LinkState {
        if self.ready {
            LinkState::Ready
        } else if self.attached {
            LinkState::Attached
        } else if self.expired {
            LinkState::Expired
        } else if let Some(lost) = self.lost_at {
            LinkState::Disconnected(lost)
        } else {
            LinkState::Starting
        }
    }

    /// The counters.
    pub fn counters(&self) -> &EdgeLinkCounters {
        &self.counters
    }

    /// A control connection attached (§3.6 step 2); not ready yet. Also
    /// clear the pending requests (`EdgeSessions::detach`), the speaker
    /// states and the parked downstream.
    pub fn attached(&mut self) {
        self.attached = true;
        self.ready = false;
        self.floors.clear();
    }

    /// The link became ready (§3.6 step 6): sessions confirmed, snapshot
    /// committed and acknowledged. Ends any grace period.
    pub fn ready(&mut self) {
        self.attached = true;
        self.ready = true;
        self.lost_at = None;
        self.expired = false;
        self.floors.clear();
    }

    /// The link stopped being ready while attached (a resync, §3.7).
    pub fn not_ready(&mut self) {
        self.ready = false;
    }

    /// The control connection was lost at `now` (§6.1). The grace period
    /// starts at the first loss since the link was last ready; a link that
    /// was never ready keeps serving nothing.
    pub fn detached(&mut self, now: Instant) {
        let was_ready = self.ready;
        self.attached = false;
        self.ready = false;
        if was_ready && self.lost_at.is_none() {
            self.lost_at = Some(now);
        }
    }

    /// Whether a device packet from an unknown identity may be proxied to
    /// the centre (only a ready edge authenticates, §3.6).
    pub fn allows_new_auth(&self) -> bool {
        self.ready
    }

    fn in_grace(&self, now: Instant) -> bool {
        !self.attached
            && !self.expired
            && self
                .lost_at
                .is_some_and(|lost| now.saturating_duration_since(lost) < self.grace)
    }

    /// What to do at `now` with a packet of an existing session (counts
    /// the drops).
    pub fn packet_policy(&mut self, now: Instant) -> PacketPolicy {
        if self.ready {
            PacketPolicy::Normal
        } else if self.in_grace(now) {
            PacketPolicy::LocalOnly
        } else {
            self.counters.fail_closed_drops += 1;
            PacketPolicy::Drop
        }
    }

    /// A voice frame of `session_id` in `domain` at `now` during the grace
    /// period: whether it may be fanned out locally. The first talker
    /// takes the domain's local floor, keeps it while talking, and loses
    /// it after 900 ms without voice. Outside the grace period: `false`.
    pub fn local_voice(&mut self, now: Instant, domain: u64, session_id: u64) -> bool {
        if !self.in_grace(now) {
            self.counters.fail_closed_drops += 1;
            return false;
        }
        if let Some((holder, last)) = self.floors.get(&domain).copied() {
            if holder != session_id && now.saturating_duration_since(last) < LOCAL_FLOOR_IDLE {
                self.counters.local_floor_drops += 1;
                return false;
            }
        } else if self.floors.len() >= self.max_domains {
            if let Some(d) = self
                .floors
                .iter()
                .min_by_key(|(_, (_, last))| *last)
                .map(|(d, _)| *d)
            {
                self.floors.remove(&d);
                self.counters.floor_evictions += 1;
            }
        }
        self.floors.insert(domain, (session_id, now));
        self.counters.local_voice += 1;
        true
    }

    /// Ends the grace period when due: `true` exactly once, when every
    /// session must be removed with `control_unavailable`
    /// (`EdgeSessions::remove_all`). Idle local floors are dropped too.
    pub fn handle_timeout(&mut self, now: Instant) -> bool {
        self.floors
            .retain(|_, (_, last)| now.saturating_duration_since(*last) < LOCAL_FLOOR_IDLE);
        if self.attached || self.expired {
            return false;
        }
        match self.lost_at {
            Some(lost) if now.saturating_duration_since(lost) >= self.grace => {
                self.expired = true;
                self.floors.clear();
                self.counters.grace_expiries += 1;
                true
            }
            _ => false,
        }
    }

    /// When the grace period ends (while disconnected and not yet
    /// expired).
    pub fn poll_timeout(&self) -> Option<Instant> {
        if self.attached || self.expired {
            return None;
        }
        self.lost_at.map(|lost| lost + self.grace)
    }
}
