//! Adaptive parity: the receiver's loss report and the sender's parity policy.
//!
//! Policy (Petrel's own; the wire does not depend on it):
//! 1. The receiver counts, per reporting interval, shards *expected* (advance of
//!    the highest `seq` seen) and *received* (distinct shards), and sends a
//!    [`LossReport`]; the session decides the interval (e.g. every 100 ms or RTT).
//! 2. The sender smooths the loss rate as a ratio of exponentially weighted sums,
//!    `lost_s ← d·lost_s + lost`, `expected_s ← d·expected_s + expected`, so busy
//!    intervals weigh more than quiet ones. The decay `d` is the larger of 7/8 per
//!    report and `0.5^(expected / HALF_LIFE_SHARDS)`: dense traffic forgets within
//!    a few reports, sparse traffic (a few shards per report) averages over about
//!    [`HALF_LIFE_SHARDS`] shards, so the estimate of a 5 % loss rate does not
//!    swing between 2 % and 8 % from one report to the next.
//! 3. It needs the smallest parity `p ∈ 0..=max_parity` whose binomial tail
//!    `P(X > p), X ~ Bin(max_data + p, loss)` — the probability that a full group
//!    loses more shards than parity can repair — is below `target`; if none is,
//!    `max_parity`. That is the parity of dense traffic's full groups, and the
//!    one [`ParityPolicy::parity`] reports and [`ParityPolicy::changes`] counts.
//!    Traffic shape: sparse traffic's groups close early with `k < max_data`
//!    data shards (see [`super::FecEncoder::flush`]) and carry
//!    [`ParityPolicy::parity_for`]`(k)`: the same rule for `k + p` shards at the
//!    smoothed loss, at least 1 and at most the full-group parity — a copy of a
//!    one-shard group below about 3 % loss, two copies above.
//! 4. Hysteresis, with separate up and down thresholds and a dwell time: parity
//!    rises at once when `target` is missed (loss hurts now). It falls by one step
//!    only when even the stricter target `target × LOWER_MARGIN` is met with less
//!    parity in [`LOWER_AFTER`] consecutive reports *and* at least [`MIN_DWELL`]
//!    after the previous change, so a loss rate near a threshold does not make it
//!    flap. Every change is counted.
//! 5. The encoder then caps each group's parity so parity bytes stay ≤ the data
//!    bytes of the stream (a credit each group's data bytes fill and its parity
//!    spends; each parity shard is as long as the group's longest shard, so a
//!    stream of groups of one request among seven acks gets one parity shard each,
//!    not four; groups closed early for sparse traffic are exempt: their bytes are
//!    few by definition) and the group fits the memory budget (see
//!    [`super::FecEncoder`]). At zero loss the policy asks for no parity, and a
//!    group without parity adds no wait.

use std::time::{Duration, Instant};

use super::wire::{WireError, NATIVE_REPORT};

/// Consecutive reports asking for less parity before the policy lowers it.
pub const LOWER_AFTER: u32 = 3;
/// Factor applied to `target` when deciding whether parity may fall.
pub const LOWER_MARGIN: f64 = 0.5;
/// Shortest time between a parity change and a following decrease.
pub const MIN_DWELL: Duration = Duration::from_secs(2);
/// Shards after which a loss observation weighs half in the smoothed loss rate
/// (when that forgets more slowly than 7/8 per report).
pub const HALF_LIFE_SHARDS: f64 = 512.0;

/// Receiver → sender loss report for one interval.
///
/// Wire (9 bytes): `0x18 | expected u32 LE | received u32 LE`. Byte 0 shares the
/// native FEC header's version nibble so a session can multiplex it with shards.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct LossReport {
    /// Shards the sender sent in the interval, as far as the receiver can tell, in packets.
    pub expected: u32,
    /// Distinct shards that arrived in the interval, in packets.
    pub received: u32,
}

impl LossReport {
    /// Encoded size, in bytes.
    pub const WIRE_LEN: usize = 9;

    /// Encodes the report.
    pub fn encode(&self) -> [u8; Self::WIRE_LEN] {
        let mut b = [0; Self::WIRE_LEN];
        b[0] = NATIVE_REPORT;
        b[1..5].copy_from_slice(&self.expected.to_le_bytes());
        b[5..9].copy_from_slice(&self.received.to_le_bytes());
        b
    }

    /// Decodes a report.
    ///
    /// # Errors
    /// [`WireError::TooShort`] for a wrong length, [`WireError::UnknownKind`] for
    /// a wrong tag.
    pub fn decode(b: &[u8]) -> Result<LossReport, WireError> {
        if b.len() != Self::WIRE_LEN {
            return Err(WireError::TooShort(b.len()));
        }
        if b[0] != NATIVE_REPORT {
            return Err(WireError::UnknownKind(u16::from(b[0])));
        }
        Ok(LossReport {
            expected: u32::from_le_bytes([b[1], b[2], b[3], b[4]]),
            received: u32::from_le_bytes([b[5], b[6], b[7], b[8]]),
        })
    }

    /// Lost shards in the interval (reordering can make `received` exceed
    /// `expected`; that counts as no loss).
    pub fn lost(&self) -> u32 {
        self.expected.saturating_sub(self.received)
    }
}

/// Probability that a group of `data + parity` shards, each lost independently
/// with probability `loss`, loses more than `parity` shards (binomial upper tail).
pub fn unrecoverable_probability(data: u8, parity: u8, loss: f64) -> f64 {
    let n = i32::from(data) + i32::from(parity);
    let loss = loss.clamp(0.0, 1.0);
    // Sum P(X = j) for j ≤ parity and take the complement; terms built iteratively
    // from P(X = 0) = (1-loss)^n.
    let mut term = (1.0 - loss).powi(n);
    let mut cdf = term;
    for j in 0..i32::from(parity) {
        if loss >= 1.0 {
            return 1.0;
        }
        term *= f64::from(n - j) / f64::from(j + 1) * loss / (1.0 - loss);
        cdf += term;
    }
    (1.0 - cdf).max(0.0)
}

/// Smallest parity in `0..=max_parity` meeting `target` at `loss` (or `max_parity`).
pub fn required_parity(max_data: u8, max_parity: u8, target: f64, loss: f64) -> u8 {
    (0..=max_parity)
        .find(|&p| unrecoverable_probability(max_data, p, loss) < target)
        .unwrap_or(max_parity)
}

/// The sender's adaptive parity state (see the module docs for the policy).
#[derive(Debug, Clone)]
pub struct ParityPolicy {
    max_data: u8,
    max_parity: u8,
    target: f64,
    lost_s: f64,
    expected_s: f64,
    parity: u8,
    lower_streak: u32,
    /// When the parity last changed.
    changed_at: Option<Instant>,
    changes: u64,
}

impl ParityPolicy {
    /// A policy starting at parity 0 (no loss seen yet).
    pub fn new(max_data: u8, max_parity: u8, target: f64) -> Self {
        ParityPolicy {
            max_data,
            max_parity,
            target,
            lost_s: 0.0,
            expected_s: 0.0,
            parity: 0,
            lower_streak: 0,
            changed_at: None,
            changes: 0,
        }
    }

    /// Parity shards the next group should carry, in packets.
    pub fn parity(&self) -> u8 {
        self.parity
    }

    /// Smoothed loss rate, 0.0..=1.0.
    pub fn loss(&self) -> f64 {
        if self.expected_s > 0.0 {
            self.lost_s / self.expected_s
        } else {
            0.0
        }
    }

    /// Number of parity changes so far.
    pub fn changes(&self) -> u64 {
        self.changes
    }

    /// Parity for a group of `data` data shards closed early for sparse traffic
    /// (rule 3 of the module docs): 0 while [`ParityPolicy::parity`] is 0,
    /// otherwise within `1..=parity()`.
    pub fn parity_for(&self, data: u8) -> u8 {
        if self.parity == 0 {
            return 0;
        }
        required_parity(data.max(1), self.parity, self.target, self.loss()).max(1)
    }

    /// Feeds one report received at `now`; returns whether the parity changed.
    /// Reports with `expected == 0` carry no information and are ignored.
    pub fn on_report(&mut self, now: Instant, r: &LossReport) -> bool {
        if r.expected == 0 {
            return false;
        }
        let expected = f64::from(r.expected);
        let decay = (7.0 / 8.0f64).max(0.5f64.powf(expected / HALF_LIFE_SHARDS));
        self.lost_s = self.lost_s * decay + f64::from(r.lost());
        self.expected_s = self.expected_s * decay + expected;
        let loss = self.loss();
        let k = self.max_data;
        let want = required_parity(k, self.max_parity, self.target, loss);
        let strict = self.target * LOWER_MARGIN;
        let dwelt = self
            .changed_at
            .is_none_or(|t| now.saturating_duration_since(t) >= MIN_DWELL);
        let next = if want > self.parity {
            self.lower_streak = 0;
            want
        } else if required_parity(k, self.max_parity, strict, loss) < self.parity {
            self.lower_streak = self.lower_streak.saturating_add(1);
            if self.lower_streak >= LOWER_AFTER && dwelt {
                self.lower_streak = 0;
                self.parity - 1
            } else {
                self.parity
            }
        } else {
            self.lower_streak = 0;
            self.parity
        };
        let changed = next != self.parity;
        if changed {
            self.parity = next;
            self.changes += 1;
            self.changed_at = Some(now);
        }
        changed
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn binomial_tail_matches_hand_values() {
        assert_eq!(unrecoverable_probability(8, 0, 0.0), 0.0);
        // 8 shards, no parity, 1 % loss: 1 - 0.99^8.
        let p = unrecoverable_probability(8, 0, 0.01);
        assert!((p - (1.0 - 0.99f64.powi(8))).abs() < 1e-12);
        // 10 shards, 2 parity, 2 % loss: P(X ≥ 3) ≈ 8.6e-4.
        let p = unrecoverable_probability(8, 2, 0.02);
        assert!((8.0e-4..9.5e-4).contains(&p), "{p}");
        assert_eq!(unrecoverable_probability(8, 2, 1.0), 1.0);
    }

    #[test]
    fn required_parity_table() {
        assert_eq!(required_parity(8, 4, 1e-3, 0.0), 0);
        assert_eq!(required_parity(8, 4, 1e-3, 0.02), 2);
        assert_eq!(required_parity(8, 4, 1e-3, 0.05), 4);
        assert_eq!(required_parity(8, 4, 1e-3, 0.10), 4);
    }

    #[test]
    fn rises_at_once_and_falls_with_hysteresis() {
        let mut p = ParityPolicy::new(8, 4, 1e-3);
        let t0 = Instant::now();
        let mut now = t0;
        assert!(!p.on_report(
            now,
            &LossReport {
                expected: 0,
                received: 0
            }
        ));
        assert!(p.on_report(
            now,
            &LossReport {
                expected: 1000,
                received: 900
            }
        ));
        assert_eq!(p.parity(), 4);
        let clean = LossReport {
            expected: 1000,
            received: 1000,
        };
        let mut reports = 0;
        while p.parity() > 0 {
            now += Duration::from_millis(100);
            p.on_report(now, &clean);
            reports += 1;
            assert!(reports < 500, "never settled back to 0");
        }
        assert!(reports >= 4 * LOWER_AFTER as usize);
        assert_eq!(p.changes(), 5);
        // Each step down waited the dwell time after the previous change.
        assert_eq!(p.parity_for(1), 0);
        assert!(now - t0 >= 4 * MIN_DWELL, "{:?}", now - t0);
    }

    #[test]
    fn report_round_trips() {
        let r = LossReport {
            expected: 70_000,
            received: 69_000,
        };
        assert_eq!(LossReport::decode(&r.encode()), Ok(r));
        assert!(LossReport::decode(&[0x18; 8]).is_err());
        assert!(LossReport::decode(&[0x10; 9]).is_err());
        assert_eq!(r.lost(), 1000);
    }
}
