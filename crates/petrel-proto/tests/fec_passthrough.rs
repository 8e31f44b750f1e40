//! At zero loss adaptive FEC must cost ARQ-only nothing but its 10 bytes of
//! framing (issue #4): the same echo, step for step on a simulated clock, with
//! and without FEC — every datagram leaves in the same poll as the message that
//! caused it, nothing is queued or retained, no parity is sent, and the only
//! deadline FEC adds is the periodic loss report (never one per datagram).
#![allow(clippy::unwrap_used)]

mod support;

use std::time::{Duration, Instant};

use petrel_proto::fec::FecScheme;
use petrel_proto::session::{Session, SessionConfig};

/// Round trips of one run: short enough that no loss report falls due.
const ROUND_TRIPS: usize = 150;
/// One-way delay of the simulated link.
const HOP: Duration = Duration::from_micros(100);
/// Bytes FEC adds to every datagram: conv prefix 4 + native data header 6.
const FRAMING: usize = 10;

fn session(scheme: FecScheme, now: Instant) -> Session {
    support::fec_session(scheme, 0x0fec_0064, now)
}

/// What one side did after one step: the datagrams it sent and its deadline.
#[derive(Debug, PartialEq)]
struct Step {
    lens: Vec<usize>,
    deadline: Option<Instant>,
}

fn drain(s: &mut Session, now: Instant) -> (Vec<Vec<u8>>, Step) {
    let mut out = Vec::new();
    let mut sent = Vec::new();
    while s.poll_transmit(now, &mut out) {
        sent.push(out.clone());
    }
    let step = Step {
        lens: sent.iter().map(Vec::len).collect(),
        deadline: s.poll_timeout(),
    };
    (sent, step)
}

/// A window-1 echo of 64-byte messages between a client and a server session;
/// returns every step of both, and the two sessions.
fn echo(scheme: FecScheme, start: Instant) -> (Vec<Step>, Session, Session) {
    let (mut client, mut server) = (session(scheme, start), session(scheme, start));
    let mut now = start;
    let mut steps = Vec::new();
    for i in 0..ROUND_TRIPS {
        let msg = [i as u8; 64];
        client.send(&msg).unwrap();
        let (sent, step) = drain(&mut client, now);
        assert!(!step.lens.is_empty(), "the request must leave in this poll");
        steps.push(step);
        now += HOP;
        for d in &sent {
            server.input(now, d).unwrap();
        }
        let got = server.recv().unwrap();
        assert_eq!(&got[..], &msg[..]);
        server.send(&got).unwrap();
        let (sent, step) = drain(&mut server, now);
        assert_eq!(
            step.lens.len(),
            1,
            "the reply carries the ack: one datagram"
        );
        steps.push(step);
        now += HOP;
        for d in &sent {
            client.input(now, d).unwrap();
        }
        assert_eq!(&client.recv().unwrap()[..], &msg[..]);
        for s in [&client, &server] {
            assert!(
                s.poll_timeout().unwrap() > now,
                "no timer is due per datagram"
            );
        }
    }
    (steps, client, server)
}

#[test]
fn zero_loss_adaptive_is_a_pass_through() {
    let start = Instant::now();
    let (arq, ..) = echo(FecScheme::None, start);
    let (fec, client, server) = echo(FecScheme::ADAPTIVE_DEFAULT, start);
    assert_eq!(arq.len(), fec.len());
    // The loss report is armed once, by the first datagram a side received (the
    // server's at HOP, the client's at 2·HOP), and stays there: the run ends
    // before it is due.
    let report = SessionConfig::default().loss_report_interval;
    let (server_report, client_report) = (start + HOP + report, start + 2 * HOP + report);
    assert!(start + 2 * HOP * (ROUND_TRIPS as u32) < server_report);
    for (i, (a, f)) in arq.iter().zip(&fec).enumerate() {
        let framed: Vec<usize> = a.lens.iter().map(|l| l + FRAMING).collect();
        assert_eq!(
            f.lens, framed,
            "step {i}: the same datagrams, {FRAMING} bytes longer"
        );
        let report = match (i % 2, i) {
            (_, 0) => None,
            (0, _) => Some(client_report),
            _ => Some(server_report),
        };
        let expected = [a.deadline, report].into_iter().flatten().min();
        assert_eq!(f.deadline, expected, "step {i}: FEC added a deadline");
    }
    for s in [&client, &server] {
        let fec = s.stats().fec.unwrap();
        assert_eq!(fec.encoder.parity_shards_sent, 0);
        assert_eq!(fec.encoder.groups_encoded, 0);
        assert_eq!(fec.current_parity, 0);
        // Never queued or held: the shard went straight into the datagram, and
        // the peer's decoder handed it to KCP without a copy.
        assert_eq!(fec.encoder.peak_retained_bytes, 0);
        assert_eq!(fec.decoder.peak_retained_bytes, 0);
        assert_eq!(fec.decoder.data_shards_received, ROUND_TRIPS as u64);
    }
}
