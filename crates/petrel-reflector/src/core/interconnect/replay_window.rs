//! The replay window over MessageID (draarl-interconnect §4.4): 4096 bits
//! per node session, shared by UDP and TLS, no timestamp component.
//!
//! ```text
//!            max−4095 ……………………………… max        id > max: slide (clear the bits
//!  too old ◀─┤ 4096 bits, bit = id mod 4096 ├─▶          passed over) and accept
//! ```
//! ID 0 is rejected; the first ID sets `max`; an ID `max − id ≥ 4096` is
//! too old; any other is accepted once.

/// Bits in the window.
pub const REPLAY_WINDOW_BITS: u64 = 4096;
const WORDS: usize = (REPLAY_WINDOW_BITS / 64) as usize;

/// Why a MessageID was refused.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Replay {
    /// MessageID 0 is never valid (§3.4).
    ZeroId,
    /// Seen before within the window.
    Duplicate,
    /// 4096 or more below the highest ID seen.
    TooOld,
}

/// A 4096-bit sliding window (512 bytes, fixed size).
#[derive(Clone)]
pub struct ReplayWindow {
    max: u64,
    bits: [u64; WORDS],
}

impl std::fmt::Debug for ReplayWindow {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ReplayWindow")
            .field("max", &self.max)
            .finish()
    }
}

impl Default for ReplayWindow {
    fn default() -> Self {
        Self::new()
    }
}

impl ReplayWindow {
    /// An empty window (no ID seen yet).
    pub fn new() -> Self {
        Self {
            max: 0,
            bits: [0; WORDS],
        }
    }

    /// The highest ID accepted so far (0 before the first).
    pub fn max(&self) -> u64 {
        self.max
    }

    fn bit(id: u64) -> (usize, u64) {
        let i = id % REPLAY_WINDOW_BITS;
        ((i / 64) as usize, 1u64 << (i % 64))
    }

    /// Accepts `id` once and records it.
    ///
    /// # Errors
    /// [`Replay`] when `id` is 0, a duplicate or too old; the window is then
    /// unchanged.
    pub fn check_and_record(&mut self, id: u64) -> Result<(), Replay> {
        if id == 0 {
            return Err(Replay::ZeroId);
        }
        if self.max == 0 || id > self.max {
            let advance = if self.max == 0 {
                REPLAY_WINDOW_BITS
            } else {
                id - self.max
            };
            if advance >= REPLAY_WINDOW_BITS {
                self.bits = [0; WORDS];
            } else {
                for passed in self.max + 1..=id {
                    let (w, m) = Self::bit(passed);
                    self.bits[w] &= !m;
                }
            }
            self.max = id;
            let (w, m) = Self::bit(id);
            self.bits[w] |= m;
            return Ok(());
        }
        if self.max - id >= REPLAY_WINDOW_BITS {
            return Err(Replay::TooOld);
        }
        let (w, m) = Self::bit(id);
        if self.bits[w] & m != 0 {
            return Err(Replay::Duplicate);
        }
        self.bits[w] |= m;
        Ok(())
    }
}
