//! What each device was, and was doing, at any moment of a soak, and where
//! every datagram a frame owed went.
//!
//! [`Ledger`] keeps each device's state (group, logged in or out, bans) as a
//! timeline of changes, each with the window during which the reflector may
//! or may not have applied it yet: from `settle_before_ms` before the action
//! started (frames already on their way when a socket closes) to
//! `settle_after_ms` after it ended (the admin API answers once the store is
//! written; the directory reload follows). [`Tally`] classifies, frame by
//! frame, each datagram the plan owed; [`Tally::settle`] then matches the
//! misses no plan explains with the reflector's and the host's drop counters.
//! Times are ms since the soak started; nothing here reads a clock.

use crate::record::reflector_soak::SoakLoss;

/// Logged in or not, as the load generator left it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Presence {
    Online,
    LoggedOut,
}

/// A device's planned state.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) struct DeviceState {
    /// Group index (0-based, not the store's id).
    pub group: usize,
    pub presence: Presence,
    pub recv_banned: bool,
    pub send_banned: bool,
}

/// What kind of change a window belongs to.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum WindowKind {
    /// A login from a new socket after a logout.
    Login,
    /// Anything else: logout, group switch, ban, unban, reconnect.
    Churn,
}

#[derive(Debug, Clone, Copy)]
struct Change {
    start_ms: u64,
    end_ms: Option<u64>,
    kind: WindowKind,
    state: DeviceState,
}

/// A device at one instant: its planned state and the window it is in, if any.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) struct View {
    pub state: DeviceState,
    pub window: Option<WindowKind>,
}

/// Every device's timeline.
#[derive(Debug)]
pub(super) struct Ledger {
    initial: Vec<DeviceState>,
    changes: Vec<Vec<Change>>,
    settle_before_ms: u64,
    settle_after_ms: u64,
}

impl Ledger {
    /// Device `i` starts online in group `i % groups`, unbanned.
    pub(super) fn new(
        devices: usize,
        groups: usize,
        settle_before_ms: u64,
        settle_after_ms: u64,
    ) -> Self {
        Self {
            initial: (0..devices)
                .map(|i| DeviceState {
                    group: i % groups.max(1),
                    presence: Presence::Online,
                    recv_banned: false,
                    send_banned: false,
                })
                .collect(),
            changes: vec![Vec::new(); devices],
            settle_before_ms,
            settle_after_ms,
        }
    }

    /// The state of `device` after its latest change.
    pub(super) fn current(&self, device: usize) -> DeviceState {
        self.changes[device]
            .last()
            .map_or(self.initial[device], |c| c.state)
    }

    /// A change of `device` to `state` starts at `at_ms`.
    pub(super) fn begin(
        &mut self,
        device: usize,
        at_ms: u64,
        kind: WindowKind,
        state: DeviceState,
    ) {
        self.changes[device].push(Change {
            start_ms: at_ms,
            end_ms: None,
            kind,
            state,
        });
    }

    /// The latest change of `device` ended at `at_ms`, leaving it in `state`
    /// (the planned one, or what is left after a failure).
    pub(super) fn end(&mut self, device: usize, at_ms: u64, state: DeviceState) {
        if let Some(c) = self.changes[device].last_mut() {
            c.end_ms = Some(at_ms);
            c.state = state;
        }
    }

    /// `device` at `at_ms`: the state of its latest change started by then,
    /// and the window covering `at_ms` (a login's first, an open change's
    /// window never closes).
    pub(super) fn view(&self, device: usize, at_ms: u64) -> View {
        let mut state = self.initial[device];
        let mut window = None;
        for c in &self.changes[device] {
            if c.start_ms <= at_ms {
                state = c.state;
            }
            let from = c.start_ms.saturating_sub(self.settle_before_ms);
            let to = c.end_ms.map_or(u64::MAX, |e| e + self.settle_after_ms);
            if (from..=to).contains(&at_ms) && window != Some(WindowKind::Login) {
                window = Some(c.kind);
            }
        }
        View { state, window }
    }
}

/// Drop counters the reflector and the host report over the measurement.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub(super) struct DropCounters {
    pub frames_expired: u64,
    pub frames_dropped: u64,
    /// Voice frames refused at the maximum talk time or in its hold-off.
    pub floor_limit_drops: u64,
    pub write_errors: u64,
    pub rcvbuf_errors: u64,
}

/// The datagrams of every tallied frame, by fate.
#[derive(Debug, Clone, Default)]
pub(super) struct Tally {
    pub expected: u64,
    pub received: u64,
    pub received_in_churn: u64,
    pub misdelivered: u64,
    /// Misses the plan explains (bans, logouts, windows).
    planned: SoakLoss,
    /// Settled datagrams owed by frames that no settled receiver got.
    whole_lost: Vec<u64>,
    /// Settled datagrams missing from frames others did get.
    partial_missing: u64,
    /// Per receiver: settled datagrams owed, and missing.
    settled: Vec<(u64, u64)>,
}

impl Tally {
    pub(super) fn new(devices: usize) -> Self {
        Self {
            settled: vec![(0, 0); devices],
            ..Self::default()
        }
    }

    /// Tallies the frame `speaker` sent to group `group` when the devices
    /// were `views` (indexed by device); bit `d` of `got` is set when device
    /// `d` received it.
    pub(super) fn frame(&mut self, views: &[View], speaker: usize, group: usize, got: &[u64]) {
        let sv = views[speaker];
        let (mut owed, mut arrived) = (0u64, 0u64);
        for (d, v) in views.iter().enumerate() {
            if d == speaker {
                continue;
            }
            let has = got.get(d / 64).is_some_and(|w| w >> (d % 64) & 1 == 1);
            let churning = v.window.is_some() || sv.window.is_some();
            if v.state.group != group {
                if has && churning {
                    self.received_in_churn += 1;
                } else if has {
                    self.misdelivered += 1;
                }
                continue;
            }
            self.expected += 1;
            let settled = !churning
                && !sv.state.send_banned
                && v.state.presence == Presence::Online
                && !v.state.recv_banned;
            if has {
                self.received += 1;
            }
            if settled {
                owed += 1;
                self.settled[d].0 += 1;
                if has {
                    arrived += 1;
                } else {
                    self.settled[d].1 += 1;
                }
                continue;
            }
            if has {
                continue;
            }
            let loss = &mut self.planned;
            match (v.window, sv.window) {
                (Some(WindowKind::Login), _) => loss.not_yet_receiving += 1,
                (Some(WindowKind::Churn), _) | (None, Some(_)) => loss.churn_window += 1,
                (None, None) if sv.state.send_banned => loss.ban_send += 1,
                (None, None) if v.state.presence == Presence::LoggedOut => loss.offline += 1,
                (None, None) => loss.ban_recv += 1,
            }
        }
        if owed > 0 && arrived == 0 {
            self.whole_lost.push(owed);
        } else {
            self.partial_missing += owed - arrived;
        }
    }

    /// Every missing datagram by cause: the planned ones, then frames lost
    /// whole matched one for one with the reflector's expired, then dropped
    /// frames, then its talk-limit refusals, then with the host's
    /// receive-buffer drops; single missing
    /// datagrams with the reflector's failed sends, then with what is left of
    /// the receive-buffer drops. What no counter covers is `unattributed`.
    pub(super) fn settle(&self, c: DropCounters) -> SoakLoss {
        let mut loss = self.planned;
        let (mut expired, mut dropped, mut floor, mut rcvbuf) = (
            c.frames_expired,
            c.frames_dropped,
            c.floor_limit_drops,
            c.rcvbuf_errors,
        );
        for &n in &self.whole_lost {
            let slot = [
                (&mut expired, &mut loss.frames_expired),
                (&mut dropped, &mut loss.frames_dropped),
                (&mut floor, &mut loss.floor_talk_limit),
                (&mut rcvbuf, &mut loss.receive_buffer_drops),
            ]
            .into_iter()
            .find(|(budget, _)| **budget > 0);
            match slot {
                Some((budget, field)) => {
                    *budget -= 1;
                    *field += n;
                }
                None => loss.unattributed += n,
            }
        }
        let sends = self.partial_missing.min(c.write_errors);
        let buffers = (self.partial_missing - sends).min(rcvbuf);
        loss.reflector_send_errors += sends;
        loss.receive_buffer_drops += buffers;
        loss.unattributed += self.partial_missing - sends - buffers;
        loss
    }

    /// Receivers that missed a settled datagram, and the smallest share of
    /// its settled datagrams any receiver got, %.
    pub(super) fn receivers(&self) -> (u64, f64) {
        let short = self.settled.iter().filter(|s| s.1 > 0).count() as u64;
        let worst = self
            .settled
            .iter()
            .filter(|s| s.0 > 0)
            .map(|&(owed, missed)| 100.0 * (owed - missed) as f64 / owed as f64)
            .fold(100.0, f64::min);
        (short, worst)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const SB: u64 = 200;
    const SA: u64 = 1000;

    fn bits(devices: &[usize]) -> Vec<u64> {
        let mut w = vec![0u64; 2];
        for &d in devices {
            w[d / 64] |= 1 << (d % 64);
        }
        w
    }

    fn views(l: &Ledger, n: usize, at: u64) -> Vec<View> {
        (0..n).map(|d| l.view(d, at)).collect()
    }

    #[test]
    fn views_follow_changes_and_their_windows() {
        let mut l = Ledger::new(6, 2, SB, SA);
        let moved = DeviceState {
            group: 1,
            ..l.current(4)
        };
        l.begin(4, 10_000, WindowKind::Churn, moved);
        assert_eq!(l.view(4, 9_700).window, None);
        assert_eq!(l.view(4, 9_900).state.group, 0);
        assert_eq!(l.view(4, 9_900).window, Some(WindowKind::Churn));
        // Open: the window lasts until the change ends.
        assert_eq!(l.view(4, 60_000).window, Some(WindowKind::Churn));
        l.end(4, 10_050, moved);
        assert_eq!(l.view(4, 11_050).window, Some(WindowKind::Churn));
        assert_eq!(
            l.view(4, 11_051),
            View {
                state: moved,
                window: None
            }
        );
        assert_eq!(l.current(4).group, 1);
        // A failed login leaves the device logged out.
        let out = DeviceState {
            presence: Presence::LoggedOut,
            ..l.current(2)
        };
        l.begin(2, 20_000, WindowKind::Churn, out);
        l.end(2, 20_000, out);
        let back = DeviceState {
            presence: Presence::Online,
            ..out
        };
        l.begin(2, 21_100, WindowKind::Login, back);
        l.end(2, 21_200, out);
        assert_eq!(l.view(2, 20_950).window, Some(WindowKind::Login));
        assert_eq!(l.view(2, 23_000).state.presence, Presence::LoggedOut);
        assert_eq!(l.view(2, 23_000).window, None);
    }

    #[test]
    fn every_missing_datagram_gets_one_cause() {
        // Devices 0 and 1 speak in groups 0 and 1; 2..10 listen.
        let mut l = Ledger::new(10, 2, SB, SA);
        let s = |l: &Ledger, d: usize| l.current(d);
        let out = DeviceState {
            presence: Presence::LoggedOut,
            ..s(&l, 2)
        };
        l.begin(2, 0, WindowKind::Churn, out);
        l.end(2, 0, out);
        let banned = DeviceState {
            recv_banned: true,
            ..s(&l, 4)
        };
        l.begin(4, 0, WindowKind::Churn, banned);
        l.end(4, 0, banned);
        let quiet = DeviceState {
            send_banned: true,
            ..s(&l, 1)
        };
        l.begin(1, 0, WindowKind::Churn, quiet);
        l.end(1, 0, quiet);
        let moving = DeviceState {
            group: 1,
            ..s(&l, 6)
        };
        l.begin(6, 5_000, WindowKind::Churn, moving);
        let v = views(&l, 10, 5_000);
        let mut t = Tally::new(10);
        // Group 0 = {0, 2, 4, 6, 8}: 2 out, 4 banned, 6 moving (missed), 8 got it.
        t.frame(&v, 0, 0, &bits(&[8]));
        // Group 1 = {1, 3, 5, 7, 9} with 6 joining: the speaker is send-banned.
        t.frame(&v, 1, 1, &bits(&[]));
        assert_eq!((t.expected, t.received), (4 + 4, 1));
        let loss = t.settle(DropCounters::default());
        assert_eq!(loss.offline, 1);
        assert_eq!(loss.ban_recv, 1);
        assert_eq!(loss.churn_window, 1);
        assert_eq!(loss.ban_send, 4);
        assert_eq!(loss.unattributed, 0);
        assert_eq!(loss.total(), t.expected - t.received);
    }

    #[test]
    fn settled_misses_are_matched_with_counters_or_left_unattributed() {
        let l = Ledger::new(10, 1, SB, SA);
        let v = views(&l, 10, 1_000);
        let mut t = Tally::new(10);
        // Two frames lost whole (9 datagrams each), one missing 2 of 9.
        t.frame(&v, 0, 0, &bits(&[]));
        t.frame(&v, 0, 0, &bits(&[]));
        t.frame(&v, 0, 0, &bits(&[1, 2, 3, 4, 5, 6, 7]));
        t.frame(&v, 0, 0, &bits(&[1, 2, 3, 4, 5, 6, 7, 8, 9]));
        assert_eq!((t.expected, t.received), (36, 16));
        let none = t.settle(DropCounters::default());
        assert_eq!(none.unattributed, 20);
        let c = DropCounters {
            frames_expired: 1,
            frames_dropped: 0,
            floor_limit_drops: 0,
            write_errors: 1,
            rcvbuf_errors: 2,
        };
        let loss = t.settle(c);
        assert_eq!(loss.frames_expired, 9);
        // The second whole frame takes one receive-buffer drop, the partial
        // frame one failed send and the last receive-buffer drop.
        assert_eq!(loss.receive_buffer_drops, 9 + 1);
        assert_eq!(loss.reflector_send_errors, 1);
        assert_eq!(loss.unattributed, 0);
        assert_eq!(loss.total(), 20);
        let (short, worst) = t.receivers();
        assert_eq!(short, 9);
        assert!((worst - 25.0).abs() < 1e-9, "{worst}");
        // A speaker cut at the maximum talk time: its refused frames are
        // matched with the reflector's talk-limit refusals.
        let cut = t.settle(DropCounters {
            floor_limit_drops: 2,
            write_errors: 1,
            rcvbuf_errors: 1,
            ..DropCounters::default()
        });
        assert_eq!(cut.floor_talk_limit, 18);
        assert_eq!(cut.unattributed, 0);
        assert_eq!(cut.total(), 20);
    }

    #[test]
    fn stray_datagrams_are_counted_apart() {
        let mut l = Ledger::new(6, 2, SB, SA);
        let v = views(&l, 6, 1_000);
        let mut t = Tally::new(6);
        // Device 3 is in group 1 but got group 0's frame.
        t.frame(&v, 0, 0, &bits(&[2, 3, 4]));
        assert_eq!((t.misdelivered, t.received_in_churn), (1, 0));
        let moved = DeviceState {
            group: 0,
            ..l.current(3)
        };
        l.begin(3, 2_000, WindowKind::Churn, moved);
        l.end(3, 2_100, moved);
        // Sent before the switch started, but within its settle time.
        let v = views(&l, 6, 1_900);
        t.frame(&v, 0, 0, &bits(&[2, 3, 4]));
        assert_eq!((t.misdelivered, t.received_in_churn), (1, 1));
        assert_eq!(t.settle(DropCounters::default()).unattributed, 0);
    }
}
