//! Server handshake: statelessness, anti-amplification, cookie validation and
//! rotation, version negotiation, conv allocation, legacy and raw servers.
#![allow(clippy::unwrap_used)]

use std::collections::HashSet;
use std::net::SocketAddr;
use std::time::{Duration, Instant};

use petrel_proto::handshake::*;

fn addr(port: u16) -> SocketAddr {
    SocketAddr::from(([203, 0, 113, 9], port))
}

fn native_server() -> ServerHandshake {
    ServerHandshake::new(HandshakeMode::Native(NativeConfig::default()), [1; 32], 42).unwrap()
}

fn initial(nonce: u64, cookie: Option<Cookie>) -> Vec<u8> {
    let params = WireParams {
        mtu: 1200,
        snd_wnd: 128,
        rcv_wnd: 512,
        fec: FecDescriptor::None,
    };
    let mut d = Vec::new();
    NativeMessage::Initial {
        nonce,
        params,
        cookie,
        len: MIN_INITIAL_LEN,
    }
    .encode(&mut d);
    d
}

/// Sends a cookie-less INITIAL and returns the RETRY's cookie.
fn get_cookie(server: &mut ServerHandshake, now: Instant, peer: SocketAddr, nonce: u64) -> Cookie {
    let d = initial(nonce, None);
    let mut reply = Vec::new();
    assert_eq!(
        server.handle(now, peer, &d, &mut reply),
        ServerEvent::Reply(ReplyKind::Retry)
    );
    assert!(
        reply.len() <= d.len(),
        "RETRY {} > INITIAL {}",
        reply.len(),
        d.len()
    );
    assert_eq!(reply.len(), RETRY_LEN);
    match NativeMessage::decode(&reply).unwrap() {
        NativeMessage::Retry { nonce: n, cookie } => {
            assert_eq!(n, nonce);
            cookie
        }
        other => panic!("expected RETRY, got {other:?}"),
    }
}

fn echo(
    server: &mut ServerHandshake,
    now: Instant,
    peer: SocketAddr,
    nonce: u64,
    cookie: Cookie,
) -> ServerEvent {
    let mut reply = Vec::new();
    server.handle(now, peer, &initial(nonce, Some(cookie)), &mut reply)
}

#[test]
fn valid_cookie_is_accepted_by_a_server_that_kept_no_state() {
    let t0 = Instant::now();
    let mut minting = native_server();
    let cookie = get_cookie(&mut minting, t0, addr(1), 77);
    // A second instance with the same secret never saw the first INITIAL: the
    // cookie alone carries everything, so the server needs no per-peer state.
    let mut other = native_server();
    let mut reply = Vec::new();
    other.handle(t0, addr(2), &initial(1, None), &mut reply);
    let event = echo(&mut other, t0 + Duration::from_secs(3), addr(1), 77, cookie);
    let ServerEvent::Accept(est) = event else {
        panic!("expected Accept, got {event:?}")
    };
    assert_ne!(est.conv, 0);
    assert_eq!(other.stats().accepted, 1);
}

fn rejected(why: CookieRejection) -> ServerEvent {
    ServerEvent::Reply(ReplyKind::RetryAfterRejectedCookie(why))
}

#[test]
fn forged_expired_and_misaddressed_cookies_are_rejected_and_counted() {
    let t0 = Instant::now();
    let mut server = native_server();
    let cookie = get_cookie(&mut server, t0, addr(1), 5);

    let mut forged = cookie;
    forged[10] ^= 0x40;
    let invalid = rejected(CookieRejection::Invalid);
    assert_eq!(echo(&mut server, t0, addr(1), 5, forged), invalid);
    assert_eq!(echo(&mut server, t0, addr(1), 5, [0; COOKIE_LEN]), invalid);
    assert_eq!(echo(&mut server, t0, addr(2), 5, cookie), invalid);
    assert_eq!(echo(&mut server, t0, addr(1), 6, cookie), invalid);
    // Lifetime 10 s, timestamps in whole seconds: 11 s later is expired.
    let late = t0 + Duration::from_secs(11);
    assert_eq!(
        echo(&mut server, late, addr(1), 5, cookie),
        rejected(CookieRejection::Expired)
    );
    let stats = server.stats();
    assert_eq!(stats.rejected_bad_cookie, 4);
    assert_eq!(stats.rejected_expired_cookie, 1);
    assert_eq!(stats.retries, 6);
    assert_eq!(stats.accepted, 0);
    let at_limit = t0 + Duration::from_secs(10);
    assert!(matches!(
        echo(&mut server, at_limit, addr(1), 5, cookie),
        ServerEvent::Accept(_)
    ));
}

#[test]
fn rejected_cookie_gets_a_fresh_retry_no_larger_than_the_request() {
    let t0 = Instant::now();
    let mut server = native_server();
    let stale = get_cookie(&mut server, t0, addr(1), 5);
    let late = t0 + Duration::from_secs(30);
    let request = initial(5, Some(stale));
    let mut reply = Vec::new();
    assert_eq!(
        server.handle(late, addr(1), &request, &mut reply),
        rejected(CookieRejection::Expired)
    );
    assert!(reply.len() <= request.len());
    let NativeMessage::Retry {
        nonce: 5,
        cookie: fresh,
    } = NativeMessage::decode(&reply).unwrap()
    else {
        panic!("expected RETRY")
    };
    assert!(matches!(
        echo(&mut server, late, addr(1), 5, fresh),
        ServerEvent::Accept(_)
    ));
}

#[test]
fn client_answers_only_the_first_retry_immediately() {
    let t0 = Instant::now();
    let mut client =
        ClientHandshake::new(HandshakeMode::Native(NativeConfig::default()), t0, 0, 8).unwrap();
    let mut out = Vec::new();
    assert!(client.poll_transmit(t0, &mut out));
    let NativeMessage::Initial { nonce, .. } = NativeMessage::decode(&out).unwrap() else {
        panic!()
    };
    let mut server = native_server();
    let first = get_cookie(&mut server, t0, addr(1), nonce);
    let second = get_cookie(&mut server, t0 + Duration::from_secs(2), addr(1), nonce);
    let retry = |cookie| {
        let mut d = Vec::new();
        NativeMessage::Retry { nonce, cookie }.encode(&mut d);
        d
    };
    let t1 = t0 + Duration::from_millis(100);
    assert_eq!(client.handle_input(t1, &retry(first)), Ok(None));
    assert!(
        client.poll_transmit(t1, &mut out),
        "first RETRY is answered at once"
    );
    assert_eq!(client.handle_input(t1, &retry(second)), Ok(None));
    assert!(
        !client.poll_transmit(t1, &mut out),
        "later RETRYs wait for the resend timer"
    );
    assert!(client.poll_transmit(t1 + Duration::from_millis(500), &mut out));
    let NativeMessage::Initial { cookie, .. } = NativeMessage::decode(&out).unwrap() else {
        panic!()
    };
    assert_eq!(cookie, Some(second));
}

#[test]
fn previous_secret_survives_one_rotation_not_two() {
    let t0 = Instant::now();
    let mut server = native_server();
    let cookie = get_cookie(&mut server, t0, addr(1), 9);
    server.rotate_secret([2; 32]);
    assert!(matches!(
        echo(&mut server, t0, addr(1), 9, cookie),
        ServerEvent::Accept(_)
    ));
    server.rotate_secret([3; 32]);
    assert_eq!(
        echo(&mut server, t0, addr(1), 9, cookie),
        rejected(CookieRejection::Invalid)
    );
    // Cookies minted after the rotations verify.
    let fresh = get_cookie(&mut server, t0, addr(1), 9);
    assert!(matches!(
        echo(&mut server, t0, addr(1), 9, fresh),
        ServerEvent::Accept(_)
    ));
}

#[test]
fn unknown_version_gets_negotiation_no_larger_than_request_or_a_counted_drop() {
    let t0 = Instant::now();
    let mut server = native_server();
    let mut d = initial(1234, None);
    d[8] = 9; // a future version
    let mut reply = Vec::new();
    assert_eq!(
        server.handle(t0, addr(1), &d, &mut reply),
        ServerEvent::Reply(ReplyKind::VersionNegotiation)
    );
    assert!(reply.len() <= d.len());
    assert_eq!(
        NativeMessage::decode(&reply).unwrap(),
        NativeMessage::VersionNegotiation {
            nonce: 1234,
            versions: vec![VERSION]
        }
    );

    // The client of that future version learns we do not overlap.
    let mut client =
        ClientHandshake::new(HandshakeMode::Native(NativeConfig::default()), t0, 0, 3).unwrap();
    let mut out = Vec::new();
    assert!(client.poll_transmit(t0, &mut out));
    let nonce = match NativeMessage::decode(&out).unwrap() {
        NativeMessage::Initial { nonce, .. } => nonce,
        other => panic!("{other:?}"),
    };
    let mut vn = Vec::new();
    NativeMessage::VersionNegotiation {
        nonce,
        versions: vec![7, 8],
    }
    .encode(&mut vn);
    assert_eq!(
        client.handle_input(t0, &vn),
        Err(HandshakeError::VersionMismatch {
            offered: vec![7, 8],
            ours: VERSION
        })
    );
    assert_eq!(client.poll_timeout(), None);

    // Too small to answer without amplification, or not an INITIAL: dropped.
    let tiny = &d[..19];
    assert_eq!(
        server.handle(t0, addr(1), tiny, &mut reply),
        ServerEvent::Drop(DropReason::UnsupportedVersion)
    );
    assert!(reply.is_empty());
    let mut not_initial = d.clone();
    not_initial[9] = 4;
    assert_eq!(
        server.handle(t0, addr(1), &not_initial, &mut reply),
        ServerEvent::Drop(DropReason::UnsupportedVersion)
    );
    let stats = server.stats();
    assert_eq!(
        (
            stats.version_negotiations,
            stats.dropped_unsupported_version
        ),
        (1, 2)
    );
}

#[test]
fn short_unpadded_or_non_opening_datagrams_are_dropped() {
    let t0 = Instant::now();
    let mut server = native_server();
    let mut reply = Vec::new();
    let short = &initial(1, None)[..MIN_INITIAL_LEN - 1];
    assert_eq!(
        server.handle(t0, addr(1), short, &mut reply),
        ServerEvent::Drop(DropReason::Malformed)
    );
    let mut close = Vec::new();
    NativeMessage::Close(ConnRef { conv: 1, token: 2 }).encode(&mut close);
    assert_eq!(
        server.handle(t0, addr(1), &close, &mut reply),
        ServerEvent::Drop(DropReason::Unexpected)
    );
    assert!(reply.is_empty());
    let s = server.stats();
    assert_eq!((s.dropped_malformed, s.dropped_unexpected), (1, 1));
}

/// A client asking for more parity than data (1 + 4: five times its data on
/// the wire from the server) is granted as much parity as data.
#[test]
fn parity_is_clamped_to_the_data_shards() {
    for (asked, granted) in [
        (
            FecDescriptor::Fixed { data: 1, parity: 4 },
            FecDescriptor::Fixed { data: 1, parity: 1 },
        ),
        (
            FecDescriptor::Adaptive {
                max_data: 2,
                max_parity: 4,
            },
            FecDescriptor::Adaptive {
                max_data: 2,
                max_parity: 2,
            },
        ),
        (
            FecDescriptor::Fixed { data: 8, parity: 4 },
            FecDescriptor::Fixed { data: 8, parity: 4 },
        ),
    ] {
        assert_eq!(asked.clamp(8, 4), granted);
    }
}

#[test]
fn fec_and_mtu_are_negotiated_and_announced() {
    let t0 = Instant::now();
    let cfg = NativeConfig {
        mtu: 1400,
        fec_max_data: 8,
        fec_max_parity: 2,
        ..NativeConfig::default()
    };
    let mut server = ServerHandshake::new(HandshakeMode::Native(cfg), [1; 32], 1).unwrap();
    let cookie = get_cookie(&mut server, t0, addr(1), 3);
    let params = WireParams {
        mtu: 1200,
        snd_wnd: 64,
        rcv_wnd: 256,
        fec: FecDescriptor::Adaptive {
            max_data: 10,
            max_parity: 4,
        },
    };
    let mut d = Vec::new();
    NativeMessage::Initial {
        nonce: 3,
        params,
        cookie: Some(cookie),
        len: 200,
    }
    .encode(&mut d);
    let mut reply = Vec::new();
    let ServerEvent::Accept(est) = server.handle(t0, addr(1), &d, &mut reply) else {
        panic!()
    };
    let granted = FecDescriptor::Adaptive {
        max_data: 8,
        max_parity: 2,
    };
    assert_eq!(est.params.fec, granted);
    assert_eq!(est.params.mtu, 1200);
    assert_eq!(
        (est.params.peer_snd_wnd, est.params.peer_rcv_wnd),
        (64, 256)
    );
    match NativeMessage::decode(&reply).unwrap() {
        NativeMessage::Accept { conv, params, .. } => {
            assert_eq!(conv, est.conv);
            assert_eq!(params.fec, granted);
            assert_eq!(params.mtu, 1200);
        }
        other => panic!("{other:?}"),
    }
}

#[test]
fn conv_is_never_zero_and_differs_across_accepts() {
    let t0 = Instant::now();
    let mut legacy =
        ServerHandshake::new(HandshakeMode::Legacy(LegacyConfig::default()), [0; 32], 9).unwrap();
    let mut native = native_server();
    let mut seen = HashSet::new();
    let mut reply = Vec::new();
    for i in 0..5000u32 {
        let mut syn = Vec::new();
        LegacyMessage::Syn { sync_id: i }.encode(&mut syn);
        let ServerEvent::Accept(est) = legacy.handle(t0, addr(1), &syn, &mut reply) else {
            panic!()
        };
        assert_ne!(est.conv, 0);
        assert!(seen.insert(est.conv), "legacy conv {} repeated", est.conv);
    }
    seen.clear();
    let mut tokens = HashSet::new();
    for nonce in 0..300u64 {
        let cookie = get_cookie(&mut native, t0, addr(7), nonce);
        let ServerEvent::Accept(est) = echo(&mut native, t0, addr(7), nonce, cookie) else {
            panic!()
        };
        assert_ne!(est.conv, 0);
        assert!(seen.insert(est.conv));
        let Binding::Native { token, .. } = est.binding else {
            panic!()
        };
        assert!(tokens.insert(token));
    }
    // Different seeds give different conv sequences.
    let mut a =
        ServerHandshake::new(HandshakeMode::Legacy(LegacyConfig::default()), [0; 32], 1).unwrap();
    let mut b =
        ServerHandshake::new(HandshakeMode::Legacy(LegacyConfig::default()), [0; 32], 2).unwrap();
    let syn = [1, 0, 0, 0, 0];
    assert_ne!(
        a.handle(t0, addr(1), &syn, &mut reply),
        b.handle(t0, addr(1), &syn, &mut reply)
    );
}

#[test]
fn convs_land_in_the_lane_asked_for_and_stay_unique() {
    let t0 = Instant::now();
    let mut legacy =
        ServerHandshake::new(HandshakeMode::Legacy(LegacyConfig::default()), [0; 32], 9).unwrap();
    let mut native = native_server();
    let mut seen = HashSet::new();
    let mut reply = Vec::new();
    for i in 0..3000u32 {
        let lane = ConvLane {
            lanes: 1 + i as usize % 7,
            lane: (i as usize / 7) % (1 + i as usize % 7),
        };
        let mut syn = Vec::new();
        LegacyMessage::Syn { sync_id: i }.encode(&mut syn);
        let ServerEvent::Accept(est) = legacy.handle_in_lane(t0, addr(1), &syn, &mut reply, lane)
        else {
            panic!()
        };
        assert!(lane.contains(est.conv), "{lane:?} {:#x}", est.conv);
        assert_eq!(ConvLane::of(est.conv, lane.lanes), lane.lane);
        // The lane is the first byte on the wire: the SYN-ACK's conv is little-endian.
        assert_eq!(
            usize::from(est.conv.to_le_bytes()[0]) % lane.lanes,
            lane.lane
        );
        assert!(seen.insert(est.conv), "legacy conv {} repeated", est.conv);
    }
    for nonce in 0..200u64 {
        let lane = ConvLane {
            lanes: 2,
            lane: nonce as usize % 2,
        };
        let cookie = get_cookie(&mut native, t0, addr(7), nonce);
        let d = initial(nonce, Some(cookie));
        let ServerEvent::Accept(est) = native.handle_in_lane(t0, addr(7), &d, &mut reply, lane)
        else {
            panic!()
        };
        assert!(lane.contains(est.conv));
        assert!(seen.insert(est.conv));
    }
    // A lane no conv can be in still gets a conv, at once.
    let impossible = ConvLane { lanes: 2, lane: 5 };
    let mut syn = Vec::new();
    LegacyMessage::Syn { sync_id: 1 }.encode(&mut syn);
    let draws = legacy.stats().conv_draws;
    let ServerEvent::Accept(est) = legacy.handle_in_lane(t0, addr(2), &syn, &mut reply, impossible)
    else {
        panic!()
    };
    assert_ne!(est.conv, 0);
    // "At once": one draw, not the allocator's 1024 tries at a lane that cannot be met.
    assert_eq!(legacy.stats().conv_draws - draws, 1);
}

#[test]
fn native_repeated_initial_gets_the_same_accept() {
    let t0 = Instant::now();
    let mut server = native_server();
    let cookie = get_cookie(&mut server, t0, addr(1), 11);
    let d = initial(11, Some(cookie));
    let mut first = Vec::new();
    let ServerEvent::Accept(est) = server.handle(t0, addr(1), &d, &mut first) else {
        panic!()
    };
    let mut again = Vec::new();
    assert!(server.repeat_reply(&est, &d, &mut again));
    assert_eq!(again, first);
    assert!(!server.repeat_reply(&est, &initial(12, Some(cookie)), &mut again));
    assert!(again.is_empty());
}

#[test]
fn legacy_server_syn_ack_repeat_and_non_syn_drop() {
    let t0 = Instant::now();
    let mut server =
        ServerHandshake::new(HandshakeMode::Legacy(LegacyConfig::default()), [0; 32], 5).unwrap();
    let mut reply = Vec::new();
    let syn = {
        let mut d = Vec::new();
        LegacyMessage::Syn {
            sync_id: 0xDEAD_BEEF,
        }
        .encode(&mut d);
        d
    };
    let ServerEvent::Accept(est) = server.handle(t0, addr(1), &syn, &mut reply) else {
        panic!()
    };
    assert_eq!(
        LegacyMessage::decode(&reply),
        Ok(LegacyMessage::SynAck {
            sync_id: 0xDEAD_BEEF,
            conv: est.conv
        })
    );
    assert_eq!(
        est.binding,
        Binding::Legacy {
            sync_id: 0xDEAD_BEEF
        }
    );
    assert_eq!(
        (est.params.mtu, est.params.snd_wnd, est.params.rcv_wnd),
        (1400, 128, 512)
    );

    // Repeated SYN on the existing session: fresh SYN-ACK, same conv.
    let mut again = Vec::new();
    assert!(server.repeat_reply(&est, &syn, &mut again));
    assert_eq!(again, reply);
    // A SYN with another sync_id is not a repeat (the runtime decides).
    assert!(!server.repeat_reply(&est, &[1, 1, 2, 3, 4], &mut again));

    let kcp_data = [1u8; 24];
    let mut fin = Vec::new();
    LegacyMessage::Fin {
        sync_id: 1,
        conv: 2,
    }
    .encode(&mut fin);
    assert_eq!(
        server.handle(t0, addr(2), &kcp_data, &mut reply),
        ServerEvent::Drop(DropReason::Malformed)
    );
    assert_eq!(
        server.handle(t0, addr(2), &fin, &mut reply),
        ServerEvent::Drop(DropReason::Unexpected)
    );
    assert_eq!(
        server.handle(t0, addr(2), &[9, 0, 0, 0, 0], &mut reply),
        ServerEvent::Drop(DropReason::Malformed)
    );
    assert!(reply.is_empty());
    let s = server.stats();
    assert_eq!(
        (s.accepted, s.dropped_malformed, s.dropped_unexpected),
        (1, 2, 1)
    );
}

#[test]
fn raw_server_accepts_only_its_conv() {
    let t0 = Instant::now();
    let mut server =
        ServerHandshake::new(HandshakeMode::Raw { conv: 0x0102_0304 }, [0; 32], 0).unwrap();
    let mut reply = Vec::new();
    let mut seg = vec![0u8; 24];
    seg[..4].copy_from_slice(&0x0102_0304u32.to_le_bytes());
    let ServerEvent::Accept(est) = server.handle(t0, addr(1), &seg, &mut reply) else {
        panic!()
    };
    assert!(reply.is_empty());
    assert_eq!(
        (est.conv, est.binding, est.params),
        (0x0102_0304, Binding::Raw, RAW_PARAMS)
    );
    seg[0] ^= 1;
    assert_eq!(
        server.handle(t0, addr(1), &seg, &mut reply),
        ServerEvent::Drop(DropReason::ConvMismatch)
    );
    assert_eq!(
        server.handle(t0, addr(1), &seg[..23], &mut reply),
        ServerEvent::Drop(DropReason::Malformed)
    );
}

/// kcp-go mode (kcp-go `Listener.packetInput`): the first datagram of a new peer
/// opens a session with the conv it carries, once its crypt-none CRC checks out.
#[test]
fn kcpgo_server_takes_the_conv_of_a_checked_datagram() {
    let t0 = Instant::now();
    let config = KcpGoConfig::default();
    let mut server = ServerHandshake::new(HandshakeMode::KcpGo(config), [0; 32], 0).unwrap();
    let mut reply = Vec::new();
    // Crypt-none header (nonce, CRC-32 of the rest), FEC data shard header, KCP header.
    let dg = |flag: u16, conv: u32| {
        let mut rest = 7u32.to_le_bytes().to_vec();
        rest.extend_from_slice(&flag.to_le_bytes());
        rest.extend_from_slice(&26u16.to_le_bytes());
        rest.extend_from_slice(&conv.to_le_bytes());
        rest.extend_from_slice(&[81; 20]);
        let mut d = vec![9u8; 16];
        d.extend_from_slice(&crc32fast::hash(&rest).to_le_bytes());
        d.extend_from_slice(&rest);
        d
    };
    let ServerEvent::Accept(est) = server.handle(t0, addr(1), &dg(0xF1, 0xABCD), &mut reply) else {
        panic!()
    };
    assert!(reply.is_empty());
    assert_eq!(
        (est.conv, est.binding, est.params),
        (0xABCD, Binding::Raw, config.params())
    );
    // A parity shard names no conv; a flipped bit fails the CRC.
    assert_eq!(
        server.handle(t0, addr(2), &dg(0xF2, 1), &mut reply),
        ServerEvent::Drop(DropReason::Unexpected)
    );
    let mut bad = dg(0xF1, 0xABCD);
    bad[40] ^= 1;
    assert_eq!(
        server.handle(t0, addr(3), &bad, &mut reply),
        ServerEvent::Drop(DropReason::Malformed)
    );
    // The client picks its conv at once, never 0, and sends nothing.
    let mut client = ClientHandshake::new(HandshakeMode::KcpGo(config), t0, 0, 5).unwrap();
    let est = *client.established().unwrap();
    assert_ne!(est.conv, 0);
    assert!(!client.poll_transmit(t0, &mut reply));
    let other = ClientHandshake::new(HandshakeMode::KcpGo(config), t0, 0, 6).unwrap();
    assert_ne!(other.established().unwrap().conv, est.conv);
    assert_eq!(
        HandshakeMode::KcpGo(config).classify(&[0; 24]),
        DatagramKind::Data
    );
}

#[test]
fn classification_is_mode_aware() {
    let native = HandshakeMode::Native(NativeConfig::default());
    let legacy = HandshakeMode::Legacy(LegacyConfig::default());
    let raw = HandshakeMode::Raw { conv: 0 };
    let syn = [1u8, 2, 3, 4, 5];
    let mut kcp = [0u8; 24];
    kcp[0] = 7;
    assert_eq!(
        native.classify(&initial(1, None)),
        DatagramKind::NativeControl
    );
    assert_eq!(native.classify(&kcp), DatagramKind::Data);
    assert_eq!(native.classify(&syn), DatagramKind::Data);
    assert_eq!(legacy.classify(&syn), DatagramKind::LegacyControl);
    assert_eq!(legacy.classify(&syn[..4]), DatagramKind::Data);
    assert_eq!(legacy.classify(&kcp), DatagramKind::Data);
    assert_eq!(legacy.classify(&initial(1, None)), DatagramKind::Data);
    assert_eq!(raw.classify(&[0u8; 24]), DatagramKind::Data);
    assert_eq!(raw.classify(&syn), DatagramKind::Data);
}

#[test]
fn configs_validate_with_field_names() {
    let bad = NativeConfig {
        mtu: 100,
        ..NativeConfig::default()
    };
    assert_eq!(bad.validate().unwrap_err().field, "native.mtu");
    let bad = NativeConfig {
        fec: FecDescriptor::Fixed { data: 0, parity: 2 },
        ..NativeConfig::default()
    };
    assert_eq!(bad.validate().unwrap_err().field, "fec.data");
    let bad = LegacyConfig {
        rcv_wnd: 0,
        ..LegacyConfig::default()
    };
    assert_eq!(
        ServerHandshake::new(HandshakeMode::Legacy(bad), [0; 32], 0)
            .unwrap_err()
            .field,
        "legacy.rcv_wnd"
    );
    let bad = ControlConfig {
        keepalive_interval: Duration::from_secs(40),
        ..ControlConfig::default()
    };
    assert_eq!(
        bad.validate().unwrap_err().field,
        "control.keepalive_interval"
    );
    assert!(NativeConfig::default().validate().is_ok());
    assert!(LegacyConfig::default().validate().is_ok());
    assert!(ControlConfig::default().validate().is_ok());
}
