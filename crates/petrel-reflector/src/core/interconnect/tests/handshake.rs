use std::time::Duration;

use crate::codec::interconnect::{kind, ControlMessage, Features, Offer};

use super::*;

fn go_edge_offer() -> Offer {
    Offer {
        min_protocol: 1,
        max_protocol: 1,
        features: Features(1023),
        required: Features(7),
    }
}

#[test]
fn edge_and_centre_agree_and_the_session_carries_data() {
    let now = crate::test_clock::origin();
    let edge = EdgeHandshake::new(node("edge-a"), go_edge_offer());
    let hello = edge.hello("draarl-node.edge-a.secret");
    let mut centre = CentreHandshake::new(now, Offer::MINIMUM);
    assert_eq!(centre.poll_timeout(), Some(now + HANDSHAKE_TIMEOUT));
    let HelloOutcome::CheckCredential(pending) = centre.handle_hello(&hello) else {
        panic!("refused");
    };
    assert_eq!(pending.node_id, node("edge-a"));
    assert_eq!(pending.token, "draarl-node.edge-a.secret");
    assert!(!format!("{pending:?}").contains("secret"));
    let issued = IssuedCredential {
        credential: "draarl-node.edge-a.new".into(),
        epoch: 2,
    };
    let ok = centre.accept(99, &[7; 32], Some(&issued)).unwrap();
    assert_eq!(centre.poll_timeout(), None);
    assert_eq!(
        (
            ok.kind.as_str(),
            ok.session_id,
            ok.key_epoch,
            ok.protocol,
            ok.features
        ),
        (kind::NODE_AUTH_OK, 99, 1, 1, 0x17)
    );
    assert_eq!(ok.key.len(), 43, "32 bytes, unpadded base64");
    let s = edge.handle_reply(&ok).unwrap();
    assert_eq!(s.features, Features(0x17));
    assert_eq!(s.issued, Some(issued));
    assert!(!format!("{:?}", s.issued).contains("new"));
    // The key works for the data plane: an edge-sealed upstream is accepted.
    let mut e = DataPlane::edge(node("edge-a"), DataPlaneConfig::default());
    e.attach(now, s.session);
    e.set_centre_address(Some(addr("10.0.0.1:60050")));
    let mut c = DataPlane::centre(DataPlaneConfig::default());
    c.attach(
        now,
        NodeSessionParams {
            node_id: node("edge-a"),
            session_id: 99,
            key: NodeKey::new(&[7; 32]).unwrap(),
            key_epoch: 1,
        },
    );
    let DataBind::Challenge(ch) = c
        .handle_bind_request(
            now,
            node("edge-a"),
            99,
            &DataBind::Request,
            Challenge([1; 32]),
        )
        .unwrap()
    else {
        panic!()
    };
    let mut ids = MessageIds::new();
    e.send_proof(&mut ids, WALL, ch).unwrap();
    let proof = e.poll_transmit().unwrap();
    assert_eq!(
        c.handle_datagram(now, WALL, addr("10.0.0.2:5"), &proof.datagram),
        Verdict::Bound(addr("10.0.0.2:5"))
    );
}

#[test]
fn centre_refusals() {
    let now = crate::test_clock::origin();
    let edge = EdgeHandshake::new(node("edge-a"), go_edge_offer());
    let refused =
        |msg: &ControlMessage| match CentreHandshake::new(now, Offer::MINIMUM).handle_hello(msg) {
            HelloOutcome::Refuse(m) => (m.kind, m.error),
            other => panic!("{other:?}"),
        };
    let as_centre = ControlMessage {
        node_id: "center".into(),
        ..edge.hello("t")
    };
    assert_eq!(
        refused(&as_centre),
        (kind::NODE_AUTH_ERROR.to_owned(), AUTH_FAILED.to_owned())
    );
    let nameless = ControlMessage {
        node_id: String::new(),
        ..edge.hello("t")
    };
    assert_eq!(refused(&nameless).1, AUTH_FAILED);
    let wrong_kind = ControlMessage {
        kind: "node_ready".into(),
        ..edge.hello("t")
    };
    assert_eq!(refused(&wrong_kind).1, AUTH_FAILED);
    let v2 = ControlMessage {
        min_protocol: 2,
        max_protocol: 2,
        ..edge.hello("t")
    };
    assert_eq!(
        refused(&v2),
        (
            kind::NODE_PROTOCOL_ERROR.to_owned(),
            NEGOTIATION_FAILED.to_owned()
        )
    );
    // The token is never echoed.
    let mut c = CentreHandshake::new(now, Offer::MINIMUM);
    assert!(matches!(
        c.handle_hello(&edge.hello("sekrit")),
        HelloOutcome::CheckCredential(_)
    ));
    let no = c.reject(AuthRejection::Failed);
    assert!(!serde_json::to_string(&no).unwrap().contains("sekrit"));
    assert_eq!(c.accept(1, &[0; 32], None), Err(HandshakeError::WrongState));
    let mut c = CentreHandshake::new(now, Offer::MINIMUM);
    c.handle_hello(&edge.hello("t"));
    assert_eq!(c.reject(AuthRejection::Capacity).error, CAPACITY_REACHED);
    // Ten seconds for hello and reply.
    let mut c = CentreHandshake::new(now, Offer::MINIMUM);
    assert!(!c.handle_timeout(now + Duration::from_millis(9999)));
    assert!(c.handle_timeout(now + HANDSHAKE_TIMEOUT));
    assert_eq!(c.poll_timeout(), None);
}

#[test]
fn edge_refuses_unusable_replies() {
    let edge = EdgeHandshake::new(node("edge-a"), Offer::MINIMUM);
    let ok = ControlMessage {
        session_id: 5,
        key_epoch: 1,
        key: "AAAAAAAAAAAAAAAAAAAAAA".into(),
        protocol: 1,
        features: 0x17,
        ..ControlMessage::new(kind::NODE_AUTH_OK)
    };
    assert!(edge.handle_reply(&ok).is_ok());
    let short_key = ControlMessage {
        key: "AAAAAAAAAAAAAAAAAAAA".into(),
        ..ok.clone()
    };
    assert_eq!(
        edge.handle_reply(&short_key).unwrap_err(),
        HandshakeError::BadKey
    );
    let padded = ControlMessage {
        key: "AAAAAAAAAAAAAAAAAAAAAA==".into(),
        ..ok.clone()
    };
    assert_eq!(
        edge.handle_reply(&padded).unwrap_err(),
        HandshakeError::BadKey
    );
    let v2 = ControlMessage {
        protocol: 2,
        ..ok.clone()
    };
    assert_eq!(
        edge.handle_reply(&v2).unwrap_err(),
        HandshakeError::ProtocolOutOfRange(2)
    );
    let extra = ControlMessage {
        features: 0x3ff,
        ..ok.clone()
    };
    assert_eq!(
        edge.handle_reply(&extra).unwrap_err(),
        HandshakeError::Features(0x3ff)
    );
    let missing = ControlMessage {
        features: 0x13,
        ..ok.clone()
    };
    assert_eq!(
        edge.handle_reply(&missing).unwrap_err(),
        HandshakeError::Features(0x13)
    );
    let zero = ControlMessage {
        session_id: 0,
        ..ok.clone()
    };
    assert_eq!(
        edge.handle_reply(&zero).unwrap_err(),
        HandshakeError::ZeroSession
    );
    let err = ControlMessage {
        error: AUTH_FAILED.into(),
        ..ControlMessage::new(kind::NODE_AUTH_ERROR)
    };
    assert_eq!(
        edge.handle_reply(&err).unwrap_err(),
        HandshakeError::AuthFailed(AUTH_FAILED.into())
    );
    let proto = ControlMessage::new(kind::NODE_PROTOCOL_ERROR);
    assert!(matches!(
        edge.handle_reply(&proto),
        Err(HandshakeError::Protocol(_))
    ));
    assert!(matches!(
        edge.handle_reply(&ControlMessage::new("type0")),
        Err(HandshakeError::UnexpectedKind(_))
    ));
}

mod control_envelopes {
    use crate::codec::interconnect::{seal, Channel, Flags, Subtype};

    use super::*;

    fn control(source: &str, session: u64, id: u64, subtype: Subtype, seed: u8) -> Vec<u8> {
        seal(
            &header(source, session, id, subtype),
            b"{}",
            &key_of(seed),
            Channel::Control,
        )
        .unwrap()
    }

    #[test]
    fn the_replay_window_is_shared_with_udp() {
        let (mut c, now) = centre(DataPlaneConfig::default());
        bind(&mut c, now, "edge-a", SESSION_A, 1, 1, addr("10.0.0.2:1"));
        assert_eq!(
            c.handle_datagram(now, WALL, addr("10.0.0.2:1"), &upstream(2)),
            Verdict::Queued
        );
        // The same MessageID over TLS is a replay.
        let hb = control("edge-a", SESSION_A, 2, Subtype::HEARTBEAT, 1);
        assert_eq!(
            c.handle_control_envelope(WALL, node("edge-a"), SESSION_A, &hb),
            ControlVerdict::Drop(Rejection::Replayed(Replay::Duplicate))
        );
        let hb = control("edge-a", SESSION_A, 3, Subtype::HEARTBEAT, 1);
        let ControlVerdict::Deliver {
            header,
            payload,
            duplicate,
        } = c.handle_control_envelope(WALL, node("edge-a"), SESSION_A, &hb)
        else {
            panic!()
        };
        assert_eq!(
            (header.message_id, payload.as_slice(), duplicate),
            (3, &b"{}"[..], false)
        );
        // ... and the other way round.
        assert_eq!(
            c.handle_datagram(now, WALL, addr("10.0.0.2:1"), &upstream(3)),
            Verdict::Rejected(Rejection::Replayed(Replay::Duplicate))
        );
        assert_eq!(c.protection(node("edge-a")).unwrap().replay_drops, 2);
    }

    #[test]
    fn freshness_identity_subtypes_and_redelivery() {
        let now = crate::test_clock::origin();
        let mut e = DataPlane::edge(node("edge-b"), DataPlaneConfig::default());
        e.attach(now, params("center", 8, 3));
        let deliver =
            |e: &mut DataPlane, d: &[u8]| e.handle_control_envelope(WALL, NodeId::CENTRE, 8, d);
        // ±30 s over TLS.
        let mut h = header("center", 8, 1, Subtype::ROUTE_DELTA);
        h.sent_at_ms = WALL - 30_000;
        let d = seal(&h, b"{}", &key_of(3), Channel::Control).unwrap();
        assert!(matches!(
            deliver(&mut e, &d),
            ControlVerdict::Deliver {
                duplicate: false,
                ..
            }
        ));
        // A replayed RouteDelta is delivered marked duplicate (re-ACK).
        assert!(matches!(
            deliver(&mut e, &d),
            ControlVerdict::Deliver {
                duplicate: true,
                ..
            }
        ));
        h.message_id = 2;
        h.sent_at_ms = WALL - 30_001;
        let stale = seal(&h, b"{}", &key_of(3), Channel::Control).unwrap();
        assert_eq!(
            deliver(&mut e, &stale),
            ControlVerdict::Drop(Rejection::Expired)
        );
        // A replayed lease message is dropped.
        let lease = control("center", 8, 3, Subtype::SPEAKER_LEASE, 3);
        assert!(matches!(
            deliver(&mut e, &lease),
            ControlVerdict::Deliver {
                duplicate: false,
                ..
            }
        ));
        assert_eq!(
            deliver(&mut e, &lease),
            ControlVerdict::Drop(Rejection::Replayed(Replay::Duplicate))
        );
        // Unknown subtypes: dropped, or the connection closes if CRITICAL.
        let unknown = control("center", 8, 4, Subtype(0x7e), 3);
        assert_eq!(
            deliver(&mut e, &unknown),
            ControlVerdict::Drop(Rejection::UnexpectedSubtype(Subtype(0x7e)))
        );
        let mut h = header("center", 8, 5, Subtype(0x7e));
        h.flags = Flags::CRITICAL.with(Flags::CONTROL);
        let critical = seal(&h, b"{}", &key_of(3), Channel::Control).unwrap();
        assert_eq!(deliver(&mut e, &critical), ControlVerdict::Close);
        // Identity: the source must be `center`; the session must match.
        let other = control("edge-x", 8, 6, Subtype::ROUTE_DELTA, 3);
        assert_eq!(
            deliver(&mut e, &other),
            ControlVerdict::Drop(Rejection::IdentityMismatch)
        );
        assert_eq!(
            e.handle_control_envelope(
                WALL,
                NodeId::CENTRE,
                9,
                &control("center", 9, 7, Subtype::ROUTE_DELTA, 3)
            ),
            ControlVerdict::Drop(Rejection::Unauthenticated)
        );
        let forged = control("center", 8, 8, Subtype::ROUTE_DELTA, 4);
        assert!(matches!(
            deliver(&mut e, &forged),
            ControlVerdict::Drop(Rejection::Invalid(_))
        ));
        // Control envelopes may be larger than UDP ones.
        let big = seal(
            &header("center", 8, 9, Subtype::ROUTE_SNAPSHOT_CHUNK),
            &vec![b' '; 40_000],
            &key_of(3),
            Channel::Control,
        )
        .unwrap();
        assert!(matches!(
            deliver(&mut e, &big),
            ControlVerdict::Deliver { .. }
        ));
    }
}
