//! Deterministic simulations: full handshakes of all three modes over a
//! seeded lossy in-memory link, with a simulated clock.
#![allow(clippy::unwrap_used)]

use std::collections::VecDeque;
use std::net::SocketAddr;
use std::time::{Duration, Instant};

use petrel_proto::handshake::*;
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;

const DELAY: Duration = Duration::from_millis(20);

/// One direction of a link: fixed delay and seeded random loss.
struct Link {
    rng: ChaCha8Rng,
    loss: f64,
    queue: VecDeque<(Instant, Vec<u8>)>,
    sent: usize,
}

impl Link {
    fn new(loss: f64, seed: u64) -> Self {
        Self {
            rng: ChaCha8Rng::seed_from_u64(seed),
            loss,
            queue: VecDeque::new(),
            sent: 0,
        }
    }
    fn send(&mut self, now: Instant, d: &[u8]) {
        self.sent += 1;
        if self.rng.gen_bool(self.loss) {
            return;
        }
        self.queue.push_back((now + DELAY, d.to_vec()));
    }
    fn recv(&mut self, now: Instant) -> Option<Vec<u8>> {
        if self.queue.front()?.0 <= now {
            self.queue.pop_front().map(|(_, d)| d)
        } else {
            None
        }
    }
    fn next(&self) -> Option<Instant> {
        self.queue.front().map(|(t, _)| *t)
    }
}

fn earliest(times: impl IntoIterator<Item = Option<Instant>>) -> Option<Instant> {
    times.into_iter().flatten().min()
}

struct Outcome {
    client: Established,
    server: Established,
    elapsed: Duration,
    client_sends: usize,
}

/// Runs a client and a server (with the runtime's one-entry session map) over
/// two lossy links until the client is established or fails.
fn handshake(
    mode: HandshakeMode,
    loss_c2s: f64,
    loss_s2c: f64,
    seed: u64,
) -> Result<Outcome, HandshakeError> {
    let t0 = Instant::now();
    let peer: SocketAddr = "192.0.2.10:40000".parse().unwrap();
    let mut client = ClientHandshake::new(mode, t0, 0x1_2345_6789, seed).unwrap();
    let mut server = ServerHandshake::new(mode, [seed as u8; 32], seed ^ 0xABCD).unwrap();
    let mut session: Option<Established> = None;
    let (mut c2s, mut s2c) = (Link::new(loss_c2s, seed), Link::new(loss_s2c, seed + 1000));
    let (mut buf, mut reply) = (Vec::new(), Vec::new());
    let mut now = t0;
    loop {
        client.handle_timeout(now)?;
        while client.poll_transmit(now, &mut buf) {
            c2s.send(now, &buf);
        }
        while let Some(d) = c2s.recv(now) {
            if let Some(est) = &session {
                if server.repeat_reply(est, &d, &mut reply) {
                    s2c.send(now, &reply);
                }
                continue;
            }
            match server.handle(now, peer, &d, &mut reply) {
                ServerEvent::Reply(_) => s2c.send(now, &reply),
                ServerEvent::Accept(est) => {
                    s2c.send(now, &reply);
                    session = Some(est);
                }
                ServerEvent::Drop(reason) => {
                    panic!("server dropped a genuine datagram: {reason:?}")
                }
            }
        }
        while let Some(d) = s2c.recv(now) {
            if let Some(est) = client.handle_input(now, &d)? {
                return Ok(Outcome {
                    client: est,
                    server: session.unwrap(),
                    elapsed: now - t0,
                    client_sends: c2s.sent,
                });
            }
        }
        now = earliest([client.poll_timeout(), c2s.next(), s2c.next()])
            .expect("client is connecting");
    }
}

#[test]
fn native_handshake_lossless_takes_two_round_trips() {
    let out = handshake(HandshakeMode::Native(NativeConfig::default()), 0.0, 0.0, 1).unwrap();
    assert_eq!(out.elapsed, DELAY * 4);
    assert_eq!(out.client_sends, 2);
    assert_eq!(out.client.conv, out.server.conv);
    assert_ne!(out.client.conv, 0);
    let (
        Binding::Native {
            nonce: cn,
            token: ct,
        },
        Binding::Native {
            nonce: sn,
            token: st,
        },
    ) = (out.client.binding, out.server.binding)
    else {
        panic!("not native bindings")
    };
    assert_eq!((cn, ct), (sn, st));
    assert_eq!(out.client.params.mtu, 1200);
    assert_eq!(out.client.params.fec, FecDescriptor::None);
    assert_eq!(out.client.params.version, VERSION);
}

#[test]
fn native_handshake_survives_heavy_loss() {
    let cfg = NativeConfig {
        fec: FecDescriptor::Fixed { data: 8, parity: 2 },
        ..NativeConfig::default()
    };
    for seed in 0..100 {
        let out = handshake(HandshakeMode::Native(cfg), 0.3, 0.3, seed).unwrap();
        assert_eq!(out.client.conv, out.server.conv, "seed {seed}");
        assert_eq!(
            out.client.params.fec,
            FecDescriptor::Fixed { data: 8, parity: 2 }
        );
        assert_eq!(out.server.params.fec, out.client.params.fec);
        assert_eq!(out.client.binding, out.server.binding);
        assert!(out.elapsed < cfg.connect_timeout);
    }
}

#[test]
fn legacy_handshake_lossless_and_lossy() {
    let out = handshake(HandshakeMode::Legacy(LegacyConfig::default()), 0.0, 0.0, 1).unwrap();
    assert_eq!(out.elapsed, DELAY * 2);
    assert_eq!(
        out.client.binding,
        Binding::Legacy {
            sync_id: 0x2345_6789
        }
    );
    assert_eq!(out.server.binding, out.client.binding);
    for seed in 0..100 {
        let out = handshake(
            HandshakeMode::Legacy(LegacyConfig::default()),
            0.4,
            0.4,
            seed,
        )
        .unwrap();
        assert_eq!(out.client.conv, out.server.conv, "seed {seed}");
        assert_ne!(out.client.conv, 0);
    }
}

#[test]
fn handshake_times_out_when_the_server_never_answers() {
    for mode in [
        HandshakeMode::Native(NativeConfig::default()),
        HandshakeMode::Legacy(LegacyConfig::default()),
    ] {
        let t0 = Instant::now();
        let mut client = ClientHandshake::new(mode, t0, 0, 1).unwrap();
        let mut buf = Vec::new();
        let mut sends = 0;
        let mut now = t0;
        let err = loop {
            if let Err(e) = client.handle_timeout(now) {
                break e;
            }
            while client.poll_transmit(now, &mut buf) {
                sends += 1;
            }
            now = client.poll_timeout().unwrap();
        };
        assert_eq!(err, HandshakeError::Timeout(Duration::from_secs(10)));
        assert_eq!(now, t0 + Duration::from_secs(10));
        assert_eq!(sends, 20, "one opening datagram every 500 ms for 10 s");
        assert_eq!(client.poll_timeout(), None);
        assert_eq!(client.handle_timeout(now), Err(err));
    }
    let lost = handshake(HandshakeMode::Native(NativeConfig::default()), 0.0, 1.0, 3);
    assert!(matches!(lost, Err(HandshakeError::Timeout(_))));
}

#[test]
fn raw_mode_needs_no_handshake() {
    let t0 = Instant::now();
    let mode = HandshakeMode::Raw { conv: 99 };
    let mut client = ClientHandshake::new(mode, t0, 0, 1).unwrap();
    let est = client.established().cloned().unwrap();
    assert_eq!((est.conv, est.binding), (99, Binding::Raw));
    let mut buf = Vec::new();
    assert!(!client.poll_transmit(t0, &mut buf));
    assert_eq!(client.poll_timeout(), None);
    let mut server = ServerHandshake::new(mode, [0; 32], 0).unwrap();
    let mut first = vec![0u8; 32];
    first[..4].copy_from_slice(&99u32.to_le_bytes());
    let ServerEvent::Accept(s) =
        server.handle(t0, "127.0.0.1:1".parse().unwrap(), &first, &mut buf)
    else {
        panic!()
    };
    assert_eq!(s, est);
}
