//! The edge's one UDP socket, read by one thread (draarl-interconnect §2,
//! §4.3 edge part, §7; draarl-v1 §2.2, §3.4): Type 0 is checked by the
//! data plane before device handling; from the centre's UDP host it
//! bypasses the device rate limits, from anywhere else it is charged to
//! them first (forged Type 0 gets no exemption); device datagrams are
//! rate-limited per IP and per IP:port, then decided under the edge
//! state's lock; the device side's timers run on the same thread.
//!
//! ```text
//!  recv ─▶ Type 0 shape? ─yes─▶ (not the centre's host: Ingress) ─▶ DataPlane(Edge)::handle_datagram
//!    │                              ─Queued─▶ poll_accepted ├ 0x31 ─▶ EdgeDevices::handle_downstream (§4.7)
//!    │                                                      └ 0x20/0x21/0x23/0x28 ─▶ handle_control
//!    └─no─▶ Ingress (per-IP / per-IP:port token buckets) ─▶ EdgeDevices::handle_device
//!  every ≤ 10 ms: EdgeDevices::handle_timeout (claims, parked downstream, session sweep)
//!  ICMP error queue (IP_RECVERR, `icmp.rs`) ─▶ unreachable address ─▶ EdgeDevices::handle_unreachable
//!  actions ─▶ EdgeOutput (after the lock is released)
//! ```

use std::net::{SocketAddr, UdpSocket};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering::Relaxed};
use std::sync::mpsc::Receiver;
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::time::{Duration, Instant};

use petrel_sys::error_queue::is_deferred_error;

use super::super::icmp::{IcmpWatch, Report};
use super::super::wall_clock::unix_ms;
use super::edge_node::EdgeState;
use super::edge_output::EdgeOutput;
use crate::codec::interconnect::{is_truncated_envelope, peek, Subtype};
use crate::core::interconnect::{Accepted, DataPlane, EdgeAction, MessageIds, Verdict};
use crate::core::{Ingress, IngressStats};

/// Receive buffer: larger datagrams are cut and then fail their length
/// checks (devices ≤ 800 bytes, Type 0 ≤ 1400).
const RECV_BUF: usize = 2048;
/// Longest time between two runs of the device side's timers (the wait
/// rule re-checks every 20 ms, §4.7).
pub(super) const TIMER_TICK: Duration = Duration::from_millis(10);
/// How often idle rate-limit buckets are forgotten.
const SWEEP_EVERY: Duration = Duration::from_secs(5);
/// How often the rate-limit counters are published.
const PUBLISH_EVERY: Duration = Duration::from_millis(100);

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(PoisonError::into_inner)
}

macro_rules! reader_counters {
    ($($(#[$doc:meta])* $name:ident,)*) => {
        /// Counters of the edge's socket reader.
        #[derive(Debug, Default)]
        pub(crate) struct ReaderCounters { $($name: AtomicU64,)* }

        /// A copy of the reader's counters.
        #[derive(Debug, Clone, Default, PartialEq, Eq)]
        pub struct EdgeReaderStats {
            $($(#[$doc])* pub $name: u64,)*
        }

        impl ReaderCounters {
            pub(crate) fn snapshot(&self) -> EdgeReaderStats {
                EdgeReaderStats { $($name: self.$name.load(Relaxed),)* }
            }
        }

        impl EdgeReaderStats {
            /// Every counter with its name, for metrics export.
            pub fn counters(&self) -> Vec<(&'static str, u64)> {
                vec![$((stringify!($name), self.$name),)*]
            }
        }
    };
}

reader_counters! {
    /// Datagrams read.
    datagrams,
    /// Type 0 shaped datagrams read.
    type0,
    /// Type 0 frames accepted by the data plane.
    type0_accepted,
    /// Type 0 shaped datagrams refused before authentication (no
    /// session, bad tag, identity, expired, replayed).
    type0_not_consumed,
    /// Type 0 frames refused after authentication (budget, queue,
    /// subtype, relay decode).
    type0_dropped,
    /// Accepted RelayDownstream frames handed to the wait rule.
    downstream,
    /// Accepted frames of subtypes the UDP path does not carry (route
    /// sync, DataBind, heartbeats).
    type0_unexpected,
    /// Device datagrams handed to the device side (after rate limits).
    device_datagrams,
    /// Socket receive errors other than timeouts.
    recv_errors,
}

/// The reader's side of the edge.
pub(super) struct EdgeReader {
    pub(super) sock: UdpSocket,
    pub(super) ingress: Ingress,
    pub(super) state: Arc<Mutex<EdgeState>>,
    pub(super) data: Arc<Mutex<DataPlane>>,
    pub(super) ids: Arc<Mutex<MessageIds>>,
    pub(super) output: Arc<EdgeOutput>,
    /// The centre's UDP address (`CenterUDP`): Type 0 from its host is
    /// not charged to the device rate limits.
    pub(super) centre_udp: Option<SocketAddr>,
    pub(super) stop: Arc<AtomicBool>,
    pub(super) counters: Arc<ReaderCounters>,
    pub(super) ingress_stats: Arc<Mutex<IngressStats>>,
    /// Drains the socket's error queue (as a single node's reader does).
    pub(super) icmp: IcmpWatch,
    /// Where `icmp` reports unreachable addresses.
    pub(super) unreachable: Receiver<Report>,
}

/// Runs until `stop` is set.
pub(super) fn reader_loop(mut r: EdgeReader) {
    let mut buf = vec![0u8; RECV_BUF];
    let mut actions: Vec<EdgeAction> = Vec::new();
    let mut accepted: Vec<Accepted> = Vec::new();
    let mut next_timer = Instant::now();
    let mut next_sweep = next_timer + SWEEP_EVERY;
    let mut next_publish = next_timer;
    let c = Arc::clone(&r.counters);
    while !r.stop.load(Relaxed) {
        let mut icmp_due = false;
        match r.sock.recv_from(&mut buf) {
            Ok((n, src)) => {
                c.datagrams.fetch_add(1, Relaxed);
                let now = Instant::now();
                let wall = unix_ms();
                let datagram = &buf[..n];
                let from_centre = r.centre_udp.is_some_and(|a| a.ip() == src.ip());
                if peek(datagram).is_some() || is_truncated_envelope(datagram) {
                    c.type0.fetch_add(1, Relaxed);
                    if from_centre || r.ingress.admit(now, src, datagram).is_some() {
                        r.type0(now, wall, src, datagram, &mut accepted, &mut actions);
                    }
                } else if r.ingress.admit(now, src, datagram).is_some() {
                    c.device_datagrams.fetch_add(1, Relaxed);
                    let mut s = lock(&r.state);
                    let s = &mut *s;
                    s.devices.handle_device(
                        &mut s.link,
                        &mut lock(&r.ids),
                        now,
                        wall,
                        src,
                        datagram,
                    );
                    s.devices.take_actions(&mut actions);
                }
            }
            Err(e)
                if matches!(
                    e.kind(),
                    std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut
                ) => {}
            // An ICMP error queued for an earlier send.
            Err(e) if is_deferred_error(&e) => icmp_due = true,
            Err(_) => {
                c.recv_errors.fetch_add(1, Relaxed);
            }
        }
        let now = Instant::now();
        r.icmp.poll(&r.sock, now, icmp_due);
        r.unreachable_reports(&mut actions);
        if now >= next_timer {
            let mut s = lock(&r.state);
            s.devices.handle_timeout(&mut lock(&r.ids), now, unix_ms());
            s.devices.take_actions(&mut actions);
            next_timer = s
                .devices
                .poll_timeout()
                .map_or(now + TIMER_TICK, |t| t.min(now + TIMER_TICK));
        }
        r.carry_out(&mut actions);
        if now >= next_sweep {
            next_sweep = now + SWEEP_EVERY;
            r.ingress.sweep(now);
        }
        if now >= next_publish {
            next_publish = now + PUBLISH_EVERY;
            *lock(&r.ingress_stats) = r.ingress.stats().clone();
        }
    }
}

impl EdgeReader {
    /// A Type 0 shaped datagram: the data plane's pipeline, then the
    /// accepted frames to the device side.
    fn type0(
        &mut self,
        now: Instant,
        wall: i64,
        src: SocketAddr,
        datagram: &[u8],
        accepted: &mut Vec<Accepted>,
        actions: &mut Vec<EdgeAction>,
    ) {
        let c = &self.counters;
        {
            let mut data = lock(&self.data);
            match data.handle_datagram(now, wall, src, datagram) {
                Verdict::Queued | Verdict::Bound(_) => {}
                Verdict::Rejected(r) if r.is_consumed() => {
                    c.type0_dropped.fetch_add(1, Relaxed);
                }
                Verdict::Rejected(_) | Verdict::NotType0 => {
                    c.type0_not_consumed.fetch_add(1, Relaxed);
                }
            }
            accepted.extend(std::iter::from_fn(|| data.poll_accepted(now)));
        }
        if accepted.is_empty() {
            return;
        }
        let mut s = lock(&self.state);
        let mut ids = lock(&self.ids);
        for a in accepted.drain(..) {
            c.type0_accepted.fetch_add(1, Relaxed);
            if a.header.subtype == Subtype::RELAY_DOWNSTREAM {
                c.downstream.fetch_add(1, Relaxed);
                s.devices.handle_downstream(now, a);
            } else if !s
                .devices
                .handle_control(&mut ids, now, wall, &a.header, &a.payload)
            {
                c.type0_unexpected.fetch_add(1, Relaxed);
            }
        }
        s.devices.take_actions(actions);
    }

    /// Ends the sessions of the addresses the error queue reported
    /// unreachable.
    fn unreachable_reports(&self, actions: &mut Vec<EdgeAction>) {
        let mut reports = self.unreachable.try_iter().peekable();
        if reports.peek().is_none() {
            return;
        }
        let mut s = lock(&self.state);
        let mut ids = lock(&self.ids);
        let wall = unix_ms();
        for (at, addr) in reports {
            s.devices.handle_unreachable(&mut ids, at, wall, addr);
        }
        s.devices.take_actions(actions);
    }

    fn carry_out(&self, actions: &mut Vec<EdgeAction>) {
        if actions.is_empty() {
            return;
        }
        let failed = self.output.run(actions);
        if !failed.is_empty() {
            let now = Instant::now();
            let mut s = lock(&self.state);
            for domain in failed {
                s.devices.claim_send_failed(now, domain);
            }
        }
    }
}
