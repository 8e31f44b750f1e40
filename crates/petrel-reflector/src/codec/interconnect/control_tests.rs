//! Control-plane framing, ControlMessage and negotiation
//! (draarl-interconnect §3.1–§3.2).

use proptest::prelude::*;

use super::*;

fn frame_of(json: &str) -> Vec<u8> {
    let mut out = (json.len() as u32).to_be_bytes().to_vec();
    out.extend_from_slice(json.as_bytes());
    out
}

#[test]
fn hello_frame_as_a_go_edge_sends_it() {
    let hello = r#"{"kind":"node_enroll","node_id":"edge-0123","token":"t","min_protocol":1,"max_protocol":1,"features":1023,"required_features":7}"#;
    let mut r = FrameReader::new();
    let got = r.feed(&frame_of(hello)).unwrap();
    assert_eq!(got.len(), 1);
    let m = &got[0];
    assert_eq!(
        (m.kind.as_str(), m.node_id.as_str()),
        (kind::NODE_ENROLL, "edge-0123")
    );
    assert_eq!((m.features, m.required_features), (1023, 7));
    // Encoding omits empty keys and keeps the order of §3.1.
    let again = encode_frame(m, MAX_HELLO_FRAME).unwrap();
    assert_eq!(again, frame_of(hello));
    assert!(format!("{m:?}").contains("<hidden>"));
    assert!(!format!("{m:?}").contains("\"t\""));
}

/// `admit` is asked once per frame at its length prefix, even with the
/// bytes arriving one at a time; a refused frame is skipped unparsed (its
/// bad JSON goes unnoticed) and the frames after it still parse.
#[test]
fn refused_frames_are_skipped_unparsed_and_admit_is_asked_once_each() {
    let good = frame_of(r#"{"kind":"node_enroll","node_id":"e"}"#);
    let bad = frame_of("{not json");
    let mut stream = good.clone();
    stream.extend_from_slice(&bad);
    stream.extend_from_slice(&good);
    for chunk in [1, 3, stream.len()] {
        let mut r = FrameReader::new();
        let mut asked = Vec::new();
        let mut got = Vec::new();
        for piece in stream.chunks(chunk) {
            let mut admit = |len: usize| {
                asked.push(len);
                asked.len() != 2
            };
            got.extend(r.feed_admitting(piece, &mut admit).unwrap());
        }
        assert_eq!(asked, [good.len(), bad.len(), good.len()], "chunk {chunk}");
        assert_eq!(got.len(), 2, "chunk {chunk}");
        assert_eq!(r.buffered(), 0);
    }
}

#[test]
fn frames_split_anywhere_reassemble() {
    let a = frame_of(r#"{"kind":"node_enroll","node_id":"e"}"#);
    let b = frame_of(r#"{"kind":"type0","message_id":18446744073709551615}"#);
    let all = [a, b].concat();
    for cut in 0..all.len() {
        let mut r = FrameReader::new();
        let mut got = r.feed(&all[..cut]).unwrap();
        got.extend(r.feed(&all[cut..]).unwrap());
        assert_eq!(got.len(), 2, "cut at {cut}");
        assert_eq!(got[1].message_id, u64::MAX);
        assert_eq!(r.buffered(), 0);
    }
}

#[test]
fn frame_limits_and_bad_json_close() {
    let mut r = FrameReader::new();
    assert_eq!(r.feed(&[0, 0, 0, 0]), Err(FrameError::Empty));
    assert!(
        r.feed(&frame_of("{}")).is_err(),
        "a failed reader stays failed"
    );
    // The hello may be 16 KiB; refused from the prefix alone.
    let mut r = FrameReader::new();
    assert_eq!(
        r.feed(&(16 * 1024 + 1u32).to_be_bytes()),
        Err(FrameError::TooLong {
            len: 16385,
            max: 16384
        })
    );
    // Later frames may be 4 MiB.
    let mut r = FrameReader::new();
    r.feed(&frame_of(r#"{"kind":"node_enroll"}"#)).unwrap();
    assert_eq!(r.feed(&(4u32 << 20).to_be_bytes()), Ok(vec![]));
    let mut r = FrameReader::new();
    r.feed(&frame_of(r#"{"kind":"node_enroll"}"#)).unwrap();
    assert!(matches!(
        r.feed(&((4u32 << 20) + 1).to_be_bytes()),
        Err(FrameError::TooLong { .. })
    ));
    let mut r = FrameReader::new();
    assert!(matches!(
        r.feed(&frame_of("{not json")),
        Err(FrameError::Json(_))
    ));
    let mut r = FrameReader::new();
    assert!(
        matches!(
            r.feed(&frame_of(r#"{"node_id":"x"}"#)),
            Err(FrameError::Json(_))
        ),
        "kind is required"
    );
    let big = ControlMessage {
        error: "x".repeat(20_000),
        ..ControlMessage::new(kind::NODE_AUTH_ERROR)
    };
    assert!(matches!(
        encode_frame(&big, MAX_HELLO_FRAME),
        Err(FrameError::TooLong { .. })
    ));
}

#[test]
fn full_u64_integers_survive() {
    let json = r#"{"kind":"node_auth_ok","session_id":18446744073709551557,"payload":{"cluster_epoch":1764547200123456789}}"#;
    let m: ControlMessage = serde_json::from_str(json).unwrap();
    assert_eq!(m.session_id, 18_446_744_073_709_551_557);
    assert_eq!(
        m.payload.as_ref().unwrap()["cluster_epoch"].as_u64(),
        Some(1_764_547_200_123_456_789)
    );
    assert_eq!(serde_json::to_string(&m).unwrap(), json);
}

#[test]
fn type0_frames_wrap_unpadded_base64() {
    let env = [1u8, 2, 3, 4];
    let m = ControlMessage::type0(&env, 9);
    assert_eq!(m.packet, "AQIDBA");
    assert_eq!(m.message_id, 9);
    assert_eq!(m.type0_envelope(), Ok(env.to_vec()));
    let padded = ControlMessage {
        packet: "AQIDBA==".into(),
        ..m.clone()
    };
    assert_eq!(padded.type0_envelope(), Err(Type0Error::BadBase64));
    let long = ControlMessage {
        packet: "A".repeat(87_384),
        ..m.clone()
    };
    assert_eq!(long.type0_envelope(), Err(Type0Error::TooLong(87_384)));
    assert_eq!(
        ControlMessage::new(kind::NODE_READY).type0_envelope(),
        Err(Type0Error::NotType0)
    );
}

#[test]
fn negotiation_defaults_and_failures() {
    let go_edge = Offer {
        min_protocol: 1,
        max_protocol: 1,
        features: Features(1023),
        required: Features(7),
    };
    let n = negotiate(&Offer::MINIMUM, &go_edge).unwrap();
    assert_eq!(
        n,
        Negotiated {
            protocol: 1,
            features: Features(0x17)
        }
    );
    // Zeros mean 1..1, all features, required 0x7.
    let zero = Offer {
        min_protocol: 0,
        max_protocol: 0,
        features: Features(0),
        required: Features(0),
    };
    assert_eq!(
        negotiate(&zero, &zero).unwrap(),
        Negotiated {
            protocol: 1,
            features: Features::ALL
        }
    );
    let v2 = Offer {
        min_protocol: 2,
        max_protocol: 3,
        ..go_edge
    };
    assert_eq!(
        negotiate(&Offer::MINIMUM, &v2),
        Err(NegotiationError::NoCommonVersion)
    );
    let wide = Offer {
        min_protocol: 1,
        max_protocol: 3,
        ..go_edge
    };
    assert_eq!(
        negotiate(
            &wide,
            &Offer {
                min_protocol: 1,
                max_protocol: 2,
                ..go_edge
            }
        )
        .unwrap()
        .protocol,
        2
    );
    let needs_rotation = Offer {
        required: Features(7 | 1 << 6),
        ..go_edge
    };
    assert_eq!(
        negotiate(&Offer::MINIMUM, &needs_rotation),
        Err(NegotiationError::MissingRequired)
    );
    let no_relay = Offer {
        features: Features(0b101),
        required: Features(0b101),
        ..go_edge
    };
    assert_eq!(
        negotiate(&Offer::MINIMUM, &no_relay),
        Err(NegotiationError::MissingRequired)
    );
}

proptest! {
    #[test]
    fn frame_reader_never_panics(chunks in proptest::collection::vec(proptest::collection::vec(any::<u8>(), 0..64), 0..8)) {
        let mut r = FrameReader::new();
        for c in chunks {
            if r.feed(&c).is_err() {
                break;
            }
            prop_assert!(r.buffered() <= 4 + MAX_HELLO_FRAME.max(MAX_CONTROL_FRAME));
        }
    }

    #[test]
    fn control_message_round_trip(kind_ in "[a-z_]{1,12}", node in "[a-z0-9-]{0,32}", ids in any::<(u64, u64, u64, u32)>(), env in proptest::collection::vec(any::<u8>(), 0..300)) {
        let m = ControlMessage {
            node_id: node,
            session_id: ids.0,
            features: ids.1,
            message_id: ids.2,
            key_epoch: ids.3,
            packet: ControlMessage::type0(&env, 1).packet,
            ..ControlMessage::new(&kind_)
        };
        let mut r = FrameReader::new();
        r.feed(&encode_frame(&ControlMessage::new("hello"), MAX_HELLO_FRAME).unwrap()).unwrap();
        let got = r.feed(&encode_frame(&m, MAX_CONTROL_FRAME).unwrap()).unwrap();
        prop_assert_eq!(&got, &vec![m]);
    }
}
