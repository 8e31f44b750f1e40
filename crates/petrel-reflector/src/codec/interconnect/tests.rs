//! The §11 test vectors of draarl-interconnect that concern the envelope,
//! relay and inner-packet codecs, byte for byte, and property tests.

use proptest::prelude::*;

use super::*;
use crate::codec::{encode, Header, PacketType};

fn hex(s: &str) -> Vec<u8> {
    let s: String = s.chars().filter(|c| !c.is_whitespace()).collect();
    (0..s.len())
        .step_by(2)
        .map(|i| u8::from_str_radix(&s[i..i + 2], 16).unwrap())
        .collect()
}

fn vector_key() -> NodeKey {
    NodeKey::new(b"test-node-session-key").unwrap()
}

/// The §11 envelope: source `edge-fuzhou`, subtype 0x30, session 11,
/// message 22, epoch 7, projection 9, key epoch 2, sent 1 700 000 000 000.
fn vector_header() -> EnvelopeHeader {
    EnvelopeHeader {
        source: NodeId::new("edge-fuzhou").unwrap(),
        subtype: Subtype::RELAY_UPSTREAM,
        flags: Flags::default(),
        cluster_epoch: 7,
        projection_version: 9,
        node_session_id: 11,
        message_id: 22,
        sent_at_ms: 1_700_000_000_000,
        hop_count: 0,
        key_epoch: 2,
    }
}

#[test]
fn envelope_vector_is_byte_exact() {
    let bytes = seal(&vector_header(), &[1, 2, 3], &vector_key(), Channel::Udp).unwrap();
    let mut expected = hex("44726141 00b2 656467652d66757a686f75");
    expected.resize(86, 0);
    expected.extend(hex("4e4f4430"));
    expected.extend(hex(
        "01 30 0000 0000000000000007 0000000000000009 000000000000000b 0000000000000016
         0000018bcfe56800 00 00000002 00000003",
    ));
    expected.extend([1, 2, 3]);
    expected.extend(hex(
        "fff329bf93174a90dc70528969acbf4a36811f00cb81b3ba5396c75385b0f6cb",
    ));
    assert_eq!(bytes.len(), 178);
    assert_eq!(&bytes[..4], b"DraA");
    assert_eq!(bytes[48], 0);
    assert_eq!(bytes, expected);
}

#[test]
fn envelope_vector_round_trips_and_last_byte_flip_fails() {
    let key = vector_key();
    let mut bytes = seal(&vector_header(), &[1, 2, 3], &key, Channel::Udp).unwrap();
    let env = open(&bytes, &key, Channel::Udp).unwrap();
    assert_eq!(env.header, vector_header());
    assert_eq!(env.payload, &[1, 2, 3]);
    *bytes.last_mut().unwrap() ^= 1;
    assert_eq!(open(&bytes, &key, Channel::Udp), Err(EnvelopeError::BadTag));
}

#[test]
fn peek_reads_the_lookup_key_without_the_tag() {
    let bytes = seal(&vector_header(), &[1, 2, 3], &vector_key(), Channel::Udp).unwrap();
    let shape = peek(&bytes).unwrap();
    assert_eq!(shape.source, Some(NodeId::new("edge-fuzhou").unwrap()));
    assert_eq!(shape.node_session_id, 11);
    assert_eq!(peek(&bytes[..174]), None);
    let mut device = bytes.clone();
    device[48] = 5;
    assert_eq!(peek(&device), None);
    let mut no_marker = bytes;
    no_marker[86] = b'X';
    assert_eq!(peek(&no_marker), None);
}

#[test]
fn udp_limit_refuses_1400_byte_payload_and_control_carries_48_kib() {
    let key = vector_key();
    let h = vector_header();
    assert_eq!(
        seal(&h, &[0; 1400], &key, Channel::Udp),
        Err(SealError::PayloadTooLong {
            len: 1400,
            max: 1225
        })
    );
    assert!(seal(&h, &[7; 1225], &key, Channel::Udp).is_ok());
    let big = vec![9u8; 48 * 1024];
    assert!(seal(&h, &big, &key, Channel::Udp).is_err());
    let bytes = seal(&h, &big, &key, Channel::Control).unwrap();
    let env = open(&bytes, &key, Channel::Control).unwrap();
    assert_eq!(env.payload.len(), 49_152);
    assert_eq!(
        open(&bytes, &key, Channel::Udp),
        Err(EnvelopeError::TooLong {
            len: bytes.len(),
            max: 1400
        })
    );
}

#[test]
fn sent_one_second_ago_is_expired_for_100_ms_but_still_decodes() {
    let mut h = vector_header();
    h.sent_at_ms = 1_700_000_000_000 - 1000;
    let bytes = seal(&h, &[], &vector_key(), Channel::Udp).unwrap();
    let env = open(&bytes, &vector_key(), Channel::Udp).unwrap();
    assert!(is_expired(env.header.sent_at_ms, 1_700_000_000_000, 100));
    assert!(!is_expired(env.header.sent_at_ms, 1_700_000_000_000, 1000));
    assert!(is_expired(env.header.sent_at_ms, 1_700_000_000_001, 1000));
    assert!(is_expired(i64::MIN, i64::MAX, u64::MAX - 1));
}

#[test]
fn decoder_rejections_in_order() {
    let key = vector_key();
    let good = seal(&vector_header(), &[1, 2, 3], &key, Channel::Udp).unwrap();
    let with = |f: &dyn Fn(&mut Vec<u8>)| {
        let mut b = good.clone();
        f(&mut b);
        open(&b, &key, Channel::Udp).map(|e| e.header)
    };
    assert_eq!(
        with(&|b| b.truncate(174)),
        Err(EnvelopeError::TooShort(174))
    );
    assert_eq!(with(&|b| b[0] = b'X'), Err(EnvelopeError::BadMagic));
    assert_eq!(
        with(&|b| b[5] = 0xb3),
        Err(EnvelopeError::LengthMismatch {
            declared: 0xb3,
            actual: 178
        })
    );
    assert_eq!(with(&|b| b[48] = 4), Err(EnvelopeError::NotType0(4)));
    assert_eq!(
        with(&|b| b[89] = b'1'),
        Err(EnvelopeError::MissingNodeMagic)
    );
    assert_eq!(with(&|b| b[6] = 0), Err(EnvelopeError::EmptySource));
    assert_eq!(with(&|b| b[90] = 2), Err(EnvelopeError::BadVersion(2)));
    assert_eq!(
        with(&|b| b[142] = 4),
        Err(EnvelopeError::PayloadLengthMismatch {
            declared: 4,
            len: 178
        })
    );
    assert_eq!(with(&|b| b[60] = 1), Err(EnvelopeError::BadTag));
    // A hop count of 3, re-signed with the right key: refused after the tag.
    let mut h = vector_header();
    h.hop_count = 2;
    let mut b = seal(&h, &[1, 2, 3], &key, Channel::Udp).unwrap();
    b[134] = 3;
    let tag = key.tag(&b[..146]);
    b[146..].copy_from_slice(&tag);
    assert_eq!(
        open(&b, &key, Channel::Udp),
        Err(EnvelopeError::HopCountTooHigh(3))
    );
    assert_eq!(
        open(
            &good,
            &NodeKey::new(b"another-session-key").unwrap(),
            Channel::Udp
        ),
        Err(EnvelopeError::BadTag)
    );
}

#[test]
fn encoder_refuses_zero_message_id_and_high_hop_count() {
    let key = vector_key();
    let mut h = vector_header();
    h.message_id = 0;
    assert_eq!(
        seal(&h, &[], &key, Channel::Udp),
        Err(SealError::ZeroMessageId)
    );
    let mut h = vector_header();
    h.hop_count = 3;
    assert_eq!(
        seal(&h, &[], &key, Channel::Udp),
        Err(SealError::HopCountTooHigh(3))
    );
    assert_eq!(NodeKey::new(b"short").unwrap_err(), KeyError::TooShort(5));
    assert_eq!(format!("{:?}", vector_key()), "NodeKey(<hidden>)");
}

#[test]
fn node_ids() {
    assert_eq!(NodeId::new(""), Err(NodeIdError::Empty));
    assert_eq!(NodeId::new(&"x".repeat(33)), Err(NodeIdError::TooLong(33)));
    assert_eq!(NodeId::new("a\0b"), Err(NodeIdError::ContainsNul));
    assert!(NodeId::new(&"x".repeat(32)).is_ok());
    assert!(NodeId::CENTRE.is_centre());
    assert_eq!(NodeId::CENTRE.to_string(), "center");
    // Read up to the first NUL; what follows it is ignored.
    let mut field = [0u8; 32];
    field[..3].copy_from_slice(b"abc");
    field[10] = b'z';
    assert_eq!(
        NodeId::from_field(&field).unwrap(),
        NodeId::new("abc").unwrap()
    );
}

fn inner_packet(len: usize) -> Vec<u8> {
    let mut h = Header::new(PacketType::Voice);
    h.set_username("alice");
    h.ssid = 7;
    h.set_callsign("BG5ABC");
    encode(&h, &vec![0x55; len - 90]).unwrap()
}

#[test]
fn relay_vector_round_trips() {
    let inner = inner_packet(90);
    assert_eq!(&inner[..4], b"DraA");
    let frame = RelayFrame {
        header: RelayHeader {
            session_id: 1,
            session_epoch: 2,
            domain_id: 3,
            required_projection_version: 4,
            speaker_lease_id: 5,
        },
        inner: &inner,
    };
    let bytes = frame.to_vec().unwrap();
    assert_eq!(
        bytes[..42],
        hex("0000000000000001 0000000000000002 0000000000000003
             0000000000000004 0000000000000005 005a")[..]
    );
    assert_eq!(RelayFrame::parse(&bytes).unwrap(), frame);
    for (range, err) in [
        (0..8, RelayError::ZeroSessionId),
        (8..16, RelayError::ZeroSessionEpoch),
        (16..24, RelayError::ZeroDomainId),
    ] {
        let mut zeroed = bytes.clone();
        zeroed[range].fill(0);
        assert_eq!(RelayFrame::parse(&zeroed), Err(err));
    }
    for (i, err) in [
        RelayError::ZeroSessionId,
        RelayError::ZeroSessionEpoch,
        RelayError::ZeroDomainId,
    ]
    .into_iter()
    .enumerate()
    {
        let mut f = frame;
        match i {
            0 => f.header.session_id = 0,
            1 => f.header.session_epoch = 0,
            _ => f.header.domain_id = 0,
        }
        assert_eq!(f.to_vec(), Err(err));
    }
}

#[test]
fn relay_lengths() {
    let short = inner_packet(90);
    let mut f = RelayFrame {
        header: RelayHeader {
            session_id: 1,
            session_epoch: 1,
            domain_id: 1,
            required_projection_version: 0,
            speaker_lease_id: 0,
        },
        inner: &short[..89],
    };
    assert_eq!(f.to_vec(), Err(RelayError::InnerLength(89)));
    let long = vec![0u8; 801];
    f.inner = &long;
    assert_eq!(f.to_vec(), Err(RelayError::InnerLength(801)));
    f.inner = &short;
    let mut bytes = f.to_vec().unwrap();
    bytes.push(0);
    assert_eq!(
        RelayFrame::parse(&bytes),
        Err(RelayError::LengthMismatch {
            declared: 90,
            actual: 133
        })
    );
    assert_eq!(
        RelayFrame::parse(&bytes[..41]),
        Err(RelayError::TooShort(41))
    );
}

#[test]
fn inner_validation_vectors() {
    let good = inner_packet(120);
    assert_eq!(check_inner(&good), Ok(InnerKind::Voice));
    let mut text = good.clone();
    text[48] = 4;
    assert_eq!(check_inner(&text), Ok(InnerKind::Text));
    let mut with_password = good.clone();
    with_password[38..44].copy_from_slice(b"secret");
    assert_eq!(
        check_inner(&with_password),
        Err(InnerError::PasswordNotZero)
    );
    let mut config = good.clone();
    config[48] = 3;
    assert_eq!(check_inner(&config), Err(InnerError::BadType(3)));
    let mut bad_len = good.clone();
    bad_len[4..6].copy_from_slice(&[0, 1]);
    assert_eq!(
        check_inner(&bad_len),
        Err(InnerError::LengthMismatch {
            declared: 1,
            actual: 120
        })
    );

    let route = RouteIdentity {
        username: "alice",
        ssid: 7,
        callsign: "BG5ABC",
    };
    assert!(inner_matches_route(&good, &route));
    let mut no_callsign = good.clone();
    no_callsign[54..86].fill(0);
    assert!(inner_matches_route(&no_callsign, &route));
    for other in [
        RouteIdentity {
            username: "bob",
            ..route
        },
        RouteIdentity { ssid: 2, ..route },
        RouteIdentity {
            callsign: "BG5ABD",
            ..route
        },
        RouteIdentity {
            username: "alice2",
            ..route
        },
    ] {
        assert!(!inner_matches_route(&good, &other), "{other:?}");
    }
}

#[test]
fn data_bind_messages() {
    let c = Challenge([0xab; 32]);
    assert_eq!(DataBind::Request.to_vec(), br#"{"action":"request"}"#);
    let challenge = DataBind::Challenge(c).to_vec();
    // Padded standard base64 (44 characters for 32 bytes).
    assert_eq!(
        String::from_utf8(challenge.clone()).unwrap(),
        format!(
            r#"{{"action":"challenge","challenge":"{}="}}"#,
            "q6urq6urq6urq6urq6urq6urq6urq6urq6urq6urq6s"
        )
    );
    assert_eq!(DataBind::parse(&challenge), Ok(DataBind::Challenge(c)));
    assert_eq!(
        DataBind::parse(&DataBind::Proof(Some(c)).to_vec()),
        Ok(DataBind::Proof(Some(c)))
    );
    assert_eq!(
        DataBind::parse(br#"{"action":"request","challenge":"AAAA"}"#),
        Err(DataBindError::RequestWithChallenge)
    );
    assert_eq!(
        DataBind::parse(br#"{"action":"proof","challenge":"AAAA"}"#),
        Ok(DataBind::Proof(None))
    );
    assert_eq!(
        DataBind::parse(br#"{"action":"challenge","challenge":"AAAA"}"#),
        Err(DataBindError::BadChallenge)
    );
    assert_eq!(
        DataBind::parse(br#"{"action":"grab"}"#),
        Err(DataBindError::UnknownAction)
    );
    assert!(matches!(
        DataBind::parse(br#"{"action":"proof","challenge":"!!"}"#),
        Err(DataBindError::Json(_))
    ));
    assert!(matches!(
        DataBind::parse(b"[1]"),
        Err(DataBindError::Json(_))
    ));
    assert_eq!(format!("{c:?}"), "Challenge(<hidden>)");
}

fn arb_node_id() -> impl Strategy<Value = NodeId> {
    proptest::collection::vec(1u8..=255, 1..=32).prop_map(|b| NodeId::from_bytes(&b).unwrap())
}

fn arb_header() -> impl Strategy<Value = EnvelopeHeader> {
    (
        arb_node_id(),
        any::<u8>(),
        any::<u16>(),
        any::<[u64; 3]>(),
        1u64..,
        any::<i64>(),
        0u8..=2,
        any::<u32>(),
    )
        .prop_map(
            |(source, sub, flags, [e, p, s], m, t, hop, ke)| EnvelopeHeader {
                source,
                subtype: Subtype(sub),
                flags: Flags(flags),
                cluster_epoch: e,
                projection_version: p,
                node_session_id: s,
                message_id: m,
                sent_at_ms: t,
                hop_count: hop,
                key_epoch: ke,
            },
        )
}

proptest! {
    #[test]
    fn envelope_round_trip(h in arb_header(), payload in proptest::collection::vec(any::<u8>(), 0..=1225)) {
        let key = vector_key();
        let bytes = seal(&h, &payload, &key, Channel::Udp).unwrap();
        prop_assert_eq!(bytes.len(), ENVELOPE_OVERHEAD + payload.len());
        let env = open(&bytes, &key, Channel::Udp).unwrap();
        prop_assert_eq!(env.header, h);
        prop_assert_eq!(env.payload, &payload[..]);
        prop_assert_eq!(peek(&bytes), Some(Shape { source: Some(h.source), node_session_id: h.node_session_id }));
    }

    #[test]
    fn any_flipped_bit_is_refused(h in arb_header(), payload in proptest::collection::vec(any::<u8>(), 0..64), bit in any::<prop::sample::Index>()) {
        let key = vector_key();
        let mut bytes = seal(&h, &payload, &key, Channel::Udp).unwrap();
        let i = bit.index(bytes.len() * 8);
        bytes[i / 8] ^= 1 << (i % 8);
        prop_assert!(open(&bytes, &key, Channel::Udp).is_err());
    }

    #[test]
    fn relay_round_trip(ids in (1u64.., 1u64.., 1u64.., any::<u64>(), any::<u64>()), inner in proptest::collection::vec(any::<u8>(), 90..=800)) {
        let f = RelayFrame {
            header: RelayHeader {
                session_id: ids.0,
                session_epoch: ids.1,
                domain_id: ids.2,
                required_projection_version: ids.3,
                speaker_lease_id: ids.4,
            },
            inner: &inner,
        };
        let bytes = f.to_vec().unwrap();
        prop_assert_eq!(RelayFrame::parse(&bytes).unwrap(), f);
    }

    #[test]
    fn data_bind_round_trip(kind in 0u8..4, c in any::<[u8; 32]>()) {
        let m = match kind {
            0 => DataBind::Request,
            1 => DataBind::Challenge(Challenge(c)),
            2 => DataBind::Proof(Some(Challenge(c))),
            _ => DataBind::Proof(None),
        };
        prop_assert_eq!(DataBind::parse(&m.to_vec()), Ok(m));
    }

    #[test]
    fn parsers_never_panic(bytes in proptest::collection::vec(any::<u8>(), 0..1500)) {
        let key = vector_key();
        let _ = peek(&bytes);
        let _ = open(&bytes, &key, Channel::Udp);
        let _ = open(&bytes, &key, Channel::Control);
        let _ = RelayFrame::parse(&bytes);
        let _ = check_inner(&bytes);
        let _ = inner_matches_route(&bytes, &RouteIdentity { username: "a", ssid: 0, callsign: "" });
        let _ = DataBind::parse(&bytes);
    }

    #[test]
    fn parser_never_panics_on_envelope_shape(mut bytes in proptest::collection::vec(any::<u8>(), 175..1500), byte in any::<u8>()) {
        bytes[..4].copy_from_slice(b"DraA");
        let n = bytes.len() as u16;
        bytes[4..6].copy_from_slice(&n.to_be_bytes());
        bytes[48] = 0;
        bytes[86..90].copy_from_slice(b"NOD0");
        bytes[90] = 1;
        let p = (bytes.len() - 175) as u32;
        if byte & 1 == 0 {
            bytes[139..143].copy_from_slice(&p.to_be_bytes());
        }
        let _ = peek(&bytes);
        let r = open(&bytes, &vector_key(), Channel::Udp);
        prop_assert!(r.is_err() || bytes.len() <= 1400);
    }
}
