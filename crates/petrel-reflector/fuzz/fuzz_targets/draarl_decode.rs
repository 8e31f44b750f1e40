//! Every DraARLv1 decoder on arbitrary bytes: none may panic, and a packet
//! that decodes must re-encode to the same bytes.
#![no_main]

use libfuzzer_sys::fuzz_target;
use petrel_reflector::codec;

fuzz_target!(|data: &[u8]| {
    if let Ok(p) = codec::decode(data) {
        let again = codec::encode(&p.header, p.data).ok();
        assert_eq!(again.as_deref(), Some(data));
        let _ = codec::HeartbeatData::parse(p.data);
        let _ = codec::ConfigCommand::parse(p.data);
        let _ = codec::split_frames(p.data);
    }
    let _ = codec::decode_raw(data);
    let mut copy = data.to_vec();
    let _ = codec::rewrite_forward(&mut copy, &codec::ForwardIdentity::new("u", "C", 1, 1, 1));
});
