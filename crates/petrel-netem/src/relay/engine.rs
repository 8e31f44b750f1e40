//! The relay thread: one event loop that reads datagrams in batches, feeds each route's
//! sans-IO model, and sends what is due at its scheduled time.
//!
//! Timing: a min-heap holds each link's next deadline. The thread sleeps in `ppoll`
//! (ns resolution, 1 ns timer slack) until `spin` before the earliest deadline, then
//! polls the sockets without blocking until the deadline passes. Idle, it blocks with
//! no timeout: no CPU is used without traffic.

use std::cmp::Reverse;
use std::collections::BinaryHeap;
use std::io;
use std::net::{SocketAddr, UdpSocket};
use std::os::fd::AsRawFd;
use std::os::unix::net::UnixDatagram;
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::{Duration, Instant};

use hdrhistogram::Histogram;
use petrel_sys::batch::{RecvBatch, SendBatch};
use petrel_sys::poll::Epoll;
use petrel_sys::proc::thread_cpu_time;
use petrel_sys::socket::{set_buffers, BufferRequest, OnRefusal};
use petrel_sys::thread::tighten_timer_slack;

use super::report::{Lateness, RelayStats};
use super::routes::{RouteTable, Slot};
use super::spin::SpinBudget;
use super::{io_err, RelayConfig, RelayError, Shared};
use crate::route::{Direction, Route};

const WAKER: u64 = 0;
const LISTEN: u64 = 1;
const FIRST_ROUTE: u64 = 2;
const EPOLL_EVENTS: usize = 256;
/// Batches read from one readable socket per loop turn, so a flooded socket cannot
/// delay due packets by more than a few batches.
const RECV_ROUNDS: usize = 4;
const PUBLISH_EVERY: Duration = Duration::from_millis(50);
/// Free buffers kept for reuse, and the largest buffer worth keeping (bytes): bounds
/// the pool at 64 MiB while serving ordinary MTU-sized traffic without allocation.
const POOL_MAX: usize = 4096;
const POOL_BUF_MAX: usize = 16 << 10;
const DIRS: [Direction; 2] = Direction::BOTH;

/// How often idle routes are looked for: often enough that a route outlives its
/// timeout by at most half of it, at most once a second.
fn sweep_every(idle: Duration) -> Duration {
    (idle / 2).min(Duration::from_secs(1))
}

#[derive(Default)]
struct Counters {
    routes_rejected: u64,
    truncated: u64,
    recv_errors: u64,
    send_errors: u64,
    send_dropped: u64,
    route_setup_errors: u64,
}

/// Buffers and counters of the I/O path, apart from the routes so both can be
/// borrowed at once.
struct Io {
    recv: RecvBatch,
    send: SendBatch,
    pool: Vec<Vec<u8>>,
    staged: Vec<(SocketAddr, Vec<u8>)>,
    out: Vec<Vec<u8>>,
    scheduled: Vec<Instant>,
    counters: Counters,
    lateness: Histogram<u64>,
}

impl Io {
    fn recycle(&mut self, b: Vec<u8>) {
        if self.pool.len() < POOL_MAX && b.capacity() <= POOL_BUF_MAX {
            self.pool.push(b);
        }
    }

    /// Sends `out` to `dest` (`None`: the connected peer) in batches, recording each
    /// datagram's lateness.
    fn flush(&mut self, socket: &UdpSocket, dest: Option<SocketAddr>) {
        let mut i = 0;
        while i < self.out.len() {
            let at = Instant::now();
            let end = self.out.len().min(i + self.send.capacity());
            match self.send.send_to(socket, &self.out[i..end], dest) {
                Ok(k) if k > 0 => {
                    for s in &self.scheduled[i..i + k] {
                        let ns = at.saturating_duration_since(*s).as_nanos();
                        self.lateness
                            .saturating_record(u64::try_from(ns).unwrap_or(u64::MAX));
                    }
                    i += k;
                }
                Err(e) if e.kind() != io::ErrorKind::WouldBlock => {
                    self.counters.send_errors += 1;
                    i += 1;
                }
                _ => {
                    self.counters.send_dropped += (self.out.len() - i) as u64;
                    break;
                }
            }
        }
        let mut out = std::mem::take(&mut self.out);
        for b in out.drain(..) {
            self.recycle(b);
        }
        self.out = out;
        self.scheduled.clear();
    }
}

pub(crate) struct Engine {
    config: RelayConfig,
    epoll: Epoll,
    listen: UdpSocket,
    wake_rx: UnixDatagram,
    shared: Arc<Shared>,
    routes: RouteTable,
    /// (deadline, slot position, route index, direction).
    timers: BinaryHeap<Reverse<(Instant, usize, u64, usize)>>,
    io: Io,
    started: Instant,
    last_publish: Instant,
    dirty: bool,
    spin: SpinBudget,
    last_sweep: Instant,
    ready: Vec<u64>,
}

fn tune(socket: &UdpSocket, buffer: usize) -> io::Result<()> {
    socket.set_nonblocking(true)?;
    // Best effort: the kernel caps the sizes at its configured maxima.
    set_buffers(socket, BufferRequest::both(buffer), OnRefusal::Ignore)?;
    Ok(())
}

impl Engine {
    pub(crate) fn new(
        config: RelayConfig,
        listen: UdpSocket,
        wake_rx: UnixDatagram,
        shared: Arc<Shared>,
    ) -> Result<Self, RelayError> {
        tune(&listen, config.socket_buffer).map_err(io_err("listen socket options"))?;
        wake_rx
            .set_nonblocking(true)
            .map_err(io_err("waker socket options"))?;
        let epoll = Epoll::new(EPOLL_EVENTS).map_err(io_err("epoll_create1"))?;
        epoll
            .add(wake_rx.as_raw_fd(), WAKER)
            .map_err(io_err("epoll add waker"))?;
        epoll
            .add(listen.as_raw_fd(), LISTEN)
            .map_err(io_err("epoll add listen socket"))?;
        let lateness = Histogram::new_with_bounds(1, 60_000_000_000, 3)
            .map_err(|e| io_err("lateness histogram")(io::Error::other(e.to_string())))?;
        let now = Instant::now();
        Ok(Self {
            io: Io {
                recv: RecvBatch::new(config.batch),
                send: SendBatch::new(config.batch),
                pool: Vec::new(),
                staged: Vec::with_capacity(config.batch),
                out: Vec::new(),
                scheduled: Vec::new(),
                counters: Counters::default(),
                lateness,
            },
            config,
            epoll,
            listen,
            wake_rx,
            shared,
            routes: RouteTable::default(),
            timers: BinaryHeap::new(),
            started: now,
            last_publish: now,
            dirty: false,
            spin: SpinBudget::new(),
            last_sweep: now,
            ready: Vec::with_capacity(EPOLL_EVENTS),
        })
    }

    pub(crate) fn run(mut self) -> Result<RelayStats, RelayError> {
        tighten_timer_slack();
        loop {
            let now = Instant::now();
            self.spin.advance(now);
            self.release_due(now);
            if self.shared.stop.load(Ordering::SeqCst) {
                break;
            }
            if let Some(idle) = self.config.route_idle_timeout {
                if now >= self.last_sweep + sweep_every(idle) {
                    let before = self.routes.expired;
                    self.routes.expire_idle(now, idle);
                    self.dirty |= self.routes.expired != before;
                    self.last_sweep = now;
                }
            }
            if self.dirty && now >= self.last_publish + PUBLISH_EVERY {
                self.publish(now);
            }
            let timeout = self.timeout(now);
            let mut ready = std::mem::take(&mut self.ready);
            self.epoll
                .wait(timeout, &mut ready)
                .map_err(io_err("epoll wait"))?;
            for &token in &ready {
                match token {
                    WAKER => while self.wake_rx.recv(&mut [0u8; 8]).is_ok() {},
                    LISTEN => self.recv_listen(),
                    t => self.recv_route((t - FIRST_ROUTE) as usize),
                }
            }
            self.ready = ready;
        }
        Ok(self.publish(Instant::now()))
    }

    /// How long to sleep: until `spin` before the next packet deadline while the spin
    /// budget lasts, or until the next stats refresh or idle-route sweep; without
    /// limit when there is nothing to wait for.
    fn timeout(&mut self, now: Instant) -> Option<Duration> {
        let deadline = self.timers.peek().map(|Reverse((t, _, _, _))| *t);
        let publish = self.dirty.then_some(self.last_publish + PUBLISH_EVERY);
        let sweep = match self.config.route_idle_timeout {
            Some(idle) if self.routes.live() > 0 => Some(self.last_sweep + sweep_every(idle)),
            _ => None,
        };
        // Only packet deadlines are worth spinning for.
        let packet = self.spin.sleep_for(
            deadline.map(|d| d.saturating_duration_since(now)),
            self.config.spin,
        );
        let chores = [publish, sweep]
            .into_iter()
            .flatten()
            .min()
            .map(|t| t.saturating_duration_since(now));
        [packet, chores].into_iter().flatten().min()
    }

    fn recv_listen(&mut self) {
        for _ in 0..RECV_ROUNDS {
            let n = match self.io.recv.recv(&self.listen) {
                Ok(n) => n,
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => break,
                Err(_) => {
                    self.io.counters.recv_errors += 1;
                    break;
                }
            };
            let now = Instant::now();
            let mut staged = std::mem::take(&mut self.io.staged);
            for i in 0..n {
                let Some(d) = self.io.recv.get(i) else { break };
                match (d.truncated, d.source) {
                    (true, _) => self.io.counters.truncated += 1,
                    (false, None) => self.io.counters.recv_errors += 1,
                    (false, Some(src)) => {
                        let data = d.data;
                        let mut b = self.io.pool.pop().unwrap_or_default();
                        b.clear();
                        b.extend_from_slice(data);
                        staged.push((src, b));
                    }
                }
            }
            for (src, buf) in staged.drain(..) {
                match self.route_for(src, now) {
                    Some(idx) => self.offer(idx, Direction::Upstream, now, buf),
                    None => self.io.recycle(buf),
                }
            }
            self.io.staged = staged;
            self.dirty = true;
            if n < self.config.batch {
                break;
            }
        }
    }

    fn recv_route(&mut self, idx: usize) {
        for _ in 0..RECV_ROUNDS {
            let Some(slot) = self.routes.get(idx) else {
                return;
            };
            let n = match self.io.recv.recv(&slot.socket) {
                Ok(n) => n,
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => break,
                Err(_) => {
                    self.io.counters.recv_errors += 1;
                    break;
                }
            };
            let now = Instant::now();
            for i in 0..n {
                let Some(d) = self.io.recv.get(i) else { break };
                if d.truncated {
                    self.io.counters.truncated += 1;
                    continue;
                }
                let data = d.data;
                let buf = {
                    let mut b = self.io.pool.pop().unwrap_or_default();
                    b.clear();
                    b.extend_from_slice(data);
                    b
                };
                self.offer(idx, Direction::Downstream, now, buf);
            }
            self.dirty = true;
            if n < self.config.batch {
                break;
            }
        }
    }

    fn route_for(&mut self, client: SocketAddr, now: Instant) -> Option<usize> {
        if let Some(idx) = self.routes.lookup(&client) {
            return Some(idx);
        }
        if self.routes.live() >= self.config.max_routes {
            self.io.counters.routes_rejected += 1;
            return None;
        }
        match self.open_route(client, now) {
            Ok(idx) => Some(idx),
            Err(_) => {
                self.io.counters.route_setup_errors += 1;
                None
            }
        }
    }

    fn open_route(&mut self, client: SocketAddr, now: Instant) -> io::Result<usize> {
        let upstream = self.config.upstream;
        let any: SocketAddr = if upstream.is_ipv4() {
            ([0, 0, 0, 0], 0).into()
        } else {
            (std::net::Ipv6Addr::UNSPECIFIED, 0).into()
        };
        let socket = UdpSocket::bind(any)?;
        socket.connect(upstream)?;
        tune(&socket, self.config.socket_buffer)?;
        let (pos, index) = self.routes.next_position();
        self.epoll
            .add(socket.as_raw_fd(), FIRST_ROUTE + pos as u64)?;
        Ok(self.routes.insert(Slot {
            index,
            client,
            socket,
            route: Route::new(&self.config.route, self.config.seed, index),
            armed: [None, None],
            created: now,
            last_active: now,
        }))
    }

    fn offer(&mut self, idx: usize, dir: Direction, now: Instant, buf: Vec<u8>) {
        let Some(slot) = self.routes.get_mut(idx) else {
            return self.io.recycle(buf);
        };
        slot.last_active = now;
        slot.route.offer(dir, now, buf);
        let d = dir as usize;
        if let Some(next) = slot.route.next_deadline(dir) {
            if slot.armed[d].is_none_or(|a| next < a) {
                slot.armed[d] = Some(next);
                self.timers.push(Reverse((next, idx, slot.index, d)));
            }
        }
    }

    /// Sends every packet due at `now`. Heap entries whose time no longer matches the
    /// link's armed deadline are stale (an earlier deadline was armed since) and skipped.
    fn release_due(&mut self, now: Instant) {
        while let Some(&Reverse((t, idx, index, d))) = self.timers.peek() {
            if t > now {
                break;
            }
            self.timers.pop();
            let Some(slot) = self.routes.get_mut(idx) else {
                continue;
            };
            if slot.index != index || slot.armed[d] != Some(t) {
                continue;
            }
            slot.armed[d] = None;
            self.dirty = true;
            let dir = DIRS[d];
            while let Some(tx) = slot.route.poll_transmit(dir, now) {
                self.io.out.push(tx.packet);
                self.io.scheduled.push(tx.scheduled);
            }
            match dir {
                Direction::Upstream => self.io.flush(&slot.socket, None),
                Direction::Downstream => self.io.flush(&self.listen, Some(slot.client)),
            }
            if let Some(next) = slot.route.next_deadline(dir) {
                slot.armed[d] = Some(next);
                self.timers.push(Reverse((next, idx, slot.index, d)));
            }
        }
    }

    fn publish(&mut self, now: Instant) -> RelayStats {
        let (routes, [upstream_total, downstream_total]) = self.routes.reports(now);
        let c = &self.io.counters;
        let stats = RelayStats {
            uptime_ms: now.saturating_duration_since(self.started).as_secs_f64() * 1e3,
            thread_cpu_ms: thread_cpu_time().unwrap_or_default().as_secs_f64() * 1e3,
            max_routes: self.config.max_routes,
            routes_rejected: c.routes_rejected,
            truncated: c.truncated,
            recv_errors: c.recv_errors,
            send_errors: c.send_errors,
            send_dropped: c.send_dropped,
            route_setup_errors: c.route_setup_errors,
            lateness: Lateness::from_ns(&self.io.lateness),
            upstream_total,
            downstream_total,
            routes_expired: self.routes.expired,
            routes,
        };
        if let Ok(mut s) = self.shared.stats.lock() {
            *s = stats.clone();
        }
        self.last_publish = now;
        self.dirty = false;
        stats
    }
}
