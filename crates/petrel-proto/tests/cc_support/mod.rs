//! A simulated bottleneck for congestion-control tests: N bulk flows, each a real
//! `Kcp` sender/receiver pair, share one drop-tail link; time is simulated.
//!
//! Forward path: every data datagram enters a FIFO queue of at most `queue` packets
//! (the one being serialised included; a full queue drops the arrival), is
//! serialised at `rate_bps`, then takes `one_way` to reach its receiver. Reverse path
//! (acks): `one_way`, no queue, no loss. Senders always have data (bulk transfer).
//! The loop jumps from event to event (arrivals and each endpoint's `poll_timeout`,
//! which includes the pacer's release), so a second of 200 Mbit/s costs a few tens of
//! thousands of iterations.

#![allow(dead_code, clippy::unwrap_used)]

use std::collections::VecDeque;
use std::time::{Duration, Instant};

use petrel_proto::cc::CongestionKind;
use petrel_proto::kcp::{Kcp, KcpConfig, KcpStats};

/// The bottleneck.
#[derive(Debug, Clone, Copy)]
pub struct Path {
    /// Link rate, bit/s.
    pub rate_bps: u64,
    /// One-way propagation delay (RTT = 2 × this plus serialisation).
    pub one_way: Duration,
    /// Drop-tail queue limit, packets.
    pub queue: usize,
}

impl Path {
    /// A path of `rate_bps` with `rtt` and a queue of `bdp_fraction` × BDP packets of
    /// `mtu` bytes (at least 2).
    pub fn with_bdp_queue(rate_bps: u64, rtt: Duration, bdp_fraction: f64, mtu: usize) -> Self {
        let bdp_packets = rate_bps as f64 / 8.0 * rtt.as_secs_f64() / mtu as f64;
        Self {
            rate_bps,
            one_way: rtt / 2,
            queue: ((bdp_packets * bdp_fraction).round() as usize).max(2),
        }
    }

    /// Payload bytes/s the link can carry with full datagrams of `mtu` bytes.
    pub fn payload_capacity(&self, mtu: usize) -> f64 {
        self.rate_bps as f64 / 8.0 * (mtu - 24) as f64 / mtu as f64
    }
}

/// The KCP config of every flow: `congestion`, windows large enough not to limit a
/// few BDPs, the default nodelay profile otherwise.
pub fn flow_config(congestion: CongestionKind) -> KcpConfig {
    KcpConfig {
        congestion,
        snd_wnd: 8192,
        rcv_wnd: 8192,
        send_queue_limit: 256,
        ..KcpConfig::default()
    }
}

struct Flow {
    sender: Kcp,
    receiver: Kcp,
    start: Instant,
    /// Payload bytes delivered to the receiving application, total.
    received: u64,
    deadline: [Option<Instant>; 2],
}

/// One bottleneck and its flows.
pub struct Dumbbell {
    pub now: Instant,
    pub path: Path,
    flows: Vec<Flow>,
    /// Departure times of the packets in the queue (front: being serialised).
    queue: VecDeque<Instant>,
    last_departure: Instant,
    forward: VecDeque<(Instant, usize, Vec<u8>)>,
    reverse: VecDeque<(Instant, usize, Vec<u8>)>,
    pool: Vec<Vec<u8>>,
    message: Vec<u8>,
    /// Datagrams the full queue dropped.
    pub drops: u64,
    /// Most packets ever in the queue.
    pub max_queue: usize,
    /// Loop iterations (to keep the simulator honest about its cost).
    pub iterations: u64,
}

impl Dumbbell {
    pub fn new(path: Path, start: Instant) -> Self {
        Self {
            now: start,
            path,
            flows: Vec::new(),
            queue: VecDeque::new(),
            last_departure: start,
            forward: VecDeque::new(),
            reverse: VecDeque::new(),
            pool: Vec::new(),
            message: Vec::new(),
            drops: 0,
            max_queue: 0,
            iterations: 0,
        }
    }

    /// Adds a bulk flow starting at `start` (conv = its index + 1).
    pub fn add_flow(&mut self, config: KcpConfig, start: Instant) -> usize {
        let conv = self.flows.len() as u32 + 1;
        let sender = Kcp::new(conv, config, start).unwrap();
        let receiver = Kcp::new(conv, config, start).unwrap();
        self.message = vec![0x5a; sender.mss()];
        self.flows.push(Flow {
            sender,
            receiver,
            start,
            received: 0,
            deadline: [Some(start), None],
        });
        self.flows.len() - 1
    }

    /// Payload bytes delivered to flow `i`'s receiving application so far.
    pub fn received(&self, i: usize) -> u64 {
        self.flows[i].received
    }

    pub fn sender_stats(&self, i: usize) -> KcpStats {
        self.flows[i].sender.stats()
    }

    fn enqueue(&mut self, flow: usize, datagram: Vec<u8>) {
        while self.queue.front().is_some_and(|&d| d <= self.now) {
            self.queue.pop_front();
        }
        if self.queue.len() >= self.path.queue {
            self.drops += 1;
            self.pool.push(datagram);
            return;
        }
        let bits = datagram.len() as u128 * 8;
        let tx =
            Duration::from_nanos((bits * 1_000_000_000 / u128::from(self.path.rate_bps)) as u64);
        let departure = self.now.max(self.last_departure) + tx;
        self.last_departure = departure;
        self.queue.push_back(departure);
        self.max_queue = self.max_queue.max(self.queue.len());
        self.forward
            .push_back((departure + self.path.one_way, flow, datagram));
    }

    fn buffer(&mut self) -> Vec<u8> {
        self.pool.pop().unwrap_or_default()
    }

    /// Runs the simulation until `end`.
    pub fn run_until(&mut self, end: Instant) {
        let mut touched = vec![[false; 2]; self.flows.len()];
        loop {
            let next = self.next_event();
            match next {
                Some(t) if t <= end => self.now = self.now.max(t),
                _ => {
                    self.now = end;
                    return;
                }
            }
            self.iterations += 1;
            for t in touched.iter_mut() {
                *t = [false; 2];
            }
            while self
                .forward
                .front()
                .is_some_and(|(at, _, _)| *at <= self.now)
            {
                let (_, i, d) = self.forward.pop_front().unwrap();
                let _ = self.flows[i].receiver.input(self.now, &d);
                touched[i][1] = true;
                self.pool.push(d);
            }
            while self
                .reverse
                .front()
                .is_some_and(|(at, _, _)| *at <= self.now)
            {
                let (_, i, d) = self.reverse.pop_front().unwrap();
                let _ = self.flows[i].sender.input(self.now, &d);
                touched[i][0] = true;
                self.pool.push(d);
            }
            for (flow, t) in self.flows.iter().zip(touched.iter_mut()) {
                for (deadline, side) in flow.deadline.iter().zip(t.iter_mut()) {
                    if deadline.is_some_and(|d| d <= self.now) {
                        *side = true;
                    }
                }
            }
            for (i, t) in touched.iter().enumerate() {
                if self.flows[i].start > self.now {
                    continue;
                }
                if t[0] {
                    self.drive_sender(i);
                }
                if t[1] {
                    self.drive_receiver(i);
                }
            }
        }
    }

    fn drive_sender(&mut self, i: usize) {
        let now = self.now;
        let mss = self.message.len();
        let flow = &mut self.flows[i];
        if flow.deadline[0].is_some_and(|d| d <= now) {
            flow.sender.handle_timeout(now);
        }
        while flow.sender.can_send(mss) {
            flow.sender.send(&self.message).unwrap();
        }
        loop {
            let mut out = self.pool.pop().unwrap_or_default();
            if !self.flows[i].sender.poll_transmit(now, &mut out) {
                self.pool.push(out);
                break;
            }
            self.enqueue(i, out);
        }
        let flow = &mut self.flows[i];
        flow.deadline[0] = flow.sender.poll_timeout();
    }

    fn drive_receiver(&mut self, i: usize) {
        let now = self.now;
        let flow = &mut self.flows[i];
        if flow.deadline[1].is_some_and(|d| d <= now) {
            flow.receiver.handle_timeout(now);
        }
        while let Some(m) = flow.receiver.recv() {
            flow.received += m.len() as u64;
        }
        loop {
            let mut out = self.buffer();
            if !self.flows[i].receiver.poll_transmit(now, &mut out) {
                self.pool.push(out);
                break;
            }
            let at = now + self.path.one_way;
            self.reverse.push_back((at, i, out));
        }
        let flow = &mut self.flows[i];
        flow.deadline[1] = flow.receiver.poll_timeout();
    }

    fn next_event(&self) -> Option<Instant> {
        let arrivals = [
            self.forward.front().map(|(t, _, _)| *t),
            self.reverse.front().map(|(t, _, _)| *t),
        ];
        let deadlines = self
            .flows
            .iter()
            .flat_map(|f| f.deadline.iter().copied())
            .flatten();
        arrivals.into_iter().flatten().chain(deadlines).min()
    }
}

/// Goodput of flow `i` between two instants of a run, bytes/s: run to `from`, note,
/// run to `to`.
pub fn measure(sim: &mut Dumbbell, from: Instant, to: Instant) -> Vec<f64> {
    sim.run_until(from);
    let before: Vec<u64> = (0..sim.flows.len()).map(|i| sim.received(i)).collect();
    sim.run_until(to);
    let secs = (to - from).as_secs_f64();
    before
        .iter()
        .enumerate()
        .map(|(i, b)| (sim.received(i) - b) as f64 / secs)
        .collect()
}
