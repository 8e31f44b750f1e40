//! Half-duplex floor per forwarding domain (draarl-v1 §3.7): one talker per
//! domain; the talker keeps the floor while its frames are at most
//! `hold` (900 ms) apart, and other talkers' frames are dropped until
//! `hold` of silence.
//!
//! The spec sets no limit on how long one over may last, so a talker that
//! sends one small frame every 800 ms would hold a group's floor for ever.
//! The server therefore ends an over after `max_talk` (default 120 s, the
//! Android app's default push-to-talk transmit timeout, so a client at its
//! defaults stops on its own first) and bars that talker from the floor of
//! that domain for `holdoff` (default 5 s) counted from the cut. The
//! hold-off starts at the cut rather than at the talker's next silence:
//! a talker that keeps sending (a stuck transmitter or a hog) is kept off
//! exactly as long as one that let go, so others get a predictable window
//! in which the first frame of anyone else takes the floor (and then keeps
//! it under the usual rule); a silence-based bar would instead keep a stuck
//! transmitter off for good and reward a hog for pausing. The cut talker
//! competes again as a new over afterwards.

use std::collections::HashMap;
use std::time::{Duration, Instant};

/// Who holds a floor: (owner user id, SSID).
type Talker = (i64, u8);

/// Timing of a [`FloorTable`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct FloorConfig {
    /// Silence after which the floor frees (900 ms in the reference).
    pub hold: Duration,
    /// Longest over: a talker holding the floor this long loses it.
    pub max_talk: Duration,
    /// How long a talker cut at `max_talk` is refused the floor of that
    /// domain, counted from the cut.
    pub holdoff: Duration,
}

/// Outcome of [`FloorTable::claim`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FloorDecision {
    /// The talker holds (or just took) the floor.
    Granted,
    /// Another talker holds the floor.
    Busy,
    /// The talker's over just reached `max_talk`: it lost the floor and is
    /// held off (counted once per cut).
    TalkLimit,
    /// The talker was cut at `max_talk` less than `holdoff` ago.
    HeldOff,
}

/// One domain's floor.
#[derive(Debug, Clone, Copy)]
struct Floor {
    /// Current (or last) talker, when its over began and its last frame.
    talker: Option<(Talker, Instant, Instant)>,
    /// The talker last cut at `max_talk`, and until when it is held off.
    barred: Option<(Talker, Instant)>,
}

/// Floors keyed by domain id. Entries are bounded by the number of domains
/// (groups), hold at most one talker and one barred talker each, and are
/// swept once idle.
#[derive(Debug)]
pub struct FloorTable {
    cfg: FloorConfig,
    floors: HashMap<i64, Floor>,
}

impl FloorTable {
    /// An empty table with timing `cfg`.
    pub fn new(cfg: FloorConfig) -> Self {
        Self {
            cfg,
            floors: HashMap::new(),
        }
    }

    /// Claims or renews the floor of `domain` for `talker` at `now`.
    pub fn claim(&mut self, domain: i64, talker: Talker, now: Instant) -> FloorDecision {
        let cfg = self.cfg;
        let floor = self.floors.entry(domain).or_insert(Floor {
            talker: None,
            barred: None,
        });
        if let Some((who, until)) = floor.barred {
            if now >= until {
                floor.barred = None;
            } else if who == talker {
                return FloorDecision::HeldOff;
            }
        }
        match floor.talker {
            Some((holder, since, last)) if now.saturating_duration_since(last) <= cfg.hold => {
                if holder != talker {
                    return FloorDecision::Busy;
                }
                if now.saturating_duration_since(since) >= cfg.max_talk {
                    floor.talker = None;
                    floor.barred = Some((talker, now + cfg.holdoff));
                    return FloorDecision::TalkLimit;
                }
                floor.talker = Some((holder, since, now));
            }
            _ => floor.talker = Some((talker, now, now)),
        }
        FloorDecision::Granted
    }

    /// Forgets floors idle longer than the hold time with no live hold-off.
    pub fn sweep(&mut self, now: Instant) {
        let hold = self.cfg.hold;
        self.floors.retain(|_, f| {
            let talking = f
                .talker
                .is_some_and(|(_, _, last)| now.saturating_duration_since(last) <= hold);
            let barred = f.barred.is_some_and(|(_, until)| now < until);
            talking || barred
        });
    }

    /// Domains with a live floor entry.
    pub fn len(&self) -> usize {
        self.floors.len()
    }

    /// Whether no floor is held.
    pub fn is_empty(&self) -> bool {
        self.floors.is_empty()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const MS: fn(u64) -> Duration = Duration::from_millis;

    fn cfg() -> FloorConfig {
        FloorConfig {
            hold: MS(900),
            max_talk: Duration::from_secs(120),
            holdoff: Duration::from_secs(5),
        }
    }

    #[test]
    fn one_talker_per_domain_until_900ms_silence() {
        let t0 = Instant::now();
        let mut f = FloorTable::new(cfg());
        let (a, b) = ((1, 1), (2, 1));
        assert_eq!(f.claim(10, a, t0), FloorDecision::Granted);
        assert_eq!(f.claim(10, b, t0 + MS(100)), FloorDecision::Busy);
        assert_eq!(f.claim(20, b, t0 + MS(100)), FloorDecision::Granted);
        assert_eq!(f.claim(10, a, t0 + MS(800)), FloorDecision::Granted);
        assert_eq!(f.claim(10, b, t0 + MS(1700)), FloorDecision::Busy);
        assert_eq!(f.claim(10, b, t0 + MS(1701)), FloorDecision::Granted);
        f.sweep(t0 + MS(5000));
        assert!(f.is_empty());
    }

    /// A hog sending one frame every 800 ms holds the floor for exactly
    /// `max_talk`; then another talker gets it, and the hog gets it back
    /// only after the hold-off and the other talker's silence.
    #[test]
    fn an_over_ends_at_max_talk_and_the_talker_is_held_off() {
        let t0 = Instant::now();
        let mut f = FloorTable::new(cfg());
        let (hog, other) = ((1, 1), (2, 1));
        let mut t = 0;
        while t < 120_000 {
            assert_eq!(f.claim(10, hog, t0 + MS(t)), FloorDecision::Granted, "{t}");
            assert_eq!(f.claim(10, other, t0 + MS(t + 1)), FloorDecision::Busy);
            t += 800;
        }
        assert_eq!(f.claim(10, hog, t0 + MS(t)), FloorDecision::TalkLimit);
        let cut = t;
        assert_eq!(f.claim(10, hog, t0 + MS(cut + 800)), FloorDecision::HeldOff);
        assert_eq!(
            f.claim(10, other, t0 + MS(cut + 900)),
            FloorDecision::Granted
        );
        assert_eq!(
            f.claim(10, other, t0 + MS(cut + 5_500)),
            FloorDecision::Granted
        );
        // Held off no more, but the floor is the other talker's now.
        assert_eq!(f.claim(10, hog, t0 + MS(cut + 5_600)), FloorDecision::Busy);
        assert_eq!(
            f.claim(10, hog, t0 + MS(cut + 6_401)),
            FloorDecision::Granted
        );
        // The hold-off is per domain.
        assert_eq!(f.claim(20, hog, t0 + MS(cut + 1)), FloorDecision::Granted);
    }

    #[test]
    fn a_new_over_after_silence_restarts_the_clock_and_sweep_keeps_holdoffs() {
        let t0 = Instant::now();
        let mut f = FloorTable::new(FloorConfig {
            max_talk: Duration::from_secs(10),
            ..cfg()
        });
        let a = (1, 1);
        assert_eq!(f.claim(10, a, t0), FloorDecision::Granted);
        assert_eq!(f.claim(10, a, t0 + MS(9_000)), FloorDecision::Granted);
        // 1 s of silence: a new over starting at 10 s may last until 20 s.
        assert_eq!(f.claim(10, a, t0 + MS(10_000)), FloorDecision::Granted);
        assert_eq!(f.claim(10, a, t0 + MS(10_900)), FloorDecision::Granted);
        assert_eq!(f.claim(10, a, t0 + MS(11_700)), FloorDecision::Granted);
        let mut t = 11_700;
        while t + 800 < 20_000 {
            t += 800;
            assert_eq!(f.claim(10, a, t0 + MS(t)), FloorDecision::Granted, "{t}");
        }
        assert_eq!(f.claim(10, a, t0 + MS(20_000)), FloorDecision::TalkLimit);
        f.sweep(t0 + MS(22_000));
        assert_eq!(f.len(), 1, "the hold-off outlives the floor");
        assert_eq!(f.claim(10, a, t0 + MS(24_999)), FloorDecision::HeldOff);
        f.sweep(t0 + MS(25_000));
        assert!(f.is_empty());
        assert_eq!(f.claim(10, a, t0 + MS(25_001)), FloorDecision::Granted);
    }
}
