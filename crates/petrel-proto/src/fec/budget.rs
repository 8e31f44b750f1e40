//! The retained-memory budget shared by every FEC encoder and decoder of one
//! endpoint (issue #4: "a retained-memory budget per endpoint, default 1 MiB").
//!
//! The accountant only counts; it never blocks. Its users decide what to give up
//! when a reservation fails: a decoder releases its oldest incomplete groups, an
//! encoder closes its open group early or sends without parity. Each user
//! returns what it still holds when dropped, so the total is the sum over live
//! encoders and decoders.

use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::Arc;

#[derive(Debug)]
struct Shared {
    limit: usize,
    used: AtomicUsize,
    peak: AtomicUsize,
    groups_released: AtomicU64,
}

/// A byte budget shared by clones (one per endpoint, a clone per connection).
///
/// Counts the shards FEC keeps for later: an encoder's open group (kept to
/// compute parity) and a decoder's incomplete groups (kept to rebuild lost
/// data). Transmit and delivery queues, which the session drains at once, are
/// bounded per encoder/decoder instead (`TX_QUEUE_LIMIT`, `RX_QUEUE_LIMIT` and
/// `budget` bytes each).
#[derive(Debug, Clone)]
pub struct FecBudget {
    shared: Arc<Shared>,
}

impl FecBudget {
    /// A budget of `limit` bytes with nothing reserved.
    pub fn new(limit: usize) -> Self {
        FecBudget {
            shared: Arc::new(Shared {
                limit,
                used: AtomicUsize::new(0),
                peak: AtomicUsize::new(0),
                groups_released: AtomicU64::new(0),
            }),
        }
    }

    /// Reserves `bytes` if the total stays within the limit; `false` (and nothing
    /// reserved) otherwise.
    pub fn try_reserve(&self, bytes: usize) -> bool {
        let limit = self.shared.limit;
        let reserved = self
            .shared
            .used
            .fetch_update(Ordering::AcqRel, Ordering::Acquire, |used| {
                used.checked_add(bytes).filter(|&total| total <= limit)
            });
        match reserved {
            Ok(before) => {
                self.shared
                    .peak
                    .fetch_max(before + bytes, Ordering::Relaxed);
                true
            }
            Err(_) => false,
        }
    }

    /// Returns `bytes` reserved earlier.
    pub fn release(&self, bytes: usize) {
        // Saturating: a caller returning more than it holds must not wrap the
        // shared total to "everything used".
        let _ = self
            .shared
            .used
            .fetch_update(Ordering::AcqRel, Ordering::Acquire, |used| {
                Some(used.saturating_sub(bytes))
            });
    }

    /// Counts `n` decoder groups released to make room.
    pub(crate) fn count_released(&self, n: u64) {
        self.shared.groups_released.fetch_add(n, Ordering::Relaxed);
    }

    /// The limit, in bytes.
    pub fn limit(&self) -> usize {
        self.shared.limit
    }

    /// Bytes reserved now by all users.
    pub fn current(&self) -> usize {
        self.shared.used.load(Ordering::Acquire)
    }

    /// Highest total ever reserved, in bytes.
    pub fn peak(&self) -> usize {
        self.shared.peak.load(Ordering::Relaxed)
    }

    /// Incomplete decoder groups released because a reservation failed, summed
    /// over all users.
    pub fn groups_released(&self) -> u64 {
        self.shared.groups_released.load(Ordering::Relaxed)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reserve_respects_limit_and_release_returns() {
        let b = FecBudget::new(100);
        let c = b.clone();
        assert!(b.try_reserve(60));
        assert!(!c.try_reserve(41));
        assert!(c.try_reserve(40));
        assert_eq!((b.current(), b.peak()), (100, 100));
        c.release(60);
        assert_eq!(b.current(), 40);
        b.release(1000);
        assert_eq!((b.current(), b.peak()), (0, 100));
        assert!(!b.try_reserve(usize::MAX));
    }
}
