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
        loop {
            let excess = self
                .stats
                .text_bytes
                .load(Relaxed)
                .saturating_sub(self.max_bytes);
            if excess == 0 {
                break;
            }
            let p = self.store.prune_oldest_messages(excess).await?;
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::StoreEvent;
    use crate::runtime::store::scratch_store::ScratchStore;

    async fn store_text(store: &Store, history: &TextHistory, unix_ms: i64, text: &[u8]) {
        store
            .apply(&StoreEvent::Text {
                device: (1, 7),
                group_id: 999,
                unix_ms,
                text: text.to_vec(),
            })
            .await
            .unwrap();
        history.added(text.len() as u64).await.unwrap();
    }

    #[tokio::test]
    async fn byte_cap_and_age_delete_oldest_first_and_count() {
        let (scratch, store) = ScratchStore::open_sqlite("text_cap").await;
        let stats = Arc::new(HistoryStats::default());
        // 10 bytes already stored before the start.
        let before = TextHistory::load(&store, 1 << 20, &stats).await.unwrap();
        store_text(&store, &before, 1_000, b"0123456789").await;
        let history = TextHistory::load(&store, 25, &stats).await.unwrap();
        assert_eq!(stats.text_bytes.load(Relaxed), 10);
        for (ms, text) in [
            (2_000, &b"aaaaaaaaaa"[..]),
            (3_000, b"bbbbb"),
            (4_000, b"cccccccccc"),
        ] {
            store_text(&store, &history, ms, text).await;
            assert!(stats.text_bytes.load(Relaxed) <= 25);
        }
        // 35 bytes were stored: the oldest message (10 bytes) went.
        assert_eq!(stats.messages_pruned_bytes_cap.load(Relaxed), 1);
        assert_eq!(stats.text_bytes.load(Relaxed), 25);
        assert_eq!(store.text_bytes().await.unwrap(), 25);
        // The age limit deletes and counts on its own: the messages of 2 s
        // and 3 s are what the cap left besides the newest.
        history.prune_older_than(3_500).await.unwrap();
        assert_eq!(stats.messages_pruned_age.load(Relaxed), 2);
        assert_eq!(stats.text_bytes.load(Relaxed), 10);
        store.close().await;
        scratch.remove().await.unwrap();
    }
}
