//! petrel-proto's connection establishment and control plane (spec `kcp.md`
//! §3): the native and legacy message decoders, a server and a client
//! handshake in every mode talking to each other through a path the fuzzer
//! can drop from and inject into, and the per-connection `Control` fed
//! arbitrary control datagrams. Asserted:
//!
//! - a decoded native or legacy message encodes to bytes that decode to it;
//! - the server's replies before a connection exists are no larger than the
//!   datagram that caused them (no amplification), and decode;
//! - on a clean path the handshake completes on both sides with one conv;
//! - no state machine sends more than a handful of datagrams per input.
#![no_main]

use std::net::SocketAddr;
use std::time::{Duration, Instant};

use libfuzzer_sys::arbitrary::{self, Arbitrary};
use libfuzzer_sys::fuzz_target;
use petrel_proto::handshake::{
    Binding, ClientHandshake, Control, ControlConfig, Established, HandshakeMode, KcpGoConfig,
    LegacyConfig, LegacyMessage, NativeConfig, NativeMessage, ServerEvent, ServerHandshake,
    RAW_PARAMS,
};

#[derive(Arbitrary, Debug)]
struct Input {
    mode: u8,
    seed: u64,
    steps: Vec<Step>,
}

#[derive(Arbitrary, Debug)]
enum Step {
    /// Time passes; both sides resend or time out.
    Advance(u16),
    /// The client's next datagram reaches the server (or is lost).
    ClientToServer { lose: bool },
    /// A datagram from anyone reaches the server.
    InjectServer(Vec<u8>),
    /// A datagram reaches the client.
    InjectClient(Vec<u8>),
    /// A control datagram reaches an established connection's control plane.
    Control(Vec<u8>),
}

fn mode(b: u8) -> HandshakeMode {
    match b % 4 {
        0 => HandshakeMode::Native(NativeConfig::default()),
        1 => HandshakeMode::Legacy(LegacyConfig::default()),
        2 => HandshakeMode::KcpGo(KcpGoConfig::default()),
        _ => HandshakeMode::Raw { conv: 7 },
    }
}

fn round_trips(d: &[u8]) {
    if let Ok(m) = NativeMessage::decode(d) {
        let mut out = Vec::new();
        m.encode(&mut out);
        assert_eq!(NativeMessage::decode(&out).as_ref(), Ok(&m));
    }
    if let Ok(m) = LegacyMessage::decode(d) {
        let mut out = Vec::new();
        m.encode(&mut out);
        assert_eq!(out, d);
    }
}

fuzz_target!(|input: Input| {
    let mode = mode(input.mode);
    let t0 = Instant::now();
    let mut now = t0;
    let peer: SocketAddr = "192.0.2.1:4000".parse().expect("an address");
    let mut server = ServerHandshake::new(mode, [7; 32], input.seed).expect("valid mode");
    let mut client =
        ClientHandshake::new(mode, now, 1_700_000_000_000, input.seed).expect("valid mode");
    let established = Established {
        conv: 9,
        params: RAW_PARAMS,
        binding: match mode {
            HandshakeMode::Native(_) => Binding::Native { nonce: 1, token: 2 },
            HandshakeMode::Legacy(_) => Binding::Legacy { sync_id: 3 },
            HandshakeMode::Raw { .. } | HandshakeMode::KcpGo(_) => Binding::Raw,
        },
    };
    let mut control = Control::new(&established, ControlConfig::default(), now).expect("valid");
    let (mut reply, mut out) = (Vec::new(), Vec::new());
    let mut clean = true;
    let mut accepted = None;
    for step in &input.steps {
        match step {
            Step::Advance(ms) => {
                now += Duration::from_millis(u64::from(*ms));
                let _ = client.handle_timeout(now);
                let _ = control.handle_timeout(now);
            }
            Step::ClientToServer { lose } => {
                if !client.poll_transmit(now, &mut out) {
                    continue;
                }
                round_trips(&out);
                if *lose {
                    clean = false;
                    continue;
                }
                match server.handle(now, peer, &out, &mut reply) {
                    ServerEvent::Accept(e) => accepted = Some(e.conv),
                    ServerEvent::Reply(_) => assert!(reply.len() <= out.len()),
                    ServerEvent::Drop(_) => assert!(reply.is_empty()),
                }
                if !reply.is_empty() {
                    round_trips(&reply);
                    let _ = client.handle_input(now, &reply);
                }
            }
            Step::InjectServer(d) => {
                round_trips(d);
                let _ = mode.classify(d);
                match server.handle(now, peer, d, &mut reply) {
                    ServerEvent::Accept(_) => {}
                    ServerEvent::Reply(_) => assert!(reply.len() <= d.len()),
                    ServerEvent::Drop(_) => assert!(reply.is_empty()),
                }
            }
            Step::InjectClient(d) => {
                round_trips(d);
                clean = false;
                let _ = client.handle_input(now, d);
            }
            Step::Control(d) => {
                round_trips(d);
                control.on_datagram_received(now);
                let _ = control.handle_control(now, d);
            }
        }
        let mut sent = 0;
        while control.poll_transmit(now, &mut out) {
            sent += 1;
            assert!(sent <= 8, "control sent {sent} datagrams at once");
        }
        if let Some(t) = control.poll_timeout() {
            assert!(t >= t0);
        }
        let _ = (
            server.stats(),
            client.ignored(),
            control.state(),
            control.stats(),
        );
    }
    // A handshake the fuzzer left alone agrees on the conv at both ends.
    if let (true, Some(conv), Some(e)) = (clean, accepted, client.established()) {
        // Raw and kcp-go modes exchange nothing: the server takes the conv of
        // whatever datagram it was fed.
        if !matches!(mode, HandshakeMode::Raw { .. } | HandshakeMode::KcpGo(_)) {
            assert_eq!(e.conv, conv);
        }
    }
});
