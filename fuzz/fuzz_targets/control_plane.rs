//! The per-connection control plane (keepalive, idle timeout, close; spec
//! `kcp.md` §3–4) in every binding, fed its peer's real control datagrams,
//! arbitrary ones, time, data arrivals and close requests. Asserted:
//!
//! - a bounded number of datagrams per step, each of a control message's size;
//! - once closed, the control plane stays closed and asks for no timer;
//! - with a live peer answering keepalives and no injected datagrams, the
//!   idle timeout never fires while the peer keeps talking.
#![no_main]

use std::time::{Duration, Instant};

use libfuzzer_sys::arbitrary::{self, Arbitrary};
use libfuzzer_sys::fuzz_target;
use petrel_proto::handshake::{
    Binding, Control, ControlConfig, ControlError, ControlState, Established, RAW_PARAMS,
};

#[derive(Arbitrary, Debug)]
struct Input {
    binding: u8,
    steps: Vec<Step>,
}

#[derive(Arbitrary, Debug)]
enum Step {
    /// The peer's next control datagram arrives (or is lost).
    FromPeer { lose: bool },
    /// An arbitrary control datagram arrives.
    Inject(Vec<u8>),
    /// A data datagram of the connection arrived (proves the peer alive).
    Data,
    /// Time passes.
    Advance(u16),
    /// This side starts a graceful close.
    Close,
}

/// Longest control message of any binding (native KEEPALIVE / CLOSE), bytes.
const CONTROL_MAX: usize = 64;
const SENDS_PER_STEP: usize = 16;

fn established(b: u8) -> Established {
    let binding = match b % 3 {
        0 => Binding::Native { nonce: 1, token: 2 },
        1 => Binding::Legacy { sync_id: 3 },
        _ => Binding::Raw,
    };
    Established {
        conv: 7,
        params: RAW_PARAMS,
        binding,
    }
}

fn drain(c: &mut Control, now: Instant, out: &mut Vec<Vec<u8>>) {
    let mut d = Vec::new();
    let mut n = 0;
    while c.poll_transmit(now, &mut d) {
        assert!(!d.is_empty() && d.len() <= CONTROL_MAX, "{} bytes", d.len());
        n += 1;
        assert!(n <= SENDS_PER_STEP, "unbounded control sends");
        out.push(d.clone());
    }
}

fuzz_target!(|input: Input| {
    let est = established(input.binding);
    let cfg = ControlConfig::default();
    let mut now = Instant::now();
    let mut ours = Control::new(&est, cfg.clone(), now).expect("valid control config");
    let mut peer = Control::new(&est, cfg.clone(), now).expect("valid control config");
    let (mut to_us, mut to_peer) = (Vec::new(), Vec::new());
    let mut injected = false;
    let mut last_heard = now;
    for step in input.steps {
        let closed_before = ours.state() == ControlState::Closed;
        match step {
            Step::FromPeer { lose } => {
                drain(&mut peer, now, &mut to_us);
                if !to_us.is_empty() {
                    let d = to_us.remove(0);
                    if !lose {
                        ours.handle_control(now, &d);
                        last_heard = now;
                    }
                }
            }
            Step::Inject(d) => {
                injected = true;
                ours.handle_control(now, &d);
            }
            Step::Data => {
                ours.on_datagram_received(now);
                last_heard = now;
            }
            Step::Advance(ms) => {
                now += Duration::from_millis(u64::from(ms));
                if ours.poll_timeout().is_some_and(|t| t <= now) {
                    if let Some(ControlError::IdleTimeout(_)) = ours.handle_timeout(now) {
                        if !injected {
                            assert!(
                                now.duration_since(last_heard) >= cfg.idle_timeout,
                                "idle timeout while the peer was heard"
                            );
                        }
                    }
                }
                if peer.poll_timeout().is_some_and(|t| t <= now) {
                    let _ = peer.handle_timeout(now);
                }
            }
            Step::Close => ours.start_close(now),
        }
        drain(&mut ours, now, &mut to_peer);
        for d in to_peer.drain(..) {
            peer.handle_control(now, &d);
        }
        if closed_before {
            assert_eq!(ours.state(), ControlState::Closed, "reopened after close");
        }
        if ours.state() == ControlState::Closed {
            assert_eq!(ours.poll_timeout(), None);
        }
        if to_us.len() > 1024 {
            to_us.drain(..512);
        }
    }
});
