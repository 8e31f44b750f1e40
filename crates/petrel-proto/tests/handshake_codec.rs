//! Property tests: every control message round-trips; no decoder or state
//! machine panics on arbitrary bytes; pre-cookie replies never amplify.
#![allow(clippy::unwrap_used)]

use std::net::SocketAddr;
use std::time::{Duration, Instant};

use petrel_proto::handshake::*;
use proptest::prelude::*;

fn fec() -> impl Strategy<Value = FecDescriptor> {
    prop_oneof![
        Just(FecDescriptor::None),
        (1u8..=128, 1u8..=127).prop_map(|(data, parity)| FecDescriptor::Fixed { data, parity }),
        (1u8..=128, 1u8..=127).prop_map(|(max_data, max_parity)| FecDescriptor::Adaptive {
            max_data,
            max_parity
        }),
    ]
}

fn params() -> impl Strategy<Value = WireParams> {
    (256u16..=9000, 1u16..=32768, 1u16..=32768, fec()).prop_map(|(mtu, snd_wnd, rcv_wnd, fec)| {
        WireParams {
            mtu,
            snd_wnd,
            rcv_wnd,
            fec,
        }
    })
}

fn conn() -> impl Strategy<Value = ConnRef> {
    (any::<u32>(), any::<u64>()).prop_map(|(conv, token)| ConnRef { conv, token })
}

fn native() -> impl Strategy<Value = NativeMessage> {
    prop_oneof![
        (
            any::<u64>(),
            params(),
            proptest::option::of(any::<Cookie>()),
            MIN_INITIAL_LEN..400
        )
            .prop_map(|(nonce, params, cookie, len)| NativeMessage::Initial {
                nonce,
                params,
                cookie,
                len
            }),
        (any::<u64>(), any::<Cookie>())
            .prop_map(|(nonce, cookie)| NativeMessage::Retry { nonce, cookie }),
        (any::<u64>(), any::<u32>(), any::<u64>(), params()).prop_map(
            |(nonce, conv, token, params)| {
                NativeMessage::Accept {
                    nonce,
                    conv,
                    token,
                    params,
                }
            }
        ),
        (
            any::<u64>(),
            proptest::collection::vec(any::<u8>(), 1..=MAX_OFFERED_VERSIONS)
        )
            .prop_map(|(nonce, versions)| NativeMessage::VersionNegotiation { nonce, versions }),
        conn().prop_map(NativeMessage::Keepalive),
        conn().prop_map(NativeMessage::KeepaliveAck),
        conn().prop_map(NativeMessage::Close),
        conn().prop_map(NativeMessage::CloseAck),
    ]
}

fn legacy() -> impl Strategy<Value = LegacyMessage> {
    prop_oneof![
        any::<u32>().prop_map(|sync_id| LegacyMessage::Syn { sync_id }),
        (any::<u32>(), any::<u32>())
            .prop_map(|(sync_id, conv)| LegacyMessage::SynAck { sync_id, conv }),
        (any::<u32>(), any::<u32>())
            .prop_map(|(sync_id, conv)| LegacyMessage::Fin { sync_id, conv }),
    ]
}

/// Bytes that often get past the header checks, to reach deeper decoder paths.
fn control_like() -> impl Strategy<Value = Vec<u8>> {
    (
        0u8..4,
        0u8..10,
        proptest::collection::vec(any::<u8>(), 0..160),
    )
        .prop_map(|(v, t, tail)| {
            let mut d = vec![0, 0, 0, 0];
            d.extend_from_slice(&MAGIC);
            d.push(v);
            d.push(t);
            d.extend_from_slice(&tail);
            d
        })
}

fn any_datagram() -> impl Strategy<Value = Vec<u8>> {
    prop_oneof![
        proptest::collection::vec(any::<u8>(), 0..200),
        control_like()
    ]
}

fn peer() -> SocketAddr {
    "198.51.100.7:5000".parse().unwrap()
}

proptest! {
    #[test]
    fn native_messages_round_trip(msg in native()) {
        let mut buf = Vec::new();
        msg.encode(&mut buf);
        prop_assert_eq!(HandshakeMode::Native(NativeConfig::default()).classify(&buf), DatagramKind::NativeControl);
        prop_assert_eq!(NativeMessage::decode(&buf), Ok(msg));
    }

    #[test]
    fn legacy_messages_round_trip(msg in legacy()) {
        let mut buf = Vec::new();
        msg.encode(&mut buf);
        prop_assert_eq!(HandshakeMode::Legacy(LegacyConfig::default()).classify(&buf), DatagramKind::LegacyControl);
        prop_assert_eq!(LegacyMessage::decode(&buf), Ok(msg));
    }

    #[test]
    fn decoders_never_panic(d in any_datagram()) {
        let _ = NativeMessage::decode(&d);
        let _ = LegacyMessage::decode(&d);
    }

    /// Arbitrary input to every state machine: no panic, and before a valid
    /// cookie the server never answers with more bytes than it received (and
    /// never accepts: forging a 128-bit tag is not something proptest does).
    #[test]
    fn state_machines_never_panic_or_amplify(ds in proptest::collection::vec(any_datagram(), 1..8)) {
        let t0 = Instant::now();
        let modes = [
            HandshakeMode::Native(NativeConfig::default()),
            HandshakeMode::Legacy(LegacyConfig::default()),
            HandshakeMode::Raw { conv: 7 },
            HandshakeMode::KcpGo(KcpGoConfig::default()),
        ];
        for mode in modes {
            let mut server = ServerHandshake::new(mode, [3; 32], 1).unwrap();
            let mut client = ClientHandshake::new(mode, t0, 1_000, 2).unwrap();
            let est = Established {
                conv: 9,
                params: RAW_PARAMS,
                binding: match mode {
                    HandshakeMode::Native(_) => Binding::Native { nonce: 1, token: 2 },
                    HandshakeMode::Legacy(_) => Binding::Legacy { sync_id: 1 },
                    HandshakeMode::Raw { .. } | HandshakeMode::KcpGo(_) => Binding::Raw,
                },
            };
            let mut control = Control::new(&est, ControlConfig::default(), t0).unwrap();
            let mut reply = Vec::new();
            for (i, d) in ds.iter().enumerate() {
                let now = t0 + Duration::from_millis(100 * i as u64);
                let event = server.handle(now, peer(), d, &mut reply);
                if matches!(mode, HandshakeMode::Native(_)) {
                    prop_assert!(!matches!(event, ServerEvent::Accept(_)));
                    prop_assert!(reply.len() <= d.len(), "{} byte reply to {} bytes", reply.len(), d.len());
                }
                let _ = server.repeat_reply(&est, d, &mut reply);
                let _ = client.handle_input(now, d);
                let _ = control.handle_control(now, d);
                while control.poll_transmit(now, &mut reply) {}
            }
        }
    }

    /// A well-formed INITIAL of any shape, with or without a (forged) cookie,
    /// gets a reply no larger than itself, and never an ACCEPT.
    #[test]
    fn initial_reply_never_exceeds_request(
        nonce in any::<u64>(),
        params in params(),
        cookie in proptest::option::of(any::<Cookie>()),
        len in prop_oneof![MIN_INITIAL_LEN..MIN_INITIAL_LEN + 4, MIN_INITIAL_LEN..1500],
        version in prop_oneof![3 => Just(VERSION), 1 => 2u8..=255],
    ) {
        let mut server = ServerHandshake::new(HandshakeMode::Native(NativeConfig::default()), [5; 32], 1).unwrap();
        let mut d = Vec::new();
        NativeMessage::Initial { nonce, params, cookie, len }.encode(&mut d);
        d[8] = version;
        let mut reply = Vec::new();
        let event = server.handle(Instant::now(), peer(), &d, &mut reply);
        prop_assert!(reply.len() <= d.len(), "{} byte reply to {} bytes", reply.len(), d.len());
        let expected = match (version == VERSION, cookie) {
            (false, _) => ReplyKind::VersionNegotiation,
            (true, None) => ReplyKind::Retry,
            (true, Some(_)) => ReplyKind::RetryAfterRejectedCookie(CookieRejection::Invalid),
        };
        prop_assert_eq!(event, ServerEvent::Reply(expected));
    }
}
