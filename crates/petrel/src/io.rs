//! The bottom of the runtime: the endpoint's UDP sockets (one per shard), its
//! configuration, counters and random numbers, and the queue of datagrams that
//! belong to no connection.
//!
//! Everything above shares one [`EndpointIo`] — connections (`connection_state`), the
//! client handshake driver (`client_connect`), the datagram router (`router`), the
//! I/O drivers (`driver`) — and it knows nothing of them, so imports point one way:
//! `io` ← `connection_state` ← `client_connect` ← `router` ← `driver` ←
//! `connection_handle` ← `endpoint`. Only the drivers call the sockets.

use std::collections::VecDeque;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Mutex;
use std::time::{SystemTime, UNIX_EPOCH};

use petrel_proto::handshake::{ConvLane, HandshakeMode};
use petrel_sys::batch::enable_gro;
use petrel_sys::reuseport::steer_by_first_byte;
use petrel_sys::socket::{bind_udp, BufferRequest, OnRefusal, UdpOptions};
use petrel_sys::SocketBuffers;
use rand::distributions::{Distribution, Standard};
use rand::Rng;

use crate::config::EndpointConfig;
use crate::stats::EndpointCounters;

/// Most datagrams that belong to no connection (handshake replies, a client's
/// opening datagrams) one shard holds for its driver; beyond it they are dropped
/// and counted in `unattached_send_dropped` (the handshakes resend on their timers).
pub(crate) const UNATTACHED_QUEUE: usize = 1024;

/// One socket shard: a UDP socket, the wake-up of its driver, and its queue of
/// datagrams that belong to no connection.
#[derive(Debug)]
pub(crate) struct ShardIo {
    pub(crate) socket: tokio::net::UdpSocket,
    /// Woken when a connection of this shard has something to send, or an
    /// unattached datagram was queued, while the driver sleeps (see the `driver`
    /// module).
    wake: tokio::sync::Notify,
    /// False only while the driver is about to sleep or sleeping: work queued while
    /// it is awake needs no wake-up, as the driver looks at its queues again before
    /// it sleeps.
    awake: AtomicBool,
    unattached: Mutex<VecDeque<(SocketAddr, Vec<u8>)>>,
}

impl ShardIo {
    /// Wakes the driver if it sleeps or is about to (call after queuing work).
    pub(crate) fn wake_driver(&self) {
        if !self.awake.load(Ordering::SeqCst) {
            self.wake.notify_one();
        }
    }

    /// The driver's side: whether it is awake (see [`ShardIo::wake_driver`]).
    /// Before it sleeps it sets false, then looks at its queues once more.
    pub(crate) fn set_awake(&self, awake: bool) {
        self.awake.store(awake, Ordering::SeqCst);
    }

    /// The driver's side: waits for [`ShardIo::wake_driver`].
    pub(crate) async fn woken(&self) {
        self.wake.notified().await;
    }

    /// Whether unattached datagrams wait.
    pub(crate) fn has_unattached(&self) -> bool {
        !self
            .unattached
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .is_empty()
    }

    /// Takes the queued unattached datagrams (appended to `into`, oldest first).
    pub(crate) fn take_unattached(&self, into: &mut VecDeque<(SocketAddr, Vec<u8>)>) {
        let mut queue = self.unattached.lock().unwrap_or_else(|e| e.into_inner());
        into.append(&mut queue);
    }
}

/// The sockets and what every part of the endpoint reads or counts.
#[derive(Debug)]
pub(crate) struct EndpointIo {
    pub(crate) shards: Vec<ShardIo>,
    pub(crate) local_addr: SocketAddr,
    pub(crate) buffers: SocketBuffers,
    /// Whether each datagram reaches the shard its conv's lane names
    /// ([`EndpointIo::shard_of_conv`]).
    steered: bool,
    pub(crate) config: EndpointConfig,
    pub(crate) mode: HandshakeMode,
    rng: Mutex<rand_chacha::ChaCha20Rng>,
    pub(crate) counters: EndpointCounters,
    gone: AtomicBool,
}

impl EndpointIo {
    pub(crate) fn new(
        bound: BoundSockets,
        config: EndpointConfig,
        mode: HandshakeMode,
        rng: rand_chacha::ChaCha20Rng,
    ) -> std::io::Result<Self> {
        let BoundSockets {
            sockets,
            buffers,
            steered,
        } = bound;
        let local_addr = sockets
            .first()
            .ok_or_else(|| std::io::Error::other("an endpoint needs one socket"))?
            .local_addr()?;
        Ok(Self {
            shards: sockets
                .into_iter()
                .map(|socket| ShardIo {
                    socket,
                    wake: tokio::sync::Notify::new(),
                    awake: AtomicBool::new(true),
                    unattached: Mutex::default(),
                })
                .collect(),
            local_addr,
            buffers,
            steered,
            config,
            mode,
            rng: Mutex::new(rng),
            counters: EndpointCounters::default(),
            gone: AtomicBool::new(false),
        })
    }

    /// A value from the endpoint's random stream (seeded by `EndpointConfig::seed`).
    pub(crate) fn random<T>(&self) -> T
    where
        Standard: Distribution<T>,
    {
        self.rng.lock().unwrap_or_else(|e| e.into_inner()).gen()
    }

    /// The shard that reads the datagrams of a connection with `conv`: its lane
    /// when the shards are steered, `None` when the kernel's hash decides.
    pub(crate) fn shard_of_conv(&self, conv: u32) -> Option<usize> {
        self.steered.then(|| ConvLane::of(conv, self.shards.len()))
    }

    /// The lane a server's next conv should be in: the shard with the fewest of
    /// `per_shard` connections when steered, any lane otherwise.
    pub(crate) fn lane_for_next(&self, per_shard: &[usize]) -> ConvLane {
        if !self.steered {
            return ConvLane::ANY;
        }
        let lane = (0..self.shards.len())
            .min_by_key(|&shard| per_shard.get(shard).copied().unwrap_or(0))
            .unwrap_or(0);
        ConvLane {
            lanes: self.shards.len(),
            lane,
        }
    }

    pub(crate) fn next_seed(&self) -> u64 {
        self.random()
    }

    pub(crate) fn is_gone(&self) -> bool {
        self.gone.load(Ordering::Acquire)
    }

    /// Marks the endpoint as shut down: new connects fail with `EndpointGone`.
    pub(crate) fn mark_gone(&self) {
        self.gone.store(true, Ordering::Release);
    }

    /// Queues a datagram that belongs to no connection (handshake traffic) for
    /// shard `shard`'s driver. This is the one copy the runtime makes of a datagram
    /// after it was encoded (counted in `bytes_copied`): the handshakes encode into
    /// their own buffers, on tasks other than the driver's. A full queue drops it
    /// (counted in `unattached_send_dropped`).
    pub(crate) fn send_unattached(&self, shard: usize, buf: &[u8], peer: SocketAddr) {
        let Some(io) = self.shards.get(shard) else {
            return;
        };
        {
            let mut queue = io.unattached.lock().unwrap_or_else(|e| e.into_inner());
            if queue.len() >= UNATTACHED_QUEUE {
                EndpointCounters::add(&self.counters.unattached_send_dropped, 1);
                return;
            }
            queue.push_back((peer, buf.to_vec()));
        }
        EndpointCounters::add(&self.counters.bytes_copied, buf.len() as u64);
        io.wake_driver();
    }
}

/// The sockets [`bind`] made.
#[derive(Debug)]
pub(crate) struct BoundSockets {
    pub(crate) sockets: Vec<tokio::net::UdpSocket>,
    /// The first socket's buffers.
    pub(crate) buffers: SocketBuffers,
    /// Whether the group delivers by a datagram's first byte (the low byte of its
    /// conv) rather than by the kernel's 4-tuple hash.
    pub(crate) steered: bool,
}

/// Binds the endpoint's non-blocking UDP sockets: `shards` of them on one address
/// (with `SO_REUSEPORT` when more than one; port 0 resolves to the first socket's
/// port), each with the requested buffer sizes; a size the kernel refuses fails the
/// bind. With `steer` and more than one shard, the group delivers each datagram to
/// the shard its first byte names (`petrel_sys::reuseport`); a kernel that refuses
/// the program leaves the 4-tuple hash in place (logged, `steered` false). With
/// `gro`, each socket asks for UDP GRO before it can receive anything, so the
/// first datagrams are already read as trains (a kernel without it reads them one
/// by one). The sockets stay unconnected and without `IP_RECVERR`: the driver
/// takes a short receive batch for an empty queue, which a pending socket error
/// would make untrue (`RecvBatch::drained`).
pub(crate) fn bind(
    addr: SocketAddr,
    shards: usize,
    send_buffer: Option<usize>,
    recv_buffer: Option<usize>,
    steer: bool,
    gro: bool,
) -> std::io::Result<BoundSockets> {
    let mut options = UdpOptions {
        buffers: BufferRequest {
            send: send_buffer,
            recv: recv_buffer,
        },
        on_refusal: OnRefusal::Fail,
        nonblocking: true,
        reuse_port: shards > 1,
        ..UdpOptions::new(addr)
    };
    let mut sockets = Vec::with_capacity(shards);
    let (first, buffers) = bind_udp(&options)?;
    options.bind = first.local_addr()?;
    let mut bound = vec![first];
    for _ in 1..shards {
        bound.push(bind_udp(&options)?.0);
    }
    for socket in bound {
        if gro {
            // The kernel's answer (false: no GRO) needs no handling: reads then
            // return one datagram each.
            let _ = enable_gro(&socket);
        }
        sockets.push(tokio::net::UdpSocket::from_std(socket)?);
    }
    let steered = steer
        && shards > 1
        && match steer_by_first_byte(&sockets[0], shards) {
            Ok(()) => true,
            Err(e) => {
                tracing::warn!(error = %e, "socket shards stay on the kernel's 4-tuple hash");
                false
            }
        };
    Ok(BoundSockets {
        sockets,
        buffers,
        steered,
    })
}

/// Milliseconds since the Unix epoch (the handshake's timestamps), 0 before it.
pub(crate) fn wall_clock_ms() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_millis() as u64)
}
