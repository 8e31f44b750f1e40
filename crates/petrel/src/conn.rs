//! One connection's state behind a lock, and the task that sleeps until its deadline.
//!
//! Three parties touch a connection: the endpoint's reader task (datagrams in), the
//! connection's timer task (deadlines), and the application (`send`/`recv`/`close`).
//! Each locks [`ConnShared::state`] briefly, feeds the sans-IO machines, writes any
//! datagrams they produce straight to the socket, and wakes the others through
//! [`tokio::sync::Notify`]. An idle connection's timer task sleeps with no deadline, so
//! idle connections cost no wake-ups at all.

use std::net::SocketAddr;
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Instant;

use petrel_proto::handshake::{ControlEvent, Established};
use petrel_proto::session::{Session, SessionError};

use crate::error::ConnectionError;
use crate::io::EndpointIo;
use crate::stats::{ConnectionStats, EndpointCounters};

/// State shared by a connection's handles, its timer task and the endpoint reader.
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
    /// Woken when the connection's earliest deadline moved earlier or it ended.
    pub(crate) timer: tokio::sync::Notify,
    pub(crate) io: Arc<EndpointIo>,
}

#[derive(Debug)]
pub(crate) struct ConnState {
    /// KCP over optional FEC, keepalive, idle timeout and graceful close.
    pub(crate) session: Session,
    out: Vec<u8>,
    /// The deadline the timer task is sleeping towards.
    armed: Option<Instant>,
    /// Input arrived whose acks have not been flushed yet (see [`ConnShared::on_data`]).
    flush_pending: bool,
    /// Set once the connection is over; `Closed` for a clean end.
    pub(crate) end: Option<ConnectionError>,
    pub(crate) stats: ConnectionStats,
}

impl ConnState {
    fn new(session: Session) -> Self {
        Self {
            session,
            out: Vec::with_capacity(2048),
            armed: None,
            flush_pending: false,
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

    /// Writes every datagram the machines have ready; a full socket buffer drops the
    /// datagram (counted) and the ARQ retransmits it like any other loss.
    fn flush(&mut self, now: Instant, io: &EndpointIo, peer: SocketAddr) {
        self.flush_pending = false;
        while self.session.poll_transmit(now, &mut self.out) {
            io.send_datagram(&self.out, peer, &mut self.stats);
        }
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

impl ConnShared {
    pub(crate) fn new(
        peer: SocketAddr,
        established: Established,
        session: Session,
        io: Arc<EndpointIo>,
    ) -> Self {
        Self {
            peer,
            conv: established.conv,
            established,
            state: Mutex::new(ConnState::new(session)),
            readable: tokio::sync::Notify::new(),
            writable: tokio::sync::Notify::new(),
            timer: tokio::sync::Notify::new(),
            io,
        }
    }

    pub(crate) fn lock(&self) -> MutexGuard<'_, ConnState> {
        // A panic while holding the lock would be a bug in Petrel; the state is still the
        // best information there is, so keep serving it rather than poisoning every caller.
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Runs `f` on the state, flushes what it produced and wakes the timer task if its
    /// deadline moved earlier. Application waiters are woken when the connection ended or
    /// when `wake_app` says `f` may have made a message readable or freed queue space.
    pub(crate) fn with_state<R>(
        &self,
        now: Instant,
        wake_app: bool,
        f: impl FnOnce(&mut ConnState) -> R,
    ) -> R {
        self.with_state_flushing(now, wake_app, true, f)
    }

    /// Like [`ConnShared::with_state`] for `recv`, which sends nothing of its own:
    /// while acks of an input are pending it leaves the flush to whoever comes
    /// next — the application's reply, which then carries the acks in the same
    /// datagram, or else the timer task, already woken by [`ConnShared::on_data`].
    pub(crate) fn with_state_for_recv<R>(
        &self,
        now: Instant,
        f: impl FnOnce(&mut ConnState) -> R,
    ) -> R {
        self.with_state_flushing(now, false, false, f)
    }

    fn with_state_flushing<R>(
        &self,
        now: Instant,
        wake_app: bool,
        flush_acks: bool,
        f: impl FnOnce(&mut ConnState) -> R,
    ) -> R {
        let mut st = self.lock();
        let result = f(&mut st);
        if flush_acks || !st.flush_pending {
            st.flush(now, &self.io, self.peer);
        }
        st.sync_end();
        let ended = st.end.is_some();
        let rearm = match (st.deadline(), st.armed) {
            (Some(new), Some(armed)) => new < armed,
            (Some(_), None) => true,
            (None, _) => false,
        };
        drop(st);
        if ended || rearm {
            self.timer.notify_one();
        }
        if ended || wake_app {
            self.readable.notify_waiters();
            self.writable.notify_waiters();
        }
        result
    }

    /// A KCP datagram from the peer.
    ///
    /// The acks it calls for are not flushed here: the application tasks woken first
    /// usually answer right away, and their reply carries the acks in the same datagram
    /// (`recv` does not flush them either). The timer task, woken last, gives those
    /// tasks one more turn and then flushes whatever is still pending.
    pub(crate) fn on_data(&self, now: Instant, datagram: &[u8]) {
        let mut st = self.lock();
        if st.session.input(now, datagram).is_err() {
            st.stats.input_errors += 1;
        }
        st.flush_pending = true;
        drop(st);
        self.readable.notify_waiters();
        self.writable.notify_waiters();
        self.timer.notify_one();
    }

    /// A control datagram (keepalive, close, FIN) addressed to this connection.
    pub(crate) fn on_control(&self, now: Instant, datagram: &[u8]) {
        self.with_state(now, true, |st| {
            if let ControlEvent::Ignored(_) = st.session.handle_control(now, datagram) {
                st.stats.input_errors += 1;
            }
        });
    }

    fn on_timeout(&self, now: Instant) {
        self.with_state(now, true, |st| st.session.handle_timeout(now));
    }

    /// Asks for a graceful close: flush what is queued, then close the control plane.
    pub(crate) fn request_close(&self, now: Instant) {
        self.with_state(now, false, |st| st.session.close(now));
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
        if shared.lock().flush_pending {
            // A task woken by the same input (e.g. a client's sender, released by its
            // receiver) may still be about to send: let it, so the acks ride along.
            tokio::task::yield_now().await;
            if shared.lock().flush_pending {
                shared.with_state(Instant::now(), false, |_| {});
            }
        }
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
