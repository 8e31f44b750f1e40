//! The ingress threads (draarl-v1 §4.1): one reader per socket rate-limits
//! each datagram and hands it to the shard owning its device over a bounded
//! queue (full → counted drop); each shard thread runs one [`Reflector`]
//! and feeds the shared fan-out engine.
//!
//! A device's packets all go to one shard and one queue, so they are
//! handled in arrival order; shards run in parallel. Argon2 never runs on
//! these threads: all shards share one fixed [`PasswordVerifier`] pool of
//! `session.password_checks_in_flight` threads (so its memory bound does
//! not grow with the shard count); each check carries the shard's own
//! answer queue, and every shard handles its answers each loop turn
//! (≤ 20 ms).

use std::collections::VecDeque;
use std::net::{SocketAddr, UdpSocket};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering::Relaxed};
use std::sync::mpsc::{Receiver, RecvTimeoutError, SyncSender, TrySendError};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Duration, Instant};

use tokio::sync::mpsc as tmpsc;
use tokio::task::AbortHandle;

use petrel_sys::error_queue::is_deferred_error;

use super::app_authority::AppAuthority;
use super::dashboard::Dashboard;
use super::fanout::FanoutEngine;
use super::icmp::{IcmpWatch, Report};
use super::interconnect::CentreRelay;
use super::stats::Published;
use super::store_writer::Persist;
use super::verifier::{Answer, PasswordVerifier};
use super::wall_clock::unix_ms;
use crate::core::{Ingress, IngressStats, Reflector};
use crate::model::{AppGrant, AppLoginCheck, AppReject, ConnectionId, DeviceKey, Directory};

/// The account store's answer to one app login: (check id, verdict).
pub(super) type AppAnswer = (u64, Result<AppGrant, AppReject>);

/// How long an app login may wait for the account store; its client has
/// given up by then (`specs/draarl-apps.md` §2.8: 10 s).
const APP_LOGIN_DEADLINE: Duration = Duration::from_secs(10);

/// Receive buffer size; larger datagrams are cut and then fail the 800-byte rule.
const RECV_BUF: usize = 1460;
/// How long a thread blocks before checking timers and the stop flag.
pub(super) const READ_TICK: Duration = Duration::from_millis(20);
/// How often the threads publish their counters.
const STATS_EVERY: Duration = Duration::from_millis(10);
/// Datagrams a shard handles per loop turn at most.
const BATCH: usize = 32;
/// How often the reader forgets idle rate-limit buckets.
const SWEEP_EVERY: Duration = Duration::from_secs(5);

/// One datagram (or WebSocket packet) on its way to a shard.
pub(super) struct Datagram {
    at: Instant,
    src: SocketAddr,
    bytes: Vec<u8>,
    /// The WebSocket connection it came from; `src` is then unused.
    conn: Option<ConnectionId>,
}

impl Datagram {
    /// A Type 4/5 packet from WebSocket connection `conn`, received at `at`.
    pub(super) fn from_connection(at: Instant, conn: ConnectionId, bytes: Vec<u8>) -> Self {
        Self {
            at,
            src: SocketAddr::from(([0, 0, 0, 0], 0)),
            bytes,
            conn: Some(conn),
        }
    }
}

fn handle(core: &mut Reflector, d: &Datagram) {
    match d.conn {
        Some(conn) => core.handle_connection_packet(d.at, conn, &d.bytes),
        None => core.handle_datagram(d.at, d.src, &d.bytes),
    }
}

/// The reader's side of the shard queues, and its counters.
pub(super) struct Reader {
    pub sock: UdpSocket,
    pub ingress: Ingress,
    pub shards: Vec<SyncSender<Datagram>>,
    pub stop: Arc<AtomicBool>,
    pub published: Arc<Mutex<IngressStats>>,
    /// The socket's ICMP errors, reported to every shard.
    pub icmp: IcmpWatch,
    /// A centre's Type 0 hook (draarl-interconnect §4.3), with
    /// `[interconnect]`: datagrams it consumes skip device ingress.
    pub relay: Option<Arc<CentreRelay>>,
}

pub(super) fn reader_loop(mut r: Reader) {
    let mut buf = [0u8; RECV_BUF];
    let mut last_publish = Instant::now();
    let mut next_sweep = last_publish + SWEEP_EVERY;
    while !r.stop.load(Relaxed) {
        let mut icmp_due = false;
        match r.sock.recv_from(&mut buf) {
            Ok((n, src)) => {
                let at = Instant::now();
                let datagram = &buf[..n];
                let consumed = r
                    .relay
                    .as_ref()
                    .is_some_and(|relay| relay.handle_datagram(at, src, datagram));
                if let Some(q) = (!consumed)
                    .then(|| r.ingress.admit(at, src, datagram))
                    .flatten()
                    .and_then(|i| r.shards.get(i))
                {
                    let d = Datagram {
                        at,
                        src,
                        bytes: datagram.to_vec(),
                        conn: None,
                    };
                    if let Err(TrySendError::Full(_)) = q.try_send(d) {
                        r.ingress.count_queue_full();
                    }
                }
            }
            Err(e)
                if matches!(
                    e.kind(),
                    std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut
                ) => {}
            // An ICMP error queued for an earlier send.
            Err(e) if is_deferred_error(&e) => icmp_due = true,
            Err(e) => tracing::debug!(error = %e, "recv_from"),
        }
        let now = Instant::now();
        r.icmp.poll(&r.sock, now, icmp_due);
        if now >= next_sweep {
            next_sweep = now + SWEEP_EVERY;
            r.ingress.sweep(now);
        }
        if now.saturating_duration_since(last_publish) >= STATS_EVERY {
            last_publish = now;
            *r.published.lock().unwrap_or_else(PoisonError::into_inner) = r.ingress.stats().clone();
        }
    }
}

/// What a shard thread talks to.
pub(super) struct ShardIo {
    pub queue: Receiver<Datagram>,
    /// For replies (a clone of the listening socket).
    pub sock: UdpSocket,
    pub engine: Arc<FanoutEngine>,
    /// Where every shard's password checks run.
    pub verifier: Arc<PasswordVerifier>,
    /// Where the pool answers this shard's checks.
    pub answer_to: SyncSender<Answer>,
    /// This shard's answers.
    pub answers: Receiver<Answer>,
    pub events: tmpsc::Sender<Persist>,
    pub events_dropped: Arc<AtomicU64>,
    pub dirs: Receiver<Directory>,
    /// Unreachable endpoints reported by the reader.
    pub unreachable: Receiver<Report>,
    pub stop: Arc<AtomicBool>,
    pub published: Arc<Mutex<Published>>,
    /// Where talk spurts go (the dashboard's "last heard").
    pub dashboard: Dashboard,
    /// App logins (Type 1) go here; without one, every token is invalid.
    pub app_authority: Option<Arc<dyn AppAuthority>>,
    /// Where app-login tasks run.
    pub tokio: tokio::runtime::Handle,
    /// Where those tasks answer this shard.
    pub app_answer_to: SyncSender<AppAnswer>,
    /// This shard's app-login answers.
    pub app_answers: Receiver<AppAnswer>,
    /// Account-store tasks this shard keeps running at most (the core's
    /// `app_logins_in_flight`); a new one aborts the oldest beyond it.
    pub app_logins_in_flight: usize,
    /// A centre's relay of centre-direct frames to its edges
    /// (draarl-interconnect §5.2), with `[interconnect]`.
    pub relay: Option<Arc<CentreRelay>>,
    /// A centre's centre-direct sessions to end because their device
    /// logged in through an edge (`centre_direct_sessions.rs`).
    pub evictions: Option<Receiver<DeviceKey>>,
}

/// The account-store tasks of one shard's app logins, at most
/// [`ShardIo::app_logins_in_flight`]: the core abandons its oldest login
/// for a new one when full, and this aborts the oldest task the same way,
/// so a flood of logins cannot pile up tasks (each holding its token)
/// while a slow store keeps them waiting up to [`APP_LOGIN_DEADLINE`].
struct AppTasks {
    running: VecDeque<AbortHandle>,
    max: usize,
}

impl AppTasks {
    fn new(max: usize) -> Self {
        Self {
            running: VecDeque::new(),
            max: max.max(1),
        }
    }

    fn push(&mut self, task: AbortHandle) {
        if self.running.len() >= self.max {
            self.running.retain(|t| !t.is_finished());
        }
        if self.running.len() >= self.max {
            if let Some(oldest) = self.running.pop_front() {
                oldest.abort();
            }
        }
        self.running.push_back(task);
    }
}

/// Hands an app login to the account store on a tokio task, which answers
/// on the shard's queue (within [`APP_LOGIN_DEADLINE`], else as an invalid
/// token), and returns the task; without an authority, answers at once
/// that the token is invalid.
fn authorize(io: &ShardIo, check: AppLoginCheck) -> Option<AbortHandle> {
    let Some(authority) = io.app_authority.as_ref() else {
        let _ = io
            .app_answer_to
            .try_send((check.id, Err(AppReject::InvalidToken)));
        return None;
    };
    let verdict = authority.authorize(check.request);
    let answer_to = io.app_answer_to.clone();
    let task = io.tokio.spawn(async move {
        let verdict = tokio::time::timeout(APP_LOGIN_DEADLINE, verdict)
            .await
            .unwrap_or(Err(AppReject::InvalidToken));
        // A full queue: the core abandons the login after its own timeout.
        let _ = answer_to.try_send((check.id, verdict));
    });
    Some(task.abort_handle())
}

pub(super) fn shard_loop(mut core: Reflector, io: &ShardIo) {
    let mut last_publish = Instant::now();
    let mut app_tasks = AppTasks::new(io.app_logins_in_flight);
    core.set_wall_clock(last_publish, unix_ms());
    while !io.stop.load(Relaxed) {
        match io.queue.recv_timeout(READ_TICK) {
            Ok(d) => handle(&mut core, &d),
            Err(RecvTimeoutError::Timeout) => {}
            Err(RecvTimeoutError::Disconnected) => break,
        }
        // Under load, handle what is already queued before the per-turn
        // work below (timers, reloads, password-check answers, stats),
        // instead of repeating it for every datagram; bounded so replies and
        // frames still go out every BATCH datagrams.
        for d in io.queue.try_iter().take(BATCH - 1) {
            handle(&mut core, &d);
        }
        let now = Instant::now();
        if now >= core.poll_timeout() {
            core.set_wall_clock(now, unix_ms());
            core.handle_timeout(now);
        }
        if let Ok(d) = io.dirs.try_recv() {
            core.replace_directory(d);
        }
        while let Ok((id, ok)) = io.answers.try_recv() {
            core.handle_password_check(now, id, ok);
        }
        while let Ok((at, addr)) = io.unreachable.try_recv() {
            core.handle_unreachable(at, addr);
        }
        if let Some(evictions) = &io.evictions {
            while let Ok(key) = evictions.try_recv() {
                core.end_migrated_session(key);
            }
        }
        while let Some(key) = core.poll_new_session() {
            if let Some(relay) = &io.relay {
                relay.direct_login(key);
            }
        }
        while let Ok((id, verdict)) = io.app_answers.try_recv() {
            core.handle_app_login(now, id, verdict);
        }
        while let Some(check) = core.poll_app_login() {
            if let Some(task) = authorize(io, check) {
                app_tasks.push(task);
            }
        }
        while let Some(check) = core.poll_password_check() {
            // The core has at most as many checks out as the pool has
            // threads, so the queue is full only while checks it abandoned
            // (after 10 s) still hold slots; this one is then abandoned the
            // same way, and the pool counts it.
            if let Err(check) = io.verifier.try_submit_to(check, &io.answer_to) {
                tracing::debug!(id = check.id(), "password check queue full");
            }
        }
        while let Some(t) = core.poll_transmit() {
            // A failure may be an earlier datagram's ICMP error: try once more.
            let sent = match io.sock.send_to(&t.payload, t.dst) {
                Err(e) if is_deferred_error(&e) => io.sock.send_to(&t.payload, t.dst),
                r => r,
            };
            if let Err(e) = sent {
                tracing::debug!(error = %e, dst = %t.dst, "reply send failed");
            }
        }
        while let Some(f) = core.poll_frame() {
            if let Some(relay) = &io.relay {
                relay.from_centre(core.directory(), &f, now);
            }
            io.engine.submit(f);
        }
        while let Some(p) = core
            .poll_event()
            .map(Persist::Event)
            .or_else(|| core.poll_recording().map(Persist::Recording))
        {
            if io.events.try_send(p).is_err() {
                io.events_dropped.fetch_add(1, Relaxed);
            }
        }
        let spurts: Vec<_> = std::iter::from_fn(|| core.poll_talk_spurt()).collect();
        io.dashboard.record_spurts(&spurts, core.directory());
        if now.saturating_duration_since(last_publish) >= STATS_EVERY {
            last_publish = now;
            let mut p = io.published.lock().unwrap_or_else(PoisonError::into_inner);
            p.session = core.stats().clone();
            if let Some(r) = core.recorder_stats() {
                p.recording = r.clone();
            }
        }
    }
}
