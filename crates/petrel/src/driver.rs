//! The I/O driver: one task per socket shard that does every read and write of that
//! socket, many datagrams per system call.
//!
//! ```text
//!            kernel socket (one per shard; SO_REUSEPORT group when io_threads > 1)
//!                 │ recvmmsg (+GRO)                          ▲ sendmmsg / GSO sendmsg
//!                 ▼                                          │
//!  ┌─ driver, one round per wake-up ─────────────────────────┴──────────────────┐
//!  │ 1. receive: up to RECV_ROUNDS × RECV_BATCH reads into the RecvBatch;       │
//!  │    each datagram (GRO trains split) is routed in place, a train's run of   │
//!  │    one connection's data in one call (Router::dispatch_read):              │
//!  │    ConnShared::on_data_run ─► Session::input(&slot[..]) for each           │
//!  │    └─ the connection is marked dirty, its application tasks are woken      │
//!  │ 2. if anything was read: yield once, so the woken application tasks run    │
//!  │    and queue their replies (Connection::send marks the connection dirty    │
//!  │    too) — the acks then ride in the reply's datagram                       │
//!  │ 3. flush: take the shard's ReadySet (every dirty connection, each once)    │
//!  │    and the unattached (handshake) queue; every session encodes its         │
//!  │    datagrams straight into the batch's slots (Session::poll_transmit)      │
//!  │ 4. send the batch: runs of ≥ GSO_MIN_RUN same-size datagrams to one peer   │
//!  │    as one GSO sendmsg, the rest in one sendmmsg; EAGAIN / ENOBUFS: wait    │
//!  │    for writability (send_waits) and resend from where the kernel stopped   │
//!  │ 5. the socket is empty (a read fell short of its batch or would block):    │
//!  │    if the last two idle waits (more after polls that found nothing) each   │
//!  │    ended within half of busy_poll and were followed by a connection's      │
//!  │    datagrams, poll (yield, look at the socket and the queues) for up to    │
//!  │    busy_poll: found work goes back to step 1; else                         │
//!  │    clear `awake`, look at the queues once more, and                        │
//!  │    sleep until the socket is readable or ShardIo::wake_driver is called    │
//!  │    (marks made while the driver is awake wake nothing: step 5 sees them)   │
//!  └────────────────────────────────────────────────────────────────────────────┘
//!      ▲ mark_dirty (+ wake)              ▲ mark_dirty               ▲ send_unattached
//!  Connection::send / recv / close    timer task (deadline)     handshakes (copied once)
//! ```
//!
//! Why this shape: the application, the timer tasks and the router never touch the
//! socket, so a connection's datagrams leave in the order its session produced them
//! (only its home shard's driver polls it) and every wake-up of the driver turns
//! into as few system calls as there are peers in the batch, or fewer. A datagram is
//! written once, by the session's encoder into a slot, and read once, by the session
//! from the receive slot; only handshake datagrams, produced on other tasks, are
//! copied into the shard's queue. A full socket buffer makes the driver wait, so
//! nothing is dropped between the session and the kernel; while it waits it does not
//! read, which is the backpressure the sending sessions feel through their windows.
//! Idle connections are in no ready set and the socket has nothing to read, so an
//! idle endpoint's drivers sleep without wake-ups. Busy polling (step 5) is for
//! dense traffic of established connections, where the next datagram arrives
//! sooner than a sleep and its wake-up would cost: an idle endpoint never polls,
//! sparse traffic rarely (a reply and its ack can make two short waits once in a
//! while: one futile poll), and datagrams that reach no connection never start it.

use std::collections::VecDeque;
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::{Duration, Instant};

use petrel_sys::batch::is_device_queue_full;
use petrel_sys::{RecvBatch, SendBatch};
use tokio::io::Interest;

use crate::connection_state::ConnShared;
use crate::router::{Arrival, Router};
use crate::stats::EndpointCounters;

/// Reads per `recvmmsg` once traffic fills smaller batches. Every read slot holds
/// 64 KiB (a GRO train), so a driver starts with [`SMALL_RECV_BATCH`] slots — an
/// endpoint that only ever sees a few datagrams costs what two receive buffers
/// cost — and grows to this many once [`RECV_ROUNDS`] small reads in a row were
/// full.
const RECV_BATCH: usize = 32;
/// Reads per `recvmmsg` until traffic fills them: two, so that one datagram read
/// is a short batch, which says the socket is empty (`RecvBatch::drained`) and
/// saves the read that would return `WouldBlock`.
const SMALL_RECV_BATCH: usize = 2;
/// `recvmmsg` calls per round before the driver flushes what they called for.
const RECV_ROUNDS: usize = 8;
/// Datagrams per send batch: the most one GSO `sendmsg` carries.
const SEND_BATCH: usize = petrel_sys::batch::MAX_GSO_SEGMENTS;
/// Shortest run of same-size datagrams to one peer sent by GSO; shorter runs join
/// the batch's `sendmmsg`, which costs one system call for all of them.
const GSO_MIN_RUN: usize = 4;
/// The count of short idle waits in a row after one that lasted `waited`, with
/// `sent` whether the rounds after it sent any connection's datagrams. A wait is
/// short if it ended within half of `busy_poll` (the half leaves a busy poll room
/// to find what the run promises, and keeps a driver whose gaps are near the
/// limit from polling through all of them) and was followed by datagrams of a
/// connection: a round that sends nothing (junk, refused handshakes, a wake-up
/// with nothing to do) ends the run, so only traffic of connections makes a
/// driver poll.
fn next_short_waits(run: u32, waited: Duration, sent: bool, busy_poll: Duration) -> u32 {
    if sent && waited < busy_poll / 2 {
        run.saturating_add(1)
    } else {
        0
    }
}

/// Short idle waits in a row a driver needs before it busy-polls, after `futile`
/// busy polls in a row that found nothing: 2, doubled by each futile one up to
/// 16. Bulk traffic's polls mostly find work, so it polls after every second
/// short wait; a peer that sends datagrams close together and then pauses, to
/// make every poll spin its whole limit for nothing, soon gets one futile poll
/// per 16 datagrams: about 3 µs of polling per datagram at the default limit,
/// less than reading and answering one costs, so it cannot make a datagram
/// cost much more than it did without busy polling.
fn short_waits_to_poll(futile: u32) -> u32 {
    2 << futile.min(3)
}

/// How long a driver waits before retrying after `ENOBUFS` (a full device queue,
/// which no socket readiness reports).
const ENOBUFS_BACKOFF: Duration = Duration::from_millis(1);

/// Keeps the endpoint's drivers alive while any handle exists; dropping the last one
/// stops them and ends every connection.
#[derive(Debug)]
pub(crate) struct EndpointGuard {
    pub(crate) router: Arc<Router>,
    drivers: Vec<tokio::task::JoinHandle<()>>,
}

impl EndpointGuard {
    /// Starts one driver per shard of `router`'s endpoint.
    pub(crate) fn start(router: Arc<Router>) -> Self {
        let drivers = (0..router.io.shards.len())
            .map(|shard| tokio::spawn(Driver::new(router.clone(), shard).run()))
            .collect();
        Self { router, drivers }
    }
}

impl Drop for EndpointGuard {
    fn drop(&mut self) {
        for driver in &self.drivers {
            driver.abort();
        }
        self.router.shutdown();
    }
}

/// One shard's driver: its receive and send buffers and what it is working through.
struct Driver {
    router: Arc<Router>,
    shard: usize,
    recv: RecvBatch,
    /// Reads per call of `recv`: [`SMALL_RECV_BATCH`] until traffic keeps it
    /// full, then [`RECV_BATCH`].
    recv_batch: usize,
    /// Full small reads in a row (reset by a read that emptied the socket).
    full_small_reads: usize,
    send: SendBatch,
    /// The send batch: `filled` datagrams, each encoded into its own slot.
    slots: Vec<Vec<u8>>,
    dests: Vec<SocketAddr>,
    /// The connection each filled slot came from (`None`: a handshake datagram).
    owners: Vec<Option<Arc<ConnShared>>>,
    filled: usize,
    /// Dirty connections taken from the ready set, not yet polled.
    dirty: VecDeque<Arc<ConnShared>>,
    unattached: VecDeque<(SocketAddr, Vec<u8>)>,
    /// The server handshake's reply buffer.
    reply: Vec<u8>,
}

impl Driver {
    fn new(router: Arc<Router>, shard: usize) -> Self {
        let config = &router.io.config;
        let mut send = SendBatch::new(SEND_BATCH);
        send.set_gso(config.gso);
        Self {
            shard,
            recv: RecvBatch::new(SMALL_RECV_BATCH),
            recv_batch: SMALL_RECV_BATCH,
            full_small_reads: 0,
            send,
            // Empty until used: a slot grows to a datagram's size the first time
            // a flush reaches it, so a quiet endpoint (one of 10,000 raw-mode
            // clients) does not hold SEND_BATCH × MTU bytes it never sends.
            slots: (0..SEND_BATCH).map(|_| Vec::new()).collect(),
            dests: Vec::with_capacity(SEND_BATCH),
            owners: Vec::with_capacity(SEND_BATCH),
            filled: 0,
            dirty: VecDeque::new(),
            unattached: VecDeque::new(),
            reply: Vec::with_capacity(2048),
            router,
        }
    }

    fn counters(&self) -> &EndpointCounters {
        &self.router.io.counters
    }

    async fn run(mut self) {
        let router = self.router.clone();
        let shard = &router.io.shards[self.shard];
        let ready = &router.ready[self.shard];
        let busy_poll = router.io.config.busy_poll;
        // Short idle waits in a row (see `next_short_waits`): two say that traffic
        // is dense enough to poll for.
        let mut short_waits = 0u32;
        // The idle wait that ended last (busy-polled or asleep), and whether the
        // rounds since it sent any connection's datagrams.
        let mut last_wait = None;
        let mut sent = false;
        // Busy polls in a row that found nothing (see `short_waits_to_poll`).
        let mut futile = 0u32;
        loop {
            let (received, drained) = self.receive();
            if received > 0 {
                tokio::task::yield_now().await;
            }
            sent |= self.flush().await > 0;
            if received > 0 && !drained {
                // More may be waiting (a full batch leaves the readiness set).
                continue;
            }
            if let Some(waited) = last_wait.take() {
                short_waits = next_short_waits(short_waits, waited, sent, busy_poll);
            }
            sent = false;
            if short_waits >= short_waits_to_poll(futile) {
                match self.busy_poll(busy_poll).await {
                    Some(waited) => {
                        EndpointCounters::add(&self.counters().busy_poll_hits, 1);
                        futile = 0;
                        last_wait = Some(waited);
                        continue;
                    }
                    None => {
                        futile = futile.saturating_add(1);
                        short_waits = 0;
                    }
                }
            }
            // About to sleep: from here on, queuing work wakes us. Work queued
            // before this store is seen by the check below.
            shard.set_awake(false);
            if !ready.is_empty() || shard.has_unattached() {
                shard.set_awake(true);
                continue;
            }
            let asleep = Instant::now();
            tokio::select! {
                ready = shard.socket.readable() => {
                    if ready.is_err() {
                        // The runtime is shutting down.
                        return;
                    }
                }
                () = shard.woken() => {}
            }
            last_wait = Some(asleep.elapsed());
            shard.set_awake(true);
            EndpointCounters::add(&self.counters().driver_wakeups, 1);
        }
    }

    /// Polls for up to `limit` instead of sleeping (`EndpointConfig::busy_poll`):
    /// yields to the runtime, which lets the application tasks run (and, when
    /// this worker holds the I/O driver, polls the reactor without blocking), then
    /// looks for a readable socket or queued work. Returns how long it took to
    /// find some, or `None` if it found none or the runtime is shutting down (the
    /// sleep that follows then sees the error and ends the driver). The driver
    /// stays marked awake meanwhile, so work queued now is found here rather than
    /// by a wake-up.
    async fn busy_poll(&mut self, limit: Duration) -> Option<Duration> {
        EndpointCounters::add(&self.counters().busy_polls, 1);
        let shard = &self.router.io.shards[self.shard];
        let ready = &self.router.ready[self.shard];
        let start = Instant::now();
        loop {
            tokio::task::yield_now().await;
            // Readiness as the reactor last saw it (registering this task's waker,
            // which only wakes it early once it sleeps).
            let readable = std::future::poll_fn(|cx| {
                std::task::Poll::Ready(match shard.socket.poll_recv_ready(cx) {
                    std::task::Poll::Ready(Ok(())) => Some(true),
                    std::task::Poll::Ready(Err(_)) => None,
                    std::task::Poll::Pending => Some(false),
                })
            })
            .await?;
            let waited = start.elapsed();
            if readable || !ready.is_empty() || shard.has_unattached() {
                return Some(waited);
            }
            if waited >= limit {
                return None;
            }
        }
    }

    /// Reads and routes what is waiting, up to [`RECV_ROUNDS`] `recvmmsg` calls.
    /// Returns the datagrams read, and whether the socket was found empty (its
    /// readiness cleared: a short batch or `WouldBlock`).
    fn receive(&mut self) -> (usize, bool) {
        let router = self.router.clone();
        let io = &router.io.shards[self.shard];
        let counters = &router.io.counters;
        let mut total = 0;
        for _ in 0..RECV_ROUNDS {
            let recv = &mut self.recv;
            // A short batch emptied the socket: report it to tokio as `WouldBlock`
            // so that it clears the readiness (an arrival after the read sets it
            // again), and keep what was read. (`try_io` does not call the closure
            // at all while the socket is not known to be readable.) The endpoint's
            // sockets are unconnected and without `IP_RECVERR`, so no socket
            // error cuts a batch short (`RecvBatch::drained`).
            let mut short = 0;
            let reads = match io.socket.try_io(Interest::READABLE, || {
                let n = recv.recv(&io.socket)?;
                if recv.drained() {
                    short = n;
                    return Err(std::io::ErrorKind::WouldBlock.into());
                }
                Ok(n)
            }) {
                Ok(n) => n,
                Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => {
                    self.full_small_reads = 0;
                    if short == 0 {
                        return (total, true);
                    }
                    short
                }
                Err(e) => {
                    // ICMP errors surface here on some platforms; they say nothing
                    // about other peers, so count them and keep serving.
                    EndpointCounters::add(&counters.recv_errors, 1);
                    tracing::debug!(error = %e, "udp recv error");
                    continue;
                }
            };
            EndpointCounters::add(&counters.recv_syscalls, 1);
            let now = Instant::now();
            for read in self.recv.iter() {
                let Some(peer) = read.source else {
                    EndpointCounters::add(&counters.recv_errors, 1);
                    continue;
                };
                if read.truncated {
                    EndpointCounters::add(&counters.dropped_malformed, 1);
                    continue;
                }
                if read.data.is_empty() {
                    // A zero-length datagram: `datagrams()` yields nothing for it,
                    // so count it here or a flood of them goes unseen.
                    total += 1;
                    EndpointCounters::add(&counters.datagrams_received, 1);
                    EndpointCounters::add(&counters.dropped_malformed, 1);
                    continue;
                }
                let from = Arrival {
                    peer,
                    shard: self.shard,
                };
                let datagrams = read.datagrams();
                let count = datagrams.len();
                total += count;
                EndpointCounters::add(&counters.datagrams_received, count as u64);
                EndpointCounters::add(&counters.bytes_received, read.data.len() as u64);
                router.dispatch_read(now, from, datagrams, &mut self.reply);
            }
            if reads < self.recv_batch {
                // A short batch (Linux) cleared the readiness above; a one-by-one
                // read (elsewhere) did not.
                return (total, short > 0);
            }
            if self.recv_batch == SMALL_RECV_BATCH {
                // Let the flush answer what was read first (a request-response
                // peer's reply then leaves before the next read, not after it).
                // Traffic that keeps every small read full is heavy: read in full
                // batches from now.
                self.full_small_reads += 1;
                if self.full_small_reads >= RECV_ROUNDS {
                    self.recv = RecvBatch::new(RECV_BATCH);
                    self.recv_batch = RECV_BATCH;
                }
                return (total, false);
            }
        }
        (total, false)
    }

    /// Polls every dirty connection of the shard and the queued handshake datagrams
    /// into send batches and sends them. Returns the connections' datagrams sent
    /// (handshake datagrams not included).
    async fn flush(&mut self) -> usize {
        let mut sent = 0;
        self.router.ready[self.shard].take(&mut self.dirty);
        self.router.io.shards[self.shard].take_unattached(&mut self.unattached);
        while let Some((peer, datagram)) = self.unattached.pop_front() {
            if self.filled == SEND_BATCH {
                self.send_filled().await;
            }
            // The queued buffer becomes the slot: no second copy.
            self.slots[self.filled] = datagram;
            self.dests.push(peer);
            self.owners.push(None);
            self.filled += 1;
        }
        while let Some(conn) = self.dirty.pop_front() {
            loop {
                if self.filled == SEND_BATCH {
                    self.send_filled().await;
                }
                let room = SEND_BATCH - self.filled;
                let n = conn.poll_transmits(Instant::now(), &mut self.slots[self.filled..]);
                for _ in 0..n {
                    self.dests.push(conn.peer);
                    self.owners.push(Some(conn.clone()));
                }
                self.filled += n;
                sent += n;
                if n < room {
                    break;
                }
            }
        }
        if self.filled > 0 {
            self.send_filled().await;
        }
        sent
    }

    /// Sends the filled slots in order, waiting while the socket buffer is full.
    async fn send_filled(&mut self) {
        let n = self.filled;
        let router = self.router.clone();
        send_batch(
            &router.io.shards[self.shard].socket,
            &mut self.send,
            Filled {
                slots: &self.slots[..n],
                dests: &self.dests,
                owners: &self.owners,
            },
            &router.io.counters,
        )
        .await;
        self.filled = 0;
        self.dests.clear();
        self.owners.clear();
    }
}

/// A filled send batch: datagram `i` is `slots[i]`, to `dests[i]`, from `owners[i]`.
#[derive(Clone, Copy)]
struct Filled<'a> {
    slots: &'a [Vec<u8>],
    dests: &'a [SocketAddr],
    owners: &'a [Option<Arc<ConnShared>>],
}

impl Filled<'_> {
    /// Length of the run starting at `start`: datagrams of one connection to the
    /// same peer, each as long as the first but the last, which may be shorter (a
    /// GSO train). One connection only: a receiver with GRO reads a train as one
    /// datagram, and a steered socket group (`petrel_sys::reuseport`) delivers it
    /// by its first byte, so a train mixing convs would put another connection's
    /// datagrams on the first one's shard.
    fn run_len(&self, start: usize) -> usize {
        let size = self.slots[start].len();
        let dest = self.dests[start];
        let owner = &self.owners[start];
        let same_owner = |other: &Option<Arc<ConnShared>>| match (owner, other) {
            (Some(a), Some(b)) => Arc::ptr_eq(a, b),
            (None, None) => true,
            _ => false,
        };
        let mut i = start + 1;
        while i < self.slots.len() && self.dests[i] == dest && same_owner(&self.owners[i]) {
            let len = self.slots[i].len();
            if len > size {
                break;
            }
            i += 1;
            if len < size {
                break;
            }
        }
        i - start
    }
}

/// What the send loop needs of a socket: a non-blocking batched send and a wait
/// for writability. The driver's is its tokio socket.
trait SendSocket {
    /// Sends `slots` (one GSO train to `dests[0]` when `train`) with `batch`;
    /// `after_wait` says a writability wait came before (tokio then checks and
    /// clears its readiness around the call).
    fn send(
        &self,
        batch: &mut SendBatch,
        slots: &[Vec<u8>],
        dests: &[SocketAddr],
        train: bool,
        after_wait: bool,
    ) -> std::io::Result<usize>;

    /// Waits until the socket may take more; `Err` when it never will (runtime
    /// shutting down).
    fn writable(&self) -> impl std::future::Future<Output = std::io::Result<()>>;
}

impl SendSocket for tokio::net::UdpSocket {
    fn send(
        &self,
        batch: &mut SendBatch,
        slots: &[Vec<u8>],
        dests: &[SocketAddr],
        train: bool,
        after_wait: bool,
    ) -> std::io::Result<usize> {
        let mut attempt = || {
            if train {
                batch.send_train(self, Some(dests[0]), slots)
            } else {
                batch.send_slices(self, slots, dests)
            }
        };
        if after_wait {
            self.try_io(Interest::WRITABLE, attempt)
        } else {
            // The first try goes straight to the socket: tokio reports a new socket
            // as not writable until its reactor has polled it once.
            attempt()
        }
    }

    async fn writable(&self) -> std::io::Result<()> {
        tokio::net::UdpSocket::writable(self).await
    }
}

/// Sends a filled batch in order: runs of at least [`GSO_MIN_RUN`] same-size
/// datagrams to one peer as GSO trains (when the batch has GSO), everything between
/// them in one `sendmmsg`.
async fn send_batch<S: SendSocket>(
    socket: &S,
    batch: &mut SendBatch,
    filled: Filled<'_>,
    counters: &EndpointCounters,
) {
    let n = filled.slots.len();
    let gso = batch.gso_enabled();
    let mut off = 0;
    while off < n {
        let run = filled.run_len(off);
        let (end, train) = if gso && run >= GSO_MIN_RUN {
            (off + run, true)
        } else {
            let mut end = off + run;
            while end < n {
                let next = filled.run_len(end);
                if gso && next >= GSO_MIN_RUN {
                    break;
                }
                end += next;
            }
            (end, false)
        };
        if !send_piece(socket, batch, filled, off..end, train, counters).await {
            return;
        }
        off = end;
    }
}

/// Sends datagrams `range` of `filled` (one train when `train`), resending from
/// where the kernel stopped: a full socket buffer waits for writability, a full
/// device queue for [`ENOBUFS_BACKOFF`] (both counted in `send_waits`), another
/// error skips that one datagram and counts it. `false` when the socket will never
/// be writable again (the runtime is shutting down).
async fn send_piece<S: SendSocket>(
    socket: &S,
    batch: &mut SendBatch,
    filled: Filled<'_>,
    range: std::ops::Range<usize>,
    train: bool,
    counters: &EndpointCounters,
) -> bool {
    let mut off = range.start;
    let mut waited = false;
    while off < range.end {
        let calls = batch.system_calls();
        let slots = &filled.slots[off..range.end];
        let dests = &filled.dests[off..range.end];
        match socket.send(batch, slots, dests, train, waited) {
            Ok(k) => {
                let bytes: usize = slots[..k].iter().map(Vec::len).sum();
                EndpointCounters::add(&counters.datagrams_sent, k as u64);
                EndpointCounters::add(&counters.bytes_sent, bytes as u64);
                EndpointCounters::add(&counters.send_syscalls, batch.system_calls() - calls);
                if train {
                    EndpointCounters::add(&counters.datagrams_sent_gso, k as u64);
                }
                off += k;
                waited = false;
            }
            Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => {
                EndpointCounters::add(&counters.send_waits, 1);
                if socket.writable().await.is_err() {
                    return false;
                }
                waited = true;
            }
            Err(e) if is_device_queue_full(&e) => {
                EndpointCounters::add(&counters.send_waits, 1);
                tokio::time::sleep(ENOBUFS_BACKOFF).await;
            }
            Err(e) => {
                EndpointCounters::add(&counters.send_errors, 1);
                match &filled.owners[off] {
                    Some(owner) => owner.count_send_error(),
                    None => EndpointCounters::add(&counters.unattached_send_errors, 1),
                }
                tracing::debug!(error = %e, "udp send error");
                off += 1;
            }
        }
    }
    true
}

#[cfg(test)]
mod tests {
    //! The send loop against a simulated socket whose buffer fills: deterministic,
    //! where a loopback socket never fills (Linux frees a loopback datagram's
    //! send-buffer charge as soon as it is handed to the receiver).

    use std::cell::{Cell, RefCell};

    use super::*;

    #[test]
    fn two_idle_waits_within_half_the_limit_make_traffic_dense() {
        let limit = Duration::from_micros(50);
        let short = Duration::from_micros(24);
        let run = next_short_waits(0, short, true, limit);
        assert_eq!(next_short_waits(run, short, true, limit), 2);
        // A wait of half the limit or more ends the run.
        assert_eq!(
            next_short_waits(5, Duration::from_micros(25), true, limit),
            0
        );
        assert_eq!(
            next_short_waits(5, Duration::from_millis(20), true, limit),
            0
        );
        // So does a wait after which no connection sent anything.
        assert_eq!(next_short_waits(5, short, false, limit), 0);
        // Zero turns busy polling off: no wait is short.
        assert_eq!(next_short_waits(5, Duration::ZERO, true, Duration::ZERO), 0);
        assert_eq!(next_short_waits(u32::MAX, short, true, limit), u32::MAX);
    }

    #[test]
    fn futile_busy_polls_back_off() {
        let needed: Vec<u32> = (0..10).map(short_waits_to_poll).collect();
        assert_eq!(needed, [2, 4, 8, 16, 16, 16, 16, 16, 16, 16]);
        assert_eq!(short_waits_to_poll(u32::MAX), 16);
    }

    /// Takes `room` datagrams, then answers `WouldBlock` until `writable` drains it
    /// (which makes room for `per_drain` more). Records every call and datagram.
    struct SimulatedSocket {
        room: Cell<usize>,
        per_drain: usize,
        accepted: RefCell<Vec<(SocketAddr, Vec<u8>)>>,
        /// (train, datagrams offered) per call that sent something.
        calls: RefCell<Vec<(bool, usize)>>,
        waits: Cell<usize>,
    }

    impl SimulatedSocket {
        fn new(room: usize, per_drain: usize) -> Self {
            Self {
                room: Cell::new(room),
                per_drain,
                accepted: RefCell::default(),
                calls: RefCell::default(),
                waits: Cell::new(0),
            }
        }
    }

    impl SendSocket for SimulatedSocket {
        fn send(
            &self,
            _batch: &mut SendBatch,
            slots: &[Vec<u8>],
            dests: &[SocketAddr],
            train: bool,
            _after_wait: bool,
        ) -> std::io::Result<usize> {
            let k = self.room.get().min(slots.len());
            if k == 0 {
                return Err(std::io::ErrorKind::WouldBlock.into());
            }
            self.room.set(self.room.get() - k);
            self.calls.borrow_mut().push((train, slots.len()));
            let mut accepted = self.accepted.borrow_mut();
            for (i, slot) in slots[..k].iter().enumerate() {
                let dest = if train { dests[0] } else { dests[i] };
                accepted.push((dest, slot.clone()));
            }
            Ok(k)
        }

        async fn writable(&self) -> std::io::Result<()> {
            self.waits.set(self.waits.get() + 1);
            self.room.set(self.per_drain);
            Ok(())
        }
    }

    fn peer(port: u16) -> SocketAddr {
        SocketAddr::from(([127, 0, 0, 1], port))
    }

    #[tokio::test]
    async fn a_full_socket_makes_the_sender_wait_and_loses_nothing() {
        let socket = SimulatedSocket::new(10, 7);
        let counters = EndpointCounters::default();
        let mut batch = SendBatch::new(SEND_BATCH);
        let mut expected = Vec::new();
        // Four batches of 64 datagrams, numbered, to three peers, sizes varying.
        for round in 0..4u32 {
            let slots: Vec<Vec<u8>> = (0..64u32)
                .map(|i| {
                    let n = round * 64 + i;
                    let mut d = n.to_be_bytes().to_vec();
                    d.resize(100 + (n as usize % 3) * 400, n as u8);
                    d
                })
                .collect();
            let dests: Vec<SocketAddr> = (0..64u16).map(|i| peer(1000 + i / 30)).collect();
            let owners = vec![None; 64];
            expected.extend(dests.iter().copied().zip(slots.iter().cloned()));
            let filled = Filled {
                slots: &slots,
                dests: &dests,
                owners: &owners,
            };
            send_batch(&socket, &mut batch, filled, &counters).await;
        }
        assert_eq!(
            *socket.accepted.borrow(),
            expected,
            "every datagram, in order"
        );
        let stats = counters.snapshot(0, &petrel_proto::fec::FecBudget::new(0));
        assert_eq!(stats.datagrams_sent, 256);
        assert!(stats.send_waits > 30, "{stats:?}");
        assert_eq!(stats.send_waits, socket.waits.get() as u64);
        assert_eq!(stats.send_errors, 0);
    }

    #[tokio::test]
    async fn runs_to_one_peer_go_as_gso_trains_and_the_rest_in_one_sendmmsg() {
        // A×6 (1000 B, the last 500 B), B×2, A×1, C×5 (800 B).
        let mut slots = vec![vec![1u8; 1000]; 5];
        slots.push(vec![1u8; 500]);
        slots.extend([vec![2u8; 1000], vec![2u8; 1000], vec![3u8; 1000]]);
        slots.extend(vec![vec![4u8; 800]; 5]);
        let mut dests = vec![peer(1); 6];
        dests.extend([peer(2), peer(2), peer(1)]);
        dests.extend([peer(3); 5]);
        let owners = vec![None; slots.len()];
        let filled = Filled {
            slots: &slots,
            dests: &dests,
            owners: &owners,
        };
        let counters = EndpointCounters::default();
        let socket = SimulatedSocket::new(usize::MAX, 0);
        let mut batch = SendBatch::new(SEND_BATCH);
        batch.set_gso(true);
        if batch.gso_enabled() {
            send_batch(&socket, &mut batch, filled, &counters).await;
            assert_eq!(*socket.calls.borrow(), [(true, 6), (false, 3), (true, 5)]);
            let stats = counters.snapshot(0, &petrel_proto::fec::FecBudget::new(0));
            assert_eq!(stats.datagrams_sent_gso, 11);
        }
        let socket = SimulatedSocket::new(usize::MAX, 0);
        batch.set_gso(false);
        send_batch(&socket, &mut batch, filled, &counters).await;
        assert_eq!(*socket.calls.borrow(), [(false, 14)]);
        let sent: Vec<_> = socket.accepted.borrow().iter().map(|(d, _)| *d).collect();
        assert_eq!(sent, dests);
    }
}
