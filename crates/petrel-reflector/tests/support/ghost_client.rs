//! The UDP side of the app tests: Type 1 ghost logins and tagged ghost
//! packets (`specs/draarl-apps.md` §2.1–§2.4), and physical devices that
//! log in with a heartbeat and talk (draarl-v1 §2.3, §3).

use std::net::{SocketAddr, UdpSocket};
use std::time::{Duration, Instant};

use petrel_reflector::codec::{decode, encode, AppLoginSuccess, Header, PacketType};
use petrel_reflector::runtime::server::ServerHandle;

use super::{heartbeat, recv_type};

/// The device password the app tests seed accounts with.
pub const PW: &str = "Bench123";
/// A client instance id (§2.2: a UUID).
pub const IID: &str = "11111111-1111-4111-8111-111111111111";

/// A UDP socket on `ip` (any port) whose reads time out after `timeout`.
pub fn udp_client(ip: &str, timeout: Duration) -> UdpSocket {
    let s = UdpSocket::bind(format!("{ip}:0")).unwrap();
    s.set_read_timeout(Some(timeout)).unwrap();
    s
}

/// The `n`-th distinct client instance id.
pub fn instance(n: u32) -> String {
    format!("{n:08x}-1111-4111-8111-111111111111")
}

/// The Type 1 JSON of §2.2 for `token` under instance `iid`.
pub fn login_json(token: &str, iid: &str) -> String {
    format!(
        r#"{{"version":1,"token":"{token}","client_instance_id":"{iid}","capabilities":["multi_receive_v1","source_group_v1"]}}"#
    )
}

/// A Type 1 packet with DevModel `dev_model` carrying `data` as is.
pub fn type1_data(data: &[u8], dev_model: u8) -> Vec<u8> {
    let mut h = Header::new(PacketType::JwtAuth);
    h.dev_model = dev_model;
    encode(&h, data).unwrap()
}

/// A Type 1 login of `token` under `iid` (DevModel 101, the Android app).
pub fn type1(token: &str, iid: &str) -> Vec<u8> {
    type1_data(login_json(token, iid).as_bytes(), 101)
}

/// A ghost session's packet: header Username `name`, `ssid`, `dev_model`
/// and the session tag in Reserved (§2.4).
pub fn ghost_packet(
    t: PacketType,
    name: &str,
    ssid: u8,
    dev_model: u8,
    tag: u32,
    data: &[u8],
) -> Vec<u8> {
    let mut h = Header::new(t);
    h.set_username(name);
    h.ssid = ssid;
    h.dev_model = dev_model;
    h.reserved = tag;
    encode(&h, data).unwrap()
}

/// The next Type 1 reply on `sock` and the address it came from, skipping
/// other packets for up to 2 s; `None` once a read times out.
pub fn recv_login(sock: &UdpSocket) -> Option<(Vec<u8>, SocketAddr)> {
    let mut buf = [0u8; 2048];
    let deadline = Instant::now() + Duration::from_secs(2);
    while Instant::now() < deadline {
        let (n, from) = sock.recv_from(&mut buf).ok()?;
        if decode(&buf[..n]).is_ok_and(|p| p.header.packet_type == PacketType::JwtAuth) {
            return Some((buf[..n].to_vec(), from));
        }
    }
    None
}

/// Logs in `token`/`iid` from `sock`: the success (its tag checked against
/// the header's Reserved), or the reject's DATA.
pub fn login(
    sock: &UdpSocket,
    server: SocketAddr,
    token: &str,
    iid: &str,
) -> Result<AppLoginSuccess, Vec<u8>> {
    sock.send_to(&type1(token, iid), server).unwrap();
    let (reply, _) = recv_login(sock).expect("a Type 1 reply");
    let p = decode(&reply).unwrap();
    if p.data.first() == Some(&0) {
        let ok: AppLoginSuccess = serde_json::from_slice(&p.data[1..]).unwrap();
        assert_eq!(ok.session_tag, p.header.reserved);
        Ok(ok)
    } else {
        Err(p.data.to_vec())
    }
}

/// Every datagram that reaches `sock` until a read times out.
pub fn drain(sock: &UdpSocket) -> Vec<Vec<u8>> {
    let mut buf = [0u8; 2048];
    let mut out = Vec::new();
    while let Ok((n, _)) = sock.recv_from(&mut buf) {
        out.push(buf[..n].to_vec());
    }
    out
}

/// A physical device `name`-`ssid` on `ip`, logged in to `srv` with a
/// heartbeat (password [`PW`]); reads time out after 500 ms.
pub fn physical(ip: &str, name: &str, ssid: u8, srv: &ServerHandle) -> UdpSocket {
    let s = udp_client(ip, Duration::from_millis(500));
    s.send_to(&heartbeat(name, ssid, PW, &[]), srv.local_addr())
        .unwrap();
    assert!(recv_type(&s, PacketType::Heartbeat).is_some());
    s
}

/// A voice packet of the physical device `name`-`ssid` carrying `data`.
pub fn voice(name: &str, ssid: u8, data: &[u8]) -> Vec<u8> {
    let mut h = Header::new(PacketType::Voice);
    h.set_username(name);
    h.ssid = ssid;
    encode(&h, data).unwrap()
}
