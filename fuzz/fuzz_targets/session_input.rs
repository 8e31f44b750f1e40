//! petrel-proto's `Session` (KCP over optional FEC with the control plane)
//! fed arbitrary datagram sequences: a peer session's datagrams, delivered,
//! lost, bit-flipped or mixed with injected ones, at fuzz-chosen times, in
//! every binding and FEC scheme, in Petrel's and kcp-go's framing. Asserted:
//!
//! - every datagram the session sends fits the connection's MTU, and its
//!   sends per step are bounded;
//! - a finished session has no deadline;
//! - every message it hands up fits its maximum message size;
//! - when nothing was corrupted or injected, what it hands up is exactly a
//!   prefix of what the peer sent, in order (each message once).
#![no_main]

use std::time::{Duration, Instant};

use libfuzzer_sys::arbitrary::{self, Arbitrary};
use libfuzzer_sys::fuzz_target;
use petrel_proto::fec::{FecConfig, FecScheme};
use petrel_proto::handshake::{
    Binding, DatagramKind, Established, HandshakeMode, LegacyConfig, NativeConfig, RAW_PARAMS,
};
use petrel_proto::session::{Session, SessionConfig, SessionFraming};

#[derive(Arbitrary, Debug)]
struct Input {
    binding: u8,
    fec: u8,
    steps: Vec<Step>,
}

#[derive(Arbitrary, Debug)]
enum Step {
    /// The peer queues a message of this many bytes.
    PeerSends(u16),
    /// The peer's next datagram reaches the session, lost, or with one byte
    /// changed (`(offset, xor)`).
    Deliver { lose: bool, flip: Option<(u16, u8)> },
    /// An arbitrary datagram reaches the session (as data, or as control).
    Inject { control: bool, datagram: Vec<u8> },
    /// Time passes; both sides run their timers.
    Advance(u16),
    /// The session asks for a graceful close.
    Close,
}

const CONV: u32 = 7;
/// Most datagrams one side may send for one step.
const SENDS_PER_STEP: usize = 4096;

fn established(b: u8) -> Established {
    let binding = match b % 3 {
        0 => Binding::Raw,
        1 => Binding::Native { nonce: 1, token: 2 },
        _ => Binding::Legacy { sync_id: 3 },
    };
    Established {
        conv: CONV,
        params: RAW_PARAMS,
        binding,
    }
}

fn config(b: u8) -> SessionConfig {
    let fixed = FecScheme::Fixed {
        data_shards: 4,
        parity_shards: 2,
    };
    let (scheme, framing) = match b % 4 {
        0 => (FecScheme::None, SessionFraming::Petrel),
        1 => (fixed, SessionFraming::Petrel),
        2 => (FecScheme::ADAPTIVE_DEFAULT, SessionFraming::Petrel),
        // kcp-go framing behind kcptun's crypt-none header (`Mode::KcpGo`).
        _ => (fixed, SessionFraming::KcpGo { crypt_header: true }),
    };
    SessionConfig {
        fec: FecConfig {
            scheme,
            budget: 64 << 10,
            ..FecConfig::default()
        },
        framing,
        ..SessionConfig::default()
    }
}

/// Routes like the runtime: what the binding's mode classifies as control goes
/// to the control plane, the rest is data.
fn feed(s: &mut Session, binding: Binding, now: Instant, d: &[u8]) {
    let mode = match binding {
        Binding::Native { .. } => HandshakeMode::Native(NativeConfig::default()),
        Binding::Legacy { .. } => HandshakeMode::Legacy(LegacyConfig::default()),
        Binding::Raw => HandshakeMode::Raw { conv: CONV },
    };
    if mode.classify(d) == DatagramKind::Data {
        let _ = s.input(now, d);
    } else {
        s.handle_control(now, d);
    }
}

/// Everything `s` sends now, checked against the MTU.
fn drain(s: &mut Session, now: Instant, mtu: usize, out: &mut Vec<Vec<u8>>) {
    let mut d = Vec::new();
    let mut n = 0;
    while s.poll_transmit(now, &mut d) {
        assert!(d.len() <= mtu, "{} bytes over the {mtu}-byte MTU", d.len());
        n += 1;
        assert!(n <= SENDS_PER_STEP, "unbounded sends");
        out.push(d.clone());
    }
}

fuzz_target!(|input: Input| {
    let est = established(input.binding);
    let cfg = config(input.fec);
    let mtu = cfg.kcp.mtu.min(usize::from(est.params.mtu));
    let start = Instant::now();
    let mut now = start;
    let mut s = Session::new(&est, &cfg, now).expect("valid session config");
    let mut peer = Session::new(&est, &cfg, now).expect("valid session config");
    let (mut to_s, mut to_peer) = (Vec::new(), Vec::new());
    let (mut sent, mut got) = (Vec::<Vec<u8>>::new(), Vec::<Vec<u8>>::new());
    let mut tampered = false;
    for step in input.steps {
        match step {
            Step::PeerSends(len) => {
                let len = usize::from(len).min(peer.max_message_size()).max(1);
                let msg: Vec<u8> = (0..len).map(|i| (i as u8) ^ (sent.len() as u8)).collect();
                if peer.send(&msg).is_ok() {
                    sent.push(msg);
                }
            }
            Step::Deliver { lose, flip } => {
                drain(&mut peer, now, mtu, &mut to_s);
                if !to_s.is_empty() {
                    let mut d = to_s.remove(0);
                    if let Some((at, x)) = flip {
                        if let Some(b) = d.get_mut(usize::from(at)) {
                            tampered |= x != 0;
                            *b ^= x;
                        }
                    }
                    if !lose {
                        feed(&mut s, est.binding, now, &d);
                    }
                }
            }
            Step::Inject { control, datagram } => {
                tampered = true;
                if control {
                    s.handle_control(now, &datagram);
                } else {
                    let _ = s.input(now, &datagram);
                }
            }
            Step::Advance(ms) => {
                now += Duration::from_millis(u64::from(ms));
                for side in [&mut s, &mut peer] {
                    if side.poll_timeout().is_some_and(|t| t <= now) {
                        side.handle_timeout(now);
                    }
                }
            }
            Step::Close => s.close(now),
        }
        // The session's replies (acks) reach the peer.
        drain(&mut s, now, mtu, &mut to_peer);
        for d in to_peer.drain(..) {
            feed(&mut peer, est.binding, now, &d);
        }
        while let Some(m) = s.recv() {
            assert!(m.len() <= s.max_message_size());
            got.push(m.to_vec());
        }
        if s.is_finished() {
            assert_eq!(s.poll_timeout(), None);
        }
        if to_s.len() > 4 * SENDS_PER_STEP {
            to_s.drain(..to_s.len() - SENDS_PER_STEP);
        }
    }
    if !tampered {
        assert!(got.len() <= sent.len(), "more messages than were sent");
        assert!(got.iter().zip(&sent).all(|(g, s)| g == s), "messages out of order or altered");
    }
});
