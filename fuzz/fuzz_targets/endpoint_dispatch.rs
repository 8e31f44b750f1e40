//! Endpoint dispatch without sockets. `petrel`'s router owns a tokio socket, so
//! this target drives the sans-IO layer it is built on, routed exactly as
//! `petrel::router::Router::dispatch` does: `HandshakeMode::classify`, then data
//! by `(peer, conv)` (`peek_conv`) into one `Session` per connection (raw mode:
//! the first datagram with the server's conv opens it), native and legacy
//! control by the conv they name, openings into the stateless
//! `ServerHandshake`. Datagrams come from honest client handshakes and from
//! the fuzzer, from four peers, in every mode, with and without FEC. Asserted:
//!
//! - no more connections than the endpoint's cap, and none before a handshake
//!   (native, legacy) accepted it;
//! - a server reply before a connection exists is no larger than the datagram
//!   that caused it;
//! - every datagram a session sends fits the MTU, and sends per step are
//!   bounded.
#![no_main]

use std::collections::HashMap;
use std::net::SocketAddr;
use std::time::{Duration, Instant};

use libfuzzer_sys::arbitrary::{self, Arbitrary};
use libfuzzer_sys::fuzz_target;
use petrel_proto::fec::{FecConfig, FecScheme};
use petrel_proto::handshake::{
    ClientHandshake, DatagramKind, HandshakeMode, LegacyConfig, LegacyMessage, NativeConfig,
    NativeMessage, ServerEvent, ServerHandshake,
};
use petrel_proto::session::{peek_conv, Session, SessionConfig};

#[derive(Arbitrary, Debug)]
struct Input {
    mode: u8,
    fec: bool,
    steps: Vec<Step>,
}

#[derive(Arbitrary, Debug)]
enum Step {
    /// Peer `peer`'s honest client sends its next handshake datagram.
    Client { peer: u8 },
    /// An arbitrary datagram from peer `peer`.
    Datagram { peer: u8, data: Vec<u8> },
    /// Time passes; every connection runs its timers.
    Advance(u16),
}

const RAW_CONV: u32 = 0x1234_5678;
/// The endpoint's `max_connections` in this model.
const MAX_CONNECTIONS: usize = 8;
const SENDS_PER_STEP: usize = 4096;

fn mode(b: u8) -> HandshakeMode {
    match b % 3 {
        0 => HandshakeMode::Native(NativeConfig::default()),
        1 => HandshakeMode::Legacy(LegacyConfig::default()),
        _ => HandshakeMode::Raw { conv: RAW_CONV },
    }
}

fn peer(b: u8) -> SocketAddr {
    SocketAddr::from(([192, 0, 2, b % 4], 4000 + u16::from(b % 4)))
}

struct Endpoint {
    mode: HandshakeMode,
    server: ServerHandshake,
    config: SessionConfig,
    sessions: HashMap<(SocketAddr, u32), Session>,
    reply: Vec<u8>,
    out: Vec<u8>,
}

impl Endpoint {
    /// `Router::dispatch`: one datagram from `from`.
    fn dispatch(&mut self, now: Instant, from: SocketAddr, d: &[u8]) {
        match self.mode.classify(d) {
            DatagramKind::Data => {
                let Some(conv) = peek_conv(d) else { return };
                if let Some(s) = self.sessions.get_mut(&(from, conv)) {
                    let _ = s.input(now, d);
                } else if matches!(self.mode, HandshakeMode::Raw { .. }) {
                    self.open(now, from, d);
                    if let Some(s) = self.sessions.get_mut(&(from, conv)) {
                        let _ = s.input(now, d);
                    }
                }
            }
            DatagramKind::NativeControl => match NativeMessage::decode(d) {
                Ok(
                    NativeMessage::Keepalive(r)
                    | NativeMessage::KeepaliveAck(r)
                    | NativeMessage::Close(r)
                    | NativeMessage::CloseAck(r),
                ) => {
                    if let Some(s) = self.sessions.get_mut(&(from, r.conv)) {
                        s.handle_control(now, d);
                    }
                }
                Ok(
                    NativeMessage::Retry { .. }
                    | NativeMessage::Accept { .. }
                    | NativeMessage::VersionNegotiation { .. },
                ) => {}
                _ => self.open(now, from, d),
            },
            DatagramKind::LegacyControl => match LegacyMessage::decode(d) {
                Ok(LegacyMessage::Syn { .. }) => self.open(now, from, d),
                Ok(LegacyMessage::Fin { conv, .. }) => {
                    if let Some(s) = self.sessions.get_mut(&(from, conv)) {
                        s.handle_control(now, d);
                    }
                }
                _ => {}
            },
        }
    }

    /// `Router::server_handshake`: the stateless server, then a new session.
    fn open(&mut self, now: Instant, from: SocketAddr, d: &[u8]) {
        match self.server.handle(now, from, d, &mut self.reply) {
            ServerEvent::Drop(_) => {}
            ServerEvent::Reply(_) => {
                assert!(self.reply.len() <= d.len(), "handshake reply amplifies");
            }
            ServerEvent::Accept(est) => {
                if self.sessions.len() >= MAX_CONNECTIONS
                    || self.sessions.contains_key(&(from, est.conv))
                {
                    return;
                }
                let s = Session::new(&est, &self.config, now).expect("valid session config");
                self.sessions.insert((from, est.conv), s);
            }
        }
    }

    /// Runs due timers and drains every session's sends.
    fn run(&mut self, now: Instant) {
        for s in self.sessions.values_mut() {
            if s.poll_timeout().is_some_and(|t| t <= now) {
                s.handle_timeout(now);
            }
            let mut n = 0;
            while s.poll_transmit(now, &mut self.out) {
                assert!(self.out.len() <= self.config.kcp.mtu, "over the MTU");
                n += 1;
                assert!(n <= SENDS_PER_STEP, "unbounded sends");
            }
        }
        self.sessions.retain(|_, s| !s.is_finished());
        assert!(self.sessions.len() <= MAX_CONNECTIONS);
    }
}

fuzz_target!(|input: Input| {
    let mode = mode(input.mode);
    let mut now = Instant::now();
    let fec = if input.fec {
        FecScheme::Fixed {
            data_shards: 4,
            parity_shards: 2,
        }
    } else {
        FecScheme::None
    };
    let config = SessionConfig {
        fec: FecConfig {
            scheme: fec,
            budget: 64 << 10,
            ..FecConfig::default()
        },
        ..SessionConfig::default()
    };
    let mut ep = Endpoint {
        server: ServerHandshake::new(mode, [9; 32], 1).expect("valid server config"),
        mode,
        config,
        sessions: HashMap::new(),
        reply: Vec::new(),
        out: Vec::new(),
    };
    let mut clients: HashMap<u8, ClientHandshake> = HashMap::new();
    let mut d = Vec::new();
    for step in input.steps {
        match step {
            Step::Client { peer: p } => {
                let client = clients.entry(p % 4).or_insert_with(|| {
                    ClientHandshake::new(mode, now, 1_000, u64::from(p)).expect("valid client")
                });
                if client.poll_transmit(now, &mut d) {
                    ep.reply.clear();
                    ep.dispatch(now, peer(p), &d);
                    // The server's answer (RETRY, ACCEPT, SYN-ACK) reaches the client.
                    if !ep.reply.is_empty() {
                        let _ = client.handle_input(now, &ep.reply);
                    }
                }
            }
            Step::Datagram { peer: p, data } => ep.dispatch(now, peer(p), &data),
            Step::Advance(ms) => {
                now += Duration::from_millis(u64::from(ms));
                for c in clients.values_mut() {
                    let _ = c.handle_timeout(now);
                }
            }
        }
        ep.run(now);
    }
});
