//! The JSON document of the data endpoint and the page's security policy.

use super::*;
use crate::core::SpurtPhase;
use crate::model::{DeviceKind, GroupRecord, UserRecord};

fn dir() -> Directory {
    let user = UserRecord {
        id: 1,
        name: "alice".into(),
        callsign: "<img src=x onerror=alert(1)>".into(),
        dmrid: 1,
        enabled: true,
        approved: true,
        device_password_hash: None,
        default_group_id: 5,
    };
    let group = GroupRecord {
        id: 5,
        name: "Five".into(),
        enabled: true,
        is_virtual: false,
    };
    Directory::new(vec![user], vec![group], vec![], vec![])
}

#[test]
fn the_data_document_has_the_documented_shape() {
    let d = dir();
    let dash = Dashboard::new(d.clone());
    dash.record_spurts(
        &[TalkSpurt {
            phase: SpurtPhase::Started,
            device: (1, 7),
            kind: DeviceKind::Udp,
            group_id: 5,
            started_unix_ms: 1_000,
            duration_ms: 0,
        }],
        &d,
    );
    let mut stats = ServerStats {
        online: 3,
        ..ServerStats::default()
    };
    stats.ingress.read = 9;
    dash.sample(CounterSample::of(&stats, 500));
    let groups = vec![
        GroupSessions {
            group_id: 5,
            udp: 2,
            ghost: 1,
            websocket: 0,
        },
        GroupSessions {
            group_id: 77,
            udp: 0,
            ghost: 0,
            websocket: 1,
        },
    ];
    let v = serde_json::to_value(dash.view(&stats, groups, None, 1_250)).unwrap();
    let expected = serde_json::json!({
        "now_unix_ms": 1_250,
        "online": 3,
        "groups": [
            {"group_id": 5, "name": "Five", "udp": 2, "ghost": 1, "websocket": 0, "sessions": 3},
            {"group_id": 77, "name": null, "udp": 0, "ghost": 0, "websocket": 1, "sessions": 1},
        ],
        "last_heard": {
            "capacity": 50,
            "evicted": 0,
            "entries": [{
                "callsign": "<img src=x onerror=alert(1)>",
                "user": "alice",
                "ssid": 7,
                "kind": "udp",
                "group_id": 5,
                "group_name": "Five",
                "started_unix_ms": 1_000,
                "duration_ms": 250,
                "talking": true,
            }],
        },
        "counters": {
            "unix_ms": 1_250, "ingress_read": 9, "ingress_rate_limit_drops": 0,
            "ingress_queue_full_drops": 0, "fanout_sent": 0, "fanout_frames_dropped": 0,
            "fanout_text_frames_dropped": 0, "fanout_frames_expired": 0,
        },
        "history": {
            "interval_ms": 5_000,
            "capacity": 120,
            "evicted": 0,
            "samples": [{
                "unix_ms": 500, "ingress_read": 9, "ingress_rate_limit_drops": 0,
                "ingress_queue_full_drops": 0, "fanout_sent": 0, "fanout_frames_dropped": 0,
                "fanout_text_frames_dropped": 0, "fanout_frames_expired": 0,
            }],
        },
    });
    assert_eq!(v, expected);
}

#[test]
fn the_policy_allows_only_the_pages_own_inline_code() {
    let csp = page_csp();
    assert!(csp.starts_with("default-src 'none'; "), "{csp}");
    for directive in [
        "script-src 'sha256-",
        "style-src 'sha256-",
        "connect-src 'self'",
    ] {
        assert!(csp.contains(directive), "{directive} in {csp}");
    }
    assert!(!csp.contains("unsafe"), "{csp}");
    assert!(!csp.contains("http"), "no other origin: {csp}");
    // The hashed script is the page's whole script.
    let script = PAGE.split_once("<script>").unwrap().1;
    assert!(script.contains("async function signIn(form)"));
    assert_eq!(PAGE.matches("<script").count(), 1);
    assert_eq!(PAGE.matches("<style").count(), 1);
}

#[test]
fn the_page_loads_nothing_from_elsewhere_and_writes_no_markup() {
    for external in ["http://", "https://", "//cdn", "src=\"", "href=\""] {
        // The SVG namespace URI is an identifier, not a request.
        let hits = PAGE.matches(external).count()
            - usize::from(external == "http://")
                * PAGE.matches("http://www.w3.org/2000/svg").count();
        assert_eq!(hits, 0, "{external}");
    }
    for sink in [
        "innerHTML",
        "outerHTML",
        "insertAdjacentHTML",
        "document.write",
        "eval(",
    ] {
        assert!(!PAGE.contains(sink), "{sink}");
    }
    // The credential is sent in a header, and kept in sessionStorage only.
    assert!(!PAGE.contains("localStorage"));
    assert!(!PAGE.contains("?token") && !PAGE.contains("&token"));
}
