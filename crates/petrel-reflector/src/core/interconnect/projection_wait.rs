//! The projection-version wait rule for downstream relays at an edge
//! (draarl-interconnect §4.7): a RelayDownstream may name a projection
//! version the edge has not applied yet; it waits for it, briefly.
//!
//! ```text
//!  accepted 0x31 ─▶ link ready? ─no──▶ drop (not_ready)
//!                   age ≤ 200 ms? ─no─▶ drop (stale)
//!                   epoch = projection epoch, PV = required? ─no─▶ drop (mismatch)
//!                   version ≥ required? ─yes─▶ Deliver (local fan-out)
//!                                       └─no──▶ park (≤ 1024; full: the oldest goes)
//!  parked: re-checked on every applied delta/snapshot and every 20 ms:
//!          released when version ≥ required; dropped when 200 ms old, the
//!          epoch changed or the link is no longer ready.
//! ```
//!
//! Ages are local (monotonic, from when the frame was read off the socket
//! or the TLS stream), so WAN latency does not count against the 200 ms.

use std::collections::VecDeque;
use std::time::{Duration, Instant};

use crate::codec::interconnect::Subtype;

use super::accepted::Accepted;

/// Limits of the wait rule (§4.7).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ProjectionWaitConfig {
    /// Frames parked or released-but-not-polled at most (1024).
    pub max_parked: usize,
    /// Largest local age of a frame (200 ms).
    pub max_age: Duration,
    /// Re-check period of parked frames (20 ms).
    pub recheck: Duration,
}

impl Default for ProjectionWaitConfig {
    fn default() -> Self {
        Self {
            max_parked: 1024,
            max_age: Duration::from_millis(200),
            recheck: Duration::from_millis(20),
        }
    }
}

/// Why a downstream frame was dropped.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum WaitDrop {
    /// The link is not ready (§3.6 step 6).
    NotReady,
    /// Older than 200 ms.
    Stale,
    /// Envelope ClusterEpoch ≠ the projection's epoch (or it changed while
    /// parked).
    EpochMismatch,
    /// Envelope PV ≠ the relay's RequiredProjectionVersion.
    VersionMismatch,
    /// Not a RelayDownstream.
    NotARelay,
    /// Evicted, oldest first, to stay within `max_parked`.
    Overflow,
}

/// What [`ProjectionWait::handle_downstream`] decided.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum WaitVerdict {
    /// The projection is recent enough: fan it out now.
    Deliver(Accepted),
    /// Parked until the projection catches up.
    Parked,
    /// Dropped.
    Dropped(WaitDrop),
}

/// Counters of the wait rule (not named by §7).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct WaitCounters {
    /// Delivered at once.
    pub delivered: u64,
    /// Parked.
    pub parked: u64,
    /// Released from the park.
    pub released: u64,
    /// Dropped: link not ready (on arrival or while parked).
    pub not_ready_drops: u64,
    /// Dropped: older than 200 ms (on arrival or while parked).
    pub stale_drops: u64,
    /// Dropped: cluster epoch mismatch (on arrival or while parked).
    pub epoch_drops: u64,
    /// Dropped: envelope PV ≠ required version.
    pub version_mismatch_drops: u64,
    /// Dropped: not a RelayDownstream.
    pub not_relay_drops: u64,
    /// Evicted by a full park.
    pub overflow_drops: u64,
}

/// The edge's downstream wait state (one per link to the centre).
#[derive(Debug)]
pub struct ProjectionWait {
    cfg: ProjectionWaitConfig,
    ready: bool,
    epoch: u64,
    version: u64,
    parked: VecDeque<(u64, Accepted)>,
    released: VecDeque<Accepted>,
    next_recheck: Option<Instant>,
    counters: WaitCounters,
}

impl ProjectionWait {
    /// A wait state for a link that is not ready yet.
    pub fn new(cfg: ProjectionWaitConfig) -> Self {
        Self {
            cfg,
            ready: false,
            epoch: 0,
            version: 0,
            parked: VecDeque::new(),
            released: VecDeque::new(),
            next_recheck: None,
            counters: WaitCounters::default(),
        }
    }

    /// The counters.
    pub fn counters(&self) -> &WaitCounters {
        &self.counters
    }

    /// Frames parked now.
    pub fn parked(&self) -> usize {
        self.parked.len()
    }

    /// Marks the link ready or not; not ready drops every parked and
    /// released-but-unpolled frame (§4.7, §6.1 "detach clears parked
    /// downstream").
    pub fn set_ready(&mut self, ready: bool) {
        self.ready = ready;
        if !ready {
            let n = self.parked.len() + self.released.len();
            self.counters.not_ready_drops += n as u64;
            self.parked.clear();
            self.released.clear();
            self.next_recheck = None;
        }
    }

    /// Records an applied delta or snapshot (epoch, version) and re-checks
    /// the parked frames at `now`.
    pub fn set_projection(&mut self, now: Instant, epoch: u64, version: u64) {
        self.epoch = epoch;
        self.version = version;
        self.recheck(now);
    }

    fn age_ok(&self, now: Instant, a: &Accepted) -> bool {
        now.saturating_duration_since(a.received_at) <= self.cfg.max_age
    }

    /// Applies the rule to an accepted RelayDownstream at `now`.
    pub fn handle_downstream(&mut self, now: Instant, frame: Accepted) -> WaitVerdict {
        let drop = |c: &mut WaitCounters, d: WaitDrop| {
            match d {
                WaitDrop::NotReady => c.not_ready_drops += 1,
                WaitDrop::Stale => c.stale_drops += 1,
                WaitDrop::EpochMismatch => c.epoch_drops += 1,
                WaitDrop::VersionMismatch => c.version_mismatch_drops += 1,
                WaitDrop::NotARelay => c.not_relay_drops += 1,
                WaitDrop::Overflow => c.overflow_drops += 1,
            }
            WaitVerdict::Dropped(d)
        };
        if !self.ready {
            return drop(&mut self.counters, WaitDrop::NotReady);
        }
        if !self.age_ok(now, &frame) {
            return drop(&mut self.counters, WaitDrop::Stale);
        }
        let required = match frame.relay() {
            Some(r) if frame.header.subtype == Subtype::RELAY_DOWNSTREAM => {
                r.header.required_projection_version
            }
            _ => return drop(&mut self.counters, WaitDrop::NotARelay),
        };
        if frame.header.cluster_epoch != self.epoch {
            return drop(&mut self.counters, WaitDrop::EpochMismatch);
        }
        if frame.header.projection_version != required {
            return drop(&mut self.counters, WaitDrop::VersionMismatch);
        }
        if self.version >= required {
            self.counters.delivered += 1;
            return WaitVerdict::Deliver(frame);
        }
        if self.parked.len() + self.released.len() >= self.cfg.max_parked.max(1) {
            if self.released.pop_front().is_none() {
                self.parked.pop_front();
            }
            self.counters.overflow_drops += 1;
        }
        self.parked.push_back((required, frame));
        self.counters.parked += 1;
        if self.next_recheck.is_none() {
            self.next_recheck = Some(now + self.cfg.recheck);
        }
        WaitVerdict::Parked
    }

    fn recheck(&mut self, now: Instant) {
        let mut keep = VecDeque::with_capacity(self.parked.len());
        while let Some((required, frame)) = self.parked.pop_front() {
            if !self.ready {
                self.counters.not_ready_drops += 1;
            } else if frame.header.cluster_epoch != self.epoch {
                self.counters.epoch_drops += 1;
            } else if !self.age_ok(now, &frame) {
                self.counters.stale_drops += 1;
            } else if self.version >= required {
                self.counters.released += 1;
                self.released.push_back(frame);
            } else {
                keep.push_back((required, frame));
            }
        }
        self.parked = keep;
        self.next_recheck = if self.parked.is_empty() {
            None
        } else {
            Some(now + self.cfg.recheck)
        };
    }

    /// The 20 ms re-check: call at [`ProjectionWait::poll_timeout`].
    pub fn handle_timeout(&mut self, now: Instant) {
        if self.next_recheck.is_some_and(|t| now >= t) {
            self.recheck(now);
        }
    }

    /// When the parked frames are next re-checked; `None` with none parked.
    pub fn poll_timeout(&self) -> Option<Instant> {
        self.next_recheck
    }

    /// The next frame released from the park, in arrival order.
    pub fn poll_release(&mut self) -> Option<Accepted> {
        self.released.pop_front()
    }
}
