//! The edge's side of session reconfirmation (draarl-interconnect §3.6
//! step 4, §3.9, §6.1): after a (re)connect, before `node_ready`, the live
//! sessions are sent to the centre in batches of ≤ 128, one batch at a
//! time, each answered within 5 s; each confirmed session takes its new id
//! and grant, each refused one is removed.
//!
//! ```text
//!  connected ─▶ start: no live session ─▶ Done (send node_ready)
//!                      otherwise ─▶ Send(batch 1)
//!  0x25 response (same request id, every item answered once, a grant per success)
//!     ─▶ swap old → new ids; refused ─▶ removed (session_reconfirm_rejected)
//!     ─▶ Send(next batch) │ Done
//!  bad response, a swap that fails, or 5 s without an answer ─▶ Failed (close, reconnect)
//! ```
//!
//! While this runs the link is attached but not ready: device packets are
//! dropped (fail closed, §6.1). The runtime keeps route snapshots and
//! deltas out of the sessions until [`ConfirmStep::Done`].

use std::collections::{HashMap, VecDeque};
use std::time::{Duration, Instant};

use crate::codec::interconnect::messages::{
    ConfirmItem, ConfirmRequest, ConfirmResponse, MAX_CONFIRM_BATCH,
};
use crate::codec::interconnect::{Flags, Subtype};

use super::control_send::ControlSend;
use super::edge_devices::EdgeDevices;
use super::outbound::MessageIds;

/// How long the edge waits for the answer to one batch (§3.9).
pub const CONFIRM_BATCH_TIMEOUT: Duration = Duration::from_secs(5);

/// What to do next.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ConfirmStep {
    /// Send this batch (0x25, CONTROL | ACK | CRITICAL).
    Send(ControlSend),
    /// Every batch answered: send `node_ready`.
    Done,
    /// The attempt failed (why): close the connection and reconnect.
    Failed(&'static str),
}

/// Counters of the edge's reconfirmations.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct EdgeConfirmCounters {
    /// Attempts started with at least one session.
    pub attempts: u64,
    /// Batches sent.
    pub batches_sent: u64,
    /// Sessions confirmed (swapped to their new id).
    pub confirmed: u64,
    /// Sessions the centre refused, removed (`session_reconfirm_rejected`).
    pub session_reconfirm_rejected: u64,
    /// Attempts that failed (bad answer, timeout).
    pub failed: u64,
    /// Sessions dropped because the centre cannot reconfirm (no bit 7).
    pub unsupported_drops: u64,
}

impl EdgeConfirmCounters {
    /// Every counter with its name, for metrics export.
    pub fn list(&self) -> Vec<(&'static str, u64)> {
        vec![
            ("session_reconfirm_attempts", self.attempts),
            ("session_reconfirm_batches_sent", self.batches_sent),
            ("session_reconfirm_confirmed", self.confirmed),
            (
                "session_reconfirm_rejected",
                self.session_reconfirm_rejected,
            ),
            ("session_reconfirm_failed", self.failed),
            (
                "session_reconfirm_unsupported_drops",
                self.unsupported_drops,
            ),
        ]
    }
}

struct Outstanding {
    request_id: u64,
    items: Vec<ConfirmItem>,
    deadline: Instant,
}

/// One reconfirmation attempt; see the module docs.
pub struct EdgeReconfirm {
    batches: VecDeque<Vec<ConfirmItem>>,
    outstanding: Option<Outstanding>,
    timeout: Duration,
}

impl std::fmt::Debug for EdgeReconfirm {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("EdgeReconfirm")
            .field("batches_left", &self.batches.len())
            .field(
                "outstanding",
                &self.outstanding.as_ref().map(|o| o.request_id),
            )
            .finish()
    }
}

impl EdgeReconfirm {
    /// Starts an attempt at `now` / `wall_ms` for the live sessions of
    /// `devices` (their old control session ids), whose new control session
    /// is `control_session`; the attempt (if any session is live) and the
    /// first step. Sessions not live (silent, grant expired) stay for the
    /// snapshot to remove.
    pub fn start(
        devices: &mut EdgeDevices,
        ids: &mut MessageIds,
        now: Instant,
        wall_ms: i64,
        control_session: u64,
        counters: &mut EdgeConfirmCounters,
    ) -> (Option<Self>, ConfirmStep) {
        let items = devices.sessions.confirm_items(now, wall_ms);
        devices.sessions.set_control_session(control_session);
        if items.is_empty() {
            return (None, ConfirmStep::Done);
        }
        counters.attempts += 1;
        let mut batches: VecDeque<Vec<ConfirmItem>> = VecDeque::new();
        let mut items = items.into_iter().peekable();
        while items.peek().is_some() {
            batches.push_back(items.by_ref().take(MAX_CONFIRM_BATCH).collect());
        }
        let mut me = Self {
            batches,
            outstanding: None,
            timeout: CONFIRM_BATCH_TIMEOUT,
        };
        let step = me.next(ids, now, counters);
        (Some(me), step)
    }

    fn next(
        &mut self,
        ids: &mut MessageIds,
        now: Instant,
        counters: &mut EdgeConfirmCounters,
    ) -> ConfirmStep {
        let Some(items) = self.batches.pop_front() else {
            self.outstanding = None;
            return ConfirmStep::Done;
        };
        let request_id = ids.next_id();
        let req = ConfirmRequest {
            request_id,
            sessions: items,
        };
        let send = ControlSend::json(
            Subtype::DEVICE_SESSION_CONFIRM,
            Flags::CONTROL.with(Flags::ACK).with(Flags::CRITICAL),
            request_id,
            0,
            0,
            &req,
        );
        counters.batches_sent += 1;
        self.outstanding = Some(Outstanding {
            request_id,
            items: req.sessions,
            deadline: now + self.timeout,
        });
        ConfirmStep::Send(send)
    }

    /// When the outstanding batch times out.
    pub fn deadline(&self) -> Option<Instant> {
        self.outstanding.as_ref().map(|o| o.deadline)
    }

    /// Whether the outstanding batch went unanswered past 5 s at `now`
    /// (then the attempt has failed).
    pub fn timed_out(&self, now: Instant, counters: &mut EdgeConfirmCounters) -> bool {
        let late = self.deadline().is_some_and(|d| now >= d);
        if late {
            counters.failed += 1;
        }
        late
    }

    /// Applies the centre's answer `resp` to `devices` at `now`; `None`
    /// when it answers another request (ignored).
    pub fn handle_response(
        &mut self,
        devices: &mut EdgeDevices,
        ids: &mut MessageIds,
        now: Instant,
        resp: ConfirmResponse,
        counters: &mut EdgeConfirmCounters,
    ) -> Option<ConfirmStep> {
        if self.outstanding.as_ref()?.request_id != resp.request_id {
            return None;
        }
        let out = self.outstanding.take()?;
        let fail = |counters: &mut EdgeConfirmCounters, why| {
            counters.failed += 1;
            Some(ConfirmStep::Failed(why))
        };
        if resp.validate().is_err() || resp.results.len() != out.items.len() {
            return fail(counters, "malformed reconfirmation answer");
        }
        let asked: HashMap<u64, u64> = out
            .items
            .iter()
            .map(|i| (i.session_id, i.session_epoch))
            .collect();
        let mut seen = HashMap::with_capacity(asked.len());
        for r in &resp.results {
            if asked.get(&r.session_id) != Some(&r.session_epoch)
                || seen.insert(r.session_id, ()).is_some()
            {
                return fail(counters, "reconfirmation answer names other sessions");
            }
        }
        // Refused sessions go first and the swaps happen together, so a new
        // id may be one this answer frees (§3.9: only an id still active
        // afterwards fails the attempt).
        let mut swaps = Vec::with_capacity(resp.results.len());
        for r in resp.results {
            match r.grant.filter(|_| r.success) {
                Some(grant) => swaps.push((r.session_id, r.session_epoch, grant)),
                None => {
                    if let Some(removal) = devices.sessions.remove_unconfirmed(r.session_id) {
                        devices.removed(removal);
                        counters.session_reconfirm_rejected += 1;
                    }
                }
            }
        }
        let old_ids: Vec<u64> = swaps.iter().map(|(id, _, _)| *id).collect();
        if devices.sessions.swap_confirmed(swaps).is_err() {
            return fail(counters, "a reconfirmed grant does not fit its session");
        }
        for id in old_ids {
            devices.receivers.remove(id);
            devices.speaker.release_session(id);
            counters.confirmed += 1;
        }
        Some(self.next(ids, now, counters))
    }
}

/// The centre does not offer reconfirmation (no bit 7, §3.9): every
/// session is removed and reported (`session_reconfirm_unsupported`); the
/// devices authenticate again.
pub fn drop_unconfirmable(
    devices: &mut EdgeDevices,
    ids: &mut MessageIds,
    wall_ms: i64,
    control_session: u64,
    counters: &mut EdgeConfirmCounters,
) {
    counters.unsupported_drops += devices.sessions.len() as u64;
    devices.expire_all(
        ids,
        wall_ms,
        super::device_sessions_edge::removal_reason::RECONFIRM_UNSUPPORTED,
    );
    devices.sessions.set_control_session(control_session);
}
