//! The seeded churn schedule of a soak: which device does what, and when.
//!
//! At `churn_per_s` actions per second one device not already out is picked
//! at random: a listener logs out, switches group, gets receive-banned or
//! reconnects from a new port; now and then a speaker gets send-banned
//! instead. A logout is followed by a login of the same device, and a ban by
//! its lifting, after a random hold. Every choice comes from one RNG seeded
//! with `seed`, so the same seed gives the same schedule; only a failed login
//! (the reflector did not answer) changes what follows, by retrying it.
//!
//! Devices `0..groups` are the speakers (device `g` talks in group `g`);
//! they are only ever send-banned, so every group always has its talker.

use std::cmp::Reverse;
use std::collections::BinaryHeap;

use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};

/// Shortest and longest time a device stays logged out or banned, ms.
const HOLD_MS: std::ops::RangeInclusive<u64> = 2_000..=8_000;
/// Pause before a failed login is tried again, ms.
const RETRY_MS: u64 = 2_000;
/// Random picks tried to find an idle device before the action is skipped.
const PICKS: usize = 8;
/// One action in this many is a speaker's send ban.
const SPEAKER_BAN_ONE_IN: u32 = 50;

/// One churn action.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Action {
    /// The device closes its socket.
    Logout(usize),
    /// The device logs in again from a new socket.
    Login(usize),
    /// The device moves to group index `to` (admin API).
    SwitchGroup { device: usize, to: usize },
    /// The device stops receiving fan-out (admin comm-control).
    RecvBan(usize),
    /// The speaker's voice is dropped (admin comm-control).
    SendBan(usize),
    /// The device's bans are lifted.
    Unban(usize),
    /// The device logs in from a new port, then closes its old one.
    Reconnect(usize),
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Status {
    Idle,
    LoggedOut,
    Banned,
}

/// The schedule: new actions at a fixed rate, returns when their hold ends.
#[derive(Debug)]
pub(super) struct Churn {
    rng: StdRng,
    groups: usize,
    group: Vec<usize>,
    status: Vec<Status>,
    returns: BinaryHeap<Reverse<(u64, usize)>>,
    period_ms: f64,
    started: u64,
}

impl Churn {
    /// `devices` devices (device `i` starts in group `i % groups`), `per_s`
    /// new actions per second (≥ 1).
    pub(super) fn new(seed: u64, devices: usize, groups: usize, per_s: u32) -> Self {
        Self {
            rng: StdRng::seed_from_u64(seed),
            groups,
            group: (0..devices).map(|i| i % groups.max(1)).collect(),
            status: vec![Status::Idle; devices],
            returns: BinaryHeap::new(),
            period_ms: 1000.0 / f64::from(per_s.max(1)),
            started: 0,
        }
    }

    /// The actions due at `now_ms` (ms since the schedule started): every
    /// return whose hold has ended, then the new actions whose slot has come.
    pub(super) fn due(&mut self, now_ms: u64) -> Vec<Action> {
        let mut out = Vec::new();
        while let Some(&Reverse((at, d))) = self.returns.peek() {
            if at > now_ms {
                break;
            }
            self.returns.pop();
            out.push(match self.status[d] {
                Status::LoggedOut => Action::Login(d),
                _ => Action::Unban(d),
            });
            // The device is busy until the action is reported done.
        }
        while (self.started as f64) * self.period_ms <= now_ms as f64 {
            self.started += 1;
            if let Some(a) = self.pick(now_ms) {
                out.push(a);
            }
        }
        out
    }

    /// Records how a login or unban went: a failed login is retried after
    /// [`RETRY_MS`]; anything else makes the device idle again.
    pub(super) fn returned(&mut self, device: usize, logged_in: bool, now_ms: u64) {
        if self.status[device] == Status::LoggedOut && !logged_in {
            self.returns.push(Reverse((now_ms + RETRY_MS, device)));
        } else {
            self.status[device] = Status::Idle;
        }
    }

    fn pick(&mut self, now_ms: u64) -> Option<Action> {
        let devices = self.status.len();
        if self.rng.gen_range(0..SPEAKER_BAN_ONE_IN) == 0 {
            let s = self.rng.gen_range(0..self.groups);
            return (self.status[s] == Status::Idle).then(|| {
                self.hold(s, Status::Banned, now_ms);
                Action::SendBan(s)
            });
        }
        if devices <= self.groups {
            return None;
        }
        let d = (0..PICKS)
            .map(|_| self.rng.gen_range(self.groups..devices))
            .find(|&d| self.status[d] == Status::Idle)?;
        Some(match self.rng.gen_range(0..10u32) {
            0..=2 => {
                self.hold(d, Status::LoggedOut, now_ms);
                Action::Logout(d)
            }
            3..=5 if self.groups > 1 => {
                // Any other group, uniformly.
                let to = (self.group[d] + self.rng.gen_range(1..self.groups)) % self.groups;
                self.group[d] = to;
                Action::SwitchGroup { device: d, to }
            }
            3..=7 => {
                self.hold(d, Status::Banned, now_ms);
                Action::RecvBan(d)
            }
            _ => Action::Reconnect(d),
        })
    }

    fn hold(&mut self, device: usize, status: Status, now_ms: u64) {
        self.status[device] = status;
        let back = now_ms + self.rng.gen_range(HOLD_MS);
        self.returns.push(Reverse((back, device)));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn run(seed: u64, until_ms: u64) -> Vec<(u64, Action)> {
        let mut c = Churn::new(seed, 200, 4, 20);
        let mut log = Vec::new();
        for now in (0..until_ms).step_by(10) {
            for a in c.due(now) {
                if let Action::Login(d) | Action::Unban(d) = a {
                    c.returned(d, true, now);
                }
                log.push((now, a));
            }
        }
        log
    }

    #[test]
    fn the_same_seed_gives_the_same_schedule() {
        assert_eq!(run(7, 30_000), run(7, 30_000));
        assert_ne!(run(7, 30_000), run(8, 30_000));
    }

    #[test]
    fn speakers_are_only_send_banned_and_everything_comes_back() {
        let log = run(3, 60_000);
        // 20 actions/s for 60 s, a few skipped when a speaker is busy.
        let started = log
            .iter()
            .filter(|(_, a)| !matches!(a, Action::Login(_) | Action::Unban(_)))
            .count();
        assert!((1000..=1200).contains(&started), "{started}");
        let mut out = std::collections::HashMap::new();
        for &(at, a) in &log {
            match a {
                Action::SendBan(s) => {
                    assert!(s < 4);
                    assert!(out.insert(s, at).is_none(), "{s} acted on while out");
                }
                Action::Logout(d) | Action::RecvBan(d) => {
                    assert!(d >= 4);
                    assert!(out.insert(d, at).is_none(), "{d} acted on while out");
                }
                Action::Login(d) | Action::Unban(d) => {
                    let since = out.remove(&d).expect("a return follows a leave");
                    // Returns are looked for every 10 ms.
                    assert!((2_000..=8_010).contains(&(at - since)), "{}", at - since);
                }
                Action::SwitchGroup { device, .. } | Action::Reconnect(device) => {
                    assert!(device >= 4);
                    assert!(!out.contains_key(&device), "{device} acted on while out");
                }
            }
        }
        // Whatever is still out left less than a hold ago.
        assert!(out.values().all(|&at| at + HOLD_MS.end() >= 60_000 - 10));
        let kinds = |f: fn(&Action) -> bool| log.iter().filter(|(_, a)| f(a)).count();
        assert!(kinds(|a| matches!(a, Action::SwitchGroup { .. })) > 100);
        assert!(kinds(|a| matches!(a, Action::Reconnect(_))) > 100);
        assert!(kinds(|a| matches!(a, Action::SendBan(_))) > 10);
    }

    #[test]
    fn a_failed_login_is_retried() {
        let mut c = Churn::new(1, 50, 2, 50);
        let mut now = 0;
        let d = loop {
            if let Some(Action::Logout(d)) = c
                .due(now)
                .into_iter()
                .find(|a| matches!(a, Action::Logout(_)))
            {
                break d;
            }
            now += 10;
        };
        let mut logins = 0;
        for t in (now..now + 30_000).step_by(10) {
            for a in c.due(t) {
                match a {
                    Action::Login(x) if x == d => {
                        logins += 1;
                        // Fails twice, then works.
                        c.returned(x, logins > 2, t);
                    }
                    Action::Login(x) | Action::Unban(x) => c.returned(x, true, t),
                    _ => {}
                }
            }
        }
        assert!(logins >= 3, "{logins}");
    }
}
