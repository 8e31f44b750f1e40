//! The task that persists store events and recordings, in order, through
//! one bounded queue (full → counted drop at the shard).

use std::sync::atomic::Ordering::Relaxed;
use std::sync::Arc;

use tokio::sync::mpsc as tmpsc;

use super::stats::StatsSource;
use super::store::Store;
use crate::codec::encode_raw;
use crate::model::{relative_path, Recording, ServerConfig, StoreEvent};

/// Store events and recordings waiting for the database at most.
pub(super) const EVENT_QUEUE: usize = 4096;

/// Work for the background writer.
#[derive(Debug)]
pub(super) enum Persist {
    Event(StoreEvent),
    Recording(Recording),
}

/// Writes `<dir>/<YYYY>/<MM>/<D>/….raw` and its store row.
async fn write_recording(
    dir: &std::path::Path,
    store: &Store,
    r: &Recording,
) -> Result<(), String> {
    let rel = relative_path(r);
    let path = dir.join(&rel);
    let frames: Vec<&[u8]> = r.frames.iter().map(Vec::as_slice).collect();
    let bytes = encode_raw(&frames).map_err(|e| e.to_string())?;
    if let Some(parent) = path.parent() {
        tokio::fs::create_dir_all(parent)
            .await
            .map_err(|e| e.to_string())?;
    }
    tokio::fs::write(&path, &bytes)
        .await
        .map_err(|e| format!("{}: {e}", path.display()))?;
    store
        .add_recording(r, &rel, bytes.len() as u64)
        .await
        .map_err(|e| e.to_string())
}

/// The task that persists store events and recordings, in order.
pub(super) fn spawn_store_writer(
    store: &Store,
    cfg: &ServerConfig,
    stats: &StatsSource,
) -> (tmpsc::Sender<Persist>, tokio::task::JoinHandle<()>) {
    let (tx, mut rx) = tmpsc::channel::<Persist>(EVENT_QUEUE);
    let store = store.clone();
    let errs = Arc::clone(&stats.store_errors);
    let rec_dir = std::path::PathBuf::from(&cfg.recording.dir);
    let task = tokio::spawn(async move {
        while let Some(p) = rx.recv().await {
            let result = match p {
                Persist::Event(e) => store.apply(&e).await.map_err(|e| e.to_string()),
                Persist::Recording(r) => write_recording(&rec_dir, &store, &r).await,
            };
            if let Err(err) = result {
                errs.fetch_add(1, Relaxed);
                tracing::warn!(error = %err, "store write failed");
            }
        }
    });
    (tx, task)
}
