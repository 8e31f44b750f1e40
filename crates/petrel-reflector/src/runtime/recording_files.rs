//! Recording files on disk (draarl-v1 §5.3): each `.raw` file is created
//! under a name no other file has, and the files the store lists stay
//! within a disk quota, the oldest deleted first.
//!
//! A file is only ever created new (`create_new`): when two recordings of
//! one talker start in the same second, the second gets the next numbered
//! name ([`numbered_path`]) instead of overwriting the first, also across
//! restarts. The bytes stored are kept in
//! [`HistoryStats::recording_bytes`], read from the store once at start.

use std::io::ErrorKind;
use std::path::{Path, PathBuf};
use std::sync::atomic::Ordering::Relaxed;
use std::sync::Arc;

use tokio::io::AsyncWriteExt;

use super::stats::HistoryStats;
use super::store::{Store, StoreError};
use super::text_history::saturating_sub;
use crate::codec::encode_raw;
use crate::model::{numbered_path, Recording};

/// Names tried for one recording (`…Z.raw`, `…Z-1.raw`, …) before giving up.
const NAME_TRIES: u32 = 1000;
/// Recordings deleted per query while over the quota.
const PRUNE_BATCH: u32 = 64;

/// Where recordings go and how much they may take.
#[derive(Debug, Clone)]
pub(super) struct RecordingFiles {
    dir: PathBuf,
    max_total_bytes: u64,
    store: Store,
    stats: Arc<HistoryStats>,
}

impl RecordingFiles {
    /// Reads the bytes the store lists now into `stats`.
    pub(super) async fn load(
        dir: PathBuf,
        max_total_bytes: u64,
        store: &Store,
        stats: &Arc<HistoryStats>,
    ) -> Result<Self, StoreError> {
        let bytes = store.recording_bytes().await?;
        stats.recording_bytes.store(bytes, Relaxed);
        Ok(Self {
            dir,
            max_total_bytes,
            store: store.clone(),
            stats: Arc::clone(stats),
        })
    }

    /// Writes `<dir>/<YYYY>/<MM>/<D>/….raw` under a fresh name and its store
    /// row, then deletes the oldest recordings while over the quota.
    pub(super) async fn write(&self, r: &Recording) -> Result<(), String> {
        let frames: Vec<&[u8]> = r.frames.iter().map(Vec::as_slice).collect();
        let bytes = encode_raw(&frames).map_err(|e| e.to_string())?;
        let (rel, path) = self.create_unique(r, &bytes).await?;
        if let Err(e) = self.store.add_recording(r, &rel, bytes.len() as u64).await {
            // Unlisted, the file would escape the quota.
            let _ = tokio::fs::remove_file(&path).await;
            return Err(e.to_string());
        }
        self.stats
            .recording_bytes
            .fetch_add(bytes.len() as u64, Relaxed);
        self.enforce_quota().await
    }

    /// Creates the first free name of `r` and writes `bytes` to it; returns
    /// the relative and the full path.
    async fn create_unique(
        &self,
        r: &Recording,
        bytes: &[u8],
    ) -> Result<(String, PathBuf), String> {
        for n in 0..NAME_TRIES {
            let rel = numbered_path(r, n);
            let path = self.dir.join(&rel);
            if let Some(parent) = path.parent() {
                tokio::fs::create_dir_all(parent)
                    .await
                    .map_err(|e| format!("{}: {e}", parent.display()))?;
            }
            let file = tokio::fs::OpenOptions::new()
                .write(true)
                .create_new(true)
                .open(&path)
                .await;
            let mut file = match file {
                Ok(f) => f,
                Err(e) if e.kind() == ErrorKind::AlreadyExists => continue,
                Err(e) => return Err(format!("{}: {e}", path.display())),
            };
            if n > 0 {
                self.stats.recording_name_collisions.fetch_add(1, Relaxed);
            }
            if let Err(e) = write_all(&mut file, bytes).await {
                drop(file);
                let _ = tokio::fs::remove_file(&path).await;
                return Err(format!("{}: {e}", path.display()));
            }
            return Ok((rel, path));
        }
        Err(format!(
            "{}: {NAME_TRIES} names in use",
            self.dir.join(numbered_path(r, 0)).display()
        ))
    }

    /// Deletes the oldest recordings, file and row, while the total is over
    /// the quota.
    async fn enforce_quota(&self) -> Result<(), String> {
        while self.stats.recording_bytes.load(Relaxed) > self.max_total_bytes {
            let oldest = self
                .store
                .oldest_recordings(PRUNE_BATCH)
                .await
                .map_err(|e| e.to_string())?;
            if oldest.is_empty() {
                self.stats.recording_bytes.store(0, Relaxed);
                break;
            }
            for rec in oldest {
                remove_listed_file(&self.dir, &rec.path).await;
                self.store
                    .delete_recording(rec.id)
                    .await
                    .map_err(|e| e.to_string())?;
                saturating_sub(&self.stats.recording_bytes, rec.bytes);
                self.stats.recordings_pruned.fetch_add(1, Relaxed);
                self.stats
                    .recording_bytes_pruned
                    .fetch_add(rec.bytes, Relaxed);
                if self.stats.recording_bytes.load(Relaxed) <= self.max_total_bytes {
                    break;
                }
            }
        }
        Ok(())
    }
}

async fn write_all(file: &mut tokio::fs::File, bytes: &[u8]) -> std::io::Result<()> {
    file.write_all(bytes).await?;
    file.flush().await
}

/// Removes a listed file; one already gone is fine, and one that cannot be
/// removed is logged (its row goes anyway, so the quota loop ends).
async fn remove_listed_file(dir: &Path, rel: &str) {
    let path = dir.join(rel);
    match tokio::fs::remove_file(&path).await {
        Ok(()) => {}
        Err(e) if e.kind() == ErrorKind::NotFound => {}
        Err(e) => tracing::warn!(error = %e, path = %path.display(), "recording not removed"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::codec::decode_raw;
    use crate::runtime::store::scratch_store::ScratchStore;

    fn rec(started_unix_ms: i64, tag: u8) -> Recording {
        Recording {
            device: (4, 7),
            group_id: 999,
            started_unix_ms,
            frames: vec![vec![tag; 40]; 10],
        }
    }

    /// Runs `body` with recording files in a fresh directory over a fresh
    /// SQLite store, then removes both.
    async fn with_files<F, Fut>(name: &str, quota: u64, body: F)
    where
        F: FnOnce(RecordingFiles, Store, PathBuf) -> Fut,
        Fut: std::future::Future<Output = ()>,
    {
        let (scratch, store) = ScratchStore::open_sqlite(name).await;
        let dir = PathBuf::from(format!("{}-rec", scratch.location()));
        let stats = Arc::new(HistoryStats::default());
        let files = RecordingFiles::load(dir.clone(), quota, &store, &stats)
            .await
            .unwrap();
        body(files, store.clone(), dir.clone()).await;
        store.close().await;
        let _ = std::fs::remove_dir_all(&dir);
        scratch.remove().await.unwrap();
    }

    #[tokio::test]
    async fn same_second_recordings_get_numbered_names_and_nothing_is_overwritten() {
        with_files("rec_names", 1 << 30, |files, store, dir| async move {
            // A file from before a restart holds the plain name.
            let first = dir.join(numbered_path(&rec(1_709_251_199_000, 0), 0));
            std::fs::create_dir_all(first.parent().unwrap()).unwrap();
            std::fs::write(&first, b"keep").unwrap();
            // Three recordings of one talker in the same second.
            for (ms, tag) in [
                (1_709_251_199_000, 1),
                (1_709_251_199_400, 2),
                (1_709_251_199_900, 3),
            ] {
                files.write(&rec(ms, tag)).await.unwrap();
            }
            assert_eq!(std::fs::read(&first).unwrap(), b"keep");
            let mut rows = store.recent_recordings(999, 10).await.unwrap();
            rows.reverse();
            let paths: Vec<&str> = rows.iter().map(|r| r.0.as_str()).collect();
            assert_eq!(
                paths,
                [
                    "2024/02/29/u4s7_20240229T235959Z-1.raw",
                    "2024/02/29/u4s7_20240229T235959Z-2.raw",
                    "2024/02/29/u4s7_20240229T235959Z-3.raw",
                ]
            );
            for (path, tag) in paths.iter().zip(1u8..) {
                let bytes = std::fs::read(dir.join(path)).unwrap();
                assert_eq!(decode_raw(&bytes).unwrap()[0], &[tag; 40][..]);
            }
            assert_eq!(files.stats.recording_name_collisions.load(Relaxed), 3);
        })
        .await;
    }

    #[tokio::test]
    async fn quota_deletes_the_oldest_recordings_first_and_counts_them() {
        let frames: Vec<&[u8]> = vec![&[0u8; 40][..]; 10];
        let size = encode_raw(&frames).unwrap().len() as u64;
        // Room for two and a half recordings.
        with_files("rec_quota", size * 5 / 2, |files, store, dir| async move {
            for k in 0..5u8 {
                files
                    .write(&rec(1_000_000 * i64::from(k + 1), k))
                    .await
                    .unwrap();
                assert!(files.stats.recording_bytes.load(Relaxed) <= size * 5 / 2);
            }
            let s = &files.stats;
            assert_eq!(s.recordings_pruned.load(Relaxed), 3);
            assert_eq!(s.recording_bytes_pruned.load(Relaxed), 3 * size);
            assert_eq!(s.recording_bytes.load(Relaxed), 2 * size);
            let rows = store.recent_recordings(999, 10).await.unwrap();
            assert_eq!(rows.len(), 2);
            assert_eq!(store.recording_bytes().await.unwrap(), 2 * size);
            // The newest two are kept; the files of the others are gone.
            for k in 0..5u8 {
                let path = dir.join(numbered_path(&rec(1_000_000 * i64::from(k + 1), k), 0));
                assert_eq!(path.exists(), k >= 3, "recording {k}");
            }
        })
        .await;
    }
}
