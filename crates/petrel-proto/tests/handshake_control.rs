//! The post-handshake control plane on a simulated clock: keepalive, idle
//! timeout, authenticated graceful close (native), FIN (legacy), raw.
#![allow(clippy::unwrap_used)]

use std::collections::{HashSet, VecDeque};
use std::time::{Duration, Instant};

use petrel_proto::handshake::*;

const DELAY: Duration = Duration::from_millis(20);

/// One direction of a link: fixed delay; datagrams whose send index is in
/// `drop_indices` are lost.
#[derive(Default)]
struct Link {
    drop_indices: HashSet<usize>,
    queue: VecDeque<(Instant, Vec<u8>)>,
    sent: usize,
}

impl Link {
    fn send(&mut self, now: Instant, d: &[u8]) {
        let index = self.sent;
        self.sent += 1;
        if !self.drop_indices.contains(&index) {
            self.queue.push_back((now + DELAY, d.to_vec()));
        }
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

/// A lossless, instantaneous handshake: (client side, server side).
fn pair(mode: HandshakeMode) -> (Established, Established) {
    let t0 = Instant::now();
    let peer = "192.0.2.10:40000".parse().unwrap();
    let mut client = ClientHandshake::new(mode, t0, 0x1_2345_6789, 7).unwrap();
    let mut server = ServerHandshake::new(mode, [7; 32], 7).unwrap();
    let (mut out, mut reply) = (Vec::new(), Vec::new());
    loop {
        assert!(client.poll_transmit(t0, &mut out));
        match server.handle(t0, peer, &out, &mut reply) {
            ServerEvent::Reply(_) => assert_eq!(client.handle_input(t0, &reply), Ok(None)),
            ServerEvent::Accept(s) => {
                return (client.handle_input(t0, &reply).unwrap().unwrap(), s)
            }
            ServerEvent::Drop(r) => panic!("{r:?}"),
        }
    }
}

fn native_pair() -> (Established, Established) {
    pair(HandshakeMode::Native(NativeConfig::default()))
}

struct Side {
    control: Control,
    events: Vec<(Instant, ControlEvent)>,
    errors: Vec<(Instant, ControlError)>,
    /// Simulated time KCP needs to flush before answering the peer's CLOSE;
    /// `None` means the application never calls `start_close` by itself.
    flush_time: Option<Duration>,
    close_at: Option<Instant>,
}

impl Side {
    fn new(est: &Established, t0: Instant, flush_time: Option<Duration>) -> Self {
        let control = Control::new(est, ControlConfig::default(), t0).unwrap();
        Self {
            control,
            events: Vec::new(),
            errors: Vec::new(),
            flush_time,
            close_at: None,
        }
    }
    fn step(&mut self, now: Instant, out: &mut Link) {
        if self.close_at.is_some_and(|t| now >= t) {
            self.close_at = None;
            self.control.start_close(now);
        }
        if let Some(e) = self.control.handle_timeout(now) {
            self.errors.push((now, e));
        }
        let mut buf = Vec::new();
        while self.control.poll_transmit(now, &mut buf) {
            out.send(now, &buf);
        }
    }
    fn deliver(&mut self, now: Instant, d: &[u8]) {
        let event = self.control.handle_control(now, d);
        if event == ControlEvent::PeerClosing && self.control.state() == ControlState::PeerClosing {
            if let Some(flush) = self.flush_time {
                self.close_at.get_or_insert(now + flush);
            }
        }
        self.events.push((now, event));
    }
    fn next(&self) -> Option<Instant> {
        earliest([self.control.poll_timeout(), self.close_at])
    }
}

/// Runs both sides until `until`, returning when nothing is left to do.
fn run(a: &mut Side, b: &mut Side, ab: &mut Link, ba: &mut Link, t0: Instant, until: Instant) {
    let mut now = t0;
    while now <= until {
        a.step(now, ab);
        b.step(now, ba);
        while let Some(d) = ab.recv(now) {
            b.deliver(now, &d);
        }
        while let Some(d) = ba.recv(now) {
            a.deliver(now, &d);
        }
        a.step(now, ab);
        b.step(now, ba);
        match earliest([a.next(), b.next(), ab.next(), ba.next()]) {
            Some(t) => now = t.max(now + Duration::from_micros(1)),
            None => return,
        }
    }
}

#[test]
fn idle_native_connection_has_one_timer_and_keepalives_keep_it_alive() {
    let t0 = Instant::now();
    let (c, s) = native_pair();
    let (mut a, mut b) = (Side::new(&c, t0, None), Side::new(&s, t0, None));
    assert_eq!(
        a.control.poll_timeout(),
        Some(t0 + Duration::from_secs(5)),
        "no periodic tick, only the keepalive"
    );
    let (mut ab, mut ba) = (Link::default(), Link::default());
    run(
        &mut a,
        &mut b,
        &mut ab,
        &mut ba,
        t0,
        t0 + Duration::from_secs(120),
    );
    assert!(
        a.errors.is_empty() && b.errors.is_empty(),
        "{:?} {:?}",
        a.errors,
        b.errors
    );
    assert_eq!(a.control.state(), ControlState::Open);
    let sent = a.control.stats().keepalives_sent + b.control.stats().keepalives_sent;
    assert!((46..=48).contains(&sent), "{sent} keepalives in 120 s");
    assert_eq!(
        b.events.first(),
        Some(&(t0 + Duration::from_secs(5) + DELAY, ControlEvent::Keepalive))
    );
    for side in [&a, &b] {
        assert!(side
            .events
            .iter()
            .any(|(_, e)| *e == ControlEvent::KeepaliveAck));
    }
}

#[test]
fn silence_ends_in_idle_timeout() {
    let t0 = Instant::now();
    let (c, _) = native_pair();
    let mut a = Control::new(&c, ControlConfig::default(), t0).unwrap();
    let mut buf = Vec::new();
    let mut keepalives = 0;
    let mut now;
    let err = loop {
        now = a.poll_timeout().unwrap();
        if let Some(e) = a.handle_timeout(now) {
            break e;
        }
        while a.poll_transmit(now, &mut buf) {
            keepalives += 1;
        }
    };
    assert_eq!(err, ControlError::IdleTimeout(Duration::from_secs(30)));
    assert_eq!(now, t0 + Duration::from_secs(30));
    assert_eq!(keepalives, 5, "keepalives at 5, 10, 15, 20, 25 s");
    assert_eq!(a.state(), ControlState::Closed);
    assert_eq!(a.poll_timeout(), None);
}

#[test]
fn received_data_defers_idle_timeout_and_forged_control_does_not() {
    let t0 = Instant::now();
    let (c, _) = native_pair();
    let Binding::Native { token, .. } = c.binding else {
        panic!()
    };
    let mut a = Control::new(&c, ControlConfig::default(), t0).unwrap();
    let mut forged = Vec::new();
    NativeMessage::Keepalive(ConnRef {
        conv: c.conv,
        token: token ^ 1,
    })
    .encode(&mut forged);
    for s in 1..30 {
        let now = t0 + Duration::from_secs(s);
        assert_eq!(
            a.handle_control(now, &forged),
            ControlEvent::Ignored(IgnoreReason::NotOurs)
        );
        assert_eq!(a.handle_timeout(now), None);
    }
    assert_eq!(
        a.handle_timeout(t0 + Duration::from_secs(30)),
        Some(ControlError::IdleTimeout(Duration::from_secs(30)))
    );
    assert_eq!(a.stats().ignored_not_ours, 29);

    let mut b = Control::new(&c, ControlConfig::default(), t0).unwrap();
    b.on_datagram_received(t0 + Duration::from_secs(20));
    // At 30 s the overdue keepalive (due 25 s) fires instead of the idle timeout.
    assert_eq!(b.handle_timeout(t0 + Duration::from_secs(30)), None);
    assert_eq!(b.poll_timeout(), Some(t0 + Duration::from_secs(35)));
    assert_eq!(
        b.handle_timeout(t0 + Duration::from_secs(50)),
        Some(ControlError::IdleTimeout(Duration::from_secs(30)))
    );
}

#[test]
fn close_with_wrong_token_or_conv_is_ignored() {
    let t0 = Instant::now();
    let (c, _) = native_pair();
    let Binding::Native { token, .. } = c.binding else {
        panic!()
    };
    let mut a = Control::new(&c, ControlConfig::default(), t0).unwrap();
    for forged in [
        ConnRef {
            conv: c.conv,
            token: token.wrapping_add(1),
        },
        ConnRef {
            conv: c.conv ^ 1,
            token,
        },
    ] {
        let mut d = Vec::new();
        NativeMessage::Close(forged).encode(&mut d);
        assert_eq!(
            a.handle_control(t0, &d),
            ControlEvent::Ignored(IgnoreReason::NotOurs)
        );
        assert_eq!(a.state(), ControlState::Open);
    }
    let mut buf = Vec::new();
    assert!(!a.poll_transmit(t0, &mut buf));
    let mut d = Vec::new();
    NativeMessage::Close(ConnRef {
        conv: c.conv,
        token,
    })
    .encode(&mut d);
    assert_eq!(a.handle_control(t0, &d), ControlEvent::PeerClosing);
    assert_eq!(a.state(), ControlState::PeerClosing);
}

fn close_scenario(drop_first_close_ack: bool, simultaneous: bool) -> (Side, Side, Instant) {
    let t0 = Instant::now();
    let (c, s) = native_pair();
    let flush = Duration::from_millis(200);
    let (mut a, mut b) = (
        Side::new(&c, t0, Some(flush)),
        Side::new(&s, t0, Some(flush)),
    );
    a.close_at = Some(t0 + Duration::from_secs(1));
    if simultaneous {
        b.close_at = Some(t0 + Duration::from_secs(1));
    }
    let (mut ab, mut ba) = (Link::default(), Link::default());
    if drop_first_close_ack {
        ba.drop_indices.insert(0);
    }
    run(
        &mut a,
        &mut b,
        &mut ab,
        &mut ba,
        t0,
        t0 + Duration::from_secs(20),
    );
    (a, b, t0)
}

#[test]
fn graceful_close_completes_both_ways() {
    let (a, b, t0) = close_scenario(false, false);
    let close_sent = t0 + Duration::from_secs(1);
    assert_eq!(
        b.events,
        vec![(close_sent + DELAY, ControlEvent::PeerClosing)]
    );
    // B answers only after its own flush.
    assert_eq!(
        a.events,
        vec![(
            close_sent + 2 * DELAY + Duration::from_millis(200),
            ControlEvent::Closed
        )]
    );
    assert_eq!(
        (a.control.state(), b.control.state()),
        (ControlState::Closed, ControlState::Closed)
    );
    assert!(a.errors.is_empty() && b.errors.is_empty());
    assert_eq!(
        (
            a.control.stats().closes_sent,
            b.control.stats().close_acks_sent
        ),
        (1, 1)
    );
}

#[test]
fn lost_close_ack_is_recovered_by_close_resend() {
    let (a, b, t0) = close_scenario(true, false);
    assert!(a.errors.is_empty(), "{:?}", a.errors);
    assert_eq!(a.control.state(), ControlState::Closed);
    assert_eq!(a.control.stats().closes_sent, 2);
    assert_eq!(b.control.stats().close_acks_sent, 2);
    let closed_at = a
        .events
        .iter()
        .find(|(_, e)| *e == ControlEvent::Closed)
        .unwrap()
        .0;
    assert_eq!(closed_at, t0 + Duration::from_secs(2) + 2 * DELAY);
}

#[test]
fn simultaneous_close_completes() {
    let (a, b, _) = close_scenario(false, true);
    for side in [&a, &b] {
        assert_eq!(side.control.state(), ControlState::Closed);
        assert!(side.errors.is_empty());
        assert!(side.events.iter().any(|(_, e)| *e == ControlEvent::Closed));
    }
}

#[test]
fn close_to_a_vanished_peer_times_out() {
    let t0 = Instant::now();
    let (c, _) = native_pair();
    let mut a = Control::new(&c, ControlConfig::default(), t0).unwrap();
    a.start_close(t0);
    let mut buf = Vec::new();
    let mut sends = 0;
    let mut now = t0;
    let err = loop {
        while a.poll_transmit(now, &mut buf) {
            sends += 1;
        }
        now = a.poll_timeout().unwrap();
        if let Some(e) = a.handle_timeout(now) {
            break e;
        }
    };
    assert_eq!(err, ControlError::CloseTimeout(4));
    assert_eq!((sends, now), (4, t0 + Duration::from_secs(4)));
    assert_eq!(a.state(), ControlState::Closed);
}

#[test]
fn legacy_fin_closes_and_idle_has_no_keepalive() {
    let (client, server) = pair(HandshakeMode::Legacy(LegacyConfig::default()));
    let t0 = Instant::now();
    let mut a = Control::new(&client, ControlConfig::default(), t0).unwrap();
    let mut b = Control::new(&server, ControlConfig::default(), t0).unwrap();
    assert_eq!(
        b.poll_timeout(),
        Some(t0 + Duration::from_secs(30)),
        "legacy: idle deadline only"
    );

    let mut wrong = Vec::new();
    LegacyMessage::Fin {
        sync_id: 1,
        conv: client.conv,
    }
    .encode(&mut wrong);
    assert_eq!(
        b.handle_control(t0, &wrong),
        ControlEvent::Ignored(IgnoreReason::NotOurs)
    );

    a.start_close(t0);
    assert_eq!(a.state(), ControlState::Closed);
    let mut fin = Vec::new();
    assert!(a.poll_transmit(t0, &mut fin));
    assert_eq!(fin.len(), LEGACY_SYN_ACK_LEN);
    assert!(!a.poll_transmit(t0, &mut Vec::new()));
    assert_eq!(b.handle_control(t0, &fin), ControlEvent::Closed);
    assert_eq!(b.state(), ControlState::Closed);

    let mut quiet = Control::new(&server, ControlConfig::default(), t0).unwrap();
    assert_eq!(quiet.handle_timeout(t0 + Duration::from_secs(29)), None);
    assert!(!quiet.poll_transmit(t0, &mut Vec::new()));
    assert_eq!(
        quiet.handle_timeout(t0 + Duration::from_secs(30)),
        Some(ControlError::IdleTimeout(Duration::from_secs(30)))
    );
}

#[test]
fn raw_control_closes_silently() {
    let t0 = Instant::now();
    let est = Established {
        conv: 5,
        params: RAW_PARAMS,
        binding: Binding::Raw,
    };
    let mut c = Control::new(&est, ControlConfig::default(), t0).unwrap();
    assert_eq!(
        c.handle_control(t0, &[0; 22]),
        ControlEvent::Ignored(IgnoreReason::Unexpected)
    );
    c.start_close(t0);
    assert_eq!(c.state(), ControlState::Closed);
    assert!(!c.poll_transmit(t0, &mut Vec::new()));
}

/// The runtime re-arms a connection's timer only when its deadline moves
/// earlier; a timer that fires finds any later deadline then. On an idle native
/// connection every such firing must send a keepalive: neither the
/// KEEPALIVE-ACK answering ours nor the peer's KEEPALIVE may move our next
/// keepalive later than the timer is armed for.
#[test]
fn idle_native_timers_fire_only_to_send_keepalives() {
    let t0 = Instant::now();
    let (c, s) = native_pair();
    let mut sides = [
        Control::new(&c, ControlConfig::default(), t0).unwrap(),
        Control::new(&s, ControlConfig::default(), t0).unwrap(),
    ];
    let mut armed = [sides[0].poll_timeout(), sides[1].poll_timeout()];
    // links[i]: datagrams on their way to side i.
    let mut links: [VecDeque<(Instant, Vec<u8>)>; 2] = Default::default();
    let mut fired = [0u64; 2];
    let mut buf = Vec::new();
    let until = t0 + Duration::from_secs(120);
    loop {
        let arrival = [0, 1].map(|i| links[i].front().map(|(t, _)| *t));
        let Some(now) = earliest(armed.into_iter().chain(arrival)) else {
            break;
        };
        if now > until {
            break;
        }
        for i in 0..2 {
            while links[i].front().is_some_and(|(t, _)| *t <= now) {
                let (_, d) = links[i].pop_front().unwrap();
                sides[i].handle_control(now, &d);
            }
            if armed[i].is_some_and(|t| t <= now) {
                fired[i] += 1;
                assert_eq!(sides[i].handle_timeout(now), None);
                armed[i] = None;
            }
            while sides[i].poll_transmit(now, &mut buf) {
                links[1 - i].push_back((now + DELAY, buf.clone()));
            }
            // Lazy re-arming: only an earlier deadline (or an unarmed timer) moves it.
            let deadline = sides[i].poll_timeout();
            if armed[i].is_none() || deadline < armed[i] {
                armed[i] = deadline;
            }
        }
    }
    for i in 0..2 {
        let sent = sides[i].stats().keepalives_sent;
        assert!((23..=24).contains(&sent), "side {i}: {sent} keepalives");
        assert_eq!(
            fired[i], sent,
            "side {i}: timer wake-ups with nothing to send"
        );
        assert_eq!(sides[i].state(), ControlState::Open);
    }
}

/// Everything one side sends is lost. The other side's keepalives keep the
/// deaf side open while they arrive, and do not postpone its own keepalives
/// (one per interval); the side that hears nothing times out after
/// `idle_timeout`, and the deaf side 30 s after the last keepalive it heard.
#[test]
fn keepalives_of_a_side_whose_datagrams_are_all_lost() {
    let t0 = Instant::now();
    let (c, s) = native_pair();
    let (mut a, mut b) = (Side::new(&c, t0, None), Side::new(&s, t0, None));
    let mut ab = Link {
        drop_indices: (0..1000).collect(),
        ..Link::default()
    };
    let mut ba = Link::default();
    run(
        &mut a,
        &mut b,
        &mut ab,
        &mut ba,
        t0,
        t0 + Duration::from_secs(120),
    );
    let idle = ControlError::IdleTimeout(Duration::from_secs(30));
    assert_eq!(b.errors, [(t0 + Duration::from_secs(30), idle)]);
    // B's last keepalive left at 25 s and arrived DELAY later.
    assert_eq!(a.errors, [(t0 + Duration::from_secs(55) + DELAY, idle)]);
    // A sent one every 5 s until it timed out, whatever B's keepalives did.
    assert_eq!(a.control.stats().keepalives_sent, 11);
}
