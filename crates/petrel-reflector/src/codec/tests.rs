use proptest::prelude::*;

use super::*;

fn arb_type() -> impl Strategy<Value = PacketType> {
    (1u8..=5).prop_map(|t| PacketType::from_u8(t).unwrap())
}

fn arb_header() -> impl Strategy<Value = Header> {
    (
        any::<[u8; 32]>(),
        any::<[u8; 10]>(),
        arb_type(),
        any::<u8>(),
        any::<u8>(),
        0u32..(1 << 24),
        any::<[u8; 32]>(),
        any::<u32>(),
    )
        .prop_map(|(u, p, t, m, s, d, c, r)| Header {
            username: u,
            device_password: p,
            packet_type: t,
            dev_model: m,
            ssid: s,
            dmrid: d,
            callsign: c,
            reserved: r,
        })
}

proptest! {
    #[test]
    fn header_round_trip(h in arb_header(), data in proptest::collection::vec(any::<u8>(), 0..=MAX_DATA_LEN)) {
        let bytes = encode(&h, &data).unwrap();
        prop_assert_eq!(bytes.len(), HEADER_LEN + data.len());
        let p = decode(&bytes).unwrap();
        prop_assert_eq!(&p.header, &h);
        prop_assert_eq!(p.data, &data[..]);
        // Byte-exact: re-encoding the decoded packet gives the same datagram.
        prop_assert_eq!(encode(&p.header, p.data).unwrap(), bytes);
    }

    #[test]
    fn decode_never_panics(bytes in proptest::collection::vec(any::<u8>(), 0..1500)) {
        let _ = decode(&bytes);
        let _ = HeartbeatData::parse(&bytes);
        let _ = ConfigCommand::parse(&bytes);
        let _ = split_frames(&bytes);
        let _ = decode_raw(&bytes);
        let mut copy = bytes.clone();
        let _ = rewrite_forward(&mut copy, &ForwardIdentity::new("u", "C", 1, 1, 1));
    }

    #[test]
    fn decode_never_panics_on_draa_prefix(mut bytes in proptest::collection::vec(any::<u8>(), 90..900), t in 0u8..8) {
        bytes[..4].copy_from_slice(b"DraA");
        let n = bytes.len() as u16;
        bytes[4..6].copy_from_slice(&n.to_be_bytes());
        bytes[48] = t;
        let r = decode(&bytes);
        prop_assert_eq!(r.is_ok(), bytes.len() <= MAX_DATAGRAM_LEN && (1..=5).contains(&t));
    }

    #[test]
    fn heartbeat_round_trip(gps in proptest::option::of((any::<f64>(), any::<f64>(), any::<f64>())), mac in proptest::option::of(any::<[u8; 6]>())) {
        let hb = HeartbeatData { gps: gps.map(|(lat, lon, alt)| Gps { lat, lon, alt }), mac: mac.map(Mac) };
        let back = HeartbeatData::parse(&hb.encode()).unwrap();
        prop_assert_eq!(back.mac, hb.mac);
        prop_assert_eq!(back.gps.map(|g| (g.lat.to_bits(), g.lon.to_bits(), g.alt.to_bits())),
                        hb.gps.map(|g| (g.lat.to_bits(), g.lon.to_bits(), g.alt.to_bits())));
    }

    #[test]
    fn config_round_trip(items in proptest::collection::vec((1u8..=0x15, any::<[u8; 8]>()), 0..20), ms in any::<i64>()) {
        let tlvs: Vec<Tlv> = items.iter().map(|(t, v)| Tlv { tag: *t, value: v[..tag_len(*t).unwrap()].to_vec() }).collect();
        for cmd in [ConfigCommand::Set(tlvs), ConfigCommand::TimeSync(ms), ConfigCommand::Query] {
            prop_assert_eq!(ConfigCommand::parse(&cmd.encode().unwrap()).unwrap(), cmd);
        }
    }

    #[test]
    fn merged_voice_round_trip(frames in proptest::collection::vec(proptest::collection::vec(any::<u8>(), 1..=400), 1..4)) {
        let refs: Vec<&[u8]> = frames.iter().map(|f| &f[..]).collect();
        let data = merge_frames(refs.iter().copied()).unwrap();
        prop_assert_eq!(split_frames(&data), refs);
    }

    #[test]
    fn raw_round_trip(frames in proptest::collection::vec(proptest::collection::vec(any::<u8>(), 0..=400), 0..20)) {
        let refs: Vec<&[u8]> = frames.iter().map(|f| &f[..]).collect();
        let file = encode_raw(&refs).unwrap();
        prop_assert_eq!(decode_raw(&file).unwrap(), refs);
    }
}

fn sample() -> Vec<u8> {
    let mut h = Header::new(PacketType::Voice);
    h.set_username("alice");
    h.set_password("secret1");
    h.set_callsign("spoofed");
    h.ssid = 7;
    h.reserved = 0xdead_beef;
    encode(&h, &[1, 2, 3]).unwrap()
}

#[test]
fn envelope_rules_in_order() {
    let ok = sample();
    assert!(decode(&ok).is_ok());
    assert_eq!(decode(&ok[..89]), Err(DecodeError::TooShort(89)));
    assert_eq!(decode(&[0u8; 801]), Err(DecodeError::TooLong(801)));
    let mut bad = ok.clone();
    bad[0] = b'X';
    assert_eq!(decode(&bad), Err(DecodeError::BadMagic));
    let mut longer = ok.clone();
    longer.push(0);
    assert_eq!(
        decode(&longer),
        Err(DecodeError::LengthMismatch {
            declared: 93,
            actual: 94
        })
    );
    for t in [0u8, 6, 255] {
        let mut b = ok.clone();
        b[48] = t;
        assert_eq!(decode(&b), Err(DecodeError::BadType(t)));
    }
    assert_eq!(
        encode(&Header::new(PacketType::Text), &[0u8; 711]),
        Err(EncodeError::DataTooLong(711))
    );
}

#[test]
fn wire_layout_is_big_endian_at_spec_offsets() {
    let mut h = Header::new(PacketType::Heartbeat);
    h.dmrid = 0x0012_3456;
    h.reserved = 0x0102_0304;
    h.dev_model = 2;
    h.ssid = 9;
    let b = encode(&h, &[0xAA; 10]).unwrap();
    assert_eq!(&b[0..4], b"DraA");
    assert_eq!(&b[4..6], &[0, 100]);
    assert_eq!((b[48], b[49], b[50]), (2, 2, 9));
    assert_eq!(&b[51..54], &[0x12, 0x34, 0x56]);
    assert_eq!(&b[86..90], &[1, 2, 3, 4]);
}

#[test]
fn text_fields_trim_and_cut_on_char_boundary() {
    let mut h = Header::new(PacketType::Heartbeat);
    h.set_username(&"é".repeat(20)); // 40 bytes, cut to 32 = 16 chars
    assert_eq!(h.username_str().unwrap(), "é".repeat(16));
    h.set_username(&format!("a{}", "é".repeat(20))); // odd cut point
    assert_eq!(h.username_str().unwrap().len(), 31);
    h.set_password("abc");
    assert_eq!(h.password_bytes(), b"abc");
}

#[test]
fn forward_rewrite_uses_store_identity_and_clears_secrets() {
    let mut b = sample();
    let id = ForwardIdentity::new("alice", "BA1ABC", 2, 7, 4_600_001);
    assert!(rewrite_forward(&mut b, &id));
    let p = decode(&b).unwrap();
    assert_eq!(p.header.callsign_str(), Some("BA1ABC"));
    assert_eq!(p.header.device_password, [0; 10]);
    assert_eq!(p.header.reserved, 0);
    assert_eq!((p.header.dev_model, p.header.dmrid), (2, 4_600_001));
    assert_eq!(p.data, &[1, 2, 3]);
    let mut junk = vec![0u8; 50];
    assert!(!rewrite_forward(&mut junk, &id));
}

#[test]
fn heartbeat_shapes() {
    let mut d = vec![0u8; 24];
    d.extend_from_slice(b"02:42:00:00:00:01");
    let hb = HeartbeatData::parse(&d).unwrap();
    assert_eq!(hb.mac, Some(Mac([2, 0x42, 0, 0, 0, 1])));
    assert_eq!(hb.gps.unwrap().lat, 0.0);
    assert_eq!(HeartbeatData::parse(&[]).unwrap(), HeartbeatData::default());
    assert_eq!(
        HeartbeatData::parse(&[0; 5]),
        Err(HeartbeatError::BadLength(5))
    );
    assert_eq!(
        HeartbeatData::parse(b"02-42-00-00-00-01"),
        Err(HeartbeatError::BadMac)
    );
    assert_eq!(
        HeartbeatData::parse(b"02:42:00:00:00:0g"),
        Err(HeartbeatError::BadMac)
    );
}

#[test]
fn config_errors() {
    assert_eq!(ConfigCommand::parse(&[]), Err(ConfigError::Empty));
    assert_eq!(
        ConfigCommand::parse(&[9]),
        Err(ConfigError::UnknownCommand(9))
    );
    assert_eq!(
        ConfigCommand::parse(&[2, 1, 0x05, 2, 0, 0]),
        Err(ConfigError::BadLength {
            tag: 5,
            len: 2,
            expected: 1
        })
    );
    assert_eq!(
        ConfigCommand::parse(&[2, 1, 0x05, 1]),
        Err(ConfigError::Truncated)
    );
    assert_eq!(
        ConfigCommand::parse(&[2, 2, 0x05, 1, 3]),
        Err(ConfigError::CountMismatch {
            declared: 2,
            actual: 1
        })
    );
    // Unknown tags are carried verbatim.
    assert_eq!(
        ConfigCommand::parse(&[2, 1, 0x40, 2, 9, 9]).unwrap(),
        ConfigCommand::Set(vec![Tlv {
            tag: 0x40,
            value: vec![9, 9]
        }])
    );
}

#[test]
fn single_frame_voice_is_not_misread_as_merged() {
    // First length 0xF8FF > 1000: single frame (Android rule).
    assert_eq!(
        split_frames(&[0xF8, 0xFF, 1, 2]),
        vec![&[0xF8, 0xFF, 1, 2][..]]
    );
    // Lengths that do not cover the payload exactly: single frame.
    assert_eq!(split_frames(&[0, 1, 7, 8]).len(), 1);
    assert!(split_frames(&[]).is_empty());
    assert_eq!(merge_frames([&[][..]]), Err(MergeError::BadFrameLen(0)));
}

#[test]
fn raw_rejects_bad_files() {
    let good = encode_raw(&[&[1, 2, 3][..]]).unwrap();
    assert_eq!(good.len(), 24 + 5);
    assert_eq!(&good[..4], b"OPUS");
    assert_eq!(decode_raw(&good[..10]), Err(RawError::TooShort(10)));
    assert_eq!(decode_raw(&good[..27]), Err(RawError::Truncated(0)));
    let mut wrong_count = good.clone();
    wrong_count[14] = 2;
    assert_eq!(
        decode_raw(&wrong_count),
        Err(RawError::CountMismatch {
            declared: 2,
            actual: 1
        })
    );
    let mut wrong_rate = good;
    wrong_rate[6] = 0;
    assert_eq!(decode_raw(&wrong_rate), Err(RawError::BadHeader));
}
