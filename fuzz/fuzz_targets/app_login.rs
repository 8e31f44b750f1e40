//! The Type 1 app login DATA (`codec::parse_login_request`,
//! `specs/draarl-apps.md` §2.1) and the `/ws` handshake's instance id and
//! capability rules (`normalize_instance_id`, `require_capabilities`,
//! §4.2). Asserted:
//!
//! - the parser never panics; what it accepts is one JSON object with
//!   `version` 1, a non-blank `token` and the four keys at most;
//! - an accepted instance id is a non-nil UUID in lower-case hyphenated
//!   form that normalises to itself;
//! - accepted capabilities are trimmed, lower-case, sorted, without
//!   duplicates or empty entries, and hold both required ones;
//! - the success JSON round-trips and starts with the `00` status byte.
#![no_main]

use libfuzzer_sys::fuzz_target;
use petrel_reflector::codec::{
    normalize_instance_id, parse_login_request, require_capabilities, AppLoginSuccess,
    REQUIRED_CAPABILITIES,
};
use serde_json::Value;

fuzz_target!(|data: &[u8]| {
    if let Ok(req) = parse_login_request(data) {
        let v: Value = serde_json::from_slice(data).expect("accepted DATA is JSON");
        let obj = v.as_object().expect("one object");
        assert!(obj.len() <= 4);
        assert_eq!(obj.get("version").and_then(Value::as_u64), Some(1));
        assert!(!req.token.trim().is_empty());
        let id = &req.client_instance_id;
        assert_eq!(id.len(), 36);
        assert_eq!(id, &id.to_lowercase());
        assert_eq!(normalize_instance_id(id).as_deref(), Ok(id.as_str()));
        check_caps(&req.capabilities);
        let ok = AppLoginSuccess {
            version: 1,
            session_id: id.clone(),
            session_tag: 1,
            client_instance_id: id.clone(),
            tx_group_id: 999,
            rx_group_ids: vec![999],
        };
        let out = ok.encode();
        assert_eq!(out[0], 0);
        let back: AppLoginSuccess = serde_json::from_slice(&out[1..]).unwrap();
        assert_eq!(back, ok);
    }
    // The `/ws` query form: the same rules on comma-separated text.
    let text = String::from_utf8_lossy(data);
    if let Ok(id) = normalize_instance_id(&text) {
        assert_eq!(normalize_instance_id(&id).as_deref(), Ok(id.as_str()));
    }
    if let Ok(caps) = require_capabilities(text.split(',')) {
        check_caps(&caps);
    }
});

fn check_caps(caps: &[String]) {
    assert!(caps.windows(2).all(|w| w[0] < w[1]));
    for c in caps {
        assert!(!c.is_empty());
        assert_eq!(c, c.trim());
        assert_eq!(c, &c.to_lowercase());
    }
    for r in REQUIRED_CAPABILITIES {
        assert!(caps.iter().any(|c| c == r));
    }
}
