//! A deterministic in-memory network for KCP (or Session) simulations: a seeded lossy
//! link and a two-endpoint simulator with a simulated clock that jumps to the next event
//! (the earlier of a delivery and either endpoint's `poll_timeout`).
#![allow(dead_code)]

use std::cmp::Reverse;
use std::collections::BinaryHeap;
use std::time::{Duration, Instant};

use petrel_proto::fec::{FecConfig, FecScheme};
use petrel_proto::handshake::{Binding, Established, RAW_PARAMS};
use petrel_proto::kcp::Kcp;
use petrel_proto::session::{Session, SessionConfig};
use rand::Rng;
use rand::SeedableRng;
use rand_chacha::ChaCha8Rng;

/// A raw-mode session (no handshake) with conv `conv`, FEC `scheme` and every
/// other setting at its default.
pub fn fec_session(scheme: FecScheme, conv: u32, now: Instant) -> Session {
    let established = Established {
        conv,
        params: RAW_PARAMS,
        binding: Binding::Raw,
    };
    let config = SessionConfig {
        fec: FecConfig {
            scheme,
            ..FecConfig::default()
        },
        ..SessionConfig::default()
    };
    Session::new(&established, &config, now).unwrap()
}

/// Impairments of one direction.
#[derive(Debug, Clone, Copy)]
pub struct LinkConfig {
    /// Probability a datagram is dropped.
    pub loss: f64,
    /// Probability a datagram is delivered twice.
    pub duplicate: f64,
    /// One-way base delay.
    pub delay: Duration,
    /// Extra uniform random delay per datagram (reorders datagrams).
    pub jitter: Duration,
}

impl LinkConfig {
    pub fn clean(delay: Duration) -> Self {
        Self {
            loss: 0.0,
            duplicate: 0.0,
            delay,
            jitter: Duration::ZERO,
        }
    }
}

/// One direction of the network: datagrams in transit, ordered by delivery time.
#[derive(Debug)]
pub struct Link {
    pub config: LinkConfig,
    rng: ChaCha8Rng,
    /// (delivery time, insertion number for stable order, datagram)
    queue: BinaryHeap<Reverse<(Instant, u64, Vec<u8>)>>,
    next_id: u64,
    pub sent: u64,
    pub dropped: u64,
    /// A datagram is not dropped within this time after the previous drop (the
    /// random draw still happens), so every loss is a single one; zero by default.
    pub min_loss_gap: Duration,
    last_drop: Option<Instant>,
    /// A delay spike: datagrams sent within `from..until` are held until `until`,
    /// then take the normal delay, in the order they were sent.
    pub hold: Option<std::ops::Range<Instant>>,
    /// Probability a delivered copy is held back by [`Link::reorder_delay`] on
    /// top of its delay (netem's `reorder`, as `petrel-netem`'s `random` profile:
    /// later datagrams overtake it); zero by default, and then no draw is made.
    pub reorder: f64,
    /// Extra delay of a reordered datagram.
    pub reorder_delay: Duration,
}

impl Link {
    pub fn new(config: LinkConfig, seed: u64) -> Self {
        Self {
            config,
            rng: ChaCha8Rng::seed_from_u64(seed),
            queue: BinaryHeap::new(),
            next_id: 0,
            sent: 0,
            dropped: 0,
            min_loss_gap: Duration::ZERO,
            last_drop: None,
            hold: None,
            reorder: 0.0,
            reorder_delay: Duration::ZERO,
        }
    }

    pub fn send(&mut self, now: Instant, datagram: &[u8]) {
        self.sent += 1;
        let spaced = self
            .last_drop
            .is_none_or(|t| now.saturating_duration_since(t) >= self.min_loss_gap);
        if self.rng.gen_bool(self.config.loss) && spaced {
            self.dropped += 1;
            self.last_drop = Some(now);
            return;
        }
        let copies = if self.rng.gen_bool(self.config.duplicate) {
            2
        } else {
            1
        };
        for _ in 0..copies {
            let jitter = self.config.jitter.mul_f64(self.rng.gen::<f64>());
            let held = self.hold.as_ref().filter(|h| h.contains(&now));
            let mut at = held.map_or(now, |h| h.end) + self.config.delay + jitter;
            if self.reorder > 0.0 && self.rng.gen_bool(self.reorder) {
                at += self.reorder_delay;
            }
            self.queue
                .push(Reverse((at, self.next_id, datagram.to_vec())));
            self.next_id += 1;
        }
    }

    pub fn next_delivery(&self) -> Option<Instant> {
        self.queue.peek().map(|Reverse((at, _, _))| *at)
    }

    pub fn pop_due(&mut self, now: Instant) -> Option<Vec<u8>> {
        if self.next_delivery()? <= now {
            self.queue.pop().map(|Reverse((_, _, d))| d)
        } else {
            None
        }
    }

    pub fn is_empty(&self) -> bool {
        self.queue.is_empty()
    }
}

/// A sans-IO endpoint the simulator can drive.
pub trait Machine {
    fn poll_transmit(&mut self, now: Instant, out: &mut Vec<u8>) -> bool;
    fn poll_timeout(&self) -> Option<Instant>;
    /// Feeds a datagram; rejections are the endpoint's own business (counted).
    fn input(&mut self, now: Instant, datagram: &[u8]);
    fn handle_timeout(&mut self, now: Instant);
}

impl Machine for Kcp {
    fn poll_transmit(&mut self, now: Instant, out: &mut Vec<u8>) -> bool {
        Kcp::poll_transmit(self, now, out)
    }
    fn poll_timeout(&self) -> Option<Instant> {
        Kcp::poll_timeout(self)
    }
    fn input(&mut self, now: Instant, datagram: &[u8]) {
        // Dead endpoints reject input; that is fine here.
        let _ = Kcp::input(self, now, datagram);
    }
    fn handle_timeout(&mut self, now: Instant) {
        Kcp::handle_timeout(self, now);
    }
}

impl Machine for Session {
    fn poll_transmit(&mut self, now: Instant, out: &mut Vec<u8>) -> bool {
        Session::poll_transmit(self, now, out)
    }
    fn poll_timeout(&self) -> Option<Instant> {
        Session::poll_timeout(self)
    }
    /// Routes like the runtime in native mode: a leading zero u32 is control.
    fn input(&mut self, now: Instant, datagram: &[u8]) {
        if datagram.get(..4) == Some(&[0; 4]) {
            self.handle_control(now, datagram);
        } else {
            let _ = Session::input(self, now, datagram);
        }
    }
    fn handle_timeout(&mut self, now: Instant) {
        Session::handle_timeout(self, now);
    }
}

/// Two endpoints `a` and `b` joined by links `ab` (a → b) and `ba` (b → a).
#[derive(Debug)]
pub struct Sim<M: Machine = Kcp> {
    pub now: Instant,
    pub start: Instant,
    pub a: M,
    pub b: M,
    pub ab: Link,
    pub ba: Link,
    buf: Vec<u8>,
}

impl<M: Machine> Sim<M> {
    pub fn new(start: Instant, a: M, b: M, ab: Link, ba: Link) -> Self {
        Self {
            now: start,
            start,
            a,
            b,
            ab,
            ba,
            buf: Vec::with_capacity(2048),
        }
    }

    /// Sends everything both endpoints have to send now.
    pub fn flush(&mut self) {
        while self.a.poll_transmit(self.now, &mut self.buf) {
            self.ab.send(self.now, &self.buf);
        }
        while self.b.poll_transmit(self.now, &mut self.buf) {
            self.ba.send(self.now, &self.buf);
        }
    }

    /// The next instant anything happens, `None` when the whole system is idle.
    pub fn next_event(&self) -> Option<Instant> {
        [
            self.a.poll_timeout(),
            self.b.poll_timeout(),
            self.ab.next_delivery(),
            self.ba.next_delivery(),
        ]
        .into_iter()
        .flatten()
        .min()
    }

    /// Flushes, advances the clock to the next event (never past `limit`) and runs
    /// it. Returns false when nothing is left to happen before `limit`.
    pub fn step(&mut self, limit: Instant) -> bool {
        self.flush();
        let Some(next) = self.next_event() else {
            return false;
        };
        if next > limit {
            self.now = limit;
            return false;
        }
        self.now = self.now.max(next);
        while let Some(d) = self.ab.pop_due(self.now) {
            self.b.input(self.now, &d);
        }
        while let Some(d) = self.ba.pop_due(self.now) {
            self.a.input(self.now, &d);
        }
        if self.a.poll_timeout().is_some_and(|t| t <= self.now) {
            self.a.handle_timeout(self.now);
        }
        if self.b.poll_timeout().is_some_and(|t| t <= self.now) {
            self.b.handle_timeout(self.now);
        }
        self.flush();
        true
    }

    pub fn elapsed(&self) -> Duration {
        self.now - self.start
    }
}
