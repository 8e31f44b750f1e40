//! Half-duplex floor per forwarding domain (draarl-v1 §3.7): one talker per
//! domain; the talker keeps the floor while its frames are at most 900 ms
//! apart, and other talkers' frames are dropped until 900 ms of silence.

use std::collections::HashMap;
use std::time::{Duration, Instant};

/// Who holds a floor: (owner user id, SSID).
type Talker = (i64, u8);

/// Outcome of [`FloorTable::claim`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FloorDecision {
    /// The talker holds (or just took) the floor.
    Granted,
    /// Another talker holds the floor.
    Busy,
}

/// Floors keyed by domain id. Entries are bounded by the number of domains
/// (groups) and swept once idle.
#[derive(Debug)]
pub struct FloorTable {
    hold: Duration,
    floors: HashMap<i64, (Talker, Instant)>,
}

impl FloorTable {
    /// `hold` is the silence after which the floor frees (900 ms in the reference).
    pub fn new(hold: Duration) -> Self {
        Self {
            hold,
            floors: HashMap::new(),
        }
    }

    /// Claims or renews the floor of `domain` for `talker` at `now`.
    pub fn claim(&mut self, domain: i64, talker: Talker, now: Instant) -> FloorDecision {
        match self.floors.get_mut(&domain) {
            Some((holder, last))
                if *holder != talker && now.saturating_duration_since(*last) <= self.hold =>
            {
                FloorDecision::Busy
            }
            Some(entry) => {
                *entry = (talker, now);
                FloorDecision::Granted
            }
            None => {
                self.floors.insert(domain, (talker, now));
                FloorDecision::Granted
            }
        }
    }

    /// Forgets floors idle longer than the hold time.
    pub fn sweep(&mut self, now: Instant) {
        let hold = self.hold;
        self.floors
            .retain(|_, (_, last)| now.saturating_duration_since(*last) <= hold);
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

    #[test]
    fn one_talker_per_domain_until_900ms_silence() {
        let t0 = Instant::now();
        let ms = Duration::from_millis;
        let mut f = FloorTable::new(ms(900));
        let (a, b) = ((1, 1), (2, 1));
        assert_eq!(f.claim(10, a, t0), FloorDecision::Granted);
        assert_eq!(f.claim(10, b, t0 + ms(100)), FloorDecision::Busy);
        assert_eq!(f.claim(20, b, t0 + ms(100)), FloorDecision::Granted);
        assert_eq!(f.claim(10, a, t0 + ms(800)), FloorDecision::Granted);
        assert_eq!(f.claim(10, b, t0 + ms(1700)), FloorDecision::Busy);
        assert_eq!(f.claim(10, b, t0 + ms(1701)), FloorDecision::Granted);
        f.sweep(t0 + ms(5000));
        assert!(f.is_empty());
    }
}
