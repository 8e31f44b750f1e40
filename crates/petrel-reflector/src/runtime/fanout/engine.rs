//! Threads of the fan-out engine. One dispatcher pops whole frames in order
//! and sends partition 0 itself; writer threads 1..n send the other
//! partitions in parallel from duplicated descriptors of the same socket (so
//! every datagram leaves from the reflector's port). The dispatcher waits for
//! all partitions of a frame before the next, so each target sees frames in
//! order and a frame is sent whole or not at all. A partition's physical
//! devices get the frame's packet, its app sessions the copy carrying the
//! source group (`specs/draarl-apps.md` §2.7).

use std::net::UdpSocket;
use std::sync::atomic::{AtomicBool, Ordering::Relaxed};
use std::sync::mpsc::{self, Receiver, SyncSender};
use std::sync::{Arc, Condvar, Mutex, PoisonError};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use super::queue::{FrameQueue, Push};
use super::send::{send_to_many, SendBatch, SendReport};
use super::stats::FanoutStats;
use crate::model::ConnectionId;
use crate::model::FanoutConfig;
use crate::model::{Frame, FrameKind};

#[derive(Debug)]
struct Shared {
    queue: Mutex<FrameQueue>,
    ready: Condvar,
    stop: AtomicBool,
}

type Job = (Arc<Frame>, usize);

/// Where frames for WebSocket receivers go: each connection's write queue,
/// never blocking (`specs/draarl-apps.md` §4.5).
pub trait ConnectionSink: Send + Sync + std::fmt::Debug {
    /// Queues `packet` (the frame's source-group copy) for every connection
    /// of `targets` but `exclude`.
    fn send_frame(
        &self,
        targets: &[ConnectionId],
        exclude: Option<ConnectionId>,
        packet: &Arc<[u8]>,
    );
}

/// A running engine. Dropping it stops and joins its threads.
#[derive(Debug)]
pub struct FanoutEngine {
    shared: Arc<Shared>,
    stats: Arc<FanoutStats>,
    threads: Vec<JoinHandle<()>>,
}

fn add(stats: &FanoutStats, r: &SendReport) {
    stats.targets_attempted.fetch_add(r.attempted, Relaxed);
    stats.sent.fetch_add(r.sent, Relaxed);
    stats.write_errors.fetch_add(r.errors, Relaxed);
    stats.enobufs.fetch_add(r.enobufs, Relaxed);
    stats.would_block.fetch_add(r.would_block, Relaxed);
    stats
        .message_too_large
        .fetch_add(r.message_too_large, Relaxed);
    stats.deferred_errors.fetch_add(r.deferred_errors, Relaxed);
}

fn send_partition(
    sock: &UdpSocket,
    frame: &Frame,
    part: usize,
    batch: &mut SendBatch,
    stats: &FanoutStats,
) {
    if let Some(targets) = frame.snapshot.partitions.get(part) {
        let r = send_to_many(sock, &frame.packet, targets, frame.exclude, batch);
        add(stats, &r);
    }
    let aware = frame.snapshot.aware.get(part);
    if let (Some(packet), Some(targets)) = (&frame.session_packet, aware) {
        let r = send_to_many(sock, packet, targets, frame.exclude, batch);
        add(stats, &r);
    }
}

impl FanoutEngine {
    /// Starts the dispatcher and `cfg.writers − 1` writer threads sending
    /// from clones of `sock`; frames for WebSocket receivers go to
    /// `connections` (dropped without one). Receiver snapshots must be
    /// partitioned for `cfg.writers` send paths.
    pub fn start(
        sock: &UdpSocket,
        cfg: &FanoutConfig,
        connections: Option<Arc<dyn ConnectionSink>>,
    ) -> std::io::Result<Self> {
        let shared = Arc::new(Shared {
            queue: Mutex::new(
                FrameQueue::new(cfg.frame_queue, Duration::from_millis(cfg.max_frame_age_ms))
                    .with_text_capacity(cfg.text_queue),
            ),
            ready: Condvar::new(),
            stop: AtomicBool::new(false),
        });
        let stats = Arc::new(FanoutStats::default());
        let (done_tx, done_rx) = mpsc::channel::<()>();
        let mut threads = Vec::new();
        let mut writers: Vec<SyncSender<Job>> = Vec::new();
        for _ in 1..cfg.writers.max(1) {
            let (tx, rx): (SyncSender<Job>, Receiver<Job>) = mpsc::sync_channel(1);
            let sock = sock.try_clone()?;
            let (stats, done, batch) = (Arc::clone(&stats), done_tx.clone(), cfg.batch);
            threads.push(
                std::thread::Builder::new()
                    .name("refl-writer".into())
                    .spawn(move || {
                        let mut batch = SendBatch::new(batch);
                        while let Ok((frame, part)) = rx.recv() {
                            send_partition(&sock, &frame, part, &mut batch, &stats);
                            if done.send(()).is_err() {
                                break;
                            }
                        }
                    })?,
            );
            writers.push(tx);
        }
        let sock = sock.try_clone()?;
        let (sh, st, batch) = (Arc::clone(&shared), Arc::clone(&stats), cfg.batch);
        threads.push(
            std::thread::Builder::new()
                .name("refl-dispatch".into())
                .spawn(move || {
                    let paths = SendPaths {
                        sock: &sock,
                        writers: &writers,
                        done: &done_rx,
                        connections: connections.as_deref(),
                    };
                    dispatch_loop(&sh, &st, &paths, batch)
                })?,
        );
        Ok(Self {
            shared,
            stats,
            threads,
        })
    }

    /// Queues a frame; when its kind's queue is full the oldest whole frame
    /// of that kind is evicted (voice counted in `frames_dropped`, text in
    /// `text_frames_dropped`).
    pub fn submit(&self, frame: Frame) {
        let kind = frame.kind;
        let mut q = self
            .shared
            .queue
            .lock()
            .unwrap_or_else(PoisonError::into_inner);
        self.stats.frames_accepted.fetch_add(1, Relaxed);
        if q.push(frame) == Push::EvictedOldest {
            let dropped = match kind {
                FrameKind::Voice => &self.stats.frames_dropped,
                FrameKind::Text => &self.stats.text_frames_dropped,
            };
            dropped.fetch_add(1, Relaxed);
        }
        self.stats
            .queue_high_water
            .fetch_max(q.high_water() as u64, Relaxed);
        drop(q);
        self.shared.ready.notify_one();
    }

    /// Shared counters.
    pub fn stats(&self) -> &Arc<FanoutStats> {
        &self.stats
    }

    /// Stops the threads after the frame in progress; queued frames are discarded.
    pub fn shutdown(&mut self) {
        {
            // Set under the lock so the dispatcher cannot miss the wake-up
            // between its stop check and its wait.
            let _q = self
                .shared
                .queue
                .lock()
                .unwrap_or_else(PoisonError::into_inner);
            self.shared.stop.store(true, Relaxed);
        }
        self.shared.ready.notify_all();
        for t in self.threads.drain(..).rev() {
            let _ = t.join();
        }
    }
}

impl Drop for FanoutEngine {
    fn drop(&mut self) {
        self.shutdown();
    }
}

/// The dispatcher's send paths: its own socket, the writers (and their
/// completion channel), and the WebSocket connections.
struct SendPaths<'a> {
    sock: &'a UdpSocket,
    writers: &'a [SyncSender<Job>],
    done: &'a Receiver<()>,
    connections: Option<&'a dyn ConnectionSink>,
}

fn dispatch_loop(shared: &Shared, stats: &FanoutStats, paths: &SendPaths<'_>, batch: usize) {
    let SendPaths {
        sock,
        writers,
        done,
        connections,
    } = *paths;
    let mut batch = SendBatch::new(batch);
    loop {
        let frame = {
            let mut q = shared.queue.lock().unwrap_or_else(PoisonError::into_inner);
            loop {
                if shared.stop.load(Relaxed) {
                    return;
                }
                let (f, expired) = q.pop(Instant::now());
                stats.frames_expired.fetch_add(expired, Relaxed);
                if let Some(f) = f {
                    break f;
                }
                q = shared.ready.wait(q).unwrap_or_else(PoisonError::into_inner);
            }
        };
        let started = Instant::now();
        let frame = Arc::new(frame);
        let mut pending = 0;
        for (i, w) in writers.iter().enumerate() {
            let part = i + 1;
            let snap = &frame.snapshot;
            let has_targets = [snap.partitions.get(part), snap.aware.get(part)]
                .into_iter()
                .flatten()
                .any(|p| !p.is_empty());
            if has_targets && w.send((Arc::clone(&frame), part)).is_ok() {
                pending += 1;
            }
        }
        send_partition(sock, &frame, 0, &mut batch, stats);
        if let (Some(sink), Some(packet)) = (connections, &frame.session_packet) {
            if !frame.snapshot.websockets.is_empty() {
                sink.send_frame(&frame.snapshot.websockets, frame.exclude_connection, packet);
            }
        }
        for _ in 0..pending {
            if done.recv().is_err() {
                return;
            }
        }
        stats.frames_sent.fetch_add(1, Relaxed);
        let ns = u64::try_from(started.elapsed().as_nanos()).unwrap_or(u64::MAX);
        stats.max_dispatch_ns.fetch_max(ns, Relaxed);
    }
}
