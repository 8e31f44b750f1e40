//! One connection's state behind a lock, the ready set through which it asks its I/O
//! driver to send, and the task that sleeps until its deadline.
//!
//! Four parties touch a connection: the I/O drivers (datagrams in and out), the
//! connection's timer task (deadlines), and the application (`send`/`recv`/`close`).
//! Each locks [`ConnShared::state`] briefly and feeds the sans-IO session. None of
//! them writes to the socket: whoever may have given the session something to send
//! marks the connection *dirty* ([`ConnShared::mark_dirty`]), which puts it in its
//! home shard's [`ReadySet`] — once, however often it is marked — and wakes that
//! shard's driver, which polls every dirty session's transmits into one batch per
//! wake-up (see the `driver` module for the whole pipeline). Everyone else is woken
//! through [`tokio::sync::Notify`]. An idle connection's timer task sleeps with no
//! deadline and it is in no ready set, so idle connections cost no wake-ups at all.

use std::collections::VecDeque;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Instant;

use petrel_proto::handshake::{ControlEvent, Established};
use petrel_proto::session::{Session, SessionError};

use crate::error::ConnectionError;
use crate::io::EndpointIo;
use crate::stats::{ConnectionStats, EndpointCounters};

/// The connections of one shard that have something to send, in the order they asked.
///
/// Bounded by the connections of the shard (at most `EndpointConfig::max_connections`):
/// a connection is in it at most once, guarded by its [`ConnShared::dirty`] flag.
/// Closed when the endpoint shuts down (it then holds and takes nothing, so no
/// connection stays referenced from a set nobody drains).
#[derive(Debug)]
pub(crate) struct ReadySet {
    /// `None` once closed.
    queue: Mutex<Option<VecDeque<Arc<ConnShared>>>>,
}

impl Default for ReadySet {
    fn default() -> Self {
        Self {
            queue: Mutex::new(Some(VecDeque::new())),
        }
    }
}

impl ReadySet {
    fn queue(&self) -> MutexGuard<'_, Option<VecDeque<Arc<ConnShared>>>> {
        self.queue.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Moves every ready connection to `into` (oldest first), leaving the set empty.
    pub(crate) fn take(&self, into: &mut VecDeque<Arc<ConnShared>>) {
        if let Some(queue) = self.queue().as_mut() {
            into.append(queue);
        }
    }

    /// Whether no connection waits.
    pub(crate) fn is_empty(&self) -> bool {
        self.queue().as_ref().is_none_or(VecDeque::is_empty)
    }

    /// Empties the set for good: later connections are not kept.
    pub(crate) fn close(&self) {
        self.queue().take();
    }

    fn push(&self, conn: Arc<ConnShared>) {
        if let Some(queue) = self.queue().as_mut() {
            queue.push_back(conn);
        }
    }
}

/// State shared by a connection's handles, its timer task and the endpoint's drivers.
#[derive(Debug)]
pub(crate) struct ConnShared {
    pub(crate) peer: SocketAddr,
    pub(crate) conv: u32,
    /// What the handshake settled on; repeated opening datagrams are answered from it.
    pub(crate) established: Established,
    pub(crate) state: Mutex<ConnState>,
    /// Woken when a message may be readable or the connection ended.
    pub(crate) readable: tokio::sync::Notify,
    /// Woken when send-queue space may have freed or the connection ended.
    pub(crate) writable: tokio::sync::Notify,
    /// Writers between registering on `writable` and being woken (see
    /// [`ConnShared::writer_waits`]); while none are, a freed queue wakes no one.
    writers_waiting: AtomicUsize,
    /// Woken when the connection's earliest deadline moved earlier or it ended.
    pub(crate) timer: tokio::sync::Notify,
    pub(crate) io: Arc<EndpointIo>,
    /// The shard whose driver sends this connection's datagrams (always the same
    /// one, so they leave in the order the session produced them).
    pub(crate) home: usize,
    ready: Arc<ReadySet>,
    /// Set while the connection is in `ready` (cleared by the driver as it polls).
    dirty: AtomicBool,
}

#[derive(Debug)]
pub(crate) struct ConnState {
    /// KCP over optional FEC, keepalive, idle timeout and graceful close.
    pub(crate) session: Session,
    /// The deadline the timer task is sleeping towards.
    armed: Option<Instant>,
    /// Set once the connection is over; `Closed` for a clean end.
    pub(crate) end: Option<ConnectionError>,
    pub(crate) stats: ConnectionStats,
}

impl ConnState {
    fn new(session: Session) -> Self {
        Self {
            session,
            armed: None,
            end: None,
            stats: ConnectionStats::default(),
        }
    }

    fn deadline(&self) -> Option<Instant> {
        if self.end.is_some() {
            return None;
        }
        self.session.poll_timeout()
    }

    /// Records the end of the connection once the session finished.
    fn sync_end(&mut self) {
        if self.end.is_some() {
            return;
        }
        self.end = match self.session.error() {
            Some(SessionError::DeadLink(_)) => Some(ConnectionError::DeadLink),
            Some(SessionError::IdleTimeout(_)) => Some(ConnectionError::IdleTimeout),
            Some(SessionError::FecShapeMismatch(m)) => Some(ConnectionError::FecShapeMismatch(m)),
            None if self.session.is_closed() => Some(ConnectionError::Closed),
            None => None,
        };
    }

    /// After the session changed: records its end and says whether the timer task
    /// must look again (the connection ended, or its deadline moved earlier).
    fn settle(&mut self) -> Settled {
        self.sync_end();
        let rearm = match (self.deadline(), self.armed) {
            (Some(new), Some(armed)) => new < armed,
            (Some(_), None) => true,
            (None, _) => false,
        };
        Settled {
            ended: self.end.is_some(),
            rearm,
            readable: self.session.has_message() || self.session.peer_closing(),
            writable: self.session.send_queue_low(),
        }
    }

    /// A snapshot of every layer's counters and the runtime's own.
    pub(crate) fn snapshot(&self) -> ConnectionStats {
        let session = self.session.stats();
        ConnectionStats {
            kcp: session.kcp,
            fec: session.fec,
            ..self.stats
        }
    }
}

/// A writer counted in [`ConnShared::writers_waiting`] until dropped.
pub(crate) struct WriterWaiting<'a>(&'a ConnShared);

impl Drop for WriterWaiting<'_> {
    fn drop(&mut self) {
        self.0.writers_waiting.fetch_sub(1, Ordering::SeqCst);
    }
}

/// What [`ConnState::settle`] found.
struct Settled {
    ended: bool,
    rearm: bool,
    /// A reader would get something: a message, or the end of the peer's stream.
    readable: bool,
    /// The send queue has room at the writers' wake level (`Session::send_queue_low`).
    writable: bool,
}

impl ConnShared {
    pub(crate) fn new(
        peer: SocketAddr,
        established: Established,
        session: Session,
        io: Arc<EndpointIo>,
        home: usize,
        ready: Arc<ReadySet>,
    ) -> Self {
        Self {
            peer,
            conv: established.conv,
            established,
            state: Mutex::new(ConnState::new(session)),
            readable: tokio::sync::Notify::new(),
            writable: tokio::sync::Notify::new(),
            writers_waiting: AtomicUsize::new(0),
            timer: tokio::sync::Notify::new(),
            io,
            home,
            ready,
            dirty: AtomicBool::new(false),
        }
    }

    pub(crate) fn lock(&self) -> MutexGuard<'_, ConnState> {
        // A panic while holding the lock would be a bug in Petrel; the state is still the
        // best information there is, so keep serving it rather than poisoning every caller.
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Asks the home shard's driver to poll this connection's transmits on its next
    /// round: enters the ready set unless already in it, and wakes the driver.
    pub(crate) fn mark_dirty(self: &Arc<Self>) {
        if self.dirty.swap(true, Ordering::AcqRel) {
            return;
        }
        self.ready.push(self.clone());
        if let Some(shard) = self.io.shards.get(self.home) {
            shard.wake_driver();
        }
    }

    /// Runs `f` on the state, marks the connection dirty (whatever `f` queued is sent
    /// by the driver) and wakes the timer task if its deadline moved earlier.
    /// Application waiters are woken when the connection ended, or, when `wake_app`
    /// says `f` came from the network or a timer, those that would now make progress.
    pub(crate) fn with_state<R>(
        self: &Arc<Self>,
        wake_app: bool,
        f: impl FnOnce(&mut ConnState) -> R,
    ) -> R {
        let mut st = self.lock();
        let result = f(&mut st);
        let settled = st.settle();
        drop(st);
        self.mark_dirty();
        self.wake(&settled, wake_app);
        result
    }

    /// Wakes whoever the change `settled` describes concerns. Readers wake only for
    /// a complete message (not for every datagram of one); writers only while one
    /// waits and the send queue has room at their wake level (`WRITE_WAKE_ROOM`
    /// segments, or half the limit, and at most half of `notsent_lowat` bytes
    /// queued), which appears when the driver moves
    /// queued segments into the window, so `poll_transmits` wakes them too. Both
    /// tests are levels, not edges: a waiter that registered before the state
    /// changed is woken by the first call that finds the level, so none is lost.
    fn wake(&self, settled: &Settled, wake_app: bool) {
        if settled.ended || settled.rearm {
            self.timer.notify_one();
        }
        if settled.ended || (wake_app && settled.readable) {
            self.readable.notify_waiters();
        }
        // SeqCst on both sides: a writer counts itself before it checks the queue
        // under the lock, so either it sees this change or this load sees it.
        let writers = self.writers_waiting.load(Ordering::SeqCst) > 0;
        if settled.ended || (wake_app && settled.writable && writers) {
            self.writable.notify_waiters();
        }
    }

    /// Counts a writer as waiting for queue room for as long as the returned guard
    /// lives; take it before checking the queue, drop it once woken.
    pub(crate) fn writer_waits(&self) -> WriterWaiting<'_> {
        self.writers_waiting.fetch_add(1, Ordering::SeqCst);
        WriterWaiting(self)
    }

    /// The driver's side: polls up to `slots.len()` datagrams from the session into
    /// `slots` (each cleared and filled by the session's encoder: the one write of
    /// the datagram's bytes before the kernel reads them) and returns how many. Fewer
    /// than `slots.len()` means the session has nothing more to send now.
    pub(crate) fn poll_transmits(&self, now: Instant, slots: &mut [Vec<u8>]) -> usize {
        // Cleared before polling: a mark that lands while we poll queues the
        // connection again, so nothing it asks to send is left behind.
        self.dirty.store(false, Ordering::Release);
        let mut st = self.lock();
        let mut n = 0;
        while n < slots.len() && st.session.poll_transmit(now, &mut slots[n]) {
            n += 1;
        }
        let settled = st.settle();
        drop(st);
        // Polling moved queued segments into the window: writers may have room
        // (readers were woken by the input that completed their message).
        let settled = Settled {
            readable: false,
            ..settled
        };
        self.wake(&settled, true);
        n
    }

    /// The control datagrams (CLOSE-ACK, CLOSE, FIN, keepalive) the session has
    /// queued, taken for the last send when the endpoint is dropped.
    pub(crate) fn take_control_transmits(&self, now: Instant) -> Vec<Vec<u8>> {
        let mut st = self.lock();
        let mut datagrams = Vec::new();
        let mut out = Vec::new();
        while st.session.poll_control_transmit(now, &mut out) {
            datagrams.push(std::mem::take(&mut out));
        }
        datagrams
    }

    /// The driver's side: a datagram of this connection the socket refused with an
    /// error other than a full buffer.
    pub(crate) fn count_send_error(&self) {
        self.lock().stats.send_errors += 1;
    }

    /// A KCP datagram from the peer, read in place from the driver's receive buffer.
    ///
    /// The acks it calls for are sent by the driver after it gave the woken
    /// application tasks one turn, so a reply they queue carries the acks in the
    /// same datagram (see the `driver` module).
    pub(crate) fn on_data(self: &Arc<Self>, now: Instant, datagram: &[u8]) {
        self.on_data_run(now, &[datagram]);
    }

    /// KCP datagrams from the peer, in arrival order, under one lock: the
    /// connection is marked dirty and its application tasks woken once for all.
    pub(crate) fn on_data_run(self: &Arc<Self>, now: Instant, datagrams: &[&[u8]]) {
        self.with_state(true, |st| {
            for datagram in datagrams {
                if st.session.input(now, datagram).is_err() {
                    st.stats.input_errors += 1;
                }
            }
        });
    }

    /// A control datagram (keepalive, close, FIN) addressed to this connection.
    pub(crate) fn on_control(self: &Arc<Self>, now: Instant, datagram: &[u8]) {
        self.with_state(true, |st| {
            if let ControlEvent::Ignored(_) = st.session.handle_control(now, datagram) {
                st.stats.input_errors += 1;
            }
        });
    }

    fn on_timeout(self: &Arc<Self>, now: Instant) {
        self.with_state(true, |st| st.session.handle_timeout(now));
    }

    /// Asks for a graceful close: flush what is queued, then close the control plane.
    pub(crate) fn request_close(self: &Arc<Self>, now: Instant) {
        self.with_state(false, |st| st.session.close(now));
        // Writers waiting for queue room on other clones now fail with `Closed`; the
        // queue may never get room (a peer that does not read), so wake them here.
        self.writable.notify_waiters();
    }

    /// Ends the connection at once (endpoint shut down).
    pub(crate) fn abort(&self, reason: ConnectionError) {
        let mut st = self.lock();
        if st.end.is_none() {
            st.end = Some(reason);
        }
        drop(st);
        self.timer.notify_one();
        self.readable.notify_waiters();
        self.writable.notify_waiters();
    }
}

/// The connection's timer task: sleeps until the earliest deadline of its state machines,
/// runs their timers, and exits once the connection ended (the router, which spawned it,
/// then unregisters the connection).
pub(crate) async fn run_timer(shared: Arc<ConnShared>) {
    loop {
        let notified = shared.timer.notified();
        tokio::pin!(notified);
        notified.as_mut().enable();
        let deadline = {
            let mut st = shared.lock();
            if st.end.is_some() {
                break;
            }
            let deadline = st.deadline();
            st.armed = deadline;
            deadline
        };
        match deadline {
            Some(at) => {
                tokio::select! {
                    () = tokio::time::sleep_until(at.into()) => {
                        EndpointCounters::add(&shared.io.counters.timer_wakeups, 1);
                        shared.on_timeout(Instant::now());
                    }
                    () = &mut notified => {}
                }
            }
            None => notified.await,
        }
    }
}
