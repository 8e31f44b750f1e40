//! The edge's per-domain speaker state (draarl-interconnect §3.10): voice
//! of a domain goes out only under a lease from the centre; the first
//! frames wait briefly for the grant.
//!
//! ```text
//!  voice frame (session, epoch, domain; send allowed)
//!    ├ this session holds a live lease ─▶ Deliver (+ renewing claim when ≤ 450 ms left, one at a time)
//!    ├ another session holds it ────────▶ drop
//!    ├ claim pending ───────────────────▶ same session, < 2 buffered, ≤ 300 ms ─▶ buffer; else drop
//!    ├ blocked (after deny/timeout) ────▶ drop
//!    └ otherwise ───────────────────────▶ send claim, buffer the frame
//!  grant ─▶ hold for min(ttl, 2400 ms); buffered frames ≤ 300 ms old are released
//!  deny  ─▶ block for retry clamped to [50, 1200] ms; buffer dropped
//!  no answer after 300 ms, or the claim could not be sent ─▶ buffer dropped, block 50 ms
//! ```
//!
//! Generic over the buffered frame `F` (whatever the runtime fans out).
//! A renewing claim that gets no answer in 300 ms is forgotten so the next
//! frame can renew again; the held lease stays until its expiry (the spec
//! does not say; blocking a live talker would cut them off).

use std::collections::HashMap;
use std::time::{Duration, Instant};

use crate::codec::interconnect::messages::SpeakerLease;
use crate::codec::interconnect::Subtype;

use super::control_send::{reliable, ControlSend};
use super::outbound::MessageIds;
use super::speaker_lease_centre::{lease_action, LEASE_IDLE_TIMEOUT, LEASE_RENEW_BEFORE};

/// A claim unanswered for this long is given up (§3.10).
pub const LEASE_CLAIM_TIMEOUT: Duration = Duration::from_millis(300);
/// Buffered frames older than this are not released on a grant (§3.10).
pub const LEASE_BUFFER_MAX_AGE: Duration = Duration::from_millis(300);
/// Frames buffered per pending claim (§3.10).
pub const LEASE_BUFFER_FRAMES: usize = 2;
/// Longest lease ttl the edge accepts from a grant (§3.10).
pub const LEASE_MAX_TTL: Duration = Duration::from_millis(2400);
/// Shortest block after a deny; also the block after a claim timeout or a
/// failed claim send (§3.10).
pub const LEASE_MIN_BLOCK: Duration = Duration::from_millis(50);
/// Longest block after a deny (§3.10).
pub const LEASE_MAX_BLOCK: Duration = Duration::from_millis(1200);

/// Why a voice frame was dropped.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LeaseDrop {
    /// Another session of this edge holds or is claiming the domain.
    OtherTalker,
    /// The claim's buffer is full or the claim is older than 300 ms.
    BufferFull,
    /// Blocked after a deny, a claim timeout or a failed send.
    Blocked,
}

/// What to do with a voice frame.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum VoiceDecision<F> {
    /// Fan it out locally and relay it upstream with `lease_id`; send
    /// `renew` first if present.
    Deliver {
        /// The frame.
        frame: F,
        /// The lease id for the relay header.
        lease_id: u64,
        /// A renewing claim to send.
        renew: Option<ControlSend>,
    },
    /// Buffered until the claim is answered; send `claim` if present (the
    /// first frame starts the claim).
    Buffered {
        /// The claim to send.
        claim: Option<ControlSend>,
    },
    /// Dropped.
    Dropped(LeaseDrop),
}

/// Frames released by a grant, to deliver as [`VoiceDecision::Deliver`]
/// frames are.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Released<F> {
    /// The lease id for the relay header.
    pub lease_id: u64,
    /// The frames, oldest first.
    pub frames: Vec<F>,
}

/// Counters of the edge's speaker state.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct EdgeLeaseCounters {
    /// Claims sent (new and renewing).
    pub claims: u64,
    /// Grants received for a pending claim.
    pub grants: u64,
    /// Denies received for a pending claim.
    pub denies: u64,
    /// Claims that got no answer within 300 ms.
    pub claim_timeouts: u64,
    /// Frames buffered.
    pub buffered: u64,
    /// Buffered frames released by a grant.
    pub released: u64,
    /// Buffered frames dropped (deny, timeout, too old, session gone).
    pub buffer_drops: u64,
    /// Frames dropped for [`LeaseDrop::OtherTalker`].
    pub other_talker_drops: u64,
    /// Frames dropped for [`LeaseDrop::BufferFull`].
    pub buffer_full_drops: u64,
    /// Frames dropped for [`LeaseDrop::Blocked`].
    pub blocked_drops: u64,
    /// Answers that match no pending claim.
    pub stray_answers: u64,
    /// Domain states evicted because the table was full.
    pub evictions: u64,
}

#[derive(Debug, Clone)]
enum State<F> {
    Holding {
        session_id: u64,
        epoch: u64,
        lease_id: u64,
        expires: Instant,
        /// The last frame delivered under the lease (or the grant).
        last_voice: Instant,
        renew: Option<(u64, Instant)>,
    },
    Claiming {
        session_id: u64,
        epoch: u64,
        request_id: u64,
        started: Instant,
        buffer: Vec<(Instant, F)>,
    },
    Blocked {
        until: Instant,
    },
}

impl<F> State<F> {
    /// When this state ends by itself.
    fn deadline(&self) -> Instant {
        match self {
            State::Holding {
                expires,
                last_voice,
                renew,
                ..
            } => {
                let end = (*expires).min(*last_voice + LEASE_IDLE_TIMEOUT);
                match renew {
                    Some((_, sent)) => (*sent + LEASE_CLAIM_TIMEOUT).min(end),
                    None => end,
                }
            }
            State::Claiming { started, .. } => *started + LEASE_CLAIM_TIMEOUT,
            State::Blocked { until } => *until,
        }
    }
}

/// The edge's speaker state for every domain.
#[derive(Debug)]
pub struct EdgeSpeaker<F> {
    domains: HashMap<u64, State<F>>,
    max_domains: usize,
    counters: EdgeLeaseCounters,
}

fn claim_message(
    ids: &mut MessageIds,
    session_id: u64,
    epoch: u64,
    domain: u64,
    lease_id: u64,
) -> (u64, ControlSend) {
    let id = ids.next_id();
    let claim = SpeakerLease {
        action: lease_action::CLAIM.to_owned(),
        request_id: id,
        session_id,
        session_epoch: epoch,
        domain_id: domain,
        lease_id,
        ..SpeakerLease::default()
    };
    (
        id,
        ControlSend::json(Subtype::SPEAKER_LEASE, reliable(), id, 0, 0, &claim),
    )
}

impl<F> EdgeSpeaker<F> {
    /// No state; at most `max_domains` domains tracked (when full, the
    /// state ending soonest is evicted).
    pub fn new(max_domains: usize) -> Self {
        Self {
            domains: HashMap::new(),
            max_domains: max_domains.max(1),
            counters: EdgeLeaseCounters::default(),
        }
    }

    /// The counters.
    pub fn counters(&self) -> &EdgeLeaseCounters {
        &self.counters
    }

    /// Domains with a state.
    pub fn len(&self) -> usize {
        self.domains.len()
    }

    /// Whether no domain has a state.
    pub fn is_empty(&self) -> bool {
        self.domains.is_empty()
    }

    /// The lease this edge holds in `domain` at `now`: (session id, lease id).
    pub fn holder(&self, now: Instant, domain: u64) -> Option<(u64, u64)> {
        match self.domains.get(&domain) {
            Some(State::Holding {
                session_id,
                lease_id,
                expires,
                last_voice,
                ..
            }) if now < *expires
                && now.saturating_duration_since(*last_voice) <= LEASE_IDLE_TIMEOUT =>
            {
                Some((*session_id, *lease_id))
            }
            _ => None,
        }
    }

    fn drop_frame(&mut self, why: LeaseDrop) -> VoiceDecision<F> {
        match why {
            LeaseDrop::OtherTalker => self.counters.other_talker_drops += 1,
            LeaseDrop::BufferFull => self.counters.buffer_full_drops += 1,
            LeaseDrop::Blocked => self.counters.blocked_drops += 1,
        }
        VoiceDecision::Dropped(why)
    }

    /// Decides a Type 5 voice frame of device session `session_id` (epoch
    /// `epoch`) in `domain` at `now`. The caller has checked the session's
    /// epoch, domain and that sending is allowed.
    pub fn handle_voice(
        &mut self,
        ids: &mut MessageIds,
        now: Instant,
        session_id: u64,
        epoch: u64,
        domain: u64,
        frame: F,
    ) -> VoiceDecision<F> {
        // A lease idle for longer than the centre's idle timeout is dead
        // there (§3.10), whatever its expiry: a frame sent under it would
        // be refused, so it starts a new claim instead.
        if self.domains.get(&domain).is_some_and(|s| match s {
            State::Holding {
                expires,
                last_voice,
                ..
            } => now >= *expires || now.saturating_duration_since(*last_voice) > LEASE_IDLE_TIMEOUT,
            State::Blocked { until } => now >= *until,
            State::Claiming { .. } => false,
        }) {
            self.domains.remove(&domain);
        }
        match self.domains.get_mut(&domain) {
            Some(State::Holding {
                session_id: s,
                epoch: e,
                lease_id,
                expires,
                last_voice,
                renew,
            }) => {
                if *s != session_id || *e != epoch {
                    return self.drop_frame(LeaseDrop::OtherTalker);
                }
                *last_voice = now;
                let lease_id = *lease_id;
                let mut renew_send = None;
                if renew.is_none() && expires.saturating_duration_since(now) <= LEASE_RENEW_BEFORE {
                    let (id, send) = claim_message(ids, session_id, epoch, domain, lease_id);
                    *renew = Some((id, now));
                    renew_send = Some(send);
                    self.counters.claims += 1;
                }
                VoiceDecision::Deliver {
                    frame,
                    lease_id,
                    renew: renew_send,
                }
            }
            Some(State::Claiming {
                session_id: s,
                epoch: e,
                started,
                buffer,
                ..
            }) => {
                if *s != session_id || *e != epoch {
                    return self.drop_frame(LeaseDrop::OtherTalker);
                }
                if buffer.len() >= LEASE_BUFFER_FRAMES
                    || now.saturating_duration_since(*started) > LEASE_BUFFER_MAX_AGE
                {
                    return self.drop_frame(LeaseDrop::BufferFull);
                }
                buffer.push((now, frame));
                self.counters.buffered += 1;
                VoiceDecision::Buffered { claim: None }
            }
            Some(State::Blocked { .. }) => self.drop_frame(LeaseDrop::Blocked),
            None => {
                self.make_room();
                let (request_id, send) = claim_message(ids, session_id, epoch, domain, 0);
                self.domains.insert(
                    domain,
                    State::Claiming {
                        session_id,
                        epoch,
                        request_id,
                        started: now,
                        buffer: vec![(now, frame)],
                    },
                );
                self.counters.claims += 1;
                self.counters.buffered += 1;
                VoiceDecision::Buffered { claim: Some(send) }
            }
        }
    }

    fn make_room(&mut self) {
        if self.domains.len() < self.max_domains {
            return;
        }
        if let Some(d) = self
            .domains
            .iter()
            .min_by_key(|(_, s)| s.deadline())
            .map(|(d, _)| *d)
        {
            if let Some(State::Claiming { buffer, .. }) = self.domains.remove(&d) {
                self.counters.buffer_drops += buffer.len() as u64;
            }
            self.counters.evictions += 1;
        }
    }

    fn block(&mut self, domain: u64, until: Instant) {
        if let Some(State::Claiming { buffer, .. }) =
            self.domains.insert(domain, State::Blocked { until })
        {
            self.counters.buffer_drops += buffer.len() as u64;
        }
    }

    /// A grant or deny from the centre at `now`. A grant of the pending
    /// claim holds the lease for min(ttl, 2400 ms) and releases the
    /// buffered frames at most 300 ms old; a grant of a renewing claim
    /// extends the lease. A deny blocks the domain for the retry clamped to
    /// [50, 1200] ms and drops the buffer (a denied renewal loses the
    /// lease). Answers matching no pending claim are counted and ignored.
    pub fn handle_answer(&mut self, now: Instant, msg: &SpeakerLease) -> Option<Released<F>> {
        let domain = msg.domain_id;
        let matches = match self.domains.get(&domain) {
            Some(State::Claiming {
                request_id,
                session_id,
                ..
            }) => *request_id == msg.request_id && *session_id == msg.session_id,
            Some(State::Holding {
                renew: Some((id, _)),
                session_id,
                ..
            }) => *id == msg.request_id && *session_id == msg.session_id,
            _ => false,
        };
        if !matches {
            self.counters.stray_answers += 1;
            return None;
        }
        if msg.action == lease_action::DENY {
            self.counters.denies += 1;
            let retry = Duration::from_millis(u64::from(msg.retry_after_ms))
                .clamp(LEASE_MIN_BLOCK, LEASE_MAX_BLOCK);
            self.block(domain, now + retry);
            return None;
        }
        if msg.action != lease_action::GRANT || msg.lease_id == 0 {
            self.counters.stray_answers += 1;
            return None;
        }
        self.counters.grants += 1;
        let ttl = Duration::from_millis(u64::from(msg.ttl_ms)).min(LEASE_MAX_TTL);
        let old = self.domains.remove(&domain)?;
        let (session_id, epoch, buffer) = match old {
            State::Claiming {
                session_id,
                epoch,
                buffer,
                ..
            } => (session_id, epoch, buffer),
            State::Holding {
                session_id, epoch, ..
            } => (session_id, epoch, Vec::new()),
            State::Blocked { .. } => return None,
        };
        self.domains.insert(
            domain,
            State::Holding {
                session_id,
                epoch,
                lease_id: msg.lease_id,
                expires: now + ttl,
                last_voice: now,
                renew: None,
            },
        );
        let mut frames = Vec::with_capacity(buffer.len());
        for (at, f) in buffer {
            if now.saturating_duration_since(at) <= LEASE_BUFFER_MAX_AGE {
                frames.push(f);
            } else {
                self.counters.buffer_drops += 1;
            }
        }
        self.counters.released += frames.len() as u64;
        Some(Released {
            lease_id: msg.lease_id,
            frames,
        })
    }

    /// The claim for `domain` could not be sent: drop its buffer and block
    /// 50 ms (§3.10).
    pub fn claim_send_failed(&mut self, now: Instant, domain: u64) {
        if matches!(self.domains.get(&domain), Some(State::Claiming { .. })) {
            self.block(domain, now + LEASE_MIN_BLOCK);
        }
    }

    /// Ends what is due at `now`: claims older than 300 ms drop their
    /// buffer and block 50 ms; unanswered renewals are forgotten; expired
    /// leases and blocks are removed.
    pub fn handle_timeout(&mut self, now: Instant) {
        let mut timed_out = Vec::new();
        self.domains.retain(|d, s| match s {
            State::Holding {
                expires,
                last_voice,
                renew,
                ..
            } => {
                if renew.is_some_and(|(_, sent)| {
                    now.saturating_duration_since(sent) >= LEASE_CLAIM_TIMEOUT
                }) {
                    *renew = None;
                }
                now < *expires && now.saturating_duration_since(*last_voice) <= LEASE_IDLE_TIMEOUT
            }
            State::Blocked { until } => now < *until,
            State::Claiming { started, .. } => {
                if now.saturating_duration_since(*started) >= LEASE_CLAIM_TIMEOUT {
                    timed_out.push(*d);
                }
                true
            }
        });
        for d in timed_out {
            self.counters.claim_timeouts += 1;
            self.block(d, now + LEASE_MIN_BLOCK);
        }
    }

    /// The earliest instant [`EdgeSpeaker::handle_timeout`] has work (the
    /// reference ticks every 50 ms); `None` without state.
    pub fn poll_timeout(&self) -> Option<Instant> {
        self.domains.values().map(State::deadline).min()
    }

    /// Forgets the state of device session `session_id` (removed, or its
    /// route changed epoch or domain or disabled sending, §3.8); how many
    /// domains it held or claimed.
    pub fn release_session(&mut self, session_id: u64) -> usize {
        let mut dropped = 0u64;
        let before = self.domains.len();
        self.domains.retain(|_, s| match s {
            State::Holding { session_id: x, .. } => *x != session_id,
            State::Claiming {
                session_id: x,
                buffer,
                ..
            } => {
                if *x == session_id {
                    dropped += buffer.len() as u64;
                    false
                } else {
                    true
                }
            }
            State::Blocked { .. } => true,
        });
        self.counters.buffer_drops += dropped;
        before - self.domains.len()
    }

    /// Forgets every state (the link detached, §3.6 step 2, §6.1).
    pub fn clear(&mut self) {
        for s in self.domains.values() {
            if let State::Claiming { buffer, .. } = s {
                self.counters.buffer_drops += buffer.len() as u64;
            }
        }
        self.domains.clear();
    }
}
