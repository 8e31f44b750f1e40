//! Every DraARLv1 codec on arbitrary bytes (draarl-v1 §2, §5.3): the header,
//! heartbeat, configuration and voice DATA, the `.raw` recording container and
//! the forward rewrite. None may panic; what decodes must encode back (to the
//! same bytes where the format has one encoding, else to bytes that decode
//! to the same value).
#![no_main]

use libfuzzer_sys::fuzz_target;
use petrel_reflector::codec::{self, ConfigCommand, ForwardIdentity, HeartbeatData};

fuzz_target!(|data: &[u8]| {
    if let Ok(p) = codec::decode(data) {
        let again = codec::encode(&p.header, p.data).ok();
        assert_eq!(again.as_deref(), Some(data));
        assert!(data.len() <= codec::MAX_DATAGRAM_LEN);
        let _ = p.header.username_str();
        let _ = p.header.callsign_str();
        let _ = p.header.password_bytes();
    }
    heartbeat(data);
    config(data);
    voice(data);
    raw(data);
    let mut copy = data.to_vec();
    let id = ForwardIdentity::new("user", "CALL", 1, 7, 4_600_001);
    if codec::rewrite_forward(&mut copy, &id) {
        // A rewritten packet is still a packet, naming the forwarder.
        let p = codec::decode(&copy).expect("a rewritten packet decodes");
        assert_eq!(p.header.username_str(), Some("user"));
        assert_eq!(p.header.callsign_str(), Some("CALL"));
        assert_eq!(p.header.password_bytes(), b"");
        assert_eq!(copy.len(), data.len());
    }
});

fn heartbeat(data: &[u8]) {
    if let Ok(hb) = HeartbeatData::parse(data) {
        let bytes = hb.encode();
        let again = HeartbeatData::parse(&bytes).expect("an encoded heartbeat parses");
        // GPS floats compare by bits (NaN ≠ NaN as a float).
        let bits = |h: &HeartbeatData| h.gps.map(|g| [g.lat, g.lon, g.alt].map(f64::to_bits));
        assert_eq!(bits(&again), bits(&hb));
        assert_eq!(again.mac, hb.mac);
        // Upper- and lower-case MACs are one value; the encoding is upper case.
        assert_eq!(bytes.len(), data.len());
    }
}

fn config(data: &[u8]) {
    if let Ok(cmd) = ConfigCommand::parse(data) {
        let bytes = cmd.encode().expect("a parsed command encodes");
        assert_eq!(ConfigCommand::parse(&bytes).as_ref(), Ok(&cmd));
        if matches!(cmd, ConfigCommand::Set(_)) {
            // Set has one encoding; Query and TimeSync ignore spare bytes.
            assert_eq!(bytes, data);
        }
    }
}

fn voice(data: &[u8]) {
    let frames = codec::split_frames(data);
    assert_eq!(frames.is_empty(), data.is_empty());
    if frames.len() > 1 || frames.first().is_some_and(|f| f.len() < data.len()) {
        // Split into length-prefixed subframes: merging them gives the input.
        assert_eq!(
            codec::merge_frames(frames.iter().copied()).as_deref(),
            Ok(data)
        );
    } else if let [whole] = frames.as_slice() {
        assert_eq!(*whole, data);
    }
}

fn raw(data: &[u8]) {
    if let Ok(frames) = codec::decode_raw(data) {
        let bytes = codec::encode_raw(&frames).expect("decoded frames encode");
        // The header's 6 reserved bytes are not checked on decode.
        assert_eq!(bytes[..18], data[..18]);
        assert_eq!(bytes[24..], data[24..]);
        assert_eq!(codec::decode_raw(&bytes).as_ref(), Ok(&frames));
    }
    // Frames of any lengths (one byte each) survive encode → decode.
    let frames: Vec<&[u8]> = data.chunks(7).collect();
    let file = codec::encode_raw(&frames).expect("short frames encode");
    assert_eq!(codec::decode_raw(&file).as_deref(), Ok(frames.as_slice()));
}
