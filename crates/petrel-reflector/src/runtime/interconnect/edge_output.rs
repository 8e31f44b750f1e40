//! Carrying out the edge's device actions (draarl-interconnect §3.8,
//! §4.5, §5.1, §5.3): replies to devices and Type 0 datagrams to the
//! centre leave from the one device socket (§2), control messages go to
//! the control client, frames to the fan-out engine, and each upstream
//! relay is sealed by the data plane.
//!
//! ```text
//!  EdgeAction::Reply ──────▶ device socket ─▶ device
//!  EdgeAction::Control ────▶ EdgeControl (type0 over TLS)
//!  EdgeAction::Claim ──────▶ EdgeControl │ not queued ─▶ returned (claim_send_failed)
//!  EdgeAction::Fanout ─────▶ FanoutEngine (whole-frame queue, send threads)
//!  EdgeAction::Upstream ───▶ DataPlane::relay_upstream ─▶ Path::Udp ─▶ device socket ─▶ centre UDP
//!                                                     └▶ Path::Control ─▶ EdgeControl (type0)
//! ```
//!
//! Shared by the reader thread and the edge node's task; holds no lock
//! while sending.

use std::net::UdpSocket;
use std::sync::atomic::{AtomicU64, Ordering::Relaxed};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};

use super::super::fanout::FanoutEngine;
use super::super::wall_clock::unix_ms;
use super::edge::EdgeControl;
use crate::codec::interconnect::RelayFrame;
use crate::core::interconnect::{DataPlane, EdgeAction, MessageIds, Outbound, Path, Upstream};

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(PoisonError::into_inner)
}

macro_rules! output_counters {
    ($($(#[$doc:meta])* $name:ident,)*) => {
        #[derive(Debug, Default)]
        struct Counters { $($name: AtomicU64,)* }

        /// Counters of what the edge sent on behalf of its device side.
        #[derive(Debug, Clone, Default, PartialEq, Eq)]
        pub struct EdgeOutputStats {
            $($(#[$doc])* pub $name: u64,)*
        }

        impl Counters {
            fn snapshot(&self) -> EdgeOutputStats {
                EdgeOutputStats { $($name: self.$name.load(Relaxed),)* }
            }
        }

        impl EdgeOutputStats {
            /// Every counter with its name, for metrics export.
            pub fn counters(&self) -> Vec<(&'static str, u64)> {
                vec![$((stringify!($name), self.$name),)*]
            }
        }
    };
}

output_counters! {
    /// Datagrams sent to devices (heartbeat answers, auth replies).
    replies_sent,
    /// Datagrams to devices the socket refused.
    reply_errors,
    /// Control messages queued to the centre (claims included).
    control_sent,
    /// Control messages that could not be queued (no session, full queue).
    control_failures,
    /// Frames handed to the local fan-out engine.
    fanout_frames,
    /// RelayUpstream envelopes sealed.
    upstream_sealed,
    /// RelayUpstream envelopes that could not be sealed (no centre session).
    upstream_build_errors,
    /// Type 0 datagrams sent to the centre over UDP (upstream, proofs).
    udp_sent,
    /// Type 0 datagrams the socket refused.
    udp_errors,
    /// Type 0 envelopes sent over the control connection (no `CenterUDP`).
    control_path_sent,
    /// Type 0 envelopes for the control path that could not be queued
    /// (session replaced or gone, full queue).
    control_path_failures,
}

/// Where the device side's actions go.
#[derive(Debug)]
pub(crate) struct EdgeOutput {
    sock: UdpSocket,
    engine: Arc<FanoutEngine>,
    control: Arc<EdgeControl>,
    data: Arc<Mutex<DataPlane>>,
    ids: Arc<Mutex<MessageIds>>,
    counters: Counters,
}

impl EdgeOutput {
    /// Sends from `sock` (the device socket), fans out through `engine`,
    /// reaches the centre through `control` and its data plane.
    pub(crate) fn new(
        sock: UdpSocket,
        engine: Arc<FanoutEngine>,
        control: Arc<EdgeControl>,
    ) -> Self {
        let data = control.data_plane();
        let ids = control.message_ids();
        Self {
            sock,
            engine,
            control,
            data,
            ids,
            counters: Counters::default(),
        }
    }

    /// Current counters.
    pub(crate) fn stats(&self) -> EdgeOutputStats {
        self.counters.snapshot()
    }

    /// Carries out and empties `actions`; returns the domains whose speaker
    /// claim could not be queued (for `EdgeDevices::claim_send_failed`).
    pub(crate) fn run(&self, actions: &mut Vec<EdgeAction>) -> Vec<u64> {
        let c = &self.counters;
        let mut failed = Vec::new();
        let mut upstream: Vec<Upstream> = Vec::new();
        for action in actions.drain(..) {
            match action {
                EdgeAction::Reply(t) => match self.sock.send_to(&t.payload, t.dst) {
                    Ok(_) => c.replies_sent.fetch_add(1, Relaxed),
                    Err(_) => c.reply_errors.fetch_add(1, Relaxed),
                },
                EdgeAction::Control(send) => match self.control.send_control(&send) {
                    Ok(()) => c.control_sent.fetch_add(1, Relaxed),
                    Err(_) => c.control_failures.fetch_add(1, Relaxed),
                },
                EdgeAction::Claim { domain, send } => match self.control.send_control(&send) {
                    Ok(()) => c.control_sent.fetch_add(1, Relaxed),
                    Err(_) => {
                        failed.push(domain);
                        c.control_failures.fetch_add(1, Relaxed)
                    }
                },
                EdgeAction::Fanout(frame) => {
                    self.engine.submit(frame);
                    c.fanout_frames.fetch_add(1, Relaxed)
                }
                EdgeAction::Upstream(u) => {
                    upstream.push(u);
                    0
                }
            };
        }
        if !upstream.is_empty() {
            self.seal_upstream(&upstream);
            self.send_outbound();
        }
        failed
    }

    fn seal_upstream(&self, upstream: &[Upstream]) {
        let wall = unix_ms();
        let mut ids = lock(&self.ids);
        let mut data = lock(&self.data);
        for u in upstream {
            let relay = RelayFrame {
                header: u.header,
                inner: &u.inner,
            };
            let counter = match data.relay_upstream(
                &mut ids,
                wall,
                u.header.required_projection_version,
                &relay,
            ) {
                Ok(()) => &self.counters.upstream_sealed,
                Err(_) => &self.counters.upstream_build_errors,
            };
            counter.fetch_add(1, Relaxed);
        }
    }

    /// Sends every envelope the data plane has queued (upstream relays,
    /// DataBind proofs).
    pub(crate) fn send_outbound(&self) {
        let out: Vec<Outbound> = {
            let mut data = lock(&self.data);
            std::iter::from_fn(|| data.poll_transmit()).collect()
        };
        let c = &self.counters;
        for o in out {
            match o.path {
                Path::Udp(addr) => match self.sock.send_to(&o.datagram, addr) {
                    Ok(_) => c.udp_sent.fetch_add(1, Relaxed),
                    Err(_) => c.udp_errors.fetch_add(1, Relaxed),
                },
                Path::Control => match self.control.send_sealed_envelope(o.session_id, &o.datagram)
                {
                    Ok(()) => c.control_path_sent.fetch_add(1, Relaxed),
                    Err(_) => c.control_path_failures.fetch_add(1, Relaxed),
                },
            };
        }
    }
}
