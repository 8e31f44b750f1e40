//! Android-style UDP ghost receivers (draarl-apps §2): a Type 1 login with
//! the strict JSON of §2.1, checked against the success reply of §2.3 as
//! the Android app checks it, then a [`Device`] whose header carries the
//! session tag in Reserved (§2.5) and whose heartbeat is the 24-byte GPS
//! block Android sends (§2.8), the first one right after the login.

use std::net::{SocketAddr, SocketAddrV4, UdpSocket};
use std::time::{Duration, Instant};

use petrel_reflector::codec::{decode, encode, Header, PacketType};
use petrel_reflector::model::DEV_MODEL_ANDROID;
use petrel_sys::socket::{set_buffers, BufferRequest, OnRefusal};
use serde::Deserialize;

use super::device::{device_ip, Device};
use super::LoadError;

/// How long a ghost waits for the Type 1 reply (Android waits 10 s, §2.8).
const LOGIN_REPLY_TIMEOUT: Duration = Duration::from_secs(10);
/// Capabilities every ghost announces (§2.1).
const CAPABILITIES: [&str; 2] = ["multi_receive_v1", "source_group_v1"];

/// The success JSON of a Type 1 reply (§2.3), as far as the app reads it.
#[derive(Debug, Deserialize)]
struct Welcome {
    version: u32,
    session_id: String,
    session_tag: u32,
    client_instance_id: String,
    tx_group_id: i64,
    rx_group_ids: Vec<i64>,
}

/// A ghost that is logged in: its socket and headers, and its session id
/// for the routing API.
pub(super) struct Ghost {
    pub(super) device: Device,
    pub(super) session_id: String,
}

/// Logs a ghost in from the address of device slot `slot` (its own
/// 127.x.y.z address, after the physical devices' slots) with `token` and
/// `instance` (a UUID), and checks the reply the way Android does (§2.3).
pub(super) fn login(
    slot: usize,
    server: SocketAddr,
    token: &str,
    instance: &str,
) -> Result<Ghost, LoadError> {
    let sock = UdpSocket::bind(SocketAddrV4::new(device_ip(slot), 0))?;
    let _ = set_buffers(
        &sock,
        BufferRequest {
            send: None,
            recv: Some(256 << 10),
        },
        OnRefusal::Ignore,
    );
    sock.connect(server)?;
    let mut header = Header::new(PacketType::JwtAuth);
    header.dev_model = DEV_MODEL_ANDROID;
    let json = serde_json::json!({
        "version": 1,
        "token": token,
        "client_instance_id": instance,
        "capabilities": CAPABILITIES,
    })
    .to_string();
    let request = encode(&header, json.as_bytes()).map_err(|e| invalid(e.to_string()))?;
    sock.send(&request)?;

    let deadline = Instant::now() + LOGIN_REPLY_TIMEOUT;
    let mut buf = [0u8; 1500];
    loop {
        let left = deadline.saturating_duration_since(Instant::now());
        if left.is_zero() {
            return Err(invalid(format!(
                "ghost {slot}: no Type 1 reply within 10 s"
            )));
        }
        sock.set_read_timeout(Some(left))?;
        let n = match sock.recv(&mut buf) {
            Ok(n) => n,
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
            Err(_) => {
                return Err(invalid(format!(
                    "ghost {slot}: no Type 1 reply within 10 s"
                )))
            }
        };
        let Ok(p) = decode(&buf[..n]) else { continue };
        if p.header.packet_type != PacketType::JwtAuth {
            continue;
        }
        let (welcome, reply) = check_welcome(&p.header, p.data, instance)
            .map_err(|e| invalid(format!("ghost {slot}: {e}")))?;
        let mut h = Header::new(PacketType::Heartbeat);
        h.username = reply.username;
        h.ssid = reply.ssid;
        h.dev_model = DEV_MODEL_ANDROID;
        h.reserved = welcome.session_tag;
        let heartbeat = encode(&h, &[0u8; 24]).map_err(|e| invalid(e.to_string()))?;
        sock.set_read_timeout(None)?;
        // Android heartbeats at once after the login (§2.8); the reflector
        // sends a ghost fan-out only once a tagged packet came from its
        // address.
        sock.send(&heartbeat)?;
        return Ok(Ghost {
            device: Device {
                sock,
                header: h,
                heartbeat,
                downlink_reserved: 0,
                receipt_row: 0,
            },
            session_id: welcome.session_id,
        });
    }
}

/// The checks Android makes before it accepts a Type 1 reply (§2.3): status
/// 0, version 1, a session id, the tag in Reserved, TX among RX, and its own
/// instance id echoed.
fn check_welcome(reply: &Header, data: &[u8], instance: &str) -> Result<(Welcome, Header), String> {
    let Some((&status, rest)) = data.split_first() else {
        return Err("empty Type 1 reply".into());
    };
    if status != 0 {
        return Err(format!(
            "login refused: code {status} {}",
            String::from_utf8_lossy(rest)
        ));
    }
    let w: Welcome =
        serde_json::from_slice(rest).map_err(|e| format!("unreadable success JSON: {e}"))?;
    let ok = w.version == 1
        && !w.session_id.trim().is_empty()
        && w.session_tag != 0
        && w.session_tag == reply.reserved
        && w.tx_group_id > 0
        && w.rx_group_ids.contains(&w.tx_group_id)
        && w.client_instance_id.eq_ignore_ascii_case(instance);
    if !ok {
        return Err(format!("success reply Android would reject: {w:?}"));
    }
    Ok((w, reply.clone()))
}

fn invalid(m: String) -> LoadError {
    LoadError::Invalid(m)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn reply(tag: u32) -> Header {
        let mut h = Header::new(PacketType::JwtAuth);
        h.reserved = tag;
        h
    }

    #[test]
    fn a_welcome_is_checked_as_android_checks_it() {
        let iid = "11111111-1111-4111-8111-111111111111";
        let body = |tag: u32, tx: i64, iid: &str| {
            let mut d = vec![0u8];
            d.extend_from_slice(
                serde_json::json!({"version":1,"session_id":"s","session_tag":tag,
                    "client_instance_id":iid,"tx_group_id":tx,"rx_group_ids":[1, tx]})
                .to_string()
                .as_bytes(),
            );
            d
        };
        assert!(check_welcome(&reply(7), &body(7, 5, iid), iid).is_ok());
        assert!(check_welcome(&reply(7), &body(7, 5, &iid.to_uppercase()), iid).is_ok());
        // The tag must be the header's Reserved.
        assert!(check_welcome(&reply(8), &body(7, 5, iid), iid).is_err());
        // Another install's instance id.
        assert!(check_welcome(
            &reply(7),
            &body(7, 5, "22222222-2222-4222-8222-222222222222"),
            iid
        )
        .is_err());
        // A reject: code and text are reported.
        let e = check_welcome(&reply(0), b"\x02User not found", iid).unwrap_err();
        assert!(e.contains("code 2 User not found"), "{e}");
    }
}
