//! The bounds of the stored text history: an age limit
//! (`message_retention_days`, applied at every reload) and a byte cap
//! (`message_history_max_bytes`, applied after every stored text, oldest
//! messages deleted first). Both delete counted; the bytes stored are kept
//! in [`HistoryStats::text_bytes`], read from the store once at start and
//! then updated by every insert and deletion, so no query sums the table
//! again.

use std::sync::atomic::{AtomicU64, Ordering::Relaxed};
use std::sync::Arc;

use super::stats::HistoryStats;
use super::store::{Pruned, Store, StoreError};

/// Messages deleted per query while over the byte cap.
const PRUNE_BATCH: u32 = 256;

/// The text history's byte count and caps (cheap to clone).
#[derive(Debug, Clone)]
pub(super) struct TextHistory {
    store: Store,
    max_bytes: u64,
    stats: Arc<HistoryStats>,
}

impl TextHistory {
    /// Reads the bytes stored now into `stats`.
    pub(super) async fn load(
        store: &Store,
        max_bytes: u64,
        stats: &Arc<HistoryStats>,
    ) -> Result<Self, StoreError> {
        stats.text_bytes.store(store.text_bytes().await?, Relaxed);
        Ok(Self {
            store: store.clone(),
            max_bytes,
            stats: Arc::clone(stats),
        })
    }

    /// Counts a stored text of `bytes`, then deletes the oldest messages
    /// while the history is over its cap.
    pub(super) async fn added(&self, bytes: u64) -> Result<(), StoreError> {
        self.stats.text_bytes.fetch_add(bytes, Relaxed);
        while self.stats.text_bytes.load(Relaxed) > self.max_bytes {
            let p = self.store.prune_oldest_messages(PRUNE_BATCH).await?;
            self.removed(&p);
            self.stats
                .messages_pruned_bytes_cap
                .fetch_add(p.rows, Relaxed);
            if p.rows == 0 {
                // The count was ahead of the table (a failed insert);
                // nothing is left to delete.
                self.stats.text_bytes.store(0, Relaxed);
                break;
            }
        }
        Ok(())
    }

    /// Deletes messages sent before `before_ms` (Unix ms).
    pub(super) async fn prune_older_than(&self, before_ms: i64) -> Result<(), StoreError> {
        let p = self.store.prune_messages(before_ms).await?;
        self.removed(&p);
        self.stats.messages_pruned_age.fetch_add(p.rows, Relaxed);
        Ok(())
    }

    fn removed(&self, p: &Pruned) {
        saturating_sub(&self.stats.text_bytes, p.bytes);
    }
}

/// Subtracts `n` from `counter`, stopping at 0.
pub(super) fn saturating_sub(counter: &AtomicU64, n: u64) {
    let _ = counter.fetch_update(Relaxed, Relaxed, |v| Some(v.saturating_sub(n)));
}
