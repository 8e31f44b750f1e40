//! App ("ghost") sessions on real loopback sockets (`specs/draarl-apps.md`
//! §2): an Android-style client logs in with Type 1 through a fake account
//! store, heartbeats, talks to and hears a physical device; rejects reach
//! it from the address it targeted. SQLite store.
#![allow(clippy::unwrap_used)]

use std::net::{SocketAddr, UdpSocket};
use std::panic::{catch_unwind, resume_unwind, AssertUnwindSafe};
use std::sync::Arc;
use std::time::Duration;

use petrel_reflector::codec::{decode, encode, AppLoginSuccess, Header, PacketType};
use petrel_reflector::model::{
    AppAuthRequest, AppGrant, AppReject, AppUser, Backend, Routing, RoutingChange, RoutingReject,
};
use petrel_reflector::runtime::app_authority::{AppAuthority, AppFuture};
use petrel_reflector::runtime::server::ServerHandle;
use tokio::runtime::Runtime;

mod support;
use support::{account, heartbeat, recv_type, seed_users, udp_config, ScratchStore};

const PW: &str = "Bench123";
const IID: &str = "11111111-1111-4111-8111-111111111111";

/// Test-only account store: token `ok-<id>-<name>` is user `<id>` named
/// `<name>`, routed to TX 999; anything else is an invalid token.
#[derive(Debug)]
struct FakeAuthority;

impl AppAuthority for FakeAuthority {
    fn authorize(&self, req: AppAuthRequest) -> AppFuture<Result<AppGrant, AppReject>> {
        Box::pin(async move {
            let mut parts = req.token.splitn(3, '-');
            match (parts.next(), parts.next(), parts.next()) {
                (Some("ok"), Some(id), Some(name)) => Ok(AppGrant {
                    user: AppUser {
                        user_id: id.parse().map_err(|_| AppReject::InvalidToken)?,
                        username: name.into(),
                        callsign: format!("CS{id}"),
                        is_admin: false,
                    },
                    routing: Routing::new(999, vec![]),
                }),
                _ => Err(AppReject::InvalidToken),
            }
        })
    }

    fn change_routing(&self, change: RoutingChange) -> AppFuture<Result<Routing, RoutingReject>> {
        Box::pin(async move { Ok(change.requested) })
    }
}

fn with_server(
    name: &str,
    authority: Option<Arc<dyn AppAuthority>>,
    body: impl FnOnce(&ServerHandle),
) {
    let rt = Runtime::new().unwrap();
    let scratch = rt
        .block_on(ScratchStore::create(Backend::Sqlite, name))
        .unwrap()
        .unwrap();
    seed_users(
        &rt,
        scratch.location(),
        [account("alice", "BG7AAA".into(), 1, PW)],
    );
    // Four shards: a Type 1 (no username) lands on the shard of its source
    // address, the session's later packets on that of their username.
    let cfg = petrel_reflector::model::ServerConfig {
        ingress_workers: 4,
        ..udp_config(scratch.location())
    };
    let srv = rt
        .block_on(ServerHandle::start_with_apps(cfg, authority))
        .unwrap();
    let outcome = catch_unwind(AssertUnwindSafe(|| body(&srv)));
    rt.block_on(srv.shutdown());
    rt.block_on(scratch.remove()).unwrap();
    if let Err(p) = outcome {
        resume_unwind(p);
    }
}

fn client(ip: &str) -> UdpSocket {
    let s = UdpSocket::bind(format!("{ip}:0")).unwrap();
    s.set_read_timeout(Some(Duration::from_millis(500)))
        .unwrap();
    s
}

fn type1(token: &str, dev_model: u8) -> Vec<u8> {
    let mut h = Header::new(PacketType::JwtAuth);
    h.dev_model = dev_model;
    let json = format!(
        r#"{{"version":1,"token":"{token}","client_instance_id":"{IID}","capabilities":["multi_receive_v1","source_group_v1"]}}"#
    );
    encode(&h, json.as_bytes()).unwrap()
}

/// The next Type 1 reply and the address it came from.
fn recv_login(sock: &UdpSocket) -> (Vec<u8>, SocketAddr) {
    let mut buf = [0u8; 2048];
    loop {
        let (n, from) = sock.recv_from(&mut buf).expect("a Type 1 reply");
        if decode(&buf[..n]).is_ok_and(|p| p.header.packet_type == PacketType::JwtAuth) {
            return (buf[..n].to_vec(), from);
        }
    }
}

fn ghost_packet(t: PacketType, name: &str, tag: u32, data: &[u8]) -> Vec<u8> {
    let mut h = Header::new(t);
    h.set_username(name);
    h.ssid = 101;
    h.dev_model = 101;
    h.reserved = tag;
    encode(&h, data).unwrap()
}

#[test]
fn an_android_ghost_talks_and_listens_with_a_physical_device() {
    with_server("ghost_udp", Some(Arc::new(FakeAuthority)), |srv| {
        let server = srv.local_addr();
        let alice = client("127.0.0.2");
        alice
            .send_to(&heartbeat("alice", 7, PW, &[]), server)
            .unwrap();
        assert!(recv_type(&alice, PacketType::Heartbeat).is_some());

        let phone = client("127.0.0.3");
        phone
            .send_to(&type1("ok-1000-ghostbob", 101), server)
            .unwrap();
        let (reply, from) = recv_login(&phone);
        assert_eq!(from, server);
        let p = decode(&reply).unwrap();
        assert_eq!(p.data[0], 0, "{}", String::from_utf8_lossy(p.data));
        let ok: AppLoginSuccess = serde_json::from_slice(&p.data[1..]).unwrap();
        assert_eq!(ok.session_tag, p.header.reserved);
        assert_eq!(p.header.username_str(), Some("ghostbob"));
        assert_eq!(p.header.ssid, 101);
        let tag = ok.session_tag;

        // Heartbeat: one reply, Reserved 0; it also proves the address.
        phone
            .send_to(
                &ghost_packet(PacketType::Heartbeat, "ghostbob", tag, &[0; 24]),
                server,
            )
            .unwrap();
        let hb = recv_type(&phone, PacketType::Heartbeat).unwrap();
        assert_eq!(decode(&hb).unwrap().header.reserved, 0);

        // The ghost talks; alice hears it with Reserved 0.
        phone
            .send_to(
                &ghost_packet(PacketType::Voice, "ghostbob", tag, b"opus"),
                server,
            )
            .unwrap();
        let heard = recv_type(&alice, PacketType::Voice).unwrap();
        let h = decode(&heard).unwrap();
        assert_eq!(h.header.username_str(), Some("ghostbob"));
        assert_eq!((h.header.reserved, h.data), (0, &b"opus"[..]));
        assert!(recv_type(&phone, PacketType::Voice).is_none());

        // Alice talks after the floor frees; the ghost hears group 999.
        std::thread::sleep(Duration::from_millis(1_000));
        let mut v = Header::new(PacketType::Voice);
        v.set_username("alice");
        v.ssid = 7;
        alice.send_to(&encode(&v, b"vv").unwrap(), server).unwrap();
        let got = recv_type(&phone, PacketType::Voice).unwrap();
        let g = decode(&got).unwrap();
        assert_eq!(g.header.username_str(), Some("alice"));
        assert_eq!((g.header.reserved, g.data), (999, &b"vv"[..]));

        // A wrong tag from the phone, and the right tag from elsewhere: dropped.
        let thief = client("127.0.0.4");
        thief
            .send_to(
                &ghost_packet(PacketType::Voice, "ghostbob", tag, b"x"),
                server,
            )
            .unwrap();
        phone
            .send_to(
                &ghost_packet(PacketType::Voice, "ghostbob", tag ^ 1, b"x"),
                server,
            )
            .unwrap();
        assert!(recv_type(&alice, PacketType::Voice).is_none());
        assert_eq!(srv.app_session_counts(999), (1, 0));
        let st = srv.stats().session;
        assert_eq!(
            (
                st.ghost_endpoint_rejects,
                st.ghost_invalid_tags,
                st.app_logins_accepted
            ),
            (1, 1, 1)
        );

        // A bad token is refused with code 1.
        let other = client("127.0.0.5");
        other.send_to(&type1("nope", 101), server).unwrap();
        let (reply, from) = recv_login(&other);
        assert_eq!(from, server);
        assert_eq!(
            decode(&reply).unwrap().data,
            b"\x01Invalid or expired token"
        );
    });
}

#[test]
fn without_an_authority_every_token_is_invalid() {
    with_server("ghost_no_authority", None, |srv| {
        let phone = client("127.0.0.3");
        phone
            .send_to(&type1("ok-1000-ghostbob", 101), srv.local_addr())
            .unwrap();
        let (reply, _) = recv_login(&phone);
        assert_eq!(
            decode(&reply).unwrap().data,
            b"\x01Invalid or expired token"
        );
    });
}

#[test]
fn radio_routes_are_served_and_ask_for_the_caller_not_the_admin_token() {
    let rt = Runtime::new().unwrap();
    let scratch = rt
        .block_on(ScratchStore::create(Backend::Sqlite, "radio_http"))
        .unwrap()
        .unwrap();
    let cfg = petrel_reflector::model::ServerConfig {
        http_listen: Some("127.0.0.1:0".parse().unwrap()),
        ..udp_config(scratch.location())
    };
    let srv = rt
        .block_on(ServerHandle::start_with_apps(
            cfg,
            Some(Arc::new(FakeAuthority)),
        ))
        .unwrap();
    let outcome = catch_unwind(AssertUnwindSafe(|| {
        let http_addr = srv.http_addr().unwrap();
        let (code, answer) = support::http(
            http_addr,
            "GET /api/radio/sessions HTTP/1.1\r\nhost: x\r\n\r\n",
        );
        assert_eq!(code, 401);
        assert!(answer.contains("未提供认证令牌"), "{answer}");
        // The admin API stays off without an admin token.
        let (code, _) = support::http(http_addr, "GET /api/stats HTTP/1.1\r\nhost: x\r\n\r\n");
        assert_eq!(code, 404);
    }));
    rt.block_on(srv.shutdown());
    rt.block_on(scratch.remove()).unwrap();
    if let Err(p) = outcome {
        resume_unwind(p);
    }
}
