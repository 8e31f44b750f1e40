//! The HTTP endpoint's limits on real loopback TCP: the admin token's
//! minimum length, 401/404 answers before anything else, body size, request
//! and header timeouts, the connection caps with idle eviction, the
//! per-prefix budget, and admin writes naming a group that does not exist.
//! Each test runs its own server on a fresh SQLite store.
#![allow(clippy::unwrap_used)]

use std::io::{ErrorKind, Read, Write};
use std::net::{Ipv4Addr, SocketAddr, TcpStream};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering::Relaxed};
use std::time::{Duration, Instant};

use petrel_reflector::model::{Backend, HttpConfig, ServerConfig};
use petrel_reflector::runtime::server::{ServerError, ServerHandle};
use tokio::runtime::Runtime;

mod support;
use support::{account, connect, http, read_answer, ScratchStore};

const TOKEN: &str = "0123456789abcdef-admin";

/// Starts a server with `admin_token` and `http` limits, runs `body` with
/// its HTTP address, then shuts it down and removes the store.
fn with_server(
    name: &str,
    admin_token: Option<&str>,
    http: HttpConfig,
    body: impl FnOnce(&ServerHandle, SocketAddr),
) {
    let config = |db: &str| ServerConfig {
        http_listen: Some("127.0.0.1:0".parse().unwrap()),
        admin_token: admin_token.map(str::to_owned),
        http,
        ..support::udp_config(db)
    };
    support::with_sqlite_server(name, [], config, |srv| {
        body(srv, srv.http_addr().unwrap());
    });
}

fn get(addr: SocketAddr, path: &str, auth: &str) -> u16 {
    http(
        addr,
        &format!("GET {path} HTTP/1.1\r\nHost: x\r\n{auth}Connection: close\r\n\r\n"),
    )
    .0
}

/// Sends an admin `PUT` of bob-1's group with the token, `framing`
/// (`Content-Length` or `Transfer-Encoding` header lines) and `body`; the
/// status code.
fn put_group(web: SocketAddr, framing: &str, body: &str) -> u16 {
    http(
        web,
        &format!(
            "PUT /api/devices/bob/1/group HTTP/1.1\r\nHost: x\r\n{}Content-Type: application/json\r\n{framing}Connection: close\r\n\r\n{body}",
            bearer(TOKEN)
        ),
    )
    .0
}

fn bearer(token: &str) -> String {
    format!("Authorization: Bearer {token}\r\n")
}

/// A connection to `web` from `from` (any port), reads timing out after 5 s.
fn try_connect_from(from: Ipv4Addr, web: SocketAddr) -> std::io::Result<TcpStream> {
    let s = socket2::Socket::new(socket2::Domain::IPV4, socket2::Type::STREAM, None)?;
    s.bind(&SocketAddr::from((from, 0)).into())?;
    s.connect(&web.into())?;
    let s = TcpStream::from(s);
    s.set_read_timeout(Some(Duration::from_secs(5)))?;
    Ok(s)
}

fn connect_from(from: Ipv4Addr, web: SocketAddr) -> TcpStream {
    try_connect_from(from, web).unwrap()
}

/// `GET /healthz` from `from`; the status code.
fn healthz_from(from: Ipv4Addr, web: SocketAddr) -> u16 {
    let mut s = connect_from(from, web);
    s.write_all(b"GET /healthz HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
        .unwrap();
    read_answer(&mut s).0
}

/// A connection that sent a complete admin request head (with the token)
/// and part of its body: it is being served, so it is never evicted.
fn hold_mid_body(web: SocketAddr) -> TcpStream {
    let mut s = connect(web);
    s.write_all(
        format!(
            "PUT /api/devices/bob/1/group HTTP/1.1\r\nHost: x\r\n{}Content-Type: application/json\r\nContent-Length: 20\r\n\r\n{{\"gro",
            bearer(TOKEN)
        )
        .as_bytes(),
    )
    .unwrap();
    s
}

/// Whether the server has closed `s` (without blocking).
fn closed_by_server(s: &TcpStream) -> bool {
    s.set_nonblocking(true).unwrap();
    let mut b = [0u8; 1];
    let closed = match s.peek(&mut b) {
        Ok(n) => n == 0,
        Err(e) => e.kind() != ErrorKind::WouldBlock,
    };
    s.set_nonblocking(false).unwrap();
    closed
}

#[test]
fn short_or_empty_admin_token_refuses_to_start() {
    let rt = Runtime::new().unwrap();
    let scratch = rt
        .block_on(ScratchStore::create(Backend::Sqlite, "short_token"))
        .unwrap()
        .unwrap();
    for token in ["", "fifteen-chars!!"] {
        let cfg = ServerConfig {
            http_listen: Some("127.0.0.1:0".parse().unwrap()),
            admin_token: Some(token.into()),
            ..support::udp_config(scratch.location())
        };
        match rt.block_on(ServerHandle::start(cfg)) {
            Err(ServerError::Config(e)) => {
                assert_eq!(e.field, "admin_token");
                let text = ServerError::Config(e).to_string();
                assert!(text.starts_with("config: admin_token = "), "{text}");
                assert!(token.is_empty() || !text.contains(token), "{text}");
            }
            other => panic!("token {token:?} accepted: {other:?}"),
        }
    }
    rt.block_on(scratch.remove()).unwrap();
}

#[test]
fn admin_routes_need_the_exact_token_and_are_off_without_one() {
    with_server(
        "admin_401",
        Some(TOKEN),
        HttpConfig::default(),
        |srv, web| {
            assert_eq!(get(web, "/api/stats", ""), 401);
            assert_eq!(get(web, "/api/stats", "Authorization: Basic eA==\r\n"), 401);
            for wrong in ["x", "0123456789abcdef", "0123456789abcdef-admin-and-more"] {
                assert_eq!(get(web, "/api/stats", &bearer(wrong)), 401, "{wrong}");
            }
            assert_eq!(get(web, "/api/stats", &bearer(TOKEN)), 200);
            assert_eq!(srv.stats().http.unauthorized, 5);
        },
    );
    with_server("admin_off", None, HttpConfig::default(), |_, web| {
        // No token configured: the admin API is disabled, not open.
        assert_eq!(get(web, "/api/stats", ""), 404);
        assert_eq!(get(web, "/api/stats", &bearer("")), 404);
        assert_eq!(get(web, "/healthz", ""), 200);
    });
}

#[test]
fn oversize_bodies_get_413_and_slow_bodies_408() {
    let http_cfg = HttpConfig {
        max_body_bytes: 256,
        request_timeout_ms: 300,
        ..HttpConfig::default()
    };
    with_server("body_413", Some(TOKEN), http_cfg, |srv, web| {
        // Announced too large: refused before the body is read.
        let code = put_group(web, "Content-Length: 100000\r\n", "{\"group_id\"");
        assert_eq!(code, 413);
        // Chunked, growing past the limit while read.
        let chunk = format!("{:x}\r\n{}\r\n", 300, " ".repeat(300));
        let code = put_group(
            web,
            "Transfer-Encoding: chunked\r\n",
            &format!("{chunk}0\r\n\r\n"),
        );
        assert_eq!(code, 413);
        // A body that never completes: the whole request times out.
        let started = Instant::now();
        let code = put_group(web, "Content-Length: 20\r\n", "{\"gro");
        assert_eq!(code, 408);
        assert!(started.elapsed() < Duration::from_secs(3));
        let s = srv.stats().http;
        assert_eq!((s.body_too_large, s.request_timeouts), (2, 1));
    });
}

#[test]
fn slow_loris_is_closed_after_the_header_timeout() {
    let http_cfg = HttpConfig {
        header_timeout_ms: 300,
        ..HttpConfig::default()
    };
    with_server("slow_loris", None, http_cfg, |srv, web| {
        let mut s = connect(web);
        let started = Instant::now();
        // Headers trickle in and never end.
        s.write_all(b"GET /healthz HTTP/1.1\r\nHost: x\r\n")
            .unwrap();
        std::thread::sleep(Duration::from_millis(100));
        let _ = s.write_all(b"X-Slow: 1\r\n");
        let mut buf = [0u8; 256];
        let n = s.read(&mut buf).unwrap_or(0);
        let closed_after = started.elapsed();
        assert!(
            !String::from_utf8_lossy(&buf[..n]).contains("200 OK"),
            "answered"
        );
        assert!(
            closed_after >= Duration::from_millis(250) && closed_after < Duration::from_secs(2),
            "{closed_after:?}"
        );
        // An idle connection (no byte at all) is closed the same way.
        let mut idle = connect(web);
        let started = Instant::now();
        let _ = idle.read(&mut buf);
        assert!(started.elapsed() < Duration::from_secs(2));
        std::thread::sleep(Duration::from_millis(50));
        assert_eq!(srv.stats().http.header_timeouts, 2);
        assert_eq!(get(web, "/healthz", ""), 200);
    });
}

#[test]
fn connection_cap_refuses_and_frees_slots() {
    let http_cfg = HttpConfig {
        max_connections: 2,
        header_timeout_ms: 10_000,
        ..HttpConfig::default()
    };
    with_server("conn_cap", Some(TOKEN), http_cfg, |srv, web| {
        let a = hold_mid_body(web);
        let b = hold_mid_body(web);
        std::thread::sleep(Duration::from_millis(100));
        // Both slots are held by requests being served (their headers are
        // complete, so neither is evictable): the next gets 503.
        for _ in 0..3 {
            assert_eq!(get(web, "/healthz", ""), 503);
        }
        let s = srv.stats().http;
        assert_eq!((s.connections_accepted, s.connections_refused), (2, 3));
        // Closing one frees its slot.
        drop(a);
        std::thread::sleep(Duration::from_millis(100));
        assert_eq!(get(web, "/healthz", ""), 200);
        drop(b);
    });
}

#[test]
fn idle_connections_make_room_for_newcomers() {
    let http_cfg = HttpConfig {
        max_connections: 2,
        header_timeout_ms: 10_000,
        ..HttpConfig::default()
    };
    with_server("conn_evict", None, http_cfg, |srv, web| {
        // Every slot is held: one connection idle, one with half its headers.
        let idle = connect(web);
        let mut half = connect(web);
        half.write_all(b"GET /healthz HTTP/1.1\r\nHost: x\r\n")
            .unwrap();
        std::thread::sleep(Duration::from_millis(100));
        // A newcomer closes the oldest (the idle one) and is served.
        assert_eq!(get(web, "/healthz", ""), 200);
        std::thread::sleep(Duration::from_millis(50));
        assert!(closed_by_server(&idle));
        assert!(!closed_by_server(&half));
        // With the slots full again, the next one closes the half-sent
        // request, now the oldest.
        let idle = connect(web);
        std::thread::sleep(Duration::from_millis(50));
        assert_eq!(get(web, "/healthz", ""), 200);
        std::thread::sleep(Duration::from_millis(50));
        assert!(closed_by_server(&half));
        assert!(!closed_by_server(&idle));
        let s = srv.stats().http;
        assert_eq!(
            (
                s.idle_evictions,
                s.connections_refused,
                s.connections_accepted
            ),
            (2, 0, 5)
        );
    });
}

/// The attack of `e_http_slots.py`, from many /24s: 8 sources try to hold
/// 10 half-sent requests each (more than the 64 slots, so the table stays
/// full even while the header timeout closes some), reopened as soon as
/// they are closed. Each source spreads its requests over two addresses of
/// its /24, so the per-address limit (8) does not cap it at 64 in all and
/// the attackers themselves keep evicting each other. The admin, with its
/// token, still gets every answer.
#[test]
fn admin_gets_through_while_half_sent_requests_hold_every_slot() {
    let http_cfg = HttpConfig {
        header_timeout_ms: 500,
        ..HttpConfig::default()
    };
    with_server("conn_attack", Some(TOKEN), http_cfg, |srv, web| {
        let stop = AtomicBool::new(false);
        let opened = AtomicU64::new(0);
        let answers = std::thread::scope(|scope| {
            for i in 0..8u8 {
                let (stop, opened) = (&stop, &opened);
                scope.spawn(move || {
                    let mut held: Vec<TcpStream> = Vec::new();
                    let mut host = 0u8;
                    while !stop.load(Relaxed) {
                        held.retain(|c| !closed_by_server(c));
                        while held.len() < 10 {
                            host = host % 2 + 1;
                            let from = Ipv4Addr::new(127, 30 + i, 0, host);
                            let Ok(mut c) = try_connect_from(from, web) else {
                                break;
                            };
                            if c.write_all(b"GET /healthz HTTP/1.1\r\nHost: x\r\n")
                                .is_err()
                            {
                                break;
                            }
                            held.push(c);
                            opened.fetch_add(1, Relaxed);
                        }
                        std::thread::sleep(Duration::from_millis(20));
                    }
                });
            }
            std::thread::sleep(Duration::from_millis(500));
            let answers: Vec<u16> = (0..20)
                .map(|_| {
                    std::thread::sleep(Duration::from_millis(100));
                    get(web, "/api/stats", &bearer(TOKEN))
                })
                .collect();
            stop.store(true, Relaxed);
            answers
        });
        assert!(answers.iter().all(|&c| c == 200), "{answers:?}");
        let s = srv.stats().http;
        assert!(opened.load(Relaxed) > 64, "{}", opened.load(Relaxed));
        assert!(s.idle_evictions > 0, "{s:?}");
    });
}

#[test]
fn one_prefix_cannot_take_every_connection() {
    let http_cfg = HttpConfig {
        max_connections_per_prefix: 3,
        header_timeout_ms: 10_000,
        ..HttpConfig::default()
    };
    with_server("conn_per_prefix", None, http_cfg, |srv, web| {
        // Three addresses of 127.0.40.0/24 fill their prefix's share.
        let held: Vec<TcpStream> = (1..=3)
            .map(|h| connect_from(Ipv4Addr::new(127, 0, 40, h), web))
            .collect();
        std::thread::sleep(Duration::from_millis(100));
        assert_eq!(healthz_from(Ipv4Addr::new(127, 0, 40, 4), web), 503);
        assert_eq!(healthz_from(Ipv4Addr::new(127, 0, 41, 1), web), 200);
        let s = srv.stats().http;
        assert_eq!(
            (
                s.connections_refused_per_prefix,
                s.connections_refused_per_ip
            ),
            (1, 0)
        );
        drop(held);
        std::thread::sleep(Duration::from_millis(100));
        assert_eq!(healthz_from(Ipv4Addr::new(127, 0, 40, 4), web), 200);
    });
}

#[test]
fn requests_without_the_token_are_limited_per_prefix() {
    let http_cfg = HttpConfig {
        per_ip_rps: 1,
        per_ip_burst: 3,
        ..HttpConfig::default()
    };
    with_server("per_prefix", Some(TOKEN), http_cfg, |srv, web| {
        // Addresses of one /24 share one budget.
        let codes: Vec<u16> = (1..=5)
            .map(|h| healthz_from(Ipv4Addr::new(127, 0, 42, h), web))
            .collect();
        assert_eq!(codes, vec![200, 200, 200, 429, 429]);
        // Another /24 has its own.
        assert_eq!(healthz_from(Ipv4Addr::new(127, 0, 43, 1), web), 200);
        assert_eq!(srv.stats().http.rate_limited, 2);
    });
}

/// `g_http_odd.py`: without the token, every admin request gets 401 before
/// its body, path parameters or method are looked at, and a path that is no
/// route gets the same answer as one that is.
#[test]
fn admin_routes_check_the_token_before_anything_else() {
    let put = |web, path: &str, auth: &str, body: &str| {
        http(
            web,
            &format!(
                "PUT {path} HTTP/1.1\r\nHost: x\r\n{auth}Content-Type: application/json\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
                body.len()
            ),
        )
        .0
    };
    let probes = [
        ("/api/devices/bob/1/group", r#"{"a":"#),
        ("/api/devices/bob/300/group", r#"{"group_id":1}"#),
        ("/api/devices/bob/1/group", r#"{"group_id":1}"#),
        ("/api/devices/bob/1/comm-control", "[[["),
        ("/api/stats", ""),
        ("/api/no-such-route", ""),
        ("/api", ""),
    ];
    with_server(
        "admin_first",
        Some(TOKEN),
        HttpConfig::default(),
        |srv, web| {
            for auth in [String::new(), bearer("wrong-token-0000000")] {
                for (path, body) in probes {
                    assert_eq!(put(web, path, &auth, body), 401, "{path} {body} {auth:?}");
                }
                assert_eq!(get(web, "/api/devices/bob/1/group", &auth), 401);
            }
            assert_eq!(srv.stats().http.unauthorized, 16);
            // With the token, the same requests reach the routes.
            let admin = bearer(TOKEN);
            assert_eq!(put(web, probes[0].0, &admin, probes[0].1), 422);
            assert_eq!(put(web, probes[1].0, &admin, probes[1].1), 400);
            assert_eq!(put(web, "/api/no-such-route", &admin, ""), 404);
            assert_eq!(get(web, "/api/devices/bob/1/group", &admin), 405);
        },
    );
    with_server(
        "admin_first_off",
        None,
        HttpConfig::default(),
        |srv, web| {
            for (path, body) in probes {
                assert_eq!(put(web, path, "", body), 404, "{path}");
            }
            assert_eq!(srv.stats().http.unauthorized, 0);
        },
    );
}

/// `g_http_odd.py`: a `group_id` that is not a talkgroup is refused with a
/// JSON error naming it, and the device keeps its group.
#[test]
fn a_device_cannot_join_a_group_that_does_not_exist() {
    let users = [account("bob", "BA1BBB".into(), 4_600_002, "Secret12")];
    let config = |db: &str| ServerConfig {
        http_listen: Some("127.0.0.1:0".parse().unwrap()),
        admin_token: Some(TOKEN.into()),
        ..support::udp_config(db)
    };
    support::with_sqlite_server("group_exists", users, config, |srv| {
        let web = srv.http_addr().unwrap();
        let put = |user: &str, group: &str| {
            let body = format!("{{\"group_id\":{group}}}");
            http(
                web,
                &format!(
                    "PUT /api/devices/{user}/77/group HTTP/1.1\r\nHost: x\r\n{}Content-Type: application/json\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
                    bearer(TOKEN),
                    body.len()
                ),
            )
        };
        let (code, answer) = put("bob", "9223372036854775807");
        assert_eq!(code, 404, "{answer}");
        assert!(answer.contains("application/json"), "{answer}");
        assert!(
            answer.ends_with(r#"{"error":"group 9223372036854775807 not found"}"#),
            "{answer}"
        );
        let (code, answer) = put("nobody", "999");
        assert_eq!(code, 404);
        assert!(
            answer.ends_with(r#"{"error":"user nobody not found"}"#),
            "{answer}"
        );
        // The public group (999, in every fresh store) and "ungrouped" (0).
        assert_eq!(put("bob", "999").0, 204);
        assert_eq!(put("bob", "0").0, 204);
    });
}

#[test]
fn requests_without_the_token_are_limited_per_ip() {
    let http_cfg = HttpConfig {
        per_ip_rps: 1,
        per_ip_burst: 3,
        ..HttpConfig::default()
    };
    with_server("per_ip", Some(TOKEN), http_cfg, |srv, web| {
        let codes: Vec<u16> = (0..5).map(|_| get(web, "/healthz", "")).collect();
        assert_eq!(codes, vec![200, 200, 200, 429, 429]);
        // Wrong tokens spend the same budget (no brute force around it).
        assert_eq!(get(web, "/api/stats", &bearer("wrong-token-0000000")), 429);
        // The admin is not limited.
        for _ in 0..5 {
            assert_eq!(get(web, "/api/stats", &bearer(TOKEN)), 200);
        }
        assert_eq!(srv.stats().http.rate_limited, 3);
        let (code, body) = http(
            web,
            &format!(
                "GET /metrics HTTP/1.1\r\nHost: x\r\n{}Connection: close\r\n\r\n",
                bearer(TOKEN)
            ),
        );
        assert_eq!(code, 200);
        assert!(
            body.contains("\npetrel_reflector_http_rate_limited_total 3\n"),
            "{body}"
        );
        assert!(body.contains("# TYPE petrel_reflector_history_text_bytes gauge\n"));
        assert!(body.contains("# TYPE petrel_reflector_history_recordings_pruned_total counter\n"));
        assert!(body.contains("petrel_reflector_fanout_text_frames_dropped_total 0\n"));
    });
}

#[test]
fn one_source_cannot_take_every_connection() {
    let http_cfg = HttpConfig {
        max_connections_per_ip: 2,
        header_timeout_ms: 10_000,
        ..HttpConfig::default()
    };
    with_server("conn_per_ip", None, http_cfg, |srv, web| {
        let held = [connect(web), connect(web)];
        std::thread::sleep(Duration::from_millis(100));
        assert_eq!(get(web, "/healthz", ""), 503);
        // Another source still gets in.
        let other =
            socket2::Socket::new(socket2::Domain::IPV4, socket2::Type::STREAM, None).unwrap();
        other
            .bind(&SocketAddr::from(([127, 0, 0, 2], 0)).into())
            .unwrap();
        other.connect(&web.into()).unwrap();
        let mut other = TcpStream::from(other);
        other
            .set_read_timeout(Some(Duration::from_secs(5)))
            .unwrap();
        other
            .write_all(b"GET /healthz HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
            .unwrap();
        assert_eq!(read_answer(&mut other).0, 200);
        let s = srv.stats().http;
        assert_eq!(
            (s.connections_refused_per_ip, s.connections_refused),
            (1, 0)
        );
        drop(held);
        std::thread::sleep(Duration::from_millis(100));
        assert_eq!(get(web, "/healthz", ""), 200);
    });
}
