//! The I/O driver: one task per socket shard that does every read and write of that
//! socket, many datagrams per system call.
//!
//! ```text
//!            kernel socket (one per shard; SO_REUSEPORT group when io_threads > 1)
//!                 │ recvmmsg (+GRO)                          ▲ sendmmsg / GSO sendmsg
//!                 ▼                                          │
//!  ┌─ driver, one round per wake-up ─────────────────────────┴──────────────────┐
//!  │ 1. receive: up to RECV_ROUNDS × RECV_BATCH reads into the RecvBatch;       │
//!  │    each datagram (GRO trains split) is routed in place:                    │
//!  │    Router::dispatch ─► ConnShared::on_data ─► Session::input(&slot[..])    │
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
//!  │ 5. nothing read and nothing sent: sleep until the socket is readable or a  │
//!  │    connection or handshake wakes the shard (ShardIo::wake)                 │
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
//! idle endpoint's drivers sleep without wake-ups.

use std::collections::VecDeque;
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::{Duration, Instant};

use petrel_sys::batch::{enable_gro, is_device_queue_full};
use petrel_sys::{RecvBatch, SendBatch};
use tokio::io::Interest;

use crate::connection_state::ConnShared;
use crate::io::ShardIo;
use crate::router::{Arrival, Router};
use crate::stats::EndpointCounters;

/// Reads per `recvmmsg`.
const RECV_BATCH: usize = 32;
/// `recvmmsg` calls per round before the driver flushes what they called for.
const RECV_ROUNDS: usize = 8;
/// Datagrams per send batch: the most one GSO `sendmsg` carries.
const SEND_BATCH: usize = petrel_sys::batch::MAX_GSO_SEGMENTS;
/// Shortest run of same-size datagrams to one peer sent by GSO; shorter runs join
/// the batch's `sendmmsg`, which costs one system call for all of them.
const GSO_MIN_RUN: usize = 4;
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
        let slot = config.kcp.mtu;
        Self {
            shard,
            recv: RecvBatch::new(RECV_BATCH),
            send,
            slots: (0..SEND_BATCH).map(|_| Vec::with_capacity(slot)).collect(),
            dests: Vec::with_capacity(SEND_BATCH),
            owners: Vec::with_capacity(SEND_BATCH),
            filled: 0,
            dirty: VecDeque::new(),
            unattached: VecDeque::new(),
            reply: Vec::with_capacity(2048),
            router,
        }
    }

    fn io(&self) -> &ShardIo {
        &self.router.io.shards[self.shard]
    }

    fn counters(&self) -> &EndpointCounters {
        &self.router.io.counters
    }

    async fn run(mut self) {
        if self.router.io.config.gro {
            // A kernel without GRO reports false: datagrams then arrive one per read.
            let _ = enable_gro(&self.io().socket);
        }
        let router = self.router.clone();
        let shard = &router.io.shards[self.shard];
        loop {
            let notified = shard.wake.notified();
            tokio::pin!(notified);
            notified.as_mut().enable();
            let received = self.receive();
            if received > 0 {
                tokio::task::yield_now().await;
            }
            let sent = self.flush().await;
            if received > 0 || sent > 0 {
                continue;
            }
            tokio::select! {
                ready = shard.socket.readable() => {
                    if ready.is_err() {
                        // The runtime is shutting down.
                        return;
                    }
                }
                () = &mut notified => {}
            }
            EndpointCounters::add(&self.counters().driver_wakeups, 1);
        }
    }

    /// Reads and routes what is waiting, up to [`RECV_ROUNDS`] `recvmmsg` calls.
    /// Returns the datagrams read.
    fn receive(&mut self) -> usize {
        let router = self.router.clone();
        let io = &router.io.shards[self.shard];
        let counters = &router.io.counters;
        let mut total = 0;
        for _ in 0..RECV_ROUNDS {
            let recv = &mut self.recv;
            let reads = match io
                .socket
                .try_io(Interest::READABLE, || recv.recv(&io.socket))
            {
                Ok(n) => n,
                Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => break,
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
                let from = Arrival {
                    peer,
                    shard: self.shard,
                };
                for datagram in read.datagrams() {
                    total += 1;
                    EndpointCounters::add(&counters.datagrams_received, 1);
                    EndpointCounters::add(&counters.bytes_received, datagram.len() as u64);
                    router.dispatch(now, from, datagram, &mut self.reply);
                }
            }
            if reads < RECV_BATCH {
                break;
            }
        }
        total
    }

    /// Polls every dirty connection of the shard and the queued handshake datagrams
    /// into send batches and sends them. Returns the datagrams sent.
    async fn flush(&mut self) -> usize {
        self.router.ready[self.shard].take(&mut self.dirty);
        self.router.io.shards[self.shard].take_unattached(&mut self.unattached);
        let mut sent = 0;
        while let Some((peer, datagram)) = self.unattached.pop_front() {
            if self.filled == SEND_BATCH {
                sent += self.send_filled().await;
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
                    sent += self.send_filled().await;
                }
                let room = SEND_BATCH - self.filled;
                let n = conn.poll_transmits(Instant::now(), &mut self.slots[self.filled..]);
                for _ in 0..n {
                    self.dests.push(conn.peer);
                    self.owners.push(Some(conn.clone()));
                }
                self.filled += n;
                if n < room {
                    break;
                }
            }
        }
        if self.filled > 0 {
            sent += self.send_filled().await;
        }
        sent
    }

    /// Sends the filled slots in order, waiting while the socket buffer is full.
    /// Returns how many were filled.
    async fn send_filled(&mut self) -> usize {
        let n = self.filled;
        let gso = self.send.gso_enabled();
        let mut off = 0;
        while off < n {
            let run = self.run_len(off, n);
            let (end, train) = if gso && run >= GSO_MIN_RUN {
                (off + run, true)
            } else {
                let mut end = off + run;
                while end < n {
                    let next = self.run_len(end, n);
                    if gso && next >= GSO_MIN_RUN {
                        break;
                    }
                    end += next;
                }
                (end, false)
            };
            self.send_piece(off, end, train).await;
            off = end;
        }
        self.filled = 0;
        self.dests.clear();
        self.owners.clear();
        n
    }

    /// Length of the run starting at `start`: datagrams to the same peer, each as
    /// long as the first but the last, which may be shorter (a GSO train).
    fn run_len(&self, start: usize, end: usize) -> usize {
        let size = self.slots[start].len();
        let dest = self.dests[start];
        let mut i = start + 1;
        while i < end && self.dests[i] == dest {
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

    /// Sends slots `start..end` (one train when `train`), resending from where the
    /// kernel stopped: a full buffer waits for writability, another error skips that
    /// one datagram and counts it.
    async fn send_piece(&mut self, start: usize, end: usize, train: bool) {
        let router = self.router.clone();
        let io = &router.io.shards[self.shard];
        let counters = &router.io.counters;
        let mut off = start;
        let mut waited = false;
        while off < end {
            let calls = self.send.system_calls();
            let send = &mut self.send;
            let (slots, dests) = (&self.slots[off..end], &self.dests[off..end]);
            let mut attempt = || {
                if train {
                    send.send_train(&io.socket, Some(dests[0]), slots)
                } else {
                    send.send_slices(&io.socket, slots, dests)
                }
            };
            // The first try goes straight to the socket: tokio reports a new socket
            // as not writable until its reactor has polled it once.
            let result = if waited {
                io.socket.try_io(Interest::WRITABLE, attempt)
            } else {
                attempt()
            };
            match result {
                Ok(k) => {
                    let bytes: usize = self.slots[off..off + k].iter().map(Vec::len).sum();
                    EndpointCounters::add(&counters.datagrams_sent, k as u64);
                    EndpointCounters::add(&counters.bytes_sent, bytes as u64);
                    EndpointCounters::add(
                        &counters.send_syscalls,
                        self.send.system_calls() - calls,
                    );
                    if train {
                        EndpointCounters::add(&counters.datagrams_sent_gso, k as u64);
                    }
                    off += k;
                    waited = false;
                }
                Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => {
                    EndpointCounters::add(&counters.send_waits, 1);
                    if io.socket.writable().await.is_err() {
                        // The runtime is shutting down.
                        return;
                    }
                    waited = true;
                }
                Err(e) if is_device_queue_full(&e) => {
                    EndpointCounters::add(&counters.send_waits, 1);
                    tokio::time::sleep(ENOBUFS_BACKOFF).await;
                }
                Err(e) => {
                    EndpointCounters::add(&counters.send_errors, 1);
                    if let Some(owner) = &self.owners[off] {
                        owner.count_send_error();
                    } else {
                        EndpointCounters::add(&counters.unattached_send_errors, 1);
                    }
                    tracing::debug!(error = %e, "udp send error");
                    off += 1;
                }
            }
        }
    }
}
