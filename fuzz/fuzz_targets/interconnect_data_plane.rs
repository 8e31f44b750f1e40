//! The Type 0 interconnect data plane (draarl-interconnect §4): the envelope
//! parser on arbitrary bytes, and a centre's acceptance pipeline fed a mix of
//! arbitrary datagrams and honest envelopes from one edge (fuzz-chosen
//! subtype, MessageID, clock skew, hop count, payload), some with a flipped
//! bit or signed with another key, from the bound address or another, with
//! binding proofs, clock advances and queue polls between them.
//!
//! Invariants: nothing panics; arbitrary or tampered bytes are never
//! accepted; what `open` decodes seals back to the same bytes; a MessageID
//! is accepted at most once per session; accepted frames are RelayUpstream
//! with a decodable relay, hop ≤ 2, sent within ±2 s; queues stay within
//! their bounds.
#![no_main]

use std::collections::HashSet;
use std::net::SocketAddr;
use std::time::{Duration, Instant};

use libfuzzer_sys::fuzz_target;
use petrel_fuzz::datagrams;
use petrel_reflector::codec::interconnect::{
    open, peek, seal, Challenge, Channel, DataBind, EnvelopeHeader, Flags, NodeId, NodeKey,
    RelayFrame, Subtype,
};
use petrel_reflector::core::interconnect::{
    DataPlane, DataPlaneConfig, NodeSessionParams, Verdict,
};

const WALL: i64 = 1_700_000_000_000;
const SESSION: u64 = 42;

fn edge_a() -> NodeId {
    NodeId::new("edge-a").expect("a valid id")
}

fn key(seed: u8) -> NodeKey {
    NodeKey::new(&[seed; 32]).expect("a 32-byte key")
}

fn addr(i: u8) -> SocketAddr {
    SocketAddr::from(([10, 0, 0, 2], 60050 + u16::from(i % 3)))
}

fuzz_target!(|data: &[u8]| {
    parser(data);
    let cfg = DataPlaneConfig {
        queue_per_node: 8,
        queue_global: 12,
        ..DataPlaneConfig::default()
    };
    let start = Instant::now();
    let mut now = start;
    let mut wall = WALL;
    let mut c = DataPlane::centre(cfg);
    c.attach(
        now,
        NodeSessionParams {
            node_id: edge_a(),
            session_id: SESSION,
            key: key(1),
            key_epoch: 1,
        },
    );
    let mut accepted_ids = HashSet::new();
    let mut proofs = 0u64;
    for rec in datagrams(data) {
        let Some((&op, rest)) = rec.split_first() else {
            continue;
        };
        match op % 6 {
            0 => {
                let v = c.handle_datagram(now, wall, addr(op / 6), rest);
                assert!(!matches!(v, Verdict::Queued | Verdict::Bound(_)), "{v:?}");
            }
            1 | 2 => {
                let Some((d, tampered)) = honest(rest, wall) else {
                    continue;
                };
                let v = c.handle_datagram(now, wall, addr(op / 6), &d);
                if tampered {
                    assert!(!matches!(v, Verdict::Queued | Verdict::Bound(_)), "{v:?}");
                }
                if v == Verdict::Queued {
                    let id = open(&d, &key(1), Channel::Udp)
                        .expect("accepted")
                        .header
                        .message_id;
                    assert!(accepted_ids.insert(id), "message id {id} accepted twice");
                }
            }
            3 => {
                let step = u64::from(rest.first().copied().unwrap_or(0)) * 5;
                now += Duration::from_millis(step);
                wall += i64::try_from(step).expect("small");
                c.handle_timeout(now);
            }
            4 => {
                let fresh = Challenge([rest.first().copied().unwrap_or(0); 32]);
                let reply =
                    c.handle_bind_request(now, edge_a(), SESSION, &DataBind::Request, fresh);
                assert_eq!(reply, Ok(DataBind::Challenge(fresh)));
                proofs += 1;
                let mut h = header(wall, u64::MAX - proofs, Subtype::DATA_BIND);
                h.sent_at_ms = wall;
                let d = seal(
                    &h,
                    &DataBind::Proof(Some(fresh)).to_vec(),
                    &key(1),
                    Channel::Udp,
                )
                .expect("a proof fits");
                let v = c.handle_datagram(now, wall, addr(op / 6), &d);
                assert!(
                    matches!(v, Verdict::Bound(_) | Verdict::Rejected(_)),
                    "{v:?}"
                );
            }
            _ => {
                while let Some(a) = c.poll_accepted(now) {
                    assert!(now.duration_since(a.received_at) <= cfg.max_queue_age);
                    assert_eq!(a.header.subtype, Subtype::RELAY_UPSTREAM);
                    assert!(a.relay().is_some());
                    assert!(a.header.hop_count <= 2);
                    assert!(
                        a.header.sent_at_ms.abs_diff(wall)
                            <= 2000 + (now - start).as_millis() as u64
                    );
                }
            }
        }
        assert!(c.queued() <= cfg.queue_global);
        let p = c.protection(edge_a()).expect("the session stays");
        assert!(p.queued_data <= cfg.queue_per_node as u64);
        assert_eq!(p.queued_data, c.queued() as u64);
    }
});

fn header(wall: i64, id: u64, subtype: Subtype) -> EnvelopeHeader {
    EnvelopeHeader {
        source: edge_a(),
        subtype,
        flags: Flags::default(),
        cluster_epoch: 0,
        projection_version: 0,
        node_session_id: SESSION,
        message_id: id,
        sent_at_ms: wall,
        hop_count: 0,
        key_epoch: 1,
    }
}

/// An envelope from edge-a described by `rest`: [subtype-ish, id, skew,
/// hop, tamper, payload...]. Returns it and whether it was tampered with
/// (a flipped bit or another key).
fn honest(rest: &[u8], wall: i64) -> Option<(Vec<u8>, bool)> {
    let [sub, id, skew, hop, tamper, payload @ ..] = rest else {
        return None;
    };
    let subtype = match sub % 4 {
        0 | 1 => Subtype::RELAY_UPSTREAM,
        2 => Subtype::DATA_BIND,
        _ => Subtype(*sub),
    };
    let mut h = header(wall, u64::from(*id) + 1, subtype);
    h.sent_at_ms = wall + (i64::from(*skew as i8) * 20);
    h.hop_count = hop % 3;
    let relay_bytes;
    let body: &[u8] = if sub % 4 == 0 && payload.len() >= 90 {
        let inner = &payload[..payload.len().min(800)];
        let frame = RelayFrame {
            header: petrel_reflector::codec::interconnect::RelayHeader {
                session_id: 1,
                session_epoch: 1,
                domain_id: 7,
                required_projection_version: 0,
                speaker_lease_id: 0,
            },
            inner,
        };
        relay_bytes = frame.to_vec().ok()?;
        &relay_bytes
    } else {
        payload
    };
    let wrong_key = tamper % 5 == 1;
    let mut d = seal(&h, body, &key(if wrong_key { 2 } else { 1 }), Channel::Udp).ok()?;
    let flip = tamper % 5 == 2;
    if flip {
        let i = usize::from(*tamper) * 7 % (d.len() * 8);
        d[i / 8] ^= 1 << (i % 8);
    }
    Some((d, wrong_key || flip))
}

fn parser(data: &[u8]) {
    let k = key(1);
    let _ = peek(data);
    let _ = open(data, &k, Channel::Udp);
    let _ = open(data, &k, Channel::Control);
    let _ = RelayFrame::parse(data);
    let _ = DataBind::parse(data);
    // Fuzz-chosen fields and payload: what seals opens to the same fields.
    let [a, b, c, d, e, f, g, payload @ ..] = data else {
        return;
    };
    let Ok(source) = NodeId::from_field(&data[..usize::from(*a % 33).min(data.len())]) else {
        return;
    };
    let h = EnvelopeHeader {
        source,
        subtype: Subtype(*b),
        flags: Flags(u16::from(*c)),
        cluster_epoch: u64::from(*d) << 40,
        projection_version: u64::from(*e),
        node_session_id: u64::from(*f) * 0x0101_0101,
        message_id: u64::from(*g),
        sent_at_ms: i64::from(*g as i8) * 1_000_000_007,
        hop_count: *b % 4,
        key_epoch: u32::from(*a),
    };
    for channel in [Channel::Udp, Channel::Control] {
        match seal(&h, payload, &k, channel) {
            Ok(bytes) => {
                let env = open(&bytes, &k, channel).expect("what seals opens");
                assert_eq!(env.header, h);
                assert_eq!(env.payload, payload);
                assert_eq!(
                    peek(&bytes).map(|s| s.node_session_id),
                    Some(h.node_session_id)
                );
            }
            Err(_) => assert!(
                h.message_id == 0 || h.hop_count > 2 || payload.len() > channel.max_payload()
            ),
        }
    }
}
