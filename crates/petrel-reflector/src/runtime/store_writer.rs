//! The task that persists store events and recordings, in order, through
//! one bounded queue (full → counted drop at the shard), keeping the text
//! history under its byte cap and the recordings under their quota.

use std::sync::atomic::Ordering::Relaxed;
use std::sync::Arc;

use tokio::sync::mpsc as tmpsc;

use super::recording_files::RecordingFiles;
use super::stats::StatsSource;
use super::store::Store;
use super::text_history::TextHistory;
use crate::model::{Recording, StoreEvent};

/// Store events and recordings waiting for the database at most.
pub(super) const EVENT_QUEUE: usize = 4096;

/// Work for the background writer.
#[derive(Debug)]
pub(super) enum Persist {
    Event(StoreEvent),
    Recording(Recording),
}

/// The task that persists store events and recordings, in order; each
/// stored text is counted against the history's byte cap, each recording
/// against the disk quota.
pub(super) fn spawn_store_writer(
    store: &Store,
    text: TextHistory,
    recordings: Option<RecordingFiles>,
    stats: &StatsSource,
) -> (tmpsc::Sender<Persist>, tokio::task::JoinHandle<()>) {
    let (tx, mut rx) = tmpsc::channel::<Persist>(EVENT_QUEUE);
    let store = store.clone();
    let errs = Arc::clone(&stats.store_errors);
    let task = tokio::spawn(async move {
        while let Some(p) = rx.recv().await {
            let result = match p {
                Persist::Event(e) => persist_event(&store, &text, &e).await,
                Persist::Recording(r) => match &recordings {
                    Some(files) => files.write(&r).await,
                    None => Ok(()),
                },
            };
            if let Err(err) = result {
                errs.fetch_add(1, Relaxed);
                tracing::warn!(error = %err, "store write failed");
            }
        }
    });
    (tx, task)
}

async fn persist_event(store: &Store, text: &TextHistory, e: &StoreEvent) -> Result<(), String> {
    store.apply(e).await.map_err(|e| e.to_string())?;
    if let StoreEvent::Text { text: t, .. } = e {
        text.added(t.len() as u64)
            .await
            .map_err(|e| e.to_string())?;
    }
    Ok(())
}
