//! Attacks on the centre's control port over real loopback TCP and TLS 1.3
//! (draarl-interconnect §3.1–§3.3, §7): slowloris in each handshake phase
//! against the pending cap, hostile length prefixes and hello bodies,
//! oversized frames of an authenticated node, attempts from many source
//! addresses, and a node disabled or removed while its session is live.

#![allow(clippy::unwrap_used)]

mod support;

use std::net::IpAddr;
use std::time::{Duration, Instant};

use petrel_reflector::codec::interconnect::{
    encode_frame, ControlMessage, Offer, MAX_CONTROL_FRAME, MAX_HELLO_FRAME,
};
use petrel_reflector::model::{Backend, InterconnectConfig};
use petrel_reflector::runtime::interconnect::{
    CentreTrust, EdgeControl, EdgeControlConfig, NodeAuthority, TlsIdentity, CREDENTIAL_RECHECK,
    DEFAULT_SERVER_NAME,
};
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

use support::control_client::{
    authenticate, centre, centre_with, connect_from, credential, hello, loopback_cfg, stats_when,
    tls_connect, tls_over,
};
use support::ScratchStore;

const WAIT: Duration = Duration::from_secs(10);

/// Everything the peer sends until it closes (or `within` passes: `None`).
async fn read_to_close<R: AsyncRead + Unpin>(r: &mut R, within: Duration) -> Option<Vec<u8>> {
    let mut got = Vec::new();
    let mut buf = [0u8; 4096];
    tokio::time::timeout(within, async {
        loop {
            match r.read(&mut buf).await {
                Ok(0) | Err(_) => return,
                Ok(n) => got.extend_from_slice(&buf[..n]),
            }
        }
    })
    .await
    .ok()?;
    Some(got)
}

/// Slowloris in all three phases (ClientHello never finished, hello never
/// sent, hello sent a byte at a time) holds its network's share of the
/// pending slots (3 of 12); a fourth connection from the same /24 takes the
/// oldest one's slot, which closes at once; the hello deadline frees every
/// slot and a real edge then connects.
#[tokio::test]
async fn slowloris_holds_its_networks_share_and_the_deadline_frees_it() {
    let identity = TlsIdentity::generate().unwrap();
    let cred = credential("edge-a", 1);
    let cfg = InterconnectConfig {
        max_pending_handshakes: 12,
        ..loopback_cfg()
    };
    let server = centre(&cfg, &identity, &[&cred]).await;
    let addr = server.local_addr();
    let pin = identity.fingerprint();
    let start = Instant::now();
    // A TLS record header and one byte of a ClientHello, then nothing.
    let mut half_hello = TcpStream::connect(addr).await.unwrap();
    half_hello
        .write_all(&[0x16, 0x03, 0x01, 0x02, 0x00, 0x01])
        .await
        .unwrap();
    // TLS finished, the hello never sent.
    let mut silent = tls_connect(addr, pin).await;
    // The hello dribbled out one byte every 200 ms (a valid one would take
    // minutes).
    let mut dribble = tls_connect(addr, pin).await;
    let dribbled = tokio::spawn(async move {
        let frame = encode_frame(&hello("edge-a", cred.expose()), MAX_HELLO_FRAME).unwrap();
        for b in frame {
            if dribble.write_all(&[b]).await.is_err() || dribble.flush().await.is_err() {
                break;
            }
            let mut one = [0u8; 1];
            match tokio::time::timeout(Duration::from_millis(200), dribble.read(&mut one)).await {
                Ok(Ok(0) | Err(_)) => return true,
                Ok(Ok(_)) => return false,
                Err(_) => {}
            }
        }
        false
    });
    stats_when(&server, WAIT, |s| s.pending_handshakes == 3).await;
    // The share holds: a fourth connection from the same /24 closes the
    // oldest (the half ClientHello) at once and keeps its slot.
    let mut fourth = connect_from([127, 0, 0, 2], addr).await;
    assert!(read_to_close(&mut half_hello, Duration::from_secs(2))
        .await
        .is_some());
    let s = stats_when(&server, WAIT, |s| s.pending_prefix_limited == 1).await;
    assert_eq!((s.pending_handshakes, s.pending_evicted), (3, 0));
    // The 10 s hello deadline covers TLS and the hello together.
    assert_eq!(
        read_to_close(&mut fourth, Duration::from_secs(12)).await,
        Some(Vec::new())
    );
    assert_eq!(
        read_to_close(&mut silent, Duration::from_secs(12)).await,
        Some(Vec::new())
    );
    assert!(dribbled.await.unwrap(), "the dribbling hello is cut off");
    let waited = start.elapsed();
    assert!(waited < Duration::from_secs(13), "{waited:?}");
    let s = stats_when(&server, WAIT, |s| s.pending_handshakes == 0).await;
    assert_eq!((s.handshake_timeouts, s.auth_ok, s.auth_failed), (3, 0, 0));
    // The slots are free again.
    let edge = EdgeControl::start(EdgeControlConfig {
        centre: addr.to_string(),
        server_name: DEFAULT_SERVER_NAME.to_owned(),
        credential: credential("edge-a", 1),
        trust: CentreTrust::Pin(pin),
        offer: Offer::MINIMUM,
        heartbeat: Duration::from_millis(200),
    })
    .unwrap();
    edge.wait_for_link(WAIT, |_| true).await.expect("connected");
}

/// One /24 (127.0.1.x) opening silent connections holds at most its share
/// of the pending slots (2 of 8), its own oldest closed at once; three more
/// /24s fill the table; an edge from a fifth /24 (127.0.0.1) is still
/// admitted, the busiest network's oldest giving up its slot, and
/// authenticates.
#[tokio::test]
async fn silent_connections_filling_the_pending_slots_cannot_keep_an_edge_out() {
    let identity = TlsIdentity::generate().unwrap();
    let cred = credential("edge-a", 1);
    let cfg = InterconnectConfig {
        max_pending_handshakes: 8,
        ..loopback_cfg()
    };
    let server = centre(&cfg, &identity, &[&cred]).await;
    let addr = server.local_addr();
    let mut flood = Vec::new();
    for host in 1..=6u8 {
        flood.push(connect_from([127, 0, 1, host], addr).await);
        stats_when(&server, WAIT, |s| {
            s.pending_prefix_limited == u64::from(host.saturating_sub(2))
                && s.pending_handshakes == u64::from(host.min(2))
        })
        .await;
    }
    // The four oldest were closed for the newer ones of their own /24.
    for tcp in &mut flood[..4] {
        assert_eq!(
            read_to_close(tcp, Duration::from_secs(2)).await,
            Some(Vec::new())
        );
    }
    let mut held = flood.split_off(4);
    for net in 2..=4u8 {
        for host in 1..=2u8 {
            held.push(connect_from([127, 0, net, host], addr).await);
        }
    }
    let s = stats_when(&server, WAIT, |s| s.pending_handshakes == 8).await;
    assert_eq!((s.pending_prefix_limited, s.pending_evicted), (4, 0));
    let edge = EdgeControl::start(EdgeControlConfig {
        centre: addr.to_string(),
        server_name: DEFAULT_SERVER_NAME.to_owned(),
        credential: cred,
        trust: CentreTrust::Pin(identity.fingerprint()),
        offer: Offer::MINIMUM,
        heartbeat: Duration::from_millis(200),
    })
    .unwrap();
    edge.wait_for_link(Duration::from_secs(3), |_| true)
        .await
        .expect("the edge authenticates while the flood holds its slots");
    let s = stats_when(&server, WAIT, |s| {
        s.auth_ok == 1 && s.pending_handshakes == 7
    })
    .await;
    assert_eq!((s.pending_evicted, s.pending_prefix_limited), (1, 4));
    // All four networks held two: the oldest (127.0.1.x's) gave way.
    assert_eq!(
        read_to_close(&mut held[0], Duration::from_secs(2)).await,
        Some(Vec::new())
    );
}

/// Length prefixes of 0, 16 KiB + 1 and 4 GiB − 1, a non-UTF-8 body and
/// JSON nested deeper than the parser's limit each close the connection at
/// once, without a reply and without waiting for the announced bytes.
#[tokio::test]
async fn hostile_hello_frames_close_without_a_reply() {
    let identity = TlsIdentity::generate().unwrap();
    let cred = credential("edge-a", 1);
    let server = centre(&loopback_cfg(), &identity, &[&cred]).await;
    let addr = server.local_addr();
    let pin = identity.fingerprint();
    let framed = |body: &[u8]| {
        let mut v = (body.len() as u32).to_be_bytes().to_vec();
        v.extend_from_slice(body);
        v
    };
    let nested = {
        let depth = 8000;
        let mut j = String::from(r#"{"kind":"node_enroll","payload":"#);
        j.push_str(&"[".repeat(depth));
        j.push_str(&"]".repeat(depth));
        j.push('}');
        assert!(j.len() <= MAX_HELLO_FRAME);
        j
    };
    let attacks: Vec<(&str, Vec<u8>)> = vec![
        ("zero length", 0u32.to_be_bytes().to_vec()),
        (
            "16 KiB + 1",
            ((MAX_HELLO_FRAME + 1) as u32).to_be_bytes().to_vec(),
        ),
        ("4 GiB - 1", u32::MAX.to_be_bytes().to_vec()),
        ("not UTF-8", framed(&[0xff, 0xfe, 0xfd, 0xfc, 0x80])),
        ("nested JSON", framed(nested.as_bytes())),
        ("not an object", framed(b"[1,2,3]")),
    ];
    let n = attacks.len() as u64;
    for (what, bytes) in attacks {
        let mut tls = tls_connect(addr, pin).await;
        let start = Instant::now();
        tls.write_all(&bytes).await.unwrap();
        tls.flush().await.unwrap();
        let got = read_to_close(&mut tls, Duration::from_secs(3)).await;
        assert_eq!(got, Some(Vec::new()), "{what}: closed without a reply");
        assert!(start.elapsed() < Duration::from_secs(3), "{what}");
    }
    let s = stats_when(&server, WAIT, |s| {
        s.frame_errors == n && s.pending_handshakes == 0
    })
    .await;
    assert_eq!((s.auth_ok, s.auth_failed, s.handshake_timeouts), (0, 0, 0));
    // A well-formed hello with a 16 000-byte token is an ordinary failure,
    // answered without the token.
    let mut tls = tls_connect(addr, pin).await;
    let big = hello("edge-a", &"A".repeat(16_000));
    tls.write_all(&encode_frame(&big, MAX_HELLO_FRAME).unwrap())
        .await
        .unwrap();
    let reply = read_to_close(&mut tls, WAIT).await.unwrap();
    let text = String::from_utf8_lossy(&reply);
    assert!(text.contains("node authentication failed"), "{text}");
    assert!(!text.contains("AAAA"), "{text}");
    stats_when(&server, WAIT, |s| s.auth_failed == 1).await;
    // The server still serves.
    let (_tls, ok) = authenticate(addr, pin, &cred).await;
    assert_eq!(ok.node_id, "edge-a");
}

/// An authenticated node: a frame announcing 4 MiB + 1 ends its session; a
/// frame of exactly 4 MiB (a bogus `type0`) is read and dropped, the
/// session lives on.
#[tokio::test]
async fn a_node_frame_over_4_mib_ends_its_session() {
    let identity = TlsIdentity::generate().unwrap();
    let cred = credential("edge-a", 1);
    let server = centre(&loopback_cfg(), &identity, &[&cred]).await;
    let (addr, pin) = (server.local_addr(), identity.fingerprint());
    let (mut tls, _) = authenticate(addr, pin, &cred).await;
    let mut body = br#"{"kind":"type0","packet":""#.to_vec();
    body.resize(MAX_CONTROL_FRAME - 2, b'A');
    body.extend_from_slice(br#""}"#);
    assert_eq!(body.len(), MAX_CONTROL_FRAME);
    let mut frame = (body.len() as u32).to_be_bytes().to_vec();
    frame.extend_from_slice(&body);
    tls.write_all(&frame).await.unwrap();
    let s = stats_when(&server, WAIT, |s| s.type0_dropped == 1).await;
    assert_eq!((s.active_nodes, s.frame_errors), (1, 0));
    tls.write_all(&((MAX_CONTROL_FRAME + 1) as u32).to_be_bytes())
        .await
        .unwrap();
    assert!(read_to_close(&mut tls, WAIT).await.is_some());
    let s = stats_when(&server, WAIT, |s| s.active_nodes == 0).await;
    assert_eq!(s.frame_errors, 1);
}

/// Each source address has its own attempt window: 127.0.0.2 exhausting
/// its hellos does not lock out 127.0.0.3, and the table evicts nobody.
#[tokio::test]
async fn each_source_address_has_its_own_attempt_window() {
    let identity = TlsIdentity::generate().unwrap();
    let cred = credential("edge-a", 1);
    let cfg = InterconnectConfig {
        auth_attempts_per_minute_per_ip: 2,
        ..loopback_cfg()
    };
    let server = centre(&cfg, &identity, &[&cred]).await;
    let (addr, pin) = (server.local_addr(), identity.fingerprint());
    // Stay clear of a minute boundary (windows are whole wall minutes).
    let second = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_secs()
        % 60;
    if second >= 50 {
        tokio::time::sleep(Duration::from_secs(61 - second)).await;
    }
    let wrong = credential("edge-a", 2);
    for last in 2..=9u8 {
        let from = IpAddr::from([127, 0, 0, last]);
        for _ in 0..3 {
            let mut tls = tls_over(connect_from(from, addr).await, pin).await;
            let frame = encode_frame(&hello("edge-a", wrong.expose()), MAX_HELLO_FRAME).unwrap();
            tls.write_all(&frame).await.unwrap();
            let reply = read_to_close(&mut tls, WAIT).await.unwrap();
            assert!(String::from_utf8_lossy(&reply).contains("node authentication failed"));
        }
    }
    let s = stats_when(&server, WAIT, |s| s.auth_rate_rejected == 8).await;
    assert_eq!((s.auth_failed, s.auth_ip_evictions), (16, 0), "{s:?}");
    // A fresh address authenticates.
    let tcp = connect_from(IpAddr::from([127, 0, 0, 10]), addr).await;
    let mut tls = tls_over(tcp, pin).await;
    let frame = encode_frame(&hello("edge-a", cred.expose()), MAX_HELLO_FRAME).unwrap();
    tls.write_all(&frame).await.unwrap();
    stats_when(&server, WAIT, |s| s.auth_ok == 1).await;
}

/// A node disabled or removed in the store while its session is live
/// loses the session within [`CREDENTIAL_RECHECK`] and cannot reconnect.
#[tokio::test]
async fn a_disabled_or_removed_node_loses_its_live_session() {
    for backend in [Backend::Sqlite, Backend::Postgres] {
        let Some(scratch) = ScratchStore::create(backend, "interconnect_revoke")
            .await
            .unwrap()
        else {
            continue;
        };
        let store = support::open_cheap(scratch.location()).await;
        let identity = TlsIdentity::generate().unwrap();
        let cred = credential("edge-a", 1);
        store
            .add_node("edge-a", &cred.hash_hex(), 256)
            .await
            .unwrap();
        let server = centre_with(
            &loopback_cfg(),
            &identity,
            NodeAuthority::from_store(store.clone()),
        )
        .await;
        let (addr, pin) = (server.local_addr(), identity.fingerprint());
        let within = CREDENTIAL_RECHECK + WAIT;
        for (round, revoke) in ["disable", "remove"].into_iter().enumerate() {
            let (mut tls, _) = authenticate(addr, pin, &cred).await;
            match revoke {
                "disable" => store.set_node_disabled("edge-a", true).await.unwrap(),
                _ => store.remove_node("edge-a").await.unwrap(),
            }
            let start = Instant::now();
            let closed = tokio::time::timeout(within, async {
                let beat = encode_frame(&ControlMessage::new("node_heartbeat"), MAX_CONTROL_FRAME)
                    .unwrap();
                // Heartbeats keep the session busy: only the re-check ends it.
                loop {
                    if tls.write_all(&beat).await.is_err() {
                        return;
                    }
                    let mut b = [0u8; 64];
                    if let Ok(Ok(0) | Err(_)) =
                        tokio::time::timeout(Duration::from_millis(500), tls.read(&mut b)).await
                    {
                        return;
                    }
                }
            })
            .await;
            assert!(closed.is_ok(), "{backend:?} {revoke}: session still open");
            assert!(start.elapsed() <= within);
            let s = stats_when(&server, WAIT, |s| s.active_nodes == 0).await;
            assert_eq!(s.credentials_revoked, round as u64 + 1, "{s:?}");
            // And it cannot come back.
            let mut tls = tls_connect(addr, pin).await;
            let frame = encode_frame(&hello("edge-a", cred.expose()), MAX_HELLO_FRAME).unwrap();
            tls.write_all(&frame).await.unwrap();
            let reply = read_to_close(&mut tls, WAIT).await.unwrap();
            assert!(String::from_utf8_lossy(&reply).contains("node authentication failed"));
            if revoke == "disable" {
                store.set_node_disabled("edge-a", false).await.unwrap();
            }
        }
        drop(server);
        store.close().await;
        scratch.remove().await.unwrap();
    }
}
